"""Credentials never appear in output, logs, reports, the publish record or exceptions,
in failing runs (wrong password: 403 from pypiserver; bad token: 401 from the stand-in)
and in succeeding ones; nor do the credentials of a URL given on the command line (issue
49: verify's table and --json, init's torch index, the subprocess runner's logs)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest

from release import proc
from release.cli import main
from release.destinations.reach import Reach
from release.errors import PublishError
from release.publish.run import PublishSettings, publish
from tests.github_standin import GitHubStandIn
from tests.integration.indexes import QuietHandler, serve
from tests.integration.test_init import FIXTURES, copy, index
from tests.integration.test_init import release as release_at
from tests.integration.test_publish_e2e import both
from tests.pypi_server import PypiServer

__all__ = ["index"]  # the stand-in torch index, a fixture of test_init's

BAD_GITHUB = "ghp_SECRETSECRETSECRETSECRETSECRET0123"
BAD_PYPI = "pypi-AgEIcHlwaS5vcmcSECRETSECRETSECRET0123456789"
BAD_PASSWORD = "twine-password-SECRET-4711"
BAD_KEY = "index-api-key-SECRET-0815"  # an API key of an index that is not PyPI


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
    secrets = [BAD_GITHUB, BAD_PYPI, BAD_PASSWORD, BAD_KEY]

    monkeypatch.setenv("TWINE_API_KEY", BAD_KEY)
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
        publish(PublishSettings(dist=release.dist), Reach(env, command="release publish"))
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


@pytest.mark.parametrize("variable", ["GITHUB_TOKEN", "GH_TOKEN"])
@pytest.mark.parametrize("end", ["\n", "\r\n", " ", "\u201d"])
def test_a_token_saved_with_its_line_end_is_refused_in_one_line_and_shown_nowhere(  # noqa: PLR0917
    pypiserver: PypiServer, github_standin: GitHubStandIn, tmp_path: Path,
    capsys: pytest.CaptureFixture[str], variable: str, end: str,
) -> None:  # fmt: skip
    release = both(tmp_path, pypiserver, github_standin)
    env = {**os.environ, **pypiserver.env(), variable: github_standin.token + end}
    env.pop("GITHUB_TOKEN" if variable == "GH_TOKEN" else "GH_TOKEN", None)
    done = subprocess.run(
        [str(Path(sys.executable).with_name("release")), "publish", "--dist", str(release.dist)],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[0] == (
        f"error: {variable} holds white space, a line break or a letter outside ASCII, "
        "which no token has"
    )
    assert "Traceback" not in done.stderr
    assert_absent([github_standin.token], done.stdout, done.stderr, files_text(tmp_path))
    assert github_standin.releases("k3-org/k3-kernels") == ()
    assert pypiserver.files() == {}


URL_SECRET = "url-S3cr3t-0042"


def everything_written(root: Path, *, leaving_out: tuple[Path, ...] = ()) -> str:
    return "\n".join(
        path.read_text(encoding="utf-8", errors="replace")
        for path in sorted(root.rglob("*"))
        if path.is_file() and path not in leaving_out
    )


def test_verify_shows_an_index_url_without_its_credentials(
    pypiserver: PypiServer, github_standin: GitHubStandIn, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """F26: `verify --index-url pypi=http://u:SECRET@host/simple/` showed the password in
    its table and in --json's `url`. The URL keeps working (pip gets it whole); what is
    shown and written has `***` where its credentials were."""
    release = both(tmp_path, pypiserver, github_standin)
    for key, value in pypiserver.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("GITHUB_TOKEN", github_standin.token)
    assert main(["publish", "--dist", str(release.dist)]) == 0
    capsys.readouterr()
    monkeypatch.delenv("TWINE_PASSWORD")  # the password reaches verify in the URL alone
    summary = tmp_path / "reports" / "summary.md"
    summary.parent.mkdir()
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    private = pypiserver.index_url.replace(
        "http://", f"http://{pypiserver.username}:{pypiserver.password}@"
    )
    tokened = f"{pypiserver.index_url}?token={URL_SECRET}"
    reports = tmp_path / "reports"
    for override, secret in ((private, pypiserver.password), (tokened, URL_SECRET)):
        code = main(["verify", "--dist", str(release.dist), "--no-provenance", "--attempts", "1",
                     "--index-url", f"pypi={override}", "--json", "--json-file",
                     str(reports / "v.json"), "--markdown", str(reports / "v.md")])  # fmt: skip
        out, err = capsys.readouterr()
        document = json.loads(out)
        assert secret not in out + err + everything_written(reports)
        pip = [c for c in document["checks"] if c["check"] == "pip" and "+" not in c["subject"]]
        assert pip, document["checks"]
        shown = override.replace(pypiserver.password, "").replace(URL_SECRET, "")
        shown = shown.replace(f"{pypiserver.username}:@", "***@").replace("token=", "token=***")
        assert {c["url"] for c in pip} == {shown}
        assert shown in err  # the table
        assert code == document["error"]["exit_code"]  # downloads need TWINE_*: 401
        if secret == pypiserver.password:  # the credentials reached pip: it resolved the wheel
            assert all(c["ok"] for c in pip), pip


def test_init_refuses_a_torch_index_with_a_token_and_shows_it_nowhere(
    tmp_path: Path, index: str
) -> None:
    """F28: a credential in --torch-index is refused while the command line is parsed (the
    environment is where it goes), and the token is in no output, document or file."""
    project = copy(FIXTURES / "torch_ops", tmp_path / "ops")
    report = tmp_path / "init.json"
    tokened = f"{index}?token={URL_SECRET}"
    done = release_at(tmp_path, "init", str(project), "--torch-index", tokened, "--json",
                      "--json-file", str(report))  # fmt: skip
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert URL_SECRET not in done.stdout + done.stderr
    assert URL_SECRET not in everything_written(tmp_path)
    assert not (project / "matrix.yaml").exists()
    document = json.loads(done.stdout)
    assert document["ok"] is False
    assert "--torch-index" in document["error"]["message"]
    assert "put the credential in the environment" in document["error"]["message"]


def test_the_subprocess_runner_logs_and_returns_no_url_credential(tmp_path: Path) -> None:
    """release.proc masks what a child prints, the command it logs and the line to
    reproduce it: `token@` and `?token=` as well as `user:password@`."""
    urls = [
        f"https://{URL_SECRET}@h/simple/",
        f"https://h/simple/?token={URL_SECRET}",
        f"https://u:{URL_SECRET}@h/",
        f"s3://b/p?endpoint=http://u:{URL_SECRET}@minio",
    ]
    log = tmp_path / "child.log"
    cmd = ["sh", "-c", 'for u in "$@"; do echo "$u"; echo "$u" >&2; done', "sh", *urls]
    done = proc.run(cmd, env=dict(os.environ), log=log, separate_stderr=True)
    assert done.ok
    assert done.output.count("***") == len(urls)
    again = proc.reproduce_command(cmd, {"PIP_INDEX_URL": urls[0]}, tmp_path, parent={})
    assert URL_SECRET not in done.output + done.stderr + log.read_text() + again


class _Recorder(QuietHandler):
    """A server a changed manifest names: it records the credentials it is sent."""

    seen: ClassVar[list[str]] = []

    def answer(self) -> None:
        self.seen.extend(v for k, v in self.headers.items() if k.lower() == "authorization")
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="x"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = do_PUT = answer  # http.server's names


def _changed(release_dist: Path, kind: str, key: str, value: str) -> None:
    """The manifest as a build job's project code could leave it: every `kind` wheel's
    destination `key` pointed elsewhere."""
    path = release_dist / "manifest.json"
    manifest = json.loads(path.read_text())
    for wheel in manifest["wheels"]:
        if wheel["destination"]["kind"] == kind:
            wheel["destination"][key] = value
    path.write_text(json.dumps(manifest))


def test_a_manifest_changed_after_the_build_sends_no_credential_elsewhere(
    pypiserver: PypiServer, github_standin: GitHubStandIn, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """The publish job downloads the manifest another job wrote beside the project's build:
    its GitHub API and upload URL are not trusted with the job's token or a PyPI token.
    Nothing is sent there, nothing is uploaded anywhere, and the error says why."""
    _Recorder.seen.clear()
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_API_URL", github_standin.api_url)
    monkeypatch.setenv("GITHUB_SERVER_URL", github_standin.web_url)
    monkeypatch.setenv("GITHUB_TOKEN", github_standin.token)
    with serve(_Recorder) as elsewhere:
        release = both(tmp_path, pypiserver, github_standin)
        _changed(release.dist, "github", "api_url", elsewhere.rstrip("/"))
        for key, value in pypiserver.env().items():
            monkeypatch.setenv(key, value)
        assert main(["publish", "--dist", str(release.dist)]) == PublishError.exit_code
        _, err = capsys.readouterr()
        assert f"{elsewhere.rstrip('/')} is not this job's GitHub" in err
        assert "GITHUB_TOKEN is sent to the job's own GitHub alone" in err

        release = both(tmp_path / "b", pypiserver, github_standin)
        _changed(release.dist, "pypi", "repository_url", elsewhere)
        monkeypatch.delenv("TWINE_PASSWORD")
        monkeypatch.setenv("TWINE_API_KEY", BAD_PYPI)
        assert main(["publish", "--dist", str(release.dist)]) == PublishError.exit_code
        _, err = capsys.readouterr()
        assert "TWINE_API_KEY holds a PyPI token, and the upload URL" in err
    assert _Recorder.seen == []
    assert pypiserver.files() == {}
    assert github_standin.releases("k3-org/k3-kernels") == ()
    # `::add-mask::VALUE` asks the runner to hide VALUE in the log: the one line that holds it
    shown = [line for line in err.splitlines() if not line.startswith("::add-mask::")]
    assert_absent([github_standin.token, BAD_PYPI], "\n".join(shown))
