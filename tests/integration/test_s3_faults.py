"""The S3 edge (release/remote/s3.py) and the nightly channel on it, against answers moto
cannot give: a fault-injecting proxy on 127.0.0.1 (tests/s3_server/faults.py) in front of
the real moto server breaks one kind of answer at a time. Each failure must end in one
line of the error family (exit 5 from publish, a failed check from verify), naming the
call and the key, with no credential and no traceback; nothing half-written, nothing lost:
the oracle (tests/integration/nightly.py) reads the bucket afterwards. Waits between
attempts are recorded, not slept, except where a test runs the command itself."""

from __future__ import annotations

import json
import re
import tracemalloc
from collections.abc import Callable
from dataclasses import replace

import pytest

from release.credentials import s3_credentials
from release.errors import PublishError
from release.nightly.layout import STATE_KEY
from release.remote.s3 import Bucket, Limits, S3Store
from tests.integration.nightly import (
    PREFIX,
    Channel,
    MakeChannel,
    commit_of,
    make_channel,
    oracle,
)
from tests.s3_server import ACCESS_KEY, SECRET_KEY, s3_server
from tests.s3_server.faults import (
    ACCESS_DENIED,
    SLOW_DOWN,
    TRICKLE_S,
    Fault,
    FaultProxy,
    error_document,
    s3_faults,
)

__all__ = ["make_channel", "s3_faults", "s3_server"]

LIST = r"\?list-type=2"  # a ListObjectsV2 request's target


def through(channel: Channel, proxy: FaultProxy, sleeps: list[float]) -> S3Store:
    """The channel's bucket as the command reaches it, through the proxy, its waits
    recorded in `sleeps`."""
    bucket = Bucket(name=channel.bucket, endpoint=proxy.endpoint, region="auto")
    return S3Store(bucket, s3_credentials(channel.env()), sleep=sleeps.append)


def failed(call: Callable[[], object]) -> PublishError:
    """The PublishError `call` ends in: one line."""
    with pytest.raises(PublishError) as raised:
        call()
    assert "\n" not in raised.value.message
    assert raised.value.exit_code == 5
    return raised.value


def first_page(target: str) -> str:
    """A listing's request as moto is asked it: its continuation token left out."""
    return re.sub(r"&continuation-token=[^&]*", "", target)


def looping(body: bytes) -> bytes:
    """moto's (last) page of a listing, said to go on with the same token again."""
    body = body.replace(b"<IsTruncated>false</IsTruncated>", b"<IsTruncated>true</IsTruncated>")
    token = b"<NextContinuationToken>again</NextContinuationToken>"
    return body.replace(b"</ListBucketResult>", token + b"</ListBucketResult>")


def version(number: int) -> str:
    return f"0.1.1.dev{commit_of(number).time}"


def test_a_listing_whose_continuation_token_repeats_ends_in_one_error(
    make_channel: MakeChannel, s3_faults: FaultProxy
) -> None:
    """A server that answers every page of a listing with the token it gave before: the
    listing ends at the repeat (two requests) instead of asking forever, in publish's
    read-back of nightly/ and in verify's `objects` check."""
    channel = make_channel(keep=2, version="0.1.1")
    channel.publish_in_process(1)
    sleeps: list[float] = []
    store = through(channel, s3_faults, sleeps)
    loop = s3_faults.add(
        Fault(method="GET", path=LIST, action="rewrite", target=first_page, rewrite=looping,
              count=20)
    )  # fmt: skip
    error = failed(lambda: store.list(PREFIX))
    assert f"LIST {PREFIX} does not end: the server gives a continuation token" in error.message
    assert s3_faults.fired(loop) == 2
    s3_faults.clear()
    channel.publish_in_process(2)
    loop = s3_faults.add(
        Fault(method="GET", path=LIST, action="rewrite", target=first_page, rewrite=looping,
              count=20)
    )  # fmt: skip
    error = failed(lambda: channel.publish_in_process(3, store=store))  # prunes: lists nightly/
    assert f"LIST {PREFIX}nightly/ does not end" in error.message
    assert s3_faults.fired(loop) == 2
    assert sleeps == []
    s3_faults.clear()
    assert oracle(channel, whole=[commit_of(n).sha for n in (2, 3)]) == []


