"""`release verify`'s provenance checks fail closed (issue 40) and read a PyPI file's GitHub
build provenance where PyPI serves no PEP 740 attestation (issue 44): every file and
companion of the record checked, required where the record says the release was attested,
against the stand-in GitHub holding recorded, really signed bundles (tests/data/provenance)
and a served integrity API."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from pathlib import Path

import pytest

from release.cli import main
from release.credentials import github_token
from release.destinations.reach import Reach
from release.errors import ConfigError
from release.matrix import load_matrix
from release.provenance.signature import ExpectedSigner
from release.records.published import Published, PublishedCompanion, PublishedFile
from release.remote.github import GithubClient
from release.remote.httpclient import client as http_client
from release.remote.httpclient import fetch
from release.verify.checks import Check, VerifySettings
from release.verify.provenance import GITHUB_ROUTE, ProvenanceSources, provenance_checks
from release.verify.run import VerifyTarget, provenance_of
from tests.github_standin import DEFAULT_REPO, Fault, GitHubStandIn
from tests.integration.test_github_answers import release_env
from tests.integration.test_publish_e2e import serve
from tests.integration.test_verify import (
    FAST,
    MODELS,
    MODELS_REPO,
    QUICK,
    SDIST,
    attested_file,
    integrity_site,
    pypi_file,
    recorded,
)

MODELS_SHA256 = "c9709ce6fd5b67b59b4a28758cf14d3f411803c4b89b6068b1f1a8e4ee94c8ef"
MODELS_REF = "refs/tags/v0.0.4a2"
SDIST_REPO = "trailofbits/pypi-attestations"
CMAKE_PROJECT = Path(__file__).resolve().parents[1] / "fixtures" / "cmake_kernels"


def checks_of(
    gh: GitHubStandIn,
    release: Published,
    repository: str,
    settings: VerifySettings = FAST,
    *,
    ref: str | None = None,
    destinations: frozenset[str] = frozenset({"github", "pypi"}),
) -> dict[str, Check]:
    client = GithubClient(
        api_url=gh.api_url, token=github_token({"GITHUB_TOKEN": gh.token}), policy=QUICK
    )
    expected = ExpectedSigner(repository=repository, workflow=settings.provenance_workflow, ref=ref)
    sources = ProvenanceSources(
        expected=expected, github={"github": (client, repository)}, destinations=destinations
    )
    with http_client() as http:
        checks = provenance_checks(
            release, sources, settings, lambda url: fetch(http, url, keep=True, policy=QUICK)
        )
    return {c.subject: c for c in checks}


def release_of(*files: PublishedFile, companions: tuple[PublishedCompanion, ...] = ()) -> Published:
    return Published(
        project="pypi-attestations", version="0.0.19", files=files, companions=companions
    )


def companion(gh: GitHubStandIn, repository: str, name: str, sha256: str) -> PublishedCompanion:
    url = f"{gh.web_url}/{repository}/releases/download/v0/{name}"
    return PublishedCompanion(
        filename=name, sha256=sha256, size=1, url=url, of="release", purpose="manifest"
    )


def test_a_release_the_record_says_was_attested_fails_without_its_attestations(
    github_standin: GitHubStandIn,
) -> None:
    """Point 6: no --require-provenance, and still "no provenance" fails, for the wheels and
    the companions alike; the same release not said to be attested passes as before."""
    bundle = recorded(f"{MODELS}.sigstore")
    wheel = attested_file(github_standin, DEFAULT_REPO, bundle)  # nothing stored for it
    manifest = companion(github_standin, DEFAULT_REPO, "release-manifest.json", "1" * 64)
    unsaid = checks_of(github_standin, release_of(wheel, companions=(manifest,)), DEFAULT_REPO)
    assert {name: (c.ok, c.detail) for name, c in unsaid.items()} == {
        MODELS: (True, "no provenance"),
        "release-manifest.json": (True, "no provenance"),
    }
    said = release_of(replace(wheel, attested=True), companions=(manifest,))
    checks = checks_of(github_standin, said, DEFAULT_REPO)
    assert {name: (c.ok, c.detail) for name, c in checks.items()} == {
        MODELS: (False, "no provenance"),
        "release-manifest.json": (False, "no provenance"),
    }
    assert checks["release-manifest.json"].url == (
        f"{github_standin.api_url}/repos/{DEFAULT_REPO}/attestations/sha256:{'1' * 64}"
    )


def test_a_companion_is_checked_through_the_attestations_api(
    github_standin: GitHubStandIn,
) -> None:
    """Point 2: the companions (`.metadata`, NCCL files, release-manifest.json) get a
    provenance check each, on the attestations API of the repository that serves them."""
    github_standin.add_repo(MODELS_REPO)
    github_standin.add_attestation(MODELS_REPO, recorded(f"{MODELS}.sigstore"))
    attested = companion(github_standin, MODELS_REPO, "nccl-cu12.txt", MODELS_SHA256)
    other = companion(github_standin, MODELS_REPO, "x.whl.metadata", "2" * 64)
    wheel = attested_file(github_standin, MODELS_REPO, recorded(f"{MODELS}.sigstore"))
    release = release_of(wheel, companions=(attested, other))
    required = replace(FAST, require_provenance=True)
    checks = checks_of(github_standin, release, MODELS_REPO, required, ref=MODELS_REF)
    assert checks["nccl-cu12.txt"].ok
    assert checks["nccl-cu12.txt"].detail.startswith(f"provenance: {MODELS_REPO} ")
    assert (checks["x.whl.metadata"].ok, checks["x.whl.metadata"].detail) == (
        False,
        "no provenance",
    )


def test_a_record_entry_whose_destination_the_matrix_does_not_name_is_an_error(
    github_standin: GitHubStandIn,
) -> None:
    """Point 2: never a skip (it was: exit 0 and no provenance line)."""
    wheel = replace(attested_file(github_standin, DEFAULT_REPO, recorded(f"{MODELS}.sigstore")),
                    destination="cu130")  # fmt: skip
    with pytest.raises(ConfigError) as raised:
        checks_of(github_standin, release_of(wheel), DEFAULT_REPO)
    assert raised.value.exit_code == 2
    assert raised.value.message == (
        f"{MODELS}: its destination 'cu130' is not in the matrix (it names github, pypi)"
    )
    assert github_standin.request_log == ()  # refused before anything was asked


DEEP = "[" * 980 + "]" * 980


@pytest.mark.parametrize("required", [False, True], ids=["not-required", "required"])
def test_an_attestations_answer_nested_980_deep_is_one_failed_check(
    github_standin: GitHubStandIn, required: bool
) -> None:
    """Issue 49, F14: GitHub's answer is read by the bounded reader (release.fsutil): one
    line of why, never a RecursionError, whether provenance is required or not."""
    github_standin.faults.add(
        Fault(path=r"/attestations/", status=200, count=10,
              body='{"attestations": [{"bundle": ' + DEEP + "}]}",
              headers={"content-type": "application/json"})
    )  # fmt: skip
    wheel = attested_file(github_standin, DEFAULT_REPO, recorded(f"{MODELS}.sigstore"))
    settings = replace(FAST, require_provenance=required)
    check = checks_of(github_standin, release_of(wheel), DEFAULT_REPO, settings)[MODELS]
    assert not check.ok
    assert check.detail.startswith(
        "provenance not read: GitHub answered `list the attestations of sha256:"
    )
    assert check.detail.endswith("(nested too deep: more than 64 levels)")


@pytest.mark.parametrize("items", [[1], ["bundle"], [None], [[{"bundle": {}}]]], ids=str)
def test_an_attestation_that_is_no_object_is_refused_not_taken_for_none(
    github_standin: GitHubStandIn, items: list[object]
) -> None:
    """GitHub answered 200 with attestations that are not objects: they were dropped, and the
    file passed as "no provenance" where provenance is not required. An answer that holds
    something is never read as holding nothing."""
    github_standin.faults.add(
        Fault(path=r"/attestations/", status=200, body={"attestations": items}, count=10)
    )
    wheel = attested_file(github_standin, DEFAULT_REPO, recorded(f"{MODELS}.sigstore"))
    check = checks_of(github_standin, release_of(wheel), DEFAULT_REPO)[MODELS]
    assert (check.ok, check.detail) == (
        False,
        "provenance refused: unreadable attestation: the item is not an object",
    )


def test_a_pypi_file_without_pep740_uses_its_github_build_provenance_and_says_so(
    github_standin: GitHubStandIn, tmp_path: Path
) -> None:
    """Issue 44: PyPI's integrity API answers 404 (a token upload), the GitHub attestations
    API holds the publish job's attestation of the same sha256: verified alike, and the
    check names the route and the URL it read."""
    github_standin.add_repo(MODELS_REPO)
    github_standin.add_attestation(MODELS_REPO, recorded(f"{MODELS}.sigstore"))
    (tmp_path / "pypi").mkdir()
    with serve(tmp_path / "pypi") as base:  # an index with no integrity API: 404
        on_pypi = replace(pypi_file(base), filename=MODELS, sha256=MODELS_SHA256, attested=True)
        checks = checks_of(github_standin, release_of(on_pypi), MODELS_REPO, ref=MODELS_REF)
        assert (checks[MODELS].ok, checks[MODELS].detail) == (
            True,
            f"provenance: {MODELS_REPO} .github/workflows/release.yml@{MODELS_REF}, signature "
            f"verified (Sigstore public-good) [{GITHUB_ROUTE}]",
        )
        assert checks[MODELS].url == (
            f"{github_standin.api_url}/repos/{MODELS_REPO}/attestations/sha256:{MODELS_SHA256}"
        )
        # signed at another tag: refused, and the route still named
        later = checks_of(github_standin, release_of(on_pypi), MODELS_REPO, ref="refs/tags/v9")
        assert (later[MODELS].ok, later[MODELS].detail) == (
            False,
            f"provenance refused: it was signed at {MODELS_REF}, not refs/tags/v9 [{GITHUB_ROUTE}]",
        )
        # neither route holds one: "no provenance" at PyPI's integrity URL, required here
        gone = replace(on_pypi, sha256="3" * 64)
        none = checks_of(github_standin, release_of(gone), MODELS_REPO, ref=MODELS_REF)
        assert (none[MODELS].ok, none[MODELS].detail) == (False, "no provenance")
        assert "/integrity/" in str(none[MODELS].url)


def test_the_cli_refuses_a_matrix_that_does_not_name_a_records_destination_with_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with release_env(tmp_path, monkeypatch) as (standin, common):
        assert main(["publish", *common, "--index-dir", str(tmp_path / "site")]) == 0
        matrix = Path(common[1])
        other = tmp_path / "other.yaml"
        other.write_text(
            matrix.read_text().replace("destination: github", "destination: gh")
            .replace("  github:\n", "  gh:\n"),
            encoding="utf-8",
        )  # fmt: skip
        (other.parent / "project").mkdir(exist_ok=True)
        standin.clear_log()
        capsys.readouterr()
        code = main(["verify", "--matrix", str(other), common[2], common[3], "--no-pip"])
        err = capsys.readouterr().err
        assert code == 2
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert errors[0].startswith("error: k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_")
        assert errors[0].endswith(": its destination 'github' is not in the matrix (it names gh)")
        assert standin.request_log == ()  # nothing was asked


@pytest.mark.parametrize("statement", [b"\xff not json", b"[1]", b'"s"'])
def test_a_hostile_provenance_object_on_pypis_integrity_api_is_refused_in_one_line(
    github_standin: GitHubStandIn, tmp_path: Path, statement: bytes
) -> None:
    """Point 3: it ended `release verify` in a JSONDecodeError traceback."""
    site = integrity_site(tmp_path / "pypi")
    served = next(site.rglob("provenance"))
    document = json.loads(served.read_text())
    envelope = document["attestation_bundles"][0]["attestations"][0]["envelope"]
    envelope["statement"] = base64.b64encode(statement).decode()
    served.write_text(json.dumps(document))
    with serve(site) as base:
        release = release_of(pypi_file(base))
        checks = checks_of(github_standin, release, SDIST_REPO, ref="refs/tags/v0.0.19")
    assert (checks[SDIST].ok, checks[SDIST].detail) == (
        False,
        "provenance refused: its signature does not match its statement (edited bytes, or "
        "another key's) [PEP 740 on PyPI]",
    )


def pypi_only_matrix(tmp_path: Path) -> Path:
    """The matrix release init writes by default: one PyPI destination, no GitHub one."""
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        f"project: {CMAKE_PROJECT}\nbuild: {{backend: cmake}}\n"
        "defaults: {arches: [x86_64], sms: [90], manylinux: '2_28'}\n"
        "cuda:\n  '13.0': {destination: pypi}\n"
        "destinations: {pypi: {kind: pypi}}\n",
        encoding="utf-8",
    )
    return matrix


def test_a_pypi_only_projects_files_are_checked_in_the_repository_its_workflow_runs_in(
    github_standin: GitHubStandIn, tmp_path: Path
) -> None:
    """Issue 44: a project whose matrix names no GitHub destination, published with a token
    (PyPI holds no PEP 740 attestation): the publish job's build provenance is read from the
    repository the workflow runs in (`--provenance-repository`, default $GITHUB_REPOSITORY),
    signed at `v` and the version; without that repository nothing can be checked, and a
    required check fails."""
    github_standin.add_repo(MODELS_REPO)
    github_standin.add_attestation(MODELS_REPO, recorded(f"{MODELS}.sigstore"))
    matrix = load_matrix(pypi_only_matrix(tmp_path))
    target = VerifyTarget(matrix=tmp_path / "matrix.yaml")
    reach = Reach(
        {"GITHUB_TOKEN": github_standin.token},
        command="release verify",
        github_api_url=github_standin.api_url,
    )
    required = replace(FAST, require_provenance=True)
    (tmp_path / "pypi").mkdir()
    with serve(tmp_path / "pypi") as base:  # an index with no integrity API: 404
        on_pypi = replace(pypi_file(base), filename=MODELS, sha256=MODELS_SHA256)
        release = replace(release_of(on_pypi), version=MODELS_REF.removeprefix("refs/tags/v"))
        named = replace(required, provenance_repository=MODELS_REPO)
        (check,) = provenance_of(release, matrix, target, named, reach)
        assert (check.ok, check.detail) == (
            True,
            f"provenance: {MODELS_REPO} .github/workflows/release.yml@{MODELS_REF}, signature "
            f"verified (Sigstore public-good) [{GITHUB_ROUTE}]",
        )
        later = replace(release, version="9")  # the caller's tag would be v9: refused
        (refused,) = provenance_of(later, matrix, target, named, reach)
        assert not refused.ok
        assert f"signed at {MODELS_REF}, not refs/tags/v9" in refused.detail
        (unnamed,) = provenance_of(release, matrix, target, required, reach)
        assert not unnamed.ok


def test_the_sdist_is_checked_on_the_pypi_route_beside_the_wheels(
    github_standin: GitHubStandIn, tmp_path: Path
) -> None:
    """The sdist is a PyPI file, not a GitHub Release asset: PEP 740 on PyPI, else the
    publish job's build provenance of its sha256 (never 'no download of a GitHub
    destination')."""
    github_standin.add_repo(MODELS_REPO)
    github_standin.add_attestation(MODELS_REPO, recorded(f"{MODELS}.sigstore"))
    (tmp_path / "pypi").mkdir()
    with serve(tmp_path / "pypi") as base:  # no integrity API: the GitHub route
        wheel = replace(pypi_file(base), filename=MODELS, sha256=MODELS_SHA256, attested=True)
        sdist = PublishedCompanion(
            filename="models-0.0.4a2.tar.gz", sha256=MODELS_SHA256, size=1,
            url=f"{base}packages/models-0.0.4a2.tar.gz", of="release", purpose="sdist",
        )  # fmt: skip
        release = release_of(wheel, companions=(sdist,))
        checks = checks_of(github_standin, release, MODELS_REPO, ref=MODELS_REF)
        assert checks[sdist.filename].ok, checks[sdist.filename].detail
        assert checks[sdist.filename].detail.endswith(f"[{GITHUB_ROUTE}]")
        other = replace(sdist, sha256="4" * 64)
        checks = checks_of(github_standin, release_of(wheel, companions=(other,)), MODELS_REPO,
                           ref=MODELS_REF)  # fmt: skip
        assert (checks[sdist.filename].ok, checks[sdist.filename].detail) == (
            False,
            "no provenance",
        )


def test_a_stalled_attestations_api_ends_at_verifys_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The attestations API was asked with the GitHub client's own policy (5 tries of up to
    120 s each, 900 s in all), whatever `--timeout` said: an answer held 8 s was waited for,
    file after file. `--timeout 1`: the first gives up at once, the rest are not asked."""
    with release_env(tmp_path, monkeypatch) as (gh, common):
        assert main(["publish", *common, "--index-dir", str(tmp_path / "site")]) == 0
        gh.faults.add(Fault(method="GET", path=r"/attestations/", status=404, hold=8, count=99))
        capsys.readouterr()
        code = main(["verify", *common, "--no-pip", "--timeout", "1", "--attempts", "2", "--json"])
        token = gh.token
    out, err = capsys.readouterr()
    assert code == 7
    document = json.loads(out)
    assert document["ok"] is False
    provenance = [c for c in document["checks"] if c["check"] == "provenance"]
    first, *rest = provenance
    assert first["detail"].startswith(
        "provenance not read: GitHub k3-org/k3-kernels attestations: "
    )
    assert "gave up at the time bound" in first["detail"]
    assert rest
    assert all("this run gave up on GitHub already" in c["detail"] for c in rest)
    assert "Traceback" not in err
    assert token not in out + err
