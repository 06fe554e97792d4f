"""The nightly channel's test bench: the shipped matrix with its destinations on 127.0.0.1
(the nightly bucket on moto's S3, PyPI on the pypiserver, GitHub on the stand-in), small
stand-in wheels per commit (the shipped matrix's four cells, named as `release build
--channel nightly` names them), and `release` run as users run it.

`Channel.dist(n)` writes what `release build --channel nightly` leaves in dist/ for the
n-th commit (its id `n` in hex, its time one minute after the (n-1)-th); `publish` runs
`release publish --channel nightly` on it, `publish_in_process` the same entry point in
this process (for the many commits retention and the request bound need).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from packaging.utils import parse_wheel_filename

from release.cli import main
from release.credentials import s3_credentials
from release.destinations.reach import Reach
from release.matrix import Commit, Matrix, load_matrix, nightly_matrix
from release.nightly.finals import Finals
from release.nightly.layout import commit_keys
from release.nightly.publish import NightlyOutcome, NightlySettings, publish_nightly
from release.nightly.state import NightlyState, from_bytes, to_bytes
from release.nightly.verify import verify_commit
from release.records.manifest import Manifest, write_manifest
from release.remote.httpclient import tls_context
from release.remote.s3 import Bucket, S3Store
from release.remote.simple_index import parse_project_page
from release.verify.checks import VerifySettings
from tests.github_standin.server import DEFAULT_REPO, GitHubStandIn
from tests.integration.wheels import standin_entry
from tests.pypi_server import PypiServer
from tests.s3_server import ACCESS_KEY, SECRET_KEY, S3Server

REPO = Path(__file__).resolve().parents[2]
GIT = shutil.which("git") or "git"
RELEASE = Path(sys.executable).with_name("release")
FIRST_TIME = 1_800_000_000
NO_FINALS = Finals(releases=(), not_asked=())  # a release with no final release yet
PREFIX = "k3-kernels/"


def git_commit_at(directory: Path, time: int) -> Commit:
    """Everything in `directory` committed (a repository made there if needed) at `time`."""
    people = {f"GIT_{who}_{what}": value for who in ("AUTHOR", "COMMITTER")
              for what, value in (("NAME", "t"), ("EMAIL", "t@example.com"),
                                  ("DATE", f"@{time} +0000"))}  # fmt: skip
    env = {**os.environ, **people}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "c", "--allow-empty"]):
        subprocess.run([GIT, "-C", str(directory), *args], env=env, check=True)
    sha = subprocess.run(
        [GIT, "-C", str(directory), "rev-parse", "HEAD"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    return Commit(sha=sha, time=time)


def commit_of(number: int) -> Commit:
    return Commit(sha=f"{number:040x}", time=FIRST_TIME + 60 * number)


@dataclass
class Channel:
    """One test's bucket on the session's S3 server, and a matrix whose nightly goes there."""

    root: Path
    s3: S3Server
    bucket: str
    pypi: PypiServer | None = None
    github: GitHubStandIn | None = None
    keep: int = 60
    extra: str = ""  # more keys under `nightly:`
    version: str | None = None  # the project's version (default: csrc's)
    matrix_path: Path = field(init=False)
    _loaded: tuple[str, Matrix] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.s3.create_bucket(self.bucket, public=True)
        self.matrix_path = self.root / "project" / "matrix.yaml"
        self.write_matrix()

    @property
    def index_url(self) -> str:
        return f"{self.s3.endpoint}/{self.bucket}/{PREFIX}"

    def nightly_url(self, label: str = "") -> str:
        return self.index_url + "nightly/" + (f"{label}/" if label else "")

    def write_matrix(self) -> None:
        text = (REPO / "matrix.yaml").read_text(encoding="utf-8")
        replaced = {
            "bucket: k3-wheels": f"bucket: {self.bucket}",
            "endpoint: https://k3-project.r2.cloudflarestorage.com": (
                f"endpoint: {self.s3.endpoint}"
            ),
            "index-url: https://wheels.k3-project.dev/k3-kernels/": f"index-url: {self.index_url}",
            "keep: 60 ": f"keep: {self.keep} ",
            "repository: k3-project/k3-kernels": f"repository: {DEFAULT_REPO}",
        }
        if self.github is not None:
            tag = '    tag: "k3-kernels-v{version}"'
            replaced[tag] = f"{tag}\n    api-url: {self.github.api_url}"
        if self.pypi is not None:
            replaced["    kind: pypi\n"] = (
                f"    kind: pypi\n    index-url: {self.pypi.index_url}\n"
                f"    repository-url: {self.pypi.url}\n"
            )
        for old, new in replaced.items():
            assert old in text, old
            text = text.replace(old, new)
        text = text.replace("  keep-list-object: keep-list.txt", "  keep-list-object: keep-list.txt"
                            + self.extra)  # fmt: skip
        directory = self.matrix_path.parent
        directory.mkdir(parents=True, exist_ok=True)
        if self.version is not None:
            project = directory / "kernels"
            project.mkdir(exist_ok=True)
            (project / "pyproject.toml").write_text(
                f'[project]\nname = "k3-kernels"\nversion = "{self.version}"\n', encoding="utf-8"
            )
            assert "\nproject: csrc " in text
            text = text.replace("\nproject: csrc ", "\nproject: kernels ")
        elif not (directory / "csrc").exists():
            (directory / "csrc").symlink_to(REPO / "csrc", target_is_directory=True)
        self.matrix_path.write_text(text, encoding="utf-8")

    def git_commit(self, time: int) -> Commit:
        """Commit the project directory (matrix.yaml, the project) at `time`: the HEAD
        `release plan --channel nightly` and `release build --channel nightly` read."""
        return git_commit_at(self.matrix_path.parent, time)

    @property
    def matrix(self) -> Matrix:
        """matrix.yaml, loaded again only once its text changed (each dist and publish of a
        test asks for it; a Matrix is frozen)."""
        text = self.matrix_path.read_text(encoding="utf-8")
        if self._loaded is None or self._loaded[0] != text:
            self._loaded = (text, load_matrix(self.matrix_path))
        return self._loaded[1]

    def dist(
        self, number: int, *, payload: bytes | None = None, matrix: Matrix | None = None
    ) -> Path:
        """What `release build --channel nightly` of commit `number` leaves in a dist/."""
        commit = commit_of(number)
        nightly = nightly_matrix(matrix or self.matrix, commit)
        dist = self.root / f"dist-{number}"
        entries = [
            standin_entry(
                dist,
                cell,
                made_by="tests/integration/nightly.py",
                payload=payload if payload is not None else f"commit {number}".encode(),
            )
            for cell in nightly.cells
        ]
        manifest = Manifest(
            project=nightly.project.name,
            version=str(nightly.project.version),
            wheels=tuple(entries),
            source_date_epoch=commit.time,
            commit=commit,
        )
        write_manifest(manifest, dist / "manifest.json")
        return dist

    def env(self, **more: str) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("AWS_", "GITHUB_", "TWINE_", "RELEASE_")) and k != "CI"
        }
        env.update(
            AWS_ACCESS_KEY_ID=ACCESS_KEY,
            AWS_SECRET_ACCESS_KEY=SECRET_KEY,
            NO_COLOR="1",
            COLUMNS="200",
        )
        if self.pypi is not None:
            env.update(self.pypi.env())
        if self.github is not None:
            env["GITHUB_TOKEN"] = self.github.token  # the publish job's: 5000 requests an hour
        env.update(more)
        return env

    def command(self, *args: str) -> list[str]:
        return [str(RELEASE), *args, "--matrix", str(self.matrix_path)]

    def release(
        self, *args: str, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`release ARGS --matrix ...` through its console entry point in this process, in
        matrix.yaml's directory with `env` as its whole environment: its exit code and what
        it printed (the tests that kill a run start `command(...)` as a process of its own;
        a process each would cost some 0.5 s of imports a run)."""
        argv = [*args, "--matrix", str(self.matrix_path)]
        stdout, stderr = io.StringIO(), io.StringIO()
        with (
            pytest.MonkeyPatch.context() as patch,
            contextlib.redirect_stdout(stdout),
            contextlib.redirect_stderr(stderr),
        ):
            for name in list(os.environ):
                patch.delenv(name)
            for name, value in (env or self.env()).items():
                patch.setenv(name, value)
            patch.chdir(self.matrix_path.parent)
            code = main(argv)
        return subprocess.CompletedProcess(
            [str(RELEASE), *argv], code, stdout.getvalue(), stderr.getvalue()
        )

    def publish(self, number: int, *more: str) -> subprocess.CompletedProcess[str]:
        return self.release("publish", "--channel", "nightly", "--dist", str(self.dist(number)),
                            *more)  # fmt: skip

    def publish_in_process(
        self,
        number: int,
        *,
        finals: Finals | None = NO_FINALS,
        matrix: Matrix | None = None,
        store: S3Store | None = None,
    ) -> NightlyOutcome:
        """`release publish --channel nightly` of commit `number`, in this process (its gate
        as the command's); `finals` None asks the release's destinations, as the command
        does; `matrix` and `store` are reused where given (a benchmark's thousand runs)."""
        reach = Reach(self.env(), command="release publish --channel nightly")
        verifying = VerifySettings(pip=False, provenance=False)
        return publish_nightly(
            NightlySettings(dist=self.dist(number, matrix=matrix)),
            matrix or self.matrix,
            reach,
            gate=lambda published: [
                f"{c.check} {c.subject}: {c.detail}"
                for c in verify_commit(published, reach, verifying).failed
            ],
            finals=finals,
            store_factory=(lambda _: store) if store is not None else None,
        )

    def store(self) -> S3Store:
        bucket = Bucket(name=self.bucket, endpoint=self.s3.endpoint, region="auto")
        return S3Store(bucket, s3_credentials(self.env()))

    def reach_through(self, endpoint: str) -> None:
        """matrix.yaml's S3 endpoint made `endpoint` (a proxy in front of moto); the
        index-url pip and verify read stays moto's own."""
        text = self.matrix_path.read_text(encoding="utf-8")
        line = f"endpoint: {self.s3.endpoint}\n"
        assert line in text
        self.matrix_path.write_text(text.replace(line, f"endpoint: {endpoint}\n"), encoding="utf-8")

    def state(self) -> NightlyState:
        stored = self.store().get(PREFIX + "state.json")
        assert stored is not None
        return from_bytes(stored.data, "state.json")

    def put_state(self, state: NightlyState) -> None:
        """Write the channel's state as it is given (a tampered or foreign one)."""
        self.put(PREFIX + "state.json", to_bytes(state))

    def put(self, key: str, data: bytes, content_type: str = "application/json") -> None:
        self.store().put(key, data, content_type=content_type, cache_control="no-cache")

    def object_keys(self) -> set[str]:
        return set(self.s3.keys(self.bucket))

    def get(self, url: str) -> httpx.Response:
        return httpx.get(url, timeout=30, verify=tls_context())


