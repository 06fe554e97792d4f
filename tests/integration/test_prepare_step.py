"""matrix.yaml's `build.prepare` on a tiny pure-Python distribution released from a
subdirectory and staged by a script, in a git checkout of its own: the release's name and
version come from the subdirectory and its version file; the step writes the cell's version,
runs the command from the repository root in the cell's build environment, and the staged
directory builds into that version's wheel; a failing command is one line with its log's
tail; a command that writes outside its declared output fails the cell naming the path; the
checkout is left as it was found; the dry run says where the step runs and what it builds.
No compiler runs: the wheel is built with this venv's setuptools, without isolation.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from release.backends import BuildInputs
from release.building.pipeline import build_command, cell_environment
from release.building.preparestep import prepared, step_of
from release.building.settings import CellFailure
from release.errors import ConfigError
from release.matrix import Matrix, load_matrix

GIT = shutil.which("git") or "git"
RELEASE = Path(sys.executable).with_name("release")

MATRIX = """\
project: tiny_src
build:
  prepare:
    command: python3 stage.py --into staged
    version-file: tiny_src/VERSION
    output: staged
defaults: {arches: [x86_64], manylinux: "2_28", sms: [80], ptx: 80}
cuda:
  "13.0": {destination: pypi}
  "12.9": {destination: github, local-label: cu129}
