"""The verify stage's wiring, without a request: which tags, which index credentials and
which signer `release verify --tag` / `--latest` works with."""

from __future__ import annotations

from pathlib import Path

import pytest

from release.destinations.reach import Reach
from release.destinations.registry import index_auth
from release.errors import ConfigError, VerifyError
from release.matrix import GithubDestination, load_matrix
from release.provenance.signature import ExpectedSigner
from release.verify.checks import VerifySettings, picked_file
from release.verify.run import VerifyTarget, expected_signer, named_statically, tags_to_verify

REPO = Path(__file__).resolve().parents[2]
MATRIX = load_matrix(REPO / "matrix.yaml")


def reach(environ: dict[str, str] | None = None) -> Reach:
    return Reach(environ or {}, command="release verify", read_only=True)


def test_the_tags_given_are_verified_and_none_at_all_is_an_error() -> None:
    target = VerifyTarget(tags=("v0.1.0", "v0.1.0"))
    assert target.from_destinations
    assert tags_to_verify(MATRIX, target, reach()) == ["v0.1.0", "v0.1.0"]
    assert not VerifyTarget().from_destinations
    with pytest.raises(VerifyError, match="no published release to verify"):
        tags_to_verify(MATRIX, VerifyTarget(tags=()), reach())


def test_latest_needs_a_github_destination(tmp_path: Path) -> None:
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        f"project: {REPO / 'tests' / 'data' / 'matrix' / 'project'}\n"
        "defaults: {arches: [x86_64], sms: [80], manylinux: '2_28'}\n"
        "cuda:\n"
        "  '13.0': {destination: pypi}\n"
        "destinations:\n"
        "  pypi: {kind: pypi}\n",
        encoding="utf-8",
    )
    loaded = load_matrix(matrix)
    with pytest.raises(ConfigError) as raised:
        tags_to_verify(loaded, VerifyTarget(latest=1), reach())
    assert raised.value.problems == ("--latest: the matrix has no github destination",)


def test_index_credentials_go_to_the_pypi_index_origin_only() -> None:
    assert index_auth(MATRIX.destinations.values(), reach()).basic == {}
    auth = index_auth(MATRIX.destinations.values(), reach({"TWINE_API_KEY": "pypi-key-1234"}))
    (origin,) = auth.basic
    assert origin == "https://pypi.org"
    assert auth.basic[origin].username == "__token__"
    assert auth.basic[origin].password.reveal() == "pypi-key-1234"
    assert auth.bearer == {}


def test_the_expected_signer_is_the_matrixs_repository_at_the_releases_tag() -> None:
    (github,) = [d for d in MATRIX.destinations.values() if isinstance(d, GithubDestination)]
    signer = expected_signer(MATRIX, "0.1.0", VerifySettings())
    assert signer == ExpectedSigner(
        repository=github.repository,
        workflow=".github/workflows/release.yml",
        ref=f"refs/tags/{github.tag_template.format(version='0.1.0')}",
    )
    reusable = VerifySettings(
        provenance_workflow=".github/workflows/ship.yml",
        provenance_signer_workflow="k3-org/tools/.github/workflows/release.yml@refs/tags/v1",
    )
    named = expected_signer(MATRIX, "0.1.0+cu129", reusable)
    assert named is not None
    assert (named.workflow, named.signer_workflow) == (
        ".github/workflows/ship.yml",
        "k3-org/tools/.github/workflows/release.yml@refs/tags/v1",
    )
    assert signer is not None
    assert named.ref == signer.ref  # the tag names the public version
    assert expected_signer(MATRIX, "not a version", VerifySettings()) == ExpectedSigner(
        repository=github.repository, workflow=".github/workflows/release.yml", ref=None
    )


def test_verify_reads_the_matrixnamed_statically_and_never_asks_the_build_backend(
    tmp_path: Path,
) -> None:
    """A computed version stands in as 0 (each release's version is its record's or its
    tag's); a computed name is refused with the remedy; neither asks anything."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "setup.py").write_text(
        'from setuptools import setup\nsetup(name="k3-ops", version=read_version())\n'
    )
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        "project: proj\n"
        "defaults: {arches: [x86_64], sms: [80], manylinux: '2_28'}\n"
        "cuda:\n  '13.0': {destination: pypi}\n"
        "destinations:\n  pypi: {kind: pypi}\n",
        encoding="utf-8",
    )
    loaded = load_matrix(matrix, named_statically)
    assert (loaded.project.name, str(loaded.project.version)) == ("k3-ops", "0")
    (project / "setup.py").write_text(
        "from setuptools import setup\nsetup(name=NAME, version='1')\n"
    )
    with pytest.raises(ConfigError) as raised:
        load_matrix(matrix, named_statically)
    (problem,) = raised.value.problems
    assert f"{project / 'setup.py'}:2: the name is computed (NAME)" in problem
    assert "release verify reads the project's name from its files" in problem


def test_pips_report_gives_the_file_it_took_and_the_sha256_of_its_bytes() -> None:
    """A server that answers pip alone with other bytes under the release's filename: the
    name matched, and the check passed on it."""
    report = {
        "install": [
            {
                "download_info": {
                    "url": "https://h/simple/k3/k3-0.1.0-py3-none-any.whl#sha256=" + "a" * 64,
                    "archive_info": {"hashes": {"sha256": "B" * 64}},
                }
            }
        ]
    }
    assert picked_file(report) == ("k3-0.1.0-py3-none-any.whl", "b" * 64)
    assert picked_file({"install": [{"download_info": {"url": "https://h/x.whl"}}]}) == (
        "x.whl",
        None,
    )
    assert picked_file({"install": "no"}) == (None, None)
