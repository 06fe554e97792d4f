"""A GitHub server that answers with hostile material at the HTTP level, against the one
GitHub client (release.remote.github) and `release plan`, which reads GitHub through it:
a paginated list whose `Link: rel="next"` leads to another host (the token must not follow
it).

Each ends in one line naming what was asked and why it stopped, with the command's exit
code, one `--json` document and no traceback; the other host sees no request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from release.cli import main
from release.credentials import Secret
from release.errors import PublishError
from release.remote.github import GithubClient
from release.remote.retry import RetryPolicy
from tests.github_standin import DEFAULT_REPO, Fault, GitHubStandIn
from tests.integration.indexes import QuietHandler, serve
from tests.integration.test_github_answers import release_env

QUICK = RetryPolicy(attempts=2, initial_delay=0.0, total=60.0)


@contextmanager
def other_host() -> Iterator[tuple[str, list[tuple[str, str | None]]]]:
    """A server on another origin than the stand-in's, answering `[]` to anything; yields
    its base URL (named `localhost`, so another origin than 127.0.0.1's) and every
    (path, Authorization header) it was sent."""
    seen: list[tuple[str, str | None]] = []

    class Recording(QuietHandler):
        def do_GET(self) -> None:
            seen.append((self.path, self.headers.get("Authorization")))
            self.send_body(b"[]", "application/json")

    handler: type[BaseHTTPRequestHandler] = Recording
    with serve(handler) as url:
        yield url.replace("127.0.0.1", "localhost"), seen


def next_page_at(url: str) -> Fault:
    """The release list's first page, empty, with its next page at `url`."""
    return Fault(
        method="GET", path=r"/releases$", status=200, body=b"[]", count=100,
        headers={"content-type": "application/json", "Link": f'<{url}>; rel="next"'},
    )  # fmt: skip


def test_a_next_page_on_another_host_is_not_asked_with_the_token(
    github_standin: GitHubStandIn,
) -> None:
    """githubkit's paginator follows any `Link: rel="next"` with the token (an
    `Authorization` header on every request it makes): a list answer could send the
    token to any host. The list stops there instead, naming the link."""
    with other_host() as (elsewhere, seen):
        github_standin.faults.add(next_page_at(f"{elsewhere}repos/{DEFAULT_REPO}/releases"))
        client = GithubClient(
            api_url=github_standin.api_url, token=Secret(github_standin.token), policy=QUICK
        )
        with pytest.raises(PublishError) as failed, client.session(f"{DEFAULT_REPO} (releases)"):
            client.list_releases(DEFAULT_REPO)
    assert seen == []
    message = failed.value.message
    assert message.startswith(f"cannot list the releases of {DEFAULT_REPO} at ")
    assert (
        f'`Link: rel="next"` leads off {github_standin.api_url}, to '
        f"{elsewhere}repos/{DEFAULT_REPO}/releases" in message
    )
    assert github_standin.token not in message


def test_plan_asks_no_other_host_for_the_next_page_and_says_why_it_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`release plan` lists the releases (no release of the tag yet, and for the previous
    release's growth): a next page elsewhere leaves the destination "not asked", exit 9."""
    with other_host() as (elsewhere, seen), release_env(tmp_path, monkeypatch) as (gh, common):
        gh.faults.add(next_page_at(f"{elsewhere}steal"))
        code = main(["plan", *common, "--cache-dir", str(tmp_path / "cache"), "--json"])
        api, token = gh.api_url, gh.token
    out, err = capsys.readouterr()
    assert seen == []
    assert code == 9
    document = json.loads(out)  # exactly one document
    assert document["ok"] is False
    assert {c["state"] for c in document["cells"]} == {"not asked"}
    assert f"leads off {api}, to {elsewhere}steal" in document["error"]["message"]
    assert "Traceback" not in err
    assert token not in out + err
