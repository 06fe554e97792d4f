"""`release audit` against hostile servers on 127.0.0.1: a page that inflates to gigabytes or
never ends is cut off as decoded and refused, never held; a link carrying credentials is not
asked (its password never sent); a Retry-After that is no number is not waited on; a link
httpx cannot ask is a finding; a body past its limit leaves no file larger than the limit;
headers that trickle in a byte at a time end at the audit's time limit."""

from __future__ import annotations

import gzip
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import httpx
import pytest

from release.audit.run import AuditSettings, audit
from release.audit.sources import sources
from release.remote import httpclient as http
from release.remote.retry import RetryPolicy
from tests.integration.indexes import QuietHandler, TricklingHeaders, serve

RELEASE = Path(sys.executable).with_name("release")
BOMB = gzip.compress(b"<html><body>" + bytes(80 * 2**20), compresslevel=1)  # 80 MiB decoded
CHUNK = b"a" * 2**20


class _Hostile(QuietHandler):
    authorizations: ClassVar[list[str]] = []
    root_projects_asked: ClassVar[list[str]] = []
    stalled = threading.Event()  # a wheel's download is being held

    def do_GET(self) -> None:
        if header := self.headers.get("Authorization"):
            self.authorizations.append(header)
        if self.path == "/bomb/":
            self.send_body(BOMB, "text/html", {"Content-Encoding": "gzip"})
        elif self.path == "/endless/" or self.path.endswith("endless-1.0-py3-none-any.whl"):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                while True:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))
            except OSError:
                pass
        elif self.path == "/userinfo/":
            port = self.server.server_address[1]  # type: ignore[index]
            link = f"http://u:hunter2@127.0.0.1:{port}/files/k3-1.0-py3-none-any.whl"
            self.send_body(f'<a href="{link}">k3-1.0-py3-none-any.whl</a>'.encode(), "text/html")
        elif self.path == "/latin/":  # latin-1 bytes served as UTF-8 (the default)
            self.send_body(
                b'<a href="k3-1.0-py3-none-any.whl">k3-1.0-py3-none-any.wh\xecl</a>', "text/html"
            )
        elif self.path == "/intsha/":
            entry = {"filename": "k3-1.0-py3-none-any.whl", "url": "k3-1.0-py3-none-any.whl",
                     "hashes": {"sha256": 12345}}  # fmt: skip
            body = json.dumps({"meta": {"api-version": "1.1"}, "name": "k3", "files": [entry]})
            self.send_body(body.encode(), "application/vnd.pypi.simple.v1+json")
        elif self.path == "/badhref/":  # one link not a URL: the other is still read
            port = self.server.server_address[1]  # type: ignore[index]
            links = (f'<a href="http://[::1/k3-2.0-py3-none-any.whl">k3-2.0-py3-none-any.whl</a>'
                     f'<a href="http://127.0.0.1:{port}/gone/k3-1.0-py3-none-any.whl">'
                     "k3-1.0-py3-none-any.whl</a>")  # fmt: skip
            self.send_body(links.encode(), "text/html")
        elif self.path == "/stallwheel/":
            name = "stalled-1.0-py3-none-any.whl"
            self.send_body(f'<a href="/files/{name}">{name}</a>'.encode(), "text/html")
        elif self.path == "/files/stalled-1.0-py3-none-any.whl":
            self.hold("application/octet-stream", b"PK", 90)  # past the 60 s read timeout
        elif self.path == "/toolong/":
            name = "k3-1.0-py3-none-any.whl"
            self.send_body(f'<a href="/{"a" * 70000}/{name}">{name}</a>'.encode(), "text/html")
        elif self.path == "/stall/":
            self.hold("text/html", b"", 20)
        elif self.path == "/gzipwheel/":
            name = "gz-1.0-py3-none-any.whl"
            self.send_body(f'<a href="/files/{name}">{name}</a>'.encode(), "text/html")
        elif self.path == "/files/gz-1.0-py3-none-any.whl":  # 80 MiB as decoded, unasked
            self.send_body(BOMB, "application/octet-stream", {"Content-Encoding": "gzip"})
        elif self.path == "/stallroot/":  # a root index of 30 projects, each page stalls
            links = "".join(f'<a href="/stallroot/p{n}/">p{n}</a>' for n in range(30))
            self.send_body(links.encode(), "text/html")
        elif self.path.startswith("/stallroot/p"):
            self.root_projects_asked.append(self.path)
            self.hold("text/html", b"", 20)
        elif self.path in ("/empty/", "/emptyroot/gone/"):  # a 200 that lists nothing
            self.send_body(b"<html><body><h1>Links for k3</h1></body></html>", "text/html")
        elif self.path == "/emptyroot/":
            self.send_body(b'<a href="gone/">gone</a>', "text/html")
        elif self.path == "/major2json/":
            body = json.dumps({"meta": {"api-version": "2.0"}, "name": "k3", "files": []})
            self.send_body(body.encode(), "application/vnd.pypi.simple.v1+json")
        elif self.path == "/major2html/":
            meta = '<meta name="pypi:repository-version" content="2.0">'
            page = f'{meta}<a href="k3-1.0-py3-none-any.whl">k3-1.0-py3-none-any.whl</a>'
            self.send_body(page.encode(), "text/html")
        elif self.path == "/busy/":
            self.send_response(429)
            self.send_header("Retry-After", "nan")
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self.send_error(404)

    def hold(self, content_type: str, start: bytes, seconds: float) -> None:
        """An answer that promises more bytes than `start` and holds the rest back."""
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(start) + 100_000))
        self.end_headers()
        self.wfile.write(start)
        self.wfile.flush()
        self.stalled.set()
        time.sleep(seconds)


