"""Publish and verify, measured side by side in one run (ratios, not absolute times).

1. A second `release publish` after a successful one, against a real pypiserver and the
   stand-in GitHub: bytes uploaded and write requests (both must be 0).
2. `verify` of N assets on the stand-in GitHub (302 to signed storage URLs): concurrent
   (bounded, 16) vs one at a time. The client adds 20 ms per request, as a round trip to
   GitHub would, so the ratio reflects overlapped waiting, not this machine's 2 cores.
3. The bytes pip downloads from the release to pick a wheel (`pip install --dry-run` by
   exact pin), through the published index with its PEP 658 `.metadata` links and through
   the same index without them: goal, the size of the `.metadata`, not the wheel's.

Run: .venv/bin/python -m benchmarks.publish [--assets 200]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import unquote

import httpx

from release.credentials import Secret
from release.destinations.github import collect
from release.destinations.index import IndexFile, render_index, write_index
from release.destinations.reach import Reach
from release.publish.run import PublishSettings, publish
from release.records.published import Published, PublishedFile
from release.remote import httpclient
from release.remote.github import GithubClient
from release.verify.checks import VerifySettings, verify
from tests.github_standin import DEFAULT_REPO, GitHubStandIn
from tests.integration.test_publish_e2e import serve
from tests.integration.wheels import github_destination, make_release, pypi_destination
from tests.pypi_server import PypiServer
from tests.s3_server import free_port


class LatencyTransport(httpx.HTTPTransport):
    """20 ms per request, as a round trip from a CI runner to GitHub and its CDN would be;
    on 127.0.0.1 there is no waiting to overlap otherwise."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        time.sleep(0.02)
        return super().handle_request(request)


def second_publish(root: Path) -> None:
    server = PypiServer(root=root / "pypiserver", port=free_port())
    server.start()
    try:
        with GitHubStandIn() as gh:
            gh.add_repo(DEFAULT_REPO)
            release = make_release(
                root / "dist", pypi=pypi_destination(server.url),
                github=github_destination(gh.api_url), arches=("x86_64", "aarch64"),
            )  # fmt: skip
            env = {**os.environ, **server.env(), "GITHUB_TOKEN": gh.token}
            settings = PublishSettings(dist=release.dist, index_dir=root / "site")
            publish(settings, Reach(env, command="release publish"))
            pypi_files = len(list(server.packages.iterdir()))
            gh.clear_log()
            before = {p.name: p.stat().st_mtime_ns for p in server.packages.iterdir()}
            outcome = publish(settings, Reach(env, command="release publish"))
            writes = [r for r in gh.request_log if r.method not in ("GET", "HEAD")]
            uploaded = sum(r.body_length for r in writes)
            after = {p.name: p.stat().st_mtime_ns for p in server.packages.iterdir()}
            actions = sorted({d.action.value for d in outcome.applied})
            print(f"second publish: {len(outcome.applied)} files, actions {actions}")
            print(f"  GitHub write requests: {len(writes)}, bytes uploaded: {uploaded}")
            print(f"  pypiserver files changed: {sum(before[k] != after[k] for k in before)}"
                  f" of {pypi_files}")  # fmt: skip
            assert not writes
            assert uploaded == 0
            assert before == after
    finally:
        server.stop()


