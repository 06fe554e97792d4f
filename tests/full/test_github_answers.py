"""The full tier's part of tests/integration/test_github_answers.py (its docstring says what both
parts check).

Every answer a GitHub server can give ends `release plan`, `release publish` and `release
verify` with their documented exit code and one error line naming the request, never a
traceback (issue 40, point 5: a 403 to the release listing ended `release plan` in
`release.remote.github._Accepted: 403`).

Each command is run once against a healthy stand-in to learn the REST endpoints it calls
(API and uploads origins; the downloads are verify's download checks); then, for each
endpoint and each answer, against a fresh stand-in that gives that answer there every time:
403, 404, 422, a 200 of the wrong shape (an object where a list is due, a list where an
object is due), a 200 that is no JSON, and (slow: the client retries it with backoff) 500.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from release.remote import httpclient
from release.remote.github import GithubClient
from tests.integration.test_github_answers import SERVER_ERROR, check_answers

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("command", ["plan", "publish", "verify", "verify --tag"])
def test_a_server_error_on_each_endpoint_ends_the_command_after_its_retries(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the backoff between tries is recorded, not spent (the clients' waits are injectable:
    # some 4 minutes of sleeping otherwise); the deadline still counts the time each try took
    waits: list[float] = []
    for function in (GithubClient.__init__, httpclient.fetch):
        assert function.__kwdefaults__ is not None
        monkeypatch.setitem(function.__kwdefaults__, "sleep", waits.append)
    # verify's GitHub reads keep its --attempts: 3 of them here, as the clients' own policy
    seen = check_answers(command, {"500": SERVER_ERROR}, tmp_path, monkeypatch, capsys, attempts=3)
    assert seen
    assert waits, "the 500s were not retried"
    assert max(waits) > min(waits)  # backed off, not retried at one pace
