"""Reproducible wheels, verified caches and clean interruption, on real builds (slow).

Two checkouts at different paths build the shipped matrix with different caches, time
zones, umasks and --jobs, and must give the same bytes; `release build --compare` says so
and names what differs when it does not; damaged cache entries never reach a wheel; SIGINT
and SIGTERM stop a build, end its children and leave dist/ consistent.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from release.records.manifest import read_manifest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RELEASE = str(Path(sys.executable).parent / "release")
COPIED = ("csrc", "matrix.yaml")


def checkout(where: Path) -> Path:
    """A checkout of this commit at `where` (a git clone, so the commit time is there to
    date the wheels), holding the working tree's csrc/ and matrix.yaml."""
    where.parent.mkdir(parents=True, exist_ok=True)
    if (REPO / ".git").exists():
        subprocess.run(
            ["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(where)],  # noqa: S607
            check=True,
        )
    else:
        where.mkdir()
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.rmtree(where / name, ignore_errors=True)
            shutil.copytree(
                source, where / name, ignore=shutil.ignore_patterns("build", "dist", "__pycache__")
            )
        else:
            shutil.copy2(source, where / name)
    return where


def cache_with_toolchains(where: Path, release_cache: Path) -> Path:
    """A cache of its own for device code and wheels; the provisioned toolchains shared."""
    where.mkdir(parents=True)
    (release_cache / "toolchains").mkdir(parents=True, exist_ok=True)
    (where / "toolchains").symlink_to(release_cache / "toolchains", target_is_directory=True)
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
        env={**os.environ, **(env or {})},
        umask=umask,
        capture_output=True,
        text=True,
        check=False,
    )
    return Run(done.returncode, done.stderr, done.stdout)


def digests(dist: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(dist.glob("*.whl"))}


@dataclass(frozen=True)
class Pair:
    first: Path  # checkout A
    first_dist: Path
    first_cache: Path
    second: Path  # checkout B
    second_dist: Path


@pytest.fixture(scope="module")
def pair(release_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Pair:
    base = tmp_path_factory.mktemp("reproducible")
    a = checkout(base / "a" / "k3")
    b = checkout(base / "somewhere" / "else" / "entirely" / "k3")
    cache_a = cache_with_toolchains(base / "cache-a", release_cache)
    cache_b = cache_with_toolchains(base / "cache-b", release_cache)
    first = release(
        a,
        "build",
        "--out",
        str(base / "dist-a"),
        "--cache-dir",
        str(cache_a),
        env={"TZ": "UTC"},
        umask=0o022,
    )
    assert first.code == 0, first.stderr
    second = release(
        b,
        "build",
        "--out",
        str(base / "dist-b"),
        "--cache-dir",
        str(cache_b),
        "--jobs",
        "2",
        env={"TZ": "Pacific/Kiritimati", "LC_ALL": "C"},
        umask=0o077,
    )
    assert second.code == 0, second.stderr
    return Pair(a, base / "dist-a", cache_a, b, base / "dist-b")


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


def shared_toolchains(where: Path, pair: Pair) -> Path:
    where.mkdir()
    (where / "toolchains").symlink_to((pair.first_cache / "toolchains").resolve())
    return where


def test_compare_of_a_rebuild_from_empty_caches_is_identical(pair: Pair, tmp_path: Path) -> None:
    cache = shared_toolchains(tmp_path / "cache", pair)
    done = release(
        pair.second,
        "build",
        "--compare",
        str(pair.first_dist / "manifest.json"),
        "--cache-dir",
        str(cache),
        "--json",
    )
    assert done.code == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["identical"] is True
    assert [w["identical"] for w in report["wheels"]] == [True] * 4
    assert not (cache / "device").exists(), "the comparison builds from empty caches"


def test_compare_names_the_first_member_that_differs(pair: Pair, tmp_path: Path) -> None:
    cache = shared_toolchains(tmp_path / "cache", pair)
    done = release(
        pair.second,
        "build",
        "--cuda",
        "13.0",
        "--arch",
        "x86_64",
        "--compare",
        str(pair.first_dist / "manifest.json"),
        "--cache-dir",
        str(cache),
        env={"SOURCE_DATE_EPOCH": "1700000000"},
    )
    assert done.code == 4, done.stderr
    assert "DIFFERENT" in done.stdout
    assert "1 of 1 wheels differ" in done.stderr
    # the first member, dated by the reference's commit time and by the given epoch
    assert "k3_kernels/__init__.py: dated (" in done.stderr
    assert "rebuilt (2023, 11, 14, 22, 13, 20)" in done.stderr


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
    pair: Pair, entry: str, damage: str, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    shutil.copytree(pair.first_cache, cache, symlinks=True)
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
        pair.first,
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
    name = next(n for n in digests(pair.first_dist) if "0.1.0-py3" in n and "x86_64" in n)
    assert digests(out) == {name: digests(pair.first_dist)[name]}


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
    pair: Pair, signum: signal.Signals, tmp_path: Path
) -> None:
    cache = shared_toolchains(tmp_path / "cache", pair)
    out = tmp_path / "dist"
    marker = str(tmp_path)
    with subprocess.Popen(
        [RELEASE, "build", "--out", str(out), "--cache-dir", str(cache)],
        cwd=pair.first,
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
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []
    wheels = {p.name for p in out.glob("*.whl")}
    listed = (
        {w.filename for w in read_manifest(out / "manifest.json").wheels}
        if (out / "manifest.json").exists()
        else set()
    )
    assert wheels == listed
