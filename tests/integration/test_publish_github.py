"""GithubPublisher against the stand-in GitHub on 127.0.0.1, with injected faults.

Every fault scenario ends with a re-run that must converge: every asset present once with
the manifest's bytes, nothing stored twice, the release published exactly once. The
stand-in's state and request log are the ground truth.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from release.credentials import Secret
from release.destinations.decide import Action, FileDecision, plan_for
from release.destinations.github_publisher import GithubPublisher
from release.errors import ConflictError, PublishError
from release.records.manifest import DestinationRef, WheelEntry
from release.remote.github import GithubClient, GithubUnreachable
from release.remote.retry import RetryPolicy
from tests.github_standin import (
    DEFAULT_REPO,
    Fault,
    GitHubStandIn,
    LoggedRequest,
    Release,
    primary_rate_limit,
    rate_limit_429_retry_after,
    secondary_403_message,
    secondary_429_bare,
    server_errors,
)
from tests.github_standin import records as standin_records
from tests.local_http import LOCAL

TAG = "v0.1.0"
X86 = "k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_x86_64.whl"
ARM = "k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_aarch64.whl"
UPLOAD_PATH = re.compile(r"/releases/\d+/assets$")
RELEASE_PATH = re.compile(r"/releases/\d+$")


class Crash(BaseException):
    """Stands for the process dying: nothing in the publisher may catch it."""


class FakeTime:
    """A clock that only moves when the publisher sleeps; records every requested wait."""

    def __init__(self, start: float, *, crash_on_sleep: bool = False) -> None:
        self.now = start
        self.sleeps: list[float] = []
        self.crash_on_sleep = crash_on_sleep

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self.crash_on_sleep:
            raise Crash
        self.now += seconds


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime(time.time())


def wheel_bytes(name: str, size: int = 3000) -> bytes:
    seed = hashlib.sha256(name.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def make_dist(
    tmp_path: Path, names: Sequence[str], *, api_url: str, max_file_size: int = 10**9
) -> tuple[Path, list[WheelEntry]]:
    dist = tmp_path / "dist"
    dist.mkdir(exist_ok=True)
    destination = DestinationRef(
        name="github-cu129",
        kind="github",
        index_url=None,
        max_file_size=max_file_size,
        repository=DEFAULT_REPO,
        tag=TAG,
        api_url=api_url,
    )
    entries = []
    for name in names:
        data = wheel_bytes(name)
        (dist / name).write_bytes(data)
        arch = "aarch64" if "aarch64" in name else "x86_64"
        entries.append(
            WheelEntry(
                cell=f"12.9-{arch}",
                cuda="12.9",
                arch=arch,
                filename=name,
                version="0.1.0+cu129",
                local_label="cu129",
                size=len(data),
                sha256=hashlib.sha256(data).hexdigest(),
                sms=("90",),
                ptx="compute_90",
                toolchain={},
                destination=destination,
            )
        )
    return dist, entries


def make_publisher(
    standin: GitHubStandIn,
    fake_time: FakeTime,
    *,
    api_url: str | None = None,
    token: str | None = None,
    policy: RetryPolicy | None = None,
) -> GithubPublisher:
    client = GithubClient(
        api_url=api_url or standin.api_url,
        token=Secret(token or standin.token),
        policy=policy or RetryPolicy(attempts=4, total=3600.0, request_timeout=30.0),
        sleep=fake_time.sleep,
        clock=fake_time.clock,
    )
    return GithubPublisher(repository=DEFAULT_REPO, tag=TAG, client=client)


def publish(
    publisher: GithubPublisher,
    entries: Sequence[WheelEntry],
    dist: Path,
    *,
    replace: bool = False,
) -> tuple[FileDecision, ...]:
    plan = plan_for(publisher, entries, dist, replace=replace)
    return publisher.apply(plan, dist)


def is_upload(entry: LoggedRequest) -> bool:
    return (
        entry.method == "POST"
        and bool(UPLOAD_PATH.search(entry.path))
        and (entry.origin == "uploads" or entry.path.startswith("/api/uploads/"))
    )


def stored(entry: LoggedRequest) -> bool:
    """The request changed the state: answered 2xx, or stored before a faulty answer."""
    ok = entry.status is not None and 200 <= entry.status < 300
    return ok or (entry.fault is not None and entry.fault.action == "store_then")


def stored_uploads(standin: GitHubStandIn) -> Counter[str]:
    return Counter(
        parse_qs(e.query)["name"][0] for e in standin.request_log if is_upload(e) and stored(e)
    )


def publishes(standin: GitHubStandIn) -> int:
    return sum(
        1
        for e in standin.request_log
        if e.method == "PATCH" and RELEASE_PATH.search(e.path) and stored(e)
    )


def writes(standin: GitHubStandIn) -> list[LoggedRequest]:
    return [e for e in standin.request_log if e.method not in ("GET", "HEAD")]


def the_release(standin: GitHubStandIn) -> Release:
    releases = [r for r in standin.releases(DEFAULT_REPO) if r.tag_name == TAG]
    assert len(releases) == 1
    return releases[0]


def assert_converged(standin: GitHubStandIn, entries: Sequence[WheelEntry], dist: Path) -> None:
    release = the_release(standin)
    assert not release.draft
    assets = standin.assets(release.id)
    assert sorted(a.name for a in assets) == sorted(e.filename for e in entries)
    for asset in assets:
        assert asset.state == "uploaded"
        assert asset.data == (dist / asset.name).read_bytes()
    assert all(count == 1 for count in stored_uploads(standin).values())
    assert publishes(standin) == 1


def create_draft(standin: GitHubStandIn) -> int:
    response = LOCAL.post(
        f"{standin.api_url}/repos/{DEFAULT_REPO}/releases",
        json={"tag_name": TAG, "name": TAG, "draft": True},
        headers={"Authorization": f"Bearer {standin.token}"},
    )
    assert response.status_code == 201
    release_id: int = response.json()["id"]
    return release_id


# -- the normal path ---------------------------------------------------------------------


def test_first_publish_creates_a_draft_uploads_and_publishes(
    github_standin: GitHubStandIn,
    fake_time: FakeTime,
    tmp_path: Path,
) -> None:
    dist, entries = make_dist(tmp_path, [X86, ARM], api_url=github_standin.api_url)
    publisher = make_publisher(github_standin, fake_time)

    plan = plan_for(publisher, entries, dist, replace=False)
    assert [d.action for d in plan.decisions] == [Action.UPLOAD, Action.UPLOAD]
    assert writes(github_standin) == []
    decisions = publisher.apply(plan, dist)

    assert_converged(github_standin, entries, dist)
    assert [(e.method, e.origin) for e in writes(github_standin)] == [
        ("POST", "api"),
        ("POST", "uploads"),
        ("POST", "uploads"),
        ("PATCH", "api"),
    ]
    for upload in filter(is_upload, github_standin.request_log):
        assert upload.header("content-type") == "application/octet-stream"
        assert upload.body_length == int(upload.header("content-length") or -1) == 3000
    for decision in decisions:
        assert decision.url == publisher.final_url(decision.entry.filename)
        assert "+cu129" in decision.url
        assert "untagged-" not in decision.url
        download = LOCAL.get(decision.url, follow_redirects=True)
        assert download.content == (dist / decision.entry.filename).read_bytes()
    assert fake_time.sleeps == []
    assert publisher.stats.bytes_uploaded == 6000


def test_a_second_publish_uploads_nothing_and_writes_nothing(
    github_standin: GitHubStandIn,
    fake_time: FakeTime,
    tmp_path: Path,
) -> None:
    dist, entries = make_dist(tmp_path, [X86, ARM], api_url=github_standin.api_url)
    publish(make_publisher(github_standin, fake_time), entries, dist)
    github_standin.clear_log()

    again = make_publisher(github_standin, fake_time)
    plan = plan_for(again, entries, dist, replace=False)
    decisions = again.apply(plan, dist)

    assert [d.action for d in plan.decisions] == [Action.SKIP, Action.SKIP]
    assert writes(github_standin) == []
    assert again.stats.bytes_uploaded == 0
    assert again.stats.writes == 0
    assert again.stats.by_method["GET"] == len(github_standin.request_log)
    assert [d.url for d in decisions] == [again.final_url(e.filename) for e in entries]


def test_a_draft_is_found_by_listing_releases_not_by_tag(
    github_standin: GitHubStandIn,
    fake_time: FakeTime,
    tmp_path: Path,
) -> None:
    dist, entries = make_dist(tmp_path, [X86, ARM], api_url=github_standin.api_url)
    release_id = create_draft(github_standin)
    github_standin.add_asset(release_id, X86, (dist / X86).read_bytes())
    by_tag = LOCAL.get(
        f"{github_standin.api_url}/repos/{DEFAULT_REPO}/releases/tags/{TAG}",
        headers={"Authorization": f"Bearer {github_standin.token}"},
    )
    publisher = make_publisher(github_standin, fake_time)

    found = publisher.existing({e.filename: e.size for e in entries})
    publish(publisher, entries, dist)

    assert by_tag.status_code == 404
    assert set(found) == {X86}
    assert the_release(github_standin).id == release_id
    assert stored_uploads(github_standin) == Counter({ARM: 1})
    assert_converged(github_standin, entries, dist)


def test_enterprise_base_url(
    github_standin: GitHubStandIn,
    fake_time: FakeTime,
    tmp_path: Path,
) -> None:
    api = github_standin.ghe_api_url
    dist, entries = make_dist(tmp_path, [X86, ARM], api_url=api)
    publisher = make_publisher(github_standin, fake_time, api_url=api)

    decisions = publish(publisher, entries, dist)
    publish(make_publisher(github_standin, fake_time, api_url=api), entries, dist)

    assert_converged(github_standin, entries, dist)
    assert all(e.origin == "api" for e in github_standin.request_log)
    assert {e.path.split("/")[2] for e in github_standin.request_log} == {"v3", "uploads"}
    assert sum(map(is_upload, github_standin.request_log)) == 2
    for decision in decisions:
        assert decision.url.startswith(f"{github_standin.web_url}/{DEFAULT_REPO}/releases/")
        assert decision.url == publisher.final_url(decision.entry.filename)
        download = LOCAL.get(decision.url, follow_redirects=True)
        assert download.content == (dist / decision.entry.filename).read_bytes()


def test_more_than_100_assets_are_read_page_by_page(
    github_standin: GitHubStandIn,
    fake_time: FakeTime,
    tmp_path: Path,
) -> None:
    names = [f"k3_kernels-0.1.{n}+cu129-py3-none-manylinux_2_28_x86_64.whl" for n in range(106)]
    dist, entries = make_dist(tmp_path, names, api_url=github_standin.api_url)
    release_id = create_draft(github_standin)
    for name in names[:105]:
        github_standin.add_asset(release_id, name, (dist / name).read_bytes())
    publisher = make_publisher(github_standin, fake_time)

    found = publisher.existing({e.filename: e.size for e in entries})
    publish(publisher, entries, dist)

    assert len(found) == 105
    assert any("page=2" in e.query for e in github_standin.request_log)
    assert stored_uploads(github_standin) == Counter({names[105]: 1})
    assert_converged(github_standin, entries, dist)


# -- faults, each followed by a re-run that converges --------------------------------------


def test_502_after_the_asset_was_stored_does_not_upload_it_twice(
    github_standin: GitHubStandIn,
    fake_time: FakeTime,
    tmp_path: Path,
) -> None:
    dist, entries = make_dist(tmp_path, [X86, ARM], api_url=github_standin.api_url)
    fault = github_standin.faults.add(
        Fault(method="POST", path=r"/assets$", origin="uploads", action="store_then", status=502)
    )

    publish(make_publisher(github_standin, fake_time), entries, dist)
    rerun = make_publisher(github_standin, fake_time)
    publish(rerun, entries, dist)

    assert github_standin.faults.fired == (fault,)
    assert sum(map(is_upload, github_standin.request_log)) == 2
    assert rerun.stats.writes == 0
    assert_converged(github_standin, entries, dist)


def test_502_that_leaves_a_starter_asset_is_cleaned_up(
    github_standin: GitHubStandIn,
    fake_time: FakeTime,
    tmp_path: Path,
) -> None:
    dist, entries = make_dist(tmp_path, [X86], api_url=github_standin.api_url)
    github_standin.faults.add(
        Fault(method="POST", path=r"/assets$", origin="uploads", status=502, leave_state="starter")
    )

    publish(make_publisher(github_standin, fake_time), entries, dist)
    publish(make_publisher(github_standin, fake_time), entries, dist)

    assert [e.method for e in writes(github_standin)] == ["POST", "POST", "DELETE", "POST", "PATCH"]
    assert_converged(github_standin, entries, dist)


def test_a_leftover_of_an_earlier_run_is_deleted_before_uploading(
    github_standin: GitHubStandIn,
    fake_time: FakeTime,
    tmp_path: Path,
) -> None:
    dist, entries = make_dist(tmp_path, [X86, ARM], api_url=github_standin.api_url)
    release_id = create_draft(github_standin)
    leftover = github_standin.add_asset(release_id, X86, b"", state="new")
    publisher = make_publisher(github_standin, fake_time)

    plan = plan_for(publisher, entries, dist, replace=False)
    publisher.apply(plan, dist)
    publish(make_publisher(github_standin, fake_time), entries, dist)

    assert plan.decisions[0].action is Action.UPLOAD
    assert "leftover" in plan.decisions[0].reason
    deletes = [e for e in github_standin.request_log if e.method == "DELETE"]
    assert [e.path.rsplit("/", 1)[-1] for e in deletes] == [str(leftover.id)]
    assert_converged(github_standin, entries, dist)


def test_a_connection_reset_mid_upload_is_retried(
    github_standin: GitHubStandIn,
    fake_time: FakeTime,
    tmp_path: Path,
) -> None:
    dist, entries = make_dist(tmp_path, [X86, ARM], api_url=github_standin.api_url)
    github_standin.faults.add(
        Fault(method="POST", path=r"/assets$", origin="uploads", action="reset", read_bytes=1000)
    )

    publish(make_publisher(github_standin, fake_time), entries, dist)
    publish(make_publisher(github_standin, fake_time), entries, dist)

    resets = [e for e in github_standin.request_log if e.status is None]
    assert [e.body_length for e in resets] == [1000]
    assert len(fake_time.sleeps) == 1
    assert_converged(github_standin, entries, dist)


def test_a_5xx_storm_longer_than_the_retries_fails_cleanly_and_the_rerun_completes(
    github_standin: GitHubStandIn,
    fake_time: FakeTime,
    tmp_path: Path,
) -> None:
    dist, entries = make_dist(tmp_path, [X86, ARM], api_url=github_standin.api_url)
    storm = github_standin.faults.add(server_errors(origin="uploads", count=1000, status=503))

    with pytest.raises(PublishError) as failure:
        publish(make_publisher(github_standin, fake_time), entries, dist)
    after_failure = the_release(github_standin)
    github_standin.faults.clear()
    publish(make_publisher(github_standin, fake_time), entries, dist)

    assert "503" in failure.value.message
    assert "created the draft release" in failure.value.message
    assert "resumes" in (failure.value.hint or "")
    assert after_failure.draft
    assert github_standin.faults.fired == (storm,) * 4
    assert fake_time.sleeps == [1.0, 2.0, 4.0]
    assert_converged(github_standin, entries, dist)


def test_the_bound_on_total_time_stops_a_storm(
    github_standin: GitHubStandIn,
    fake_time: FakeTime,
    tmp_path: Path,
) -> None:
    dist, entries = make_dist(tmp_path, [X86], api_url=github_standin.api_url)
    github_standin.faults.add(server_errors(method="GET", origin="api", count=10_000))
    policy = RetryPolicy(attempts=1000, initial_delay=1.0, max_delay=10.0, total=100.0)

    with pytest.raises(PublishError) as failure:
        publish(make_publisher(github_standin, fake_time, policy=policy), entries, dist)
    github_standin.faults.clear()
    publish(make_publisher(github_standin, fake_time), entries, dist)

    assert "time bound" in failure.value.message
    assert "nothing was changed" in failure.value.message
    assert sum(fake_time.sleeps[:16]) < 100.0
    assert max(fake_time.sleeps) == 10.0
    assert_converged(github_standin, entries, dist)


@pytest.mark.parametrize("make_fault", [secondary_403_message, secondary_429_bare])
def test_a_secondary_rate_limit_without_retry_after_waits_at_least_a_minute(
    github_standin: GitHubStandIn,
    fake_time: FakeTime,
    tmp_path: Path,
    make_fault: object,
) -> None:
    dist, entries = make_dist(tmp_path, [X86], api_url=github_standin.api_url)
    assert make_fault in (secondary_403_message, secondary_429_bare)
    fault = (secondary_403_message if make_fault is secondary_403_message else secondary_429_bare)(
        method="POST", path=r"/releases$", count=2
    )
    github_standin.faults.add(fault)

    publish(make_publisher(github_standin, fake_time), entries, dist)
    publish(make_publisher(github_standin, fake_time), entries, dist)

    assert fake_time.sleeps == [60.0, 120.0]
    assert len(github_standin.releases(DEFAULT_REPO)) == 1
    assert_converged(github_standin, entries, dist)


def test_a_primary_rate_limit_waits_until_the_reset(
    github_standin: GitHubStandIn,
    fake_time: FakeTime,
    tmp_path: Path,
) -> None:
    dist, entries = make_dist(tmp_path, [X86], api_url=github_standin.api_url)
    github_standin.faults.add(primary_rate_limit(method="GET", path=r"/releases", reset_in=300))

    publish(make_publisher(github_standin, fake_time), entries, dist)
    publish(make_publisher(github_standin, fake_time), entries, dist)

    assert len(fake_time.sleeps) == 1
    assert 295.0 <= fake_time.sleeps[0] <= 305.0
    assert_converged(github_standin, entries, dist)


def test_a_429_with_retry_after_is_honoured(
    github_standin: GitHubStandIn,
    fake_time: FakeTime,
    tmp_path: Path,
) -> None:
    dist, entries = make_dist(tmp_path, [X86], api_url=github_standin.api_url)
    github_standin.faults.add(rate_limit_429_retry_after(origin="uploads", retry_after=7))

    publish(make_publisher(github_standin, fake_time), entries, dist)
    publish(make_publisher(github_standin, fake_time), entries, dist)

    assert fake_time.sleeps == [7.0]
    assert_converged(github_standin, entries, dist)


def test_a_primary_limit_resetting_after_the_bound_fails_at_once(
    github_standin: GitHubStandIn,
    fake_time: FakeTime,
    tmp_path: Path,
) -> None:
    dist, entries = make_dist(tmp_path, [X86], api_url=github_standin.api_url)
    github_standin.faults.add(primary_rate_limit(reset_in=3600))
    policy = RetryPolicy(total=600.0)

    with pytest.raises(PublishError) as failure:
        publish(make_publisher(github_standin, fake_time, policy=policy), entries, dist)

    assert fake_time.sleeps == []
    assert "rate limit exceeded" in failure.value.message
    assert github_standin.releases(DEFAULT_REPO) == ()


def test_a_crash_between_upload_and_publish_leaves_a_draft_the_rerun_publishes(
    github_standin: GitHubStandIn,
    tmp_path: Path,
) -> None:
    dist, entries = make_dist(tmp_path, [X86, ARM], api_url=github_standin.api_url)
    github_standin.faults.add(Fault(method="PATCH", action="reset"))
    dying = FakeTime(time.time(), crash_on_sleep=True)

    with pytest.raises(Crash):
        publish(make_publisher(github_standin, dying), entries, dist)
    orphan = the_release(github_standin)
    rerun = make_publisher(github_standin, FakeTime(time.time()))
    plan = plan_for(rerun, entries, dist, replace=False)
    rerun.apply(plan, dist)

    assert orphan.draft
    assert len(github_standin.assets(orphan.id)) == 2
    assert [d.action for d in plan.decisions] == [Action.SKIP, Action.SKIP]
    assert rerun.stats.bytes_uploaded == 0
    assert rerun.stats.by_method == {"GET": rerun.stats.by_method["GET"], "PATCH": 1}
    assert_converged(github_standin, entries, dist)


def test_other_bytes_are_a_conflict_and_only_replace_replaces_them(
    github_standin: GitHubStandIn,
    fake_time: FakeTime,
    tmp_path: Path,
) -> None:
    dist, entries = make_dist(tmp_path, [X86, ARM], api_url=github_standin.api_url)
    publish(make_publisher(github_standin, fake_time), entries, dist)
    release = the_release(github_standin)
    old = {a.name: a for a in github_standin.assets(release.id)}
    github_standin.state.delete_asset(
        github_standin.state.repo_of_release(release),
        old[X86].id,
        github_standin.state.viewer(github_standin.token),
    )
    github_standin.add_asset(release.id, X86, b"other bytes")
    github_standin.clear_log()
    publisher = make_publisher(github_standin, fake_time)

    plan = plan_for(publisher, entries, dist, replace=False)
    with pytest.raises(ConflictError):
        publisher.apply(plan, dist)
    untouched = github_standin.assets(release.id)
    replacing = make_publisher(github_standin, fake_time)
    replaced = plan_for(replacing, entries, dist, replace=True)
    replacing.apply(replaced, dist)

    assert [d.action for d in plan.decisions] == [Action.CONFLICT, Action.SKIP]
    assert plan.blocked
    assert [a.data for a in untouched if a.name == X86] == [b"other bytes"]
    assert [d.action for d in replaced.decisions] == [Action.REPLACE, Action.SKIP]
    # on a published release: the new bytes under a temporary name first, then the swap
    assert [(e.method, e.origin) for e in writes(github_standin)] == [
        ("POST", "uploads"),
        ("DELETE", "api"),
        ("PATCH", "api"),
    ]
    now = {a.name: a for a in github_standin.assets(release.id)}
    assert sorted(now) == sorted([X86, ARM])
    assert now[ARM].id == old[ARM].id
    assert now[X86].data == (dist / X86).read_bytes()
    assert not the_release(github_standin).draft


# -- credentials and secrets ----------------------------------------------------------------


def test_a_bad_token_is_one_clear_error(
    github_standin: GitHubStandIn,
    fake_time: FakeTime,
    tmp_path: Path,
) -> None:
    dist, entries = make_dist(tmp_path, [X86], api_url=github_standin.api_url)
    token = "ghp_" + "0" * 36
    publisher = make_publisher(github_standin, fake_time, token=token)

    with pytest.raises(PublishError) as failure:
        publish(publisher, entries, dist)

    assert failure.value.message.startswith("GitHub rejected the token (GITHUB_TOKEN)")
    assert "contents: write" in (failure.value.hint or "")
    assert token not in str(failure.value) + repr(failure.value) + (failure.value.hint or "")
    assert fake_time.sleeps == []


def test_a_token_without_write_access_gets_the_permission_hint(
    github_standin: GitHubStandIn,
    fake_time: FakeTime,
    tmp_path: Path,
) -> None:
    dist, entries = make_dist(tmp_path, [X86], api_url=github_standin.api_url)
    reader = github_standin.add_token("reader", push=False)

    with pytest.raises(PublishError) as failure:
        publish(make_publisher(github_standin, fake_time, token=reader), entries, dist)

    assert "refused to create the release" in failure.value.message
    assert "contents: write" in (failure.value.hint or "")
    assert github_standin.releases(DEFAULT_REPO) == ()


def test_the_token_appears_in_no_log_or_error(
    github_standin: GitHubStandIn,
    fake_time: FakeTime,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    dist, entries = make_dist(tmp_path, [X86, ARM], api_url=github_standin.api_url)
    github_standin.faults.add(
        Fault(method="POST", origin="uploads", status=502, leave_state="starter")
    )
    github_standin.faults.add(Fault(method="POST", origin="uploads", action="reset"))
    github_standin.faults.add(server_errors(method="PATCH", count=100))
    publisher = make_publisher(github_standin, fake_time)

    with pytest.raises(PublishError) as failure:
        publish(publisher, entries, dist)
    github_standin.faults.clear()
    publish(make_publisher(github_standin, fake_time), entries, dist)

    token = github_standin.token
    texts = [
        caplog.text,
        str(failure.value),
        repr(failure.value),
        failure.value.hint or "",
        repr(publisher),
        str(publisher),
        repr(vars(publisher)),
        str(publisher.stats),
    ]
    assert "retrying" in caplog.text
    assert "uploading" in caplog.text
    assert all(token not in text for text in texts)
    assert_converged(github_standin, entries, dist)


# -- servers that report no digest -----------------------------------------------------------


def test_without_digests_the_bytes_are_compared_by_download(
    github_standin: GitHubStandIn,
    fake_time: FakeTime,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(standin_records.Asset, "digest", property(lambda self: None))
    dist, entries = make_dist(tmp_path, [X86, ARM], api_url=github_standin.api_url)
    publish(make_publisher(github_standin, fake_time), entries, dist)
    first_run = len(github_standin.request_log)
    rerun = make_publisher(github_standin, fake_time)

    plan = plan_for(rerun, entries, dist, replace=False)
    rerun.apply(plan, dist)

    rerun_log = github_standin.request_log[first_run:]
    assert [d.action for d in plan.decisions] == [Action.SKIP, Action.SKIP]
    assert [e for e in rerun_log if e.method != "GET"] == []
    assert sum(1 for e in rerun_log if e.origin == "storage") >= 2
    assert_converged(github_standin, entries, dist)


def test_without_digests_a_stored_upload_behind_a_502_is_recognised_by_its_bytes(
    github_standin: GitHubStandIn,
    fake_time: FakeTime,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(standin_records.Asset, "digest", property(lambda self: None))
    dist, entries = make_dist(tmp_path, [X86, ARM], api_url=github_standin.api_url)
    github_standin.faults.add(
        Fault(method="POST", path=r"/assets$", origin="uploads", action="store_then")
    )

    publish(make_publisher(github_standin, fake_time), entries, dist)
    publish(make_publisher(github_standin, fake_time), entries, dist)

    assert sum(map(is_upload, github_standin.request_log)) == 2
    assert [e.method for e in writes(github_standin)] == ["POST", "POST", "POST", "PATCH"]
    assert_converged(github_standin, entries, dist)


def test_a_client_that_gave_up_on_github_does_not_ask_again_in_the_same_run(
    github_standin: GitHubStandIn, fake_time: FakeTime
) -> None:
    """`release plan` reads the previous release, then the release of the tag: after the
    first read waited through the whole retry policy, the second is not asked."""
    github_standin.faults.add(server_errors(path=r"/releases", count=1000))
    client = GithubClient(
        api_url=github_standin.api_url,
        token=Secret(github_standin.token),
        policy=RetryPolicy(attempts=3, total=3600.0),
        sleep=fake_time.sleep,
        clock=fake_time.clock,
        command="release plan",
    )
    with pytest.raises(GithubUnreachable), client.session("(previous release)"):
        client.list_releases(DEFAULT_REPO)
    asked = len(github_standin.request_log)
    assert asked == 3
    with pytest.raises(GithubUnreachable) as second, client.session(f"{DEFAULT_REPO}@{TAG}"):
        client.find_release(DEFAULT_REPO, TAG)
    assert len(github_standin.request_log) == asked
    assert second.value.message.startswith(
        f"GitHub {DEFAULT_REPO}@{TAG}: not asked, this run gave up on GitHub already: "
        f"list the releases of {DEFAULT_REPO}: gave up at the retry limit after 3 attempts"
    )
    assert github_standin.token not in second.value.message
    assert second.value.hint == "re-running `release plan` resumes where this run stopped"


def reading_client(standin: GitHubStandIn, fake_time: FakeTime, **more: object) -> GithubClient:
    return GithubClient(
        api_url=standin.api_url,
        token=Secret(standin.token),
        policy=RetryPolicy(attempts=3, total=3600.0),
        sleep=fake_time.sleep,
        clock=fake_time.clock,
        **more,  # type: ignore[arg-type]
    )


def test_a_list_whose_next_page_loops_ends_in_one_error(
    github_standin: GitHubStandIn, fake_time: FakeTime
) -> None:
    """A `Link: rel="next"` back to a page already read: asked forever (85,000 requests a
    minute) before the list kept the URLs it read."""
    github_standin.faults.add(
        Fault(
            method="GET",
            path=r"/releases$",
            status=200,
            body=b"[]",
            headers={
                "Link": f"<{github_standin.api_url}/repos/{DEFAULT_REPO}/releases?page=1>; "
                'rel="next"'
            },
            count=10**6,
        )
    )
    client = reading_client(github_standin, fake_time)
    with pytest.raises(PublishError) as failed, client.session("(releases)"):
        client.list_releases(DEFAULT_REPO)
    assert "comes back to a page it gave" in failed.value.message
    assert len(github_standin.request_log) <= 3


@pytest.mark.parametrize(
    ("headers", "waits"),
    [
        ({"retry-after": "Wed, 21 Oct 2099 07:28:00 GMT"}, True),  # RFC 9110 allows a date
        ({"retry-after": "1.5"}, True),
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "9" * 20}, False),  # past time_t
    ],
)
def test_a_rate_limit_header_githubkit_cannot_read_is_a_wait_not_a_bug(
    github_standin: GitHubStandIn, fake_time: FakeTime, headers: dict[str, str], waits: bool
) -> None:
    """githubkit's own reading of these raised ValueError or OverflowError: "a bug"."""
    body = {"message": "You have exceeded a secondary rate limit."}
    github_standin.faults.add(
        Fault(method="GET", path=r"/releases$", status=429, headers=headers, body=body)
    )
    client = reading_client(github_standin, fake_time)
    if waits:
        with client.session("(releases)"):
            assert client.list_releases(DEFAULT_REPO) == []
        assert len(fake_time.sleeps) == 1
        return
    with pytest.raises(GithubUnreachable, match=r"rate limit"), client.session("(releases)"):
        client.list_releases(DEFAULT_REPO)  # a reset past any bound: refused, not waited