def one_error(output: str) -> str:
    """The one `error:` line a run printed (and no traceback)."""
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    return errors[0]


def test_an_answer_whose_last_modified_does_not_parse_fails_as_the_call_it_answered(
    make_channel: MakeChannel, s3_faults: FaultProxy
) -> None:
    """`Last-Modified: yesterday` on the state's GET, and a listing's `<LastModified>`
    that is no time: botocore's parser raised a ValueError, which left the command as "a
    bug in release" with a traceback. Each is now one line naming the call (publish:
    exit 5, nothing uploaded; verify: its `objects` check failed, exit 7)."""
    channel = make_channel(version="0.1.1")
    channel.publish_in_process(1)
    channel.reach_through(s3_faults.endpoint)
    before = channel.object_keys()
    s3_faults.add(
        Fault(method="GET", path=STATE_KEY, action="rewrite",
              headers={"Last-Modified": "yesterday"}, count=10)
    )  # fmt: skip
    done = channel.publish(2, "--json")
    assert done.returncode == 5, done.stderr
    line = one_error(done.stderr)
    assert f"GET {PREFIX}{STATE_KEY} failed: UnreadableAnswer: the answer does not parse" in line
    assert 'Invalid timestamp "yesterday"' in line
    assert channel.object_keys() == before
    s3_faults.clear()
    s3_faults.add(
        Fault(method="GET", path=LIST, action="rewrite", count=10, rewrite=lambda body: re.sub(
            rb"<LastModified>[^<]*</LastModified>", b"<LastModified>yesterday</LastModified>",
            body))
    )  # fmt: skip
    verified = channel.release("verify", "--channel", "nightly", "--no-pip", "--json")
    assert verified.returncode == 7, verified.stderr
    assert "Traceback" not in verified.stderr
    objects = [c for c in json.loads(verified.stdout)["checks"] if c["check"] == "objects"]
    assert [c["ok"] for c in objects] == [False]
    detail = objects[0]["detail"]
    assert f"LIST {PREFIX} failed: UnreadableAnswer: the answer does not parse" in detail
    s3_faults.clear()
    assert oracle(channel, whole=[commit_of(1).sha]) == []


def test_a_body_cut_short_is_read_again_never_taken_for_the_whole_object(
    make_channel: MakeChannel, s3_faults: FaultProxy
) -> None:
    """A GET whose server closes the connection in order before the Content-Length it
    announced: botocore checks no length of a body read up to a bound, so the first bytes
    were taken for the object. A state cut short was "not a nightly state" (its hint:
    remove it); a keep-list cut short lost its pins, and the pinned commit was deleted.
    Now the read is retried, and one always cut short fails as the GET it is (exit 5)."""
    channel = make_channel(keep=2, version="0.1.1")
    channel.publish_in_process(1)
    sleeps: list[float] = []
    store = through(channel, s3_faults, sleeps)
    s3_faults.add(Fault(method="GET", path=STATE_KEY, action="truncate", send_bytes=20))
    channel.publish_in_process(2, store=store)  # the second read is whole
    assert sleeps == [1.0]
    cut = Fault(method="GET", path=STATE_KEY, action="truncate", send_bytes=20, count=10)
    s3_faults.add(cut)
    before = channel.object_keys()
    error = failed(lambda: channel.publish_in_process(3, store=store))
    assert f"GET {PREFIX}{STATE_KEY} failed: IncompleteReadError: 20 read" in error.message
    assert "not a nightly state" not in error.message
    assert s3_faults.fired(cut) == 3
    assert channel.object_keys() == before
    s3_faults.clear()
    pins = f"# pinned by hand, one a line{' ' * 100}\n{version(1)}\n".encode()
    channel.put(PREFIX + "keep-list.txt", pins, "text/plain")
    s3_faults.add(Fault(method="GET", path="keep-list.txt", action="truncate", send_bytes=50,
                        count=10))  # fmt: skip
    error = failed(lambda: channel.publish_in_process(3, store=store))
    assert f"GET {PREFIX}keep-list.txt failed: IncompleteReadError" in error.message
    s3_faults.clear()
    channel.publish_in_process(3, store=store)
    assert channel.state().kept_commit(commit_of(1).sha) is not None  # pinned: kept
    assert oracle(channel, whole=[commit_of(n).sha for n in (1, 2, 3)]) == []


