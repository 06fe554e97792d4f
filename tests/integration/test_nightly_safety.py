"""Issue 39: the nightly channel loses nothing. Each case runs `release` as users run it
against moto's S3 on 127.0.0.1 (tests/s3_server) with faults injected there (409
ConditionalRequestConflict, answers lost after a landed write, a held request and a
SIGKILL between the steps), and ends with an oracle that reads the bucket directly
(tests/integration/nightly.py `oracle`): every commit reported as promoted or kept is
whole, and /nightly/ links only files whose bytes match."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from dataclasses import replace

import pytest

from release.credentials import s3_credentials
from release.destinations.reach import Reach
from release.errors import PublishError
from release.matrix.nightly import nightly_matrix
from release.nightly.layout import STATE_KEY
from release.nightly.plan import make_nightly_plan
from release.nightly.state import Pruning
from release.remote.s3 import Bucket, Limits, S3Store
from release.remote.simple_index import SIMPLE_JSON
from tests.integration.nightly import (
    PREFIX,
    Channel,
    MakeChannel,
    commit_of,
    make_channel,
    oracle,
)
from tests.s3_server import S3Server, s3_server

__all__ = ["make_channel", "s3_server"]

DEEP = b"[" * 200_000 + b"]" * 200_000  # valid JSON, nested past any parser's recursion


def version(number: int) -> str:
    return f"0.1.1.dev{commit_of(number).time}"


def pin(channel: Channel, *numbers: int) -> None:
    lines = "".join(f"{version(n)}\n" for n in numbers)
    channel.put(PREFIX + "keep-list.txt", lines.encode(), "text/plain")


def one_error(done: subprocess.CompletedProcess[str]) -> str:
    """The run's one `error:` line (and no traceback)."""
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    return errors[0]


def commit_page(channel: Channel, number: int) -> int:
    url = channel.index_url + f"{commit_of(number).sha}/cu129/k3-kernels/"
    return channel.get(url).status_code


