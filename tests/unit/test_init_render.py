"""release.init.render: the files `release init` writes, from the templates in the package:
matrix.yaml starts with the schema comment and loads, a missing torch is a TODO refused at
its line, and the workflow is the caller of the reusable one."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from release import __version__
from release.errors import ConfigError
from release.init.decide import Decision, decide
from release.init.detect import TorchLookup, backend_of
from release.init.render import render_matrix, render_workflow
from release.init.torchindex import TorchRelease
from release.matrix import matrix_from_text
from release.project import read_project_files, reading
from release.toolchain.placement import placement

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
TORCH = TorchLookup(
    index_url="http://index.example/simple/",
    releases={Version("2.11.0"): TorchRelease(version=Version("2.11.0"), pythons=("3.10",))},
)


def decided(where: Path, lookup: TorchLookup | None = TORCH) -> Decision:
    read = reading(read_project_files(where))
    return decide(read, backend_of(read), lookup)


@pytest.mark.parametrize(
    "where",
    [
        FIXTURES / "torch_ops",
        FIXTURES / "cmake_kernels",
        FIXTURES / "extension_template",
        ROOT / "csrc",
    ],
    ids=lambda p: p.name,
)
def test_the_matrix_starts_with_its_schema_and_loads(where: Path, tmp_path: Path) -> None:
    text = render_matrix(decided(where), __version__)
    first = text.splitlines()[0]
    assert first == (
        "# yaml-language-server: $schema=https://raw.githubusercontent.com/k3-project/"
        f"cuda-wheel-release/v{__version__}/schema/matrix.schema.json"
    )
    assert max(len(line) for line in text.splitlines()[1:]) <= 100
    matrix = matrix_from_text(text, where / "matrix.yaml", named=("p", Version("1")))
    assert matrix.cells
    assert all(c.arch == "x86_64" for c in matrix.cells) or where.name == "csrc"


def test_each_value_says_where_it_came_from_and_changes_lead_the_file() -> None:
    text = render_matrix(decided(FIXTURES / "extension_template"), __version__)
    assert (
        "# TODO before it builds (what release init found):\n# - setup.py:23: builds CUDA" in text
    )
    abi3 = text.split('\n  abi3: "3.9"\n')[0].rsplit("\n  manylinux:", 1)[1]
    assert "From setup.py:49: bdist_wheel's\n  # py_limited_api cp39." in abi3
    assert '    # allows.\n    torch: "2.11.0"\n' in text
    assert text.index("TODO before it builds") < text.index("\nproject: .\n")


def test_a_torch_the_index_did_not_give_is_a_todo_refused_at_its_line() -> None:
    offline = TorchLookup(index_url="https://pypi.org/simple/", releases=None, failure="--offline")
    text = render_matrix(decided(FIXTURES / "torch_ops", offline), __version__)
    (line,) = [n for n, t in enumerate(text.splitlines(), start=1) if "torch: TODO" in t]
    with pytest.raises(ConfigError) as refused:
        matrix_from_text(text, FIXTURES / "torch_ops" / "matrix.yaml", named=("p", Version("1")))
    (problem,) = refused.value.problems
    assert problem.startswith(f"matrix.yaml:{line}:")
    assert "is not a valid version" in problem


SHA = "f" * 40
TOOL = "k3-project/cuda-wheel-release"


def test_the_workflow_pins_each_use_of_the_tool_by_commit_with_its_version() -> None:
    text = render_workflow("0.4.2", "kernels/matrix.yaml", SHA)
    assert text.startswith(
        "# Release: builds every cell of kernels/matrix.yaml, publishes on a pushed tag "
        "(docs: https://github.com/k3-project/cuda-wheel-release/blob/v0.4.2/docs/ci.md)\n"
    )
    lines = [line.strip() for line in text.splitlines()]
    uses = [line for line in lines if line.startswith(("uses:", "- uses:"))]
    assert uses == [
        f"uses: {TOOL}/.github/workflows/wheels.yml@{SHA} # v0.4.2",
        f"uses: {TOOL}/actions/publish@{SHA} # v0.4.2",
        f"uses: {TOOL}/.github/workflows/wheels-verify.yml@{SHA} # v0.4.2",
    ]
    assert text.count('      tool-version: "0.4.2"\n') == 2
    assert text.count("      matrix: kernels/matrix.yaml\n") == 2
    assert (
        "    permissions:\n"
        "      contents: write # the GitHub Release and its assets\n"
        "      id-token: write # PyPI trusted publishing, and signing the attestations\n"
        "      attestations: write # the build provenance of every file shipped\n"
    ) in text
    assert "    environment: {name: release}\n" in text
    assert "      index: ${{ needs.publish.outputs.index == 'true' }}\n" in text
    assert "workflow release.yml, environment release" in " ".join(text.split())
    assert "pypi-token:" not in text.replace("{pypi-token:", "")  # trusted publishing


def test_with_a_token_secret_the_publish_step_passes_it() -> None:
    text = render_workflow("0.4.2", "matrix.yaml", SHA, "PYPI_TOKEN")
    assert (
        f"        uses: {TOOL}/actions/publish@{SHA} # v0.4.2\n"
        "        with:\n"
        "          pypi-token: ${{ secrets.PYPI_TOKEN }}\n"
        "  # deploy the pip index"
    ) in text
    assert "the API token in the repository secret PYPI_TOKEN" in " ".join(text.split())


def test_without_a_commit_the_tag_is_pinned_with_a_todo() -> None:
    text = render_workflow("0.4.2", "matrix.yaml", None)
    assert f"uses: {TOOL}/.github/workflows/wheels.yml@v0.4.2 # v0.4.2\n" in text
    assert "# TODO: pin each `uses:` by the commit of tag v0.4.2" in text


@pytest.mark.parametrize("where", [FIXTURES / "cmake_kernels", FIXTURES / "torch_ops"])
def test_the_12_9_block_names_the_pypa_cuda_image_by_digest_for_each_arch(where: Path) -> None:
    """Uncommented with a digest written in, the 12.9 cell builds in the PyPA's manylinux
    CUDA image of its arch and level; with the placeholder left in, the loader refuses it."""
    decision = decided(where)
    text = render_matrix(decision, __version__)
    block = text.split('  # "12.9":\n', 1)[1].split("\n\n", 1)[0]
    level = decision.manylinux
    for arch in decision.arches:
        image = f"quay.io/manylinux_cuda/manylinux_{level}_{arch}_cuda12_9"
        assert f"  #     {arch}: {image}@sha256:<64 hex>\n" in block + "\n"
    assert "docker buildx imagetools inspect" in block
    lines = ['  "12.9":'] + [
        line.replace("  # ", "  ", 1) for line in block.splitlines() if "#   # " not in line
    ]
    digest = "sha256:" + "ab" * 32
    cell = "\n".join(lines).replace("{torch}", "").replace('"..."', '"2.11.0"')
    github = "\n\ndestinations:\n  github: {kind: github, repository: a/b}\n"

    def with_cell(text_of_cell: str) -> str:
        return text.replace("\ndestinations:\n", "\n" + text_of_cell + github)

    filled = with_cell(cell.replace("sha256:<64 hex>", digest))
    matrix = matrix_from_text(filled, where / "matrix.yaml", named=("p", Version("1")))
    placed = {c.arch: placement(c) for c in matrix.cells if str(c.cuda) == "12.9"}
    assert placed, "a 12.9 cell"
    for arch, at in placed.items():
        image = f"quay.io/manylinux_cuda/manylinux_{level}_{arch}_cuda12_9"
        assert (at.container, at.cuda_home) == (f"{image}@{digest}", "/usr/local/cuda-12.9")
    left = with_cell(cell)
    with pytest.raises(ConfigError):
        matrix_from_text(left, where / "matrix.yaml", named=("p", Version("1")))


def test_a_python_list_keeps_the_comment_above_it(tmp_path: Path) -> None:
    """Where the abi3 slot is left out, the comment above it stays, above `python:`."""
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=77", "torch>=2.10"]\n'
        'build-backend = "setuptools.build_meta"\n'
    )
    (tmp_path / "setup.py").write_text(
        "from setuptools import setup\n"
        "from torch.utils.cpp_extension import BuildExtension, CUDAExtension\n"
        'setup(name="t-ops", version="0.1.0", ext_modules=[CUDAExtension("t._C", ["a.cu"])],\n'
        '      cmdclass={"build_ext": BuildExtension})\n'
    )
    text = render_matrix(decided(tmp_path), __version__)
    assert (
        '  manylinux: "2_34"\n'
        "  # A wheel per CPython, each built with python3.X from PATH. From the CPythons torch "
        '2.11.0\n  # has wheels for.\n  python: ["3.10"]\n'
    ) in text
    assert "abi3" not in text.split("\ncuda:")[0]