STORM_STEPS = {
    "the state's read": ("GET", STATE_KEY, 0),
    "the state's registration": ("PUT", STATE_KEY, 0),
    "a wheel's upload": ("PUT", r"\.whl$", 0),
    "the state's completion": ("PUT", STATE_KEY, 1),
    "a /nightly/ page": ("PUT", r"/nightly/", 0),
    "the read-back of nightly/": ("GET", LIST, 0),
    "the pruning's deletion": ("POST", r"\?delete", 0),
}


@pytest.mark.parametrize("step", list(STORM_STEPS))
def test_a_slowdown_storm_at_each_step_is_bounded_and_loses_nothing(
    make_channel: MakeChannel, s3_faults: FaultProxy, step: str
) -> None:
    """503 SlowDown to every try of one step of a publish (keep 2: the run prunes): three
    attempts with waits of 1 s and 2 s, then one line naming the call (exit 5); every
    commit the state keeps is whole, /nightly/ serves one whole commit, and a re-run
    finishes the publish."""
    method, path, skip = STORM_STEPS[step]
    channel = make_channel(keep=2, version="0.1.1")
    channel.publish_in_process(1)
    channel.publish_in_process(2)
    sleeps: list[float] = []
    store = through(channel, s3_faults, sleeps)
    storm = s3_faults.add(
        Fault(method=method, path=path, status=503, body=SLOW_DOWN, count=100, skip=skip)
    )
    error = failed(lambda: channel.publish_in_process(3, store=store))
    assert " failed: HTTP 503 SlowDown (3 attempts in " in error.message
    assert s3_faults.fired(storm) == 3
    assert sleeps == [1.0, 2.0]
    assert oracle(channel, whole=[commit_of(2).sha]) == []
    s3_faults.clear()
    channel.publish_in_process(3, store=store)
    state = channel.state()
    assert state.nightly is not None
    assert state.nightly.commit == commit_of(3).sha
    assert state.pruning == ()
    assert oracle(channel, whole=[commit_of(n).sha for n in (2, 3)]) == []


def peak_bytes(call: Callable[[], object]) -> int:
    """The most memory Python held at once while `call` ran (its own allocations and the
    proxy's, which runs in this process)."""
    tracemalloc.start()
    try:
        call()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


@pytest.mark.parametrize(
    ("method", "path", "status", "call"),
    [
        ("GET", LIST, 200, "list"),
        ("PUT", "huge", 500, "put"),
        ("GET", "huge", 503, "get"),
    ],
)
def test_an_answer_past_any_s3_answers_size_is_refused_unread(  # noqa: PLR0917  # parametrized
    make_channel: MakeChannel, s3_faults: FaultProxy, method: str, path: str, status: int,
    call: str,
) -> None:  # fmt: skip
    """A listing, a PUT's answer and a GET's error answer of 100 MiB: botocore read each
    whole into memory, three times over with the retries. An answer other than an
    object's body is now read to 16 MiB and no further, and refused in one line."""
    channel = make_channel(version="0.1.1")
    sleeps: list[float] = []
    store = through(channel, s3_faults, sleeps)
    huge = s3_faults.add(
        Fault(method=method, path=path, action="huge", status=status, size=100 * 2**20, count=3)
    )
    calls: dict[str, Callable[[], object]] = {
        "list": lambda: store.list(PREFIX),
        "put": lambda: store.put(
            PREFIX + "huge", b"x", content_type="text/plain", cache_control=""
        ),
        "get": lambda: store.get(PREFIX + "huge"),
    }
    errors: list[PublishError] = []
    peak = peak_bytes(lambda: errors.append(failed(calls[call])))
    assert "failed: UnreadableAnswer: the answer does not parse: more than 16 MiB" in (
        errors[0].message
    )
    assert s3_faults.fired(huge) == 1
    assert sleeps == []
    assert peak < 48 * 2**20, peak


