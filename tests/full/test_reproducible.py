"""Reproducible wheels, verified caches and clean interruption, on real builds (slow).

The session's build of the shipped matrix (`shipped_build`) and a checkout elsewhere, built
with another cache, time zone, umask and --jobs, must give the same bytes; `release build
--compare` says so and names what differs when it does not; damaged cache entries never
reach a wheel; SIGINT and SIGTERM stop a build, end its children and leave dist/
consistent. Where the SM list is not what a test checks, it builds the matrix for one SM.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from release.records.manifest import read_manifest
from tests.full.shared_builds import ShippedBuild, linked_cache
from tests.integration.interface import EPOCH

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RELEASE = str(Path(sys.executable).parent / "release")
GIT = shutil.which("git") or "git"
COPIED = ("csrc", "matrix.yaml")
ONE_SM = (
    ("sms: [75, 80, 86, 89, 90, 100]", "sms: [90]"),
    ("ptx: 100", "ptx: none"),
)


def checkout(where: Path, edits: tuple[tuple[str, str], ...] = ()) -> Path:
    """A checkout of the working tree's csrc/ and matrix.yaml (with `edits` to the matrix)
    at `where`: a git repository whose last commit is dated SOURCE_DATE_EPOCH of the
    shipped build, so that a build there, told no date, dates its wheels as that one."""
    where.mkdir(parents=True)
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(
                source, where / name, ignore=shutil.ignore_patterns("build", "dist", "__pycache__")
            )
        else:
            shutil.copy2(source, where / name)
    text = (where / "matrix.yaml").read_text(encoding="utf-8")
    for shipped, edited in edits:
        assert shipped in text
        text = text.replace(shipped, edited)
    (where / "matrix.yaml").write_text(text, encoding="utf-8")
    dated = {**os.environ, "GIT_AUTHOR_DATE": f"@{EPOCH}", "GIT_COMMITTER_DATE": f"@{EPOCH}"}
    for command in (
        ["init", "-q", "."],
        ["add", "-A", *COPIED],
        ["-c", "user.name=k3", "-c", "user.email=k3@example.com", "commit", "-qm", "k3"],
    ):
        subprocess.run([GIT, "-C", str(where), *command], check=True, env=dated)
    return where


@dataclass(frozen=True)
class Run:
    code: int
    stderr: str
    stdout: str


def release(root: Path, *args: str, env: dict[str, str] | None = None, umask: int = 0o022) -> Run:
    done = subprocess.run(
        [RELEASE, *args],
        cwd=root,
        env={**without_epoch(os.environ), **(env or {})},
        umask=umask,
        capture_output=True,
        text=True,
        check=False,
    )
    return Run(done.returncode, done.stderr, done.stdout)


def without_epoch(environ: Mapping[str, str]) -> dict[str, str]:
    """The test's environment without SOURCE_DATE_EPOCH: a build dates its wheels by its
    checkout's last commit unless the test says otherwise."""
    return {k: v for k, v in environ.items() if k != "SOURCE_DATE_EPOCH"}


def digests(dist: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(dist.glob("*.whl"))}


@dataclass(frozen=True)
class Pair:
    first: Path  # the repository root, where the session's shipped build ran
    first_dist: Path
    second: Path  # a checkout elsewhere
    second_dist: Path  # its rebuild of the first's cells, compared with them
    second_cache: Path
    comparison: dict[str, object]  # the rebuild's --json document


