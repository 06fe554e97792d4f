"""The torch a libtorch stable-ABI cell builds against and the requirement its wheel gets,
read from a stand-in torch index on 127.0.0.1 shaped like PyPI (tests/integration/torchindex:
PyPI's own METADATA of torch 2.10.0, built for CUDA 12.8, and 2.11.0, the first on CUDA 13):

- the index's releases with the CUDA each is built for, from PEP 658 metadata files where the
  index announces them, from range requests into the wheel where it does not (never the
  whole wheel), from the local label on a PyTorch-shaped index;
- the default build torch of a CUDA 13 cell with TORCH_TARGET_VERSION 2.10: 2.11.0, and the
  requirement `torch>=2.11`; a build against 2.14.1 refused unless matrix.yaml says
  `torch-build: newer`, by the build (before anything is provisioned) and said by its dry run;
- `release init` pinning that torch, saying why;
- the refusal of a wheel whose own requirement admits torch 2.10.0;
- `release gpu-gate --dry-run`: a stable-ABI wheel beside the oldest and the newest torch it
  admits, a regular one beside its own.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from release.building.settings import CellFailure
from release.building.torchcell import index_torches, other_cuda_problems, stable_pin
from release.errors import ToolchainError
from release.inspection.torchcuda import IndexTorches, TorchIndex
from release.matrix import Cell, load_matrix
from release.records.manifest import Manifest, WheelEntry, write_manifest
from release.remote import httpclient as http
from tests.integration.torchindex import CUDA13, StandInIndex, pypi_like, serving

RELEASE = Path(sys.executable).with_name("release")
# a real shared object that NEEDs libc10.so and libnvrtc.so.13 (tests/data/elf/README)
ELF = Path(__file__).resolve().parents[1] / "data" / "elf" / "x86_64-needs-runtime-libs.so"
AT_LEAST = SpecifierSet(">=2.10")

STABLE_SETUP = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

TARGET = "-DTORCH_TARGET_VERSION=0x020a000000000000"
setup(
    name="stable-ops",
    version="0.2.0",
    ext_modules=[
        CUDAExtension(
            "stable_ops._C",
            ["csrc/ops.cpp", "csrc/ops.cu"],
            extra_compile_args={"cxx": ["-O3", TARGET], "nvcc": ["-O3", TARGET]},
            py_limited_api=True,
        )
    ],
    cmdclass={"build_ext": BuildExtension},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
"""
PYPROJECT = """\
[build-system]
requires = ["setuptools>=77", "torch>=2.10"]
build-backend = "setuptools.build_meta"
"""
MATRIX = """\
project: .
build: {{backend: torch}}
defaults: {{arches: [x86_64], sms: [90], manylinux: "2_34"}}
cuda:
  "13.0":
    destination: pypi
    torch: "{torch}"
    abi3: "3.10"
    torch-index: {index}
{extra}destinations:
  pypi: {{kind: pypi}}
gpu-gate:
  runners: [{{labels: [h100], sms: [90]}}]
  command: python -m pytest tests
"""


@pytest.fixture(scope="module")
def pypi() -> Iterator[StandInIndex]:
    with serving(pypi_like()) as index:
        yield index


def stable_project(where: Path, index: str, torch: str, extra: str = "") -> Path:
    where.mkdir(parents=True)
    (where / "setup.py").write_text(STABLE_SETUP)
    (where / "pyproject.toml").write_text(PYPROJECT)
    (where / "matrix.yaml").write_text(MATRIX.format(torch=torch, index=index, extra=extra))
    return where


def cell_of(project: Path) -> Cell:
    (cell,) = load_matrix(project / "matrix.yaml").cells
    return cell


