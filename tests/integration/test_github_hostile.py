"""A GitHub server that answers with hostile material at the HTTP level, against the one
GitHub client (release.remote.github) and `release plan`, which reads GitHub through it:
a paginated list whose `Link: rel="next"` leads to another host (the token must not follow
it), an answer larger than any GitHub gives (read no further than 64 MiB, an asset's download
no further than its listed size), an answer or its
headers that trickle in (read no longer than the operation's time), a previous release whose
release-manifest.json is listed larger than any JSON document is read (not downloaded), and
a download URL that names a hash in its query, which `release pins` must not write into a
pin (pip would check that hash instead of the pin's).

Each ends in one line naming what was asked and why it stopped, with the command's exit
code, one `--json` document and no traceback; the other host sees no request."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from release.cli import main
from release.credentials import Secret
from release.errors import PublishError
from release.fsutil import MAX_DOCUMENT_BYTES
from release.records.published import RECORD_NAME
from release.remote.github import GithubClient, GithubUnreachable
from release.remote.retry import RetryPolicy
from tests.github_standin import DEFAULT_REPO, Fault, GitHubStandIn
from tests.integration.indexes import QuietHandler, TricklingHeaders, serve
from tests.integration.test_github_answers import argv, release_env
from tests.local_http import LOCAL

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


def attestations_client(standin: GitHubStandIn, policy: RetryPolicy = QUICK) -> GithubClient:
    return GithubClient(api_url=standin.api_url, token=Secret(standin.token), policy=policy)


def test_an_answer_larger_than_github_gives_is_read_no_further_than_64_mib(
    github_standin: GitHubStandIn,
) -> None:
    """githubkit reads an answer whole before anything looks at it: 400 MiB of answer took
    828 MB of memory, and one that never ends takes all there is."""
    huge = github_standin.faults.add(
        Fault(method="GET", path=r"/attestations/", status=200, body=b" " * 2**20, repeat=200)
    )
    client = attestations_client(github_standin)
    with pytest.raises(PublishError) as failed, client.session(f"{DEFAULT_REPO} attestations"):
        client.attestations(DEFAULT_REPO, "ab" * 32)
    assert failed.value.message == (
        f"cannot list the attestations of sha256:abababababab at {github_standin.api_url}: "
        f"GitHub's answer is larger than {MAX_DOCUMENT_BYTES // 2**20} MiB"
    )
    # what the client read, and the socket buffers besides: far from the 200 MiB sent whole
    assert github_standin.faults.sent(huge) < MAX_DOCUMENT_BYTES + 16 * 2**20


def test_an_answer_encoded_as_it_was_not_asked_is_refused_unread(
    github_standin: GitHubStandIn,
) -> None:
    """The client asks for answers unencoded; 200 KiB of gzip inflating to 200 MiB was
    inflated whole in memory, then refused by the JSON reader."""
    bomb = gzip.compress(b" " * 200 * 2**20)
    github_standin.faults.add(
        Fault(method="GET", path=r"/attestations/", status=200, body=bomb,
              headers={"Content-Encoding": "gzip", "content-type": "application/json"})
    )  # fmt: skip
    client = attestations_client(github_standin)
    with pytest.raises(PublishError) as failed, client.session(f"{DEFAULT_REPO} attestations"):
        client.attestations(DEFAULT_REPO, "ab" * 32)
    assert failed.value.message == (
        f"cannot list the attestations of sha256:abababababab at {github_standin.api_url}: "
        "GitHub answered in the encoding 'gzip', which was not asked for"
    )
    (asked,) = github_standin.request_log
    assert asked.header("accept-encoding") == "identity"


def test_an_answer_that_trickles_in_ends_at_the_operations_time_bound(
    github_standin: GitHubStandIn,
) -> None:
    """A byte every tenth of a second never passes a read timeout: the answer was read
    until the server stopped, whatever the retry policy's total said."""
    slow = github_standin.faults.add(
        Fault(method="GET", path=r"/attestations/", status=200, body=b"[", repeat=300, trickle=0.1)
    )
    client = attestations_client(github_standin, RetryPolicy(attempts=2, total=1.0))
    with pytest.raises(GithubUnreachable) as failed, client.session(f"{DEFAULT_REPO} attestations"):
        client.attestations(DEFAULT_REPO, "ab" * 32)
    assert "gave up at the time bound" in failed.value.message
    assert "deadline passed" in failed.value.message
    assert github_standin.faults.sent(slow) < 300


def test_headers_that_trickle_in_end_at_the_operations_time_bound() -> None:
    """A byte every 50 ms never lets a read time out: githubkit's request read the headers
    for as long as the server sent them, whatever the retry policy's total said."""
    with serve(TricklingHeaders) as url:
        client = GithubClient(
            api_url=url.rstrip("/"),
            token=Secret("t0ken"),
            policy=RetryPolicy(attempts=1, total=1.0),
        )
        with pytest.raises(GithubUnreachable) as failed, client.session("o/r attestations"):
            client.attestations("o/r", "ab" * 32)
        assert 0 < TricklingHeaders.sent_before_hangup() < TricklingHeaders.count
    assert "deadline passed" in failed.value.message