@pytest.fixture(scope="module")
def hostile() -> Iterator[str]:
    with serve(_Hostile) as url:
        yield url


def one_finding(url: str) -> tuple[str, str]:
    report = audit(sources([url], None), AuditSettings(torch_index=None, attempts=2), {})
    ((rule, detail),) = [(f.rule, f.detail) for f in report.findings]
    return rule, detail


@pytest.mark.parametrize("page", ["bomb/", "endless/"])
def test_a_page_past_its_limit_as_decoded_is_refused(hostile: str, page: str) -> None:
    assert one_finding(hostile + page) == (
        "download",
        "the page does not load: the body is larger than 64 MiB as decoded",
    )


def test_a_page_that_lists_nothing_is_a_finding_not_a_clean_audit(hostile: str) -> None:
    empty = "the page lists no file and no project: nothing there to install or audit"
    assert one_finding(hostile + "empty/") == ("download", empty)
    report = audit(sources([hostile + "emptyroot/"], None), AuditSettings(torch_index=None), {})
    assert [(f.rule, f.url, f.detail) for f in report.findings] == [
        ("download", hostile + "emptyroot/gone/", empty)
    ]


@pytest.mark.parametrize(
    ("page", "said"),
    [
        ("major2json/", "PEP 691 api-version '2.0'"),
        ("major2html/", "PEP 629 repository-version '2.0'"),
    ],
)
def test_a_page_of_an_api_major_version_other_than_1_is_not_read_as_1(
    hostile: str, page: str, said: str
) -> None:
    """PEP 629 and PEP 691: a client that meets a major version it does not know stops."""
    assert one_finding(hostile + page) == (
        "download",
        f"not a simple index page ({said}: a major version this reader does not know (1.x))",
    )


def test_a_link_that_carries_credentials_is_not_asked(hostile: str) -> None:
    _Hostile.authorizations.clear()
    rule, detail = one_finding(hostile + "userinfo/")
    assert (rule, detail) == (
        "download",
        "does not download: the link carries credentials (user:password@): release audit "
        "sends none",
    )
    assert _Hostile.authorizations == []


def test_a_link_httpx_cannot_ask_is_a_finding(hostile: str) -> None:
    rule, detail = one_finding(hostile + "toolong/")
    assert rule == "download"
    assert detail == "does not download: not a URL that can be asked: URL too long"


def test_a_page_that_is_not_text_in_its_charset_is_unreadable_not_empty(hostile: str) -> None:
    assert one_finding(hostile + "latin/") == (
        "download",
        "not a simple index page (not utf-8 text)",
    )


def test_a_pep_691_hash_that_is_not_a_string_makes_the_page_unreadable(hostile: str) -> None:
    assert one_finding(hostile + "intsha/") == (
        "download",
        "not a simple index page ('k3-1.0-py3-none-any.whl': its 'sha256' hash is not a string)",
    )


def test_a_link_too_broken_to_join_fails_alone(hostile: str) -> None:
    report = audit(sources([hostile + "badhref/"], None), AuditSettings(torch_index=None), {})
    found = sorted((f.rule, f.file, f.detail.split(":")[0]) for f in report.findings)
    assert found == [
        ("download", "k3-1.0-py3-none-any.whl", "does not download"),  # the 404, read
        ("download", "k3-2.0-py3-none-any.whl", "does not download"),
    ]
    assert "not a URL" in next(f.detail for f in report.findings if "2.0" in f.file)