def verify_many(assets: int) -> None:
    with GitHubStandIn() as gh:
        gh.add_repo(DEFAULT_REPO)
        token = {"Authorization": f"Bearer {gh.token}"}
        created = httpx.post(
            f"{gh.api_url}/repos/{DEFAULT_REPO}/releases",
            json={"tag_name": "v0.1.0", "draft": False}, headers=token,
        ).json()  # fmt: skip
        files = []
        for i in range(assets):
            data = hashlib.sha256(str(i).encode()).digest() * 64
            name = f"k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_x86_64.{i}.bin"
            gh.add_asset(created["id"], name, data)
            files.append(
                PublishedFile(
                    filename=name,
                    sha256=hashlib.sha256(data).hexdigest(),
                    size=len(data),
                    url=f"{gh.web_url}/{DEFAULT_REPO}/releases/download/v0.1.0/{name}",
                    destination="github",
                    kind="github",
                    index_url=None,
                    arch="x86_64",
                    local_label="cu129",
                )
            )
        published = Published(project="k3-kernels", version="0.1.0", files=tuple(files))
        env = {"GITHUB_TOKEN": gh.token}
        timings = {}
        for concurrency in (1, 16):
            client = httpx.Client(
                transport=LatencyTransport(),
                limits=httpx.Limits(max_connections=concurrency),
                follow_redirects=True,
            )
            start = time.perf_counter()
            with client:
                report = verify(
                    published, Reach(env, command="release verify"),
                    VerifySettings(concurrency=concurrency, pip=False), http=client,
                )  # fmt: skip
            timings[concurrency] = time.perf_counter() - start
            assert not report.failed, report.failed[:3]
        ratio = timings[1] / timings[16]
        print(f"verify of {assets} assets: one at a time {timings[1]:.2f} s, "
              f"16 concurrent {timings[16]:.2f} s: {ratio:.1f}x faster")  # fmt: skip


def resolver_bytes(root: Path, wheel_mib: int) -> None:
    """Publish one large +cu129 wheel with its sidecar, then resolve it through the index as
    published and through the same index without metadata links."""
    with GitHubStandIn() as gh:
        gh.add_repo(DEFAULT_REPO)
        release = make_release(
            root / "resolve", pypi=None, github=github_destination(gh.api_url),
            payload=os.urandom(wheel_mib * 2**20),
        )  # fmt: skip
        site = root / "resolve-site"
        publish(
            PublishSettings(dist=release.dist, index_dir=site),
            Reach({"GITHUB_TOKEN": gh.token}, command="release publish"),
        )
        (release_id,) = [r.id for r in gh.releases(DEFAULT_REPO)]
        sizes = {a.name: a.size for a in gh.assets(release_id)}
        plain = root / "resolve-plain"
        files = [
            IndexFile(**{**vars(f), "metadata_sha256": None})
            for f in release_files(gh.api_url, gh.token)
        ]
        write_index(render_index(files), plain)
        measured = {}
        for name, directory in (("with .metadata", site), ("without", plain)):
            gh.clear_log()
            with serve(directory) as base:
                subprocess.run(
                    [sys.executable, "-m", "pip", "--isolated", "install", "--dry-run",
                     "--ignore-installed", "--no-deps", "--no-cache-dir", "--only-binary=:all:",
                     "--python-version", "3.12", "--platform", "manylinux_2_28_x86_64",
                     "--target", str(root / "t"), "--index-url", f"{base}cu129/",
                     "k3-kernels==0.1.0+cu129"],
                    check=True, capture_output=True,
                )  # fmt: skip
            fetched = [
                unquote(r.path.rsplit("/", 1)[1])
                for r in gh.request_log
                if "/releases/download/" in r.path
            ]
            measured[name] = sum(sizes.get(n, 0) for n in fetched)
    wheel = next(n for n in sizes if n.endswith(".whl"))
    print(
        f"pip resolving k3-kernels==0.1.0+cu129 ({sizes[wheel]:,} byte wheel): "
        f"{measured['with .metadata']:,} bytes with .metadata, {measured['without']:,} "
        f"without; {measured['without'] / max(measured['with .metadata'], 1):,.0f}x fewer"
    )


def release_files(api_url: str, token: str) -> list[IndexFile]:
    client = GithubClient(api_url=api_url, token=Secret(token))
    with httpclient.client() as downloads, client.session("benchmark"):
        files, _ = collect(client, DEFAULT_REPO, "k3-kernels", downloads)
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--assets", type=int, default=200)
    parser.add_argument("--wheel-mib", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        second_publish(Path(tmp))
    verify_many(args.assets)
    with tempfile.TemporaryDirectory() as tmp:
        resolver_bytes(Path(tmp), args.wheel_mib)
    return 0


if __name__ == "__main__":
    sys.exit(main())