def oracle(channel: Channel, *, whole: Collection[str] = ()) -> list[str]:
    """What is wrong in the bucket, read directly (a listing, and each /nightly/ page and
    its links over HTTP): every kept commit, and each of `whole` (reported promoted or
    kept), has every object of its own; every /nightly/ page lists one commit's whole
    variant and links only files whose bytes match their #sha256."""
    keys = channel.object_keys()
    state = channel.state()
    problems = []
    for sha in whole:
        if state.kept_commit(sha) is None:
            problems.append(f"{sha[:12]} is reported but the state does not keep it")
    for kept in state.kept:
        shape = state.shapes[kept.shape]
        missing = [k for k in commit_keys(PREFIX, kept.commit, kept.time, shape, "k3-kernels")
                   if k not in keys]  # fmt: skip
        if missing:
            problems.append(f"kept {kept.commit[:12]} misses {len(missing)}: {missing[0]}")
    reader = PollingReader(channel)
    with httpx.Client(timeout=30, verify=tls_context()) as client:
        for label in reader.labels:
            page = channel.nightly_url(label) + "k3-kernels/"
            for url in (page, page + "index.json"):
                problem, _ = reader.problem(client, url, label)
                if problem is not None:
                    problems.append(problem)
    return problems


MakeChannel = Callable[..., Channel]