def test_a_listing_answered_by_something_else_is_refused_and_deletes_nothing(
    make_channel: MakeChannel, s3_faults: FaultProxy
) -> None:
    """A 200 to a listing that is well-formed XML but no ListObjectsV2 answer (a portal's
    or a CDN's page): botocore read it as an empty listing. Publish then saw no /nightly/
    page linking anything and deleted the commit the pages still served (their moves had
    failed); verify's `objects` check passed on "every one of the 0 objects". Now it is
    one error naming the LIST, and nothing is deleted."""
    channel = make_channel(keep=2, version="0.1.1")
    channel.publish_in_process(2)
    sleeps: list[float] = []
    store = through(channel, s3_faults, sleeps)
    s3_faults.add(Fault(method="PUT", path="/nightly/k3-kernels", status=403, body=ACCESS_DENIED,
                        count=100))  # fmt: skip
    for number in (3, 4):
        error = failed(lambda: channel.publish_in_process(number, store=store))  # noqa: B023
        assert "HTTP 403 AccessDenied" in error.message
    s3_faults.clear()
    page = b'<?xml version="1.0"?>\n<html><body>Down for maintenance</body></html>'
    s3_faults.add(Fault(method="GET", path=LIST, status=200, body=page, count=100))
    error = failed(lambda: channel.publish_in_process(1, store=store))
    assert f"LIST {PREFIX}nightly/ failed: UnreadableAnswer" in error.message
    assert "not a ListObjectsV2 answer" in error.message
    assert channel.get(channel.index_url + f"{commit_of(2).sha}/cu129/k3-kernels/").is_success
    assert oracle(channel) == []
    channel.reach_through(s3_faults.endpoint)
    verified = channel.release("verify", "--channel", "nightly", "--no-pip", "--json")
    objects = [c for c in json.loads(verified.stdout)["checks"] if c["check"] == "objects"]
    assert [c["ok"] for c in objects] == [False]
    assert "not a ListObjectsV2 answer" in objects[0]["detail"]
    assert sleeps == []


SESSION_TOKEN = "FwoGZXIvYXdzEJr-session-T0ken-5e6f"  # a test's, nothing else


def test_no_output_error_or_document_shows_a_credential(
    make_channel: MakeChannel, s3_faults: FaultProxy
) -> None:
    """A server that says the request's credentials back (the access key and the session
    token are on the wire; the secret key is not, but is tried too) in an error's code
    and message, in a header botocore cannot parse, and in a listing's error; an endpoint
    and an index-url with userinfo. Nothing printed, no --json document, no error's text
    and no file written holds one, and each failure is one line."""
    channel = make_channel(version="0.1.1")
    channel.publish_in_process(1)
    channel.reach_through(s3_faults.endpoint)
    secrets = (ACCESS_KEY, SECRET_KEY, SESSION_TOKEN, "user-pass-9f1e")
    env = channel.env(AWS_SESSION_TOKEN=SESSION_TOKEN)
    dist = str(channel.dist(2))
    said = error_document(
        f"AccessDenied\nerror: {ACCESS_KEY}", f"{SECRET_KEY} {SESSION_TOKEN} refused"
    )
    outputs = []
    s3_faults.add(Fault(method="GET", path=STATE_KEY, status=403, body=said))
    s3_faults.add(Fault(method="GET", path=STATE_KEY, action="rewrite",
                        headers={"Last-Modified": f"{SESSION_TOKEN} {ACCESS_KEY}"}))  # fmt: skip
    s3_faults.add(Fault(method="GET", path=LIST, status=403, body=said))
    for args in (
        ("publish", "--channel", "nightly", "--dist", dist, "--json"),
        ("publish", "--channel", "nightly", "--dist", dist, "--json"),
        ("verify", "--channel", "nightly", "--no-pip", "--json"),
    ):
        done = channel.release(*args, env=env)
        assert done.returncode == (7 if args[0] == "verify" else 5), done.stderr
        assert "Traceback" not in done.stderr
        document = json.loads(done.stdout)
        if args[0] == "publish":
            assert one_error(done.stderr) == f"error: {document['error']['message']}"
            assert "\n" not in document["error"]["message"]
        outputs.append(done.stdout + done.stderr)
    assert "AccessDenied" in outputs[0]
    assert "does not parse" in outputs[1]
    text = channel.matrix_path.read_text(encoding="utf-8")
    for old, new in (
        (f"endpoint: {s3_faults.endpoint}", f"endpoint: http://{ACCESS_KEY}:user-pass-9f1e@"
                                            f"{s3_faults.endpoint[len('http://'):]}"),
        (f"index-url: {channel.index_url}",
         f"index-url: {channel.index_url.replace('://', '://u:user-pass-9f1e@')}"),
    ):  # fmt: skip
        assert old in text
        channel.matrix_path.write_text(text.replace(old, new), encoding="utf-8")
        refused = channel.release(
            "publish", "--channel", "nightly", "--dist", dist, "--json", env=env
        )
        assert refused.returncode == 2, refused.stderr
        assert "***@" in refused.stderr
        outputs.append(refused.stdout + refused.stderr)
    written = "\n".join(
        p.read_text(encoding="utf-8", errors="replace")
        for p in channel.root.rglob("*")
        if p.is_file() and p != channel.matrix_path
    )
    for secret in secrets:
        assert not any(secret in output for output in outputs), secret
        assert secret not in written, secret


