"""release.project.staging: the distribution a script stages from a subdirectory (DeepGEMM's
build_sgl_deep_gemm.sh stages sgl_deep_gemm/ into build/), read from the script's text."""

from __future__ import annotations

from release.project import read_pyproject
from release.project.staging import Script, Subproject, staged_distribution

PYPROJECT = """\
[project]
name = "sgl-deep-gemm"
dynamic = ["version"]

[tool.setuptools.dynamic]
version = {file = "deep_gemm/VERSION"}
"""

SCRIPT = """\
#!/usr/bin/env bash
set -euo pipefail
PYTHON_EXE=$(which python3 || which python)
ROOT_DIR=$(realpath "$(dirname "$0")")
BUILD_DIR="${ROOT_DIR}/build"
PKG_DIR="${BUILD_DIR}/deep_gemm"
rm -rf "$BUILD_DIR"
# cp sgl_deep_gemm/pyproject.toml "$ROOT_DIR/elsewhere/"
cp sgl_deep_gemm/LICENSE sgl_deep_gemm/pyproject.toml "$BUILD_DIR/"
tr -d '[:space:]' < sgl_deep_gemm/VERSION > "$PKG_DIR/VERSION"
"$PYTHON_EXE" -m pip install --quiet --upgrade build
"$PYTHON_EXE" -m build --wheel "$BUILD_DIR" --outdir dist
"""

SUB = Subproject(directory="sgl_deep_gemm", pyproject=read_pyproject(PYPROJECT))
SCRIPTS = [Script(path="build.sh", text="python setup.py develop\n")]


def test_the_subdirectory_a_script_stages_is_the_published_one() -> None:
    staged = staged_distribution(
        "deep_gemm", [SUB], [*SCRIPTS, Script(path="build_sgl_deep_gemm.sh", text=SCRIPT)],
        frozenset(),
    )  # fmt: skip
    assert staged is not None
    assert (staged.directory, staged.name.value, str(staged.name.place)) == (
        "sgl_deep_gemm", "sgl-deep-gemm", "sgl_deep_gemm/pyproject.toml:2"
    )  # fmt: skip
    assert (staged.command, str(staged.copies), staged.output) == (
        "bash build_sgl_deep_gemm.sh", "build_sgl_deep_gemm.sh:9", "build"
    )  # fmt: skip
    assert staged.version_file == "sgl_deep_gemm/VERSION"  # the script reads it
    assert (str(staged.installs), str(staged.builds)) == (
        "build_sgl_deep_gemm.sh:11", "build_sgl_deep_gemm.sh:12"
    )  # fmt: skip


def test_a_script_that_skips_its_own_build_under_release_is_not_told_to() -> None:
    guarded = SCRIPT.replace(
        '"$PYTHON_EXE" -m pip', '[[ -n "${RELEASE_PREPARE:-}" ]] && exit 0\n"$PYTHON_EXE" -m pip'
    )
    staged = staged_distribution(
        "deep_gemm", [SUB], [Script(path="b.sh", text=guarded)], frozenset()
    )
    assert staged is not None
    assert (staged.installs, staged.builds) == (None, None)


def test_what_the_script_leaves_unsaid_stays_unknown() -> None:
    computed = SCRIPT.replace('"$BUILD_DIR/"', '"$(mktemp -d)/"').replace(
        "< sgl_deep_gemm/VERSION", "< $VERSION_SOURCE"
    )
    staged = staged_distribution(
        "deep_gemm", [SUB], [Script(path="b.sh", text=computed)], frozenset()
    )
    assert staged is not None
    assert (staged.output, staged.version_file) == (None, None)
    # the file its pyproject.toml's version names, where it is there
    there = staged_distribution(
        "deep_gemm",
        [SUB],
        [Script(path="b.sh", text=computed)],
        frozenset({"sgl_deep_gemm/VERSION"}),
    )
    assert there is not None
    assert there.version_file == "sgl_deep_gemm/VERSION"


def test_no_staged_distribution_where_the_names_agree_or_no_script_copies_it() -> None:
    script = [Script(path="b.sh", text=SCRIPT)]
    assert staged_distribution("sgl_deep_gemm", [SUB], script, frozenset()) is None
    assert staged_distribution("deep_gemm", [SUB], SCRIPTS, frozenset()) is None
    two = [Script(path="a.sh", text=SCRIPT), Script(path="b.sh", text=SCRIPT)]
    assert staged_distribution("deep_gemm", [SUB], two, frozenset()) is None  # which one?


def test_an_output_release_cannot_empty_is_left_undecided_with_why() -> None:
    def staged_into(build_dir: str) -> tuple[str | None, str | None]:
        script = SCRIPT.replace('BUILD_DIR="${ROOT_DIR}/build"', f'BUILD_DIR="{build_dir}"')
        staged = staged_distribution(
            "deep_gemm", [SUB], [Script(path="b.sh", text=script)], frozenset()
        )
        assert staged is not None
        return staged.output, staged.output_unfit

    unfit = {
        # a literal absolute path is not the root's: never rewritten into one under it
        "/srv/abs/out": "it stages into /srv/abs/out, an absolute path outside the checkout",
        "${ROOT_DIR}/sgl_deep_gemm": (
            "it stages into sgl_deep_gemm, which holds the project's sources (sgl_deep_gemm)"
        ),
        "${ROOT_DIR}/.git/stage": "it stages into .git/stage, inside .git, git's own directory",
        "dist": "it stages into dist, in dist/, where release writes its wheels",
        # the shell's ~ is a home directory; matrix.yaml is what init writes (it said "this
        # is release init's bug" when the matrix it wrote did not load)
        "~/stage": "it stages into ~/stage, under a home directory outside the checkout",
        "${ROOT_DIR}/matrix.yaml": "it stages into matrix.yaml, the file that declares the release",
    }
    for build_dir, why in unfit.items():
        assert staged_into(build_dir) == (None, why), build_dir
    assert staged_into("${ROOT_DIR}/out/build") == ("out/build", None)
