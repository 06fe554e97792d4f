"""A CUDA version published to several places (release.matrix.copies), and the destinations
of sgl-project's layout (release.matrix.gitindex): a github destination in another
repository with the token's secret named, and the git index that lists its wheels.

The rules' messages, each at its file:line, are in tests/data/matrix/bad/copies.yaml,
copies-shape.yaml and git-index.yaml (tests/unit/test_matrix.py runs them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from release.cli import main
from release.errors import ConfigError
from release.matrix import (
    GithubDestination,
    GitIndexDestination,
    Matrix,
    PypiDestination,
    cell_dict,
    load_matrix,
    matrix_from_text,
)

DATA = Path(__file__).parent.parent / "data" / "matrix"
SGL = DATA / "good" / "sgl-layout.yaml"
TORCH_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "torch_ops"


def test_sgl_projects_layout_builds_each_cell_once_with_its_copies() -> None:
    matrix = load_matrix(SGL)
    assert [c.id for c in matrix.cells] == [
        "13.0-x86_64", "13.0-aarch64", "12.9-x86_64", "12.9-aarch64",
    ]  # fmt: skip
    cu130 = matrix.cells[0]
    # the wheel the build makes: PyPI's, plain
    assert cu130.wheel_filename == "k3_kernels-0.1.0-py3-none-manylinux_2_28_x86_64.whl"
    assert isinstance(cu130.destination, PypiDestination)
    assert cu130.local_label is None
    copies = [(c.destination.name, c.local_label) for c in cu130.copies]
    assert copies == [("pypi", None), ("whl", "cu130")]
    relabelled = cu130.as_copy(cu130.copies[1])
    assert relabelled.wheel_filename == (
        "k3_kernels-0.1.0+cu130-py3-none-manylinux_2_28_x86_64.whl"
    )
    assert relabelled.id == cu130.id, "one build: the copy is that cell's wheel relabelled"
    assert relabelled.copies == (cu130.copies[1],)
    cu129 = matrix.cells[2]
    assert [(c.destination.name, c.local_label) for c in cu129.copies] == [("whl", "cu129")]
    assert cu129.relabelled == ()


def test_the_github_destination_of_another_repository_and_its_git_index() -> None:
    matrix = load_matrix(SGL)
    whl = matrix.destinations["whl"]
    assert isinstance(whl, GithubDestination)
    assert (whl.repository, whl.token_secret, whl.index) == (
        "sgl-project/whl", "GH_PAT_FOR_WHL_RELEASE", "whl-index",
    )  # fmt: skip
    # pip finds its wheels where the git index is served
    assert whl.index_url == "https://docs.sglang.io/whl/"
    assert "whl-index" not in matrix.destinations, "no wheel goes to an index"
    assert matrix.indexes == {
        "whl-index": GitIndexDestination(
            name="whl-index",
            url="https://github.com/sgl-project/whl.git",
            repository="sgl-project/whl",
            branch="gh-pages",
            directory="",
            index_url="https://docs.sglang.io/whl/",
            token_secret="GH_PAT_FOR_WHL_RELEASE",
            lists=("whl",),
        )
    }


def git_index_matrix(tmp_path: Path, index: str) -> Matrix:
    text = SGL.read_text(encoding="utf-8")
    start = text.index("  whl-index:")
    path = tmp_path / "release" / "matrix.yaml"  # beside ../project, as in tests/data/matrix
    path.parent.mkdir()
    path.write_text(text[:start] + index, encoding="utf-8")
    (tmp_path / "project").symlink_to(DATA / "project")
    return load_matrix(path)


def test_a_git_index_anywhere_git_reaches_in_a_directory_of_it(tmp_path: Path) -> None:
    matrix = git_index_matrix(
        tmp_path,
        "  whl-index:\n"
        "    kind: git-index\n"
        "    url: file:///srv/git/whl.git\n"
        "    directory: ./simple/\n"
        "    index-url: https://whl.example.org/simple\n",
    )
    index = matrix.indexes["whl-index"]
    assert (index.url, index.repository) == ("file:///srv/git/whl.git", None)
    assert index.branch == "gh-pages"
    assert (index.directory, index.index_url) == ("simple", "https://whl.example.org/simple/")
    assert index.token_secret is None, "GITHUB_TOKEN, the job's own"


def test_release_matrix_shows_every_copy(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "--matrix", str(SGL), "--json"]) == 0
    cells = json.loads(capsys.readouterr().out)["cells"]
    assert [len(c.get("copies", [])) for c in cells] == [2, 2, 0, 0]
    assert cells[1]["copies"] == [
        {
            "destination": "pypi",
            "destination_kind": "pypi",
            "local_label": None,
            "version": "0.1.0",
            "wheel": "k3_kernels-0.1.0-py3-none-manylinux_2_28_aarch64.whl",
        },
        {
            "destination": "whl",
            "destination_kind": "github",
            "local_label": "cu130",
            "version": "0.1.0+cu130",
            "wheel": "k3_kernels-0.1.0+cu130-py3-none-manylinux_2_28_aarch64.whl",
        },
    ]
    # the built copy's, as a cell of one destination says it
    assert cells[1]["wheel"] == cells[1]["copies"][0]["wheel"]
    assert main(["matrix", "--matrix", str(SGL)]) == 0
    table = capsys.readouterr().out
    assert "4 cells, 6 wheels" in table
    for name in (c["wheel"] for cell in cells for c in cell.get("copies", [cell])):
        assert name in table


def test_a_list_of_one_is_the_destination_it_names() -> None:
    matrix = load_matrix(SGL)
    text = SGL.read_text(encoding="utf-8").replace(
        "    destination: whl\n    local-label: cu129\n",
        "    destination: [{name: whl, local-label: cu129}]\n",
    )
    listed = matrix_from_text(text, SGL)
    assert [cell_dict(c) for c in listed.cells] == [cell_dict(c) for c in matrix.cells]


def test_two_copies_of_one_file_and_two_builds_of_one_filename_are_refused(
    tmp_path: Path,
) -> None:
    """The manifest, the publish record and verify hold one file per name: a copy is its
    own file, so two copies of one build with one label (PyPI and a mirror) are refused
    where they are written, as two builds of one filename are."""
    head = (
        "project: ../project\n"
        'defaults: {arches: [x86_64], manylinux: "2_28", sms: [80]}\n'
        "destinations:\n"
        "  pypi: {kind: pypi}\n"
        "  mirror: {kind: github, repository: o/mirror}\n"
        "cuda:\n"
    )
    (tmp_path / "project").symlink_to(DATA / "project")
    path = tmp_path / "release" / "matrix.yaml"
    path.parent.mkdir()
    path.write_text(head + '  "13.0": {destination: [pypi, mirror]}\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_matrix(path)
    assert list(caught.value.problems) == [
        "matrix.yaml:7:32: cuda[\"13.0\"].destination[1]: 'mirror' without a label would be "
        "the very file of the copy for 'pypi': each copy of one build is its own file, a label "
        "per copy (give this one another local-label)"
    ]
    path.write_text(
        head + '  "13.0": {destination: [pypi, {name: mirror, local-label: cu130}]}\n'
        '  "12.9": {destination: mirror}\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        load_matrix(path)
    (problem,) = caught.value.problems
    assert problem.startswith(
        'matrix.yaml:8:3: cuda["12.9"]: CUDA 13.0 and 12.9 both produce '
        "k3_kernels-0.1.0-py3-none-manylinux_2_28_x86_64.whl, for 'pypi' and 'mirror': one "
        "release cannot hold two files of one name"
    ), problem


def torch_matrix(cuda: str) -> Matrix:
    head = (
        f"project: {TORCH_FIXTURE}\n"
        "build: {backend: torch}\n"
        'defaults: {arches: [x86_64], sms: [80, 90], ptx: 90, manylinux: "2_28"}\n'
        "destinations:\n"
        "  pypi: {kind: pypi}\n"
        "  gh: {kind: github, repository: k3-project/k3-torch-ops}\n"
        "  gh2: {kind: github, repository: k3-project/k3-torch-ops-2}\n"
        "cuda:\n"
    )
    return matrix_from_text(head + cuda, TORCH_FIXTURE / "matrix.yaml")


def test_each_copy_of_several_torch_versions_carries_its_own_torch_label() -> None:
    matrix = torch_matrix(
        '  "12.9":\n'
        '    torch: ["2.10.0", "2.11.0"]\n'
        '    python: "3.12"\n'
        "    destination:\n"
        "      - {name: gh, local-label: 'cu129torch{torch}'}\n"
        "      - {name: gh2, local-label: 'pt{torch}'}\n"
    )
    assert [[c.as_copy(p).local_label for p in c.copies] for c in matrix.cells] == [
        ["cu129torch2.10", "pt2.10"],
        ["cu129torch2.11", "pt2.11"],
    ]
    with pytest.raises(ConfigError) as caught:
        torch_matrix(
            '  "12.9":\n'
            '    torch: ["2.10.0", "2.11.0"]\n'
            '    python: "3.12"\n'
            "    destination: [{name: gh, local-label: 'cu129torch{torch}'}, {name: gh2, "
            "local-label: cu129}]\n"
        )
    (problem,) = caught.value.problems
    assert 'cuda["12.9"].destination[1].local-label: CUDA 12.9 builds torch 2.10.0, 2.11.0' in (
        problem
    )
    with pytest.raises(ConfigError) as caught:
        torch_matrix(
            '  "12.9":\n'
            '    torch: ["2.10.0", "2.11.0"]\n'
            '    python: "3.12"\n'
            "    destination: [{name: gh, local-label: 'cu129torch{torch}'}, pypi]\n"
        )
    assert "sends 2 torch versions to PyPI" in "\n".join(caught.value.problems)