def wait_for(s3: S3Server, method: str, needle: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if any(r["method"] == method and needle in r["path"] for r in s3.requests()):
            return
        time.sleep(0.2)
    raise AssertionError(f"no {method} {needle} within 120 s")


def test_a_pinned_commit_republished_after_a_kill_before_its_pruning_stays_whole(
    make_channel: MakeChannel, s3_server: S3Server
) -> None:
    """Point 1, first trigger: commit 1 fell out, the run that pruned it was killed after
    its state write (its deletion held on the wire); a user pins commit 1 and re-runs its
    publish. Before: /<commit 1>/ answered 404 once the re-run exited 0."""
    channel = make_channel(keep=2, version="0.1.1")
    channel.publish_in_process(1)
    channel.publish_in_process(2)
    s3_server.fault("POST", f"/{channel.bucket}", hang=True)  # DeleteObjects
    s3_server.requests(reset=True)
    run = subprocess.Popen(
        channel.command("publish", "--channel", "nightly", "--dist", str(channel.dist(3))),
        env=channel.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(s3_server, "POST", f"/{channel.bucket}")
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
    finally:
        s3_server.clear_faults()
    assert [p.commit for p in channel.state().pruning] == [commit_of(1).sha]
    pin(channel, 1)
    again = channel.publish(1, "--json")
    assert again.returncode == 0, again.stderr
    assert commit_page(channel, 1) == 200
    assert oracle(channel, whole=[commit_of(1).sha]) == []
    assert channel.state().pruning == ()
    verified = channel.release("verify", "--channel", "nightly", "--no-pip")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_commit_republished_after_a_later_run_reaped_it_is_kept_then_pruned_whole(
    make_channel: MakeChannel, s3_server: S3Server
) -> None:
    """Point 1, second trigger: a later run's pruning of commit 1 failed part way (its
    DeleteObjects refused: exit 5), and commit 1's job is re-run, unpinned. It ends kept
    and whole; the next run prunes it, and nothing is left behind."""
    channel = make_channel(keep=2, version="0.1.1")
    channel.publish_in_process(1)
    channel.publish_in_process(2)
    s3_server.fault("POST", f"/{channel.bucket}", status=403, times=5)
    try:
        reaped = channel.publish(3)
    finally:
        s3_server.clear_faults()
    assert reaped.returncode == 5, reaped.stderr
    assert "DELETE" in one_error(reaped)
    again = channel.publish(1, "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["promoted"] is False
    assert oracle(channel, whole=[commit_of(1).sha]) == []
    channel.publish_in_process(4)
    state = channel.state()
    assert [k.commit for k in state.kept] == [commit_of(4).sha, commit_of(3).sha]
    assert state.pruning == ()
    assert not any(k.startswith(f"{PREFIX}{commit_of(1).sha}/") for k in channel.object_keys())
    assert oracle(channel) == []
    verified = channel.release("verify", "--channel", "nightly", "--no-pip")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_retention_never_deletes_what_the_nightly_pages_serve_at_rest(
    make_channel: MakeChannel, s3_server: S3Server
) -> None:
    """Point 2: with keep 2, two runs whose /nightly/ page writes fail after their state
    write (exit 5 each), then an older commit's run: the pages still serve commit 2,
    which must stay whole until the pages move off it."""
    channel = make_channel(keep=2, version="0.1.1")
    channel.publish_in_process(2)
    s3_server.fault("PUT", "/nightly/k3-kernels", status=403, times=100)
    try:
        for number in (3, 4):
            failed = channel.publish(number)
            assert failed.returncode == 5, failed.stderr
            assert "nightly/" in one_error(failed)
    finally:
        s3_server.clear_faults()
    assert channel.state().nightly.commit == commit_of(4).sha  # type: ignore[union-attr]
    older = channel.publish(1)
    assert older.returncode == 0, older.stderr
    assert commit_page(channel, 2) == 200
    assert oracle(channel) == []
    assert f"not pruned: {commit_of(2).sha[:12]} (linked by a /nightly/ page)" in older.stdout
    channel.publish_in_process(5)  # the pages move off commit 2: now it goes
    assert commit_page(channel, 2) in (403, 404)
    assert channel.state().pruning == ()
    assert oracle(channel) == []


def test_a_valid_but_wrong_state_deletes_nothing_it_keeps_or_serves(
    make_channel: MakeChannel,
) -> None:
    """Point 3: a pruning list naming the served commit and a kept one deletes neither;
    a state written for another project is refused in one line (exit 5), never acted on,
    by publish, and read as such by verify and plan."""
    channel = make_channel(version="0.1.1")
    channel.publish_in_process(1)
    channel.publish_in_process(2)
    state = channel.state()
    named = [Pruning(commit=k.commit, time=k.time, shape=k.shape, action="delete")
             for k in state.kept]  # fmt: skip
    channel.put_state(replace(state, pruning=tuple(named)))
    done = channel.publish(3)
    assert done.returncode == 0, done.stderr
    for number in (1, 2, 3):
        assert commit_page(channel, number) == 200
    assert channel.state().pruning == ()
    assert oracle(channel, whole=[commit_of(n).sha for n in (1, 2, 3)]) == []
    channel.put_state(replace(channel.state(), project="flash-attn"))
    before = channel.object_keys()
    refused = channel.publish(4)
    assert refused.returncode == 5
    assert "is the nightly state of 'flash-attn', not of 'k3-kernels'" in one_error(refused)
    assert channel.object_keys() == before
    verified = channel.release("verify", "--channel", "nightly", "--no-pip")
    assert verified.returncode == 7
    assert "nightly state of 'flash-attn'" in verified.stdout + verified.stderr
    channel.git_commit(commit_of(5).time)
    planned = channel.release("plan", "--channel", "nightly", "--dist", str(channel.root / "x"))
    assert planned.returncode == 9
    assert "nightly state of 'flash-attn'" in one_error(planned)


def test_a_409_conditional_request_conflict_with_nothing_written_is_retried(
    make_channel: MakeChannel, s3_server: S3Server
) -> None:
    """Point 4: S3's 409 ConditionalRequestConflict on a wheel and on a commit page (a
    racing writer of the same key) is no CONFLICT: the write is made again."""
    channel = make_channel(version="0.1.1")
    dist = channel.dist(1)
    wheel = json.loads((dist / "manifest.json").read_text())["wheels"][1]["filename"]
    s3_server.fault("PUT", wheel, status=409)
    s3_server.fault("PUT", f"{commit_of(1).sha}/cu129/k3-kernels", status=409)
    try:
        done = channel.publish(1, "--json")
    finally:
        s3_server.clear_faults()
    assert done.returncode == 0, done.stderr
    assert "CONFLICT" not in done.stderr
    assert json.loads(done.stdout)["promoted"] is True
    assert oracle(channel, whole=[commit_of(1).sha]) == []


def test_a_landed_state_write_whose_answer_is_lost_reports_what_the_state_says(
    make_channel: MakeChannel, s3_server: S3Server
) -> None:
    """Point 5: the final state write lands and its answer is lost (503 in its place:
    the retry gets 412); the run exits 0 with "promoted": true and /nightly/ moved. A
    plain re-run of the commit /nightly/ serves says the same."""
    channel = make_channel(version="0.1.1")
    channel.publish_in_process(1)
    s3_server.fault("GET", f"{commit_of(2).sha}/k3_kernels", status=403, times=100)
    try:
        assert channel.publish(2).returncode == 7  # registered and uploaded, not completed
    finally:
        s3_server.clear_faults()
    s3_server.fault("PUT", STATE_KEY, status=503, after=True)
    try:
        done = channel.publish(2, "--json")
    finally:
        s3_server.clear_faults()
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["promoted"] is True
    assert document["nightly"]["commit"] == commit_of(2).sha
    assert channel.state().nightly.commit == commit_of(2).sha  # type: ignore[union-attr]
    assert oracle(channel, whole=[commit_of(2).sha]) == []
    again = channel.publish(2, "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["promoted"] is True
    assert "a newer commit" not in again.stderr


def test_hostile_json_in_the_state_the_pages_and_a_pypi_page_is_one_line(
    make_channel: MakeChannel,
) -> None:
    """Point 6: a deeply nested state (publish, verify, plan), a tampered /nightly/
    index.json (verify) and a deeply nested PyPI project page (publish's version-order
    read): one line each, no traceback."""
    channel = make_channel(version="0.1.1")
    channel.publish_in_process(1)
    channel.put(PREFIX + "nightly/k3-kernels/index.json", DEEP, SIMPLE_JSON)
    tampered = channel.release("verify", "--channel", "nightly", "--no-pip", "--json")
    assert tampered.returncode == 7, tampered.stderr
    assert "Traceback" not in tampered.stderr
    failed = [c for c in json.loads(tampered.stdout)["checks"] if not c["ok"]]
    assert any("nested too deep" in c["detail"] for c in failed), failed
    channel.put(PREFIX + STATE_KEY, DEEP)
    published = channel.publish(2)
    assert published.returncode == 5
    assert "state.json is not a nightly state (nested too deep: more than 64 levels)" in (
        one_error(published)
    )
    verified = channel.release("verify", "--channel", "nightly", "--no-pip")
    assert verified.returncode == 7
    assert "Traceback" not in verified.stderr
    assert "nested too deep" in verified.stdout
    channel.git_commit(commit_of(3).time)
    planned = channel.release("plan", "--channel", "nightly", "--dist", str(channel.root / "x"))
    assert planned.returncode == 9
    assert "nested too deep" in one_error(planned)
    pypi = channel.pypi
    assert pypi is not None
    channel.put(PREFIX + "pypi/k3-kernels/", DEEP, SIMPLE_JSON)
    text = channel.matrix_path.read_text()
    channel.matrix_path.write_text(text.replace(pypi.index_url, channel.index_url + "pypi/"))
    channel.put(PREFIX + STATE_KEY, b"")  # an empty object: not a state either
    order = channel.publish(2)
    assert order.returncode == 5
    line = one_error(order)
    assert "cannot check that the nightly sorts above" in line
    assert "unreadable project page (not a PEP 691 project page (nested too deep: more" in line


def test_keep_list_errors_are_capped_and_an_s3_call_has_a_total_deadline(
    make_channel: MakeChannel, s3_server: S3Server
) -> None:
    """Point 7: 200,000 bad keep-list lines print ten and a count; an endpoint that
    accepts and never answers gives up once the call's attempts are spent (a store with
    short limits here: docs/nightly.md states the shipped ones)."""
    channel = make_channel(version="0.1.1")
    channel.put(PREFIX + "keep-list.txt", b"not-a-version\n" * 200_000, "text/plain")
    done = channel.publish(1)
    assert done.returncode == 0, done.stderr
    ignored = [x for x in done.stdout.splitlines() if "keep-list.txt" in x and "ignored" in x]
    assert len(ignored) == 11
    assert ignored[-1].endswith("199990 more lines ignored (200000 in all)")
    assert len((done.stdout + done.stderr).splitlines()) < 100
    limits = Limits(connect=1.0, read=2.0, attempts=2, first_wait=0.5)
    bucket = Bucket(name=channel.bucket, endpoint=s3_server.endpoint, region="auto")
    keyed = S3Store(bucket, s3_credentials(channel.env()), limits=limits)
    s3_server.fault("GET", STATE_KEY, hang=True, times=10)
    try:
        with pytest.raises(PublishError) as spent:
            channel.publish_in_process(2, store=keyed)
    finally:
        s3_server.clear_faults()
    assert f"GET {PREFIX}{STATE_KEY} failed: ReadTimeoutError" in spent.value.message
    assert "(2 attempts in" in spent.value.message
    assert "a call has at most 6 s" in spent.value.message
    assert oracle(channel, whole=[commit_of(1).sha]) == []


def test_verify_checks_every_kept_commit_and_reports_unexplained_objects(
    make_channel: MakeChannel,
) -> None:
    """Point 8: a deleted wheel of another kept commit, and objects under the prefix the
    state cannot explain (an orphan commit directory, a stray key), fail verify, which
    deletes nothing."""
    channel = make_channel(version="0.1.1")
    for number in (1, 2, 3):
        channel.publish_in_process(number)
    clean = channel.release("verify", "--channel", "nightly", "--no-pip", "--json")
    assert clean.returncode == 0, clean.stdout
    kinds = {c["check"] for c in json.loads(clean.stdout)["checks"]}
    assert {"kept", "objects"} <= kinds
    wheel = f"k3_kernels-{version(1)}+cu129-py3-none-manylinux_2_28_x86_64.whl"
    channel.store().delete([f"{PREFIX}{commit_of(1).sha}/{wheel}"])
    orphans = [f"{PREFIX}{'d' * 40}/k3_kernels-0.1.1.dev1-py3-none-any.whl", f"{PREFIX}stray"]
    for key in orphans:
        channel.put(key, b"x", "application/octet-stream")
    broken = channel.release("verify", "--channel", "nightly", "--no-pip", "--json")
    assert broken.returncode == 7
    failed = [c for c in json.loads(broken.stdout)["checks"] if not c["ok"]]
    assert [(c["check"], c["subject"]) for c in failed if c["check"] == "kept"] == [
        ("kept", version(1))
    ]
    assert sorted(c["subject"] for c in failed if c["check"] == "objects") == sorted(orphans)
    assert all(c["check"] in ("kept", "objects") for c in failed), failed
    assert set(orphans) <= channel.object_keys()  # reported, never deleted


def test_plan_of_a_published_commit_finds_its_files_identical(make_channel: MakeChannel) -> None:
    """A re-run's plan reads each file's recorded sha256 as any reader can: a store that
    lets anyone GET but not HEAD (moto's public bucket, as some stores) is no CONFLICT."""
    channel = make_channel()
    channel.publish_in_process(1)
    plan = make_nightly_plan(
        channel.matrix,
        nightly_matrix(channel.matrix, commit_of(1)),
        dist=channel.root / "dist-1",
        reach=Reach(channel.env(), command="release plan --channel nightly", read_only=True),
    )
    assert plan.rows
    assert {row.state for row in plan.rows} == {"identical"}, plan.rows


def test_an_object_read_whole_is_read_no_further_than_its_bound(
    make_channel: MakeChannel, s3_server: S3Server
) -> None:
    """A state, page or keep-list another writer made huge was read whole into memory
    before its size was judged."""
    channel = make_channel(version="0.1.1")
    channel.put(PREFIX + "huge.txt", b"0.1.1.dev1\n" * 400_000, "text/plain")  # 4.4 MB
    bucket = Bucket(name=channel.bucket, endpoint=s3_server.endpoint, region="auto")
    store = S3Store(bucket, s3_credentials(channel.env()))
    stored = store.get(PREFIX + "huge.txt", most=1000)
    assert stored is not None
    assert len(stored.data) == 1001  # one past the bound: the caller sees it is over
