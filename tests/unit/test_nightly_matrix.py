"""release.matrix.nightly: a commit's dev version, the nightly matrix of the shipped one,
and the channel's keys (its bad inputs are files under tests/data/matrix/bad: nightly*.yaml)."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from release.errors import ConfigError
from release.matrix import Commit, S3Destination, load_matrix, nightly_matrix, nightly_version
from release.matrix.nightly import keep_list_problem

REPO = Path(__file__).resolve().parents[2]
COMMIT = Commit(sha="a" * 40, time=1_733_212_345)


@pytest.mark.parametrize(
    ("project", "nightly"),
    [
        ("0.1.1", "0.1.1.dev1733212345"),
        ("0.2.0rc1", "0.2.0rc1.dev1733212345"),
        ("0.2.0.dev0", "0.2.0.dev1733212345"),
        ("0.1.0.post1", "0.1.0.post1.dev1733212345"),
        ("1!2.0", "1!2.0.dev1733212345"),
    ],
)
def test_a_nightly_is_the_project_version_with_the_commit_time_as_dev(
    project: str, nightly: str
) -> None:
    assert nightly_version(Version(project), COMMIT.time) == Version(nightly)
    assert str(nightly_version(Version(project), COMMIT.time)) == nightly


def test_a_later_commit_sorts_higher_and_every_nightly_below_its_release() -> None:
    earlier = nightly_version(Version("0.1.1"), COMMIT.time)
    later = nightly_version(Version("0.1.1"), COMMIT.time + 1)
    assert earlier < later < Version("0.1.1")
    assert Version("0.1.0") < earlier


def test_the_shipped_matrix_has_a_channel_and_its_nightly_keeps_the_labels() -> None:
    matrix = load_matrix(REPO / "matrix.yaml")
    assert matrix.nightly is not None
    assert matrix.nightly.keep == 60
    assert matrix.nightly.keep_list_object == "keep-list.txt"
    assert matrix.nightly.fallout == "archive"
    destination = matrix.nightly.destination
    assert isinstance(destination, S3Destination)
    assert (destination.bucket, destination.prefix, destination.region) == (
        "k3-wheels",
        "k3-kernels/",
        "auto",
    )
    nightly = nightly_matrix(matrix, COMMIT)
    assert nightly.commit == COMMIT
    assert [c.wheel_filename for c in nightly.cells] == [
        "k3_kernels-0.1.0.dev1733212345-py3-none-manylinux_2_28_x86_64.whl",
        "k3_kernels-0.1.0.dev1733212345-py3-none-manylinux_2_28_aarch64.whl",
        "k3_kernels-0.1.0.dev1733212345+cu129-py3-none-manylinux_2_28_x86_64.whl",
        "k3_kernels-0.1.0.dev1733212345+cu129-py3-none-manylinux_2_28_aarch64.whl",
    ]
    assert {c.destination.name for c in nightly.cells} == {"nightly"}
    # the release is untouched
    assert [c.destination.name for c in matrix.cells] == ["pypi", "pypi", "github", "github"]


def test_a_nightly_needs_a_channel_and_a_full_commit_id(tmp_path: Path) -> None:
    text = (REPO / "matrix.yaml").read_text(encoding="utf-8")
    without = text[: text.index("\nnightly:\n")] + "\n"
    (tmp_path / "matrix.yaml").write_text(without, encoding="utf-8")
    (tmp_path / "csrc").symlink_to(REPO / "csrc")
    with pytest.raises(ConfigError, match="has no nightly channel"):
        nightly_matrix(load_matrix(tmp_path / "matrix.yaml"), COMMIT)
    with pytest.raises(ConfigError, match="not a full commit id"):
        nightly_matrix(load_matrix(REPO / "matrix.yaml"), Commit(sha="abc123", time=1))


def test_an_s3_destination_without_index_url_is_served_path_style(tmp_path: Path) -> None:
    text = (REPO / "matrix.yaml").read_text(encoding="utf-8")
    text = text.replace("    index-url: https://wheels.k3-project.dev/k3-kernels/   # where the "
                        "bucket is served\n", "")  # fmt: skip
    (tmp_path / "matrix.yaml").write_text(text, encoding="utf-8")
    (tmp_path / "csrc").symlink_to(REPO / "csrc")
    nightly = load_matrix(tmp_path / "matrix.yaml").nightly
    assert nightly is not None
    assert nightly.destination.index_url == (
        "https://k3-project.r2.cloudflarestorage.com/k3-wheels/k3-kernels/"
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("0.1.1.dev1733212345", None),
        ("0.1.1", "not a nightly version"),
        ("0.1.1.dev5+cu129", "write 0.1.1.dev5"),
        ("latest", "not a PEP 440 version"),
    ],
)
def test_a_keep_list_names_nightly_versions(text: str, problem: str | None) -> None:
    found = keep_list_problem(text)
    assert (found is None) if problem is None else (found is not None and problem in found)
