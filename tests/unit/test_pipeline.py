"""release.building.pipeline's pure parts around a compile the wrapper stopped: the record read
back into the cell's failure, the remedy the matrix can or cannot say, and the cause the
inspection's message gains where a build log shows the project's own arch flags."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

from release.backends.archflags import ArchRequest, Stop, cell_request
from release.backends.compiled import held_to_compiles, pieces
from release.building.archstop import arch_failure, logged_cause, remedy_problem
from release.building.pipeline import build_command, write_files
from release.matrix import Cell, load_matrix
from release.targets import GpuTarget as T

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "torch_gencode"
ELF_DEVICE = Path(__file__).resolve().parents[1] / "data" / "elf-device"
OWN = "-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=[sm_90,compute_90]"


def torch_cell(tmp_path: Path, backend: str = "torch", project: Path = FIXTURE) -> Cell:
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        f"project: {project}\nbuild: {{backend: {backend}}}\n"
        "defaults: {arches: [x86_64], sms: [75, 80, 90, 100], ptx: 100, manylinux: '2_34'}\n"
        "cuda:\n  '13.0': {destination: pypi, torch: '2.14.1', abi3: '3.10'}\n"
        "destinations: {pypi: {kind: pypi}}\n",
        encoding="utf-8",
    )
    (cell,) = load_matrix(matrix).cells
    return cell


def stop(asked: ArchRequest) -> Stop:
    return Stop(
        source="csrc/scale.cu",
        flags=tuple(OWN.split()),
        asked=asked,
        cell=cell_request([T(75), T(80), T(90), T(100)], T(100)),
    )


def test_a_recorded_stop_is_the_cells_failure_with_the_torch_cause(tmp_path: Path) -> None:
    cell = torch_cell(tmp_path)
    record = tmp_path / "arch-stop.json"
    asked = cell_request([T(80), T(90)], T(90))
    record.write_text(stop(asked).to_json(), encoding="utf-8")
    failure = arch_failure(record, cell)
    assert failure is not None
    assert "torch's cpp_extension ignores TORCH_CUDA_ARCH_LIST" in failure.error
    assert "sms: [80, 90] and ptx: 90" in failure.error
    assert "targets-env" not in failure.error  # its flags follow no variable
    archs = FIXTURE.parent / "torch_archs_env"  # its flags follow K3_CUDA_ARCHS
    lines = (archs / "setup.py").read_text().splitlines()
    read = next(n for n, text in enumerate(lines, start=1) if 'getenv("K3_CUDA_ARCHS"' in text)
    archs_env = arch_failure(record, torch_cell(tmp_path, project=archs))
    assert archs_env is not None  # a third way out
    assert archs_env.error.splitlines()[-1] == (
        f"  or hand the cell's sms to K3_CUDA_ARCHS (setup.py:{read}), which the project's "
        "flags follow: build.targets-env: {K3_CUDA_ARCHS: sms} in matrix.yaml"
    )
    # SageAttention's shape: flags made from the TORCH_CUDA_ARCH_LIST it reads itself
    mapped = tmp_path / "mapped"
    mapped.mkdir()
    (mapped / "setup.py").write_text(
        "import os\n"
        'archs = os.getenv("TORCH_CUDA_ARCH_LIST", "").split(";")\n'
        'flags = [f"-gencode=arch=compute_{a}a,code=sm_{a}a" for a in archs]\n',
        encoding="utf-8",
    )
    (mapped / "pyproject.toml").write_text('[project]\nname = "m"\nversion = "1"\n')
    own_mapping = arch_failure(record, torch_cell(tmp_path, project=mapped))
    assert own_mapping is not None
    assert own_mapping.error.splitlines()[-1].startswith(
        "  (setup.py:3 makes its flags from the cell's TORCH_CUDA_ARCH_LIST itself, through a "
        "mapping of its own"
    )
    record.write_text("{}", encoding="utf-8")  # not a record: the build's own failure stands
    assert arch_failure(record, cell) is None


def test_the_remedy_is_refused_where_the_matrix_cannot_say_it(tmp_path: Path) -> None:
    cell = torch_cell(tmp_path)
    assert remedy_problem(stop(cell_request([T(80), T(90)], T(90))), cell) is None
    # torch can add PTX only to an SM it builds a cubin for
    no_cubin = remedy_problem(stop(cell_request([T(80)], T(90))), cell)
    assert no_cubin is not None
    assert "TORCH_CUDA_ARCH_LIST can only add PTX" in no_cubin
    # CUDA 13 dropped sm_70
    dropped = remedy_problem(stop(cell_request([T(70), T(80)], None)), cell)
    assert dropped is not None
    assert "dropped sm_70" in dropped
    two = ArchRequest(cubins=frozenset([T(80)]), ptx=frozenset([T(80), T(90)]))
    assert "one PTX target" in (remedy_problem(stop(two), cell) or "")


def test_the_inspections_message_gains_the_cause_from_the_build_log(tmp_path: Path) -> None:
    cell = torch_cell(tmp_path)
    log = tmp_path / "cell.log"
    log.write_text(
        f"[1/3] /t/cuda-home/bin/nvcc -c {FIXTURE}/csrc/scale.cu -o scale.o {OWN} -O3\n",
        encoding="utf-8",
    )
    cause = logged_cause(log, cell)
    assert cause is not None
    assert cause.startswith("the build log shows the project's own arch flags")
    assert "torch's cpp_extension ignores TORCH_CUDA_ARCH_LIST" in cause
    assert "(sms: [80, 90] and ptx: 90)" in cause
    log.write_text("[1/3] /t/cuda-home/bin/nvcc -c /p/a.cu -o a.o -gencode=arch=compute_75,"
                   "code=sm_75\n", encoding="utf-8")  # fmt: skip
    assert logged_cause(log, cell) is not None  # still other targets than the cell's
    log.write_text("c++ -c a.cpp\n", encoding="utf-8")
    assert logged_cause(log, cell) is None


def test_every_member_of_the_wheel_is_held_to_the_records(tmp_path: Path) -> None:
    # F17: a prebuilt fatbin shipped as package data beside a shared object built here
    wheel, records = tmp_path / "pkg-1.0-py3-none-linux_x86_64.whl", tmp_path / "records"
    records.mkdir()
    for piece in pieces((ELF_DEVICE / "x86_64-nv_fatbin.so").read_bytes()) or ():
        (records / piece.digest).touch()
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("pkg/__init__.py", "")
        archive.write(ELF_DEVICE / "x86_64-nv_fatbin.so", "pkg/_C.so")
        archive.writestr("pkg/data/", "")
        archive.write(ELF_DEVICE / "prebuilt.fatbin", "pkg/data/kernels.fatbin")
    problem = held_to_compiles(wheel, records)
    assert problem is not None
    # the file is one fatbin (tests/data/elf-device/README): its sha256 names it
    digest = hashlib.sha256((ELF_DEVICE / "prebuilt.fatbin").read_bytes()).hexdigest()
    assert problem.startswith(
        "the wheel holds device code that no compile of this build wrote: "
        f"pkg/data/kernels.fatbin (1 of 1 fatbins: fatbin file {digest[:12]}, no compile "
        "here made it)"
    ), problem
    assert "pkg/_C.so" not in problem
    # the same fatbin, written by a compile of this build
    (piece,) = pieces((ELF_DEVICE / "prebuilt.fatbin").read_bytes()) or ()
    (records / piece.digest).touch()
    assert held_to_compiles(wheel, records) is None


def test_a_backends_script_is_written_executable_its_other_files_not(tmp_path: Path) -> None:
    script, config = tmp_path / "b" / "nvcc-wrapper" / "nvcc", tmp_path / "b" / "setup.cfg"
    write_files({script: "#!/bin/sh\nexec true\n", config: "[build]\n"})
    assert script.stat().st_mode & 0o111 == 0o111
    assert config.stat().st_mode & 0o111 == 0
    assert config.read_text(encoding="utf-8") == "[build]\n"


def test_an_isolated_build_with_the_matrixs_requirements_goes_through_the_frontend() -> None:
    """`python -m build` cannot add requirements to its isolated environment;
    release.toolchain.frontend (pypa/build's library API) can. A torch cell's build runs
    in its environment, which holds them already."""
    plain = build_command("/py", Path("/src"), Path("/out"))
    assert plain == ["/py", "-m", "build", "--wheel", "--outdir", "/out", "/src"]
    extra = build_command("/py", Path("/src"), Path("/out"), requires=("tvm-ffi==0.1.9", "ninja"))
    assert extra == [
        "/py", "-m", "release.toolchain.frontend", "--requires", "tvm-ffi==0.1.9",
        "--requires", "ninja", "--outdir", "/out", "/src",
    ]  # fmt: skip
    in_environment = build_command(
        "/venv/python", Path("/src"), Path("/out"), isolated=False, requires=("ninja",)
    )
    assert in_environment[:5] == ["/venv/python", "-m", "build", "--wheel", "--no-isolation"]
