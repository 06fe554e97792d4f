"""release.building.preparestep's pure parts: the step of a cell as the matrix declares it,
what the dry run says of it, the line that re-runs it, and the files a wheel built through
it is keyed by (every file under matrix.yaml's directory, not only the project's)."""

from __future__ import annotations

from pathlib import Path

from release.building.cache import source_digest
from release.building.preparestep import build_sources, reproduce_line, step_of, step_sources
from release.matrix import load_matrix

MATRIX = """\
project: sub
build:
  prepare: {command: "bash stage.sh --fast", version-file: sub/VERSION, output: staged}
defaults: {arches: [x86_64], manylinux: "2_28", sms: [80], ptx: 80}
cuda:
  "12.9": {destination: gh, local-label: cu129}
destinations:
  gh: {kind: github, repository: o/r}
"""


def checkout(root: Path) -> Path:
    files = {
        "matrix.yaml": MATRIX,
        "stage.sh": "cp -r sub staged\n",
        "sub/pyproject.toml": '[project]\nname = "sub-dist"\ndynamic = ["version"]\n',
        "sub/VERSION": "1.0\n",
        "csrc/api.cpp": "int x;\n",
        "staged/pyproject.toml": "left from an earlier run\n",
        "build/lib/x.py": "",
        ".git/HEAD": "ref: refs/heads/main\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root / "matrix.yaml"


def test_the_step_of_a_cell_and_what_the_dry_run_says(tmp_path: Path) -> None:
    matrix = load_matrix(checkout(tmp_path))
    (cell,) = matrix.cells
    step = step_of(matrix, cell)
    assert step is not None
    assert (step.words, step.build_dir, step.name) == (
        ["bash", "stage.sh", "--fast"],
        tmp_path / "staged",
        "sub-dist",
    )
    assert step.describe(str(cell.version)) == (
        f"runs `bash stage.sh --fast` in {tmp_path} with the cell's build environment, after "
        "writing 1.0+cu129 into sub/VERSION; it stages staged/, which the PEP 517 build builds"
    )
    line = reproduce_line(step, "1.0+cu129", ["python", "-m", "build", "staged"], {"A": "1"},
                          parent={})  # fmt: skip
    assert line == (
        f"printf '%s\\n' 1.0+cu129 > {tmp_path / 'sub' / 'VERSION'} && cd {tmp_path} && "
        "A=1 RELEASE_PREPARE=1 bash stage.sh --fast && A=1 python -m build staged"
    )
    assert reproduce_line(None, "1.0", ["python", "-m", "build"], {}, parent={}) == (
        "python -m build"
    )


def test_a_wheel_through_the_step_is_keyed_by_the_whole_checkout(tmp_path: Path) -> None:
    matrix = load_matrix(checkout(tmp_path))
    step = step_of(matrix, matrix.cells[0])
    assert step is not None
    # not the declared output, the version file (the cell's version is written there),
    # build outputs or hidden directories
    assert [name for name, _ in step_sources(step)] == [
        "csrc/api.cpp",
        "matrix.yaml",
        "stage.sh",
        "sub/pyproject.toml",
    ]
    assert [name for name, _ in build_sources(matrix)] == [
        "csrc/api.cpp", "matrix.yaml", "stage.sh", "sub/pyproject.toml"
    ]  # fmt: skip


def test_files_through_a_linked_directory_key_the_wheel(tmp_path: Path) -> None:
    """A directory reached through a link (a vendored tree linked in, or the project itself)
    was listed as a link and none of its files hashed: a change there was served the wheel
    cached before it. A link to a directory above it is not followed again."""
    root = tmp_path / "checkout"
    root.mkdir()
    checkout(root)
    vendored = tmp_path / "vendored"
    (vendored / "include").mkdir(parents=True)
    (vendored / "include" / "gemm.cuh").write_text("v1\n")
    (root / "csrc" / "third_party").symlink_to(vendored)
    (root / "csrc" / "loop").symlink_to(root / "csrc")
    matrix = load_matrix(root / "matrix.yaml")
    step = step_of(matrix, matrix.cells[0])
    assert step is not None
    names = [name for name, _ in step_sources(step)]
    assert names == [
        "csrc/api.cpp",
        "csrc/third_party/include/gemm.cuh",
        "matrix.yaml",
        "stage.sh",
        "sub/pyproject.toml",
    ]
    before = source_digest(build_sources(matrix))
    # what a staging script links in from the checkout itself (DeepGEMM's
    # `ln -sfn $ROOT/third-party/cutlass/include/cutlass deep_gemm/include/cutlass`) is
    # keyed where it lies: the key is the same before the first run and after it
    (root / "sub" / "include").mkdir()
    (root / "sub" / "include" / "cutlass").symlink_to(root / "csrc")
    assert source_digest(build_sources(matrix)) == before
    (vendored / "include" / "gemm.cuh").write_text("v2\n")
    assert source_digest(build_sources(matrix)) != before
