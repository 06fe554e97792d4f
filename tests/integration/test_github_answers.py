"""Every answer a GitHub server can give ends `release plan`, `release publish` and `release
verify` with their documented exit code and one error line naming the request, never a
traceback (issue 40, point 5: a 403 to the release listing ended `release plan` in
`release.remote.github._Accepted: 403`).

Each command is run once against a healthy stand-in to learn the REST endpoints it calls
(API and uploads origins; the downloads are verify's download checks); then, for each
endpoint and each answer, against a fresh stand-in that gives that answer there every time:
403, 404, 422, a 200 of the wrong shape (an object where a list is due, a list where an
object is due), a 200 that is no JSON, and (slow: the client retries it with backoff) 500."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from release.cli import main
from tests.github_standin import DEFAULT_REPO, Fault, GitHubStandIn
from tests.integration.test_any_github import TAG, write_matrix
from tests.integration.test_plan import build_dist

ANSWERS: dict[str, Fault] = {
    "403": Fault(status=403, body={"message": "Resource not accessible by integration"}),
    "404": Fault(status=404, body={"message": "Not Found"}),
    "422": Fault(
        status=422, body={"message": "Validation Failed", "errors": [{"code": "invalid"}]}
    ),
    "200-object": Fault(status=200, body={"unexpected": True}),
    "200-list": Fault(status=200, body="[1, 2]", headers={"content-type": "application/json"}),
    "200-html": Fault(status=200, body="<html>proxy</html>", headers={"content-type": "text/html"}),
}
# the request named: `what`, "refused to <what>", "answered 422 ... to <what>", "served other
# bytes for <asset>", the retry wrapper's "<repo>@<tag>: <what>: gave up ..." (or "<repo>
# (index): <what> <file>", its end cut to fit the line), plan's "not asked, this run gave up
# on GitHub already: <what>", or verify's first failed check, a file's provenance whose
# attestation request gave up
NAMED = re.compile(
    r"GitHub (answered `[^`]+`|refused to \w|answered \d{3}[\w ]* to \w|served other bytes for "
    r"|[\w.-]+/[\w.-]+@[^:]+: \w+ [^:]+: gave up|[\w.-]+/[\w.-]+ \(index\): \w+ \S+"
    r"|[\w.-]+/[\w.-]+@[^:]+: not asked, this run gave up on GitHub already: \w+ \w+)"
    r"|checks failed; first: provenance \S+: .*gave up at the retry limit"
)
SERVER_ERROR = Fault(status=500, body={"message": "Server Error"})
# what each command may end with (docs/commands.md#exit-codes); 0 besides only where 404 is
# GitHub's word for "none" (no release of the tag yet, no attestation of the sha256)
EXITS = {"plan": {9}, "publish": {5, 9}, "verify": {7}, "verify --tag": {7, 9}}


@dataclass(frozen=True)
class Endpoint:
    method: str
    origin: str
    path: str  # a regular expression over the path
    raw: str = field(compare=False, default="")  # the path as first called

    def fault(self, answer: Fault) -> Fault:
        return Fault(
            method=self.method,
            origin=self.origin,  # type: ignore[arg-type]
            path=self.path,
            status=answer.status,
            body=answer.body,
            headers=answer.headers,
            count=1000,
        )


@contextmanager
def release_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[GitHubStandIn, list[str]]]:
    """A fresh stand-in, a matrix naming it and a built dist; the token in the environment."""
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GH_TOKEN", "TWINE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with GitHubStandIn() as standin:
        standin.add_repo(DEFAULT_REPO)
        monkeypatch.setenv("GITHUB_TOKEN", standin.token)
        matrix = write_matrix(tmp_path, standin)
        build_dist(matrix, tmp_path / "dist")
        yield standin, ["--matrix", str(matrix), "--dist", str(tmp_path / "dist")]


def argv(command: str, common: list[str], tmp_path: Path, attempts: int = 1) -> list[str]:
    """`command`'s arguments; verify's `--attempts` (its GitHub reads' too) is `attempts`."""
    if command == "plan":
        return ["plan", *common, "--cache-dir", str(tmp_path / "cache")]
    if command == "publish":
        return ["publish", *common, "--index-dir", str(tmp_path / "site")]
    if command == "verify --tag":
        return [
            "verify",
            common[0],
            common[1],
            "--tag",
            TAG,
            "--no-pip",
            "--attempts",
            str(attempts),
        ]
    return ["verify", *common, "--no-pip", "--attempts", str(attempts)]


def run(
    command: str, root: Path, monkeypatch: pytest.MonkeyPatch, fault: Fault | None,
    attempts: int = 1,
) -> tuple[int, GitHubStandIn, set[Endpoint]]:  # fmt: skip
    """`command` against a fresh stand-in (a publish first, for verify), with `fault` armed
    for the command itself: its exit code and the endpoints it called."""
    root.mkdir()
    with release_env(root, monkeypatch) as (standin, common):
        if command.startswith("verify"):
            assert main(argv("publish", common, root)) == 0
            standin.clear_log()
        if fault is not None:
            standin.faults.add(fault)
        code = main(argv(command, common, root, attempts))
        called = {
            Endpoint(e.method, e.origin, pattern(e.path), e.path)
            for e in standin.request_log
            if e.origin == "uploads" or (e.origin == "api" and e.path.startswith("/repos/"))
        }
        return code, standin, called


def pattern(path: str) -> str:
    """A REST path as a regular expression: any id, any sha256."""
    parts = re.split(r"(sha256:[0-9a-f]{64})", path)
    return (
        "^"
        + "".join(
            "sha256:[0-9a-f]{64}"
            if part.startswith("sha256:")
            else re.sub(r"\d+", r"\\d+", re.escape(part))
            for part in parts
        )
        + "$"
    )


def endpoints(command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Endpoint]:
    code, _, called = run(command, tmp_path / "healthy", monkeypatch, None)
    assert code == 0
    assert called  # every command asks GitHub something
    return sorted(called, key=lambda e: (e.origin, e.path, e.method))


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def check_answers(
    command: str,
    answers: dict[str, Fault],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *,
    attempts: int = 1,
) -> list[tuple[str, str, int, str]]:
    seen = []
    for number, endpoint in enumerate(endpoints(command, tmp_path, monkeypatch)):
        for name, answer in answers.items():
            capsys.readouterr()
            root = tmp_path / f"{number}-{name}"
            code, standin, _ = run(command, root, monkeypatch, endpoint.fault(answer), attempts)
            err = capsys.readouterr().err
            where = f"{command} {endpoint.method} {endpoint.path} answered {name}"
            assert code in EXITS[command] | ({0} if name == "404" else set()), (where, code, err)
            if code == 0:
                continue
            line = one_error_line(err)
            assert NAMED.search(line), (where, line)
            assert standin.token not in err
            seen.append((endpoint.path, name, code, line))
    return seen


@pytest.mark.parametrize("command", ["plan", "publish", "verify", "verify --tag"])
def test_each_answer_on_each_endpoint_ends_the_command_with_its_exit_code_and_one_line(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    seen = check_answers(command, ANSWERS, tmp_path, monkeypatch, capsys)
    assert seen  # at least one answer stopped the command
