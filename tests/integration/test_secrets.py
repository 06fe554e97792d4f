"""Credentials never appear in output, logs, reports, the publish record or exceptions,
in failing runs (wrong password: 403 from pypiserver; bad token: 401 from the stand-in)
and in succeeding ones."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from release.cli import main
from release.errors import PublishError
from release.publish.run import PublishSettings, publish
from tests.github_standin import GitHubStandIn
from tests.integration.test_publish_e2e import both
from tests.pypi_server import PypiServer

BAD_GITHUB = "ghp_SECRETSECRETSECRETSECRETSECRET0123"
BAD_PYPI = "pypi-AgEIcHlwaS5vcmcSECRETSECRETSECRET0123456789"
BAD_PASSWORD = "twine-password-SECRET-4711"


def files_text(tmp_path: Path) -> str:
    texts = []
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".md", ".html", ".log", ".txt"):
            texts.append(path.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(texts)


def assert_absent(secrets: list[str], *texts: str) -> None:
    for secret in secrets:
        for text in texts:
            assert secret not in text


def reports(tmp_path: Path) -> list[str]:
    return ["--json-file", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md")]


def test_failing_runs_leak_no_credential(  # noqa: PLR0917  # pytest fixtures
    pypiserver: PypiServer, github_standin: GitHubStandIn, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    caplog.set_level(logging.DEBUG)
    release = both(tmp_path, pypiserver, github_standin)
    secrets = [BAD_GITHUB, BAD_PYPI, BAD_PASSWORD]

    monkeypatch.setenv("TWINE_API_KEY", BAD_PYPI)
    monkeypatch.setenv("GITHUB_TOKEN", github_standin.token)
    code = main(["publish", "--dist", str(release.dist), "--only", "pypi", *reports(tmp_path)])
    assert code == PublishError.exit_code
    out, err = capsys.readouterr()
    assert "403" in err  # pypiserver refused the token; the message says so, not what it was

    monkeypatch.delenv("TWINE_API_KEY")
    monkeypatch.setenv("TWINE_USERNAME", pypiserver.username)
    monkeypatch.setenv("TWINE_PASSWORD", BAD_PASSWORD)
    monkeypatch.setenv("GITHUB_TOKEN", BAD_GITHUB)
    code = main(["publish", "--dist", str(release.dist), *reports(tmp_path)])
    assert code == PublishError.exit_code
    out2, err2 = capsys.readouterr()
    assert "401" in err2 or "Bad credentials" in err2

    env = {"TWINE_API_KEY": BAD_PYPI, "GITHUB_TOKEN": BAD_GITHUB}
    with pytest.raises(PublishError) as failure:
        publish(PublishSettings(dist=release.dist), env)
    assert_absent(
        secrets, out, err, out2, err2, caplog.text, files_text(tmp_path),
        str(failure.value), repr(failure.value), failure.value.hint or "",
    )  # fmt: skip


def test_console_script_failure_leaks_nothing(
    pypiserver: PypiServer, github_standin: GitHubStandIn, tmp_path: Path
) -> None:
    release = both(tmp_path, pypiserver, github_standin)
    script = Path(sys.executable).with_name("release")
    env = {**os.environ, "TWINE_USERNAME": "uploader", "TWINE_PASSWORD": BAD_PASSWORD,
           "GITHUB_TOKEN": github_standin.token}  # fmt: skip
    proc = subprocess.run(
        [str(script), "publish", "--dist", str(release.dist), "--only", "pypi"],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == PublishError.exit_code
    # the private index (pypiserver -a list) already refuses the password while planning
    assert "/simple/k3-kernels/: HTTP 403" in proc.stderr
    assert "hint: the index refused the credentials" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert_absent([BAD_PASSWORD, github_standin.token], proc.stdout, proc.stderr)


def test_succeeding_runs_leak_no_credential(  # noqa: PLR0917  # pytest fixtures
    pypiserver: PypiServer, github_standin: GitHubStandIn, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    caplog.set_level(logging.DEBUG)
    release = both(tmp_path, pypiserver, github_standin)
    for key, value in pypiserver.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("GITHUB_TOKEN", github_standin.token)
    assert main(["publish", "--dist", str(release.dist), *reports(tmp_path)]) == 0
    args = ["verify", "--dist", str(release.dist), "--no-pip", "--index-url",
            f"cu129={pypiserver.index_url}", "--json-file", str(tmp_path / "v.json")]  # fmt: skip
    main(args)  # pip-less; the cu129 override points at a wrong index on purpose: a failure
    out, err = capsys.readouterr()
    assert "published" in out
    assert_absent(
        [pypiserver.password, github_standin.token], out, err, caplog.text, files_text(tmp_path)
    )