def test_a_gateway_storm_ends_the_command_in_one_line_and_its_exit_code(
    make_channel: MakeChannel, s3_faults: FaultProxy
) -> None:
    """`release publish --channel nightly` as users run it (its waits slept: 3 s), against
    502s whose body is a gateway's HTML page: three attempts, then one line with the
    status said once (it read "HTTP 502 502"), exit 5 in the --json document too, and
    nothing written."""
    channel = make_channel(version="0.1.1")
    channel.publish_in_process(1)
    channel.reach_through(s3_faults.endpoint)
    before = channel.object_keys()
    storm = s3_faults.add(
        Fault(method="GET", path=STATE_KEY, status=502, body=b"<html>Bad Gateway</html>",
              count=100)
    )  # fmt: skip
    done = channel.publish(2, "--json")
    assert done.returncode == 5, done.stderr
    line = one_error(done.stderr)
    assert f"GET {PREFIX}{STATE_KEY} failed: HTTP 502 (3 attempts in " in line
    document = json.loads(done.stdout)
    assert document["error"]["exit_code"] == 5
    assert f"error: {document['error']['message']}" == line
    assert s3_faults.fired(storm) == 3
    assert channel.object_keys() == before


REDIRECT = error_document(
    "PermanentRedirect",
    "The bucket you are attempting to access must be addressed using the specified endpoint.",
    Endpoint="s3.eu-west-1.amazonaws.com",
)
WRONG_REGION = error_document(
    "AuthorizationHeaderMalformed",
    "The authorization header is malformed; the region 'auto' is wrong; expecting 'eu-west-1'",
    Region="eu-west-1",
)


@pytest.mark.parametrize(
    ("status", "body", "headers", "hint"),
    [
        (301, REDIRECT, {"x-amz-bucket-region": "eu-west-1"}, "region: eu-west-1"),
        (400, WRONG_REGION, {}, "region: eu-west-1"),
        (301, REDIRECT, {}, "the server redirects to another endpoint or region"),
        (301, REDIRECT, {"x-amz-bucket-region": "eu-west-1 `rm -rf /`"}, "endpoint"),
    ],
)
def test_a_bucket_in_another_region_is_one_line_whose_hint_names_the_region(  # noqa: PLR0917  # parametrized
    make_channel: MakeChannel, s3_faults: FaultProxy, status: int, body: bytes,
    headers: dict[str, str], hint: str,
) -> None:  # fmt: skip
    """S3's answers to a request sent to the wrong region (a 301 PermanentRedirect with
    the bucket's region in a header, a 400 naming it in the document): the error was one
    line with the hint "check the destination's endpoint and bucket"; the hint now names
    the region to set, where the answer names one that is a region's name (botocore's own
    redirect refuses one that is not, as an answer that does not parse)."""
    channel = make_channel(version="0.1.1")
    channel.reach_through(s3_faults.endpoint)
    s3_faults.add(
        Fault(method="GET", path=STATE_KEY, status=status, body=body, headers=headers, count=10)
    )
    done = channel.publish(1)
    assert done.returncode == 5, done.stderr
    assert f"GET {PREFIX}{STATE_KEY} failed: " in one_error(done.stderr)
    hints = [line for line in done.stderr.splitlines() if line.startswith("hint:")]
    assert len(hints) == 1
    assert hint in hints[0]
    assert "rm -rf" not in hints[0]  # a region named by the server is named only as a region
    assert channel.object_keys() == set()