destinations:
  pypi: {kind: pypi}
  github: {kind: github, repository: o/tiny, index-url: https://o.github.io/tiny/}
"""

PYPROJECT = """\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "tiny-staged"
dynamic = ["version"]

[tool.setuptools]
packages = ["tiny"]

[tool.setuptools.dynamic]
version = {file = "tiny/VERSION"}

[tool.setuptools.package-data]
tiny = ["VERSION", "seen.json"]
"""

# The staging script, as build_sgl_deep_gemm.sh does it: the subdirectory's pyproject.toml
# and the package into the output, the version file beside the package; and what it saw.
STAGE = """\
import json, os, shutil, sys
into = sys.argv[sys.argv.index("--into") + 1]
shutil.copytree("tiny", os.path.join(into, "tiny"))
shutil.copy("tiny_src/pyproject.toml", into)
shutil.copy("tiny_src/VERSION", os.path.join(into, "tiny", "VERSION"))
seen = {"python": sys.executable, "cwd": os.getcwd(), "marker": os.environ.get("K3_MARKER"),
        "preparing": os.environ.get("RELEASE_PREPARE")}
with open(os.path.join(into, "tiny", "seen.json"), "w") as out:
    json.dump(seen, out)
if os.environ.get("K3_FAIL"):
    print("compiling _C.so")
    print(os.environ["K3_FAIL"], file=sys.stderr)
    sys.exit(3)
if os.environ.get("K3_LITTER"):
    open("tiny/generated.py", "w").write("X = 1\\n")
if os.environ.get("K3_IMPORT"):
    sys.path.insert(0, os.getcwd())
    import tiny  # Python caches its bytecode in tiny/__pycache__/
"""


def git(where: Path, *args: str) -> str:
    return subprocess.run(
        [GIT, "-C", str(where), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The repository, committed with VERSION 0.0.0; then, as the release workflow does
    from the tag, VERSION says 1.2.3 (a change git lists)."""
    root = tmp_path / "repo"
    (root / "tiny_src").mkdir(parents=True)
    (root / "tiny").mkdir()
    (root / "matrix.yaml").write_text(MATRIX)
    (root / "stage.py").write_text(STAGE)
    (root / "tiny_src" / "pyproject.toml").write_text(PYPROJECT)
    (root / "tiny_src" / "VERSION").write_text("0.0.0\n")
    (root / "tiny" / "__init__.py").write_text("")
    (root / ".gitignore").write_text("staged/\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "c")
    (root / "tiny_src" / "VERSION").write_text("1.2.3\n")
    return root


def environment(marker: str = "seen", **extra: str) -> dict[str, str]:
    """The environment a cell's build gets (pipeline.cell_environment): this venv's Python
    first on PATH, the backend's variables."""
    inputs = BuildInputs(env={"K3_MARKER": marker, **extra}, config_settings={})
    return cell_environment(inputs, base=dict(os.environ), python=sys.executable, epoch=1)


def cells(matrix: Matrix) -> dict[str, str]:
    return {c.id: str(c.version) for c in matrix.cells}


def test_the_subdirectory_names_the_release_and_its_version_file_gives_the_version(
    checkout: Path,
) -> None:
    matrix = load_matrix(checkout / "matrix.yaml")
    assert (matrix.project.name, str(matrix.project.version)) == ("tiny-staged", "1.2.3")
    assert matrix.project.path == checkout / "tiny_src"
    assert cells(matrix) == {"13.0-x86_64": "1.2.3", "12.9-x86_64": "1.2.3+cu129"}
    assert {c.wheel_filename for c in matrix.cells} == {
        "tiny_staged-1.2.3-py3-none-manylinux_2_28_x86_64.whl",
        "tiny_staged-1.2.3+cu129-py3-none-manylinux_2_28_x86_64.whl",
    }


def test_the_step_stages_the_cells_version_and_leaves_the_checkout_as_found(
    checkout: Path, tmp_path: Path
) -> None:
    matrix = load_matrix(checkout / "matrix.yaml")
    cell = next(c for c in matrix.cells if c.local_label == "cu129")
    step = step_of(matrix, cell)
    assert step is not None
    status = git(checkout, "status", "--porcelain", "--ignored")
    env = environment()
    log = tmp_path / "cell.log"
    with prepared(step, str(cell.version), env=env, log=log) as built:
        assert built == checkout / "staged"
        assert (checkout / "tiny_src" / "VERSION").read_text() == "1.2.3+cu129\n"
        out = tmp_path / "wheels"
        command = build_command(sys.executable, built, out, isolated=False)
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = out.glob("*.whl")
    assert wheel.name == "tiny_staged-1.2.3+cu129-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read("tiny/VERSION") == b"1.2.3+cu129\n"
        seen = json.loads(archive.read("tiny/seen.json"))
    # from the repository root, with the cell's Python first on PATH and its variables, told
    # that it runs as release's prepare step
    assert seen == {
        "python": seen["python"],
        "cwd": str(checkout),
        "marker": "seen",
        "preparing": "1",
    }
    assert Path(seen["python"]).parent == Path(sys.executable).parent
    assert "python3 stage.py --into staged" in log.read_text()
    # the version the release workflow wrote is back, the output is gone
    assert (checkout / "tiny_src" / "VERSION").read_text() == "1.2.3\n"
    assert not (checkout / "staged").exists()
    assert git(checkout, "status", "--porcelain", "--ignored") == status


ATEN = (
    "/venv/site-packages/torch/include/ATen/ATen.h:5:2: error: #error C++20 or later "
    "compatible compiler is required to use ATen."
)


@pytest.mark.parametrize(
    ("printed", "cause"),
    [
        # the step compiles the project's host library (build_sgl_deep_gemm.sh's _C.so), so
        # its log is read for the cause as a PEP 517 build's is
        (
            "/usr/bin/ld: cannot find -lnvrtc: No such file or directory",
            ": the linker cannot find -lnvrtc (the CUDA_HOME of the build has no link name "
            "for nvrtc: add nvrtc to build.cuda-libraries in matrix.yaml)",
        ),
        (
            ATEN,
            ": C++20 or later compatible compiler is required to use ATen (torch 2.14 and "
            "later require C++20 and the project compiles as an older standard: pin a torch "
            "release before 2.14 in matrix.yaml's torch, or compile the project as C++20: "
            "-std=c++20)",
        ),
        ("nothing this knows", ""),
    ],
)
def test_a_failing_command_is_one_line_with_its_cause_and_its_logs_tail(
    checkout: Path, tmp_path: Path, printed: str, cause: str
) -> None:
    matrix = load_matrix(checkout / "matrix.yaml")
    cell = matrix.cells[0]
    step = step_of(matrix, cell)
    assert step is not None
    with (
        pytest.raises(CellFailure) as failed,
        prepared(step, "1.2.3", env=environment(K3_FAIL=printed), log=tmp_path / "log"),
    ):
        pytest.fail("the build ran after a failed prepare step")
    assert failed.value.error == (
        f"the prepare step `python3 stage.py --into staged` failed (exit 3){cause}"
    )
    assert failed.value.tail.splitlines()[-2:] == ["compiling _C.so", printed]
    assert (checkout / "tiny_src" / "VERSION").read_text() == "1.2.3\n"
    assert not (checkout / "staged").exists()


def test_a_command_that_writes_outside_its_output_fails_naming_the_path(
    checkout: Path, tmp_path: Path
) -> None:
    matrix = load_matrix(checkout / "matrix.yaml")
    step = step_of(matrix, matrix.cells[0])
    assert step is not None
    with (
        pytest.raises(CellFailure) as failed,
        prepared(step, "1.2.3", env=environment(K3_LITTER="1"), log=tmp_path / "log"),
    ):
        pytest.fail("the build ran after the checkout was changed")
    assert failed.value.error == (
        "the prepare step `python3 stage.py --into staged` changed the checkout outside its "
        "declared output: tiny/generated.py (write only under build.prepare's output, or let "
        ".gitignore name what the command builds)"
    )
    # what it staged and the version are put back all the same
    assert not (checkout / "staged").exists()
    assert (checkout / "tiny_src" / "VERSION").read_text() == "1.2.3\n"


def test_the_bytecode_python_caches_of_an_imported_module_is_not_a_change(
    checkout: Path, tmp_path: Path
) -> None:
    """A command that imports a module of the checkout, where nothing tells Python not to
    write its bytecode (no PYTHONDONTWRITEBYTECODE, as on most machines) and .gitignore does
    not name __pycache__/: the cache is the interpreter's, and the cell goes on."""
    matrix = load_matrix(checkout / "matrix.yaml")
    step = step_of(matrix, matrix.cells[0])
    assert step is not None
    env = environment(K3_IMPORT="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with prepared(step, "1.2.3", env=env, log=tmp_path / "log"):
        assert list((checkout / "tiny" / "__pycache__").glob("__init__.*.pyc"))
        assert (checkout / "staged" / "tiny" / "VERSION").read_text() == "1.2.3\n"


def test_a_staged_distribution_of_another_name_fails_the_cell(
    checkout: Path, tmp_path: Path
) -> None:
    (checkout / "tiny_src" / "pyproject.toml").write_text(PYPROJECT)
    (checkout / "stage.py").write_text(
        STAGE + "open(os.path.join(into, 'pyproject.toml'), 'w').write("
        '\'[project]\\nname = "deep-tiny"\\nversion = "2.5.0"\\n\')\n'
    )
    git(checkout, "commit", "-q", "-am", "another")
    matrix = load_matrix(checkout / "matrix.yaml")
    step = step_of(matrix, matrix.cells[0])
    assert step is not None
    with (
        pytest.raises(CellFailure) as failed,
        prepared(step, "1.2.3", env=environment(), log=tmp_path / "log"),
    ):
        pytest.fail("built another distribution")
    assert failed.value.error == (
        f"{checkout / 'staged' / 'pyproject.toml'}: the staged distribution is deep-tiny, the "
        "release's project is tiny-staged (stage the pyproject.toml of `project:`)"
    )


def test_the_dry_run_says_where_the_step_runs_and_what_it_builds(checkout: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELEASE_", "PIP_"))}
    env["RELEASE_CACHE_DIR"] = str(checkout.parent / "cache")
    done = subprocess.run(
        [str(RELEASE), "build", "--dry-run", "--json", "--cuda", "12.9"],
        cwd=checkout, env=env, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (cell,) = json.loads(done.stdout)["cells"]
    assert cell["prepare"] == (
        f"runs `python3 stage.py --into staged` in {checkout} with the cell's build "
        "environment, after writing 1.2.3+cu129 into tiny_src/VERSION; it stages staged/, "
        "which the PEP 517 build builds"
    )
    assert cell["command"][-1] == str(checkout / "staged")
    assert cell["wheel"] == "tiny_staged-1.2.3+cu129-py3-none-manylinux_2_28_x86_64.whl"
    assert not (checkout / "staged").exists()
    assert not (checkout.parent / "cache").exists()


def test_what_release_writes_itself_in_the_checkout_is_not_the_commands(checkout: Path) -> None:
    """dist/ (the cell's log) in a checkout that does not ignore it: the log is written as
    the command ends, before the checkout is looked at again."""
    matrix = load_matrix(checkout / "matrix.yaml")
    log = checkout / "dist" / "logs" / "13.0-x86_64.log"
    log.parent.mkdir(parents=True)
    own = step_of(matrix, matrix.cells[0], own=[checkout / "dist"])
    assert own is not None
    with prepared(own, "1.2.3", env=environment(), log=log) as built:
        assert built == checkout / "staged"
    assert log.is_file()
    log.unlink()
    bare = step_of(matrix, matrix.cells[0])
    assert bare is not None
    with (
        pytest.raises(CellFailure, match=re.escape("declared output: dist/logs/13.0-x86_64.log")),
        prepared(bare, "1.2.3", env=environment(), log=log),
    ):
        pytest.fail("the log was taken for the command's")


def matrix_with(checkout: Path, **prepare: str) -> Matrix:
    text = MATRIX
    for key, value in prepare.items():
        old = {"output": "output: staged", "version_file": "version-file: tiny_src/VERSION"}[key]
        text = text.replace(old, old.split(":")[0] + ": " + value)
    (checkout / "matrix.yaml").write_text(text)
    return load_matrix(checkout / "matrix.yaml")


def refused_unchanged(checkout: Path, matrix: Matrix, tmp_path: Path) -> str:
    """The cell's step refused before anything was emptied or written: its error."""
    before = {
        p: p.read_bytes() for p in checkout.rglob("*") if p.is_file() and ".git" not in p.parts
    }
    step = step_of(matrix, matrix.cells[0], own=[checkout / "dist"])
    assert step is not None
    with (
        pytest.raises(CellFailure) as failed,
        prepared(step, "9.9.9", env=environment(), log=tmp_path / "log"),
    ):
        pytest.fail("the command ran")
    after = {
        p: p.read_bytes() for p in checkout.rglob("*") if p.is_file() and ".git" not in p.parts
    }
    assert after == before
    return failed.value.error


def test_an_output_that_holds_tracked_files_is_refused_before_it_is_emptied(
    checkout: Path, tmp_path: Path
) -> None:
    # an output naming the sources: release emptied it before the command (the sources gone)
    error = refused_unchanged(checkout, matrix_with(checkout, output="tiny"), tmp_path)
    assert error == (
        "build.prepare.output tiny holds files git tracks (tiny/__init__.py), and release "
        "empties it before the command: name the directory the command stages into"
    )


def test_an_output_or_version_file_through_a_symlink_is_refused_untouched(
    checkout: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "keep.txt").write_text("not the checkout's\n")
    (outside / "VERSION").write_text("0.0.1\n")
    (checkout / "escape").symlink_to(outside)
    matrix = matrix_with(checkout, output="escape/sub")
    error = refused_unchanged(checkout, matrix, tmp_path)
    assert error == (
        "build.prepare.output escape/sub is reached through the symbolic link escape, and "
        "release writes there: name a path of the checkout itself"
    )
    assert (outside / "sub" / "keep.txt").read_text() == "not the checkout's\n"
    (checkout / "tiny_src" / "VERSION").unlink()
    (checkout / "tiny_src" / "VERSION").symlink_to(outside / "VERSION")
    with pytest.raises(ConfigError) as refused:
        load_matrix(checkout / "matrix.yaml")
    assert (
        "build.prepare.version-file: is reached through the symbolic link tiny_src/VERSION, "
        "and release reads and writes the version there"
    ) in refused.value.message
    assert (outside / "VERSION").read_text() == "0.0.1\n"


def test_an_output_in_what_release_writes_itself_is_refused(checkout: Path, tmp_path: Path) -> None:
    # dist/, release's default output, is refused at load; --out elsewhere, by the build
    with pytest.raises(ConfigError) as refused:
        matrix_with(checkout, output="dist/stage")
    assert (
        "build.prepare.output: dist/stage is in dist/, where release writes its wheels"
    ) in refused.value.message
    matrix = matrix_with(checkout, output="out/stage")
    step = step_of(matrix, matrix.cells[0], own=[checkout / "out"])
    assert step is not None
    with (
        pytest.raises(CellFailure, match=r"^build\.prepare\.output out/stage overlaps "),
        prepared(step, "9.9.9", env=environment(), log=tmp_path / "log"),
    ):
        pytest.fail("the command ran")
    with pytest.raises(ConfigError) as refused:
        matrix_with(checkout, output=".git/stage")
    assert "build.prepare.output: '.git/stage' is inside .git" in refused.value.message


def test_a_cache_above_the_checkout_is_no_overlap(checkout: Path, tmp_path: Path) -> None:
    # a cache (or a --work-dir) that holds the whole checkout holds its output too
    matrix = load_matrix(checkout / "matrix.yaml")
    step = step_of(matrix, matrix.cells[0], own=[tmp_path, checkout / "dist"])
    assert step is not None
    with prepared(step, "1.2.3", env=environment(), log=tmp_path / "log") as built:
        assert built == checkout / "staged"