@pytest.fixture(scope="module")
def pair(
    shipped_build: ShippedBuild, release_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> Pair:
    """The shipped build, and `build --compare` of it (a build of the same matrix from
    empty caches) in a checkout at another path, with another cache, time zone, locale,
    umask and --jobs, its rebuilt wheels kept in --out. One rebuild of the four cells serves
    both the comparison's verdict and the bytes compared here: a second cold build of the
    same cells would prove nothing more (the commit's date is proven by `one_sm`)."""
    assert shipped_build.code == 0, shipped_build.stderr
    base = tmp_path_factory.mktemp("reproducible")
    b = checkout(base / "somewhere" / "else" / "entirely" / "k3")
    cache = linked_cache(base / "cache-b", release_cache)
    second = release(
        b,
        "build",
        "--compare",
        str(shipped_build.dist / "manifest.json"),
        "--out",
        str(base / "dist-b"),
        "--cache-dir",
        str(cache),
        "--jobs",
        "2",
        "--json",
        env={"TZ": "Pacific/Kiritimati", "LC_ALL": "C"},
        umask=0o077,
    )
    assert second.code == 0, second.stderr
    return Pair(REPO, shipped_build.dist, b, base / "dist-b", cache, json.loads(second.stdout))


@dataclass(frozen=True)
class OneSm:
    """A checkout of the matrix for one SM, and its 13.0 x86_64 cell built there."""

    checkout: Path
    dist: Path
    cache: Path

    @property
    def wheel(self) -> str:
        (name,) = digests(self.dist)
        return name


@pytest.fixture(scope="module")
def one_sm(release_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> OneSm:
    base = tmp_path_factory.mktemp("one-sm")
    root = checkout(base / "k3", ONE_SM)
    built = OneSm(root, base / "dist", linked_cache(base / "cache", release_cache))
    args = ("--cuda", "13.0", "--arch", "x86_64", "--out", str(built.dist))
    done = release(root, "build", *args, "--cache-dir", str(built.cache))
    assert done.code == 0, done.stderr
    return built


def test_two_checkouts_build_byte_identical_wheels(pair: Pair) -> None:
    first, second = digests(pair.first_dist), digests(pair.second_dist)
    assert len(first) == 4
    for name, digest in first.items():
        print(f"{name}: {digest} {second.get(name)}")
    assert first == second


def test_no_built_file_holds_an_absolute_path(pair: Pair) -> None:
    for wheel in pair.first_dist.glob("*.whl"):
        with zipfile.ZipFile(wheel) as archive:
            for info in archive.infolist():
                data = archive.read(info)
                for root in (pair.first, pair.second, Path.home(), Path("/tmp")):  # noqa: S108
                    assert str(root).encode() not in data, (wheel.name, info.filename, root)


def test_files_in_dist_follow_the_umask(pair: Pair) -> None:
    for path in pair.first_dist.iterdir():
        if path.is_file():
            assert path.stat().st_mode & 0o777 == 0o644, path
    for path in pair.second_dist.iterdir():
        if path.is_file():
            assert path.stat().st_mode & 0o777 == 0o600, path


def test_compare_of_a_rebuild_from_empty_caches_is_identical(pair: Pair) -> None:
    report = pair.comparison
    assert report["identical"] is True
    assert report["source_date_epoch"] == int(EPOCH)
    wheels = report["wheels"]
    assert isinstance(wheels, list)
    assert [w["identical"] for w in wheels] == [True] * 4
    assert {w["filename"] for w in wheels} == set(digests(pair.first_dist))
    assert not (pair.second_cache / "device").exists(), "the comparison builds from empty caches"


def test_compare_names_the_first_member_that_differs(
    one_sm: OneSm, release_cache: Path, tmp_path: Path
) -> None:
    cache = linked_cache(tmp_path / "cache", release_cache)
    done = release(
        one_sm.checkout,
        "build",
        "--cuda",
        "13.0",
        "--arch",
        "x86_64",
        "--compare",
        str(one_sm.dist / "manifest.json"),
        "--cache-dir",
        str(cache),
        env={"SOURCE_DATE_EPOCH": "1710000000"},
    )
    assert done.code == 4, done.stderr
    assert "DIFFERENT" in done.stdout
    assert "1 of 1 wheels differ" in done.stderr
    # the first member, dated by the reference's epoch (its commit's) and by the given one
    assert "k3_kernels/__init__.py: dated (2023, 11, 14, 22, 13, 20)" in done.stderr
    assert "rebuilt (2024, 3, 9, 16, 0, 0)" in done.stderr


def flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def drop_digest(path: Path) -> None:
    path.with_name(path.name + ".sha256").unlink()


DAMAGE: dict[str, Callable[[Path], None]] = {
    "flipped": flip,
    "truncated": truncate,
    "half-written": drop_digest,
}
ENTRIES = {"cubin": "*.cubin", "fatbin": "*.fatbin", "wheel": "*.whl"}


@pytest.mark.parametrize("damage", DAMAGE)
@pytest.mark.parametrize("entry", ENTRIES)
def test_a_damaged_cache_entry_is_rebuilt_and_never_shipped(
    one_sm: OneSm, entry: str, damage: str, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    shutil.copytree(one_sm.cache, cache, symlinks=True)
    if entry != "wheel":
        shutil.rmtree(cache / "wheels")
        root = cache / "device"
    else:
        root = cache / "wheels"
    if entry == "cubin":
        for fatbin in root.rglob("*.fatbin"):  # so that the parts are read
            fatbin.unlink()
            fatbin.with_name(fatbin.name + ".sha256").unlink()
    targets = sorted(root.rglob(ENTRIES[entry]))
    assert targets
    for target in targets:
        DAMAGE[damage](target)
    out = tmp_path / "dist"
    done = release(
        one_sm.checkout,
        "build",
        "--cuda",
        "13.0",
        "--arch",
        "x86_64",
        "--out",
        str(out),
        "--cache-dir",
        str(cache),
    )
    assert done.code == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "warning: " in done.stderr
    assert "damaged" in done.stderr
    assert digests(out) == digests(one_sm.dist)


def test_a_cached_wheel_its_inspection_refuses_is_removed_and_rebuilt(
    one_sm: OneSm, tmp_path: Path
) -> None:
    """An entry whose sidecar matches a wheel the inspection refuses (another cell's wheel
    under this key: here the cell's own without its library) failed every later build with
    "inspection failed", naming no cache entry; it is removed and built again."""
    cache = tmp_path / "cache"
    shutil.copytree(one_sm.cache, cache, symlinks=True)
    (cached,) = (cache / "wheels").rglob("*.whl")
    kept = io.BytesIO()
    with zipfile.ZipFile(cached) as whole, zipfile.ZipFile(kept, "w") as stripped:
        for info in whole.infolist():
            if not info.filename.endswith(".so"):
                stripped.writestr(info, whole.read(info))
    cached.write_bytes(kept.getvalue())
    sidecar = cached.with_name(cached.name + ".sha256")
    sidecar.write_text(hashlib.sha256(kept.getvalue()).hexdigest())
    out = tmp_path / "dist"
    args = ("--cuda", "13.0", "--arch", "x86_64", "--out", str(out), "--cache-dir", str(cache))
    done = release(one_sm.checkout, "build", *args)
    assert done.code == 0, done.stderr
    assert f"the cached wheel {cached} fails its inspection failed" not in done.stderr
    assert f"the cached wheel {cached} fails its inspection" in done.stderr
    assert digests(out) == digests(one_sm.dist)
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == digests(one_sm.dist)[cached.name]


def live_processes(marker: str) -> list[str]:
    """Command lines of running processes that mention `marker` in their command line or
    their environment (a compile cache server of the build: its directory is there)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            environ = (entry / "environ").read_bytes().decode(errors="replace")
            state = (entry / "stat").read_text().split()[2]
        except OSError:
            continue
        if (marker in command or marker in environ) and state != "Z":
            found.append(command)
    return found


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_build_ends_its_children_and_keeps_dist_consistent(
    one_sm: OneSm, release_cache: Path, signum: signal.Signals, tmp_path: Path
) -> None:
    """The whole matrix (its four cells, for one SM) from empty caches, stopped while it
    compiles; its TMPDIR is left empty (each stopped build left the PEP 517 frontend's
    build-env-*, csrc's k3-nvcc-* and sccache's sccache_nvcc* there)."""
    cache = linked_cache(tmp_path / "cache", release_cache)
    out = tmp_path / "dist"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    marker = str(tmp_path)
    with subprocess.Popen(
        [RELEASE, "build", "--out", str(out), "--cache-dir", str(cache)],
        env={**os.environ, "TMPDIR": str(scratch)},
        cwd=one_sm.checkout,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    ) as child:
        assert child.stderr is not None
        for line in child.stderr:
            if "building" in line:
                break
        deadline = time.monotonic() + 120
        while not any("nvcc" in c or "-m build" in c for c in live_processes(marker)):
            assert time.monotonic() < deadline, "the build never started compiling"
            time.sleep(0.2)
        time.sleep(1.0)
        sent = time.monotonic()
        child.send_signal(signum)
        rest = child.stderr.read()
        code = child.wait(timeout=60)
        stopped_after = time.monotonic() - sent
    print(f"{signum.name}: exit {code} after {stopped_after:.2f} s")
    assert code == 128 + signum
    assert f"interrupted by {signum.name}" in rest
    assert "Traceback" not in rest
    assert live_processes(marker) == []
    assert sorted(p.name for p in scratch.iterdir()) == []
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []
    wheels = {p.name for p in out.glob("*.whl")}
    listed = (
        {w.filename for w in read_manifest(out / "manifest.json").wheels}
        if (out / "manifest.json").exists()
        else set()
    )
    assert wheels == listed