def test_an_asset_download_is_read_no_further_than_the_size_github_lists(
    github_standin: GitHubStandIn,
) -> None:
    """Storage serving more than the API lists was read whole, then found other bytes."""
    created = LOCAL.post(
        f"{github_standin.api_url}/repos/{DEFAULT_REPO}/releases",
        headers={"Authorization": f"Bearer {github_standin.token}"},
        json={"tag_name": "v0.1.0", "draft": False},
    )
    github_standin.add_asset(created.json()["id"], "cu12.txt", b"nvidia-nccl-cu12==2.30.7\n")
    huge = github_standin.faults.add(
        Fault(origin="storage", path=r"^/objects/", status=200, body=b"x" * 2**20, repeat=200)
    )
    client = attestations_client(github_standin)
    with client.session(f"{DEFAULT_REPO}@v0.1.0"):
        release = client.find_release(DEFAULT_REPO, "v0.1.0")
        assert release is not None
        (asset,) = client.list_assets(DEFAULT_REPO, release)
    with pytest.raises(PublishError) as failed, client.session(f"{DEFAULT_REPO}@v0.1.0"):
        client.download_asset(asset)
    assert failed.value.message == (
        f"cannot download cu12.txt at {github_standin.api_url}: GitHub served more than the "
        "25 bytes it lists for cu12.txt"
    )
    assert github_standin.faults.sent(huge) < 16 * 2**20


def test_plan_downloads_no_previous_release_manifest_larger_than_a_document_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its listed size bounded the download, and the listing is the server's word: a
    release-manifest.json listed at 65 MiB was read whole, then refused by the JSON reader."""
    with release_env(tmp_path, monkeypatch) as (gh, common):
        created = LOCAL.post(
            f"{gh.api_url}/repos/{DEFAULT_REPO}/releases",
            headers={"Authorization": f"Bearer {gh.token}"},
            json={"tag_name": "release/v0.0.1+cu129", "draft": False},
        )
        asset = gh.add_asset(created.json()["id"], "release-manifest.json", b" " * 65 * 2**20)
        gh.clear_log()
        code = main(["plan", *common, "--cache-dir", str(tmp_path / "cache"), "--json"])
        downloads = [e for e in gh.request_log if e.path.endswith(f"/assets/{asset.id}")]
    out, err = capsys.readouterr()
    assert code == 0  # a plan without growth, which says why
    assert downloads == []
    note = json.loads(out)["previous_note"]
    assert note == (
        "previous release not read, no growth shown: GitHub lists release-manifest.json of "
        f"{DEFAULT_REPO}@release/v0.0.1+cu129 at 65.0 MiB, more than the 64 MiB a "
        "release-manifest.json is read to"
    )
    assert "Traceback" not in err


def test_pins_writes_no_pin_whose_url_names_another_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A release's assets listed with `browser_download_url`s that name a sha256 in their
    query: a re-run of publish finds them identical and records those URLs, and pins wrote
    `NAME @ URL?z&sha256=EVIL&z#sha256=BUILT`, where pip takes the first `[#&]sha256=`
    (pip/_internal/models/link.py): the hash it checks the download against is EVIL.
    pins writes nothing instead, naming the record entry, exit 2."""
    evil = "e" * 64
    with release_env(tmp_path, monkeypatch) as (gh, common):
        assert main(argv("publish", common, tmp_path)) == 0
        (release,) = gh.releases(DEFAULT_REPO)
        listed = LOCAL.get(
            f"{gh.api_url}/repos/{DEFAULT_REPO}/releases/{release.id}/assets",
            headers={"Authorization": f"Bearer {gh.token}"},
        ).json()
        for asset in listed:
            asset["browser_download_url"] += f"?z&sha256={evil}&z"
        gh.faults.add(
            Fault(method="GET", path=r"/releases/\d+/assets$", status=200, count=100,
                  body=json.dumps(listed), headers={"content-type": "application/json"})
        )  # fmt: skip
        assert main(["publish", *common, "--index-dir", str(tmp_path / "again")]) == 0
    dist = Path(common[3])
    recorded = json.loads((dist / RECORD_NAME).read_text())["files"]
    assert all(f"&sha256={evil}&" in entry["url"] for entry in recorded)  # as GitHub said
    capsys.readouterr()
    assert main(["pins", "--dist", str(dist), "--json"]) == 2
    out, err = capsys.readouterr()
    assert not (dist / "pins").exists() or not any((dist / "pins").iterdir())
    document = json.loads(out)
    assert document["ok"] is False
    message = document["error"]["message"]
    assert f"{dist / RECORD_NAME}: files[0].url: " in message
    assert "names a hash pip would check instead of the pin's (&sha256=)" in message
    assert document["error"]["hint"] == (
        "its URLs are the destinations' answers when `release publish` ran: check the "
        "release's files there, then run `release publish` again to rewrite it"
    )
    assert "Traceback" not in err