@pytest.fixture
def make_channel(
    s3_server: S3Server, tmp_path: Path, pypiserver: PypiServer, github_standin: GitHubStandIn
) -> MakeChannel:
    """Channels of this test, each with its own bucket, its release going to the test's
    pypiserver and stand-in GitHub (so that the version order is asked of them)."""
    made: list[Channel] = []

    def make(*, keep: int = 60, extra: str = "", version: str | None = None) -> Channel:
        slug = re.sub(r"[^a-z0-9]+", "-", tmp_path.name.lower()).strip("-")[-40:]
        channel = Channel(
            root=tmp_path / f"channel-{len(made)}",
            s3=s3_server,
            bucket=f"n{len(made)}-{slug}".strip("-"),
            keep=keep,
            extra=extra,
            version=version,
            pypi=pypiserver,
            github=github_standin,
        )
        made.append(channel)
        return channel

    return make


def arch_of(filename: str) -> str:
    """`x86_64` of `k3_kernels-...-py3-none-manylinux_2_28_x86_64.whl`."""
    return filename.removesuffix(".whl").rsplit("-", 1)[1].split("_", 3)[-1]


@dataclass
class PollingReader:
    """A reader of /nightly/ as pip reads it, polling every variant's project page (PEP
    503 and 691) in a loop: each page it reads must list exactly the matrix's wheels of that
    variant (one per arch) of one version, and each link must serve bytes of its #sha256.
    Anything else is a partial matrix."""

    channel: Channel
    arches: tuple[str, ...] = ("aarch64", "x86_64")
    labels: tuple[str, ...] = ("", "cu129")
    agent: str = "polling-reader"
    polls: int = 0
    pages: int = 0
    partial: list[str] = field(default_factory=list)
    versions: set[str] = field(default_factory=set)
    straddled: int = 0  # polls that read the variants at two versions (each page whole)
    served: set[str] = field(default_factory=set)  # the pages that have answered 200

    def problem(self, client: httpx.Client, url: str, label: str) -> tuple[str | None, str]:
        """(what is wrong with the page at `url`, or None; the version it lists)."""
        answer = client.get(url)
        if answer.status_code != 200:
            return f"{url}: HTTP {answer.status_code}", ""
        listed = parse_project_page(answer.content, answer.headers.get("content-type", ""), url)
        versions = {parse_wheel_filename(name)[1] for name in listed}
        if len(versions) != 1:
            return f"{url}: lists {len(versions)} versions", ""
        version = versions.pop()
        arches = tuple(sorted(arch_of(name) for name in listed))
        if arches != self.arches or (version.local or "") != label:
            return f"{url}: lists {sorted(listed)}", str(version)
        for item in listed.values():
            body = client.get(item.url)
            if body.status_code != 200 or hashlib.sha256(body.content).hexdigest() != item.sha256:
                return f"{url}: {item.name} does not serve its #sha256", str(version)
        return None, version.public

    def poll(self, client: httpx.Client) -> None:
        seen: set[str] = set()
        for label in self.labels:
            page = self.channel.nightly_url(label) + "k3-kernels/"
            for url in (page, page + "index.json"):
                if url not in self.served:
                    if client.get(url).status_code == 404:
                        continue  # not written yet: no nightly of this variant so far
                    self.served.add(url)  # from now on it must always serve a whole matrix
                self.pages += 1
                problem, version = self.problem(client, url, label)
                if problem is not None:
                    self.partial.append(problem)
                seen.add(version)
        self.polls += 1
        self.versions |= seen - {""}
        if len(seen - {""}) > 1:
            self.straddled += 1

    def run(self, stop: threading.Event) -> None:
        with httpx.Client(
            timeout=30, headers={"User-Agent": self.agent}, verify=tls_context()
        ) as client:
            while not stop.is_set():
                self.poll(client)