def release(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELEASE_", "PIP_"))}
    env["RELEASE_CACHE_DIR"] = str(cwd / "cache")
    return subprocess.run(
        [str(RELEASE), *args], capture_output=True, text=True, check=False, cwd=cwd, env=env,
        timeout=120,
    )  # fmt: skip


# - reading the index


def releases_of(
    index_url: str, arch: str, asked: SpecifierSet, python: str | None = None
) -> IndexTorches:
    """What a fresh reader of `index_url` says (each test asks its own index anew)."""
    return TorchIndex(index_url).releases(arch, asked, python=python)


def test_each_release_is_read_with_its_cuda_from_pep_658_metadata(pypi: StandInIndex) -> None:
    pypi.requests.clear()
    torches = releases_of(pypi.url, "x86_64", AT_LEAST, "3.11")
    assert [(str(b.version), str(b.built_for)) for b in torches.builds] == [
        ("2.10.0", "CUDA 12.8"),
        ("2.11.0", "CUDA 13.0"),
        ("2.12.0", "CUDA 13.0"),
        ("2.14.1", "CUDA 13.0"),
    ]
    assert torches.builds[0].built_for.evidence == "nvidia-cuda-runtime-cu12==12.8.90"
    assert torches.builds[0].pythons[:2] == ("3.10", "3.11")
    assert pypi.requests[0] == ("/simple/torch/", None)
    metadata = [path for path, _ in pypi.requests[1:]]
    assert metadata == [
        f"/files/torch-{v}-cp311-cp311-manylinux_2_28_x86_64.whl.metadata"
        for v in ("2.10.0", "2.11.0", "2.12.0", "2.14.1")
    ]


@pytest.mark.parametrize("json_page", [True, False], ids=["pep691", "pep503"])
def test_without_announced_metadata_the_wheel_is_read_by_ranges_never_whole(
    json_page: bool,
) -> None:
    with serving(pypi_like(announce_metadata=False)) as index:
        index.json_page = json_page
        torches = releases_of(index.url, "x86_64", SpecifierSet(">=2.10,<2.12"))
    assert [(str(b.version), b.built_for.major) for b in torches.builds] == [
        ("2.10.0", 12),
        ("2.11.0", 13),
    ]
    wheel_requests = [(p, r) for p, r in index.requests if p.endswith(".whl")]
    assert wheel_requests, "the wheels were read"
    assert all(r is not None for _, r in wheel_requests), "a wheel was asked for whole"
    assert not any(p.endswith(".metadata") for p, _ in index.requests)
    # two releases read, less than one wheel's bytes served
    assert index.served_wheel_bytes < len(next(iter(index.wheels.values())))


def test_a_server_that_ignores_ranges_is_said_as_such_after_one_request() -> None:
    index = pypi_like(announce_metadata=False)
    index.ignores_ranges = True
    with serving(index) as served, pytest.raises(ToolchainError) as raised:
        releases_of(served.url, "x86_64", SpecifierSet("==2.11.0"), "3.11")
    assert raised.value.message == (
        "cannot read the METADATA of torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl on its "
        "index: the index announces no PEP 658 metadata file for it, and its server answers a "
        "range request with HTTP 200"
    )
    assert [r for p, r in index.requests if p.endswith(".whl")] == ["bytes=0-0"]
    # what the probe got: the 200's headers, its body (the whole wheel) left unread
    wheel = "/files/torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    with serving(index) as served, http.client() as client:
        probe = http.fetch(client, served.url.removesuffix("/simple/") + wheel, keep=True,
                           byte_range=(0, 0))  # fmt: skip
    assert (probe.status, probe.body, probe.size) == (200, None, 0)


def test_a_pytorch_shaped_index_says_the_cuda_in_its_labels() -> None:
    cu129 = StandInIndex(announce_metadata=False)
    for version in ("2.9.1+cu129", "2.10.0+cu129", "2.11.0+cu129"):
        cu129.add(version, CUDA13)  # the label decides, whatever the METADATA says
    with serving(cu129) as index:
        torches = releases_of(index.url, "x86_64", AT_LEAST)
    assert [(str(b.version), b.built_for.version) for b in torches.builds] == [
        ("2.10.0", "12.9"),
        ("2.11.0", "12.9"),
    ]
    assert torches.builds[0].built_for.evidence == "its label +cu129"
    assert [p for p, _ in index.requests] == ["/simple/torch/"]


def test_an_index_without_torch_is_a_toolchain_error_naming_it(tmp_path: Path) -> None:
    with serving(StandInIndex()) as index:
        project = stable_project(tmp_path / "p", index.url, "2.11.0")
        done = release(tmp_path, "build", "--matrix", str(project / "matrix.yaml"), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert (
        "the torch a stable-ABI build must use is not known: cannot read the torch releases "
        f"of {index.url} (it has no torch)" in done.stderr
    )


# - the default build torch and the requirement


def test_a_cuda_13_wheel_with_target_2_10_requires_torch_2_11(
    pypi: StandInIndex, tmp_path: Path
) -> None:
    cell = cell_of(stable_project(tmp_path / "p", pypi.url, "2.11.0"))
    torches = index_torches(cell, Version("2.10"))
    requirement = stable_pin(cell, Version("2.11.0"), Version("2.10"), torches)
    assert str(requirement) == "torch>=2.11"


def test_a_build_against_a_newer_torch_fails_unless_matrix_yaml_says_so(
    pypi: StandInIndex, tmp_path: Path
) -> None:
    cell = cell_of(stable_project(tmp_path / "default", pypi.url, "2.14.1"))
    torches = index_torches(cell, Version("2.10"))
    with pytest.raises(CellFailure) as refused:
        stable_pin(cell, Version("2.14.1"), Version("2.10"), torches)
    assert str(refused.value).startswith(
        "a stable-ABI build against torch 2.14.1, newer than the oldest torch it admits, torch "
        f"2.11.0: the oldest torch >= 2.10 (TORCH_TARGET_VERSION) built for CUDA 13 on "
        f"{pypi.url} (torch 2.10.0, built for CUDA 12.8)"
    )
    on_purpose = cell_of(
        stable_project(tmp_path / "newer", pypi.url, "2.14.1", "    torch-build: newer\n")
    )
    assert on_purpose.newer_torch
    assert str(stable_pin(on_purpose, Version("2.14.1"), Version("2.10"), torches)) == (
        "torch>=2.11"
    )


def test_the_dry_run_says_which_torch_and_why_and_the_build_refuses_before_provisioning(
    pypi: StandInIndex, tmp_path: Path
) -> None:
    project = stable_project(tmp_path / "p", pypi.url, "2.14.1")
    matrix = str(project / "matrix.yaml")
    done = release(tmp_path, "build", "--matrix", matrix, "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    (cell,) = json.loads(done.stdout)["cells"]
    oldest = (
        "torch 2.11.0: the oldest torch >= 2.10 (TORCH_TARGET_VERSION) built for CUDA 13 on "
        f"{pypi.url} (torch 2.10.0, built for CUDA 12.8)"
    )
    assert cell["stable_torch"] == oldest
    (warning,) = cell["warnings"]
    assert warning.startswith(
        "13.0-x86_64-torch2.14.1: the build will fail: a stable-ABI build against torch 2.14.1"
    )

    built = release(tmp_path, "build", "--matrix", matrix)
    assert built.returncode == 2, built.stderr
    assert built.stderr.startswith(
        "error: 13.0-x86_64-torch2.14.1: a stable-ABI build against torch 2.14.1, newer than"
    )
    assert not (tmp_path / "cache").exists(), "the build provisioned before refusing"

    (project / "matrix.yaml").write_text(
        MATRIX.format(torch="2.14.1", index=pypi.url, extra="    torch-build: newer\n")
    )
    done = release(tmp_path, "build", "--matrix", matrix, "--dry-run", "--json")
    (cell,) = json.loads(done.stdout)["cells"]
    on_purpose = f"torch 2.14.1, newer on purpose (torch-build: newer) than {oldest}"
    assert cell["stable_torch"] == on_purpose
    assert "warnings" not in cell


def test_init_pins_the_oldest_torch_a_stable_abi_wheel_admits(
    pypi: StandInIndex, tmp_path: Path
) -> None:
    project = stable_project(tmp_path / "p", pypi.url, "unused")
    (project / "matrix.yaml").unlink()
    done = release(tmp_path, "init", str(project), "--json", "--torch-index", pypi.url)
    assert done.returncode == 0, done.stderr
    found = {f["key"]: (f["value"], f["source"]) for f in json.loads(done.stdout)["detected"]}
    assert found["torch"] == (
        "2.11.0",
        "the oldest torch >= 2.10 (TORCH_TARGET_VERSION) built for CUDA 13 on "
        f"{pypi.url} (torch 2.10.0, built for CUDA 12.8)",
    )
    assert '    torch: "2.11.0"\n' in (project / "matrix.yaml").read_text()


# - the refusal


def test_a_wheel_whose_requirement_admits_torch_2_10_is_refused(
    pypi: StandInIndex, tmp_path: Path
) -> None:
    """The inspection's `torch` rule (release.inspection.cudalibs), as the build applies it
    to a stable-ABI wheel against its cell's index."""
    cell = cell_of(stable_project(tmp_path / "p", pypi.url, "2.11.0"))
    torches = index_torches(cell, Version("2.10"))
    library = ELF.read_bytes()
    problems = other_cuda_problems(wheel_bytes("torch>=2.10", library), cell, torches)
    assert problems == [
        f"requires torch>=2.10, which admits torch 2.10.0 (CUDA 12) on {pypi.url}; "
        "stable_ops/_C.abi3.so needs libnvrtc.so.13"
    ]
    fine = wheel_bytes("torch>=2.11", library)
    assert other_cuda_problems(fine, cell, torches) == []


# - the GPU gate's plan


def wheel_bytes(
    requires: str | tuple[str, ...],
    library: bytes = b"",
    tag: str = "cp310-abi3-manylinux_2_34_x86_64",
) -> bytes:
    dist_info = "stable_ops-0.2.0.dist-info"
    lines = "".join(
        f"Requires-Dist: {line}\n"
        for line in ((requires,) if isinstance(requires, str) else requires)
    )
    files = {
        "stable_ops/_C.abi3.so": library,
        f"{dist_info}/METADATA": (
            f"Metadata-Version: 2.4\nName: stable-ops\nVersion: 0.2.0\n{lines}"
        ).encode(),
        f"{dist_info}/WHEEL": (
            f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: false\nTag: {tag}\n"
        ).encode(),
    }
    record = "".join(f"{name},,\n" for name in (*files, f"{dist_info}/RECORD"))
    files[f"{dist_info}/RECORD"] = record.encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def dist_of(project: Path, requires: str | tuple[str, ...]) -> Path:
    cell = cell_of(project)
    dist = project / "dist"
    dist.mkdir()
    # the WHEEL file's tag is the filename's (a cell for python: ["3.10"] is cp310-cp310)
    data = wheel_bytes(requires, tag=cell.wheel_filename.removesuffix(".whl").split("-", 2)[2])
    (dist / cell.wheel_filename).write_bytes(data)
    entry = WheelEntry.of(
        cell, filename=cell.wheel_filename, size=len(data),
        sha256=hashlib.sha256(data).hexdigest(), sms=("90",), ptx=None, toolchain={},
    )  # fmt: skip
    write_manifest(Manifest(project="stable-ops", version="0.2.0", wheels=(entry,)),
                   dist / "manifest.json")  # fmt: skip
    return dist


def gate_plan(tmp_path: Path, project: Path, dist: Path) -> dict[str, Any]:
    done = release(
        tmp_path, "gpu-gate", "--matrix", str(project / "matrix.yaml"), "--runner", "h100",
        "--dist", str(dist), "--dry-run", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    plan: dict[str, Any] = json.loads(done.stdout)
    print(done.stderr)
    return plan


def test_the_gate_runs_a_stable_abi_wheel_beside_its_oldest_and_newest_torch(
    pypi: StandInIndex, tmp_path: Path
) -> None:
    project = stable_project(tmp_path / "p", pypi.url, "2.11.0")
    plan = gate_plan(tmp_path, project, dist_of(project, "torch>=2.11"))
    assert [(r["name"], r["torch"], r["torch_why"]) for r in plan["runs"]] == [
        (
            f"13.0-x86_64-torch2.11.0 {build} beside torch {torch}",
            torch,
            f"the {which} torch the wheel's torch>=2.11 admits on {pypi.url}, built for CUDA 13.0",
        )
        for build in ("cubin", "ptx (compute_90)")
        for torch, which in (("2.11.0", "oldest"), ("2.14.1", "newest"))
    ]
    assert not (tmp_path / "cache").exists()


def test_the_gate_runs_a_regular_wheel_beside_its_pinned_torch(
    pypi: StandInIndex, tmp_path: Path
) -> None:
    project = stable_project(tmp_path / "p", pypi.url, "2.14.1")
    plan = gate_plan(tmp_path, project, dist_of(project, "torch==2.14.*"))
    assert [(r["name"], r["torch_why"]) for r in plan["runs"]] == [
        (
            f"13.0-x86_64-torch2.14.1 {build} beside torch 2.14.1",
            "built against it; the wheel requires torch==2.14.*",
        )
        for build in ("cubin", "ptx (compute_90)")
    ]


def test_the_gate_runs_a_wheel_beside_what_all_its_torch_lines_admit_together(
    pypi: StandInIndex, tmp_path: Path
) -> None:
    """pip holds a wheel to every `Requires-Dist: torch` line at once: with `torch<2.13`
    beside `torch>=2.11` it was planned beside 2.14.1 (only the first line was read)."""
    project = stable_project(tmp_path / "p", pypi.url, "2.11.0")
    plan = gate_plan(tmp_path, project, dist_of(project, ("torch>=2.11", "torch<2.13")))
    assert {(r["torch"], r["torch_why"]) for r in plan["runs"]} == {
        (
            torch,
            f"the {which} torch the wheel's torch<2.13,>=2.11 admits on {pypi.url}, built for "
            "CUDA 13.0",
        )
        for torch, which in (("2.11.0", "oldest"), ("2.12.0", "newest"))
    }


def test_the_gate_reads_the_wheels_markers_for_the_cells_python(
    pypi: StandInIndex, tmp_path: Path
) -> None:
    """A cell for Python 3.10: its wheel's `python_version < "3.11"` line is the one pip
    applies there, whatever Python release runs (it was read for the tool's own)."""
    project = stable_project(tmp_path / "p", pypi.url, "2.11.0")
    matrix = project / "matrix.yaml"
    matrix.write_text(matrix.read_text().replace('abi3: "3.10"', 'python: ["3.10"]'))
    requires = ('torch==2.11.*; python_version < "3.11"', 'torch>=2.12; python_version >= "3.11"')
    plan = gate_plan(tmp_path, project, dist_of(project, requires))
    assert {r["torch"] for r in plan["runs"]} == {"2.11.0"}


@pytest.mark.parametrize(
    ("requires", "problem"),
    [
        (("torch>=2.11,<2.11",), "requires torch<2.11,>=2.11, which does not admit torch 2.11.0"),
        (("torch==2.11.*,!=2.11.0",), "requires torch!=2.11.0,==2.11.*, which does not admit"),
        (("torch===2.11",), "requires torch===2.11, which does not admit torch 2.11.0"),
        (("numpy",), "requires no torch on Linux x86_64"),
        (('torch>=2.11; sys_platform == "win32"',), "requires no torch on Linux x86_64"),
        (("torch>=2.11+cu130",), "METADATA's Requires-Dist 'torch>=2.11+cu130' is not PEP 508"),
        (("torch @ https://h/torch.whl",), "'torch @ https://h/torch.whl' names torch by a URL"),
    ],
)
def test_the_gate_plans_no_torch_that_the_wheel_does_not_admit(
    pypi: StandInIndex, tmp_path: Path, requires: tuple[str, ...], problem: str
) -> None:
    """Each was planned beside 2.11.0 (or 2.14.1), exit 0, though the wheel's requirement
    admits neither, or there is none (said as `the wheel requires torch==2.11.*`)."""
    project = stable_project(tmp_path / "p", pypi.url, "2.11.0")
    done = release(
        tmp_path, "gpu-gate", "--matrix", str(project / "matrix.yaml"), "--runner", "h100",
        "--dist", str(dist_of(project, requires)), "--dry-run", "--json",
    )  # fmt: skip
    assert done.returncode == 4, done.stderr
    runs = json.loads(done.stdout)["runs"]
    assert all(problem in r["problem"] and r.get("torch") is None for r in runs), runs
    assert "Traceback" not in done.stderr


def test_the_gate_s_plan_fails_where_the_dist_holds_no_wheel_of_a_cell(
    pypi: StandInIndex, tmp_path: Path
) -> None:
    """A dist built from another matrix (its cell 13.0-x86_64-torch2.14.1, a file of the
    same name) was planned beside torch 2.11.0 with a requirement the plan made up; the
    torch a run needs is read from its cell's wheel or not said at all."""
    other = stable_project(tmp_path / "other", pypi.url, "2.14.1")
    dist = dist_of(other, "torch>=2.11")
    project = stable_project(tmp_path / "p", pypi.url, "2.11.0")
    done = release(
        tmp_path, "gpu-gate", "--matrix", str(project / "matrix.yaml"), "--runner", "h100",
        "--dist", str(dist), "--dry-run", "--json",
    )  # fmt: skip
    assert done.returncode == 4, done.stderr
    said = "the dist's manifest records no wheel of 13.0-x86_64-torch2.11.0: build it first"
    runs = json.loads(done.stdout)["runs"]
    assert [(r["name"], r.get("torch"), r["problem"]) for r in runs] == [
        (f"13.0-x86_64-torch2.11.0 {build}", None, said) for build in ("cubin", "ptx (compute_90)")
    ]
    assert done.stderr.splitlines()[-2] == (
        "error: the GPU gate on h100 cannot make 2 of its 2 runs: 13.0-x86_64-torch2.11.0 "
        f"cubin: {said}"
    )
