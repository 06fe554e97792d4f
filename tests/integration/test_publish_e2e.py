"""End to end: cu13 to pypiserver, cu129 to the stand-in GitHub, the index served on
127.0.0.1, and a fresh venv's pip installing each variant from where it was published."""

from __future__ import annotations

import functools
import subprocess
import threading
import venv
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from release.cli import main
from release.fsutil import sha256_file
from tests.github_standin import GitHubStandIn
from tests.integration.conftest import PypiServer
from tests.integration.wheels import (
    PROJECT,
    VERSION,
    Release,
    github_destination,
    make_release,
    pypi_destination,
)


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


@pytest.mark.slow
def test_publish_index_and_pip_install_both_variants(
    pypiserver: PypiServer, github_standin: GitHubStandIn, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    credentials(monkeypatch, pypiserver, github_standin)
    release = both(tmp_path, pypiserver, github_standin)
    index_dir = tmp_path / "site"
    assert main(["publish", "--dist", str(release.dist), "--index-dir", str(index_dir)]) == 0
    err = capsys.readouterr().err
    # piped: the uploads' progress as plain lines, the last at the total of the plan
    progress = [line for line in err.splitlines() if line.startswith("uploads: ")]
    assert progress, err
    sent, total = progress[-1].rsplit(": ", 1)[1].split(" of ")
    assert sent == total
    wheels = sum(w.stat().st_size for w in release.dist.glob("*.whl"))
    assert float(total.removesuffix(" MiB")) >= round(wheels / 2**20, 1)

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = str(env_dir / "bin" / "python")
    private = pypiserver.index_url.replace(
        "http://", f"http://{pypiserver.username}:{pypiserver.password}@"
    )

    def install(index_url: str) -> str:
        target = tmp_path / f"target-{len(list(tmp_path.glob('target-*')))}"
        subprocess.run(
            [python, "-m", "pip", "--isolated", "install", "--no-deps", "--no-cache-dir",
             "--target", str(target), "--index-url", index_url, f"{PROJECT}=={VERSION}"],
            check=True, capture_output=True,
        )  # fmt: skip
        (dist_info,) = target.glob("k3_kernels-*.dist-info")
        return dist_info.name

    assert install(private) == "k3_kernels-0.1.0.dist-info"
    with serve(index_dir) as base:
        assert install(f"{base}cu129/") == "k3_kernels-0.1.0+cu129.dist-info"
        assert (
            main(
                [
                    "verify",
                    "--dist",
                    str(release.dist),
                    "--index-url",
                    f"cu129={base}cu129/",
                ]
            )
            == 0
        )
    out = capsys.readouterr().out
    assert "0 failed" in out


@pytest.mark.slow
def test_the_index_is_regenerated_from_every_release_never_appended(
    pypiserver: PypiServer, github_standin: GitHubStandIn, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    credentials(monkeypatch, pypiserver, github_standin)
    release = both(tmp_path, pypiserver, github_standin)
    index_dir = tmp_path / "site"
    args = [
        "publish",
        "--dist",
        str(release.dist),
        "--index-dir",
        str(index_dir),
        "--only",
        "github",
    ]
    assert main(args) == 0
    # a replaced asset (other bytes): the index must list the new hash once, not both
    github = next(w.destination for w in release.manifest.wheels if w.destination.kind == "github")
    (rebuilt,) = make_release(tmp_path / "v2", pypi=None, github=github, payload=b"rebuilt").wheels
    assert main([*args[:2], str(tmp_path / "v2"), *args[3:], "--replace"]) == 0
    page = (index_dir / "cu129" / "k3-kernels" / "index.html").read_text()
    assert page.count(rebuilt.name + "</a>") == 1
    assert f"#sha256={sha256_file(rebuilt)}" in page


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
