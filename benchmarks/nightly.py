"""The nightly channel at scale, against moto's S3 on 127.0.0.1 (tests/s3_server, started
here), in one run.

The shipped matrix's four cells (small stand-in wheels, one set per commit) at project
version 0.1.1, with 0.1.0 the latest final release on "PyPI" (a local pypiserver) and the
GitHub destination on the stand-in GitHub: `keep: 1000`, one version pinned in
matrix.yaml's keep-list and one in the bucket's keep-list.txt.

1. 1000 commits published one after the other through `release publish --channel
   nightly`'s own entry point (release.nightly.publish, with its verify gate and its
   version-order check against the release's destinations), while a reader polls every
   /nightly/ page (PEP 503 and 691, both variants) as pip reads them and checks that each
   lists the whole matrix of one commit and that each link serves its #sha256.
2. Commit 1001 over the 1000 kept (its publish prunes commit 1): the requests the S3
   server answered for it, counted by the server (the reader's left out); and commit 1002
   (steady state).
3. Ten more commits, through which the pinned ones (both would fall out) stay.
4. A nightly of 0.1.0 (below the final 0.1.0) is refused before any upload.

Run: .venv/bin/python benchmarks/nightly.py [--commits 1000]
It ends with the lines `requests to publish commit 1001 over 1000 kept: N` (goal: at most
40), `partial matrices a polling reader saw: 0`, `pinned versions pruned: 0` and
`nightly versions sorting below the latest final release: 0`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from packaging.version import Version  # noqa: E402

from release.destinations.reach import Reach  # noqa: E402
from release.errors import PublishError  # noqa: E402
from release.nightly.finals import read_finals  # noqa: E402
from tests.github_standin import DEFAULT_REPO, GitHubStandIn  # noqa: E402
from tests.integration.nightly import PREFIX, Channel, PollingReader, commit_of  # noqa: E402
from tests.integration.wheels import make_wheel  # noqa: E402
from tests.pypi_server import PypiServer  # noqa: E402
from tests.s3_server import S3Server, free_port  # noqa: E402

MAX_REQUESTS = 40


def version_of(number: int, base: str = "0.1.1") -> str:
    return f"{base}.dev{commit_of(number).time}"


def storage_requests(s3: S3Server, reader: PollingReader) -> int:
    return sum(1 for r in s3.requests(reset=True) if r["agent"] != reader.agent)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commits", type=int, default=1000)
    args = parser.parse_args()
    kept = args.commits
    pins = {"matrix": 3, "bucket": 7}  # commits pinned in matrix.yaml and in keep-list.txt
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        s3 = S3Server(root=root / "s3", port=free_port())
        (root / "s3").mkdir()
        pypi = PypiServer(root=root / "pypi", port=free_port())
        s3.start()
        pypi.start()
        try:
            with GitHubStandIn() as github:
                github.add_repo(DEFAULT_REPO)
                make_wheel(pypi.packages, version="0.1.0")  # the latest final release
                return run(root, s3=s3, pypi=pypi, github=github, kept=kept, pins=pins)
        finally:
            pypi.stop()
            s3.stop()


def run(
    root: Path,
    *,
    s3: S3Server,
    pypi: PypiServer,
    github: GitHubStandIn,
    kept: int,
    pins: dict[str, int],
) -> int:
    in_matrix, in_bucket = version_of(pins["matrix"]), version_of(pins["bucket"])
    channel = Channel(
        root=root / "channel", s3=s3, bucket="k3-nightly-bench", pypi=pypi, github=github,
        keep=kept, version="0.1.1", extra=f'\n  keep-list: ["{in_matrix}"]',
    )  # fmt: skip
    store = channel.store()
    store.put(
        PREFIX + "keep-list.txt",
        f"{in_bucket}\n".encode(),
        content_type="text/plain",
        cache_control="no-cache",
    )
    matrix = channel.matrix
    reader = PollingReader(channel)
    stop = threading.Event()
    polling = threading.Thread(target=reader.run, args=(stop,))
    polling.start()
    started = time.monotonic()
    try:
        for number in range(1, kept + 1):
            channel.publish_in_process(number, finals=None, matrix=matrix, store=store)
            if number % 100 == 0:
                print(f"{number} commits published, {time.monotonic() - started:.0f} s",
                      flush=True)  # fmt: skip
        storage_requests(s3, reader)
        channel.publish_in_process(kept + 1, finals=None, matrix=matrix, store=store)
        first = storage_requests(s3, reader)
        channel.publish_in_process(kept + 2, finals=None, matrix=matrix, store=store)
        steady = storage_requests(s3, reader)
        for number in range(kept + 3, kept + 13):
            channel.publish_in_process(number, finals=None, matrix=matrix, store=store)
    finally:
        stop.set()
        polling.join(timeout=120)
    state = channel.state()
    pinned_pruned = 0
    where_pinned = {"matrix": "matrix.yaml's keep-list", "bucket": "the bucket's keep-list.txt"}
    for key, number in pins.items():
        where = where_pinned[key]
        sha = commit_of(number).sha
        page = channel.get(channel.index_url + f"{sha}/k3-kernels/")
        listed = state.kept_commit(sha) is not None
        print(f"pinned in {where}: {version_of(number)}: kept {listed}, its index HTTP "
              f"{page.status_code}")  # fmt: skip
        pinned_pruned += int(not listed or page.status_code != 200)
    finals = read_finals(matrix, Reach(channel.env(), command="release plan --channel nightly"))
    latest = max(f.version for f in finals.releases)
    published = {Version(version_of(n)) for n in range(1, kept + 13)} | {
        Version(v) for v in reader.versions
    }
    below = sum(1 for v in published if Version(v.public) <= latest)
    refused = refuse_below_final(channel, latest)
    stored = store.get(PREFIX + "state.json")
    size = len(stored.data) if stored is not None else 0
    print(f"state.json after {kept + 12} commits: {len(state.kept)} kept, {size} bytes")
    print(f"reader: {reader.polls} polls, {reader.pages} pages, {len(reader.versions)} "
          f"versions seen; {reader.straddled} polls read the two variants at two commits "
          "(each page whole: a poll reads four pages one after another)")  # fmt: skip
    print(f"a nightly of 0.1.0 with 0.1.0 released: {refused}")
    for problem in reader.partial[:10]:
        print(f"partial: {problem}")
    print(f"requests to publish commit {kept + 2} (steady state): "
          f"{steady}")  # fmt: skip
    print(f"requests to publish commit {kept + 1} over {kept} kept: {first}")
    print(f"partial matrices a polling reader saw: {len(reader.partial)}")
    print(f"pinned versions pruned: {pinned_pruned}")
    print(f"nightly versions sorting below the latest final release: {below}")
    return 0 if first <= MAX_REQUESTS and not reader.partial and not pinned_pruned else 1


def refuse_below_final(channel: Channel, latest: Version) -> str:
    """A channel of the same bucket at version 0.1.0: its nightly must be refused."""
    channel.version = str(latest)
    channel.write_matrix()
    try:
        channel.publish_in_process(10_000, finals=None)
    except PublishError as error:
        return f"refused (exit {error.exit_code}): {error.message[:100]}..."
    finally:
        channel.version = "0.1.1"
        channel.write_matrix()
    return "NOT refused"


if __name__ == "__main__":
    sys.exit(main())