@pytest.mark.parametrize("status", [301, 302, 307])
def test_a_redirect_to_another_host_is_never_followed_with_the_keys(
    make_channel: MakeChannel, s3_faults: FaultProxy, status: int
) -> None:
    """An answer that sends the signed request elsewhere (`Location:` another server on
    127.0.0.1): the other server is asked nothing, and the run ends in one line."""
    channel = make_channel(version="0.1.1")
    channel.reach_through(s3_faults.endpoint)
    elsewhere = FaultProxy(channel.s3.endpoint).start()
    try:
        location = f"{elsewhere.endpoint}/{channel.bucket}/{PREFIX}{STATE_KEY}"
        s3_faults.add(Fault(method="GET", path=STATE_KEY, status=status, count=10,
                            headers={"Location": location}))  # fmt: skip
        done = channel.publish(1)
        assert done.returncode == 5, done.stderr
        assert f"GET {PREFIX}{STATE_KEY} failed: HTTP {status}" in one_error(done.stderr)
        assert elsewhere.requests == []
    finally:
        elsewhere.stop()


@pytest.mark.parametrize(("method", "path", "call"), [("GET", STATE_KEY, "get"),
                                                      ("GET", LIST, "list")])  # fmt: skip
def test_an_answer_that_stalls_mid_body_is_given_up_on_at_the_calls_bound(
    make_channel: MakeChannel, s3_faults: FaultProxy, method: str, path: str, call: str
) -> None:
    """A server that sends its status, headers and a little of the body, then nothing: an
    object's body (read by `get`) and a listing (read to its bound by the store) each end
    when a read waits past the read timeout, once the call's attempts are spent (a store
    with short limits here; docs/nightly.md states the shipped ones)."""
    channel = make_channel(version="0.1.1")
    channel.publish_in_process(1)
    sleeps: list[float] = []
    bucket = Bucket(name=channel.bucket, endpoint=s3_faults.endpoint, region="auto")
    limits = Limits(connect=1.0, read=1.0, attempts=2, first_wait=0.5)
    store = S3Store(bucket, s3_credentials(channel.env()), limits=limits, sleep=sleeps.append)
    s3_faults.add(Fault(method=method, path=path, action="hold", send_bytes=10, count=2))
    calls: dict[str, Callable[[], object]] = {
        "get": lambda: store.get(PREFIX + STATE_KEY),
        "list": lambda: store.list(PREFIX),
    }
    try:
        error = failed(calls[call])
    finally:
        s3_faults.clear()
    assert "ReadTimeoutError" in error.message
    assert "(2 attempts in" in error.message
    assert "a call has at most 4 s" in error.message
    assert sleeps == [0.5]


def test_an_object_that_trickles_in_is_given_up_on_at_the_calls_bound(
    make_channel: MakeChannel, s3_faults: FaultProxy
) -> None:
    """A byte of the body every 50 ms never lets a socket read time out: `get` read the
    state for as long as the server sent it (seconds here, hours for a larger object),
    whatever the call's bound said."""
    channel = make_channel(version="0.1.1")
    channel.publish_in_process(1)
    bucket = Bucket(name=channel.bucket, endpoint=s3_faults.endpoint, region="auto")
    limits = Limits(connect=1.0, read=1.0, attempts=2, first_wait=0.5)
    store = S3Store(bucket, s3_credentials(channel.env()), limits=limits, sleep=lambda _: None)
    state = store.get(PREFIX + STATE_KEY)
    assert state is not None
    assert state.size * TRICKLE_S > 4 * limits.total  # trickled whole, it would take longer
    s3_faults.add(Fault(method="GET", path=re.escape(STATE_KEY), action="trickle", count=2))
    try:
        error = failed(lambda: store.get(PREFIX + STATE_KEY))
    finally:
        s3_faults.clear()
    assert "deadline of the call passed while its answer came in" in error.message
    assert "a call has at most 4 s" in error.message


