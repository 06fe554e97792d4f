"""`release build --dry-run` and `release doctor` on a torch project whose setup.py passes
its own fixed -gencode list (tests/fixtures/torch_gencode): both warn before anything is
provisioned or compiled, naming setup.py's line, the flags and the targets to paste; a
cell set to exactly the project's list gets no warning. Nothing here compiles."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "torch_gencode"
CLI = "import sys; from release.cli import main; sys.exit(main(sys.argv[1:]))"
TORCH = "2.14.1"
# the fixture's matrix, SMS and PTX to fill in (test_torch_archflags builds with it)
MATRIX = f"""\
project: {FIXTURE}
build: {{backend: torch}}
defaults:
  arches: [x86_64]
  sms: SMS
  ptx: PTX
  manylinux: "2_34"
cuda:
  "13.0": {{destination: pypi, torch: "{TORCH}", abi3: "3.10"}}
destinations:
  pypi: {{kind: pypi}}
"""
LINE = next(
    number
    for number, text in enumerate((FIXTURE / "setup.py").read_text().splitlines(), start=1)
    if '"-gencode=arch=' in text
)


def release(tmp_path: Path, sms: str, ptx: str, *command: str) -> subprocess.CompletedProcess[str]:
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(MATRIX.replace("SMS", sms).replace("PTX", ptx), encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-c", CLI, *command, "--matrix", str(matrix),
         "--cache-dir", str(tmp_path / "cache")],
        capture_output=True, text=True, check=False, env=dict(os.environ), cwd=tmp_path,
    )  # fmt: skip


def dry_run(tmp_path: Path, matrix: str) -> subprocess.CompletedProcess[str]:
    """`build --dry-run` of `matrix` (MATRIX made another's) for sms 80 and 100, PTX 100."""
    (tmp_path / "matrix.yaml").write_text(
        matrix.replace("SMS", "[80, 100]").replace("PTX", "100"), encoding="utf-8"
    )
    return subprocess.run(
        [sys.executable, "-c", CLI, "build", "--dry-run", "--matrix",
         str(tmp_path / "matrix.yaml"), "--cache-dir", str(tmp_path / "cache")],
        capture_output=True, text=True, check=False, cwd=tmp_path,
    )  # fmt: skip


def test_the_dry_run_warns_naming_the_line_the_flags_and_the_targets_to_paste(
    tmp_path: Path,
) -> None:
    done = release(tmp_path, "[75, 80, 90, 100]", "100", "build", "--dry-run")
    assert done.returncode == 0, done.stderr[-3000:]
    (warning,) = [line for line in done.stderr.splitlines() if "own nvcc arch flags" in line]
    assert f"{FIXTURE / 'setup.py'}:{LINE} passes its own nvcc arch flags" in warning
    assert "-gencode=arch=compute_80,code=sm_80" in warning
    assert "the cell asks for sm_75, sm_80, sm_90, sm_100, PTX compute_100" in warning
    assert "torch's cpp_extension ignores TORCH_CUDA_ARCH_LIST" in warning
    assert "(sms: [80, 90] and ptx: 90)" in warning
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*venv*"))
    document = release(tmp_path, "[75, 80, 90, 100]", "100", "build", "--dry-run", "--json")
    (cell,) = json.loads(document.stdout)["cells"]
    assert cell["warnings"][-1] == warning.removeprefix("warning: ")


def test_doctor_warns_too_and_a_cell_of_the_projects_own_list_is_not_warned_of(
    tmp_path: Path,
) -> None:
    done = release(tmp_path, "[75, 80, 90, 100]", "100", "doctor", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    changed, stopped = json.loads(done.stdout)["warnings"]
    assert changed.startswith(f"setup.py:{LINE}: hard-codes nvcc's -gencode flags")
    assert stopped.startswith(f"{FIXTURE / 'setup.py'}:{LINE} passes its own nvcc arch flags")
    same = release(tmp_path, "[80, 90]", "90", "build", "--dry-run", "--json")
    assert same.returncode == 0, same.stderr[-3000:]
    assert "own nvcc arch flags" not in same.stderr
    (cell,) = json.loads(same.stdout)["cells"]
    assert cell["warnings"] == [changed]
    assert json.loads(release(tmp_path, "[80, 90]", "90", "doctor", "--json").stdout)[
        "warnings"
    ] == [changed]


def test_the_dry_run_says_what_init_says_must_change_in_its_words(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(FIXTURE, project)
    init = subprocess.run(
        [sys.executable, "-c", CLI, "init", str(project), "--offline", "--json"],
        capture_output=True, text=True, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert init.returncode == 0, init.stderr[-3000:]
    changes = json.loads(init.stdout)["changes"]
    assert [c["place"] for c in changes] == [f"setup.py:{LINE}"]
    done = release(tmp_path, "[80, 90]", "90", "build", "--dry-run", "--json")
    (cell,) = json.loads(done.stdout)["cells"]
    assert cell["warnings"] == [f"{c['place']}: {c['text']}; fix: {c['fix']}" for c in changes]


def test_flags_made_from_a_variable_of_the_projects_are_told_to_the_dry_run(
    tmp_path: Path,
) -> None:
    """tests/fixtures/torch_archs_env makes its flags from K3_CUDA_ARCHS: without
    targets-env the dry run says which line and the key that hands the cell's sms to it;
    with it, nothing."""
    archs = FIXTURE.parent / "torch_archs_env"
    line = next(
        n
        for n, text in enumerate((archs / "setup.py").read_text().splitlines(), start=1)
        if 'os.getenv("K3_CUDA_ARCHS"' in text
    )
    for targets, told in (("", True), ("  targets-env: {K3_CUDA_ARCHS: sms}\n", False)):
        matrix = MATRIX.replace(str(FIXTURE), str(archs)).replace(
            "build: {backend: torch}\n", f"build:\n  backend: torch\n{targets}"
        )
        done = dry_run(tmp_path, matrix)
        assert done.returncode == 0, done.stderr[-3000:]
        hint = (
            f"setup.py:{line}: the -gencode flags follow K3_CUDA_ARCHS (default 80;90), which "
            "the cell's sms do not reach: hand them to it in matrix.yaml with "
            "build.targets-env: {K3_CUDA_ARCHS: sms}"
        )
        assert (hint in done.stderr) is told, done.stderr[-3000:]
        # its flags are f-strings, which name no target until setup.py runs: the line above
        # says they miss the cell's sms, never a list read off `sm_{a}`
        assert "own nvcc arch flags" not in done.stderr


OPT_IN_SETUP = """\
import os
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

ext_modules = []
if os.environ.get("KIT_CUDA_EXT", "0") == "1":
    ext_modules.append(CUDAExtension("kit_cuda", ["kit.cu"]))
if os.environ.get("KIT_GROUP_NORM", "0") == "1":
    flags = ["-gencode=arch=compute_90,code=sm_90"]
    ext_modules.append(CUDAExtension("group_norm", ["norm.cu"], extra_compile_args={"nvcc": flags}))
setup(name="kit", version="0.1", ext_modules=ext_modules, cmdclass={"build_ext": BuildExtension})
"""


def test_the_flags_of_an_opt_in_branch_the_cell_leaves_off_are_not_warned_of(
    tmp_path: Path,
) -> None:
    """The -gencode list of an extension built only when KIT_GROUP_NORM is on stops no cell
    whose build.env leaves it off; a cell that turns it on is warned as before."""
    project = tmp_path / "kit"
    project.mkdir()
    (project / "setup.py").write_text(OPT_IN_SETUP, encoding="utf-8")
    for env, warned in (
        ('{KIT_CUDA_EXT: "1"}', False),
        ('{KIT_CUDA_EXT: "1", KIT_GROUP_NORM: "1"}', True),
    ):
        matrix = MATRIX.replace(str(FIXTURE), str(project)).replace(
            "build: {backend: torch}\n", f"build: {{backend: torch, env: {env}}}\n"
        )
        done = dry_run(tmp_path, matrix)
        assert done.returncode == 0, done.stderr[-3000:]
        assert ("own nvcc arch flags" in done.stderr) is warned, done.stderr[-3000:]
        assert ("hard-codes nvcc's -gencode flags" in done.stderr) is warned
