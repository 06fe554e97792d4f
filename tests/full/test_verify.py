"""The full tier's part of tests/integration/test_verify.py (its docstring says what both
parts check).

`release verify` against what was really published: pypiserver, the stand-in GitHub
(whose storage origin rejects any Authorization header) and a served index.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from release.cli import main
from release.errors import VerifyError
from tests.github_standin import GitHubStandIn
from tests.integration.test_publish_e2e import credentials, serve
from tests.integration.test_verify import published
from tests.pypi_server import PypiServer

pytestmark = pytest.mark.slow


def test_cli_verify_with_pip_writes_json_and_markdown_and_fails_with_exit_7(
    pypiserver: PypiServer, github_standin: GitHubStandIn, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    credentials(monkeypatch, pypiserver, github_standin)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    dist = published(tmp_path, pypiserver, github_standin)
    with serve(tmp_path / "site") as base:
        # the checkout's matrix.yaml names api.github.com, not this release's GitHub: the
        # provenance checks have their own tests below
        args = ["verify", "--dist", str(dist), "--index-url", f"cu129={base}cu129/",
                "--no-provenance", "--json-file", str(tmp_path / "v.json"),
                "--markdown", str(tmp_path / "v.md")]  # fmt: skip
        assert main(args) == 0
        data = json.loads((tmp_path / "v.json").read_text())
        assert data["ok"] is True
        picks = sorted(c["detail"] for c in data["checks"] if c["check"] == "pip")
        assert len(picks) == 4
        assert all(p.startswith("picks k3_kernels-0.1.0") for p in picks)
        assert "all checks passed" in (tmp_path / "v.md").read_text()
        assert "all checks passed" in summary.read_text()

        (index_page := tmp_path / "site" / "cu129" / "k3-kernels" / "index.html").write_text(
            index_page.read_text().replace("#sha256=", "#sha256=00")
        )
        capsys.readouterr()
        assert main([*args, "--no-pip"]) == VerifyError.exit_code
    _, err = capsys.readouterr()
    assert "checks failed" in err
    assert json.loads((tmp_path / "v.json").read_text())["ok"] is False
