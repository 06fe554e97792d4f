"""The nightly channel against moto's S3 on 127.0.0.1 (tests/s3_server), with `release` run
as users run it: a commit up whole before /nightly/ moves, the pages as pip reads them, the
version-order rule, racing commits, an interrupted run, the verify gate, a commit's files
never overwritten, and a bounded cost per commit (tests/integration/nightly.py has the bench).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from release.nightly.layout import STATE_KEY
from release.remote.simple_index import parse_project_page
from tests.integration.nightly import (
    PREFIX,
    RELEASE,
    REPO,
    Channel,
    MakeChannel,
    PollingReader,
    arch_of,
    commit_of,
    git_commit_at,
    make_channel,
)
from tests.integration.wheels import make_wheel
from tests.pypi_server import PypiServer
from tests.s3_server import ACCESS_KEY, SECRET_KEY, S3Server, s3_server

__all__ = ["make_channel", "s3_server"]

MAX_REQUESTS = 40  # the bound on one commit's publish


def listed(channel: Channel, url: str) -> dict[str, str | None]:
    answer = channel.get(url)
    assert answer.status_code == 200, url
    files = parse_project_page(answer.content, answer.headers["content-type"], url)
    return {name: item.sha256 for name, item in files.items()}


def test_a_commit_goes_up_whole_and_nightly_moves_to_it(make_channel: MakeChannel) -> None:
    channel = make_channel()
    done = channel.publish(1, "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["channel"] == "nightly"
    assert document["promoted"] is True
    version = commit_of(1).time
    built = json.loads((channel.root / "dist-1" / "manifest.json").read_text())["wheels"]
    for label in ("", "cu129"):
        page = channel.nightly_url(label) + "k3-kernels/"
        expected = {w["filename"]: w["sha256"] for w in built if (w["local_label"] or "") == label}
        assert listed(channel, page) == expected
        assert listed(channel, page + "index.json") == expected
        assert sorted(arch_of(n) for n in expected) == ["aarch64", "x86_64"]
        assert all(f"0.1.0.dev{version}" in name for name in expected)
        html = channel.get(page)
        assert html.headers["cache-control"] == "no-cache"
        assert 'data-core-metadata="sha256=' in html.text
        for name, sha256 in expected.items():
            wheel = channel.get(
                channel.index_url + f"{commit_of(1).sha}/{name}".replace("+", "%2B")
            )
            assert hashlib.sha256(wheel.content).hexdigest() == sha256
            assert "immutable" in wheel.headers["cache-control"]
    state = channel.get(channel.index_url + STATE_KEY)
    assert state.headers["cache-control"] == "no-cache"
    assert channel.state().nightly is not None
    assert channel.state().nightly.commit == commit_of(1).sha  # type: ignore[union-attr]
    verified = channel.release("verify", "--channel", "nightly", "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    checks = json.loads(verified.stdout)["checks"]
    assert {c["check"] for c in checks} >= {"download", "index", "metadata", "pip", "pointer"}
    assert all(c["ok"] for c in checks)


def test_a_newer_commit_wins_whatever_order_the_runs_finish_in(make_channel: MakeChannel) -> None:
    channel = make_channel()
    assert channel.publish(2).returncode == 0
    late = channel.publish(1, "--json")
    assert late.returncode == 0, late.stderr
    assert json.loads(late.stdout)["promoted"] is False
    assert channel.state().nightly.commit == commit_of(2).sha  # type: ignore[union-attr]
    page = channel.nightly_url() + "k3-kernels/"
    assert all(f"dev{commit_of(2).time}" in name for name in listed(channel, page))
    # two runs at once: the newer commit ends on /nightly/, both are kept
    for older, newer in ((3, 4),):
        runs = [
            subprocess.Popen(
                channel.command("publish", "--channel", "nightly", "--dist", str(channel.dist(n))),
                env=channel.env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in (older, newer)
        ]
        for run in runs:
            _, err = run.communicate(timeout=300)
            assert run.returncode == 0, err
        top = max(older, newer)
        assert channel.state().nightly.commit == commit_of(top).sha  # type: ignore[union-attr]
        assert all(f"dev{commit_of(top).time}" in name for name in listed(channel, page))
    assert {k.commit for k in channel.state().kept} == {commit_of(n).sha for n in range(1, 5)}
    assert channel.release("verify", "--channel", "nightly", "--no-pip").returncode == 0


def test_an_interrupted_run_leaves_nightly_and_a_rerun_uploads_only_what_is_missing(
    make_channel: MakeChannel, s3_server: S3Server
) -> None:
    channel = make_channel()
    channel.publish_in_process(1)
    dist = channel.dist(2)
    order = [w["filename"] for w in json.loads((dist / "manifest.json").read_text())["wheels"]]
    held = order[2]  # the third upload: the runner is killed while it is on the wire
    s3_server.fault("PUT", held, hang=True)
    s3_server.requests(reset=True)
    run = subprocess.Popen(
        channel.command("publish", "--channel", "nightly", "--dist", str(dist)),
        env=channel.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if any(r["path"].endswith(held) for r in s3_server.requests()):
                break
            time.sleep(0.2)
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
    finally:
        s3_server.clear_faults()
    first = [r["path"] for r in s3_server.requests(reset=True) if r["method"] == "PUT"]
    stored = [p for p in first if p.endswith(".whl") and not p.endswith(held)]
    assert [p.rsplit("/", 1)[1] for p in stored] == order[:2]
    state = channel.state()
    assert state.nightly.commit == commit_of(1).sha  # type: ignore[union-attr]
    assert state.uploading_commit(commit_of(2).sha) is not None
    for label in ("", "cu129"):
        page = channel.nightly_url(label) + "k3-kernels/"
        assert all(f"dev{commit_of(1).time}" in name for name in listed(channel, page))
    again = channel.release("publish", "--channel", "nightly", "--dist", str(dist))
    assert again.returncode == 0, again.stderr
    second = [r["path"] for r in s3_server.requests() if r["method"] == "PUT"]
    wheels = Counter(p for p in second if p.endswith(".whl"))
    assert set(stored).isdisjoint(wheels), "a wheel the interrupted run stored was sent again"
    assert sorted(p.rsplit("/", 1)[1] for p in wheels) == sorted(order[2:])
    assert max(wheels.values()) == 1
    assert channel.state().nightly.commit == commit_of(2).sha  # type: ignore[union-attr]


def test_nightly_stays_where_it_was_when_verify_fails_on_the_commit(
    make_channel: MakeChannel, s3_server: S3Server
) -> None:
    channel = make_channel()
    channel.publish_in_process(1)
    s3_server.fault("GET", f"{commit_of(2).sha}/k3_kernels", status=403, times=100)
    try:
        failed = channel.publish(2)
    finally:
        s3_server.clear_faults()
    assert failed.returncode == 7, failed.stderr
    assert "/nightly/ still serves" in failed.stderr
    assert channel.state().nightly.commit == commit_of(1).sha  # type: ignore[union-attr]
    assert channel.publish(2).returncode == 0
    assert channel.state().nightly.commit == commit_of(2).sha  # type: ignore[union-attr]


def test_a_commits_files_are_never_overwritten(make_channel: MakeChannel) -> None:
    channel = make_channel()
    channel.publish_in_process(1)
    before = channel.get(channel.nightly_url() + "k3-kernels/").content
    channel.dist(1, payload=b"other bytes")
    other = channel.release(
        "publish", "--channel", "nightly", "--dist", str(channel.root / "dist-1")
    )
    assert other.returncode == 6, other.stderr
    assert "CONFLICT" in other.stderr
    assert channel.get(channel.nightly_url() + "k3-kernels/").content == before


def test_the_version_order_rule_refuses_a_nightly_below_the_latest_final(
    make_channel: MakeChannel, pypiserver: PypiServer
) -> None:
    make_wheel(pypiserver.packages, version="0.1.0")  # the final release on "PyPI"
    channel = make_channel()
    refused = channel.publish(1)
    assert refused.returncode == 5, refused.stderr
    line = next(x for x in refused.stderr.splitlines() if x.startswith("error:"))
    assert f"0.1.0.dev{commit_of(1).time}" in line
    assert "0.1.0, the latest final release on pypi" in line
    assert "the CUDA 13.0 variant" in line
    assert "0.1.1" in refused.stderr  # the remedy names the next version
    assert channel.store().get(PREFIX + STATE_KEY) is None  # nothing was uploaded
    channel.version = "0.1.1"
    channel.write_matrix()
    channel.git_commit(commit_of(1).time)
    planned = channel.release("plan", "--channel", "nightly", "--json", "--dist",
                              str(channel.root / "none"))  # fmt: skip
    assert planned.returncode == 0, planned.stdout + planned.stderr
    plan = json.loads(planned.stdout)
    assert plan["version_order_ok"] is True
    assert plan["latest_final"][0]["version"] == "0.1.0"
    assert channel.publish(1).returncode == 0


def test_publishing_a_commit_costs_the_same_however_long_the_history(
    make_channel: MakeChannel, s3_server: S3Server
) -> None:
    channel = make_channel(keep=3)
    counts = {}
    for number in range(1, 13):
        s3_server.requests(reset=True)
        channel.publish_in_process(number)
        counts[number] = len(s3_server.requests())
    assert max(counts.values()) <= MAX_REQUESTS, counts
    assert counts[6] == counts[12], counts  # steady state: one commit kept, one pruned
    assert len(channel.state().kept) == 3


def test_a_polling_reader_never_sees_a_partial_matrix(make_channel: MakeChannel) -> None:
    channel = make_channel(keep=2)
    reader = PollingReader(channel)
    stop = threading.Event()
    thread = threading.Thread(target=reader.run, args=(stop,))
    thread.start()
    try:
        for number in range(1, 9):
            channel.publish_in_process(number)
    finally:
        stop.set()
        thread.join(timeout=60)
    assert reader.partial == []
    assert len(reader.versions) >= 3
    assert reader.pages > 20


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_pip_and_uv_install_a_nightly_by_the_documented_lines(
    make_channel: MakeChannel, pypiserver: PypiServer, installer: str, tmp_path: object
) -> None:
    make_wheel(pypiserver.packages, version="0.1.0")  # PyPI's final release, CUDA 13
    channel = make_channel(version="0.1.1")
    for number in (1, 2):  # through the version-order check against the pypiserver's 0.1.0
        channel.publish_in_process(number, finals=None)
    pypi = pypiserver.index_url.replace("://", f"://{pypiserver.username}:{pypiserver.password}@")
    newest = f"0.1.1.dev{commit_of(2).time}"

    def install(target: str, *args: str) -> str:
        where = channel.root / target
        if installer == "pip":
            cmd = [str(RELEASE.with_name("pip")), "install", "--no-cache-dir", "--target",
                   str(where), "--index-url", pypi, *args]  # fmt: skip
        else:
            cmd = [str(RELEASE.with_name("uv")), "pip", "install", "--no-cache", "--target",
                   str(where), "--default-index", pypi, *args]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        (info,) = where.glob("k3_kernels-*.dist-info")
        return info.name.removeprefix("k3_kernels-").removesuffix(".dist-info")

    cu129 = channel.nightly_url("cu129")
    pinned = channel.index_url + f"{commit_of(1).sha}/cu129/"
    if installer == "pip":
        assert install("a", "--pre", "k3-kernels", "--extra-index-url", cu129) == newest + "+cu129"
        assert install("b", "--pre", "k3-kernels", "--extra-index-url",
                       channel.nightly_url()) == newest  # fmt: skip
        one = f"k3-kernels==0.1.1.dev{commit_of(1).time}+cu129"
        assert install("c", one, "--extra-index-url", pinned) == one.split("==")[1]
    else:
        strategy = ("--prerelease", "allow", "--index-strategy", "unsafe-best-match")
        assert install("a", *strategy, "--extra-index-url", cu129, "k3-kernels") == (
            newest + "+cu129"
        )
        one = f"k3-kernels==0.1.1.dev{commit_of(1).time}+cu129"
        assert install("c", "--extra-index-url", pinned, one) == one.split("==")[1]


def test_retention_keeps_k_commits_and_the_pinned_and_archives_the_rest(
    make_channel: MakeChannel,
) -> None:
    pinned_in_matrix = f"0.1.0.dev{commit_of(2).time}"
    pinned_in_bucket = f"0.1.0.dev{commit_of(3).time}"
    channel = make_channel(keep=3, extra=f'\n  keep-list: ["{pinned_in_matrix}"]', version="0.1.0")
    channel.store().put(
        PREFIX + "keep-list.txt",
        f"# pins users need\n{pinned_in_bucket}\nnot-a-version\n".encode(),
        content_type="text/plain",
        cache_control="no-cache",
    )
    for number in range(1, 8):
        channel.publish_in_process(number)
    state = channel.state()
    assert {k.commit for k in state.kept} == {commit_of(n).sha for n in (2, 3, 5, 6, 7)}
    assert state.pruning == ()  # each run's pruning is done and leaves the state
    for gone in (1, 4):
        sha = commit_of(gone).sha
        assert channel.get(channel.index_url + f"{sha}/k3-kernels/").status_code in (403, 404)
        name = f"k3_kernels-0.1.0.dev{commit_of(gone).time}-py3-none-manylinux_2_28_x86_64.whl"
        archived = channel.get(channel.index_url + f"archive/{sha}/{name}")
        assert archived.status_code == 200
    for kept in (2, 3):
        page = channel.index_url + f"{commit_of(kept).sha}/cu129/k3-kernels/"
        assert channel.get(page).status_code == 200
    head = channel.git_commit(commit_of(8).time)
    planned = channel.release(
        "plan", "--channel", "nightly", "--json", "--dist", str(channel.root / "none")
    )
    assert planned.returncode == 0, planned.stdout + planned.stderr
    plan = json.loads(planned.stdout)
    assert plan["commit"] == head.sha
    assert plan["promotes"] is True
    assert sorted(plan["keep_list"]) == sorted([pinned_in_matrix, pinned_in_bucket])
    assert [(p["version"], p["action"]) for p in plan["prune"]] == [
        (f"0.1.0.dev{commit_of(5).time}", "archive"),
    ]


def test_a_nightly_build_is_named_by_its_commit_and_refuses_a_changed_checkout(
    tmp_path: Path,
) -> None:
    shutil.copytree(REPO / "csrc", tmp_path / "csrc", ignore=shutil.ignore_patterns("build*"))
    (tmp_path / "matrix.yaml").write_text((REPO / "matrix.yaml").read_text())
    git_commit_at(tmp_path, 1733212345)
    build = [str(RELEASE), "build", "--channel", "nightly", "--dry-run", "--json"]
    done = subprocess.run(build, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert [c["wheel"] for c in json.loads(done.stdout)["cells"]] == [
        "k3_kernels-0.1.0.dev1733212345-py3-none-manylinux_2_28_x86_64.whl",
        "k3_kernels-0.1.0.dev1733212345-py3-none-manylinux_2_28_aarch64.whl",
        "k3_kernels-0.1.0.dev1733212345+cu129-py3-none-manylinux_2_28_x86_64.whl",
        "k3_kernels-0.1.0.dev1733212345+cu129-py3-none-manylinux_2_28_aarch64.whl",
    ]
    pyproject = tmp_path / "csrc" / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + "\n")
    changed = subprocess.run(build, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert changed.returncode == 2
    assert "the checkout changes tracked files (M csrc/pyproject.toml)" in changed.stderr


def test_storage_failures_are_one_line_without_a_key_or_a_traceback(
    make_channel: MakeChannel, s3_server: S3Server
) -> None:
    channel = make_channel()
    keyless = {k: v for k, v in channel.env().items() if not k.startswith("AWS_")}
    missing = channel.release(
        "publish", "--channel", "nightly", "--dist", str(channel.dist(1)), env=keyless
    )
    assert missing.returncode == 5
    assert "no AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY in the environment" in missing.stderr
    s3_server.fault("PUT", "state.json", status=403, times=10)
    try:
        denied = channel.publish(1)
    finally:
        s3_server.clear_faults()
    assert denied.returncode == 5, denied.stderr
    errors = [line for line in denied.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert f"s3://{channel.bucket} at {s3_server.endpoint}: PUT {PREFIX}state.json" in errors[0]
    assert "HTTP 403" in errors[0]
    assert "Traceback" not in denied.stderr
    for output in (missing, denied):
        assert SECRET_KEY not in output.stdout + output.stderr
        assert ACCESS_KEY not in output.stdout + output.stderr
    assert channel.store().get(PREFIX + STATE_KEY) is None