def test_a_rejected_token_is_named_by_the_variable_it_came_from(
    github_standin: GitHubStandIn, fake_time: FakeTime
) -> None:
    github_standin.faults.add(
        Fault(method="GET", path=r"/releases$", status=401, body={"message": "Bad credentials"})
    )
    client = reading_client(github_standin, fake_time, token_variable="WHL_TOKEN")
    with pytest.raises(PublishError) as refused, client.session("(releases)"):
        client.list_releases(DEFAULT_REPO)
    assert refused.value.message.startswith("GitHub rejected the token (WHL_TOKEN) at ")
    assert refused.value.hint is not None
    assert refused.value.hint.startswith("set WHL_TOKEN to a valid")


def test_publishing_the_draft_given_up_on_says_its_files_are_on_the_draft(
    github_standin: GitHubStandIn, tmp_path: Path
) -> None:
    dist, entries = make_dist(tmp_path, [X86], api_url=github_standin.api_url)
    github_standin.faults.add(server_errors(method="PATCH", origin="api", count=10_000))
    fake_time = FakeTime(time.time())
    with pytest.raises(PublishError) as failure:
        publish(make_publisher(github_standin, fake_time), entries, dist)
    assert "(done so far: its files uploaded to the draft (not public yet))" in str(failure.value)
    assert the_release(github_standin).draft