def test_a_connection_reset_mid_answer_is_tried_again_and_a_landed_write_is_success(
    make_channel: MakeChannel, s3_faults: FaultProxy
) -> None:
    """The connection reset (RST) part way through the state's body, a listing's, and
    the answer to a wheel's PUT that moto had stored: each call is tried again once; the
    wheel's second PUT is refused (412: it is there) and read back as the build's bytes."""
    channel = make_channel(keep=2, version="0.1.1")
    channel.publish_in_process(1)
    channel.publish_in_process(2)
    sleeps: list[float] = []
    store = through(channel, s3_faults, sleeps)
    resets = [
        s3_faults.add(Fault(method="GET", path=STATE_KEY, action="reset", send_bytes=30)),
        s3_faults.add(Fault(method="GET", path=LIST, action="reset", send_bytes=30)),
        s3_faults.add(Fault(method="PUT", path=r"\.whl$", action="reset")),
    ]
    done = channel.publish_in_process(3, store=store)
    assert [s3_faults.fired(reset) for reset in resets] == [1, 1, 1]
    assert sleeps == [1.0, 1.0, 1.0]
    assert done.promoted is True
    assert [p.commit for p in done.pruned] == [commit_of(1).sha]
    assert oracle(channel, whole=[commit_of(n).sha for n in (2, 3)]) == []


def test_a_deletions_failures_are_one_line_with_no_credential(
    make_channel: MakeChannel, s3_faults: FaultProxy
) -> None:
    """A DeleteObjects answer listing a failure whose key and code are the server's text
    (a newline, the request's access key): the error said them as given, unmasked in the
    exception's text and on two `error:` lines. Now one line, the key escaped and the
    code quoted, the key masked; the commit that was to be pruned stays proposed and whole,
    and the next run prunes it."""
    channel = make_channel(keep=2, version="0.1.1")
    channel.publish_in_process(1)
    channel.publish_in_process(2)
    said = (
        f'<?xml version="1.0" encoding="UTF-8"?><DeleteResult><Error><Key>{PREFIX}x\n'
        f"error: forged</Key><Code>{ACCESS_KEY}\nerror: forged</Code><Message>no</Message>"
        "</Error></DeleteResult>"
    ).encode()
    s3_faults.add(Fault(method="POST", path=r"\?delete", status=200, body=said, count=10))
    sleeps: list[float] = []
    error = failed(lambda: channel.publish_in_process(3, store=through(channel, s3_faults, sleeps)))
    assert "1 of 12 deletions failed; first k3-kernels/x\\nerror: forged: '***" in error.message
    assert ACCESS_KEY not in error.message
    assert [p.commit for p in channel.state().pruning] == [commit_of(1).sha]
    assert channel.get(channel.index_url + f"{commit_of(1).sha}/cu129/k3-kernels/").is_success
    assert oracle(channel, whole=[commit_of(n).sha for n in (2, 3)]) == []
    channel.reach_through(s3_faults.endpoint)
    done = channel.publish(3, "--json")
    assert done.returncode == 5
    assert one_error(done.stderr) == f"error: {json.loads(done.stdout)['error']['message']}"
    assert ACCESS_KEY not in done.stdout + done.stderr
    s3_faults.clear()
    channel.publish_in_process(4)
    assert channel.state().pruning == ()
    assert oracle(channel, whole=[commit_of(n).sha for n in (3, 4)]) == []


def test_an_unparsable_answers_reason_is_one_line_with_no_credential(
    make_channel: MakeChannel, s3_faults: FaultProxy
) -> None:
    """A listing whose `<LastModified>` holds a newline and the request's access key:
    botocore's parser quotes the value, and the error was two lines."""
    channel = make_channel(version="0.1.1")
    channel.publish_in_process(1)
    bad = f"<LastModified>yester\nerror: {ACCESS_KEY}</LastModified>".encode()
    s3_faults.add(Fault(method="GET", path=LIST, action="rewrite", rewrite=lambda body: re.sub(
        rb"<LastModified>[^<]*</LastModified>", bad, body)))  # fmt: skip
    error = failed(lambda: through(channel, s3_faults, []).list(PREFIX))
    assert f"LIST {PREFIX} failed: UnreadableAnswer: the answer does not parse" in error.message
    assert "yester\\nerror: ***" in error.message


