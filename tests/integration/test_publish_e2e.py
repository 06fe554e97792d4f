"""End to end: cu13 to pypiserver, cu129 to the stand-in GitHub, the index served on
127.0.0.1, and a fresh venv's pip installing each variant from where it was published."""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pypi_attestations import GitHubPublisher, Provenance

from release.cli import main
from release.fsutil import sha256_file
from tests.github_standin import GitHubStandIn
from tests.integration.wheels import (
    Release,
    attestation_for,
    github_destination,
    make_release,
    pypi_destination,
)
from tests.pypi_server import PypiServer


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serve(directory: Path) -> Iterator[str]:
    """A static web server over `directory` (as GitHub Pages would serve the index)."""
    handler = functools.partial(_Quiet, directory=str(directory))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def both(tmp_path: Path, pypi: PypiServer, gh: GitHubStandIn, **kw: Any) -> Release:
    return make_release(
        tmp_path / "dist",
        pypi=pypi_destination(pypi.url),
        github=github_destination(gh.api_url, index_url="https://k3-org.github.io/k3-kernels/"),
        **kw,
    )


def credentials(monkeypatch: pytest.MonkeyPatch, pypi: PypiServer, gh: GitHubStandIn) -> None:
    for key, value in pypi.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("GITHUB_TOKEN", gh.token)


def test_the_companion_files_are_left_in_dist_as_published_for_the_workflow_to_attest(
    pypiserver: PypiServer, github_standin: GitHubStandIn, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    credentials(monkeypatch, pypiserver, github_standin)
    release = both(tmp_path, pypiserver, github_standin, arches=("x86_64", "aarch64"))
    assert main(["publish", "--dist", str(release.dist)]) == 0
    (published,) = github_standin.releases("k3-org/k3-kernels")
    assets = {a.name: a.data for a in github_standin.assets(published.id)}
    companions = release.dist / "companions"
    left = {p.name: p.read_bytes() for p in companions.iterdir()}
    assert left == {name: data for name, data in assets.items() if not name.endswith(".whl")}
    assert "release-manifest.json" in left
    github_wheels = {e.filename for e in release.manifest.wheels if e.local_label}
    assert {n for n in left if n.endswith(".metadata")} == {f"{w}.metadata" for w in github_wheels}
    # a re-run uploads nothing and leaves the same files
    assert main(["publish", "--dist", str(release.dist)]) == 0
    assert {p.name: p.read_bytes() for p in companions.iterdir()} == left


def github_only(
    tmp_path: Path, gh: GitHubStandIn, monkeypatch: pytest.MonkeyPatch, **kw: Any
) -> Release:
    monkeypatch.setenv("GITHUB_TOKEN", gh.token)
    github = github_destination(gh.api_url, index_url="https://k3-org.github.io/x/")
    return make_release(tmp_path / "dist", pypi=None, github=github, **kw)


def test_a_signed_github_wheel_has_its_provenance_on_the_release_and_linked_from_the_index(
    github_standin: GitHubStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    release = github_only(tmp_path, github_standin, monkeypatch, arches=("x86_64", "aarch64"))
    signed, unsigned = sorted(release.wheels, key=lambda w: "aarch64" in w.name)
    attestation_for(signed)
    site = tmp_path / "site"
    assert main(["publish", "--dist", str(release.dist), "--index-dir", str(site)]) == 0

    (published,) = github_standin.releases("k3-org/k3-kernels")
    assets = {a.name: a for a in github_standin.assets(published.id)}
    assert f"{unsigned.name}.provenance" not in assets
    provenance = Provenance.model_validate_json(assets[f"{signed.name}.provenance"].data)
    (bundle,) = provenance.attestation_bundles
    assert isinstance(bundle.publisher, GitHubPublisher)
    assert (bundle.publisher.repository, bundle.publisher.workflow) == (
        "k3-org/k3-kernels",
        "release.yml",
    )
    (attestation,) = bundle.attestations
    assert attestation.statement["subject"] == [
        {"name": signed.name, "digest": {"sha256": sha256_file(signed)}}
    ]

    page = json.loads((site / "cu129" / "k3-kernels" / "index.json").read_text())
    assert page["meta"]["api-version"] == "1.3"
    files = {f["filename"]: f for f in page["files"]}
    link = files[signed.name]["provenance"]
    assert link.endswith(f"/releases/download/v0.1.0/{signed.name}.provenance")
    assert "provenance" not in files[unsigned.name]
    html_page = (site / "cu129" / "k3-kernels" / "index.html").read_text()
    assert html_page.count("data-provenance=") == 1
    assert f'data-provenance="{link}"' in html_page

    # the suite's attestations are not Sigstore's (their certificate and log entry are made
    # up): verify follows the link and refuses what it serves
    capsys.readouterr()
    report = tmp_path / "verify.json"
    with serve(site) as base:
        args = ["verify", "--dist", str(release.dist), "--index-url", f"cu129={base}cu129/"]
        assert main([*args, "--json-file", str(report)]) == 7
    checks = json.loads(report.read_text())["checks"]
    (linked,) = [c for c in checks if c["subject"].endswith(f"{signed.name} provenance")]
    assert (linked["ok"], linked["url"]) == (False, link)
    assert linked["detail"] == "provenance refused: not a Sigstore bundle (logId: Field required)"
    # the record says the signed wheel was attested: provenance is then required of every
    # file and companion of the release, without --require-provenance; the matrix at hand
    # (the checkout's) names another repository, so none can be checked, and each fails
    record = json.loads((release.dist / "published.json").read_text())
    assert {f["filename"]: f["attested"] for f in record["files"]} == {
        signed.name: True,
        unsigned.name: False,
    }
    others = [c for c in checks if not c["ok"] and c is not linked]
    assert {c["subject"] for c in others} == {f["filename"] for f in record["files"]} | {
        c["filename"] for c in record["companions"]
    }
    assert all(c["check"] == "provenance" for c in others)
    assert all(c["detail"].startswith("provenance not checked: ") for c in others)


def test_a_github_wheel_signed_in_another_repository_stops_publish_before_any_upload(
    github_standin: GitHubStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    (wheel,) = github_only(tmp_path, github_standin, monkeypatch).wheels
    attestation_for(wheel, signer=("someone/else", ".github/workflows/release.yml"))
    assert main(["publish", "--dist", str(wheel.parent)]) == 5
    shown = capsys.readouterr()
    plan = " ".join(shown.out.split())  # the plan wraps its reasons
    assert "it was signed in someone/else, not k3-org/k3-kernels" in plan
    assert "1 refused: nothing was uploaded" in shown.err
    assert github_standin.releases("k3-org/k3-kernels") == ()
