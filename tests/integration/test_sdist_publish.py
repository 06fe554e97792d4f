"""The release's sdist through publish and verify: to the default variant's PyPI (a real
pypiserver) beside its wheels, never to the GitHub release of the local-label variant;
the plan of `publish --dry-run` shows it, a re-run skips it, other bytes under its name are
a CONFLICT before anything is sent, and verify checks its URL, size, sha256 and listing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from release.cli import main
from tests.github_standin import GitHubStandIn
from tests.integration.test_publish_e2e import both, credentials, serve
from tests.integration.wheels import attestation_for, make_release, pypi_destination, with_sdist
from tests.pypi_server import PypiServer

SDIST = "k3_kernels-0.1.0.tar.gz"


def test_the_sdist_goes_to_pypi_only_and_verify_checks_it(
    pypiserver: PypiServer, github_standin: GitHubStandIn, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    credentials(monkeypatch, pypiserver, github_standin)
    pypi = pypi_destination(pypiserver.url)
    release = with_sdist(both(tmp_path, pypiserver, github_standin), pypi)
    dist = str(release.dist)
    assert main(["publish", "--dist", dist, "--dry-run", "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    (row,) = [c for c in planned["companions"] if c["filename"] == SDIST]
    assert (row["action"], row["purpose"]) == ("upload", "sdist")
    assert row["url"] == f"{pypiserver.url}packages/{SDIST}"

    index_dir = tmp_path / "site"
    assert main(["publish", "--dist", dist, "--index-dir", str(index_dir)]) == 0
    sdist_bytes = (release.dist / SDIST).read_bytes()
    assert pypiserver.files()[SDIST] == sdist_bytes
    assert sorted(pypiserver.files()) == sorted([SDIST, release.wheels[0].name])
    (published,) = github_standin.state.all_releases("k3-org/k3-kernels")
    assets = [a.name for a in github_standin.assets(published.id)]
    assert SDIST not in assets
    assert release.wheels[1].name in assets
    record = json.loads((release.dist / "published.json").read_text())
    (recorded,) = [c for c in record["companions"] if c["filename"] == SDIST]
    assert recorded["purpose"] == "sdist"
    assert (release.dist / "companions" / SDIST).read_bytes() == sdist_bytes  # attested
    capsys.readouterr()

    assert main(["publish", "--dist", dist, "--dry-run", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert [c["action"] for c in again["companions"] if c["filename"] == SDIST] == ["identical"]

    with serve(index_dir) as base:
        # the stand-ins cannot sign: the download and listing checks are this test's
        code = main(["verify", "--dist", dist, "--index-url", f"cu129={base}cu129/", "--no-pip",
                     "--no-provenance", "--json"])  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    mine = {c["check"]: c for c in report["checks"] if c["subject"] == SDIST}
    assert code == 0, report
    assert mine["download"]["ok"], mine
    assert mine["listing"]["ok"], mine
    assert mine["listing"]["detail"] == "listed with the same sha256"


def test_other_bytes_under_the_sdist_name_are_a_conflict_and_nothing_is_sent(
    pypiserver: PypiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    for key, value in pypiserver.env().items():
        monkeypatch.setenv(key, value)
    pypi = pypi_destination(pypiserver.url)
    first = with_sdist(make_release(tmp_path / "a", pypi=pypi), pypi)
    assert main(["publish", "--dist", str(first.dist)]) == 0
    second = make_release(tmp_path / "b", pypi=pypi, arches=("aarch64",))
    second = with_sdist(second, pypi)
    (second.dist / SDIST).write_bytes(b"x" + (first.dist / SDIST).read_bytes())
    capsys.readouterr()
    assert main(["publish", "--dist", str(second.dist)]) != 0
    err = capsys.readouterr().err
    assert SDIST in err, err  # load_dist: the file is not the one the manifest records
    # the same name, other bytes (as built): PyPI holds the first, so a CONFLICT
    second = with_sdist(second, pypi, payload="# other\n")
    assert main(["publish", "--dist", str(second.dist)]) == 6
    out, err = capsys.readouterr()
    assert "CONFLICT" in out
    assert SDIST in out
    assert set(pypiserver.files()) == {SDIST, first.wheels[0].name}  # the aarch64 wheel too


def test_an_attestation_of_other_bytes_beside_the_sdist_stops_publish_before_any_upload(
    pypiserver: PypiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    for key, value in pypiserver.env().items():
        monkeypatch.setenv(key, value)
    pypi = pypi_destination(pypiserver.url)
    release = with_sdist(make_release(tmp_path / "dist", pypi=pypi), pypi)
    attestation_for(release.dist / SDIST, sha256="ab" * 32)  # signed before a rebuild, say
    assert main(["publish", "--dist", str(release.dist), "--json"]) == 5
    document = json.loads(capsys.readouterr().out)
    (row,) = [c for c in document["companions"] if c["filename"] == SDIST]
    assert row["action"] == "refused"
    assert row["reason"].startswith(f"{SDIST}.publish.attestation: it attests sha256 abababab")
    assert pypiserver.files() == {}
