"""The full tier's part of tests/integration/test_publish_e2e.py (its docstring says what both
parts check).

End to end: cu13 to pypiserver, cu129 to the stand-in GitHub, the index served on
127.0.0.1, and a fresh venv's pip installing each variant from where it was published.
"""

from __future__ import annotations

import subprocess
import venv
from pathlib import Path

import pytest

from release.cli import main
from release.fsutil import sha256_file
from tests.github_standin import GitHubStandIn
from tests.integration.test_publish_e2e import both, credentials, serve
from tests.integration.wheels import (
    PROJECT,
    VERSION,
    make_release,
)
from tests.pypi_server import PypiServer

pytestmark = pytest.mark.slow


def test_publish_index_and_pip_install_both_variants(
    pypiserver: PypiServer, github_standin: GitHubStandIn, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    credentials(monkeypatch, pypiserver, github_standin)
    # both arches, as the checkout's matrix verify reads names them
    release = both(tmp_path, pypiserver, github_standin, arches=("x86_64", "aarch64"))
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