def test_a_retry_after_that_is_no_number_is_not_waited_on(hostile: str) -> None:
    done = subprocess.run(
        [str(RELEASE), "audit", hostile + "busy/", "--no-torch-index", "--json"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 7, done.stderr
    assert "Traceback" not in done.stderr
    document = json.loads(done.stdout)
    assert [f["detail"] for f in document["findings"]] == ["the page does not load: HTTP 429"]


def test_an_audit_stopped_while_a_server_stalls_a_download_ends_at_once(hostile: str) -> None:
    """SIGTERM (a cancelled CI job) while a wheel's bytes are held: the command ends at once
    with 128 + 15 and says so, instead of waiting out the download's read timeout."""
    _Hostile.stalled.clear()
    run = subprocess.Popen(
        [str(RELEASE), "audit", hostile + "stallwheel/", "--no-torch-index"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert _Hostile.stalled.wait(60)
        run.send_signal(signal.SIGTERM)
        _, stderr = run.communicate(timeout=30)  # not the 60 s a stalled read would hold
    finally:
        run.kill()
        run.wait()
    assert run.returncode == 128 + signal.SIGTERM
    assert stderr.splitlines()[-1] == "error: interrupted by SIGTERM"


def test_a_body_past_its_limit_leaves_no_more_than_the_limit(hostile: str, tmp_path: Path) -> None:
    into = tmp_path / "endless.whl"
    with http.client() as client:
        got = http.fetch(
            client, hostile + "endless-1.0-py3-none-any.whl", into=into, max_bytes=4 * 2**20,
            policy=RetryPolicy(attempts=1, initial_delay=0.0, total=60.0),
        )  # fmt: skip
    assert got.error == "the body is larger than 4 MiB as decoded"
    assert into.stat().st_size <= 5 * 2**20


def test_a_page_the_audits_own_time_limit_cuts_short_is_unread_not_a_finding(
    hostile: str,
) -> None:
    report = audit(
        sources([hostile + "stall/"], None),
        AuditSettings(torch_index=None, attempts=1, timeout_s=2.0), {},
    )  # fmt: skip
    assert report.findings == ()
    assert report.not_reached == (hostile + "stall/",)


def test_a_wheel_in_an_encoding_not_asked_for_is_refused_unread(hostile: str) -> None:
    # a wheel is asked for as stored (pip's Accept-Encoding: identity); gzip an index sent
    # anyway was inflated to scratch before the limit refused it (6 GiB from 6 MB)
    assert one_finding(hostile + "gzipwheel/") == (
        "download",
        "does not download: answered in the encoding 'gzip', which was not asked for",
    )


def test_no_page_is_asked_for_once_the_audits_time_limit_has_passed(hostile: str) -> None:
    """A root index's project pages after the limit were each still asked for, with a
    millisecond to answer (a root of a million projects: an hour of requests)."""
    report = audit(
        sources([hostile + "stallroot/"], None),
        AuditSettings(torch_index=None, attempts=1, timeout_s=2.0), {},
    )  # fmt: skip
    assert report.findings == ()
    assert report.not_reached == tuple(f"{hostile}stallroot/p{n}/" for n in range(30))
    assert _Hostile.root_projects_asked == ["/stallroot/p0/"]


def test_headers_that_trickle_in_end_at_the_audits_time_limit() -> None:
    """A byte every 50 ms never lets a read time out: the headers were read for as long as
    the server sent them (20 s here, or forever), whatever the audit's limit said."""
    with serve(TricklingHeaders) as url:
        report = audit(
            sources([url], None), AuditSettings(torch_index=None, attempts=1, timeout_s=2.0), {}
        )
        assert report.not_reached == (url,)
        assert 0 < TricklingHeaders.sent_before_hangup() < TricklingHeaders.count


def test_a_first_byte_probe_ends_within_its_timeouts_however_its_headers_trickle() -> None:
    """The nightly channel's probe of a wheel (one GET of its first byte, no retries) read
    trickling headers as long as they came, each byte well within the read timeout."""
    with serve(TricklingHeaders) as url, http.client(timeout=httpx.Timeout(1.0)) as client:
        got = http.first_byte(client, url)
        assert 0 < TricklingHeaders.sent_before_hangup() < TricklingHeaders.count
    assert got.status is None
    assert got.error == "ReadTimeout: the 2 s deadline passed"