@pytest.mark.parametrize(
    ("key", "value"),
    [
        # (`http://[::1`, no URL, is refused as the manifest is read: url_shape_problem)
        ("endpoint", "https://elsewhere.example:9000"),
        ("prefix", "../../"),
        ("bucket", "another-bucket"),
        ("region", "eu-west-1"),
        ("index_url", "https://wheels.example/elsewhere/"),
    ],
)
def test_a_dist_built_for_another_place_is_refused_before_anything_is_written(
    make_channel: MakeChannel, key: str, value: str
) -> None:
    """A dist whose manifest.json records another bucket, prefix, endpoint, region or
    index-url for the channel than matrix.yaml says (edited, or built from another
    matrix): publish went where the manifest said, unchecked (`http://[::1` broke the S3
    client; `../../` made a second channel beside the first, whose verify then failed; a
    region published), while plan and verify read the matrix's. Now refused (exit 2) in
    one line naming the file, before anything is asked or written."""
    channel = make_channel(version="0.1.1")
    channel.publish_in_process(1)
    dist = channel.dist(2)
    manifest = dist / "manifest.json"
    data = json.loads(manifest.read_text(encoding="utf-8"))
    for wheel in data["wheels"]:
        wheel["destination"][key] = value
    manifest.write_text(json.dumps(data), encoding="utf-8")
    before = channel.object_keys()
    done = channel.release("publish", "--channel", "nightly", "--dist", str(dist), "--json")
    assert done.returncode == 2, done.stderr
    line = one_error(done.stderr)
    assert f"{manifest}: built for the channel's {key.replace('_', '-')} " in line
    assert "matrix.yaml's is " in line
    assert channel.object_keys() == before


@pytest.mark.parametrize(
    ("fault", "verb"),
    [
        (Fault(method="GET", path=STATE_KEY, action="rewrite", headers={"ETag": ""}), "GET"),
        (Fault(method="PUT", path=STATE_KEY, status=200, body=b"<html>Saved</html>"), "PUT"),
        (
            Fault(
                method="HEAD",
                path=r"/k3-kernels/(index\.json)?$",
                action="rewrite",
                headers={"ETag": ""},
            ),
            "HEAD",
        ),
    ],
    ids=["get", "put", "head"],
)
def test_an_answer_without_an_etag_is_no_s3_answer(
    make_channel: MakeChannel, s3_faults: FaultProxy, fault: Fault, verb: str
) -> None:
    """Every S3 answer to a GET, HEAD or PUT carries the object's ETag, which the channel's
    compare-and-swap writes name. Without one, a state read was written against `If-Match:
    ""` 20 times before "other runs are publishing at the same time"; a PUT answered by
    something else (200, an HTML page) counted as a write that was never made; a re-run's
    HEAD of a commit page read as another page than the commit's, a CONFLICT (exit 6).
    Now each is one line naming the call (exit 5), before anything depends on it."""
    channel = make_channel(version="0.1.1")
    channel.publish_in_process(1)
    sleeps: list[float] = []
    store = through(channel, s3_faults, sleeps)
    if verb == "HEAD":  # a run stopped before the commit's completion: the re-run asks
        s3_faults.add(Fault(method="PUT", path=STATE_KEY, status=403, body=ACCESS_DENIED,
                            skip=1))  # fmt: skip
        failed(lambda: channel.publish_in_process(2, store=store))
        s3_faults.clear()
    armed = s3_faults.add(replace(fault, count=100))
    error = failed(lambda: channel.publish_in_process(2, store=store))
    assert f"{verb} {PREFIX}" in error.message
    assert "failed: UnreadableAnswer: the answer does not parse: no ETag" in error.message
    assert s3_faults.fired(armed) == 1  # not tried again, nor written against
    assert sleeps == []
    assert oracle(channel, whole=[commit_of(1).sha]) == []
