"""Where the caches live, the key of a cell's wheel, and the cache of finished wheels.

One root (`--cache-dir`, else release.toolchain.cacheroot's `default_cache_dir`) holds
`toolchains/` (a directory per pinned package set, filled by release.toolchain),
`device/` (device code, compiled and keyed by csrc's build backend) and `wheels/`
(finished wheels, keyed by `wheel_cache_key`: sources, toolchain identity, cell, build
recipe, timestamp; never a path); `release build --compare` keeps the toolchains and
gives device/ and wheels/ an empty directory. `cache_usage` measures each part for
`release doctor` (the torch environments among the toolchains apart: release.toolchain.envcache
keeps them within their budget).

The wheel cache checks every entry against its sha256 when it is read. An entry is a
directory named by the wheel's cache key holding the wheel and `<wheel>.sha256`. The wheel
is written first and its digest second, each atomically, so a build killed in between
leaves an entry without a digest: like a flipped byte or a truncated file, that is a
damaged entry, which `get` removes and reports so the caller builds the wheel again.
Nothing read from here is trusted by its name alone.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.metadata
import json
import os
import stat
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from release import __version__
from release.errors import FileError
from release.fsutil import remove_unfollowed, tree_files, write_atomic
from release.matrix import Cell
from release.toolchain import envcache
from release.toolchain.cacheroot import toolchain_cache

# no wheel this tool builds is near it: a bigger entry is damage, never read into memory
MAX_CACHED_WHEEL = 4 * 2**30
SKIPPED_PARTS = frozenset({"build", "dist", "__pycache__", ".pytest_cache", ".mypy_cache"})


# a source file larger than this is no source: a dataset or a disk image in the checkout
MAX_SOURCE_FILE = 2**30


def source_digest(files: Iterable[tuple[str, bytes | Path]]) -> str:
    """A digest of a source tree given as (relative path, its bytes or its file) pairs,
    each file hashed as it streams (a tree is never held in memory). A path is hashed as
    the bytes the filesystem holds (`os.fsencode`), so that a file name that is not UTF-8
    (its undecodable bytes kept as surrogates) keys the same tree the same on every machine,
    and a UTF-8 one as it always has. FileError for a file that cannot be read whole."""
    digest = hashlib.sha256()
    for name, data in sorted(files, key=lambda pair: pair[0]):
        each = hashlib.sha256(data).digest() if isinstance(data, bytes) else _file_digest(data)
        digest.update(os.fsencode(name) + b"\0" + each)
    return digest.hexdigest()


def _file_digest(path: Path) -> bytes:
    """The sha256 of a regular file's bytes, as many as its size says (a /proc file says 0
    and is never read to an end it does not have)."""
    try:
        with path.open("rb") as stream:
            facts = os.fstat(stream.fileno())
            if not stat.S_ISREG(facts.st_mode):
                return hashlib.sha256().digest()
            if facts.st_size > MAX_SOURCE_FILE:
                raise FileError(
                    f"{path}: a file of {facts.st_size} bytes among the sources, over the "
                    f"{MAX_SOURCE_FILE // 2**30} GiB a source file may have",
                    hint="the wheel cache keys a build by every source file: move it out of "
                    "the project, or out of matrix.yaml's directory where a prepare step "
                    "stages the project",
                )
            digest = hashlib.sha256()
            left = facts.st_size
            while left > 0 and (chunk := stream.read(min(left, 2**20))):
                digest.update(chunk)
                left -= len(chunk)
            return digest.digest()
    except OSError as error:
        raise FileError(f"{path}: cannot be read ({error.strerror or error})") from None


def project_files(project: Path) -> Iterable[tuple[str, Path]]:
    """The project's source files as (relative path, path), without build outputs, caches
    and hidden directories (.git: two clones of one commit differ there); a linked
    directory's files under the link's name (the build reads them there)."""

    def pruned(name: str) -> bool:
        return name.startswith(".") or name in SKIPPED_PARTS

    for name, path in tree_files(project, pruned=pruned):
        if pruned(path.name) or path.suffix == ".pyc":  # a file named `build` or `.x`
            continue
        yield name, path


def recipe() -> dict[str, str]:
    """What turns a build into the final bytes besides sources and compilers: this tool,
    the retagging `wheel`, and the zlib that compresses the zip members."""
    return {
        "release": __version__,
        "wheel": importlib.metadata.version("wheel"),
        "zlib": zlib.ZLIB_RUNTIME_VERSION,
    }


def wheel_cache_key(
    cell: Cell,
    sources: str,
    toolchain: Mapping[str, str],
    *,
    epoch: int,
    recipe: Mapping[str, str],
) -> str:
    """Everything a cell's wheel depends on and nothing else: sources, the toolchain's
    identity (versions, not paths; with the build tools), the cell's settings and build
    recipe, the timestamp, the recipe of this tool."""
    blob = json.dumps(
        {
            "sources": sources,
            "toolchain": dict(sorted(toolchain.items())),
            "cuda": str(cell.cuda),
            "arch": cell.arch,
            "sms": [str(s) for s in cell.sms],
            "ptx": str(cell.ptx) if cell.ptx else None,
            "label": cell.local_label,
            "plat": cell.platform_tag,
            "epoch": epoch,
            "recipe": dict(sorted(recipe.items())),
            "build": [cell.build.backend, cell.build.env, cell.build.config_settings],
            # only where set, so that the keys of wheels built before it stay as they were
            **({"compress_mode": cell.compress_mode} if cell.compress_mode else {}),
            **({"device_code": cell.device_code} if cell.host_only else {}),
            **({"prepare": _prepare_key(cell)} if cell.build.prepare else {}),
            **({"requires": list(cell.build.requires)} if cell.build.requires else {}),
            **({"targets_env": cell.build.targets_env} if cell.build.targets_env else {}),
            **(
                {"cuda_libraries": list(cell.build.cuda_libraries)}
                if cell.build.cuda_libraries
                else {}
            ),
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _prepare_key(cell: Cell) -> list[str | None]:
    prepare = cell.build.prepare
    return [prepare.command, prepare.version_file, prepare.output] if prepare else []


@dataclass(frozen=True, kw_only=True)
class Lookup:
    data: bytes | None  # the verified wheel, or None
    damage: str | None = None  # why a damaged entry was removed


class WheelCache:
    def __init__(self, root: Path) -> None:
        self.root = root

    def entry(self, key: str) -> Path:
        return self.root / key

    def get(self, key: str, filename: str) -> Lookup:
        """The entry's wheel, read back only as a regular file of at most MAX_CACHED_WHEEL
        bytes whose sha256 is its sidecar's, through no link; a damaged entry (a link, a
        FIFO, a file of another hash) is removed and said so."""
        entry = self.entry(key)
        if _not_own_directory(entry):
            return self._damaged(key, entry, "not a directory of the cache's own")
        path = entry / filename
        try:
            data = _regular_file(path, MAX_CACHED_WHEEL)
        except FileNotFoundError:
            return Lookup(data=None)
        except OSError as error:
            return self._damaged(key, path, f"unreadable ({error.strerror or error})")
        try:
            recorded = _regular_file(entry / f"{filename}.sha256", 1024).decode("ascii")
        except (OSError, UnicodeDecodeError):
            return self._damaged(key, path, "its sha256 was never written")
        if hashlib.sha256(data).hexdigest() != recorded.strip():
            return self._damaged(key, path, f"its {len(data)} bytes do not match their sha256")
        return Lookup(data=data)

    def put(self, key: str, filename: str, data: bytes) -> None:
        directory = self.entry(key)
        if _not_own_directory(directory):
            self.discard(key)  # written through, a link would put the wheel elsewhere
        write_atomic(directory / filename, data)
        write_atomic(directory / f"{filename}.sha256", hashlib.sha256(data).hexdigest().encode())

    def discard(self, key: str) -> None:
        """Remove the entry: a link or a file in its place is unlinked, never followed."""
        remove_unfollowed(self.entry(key))

    def _damaged(self, key: str, path: Path, reason: str) -> Lookup:
        self.discard(key)
        return Lookup(data=None, damage=f"the cached wheel {path} was damaged: {reason}")


def _not_own_directory(entry: Path) -> bool:
    """Whether something other than a directory of the cache's own holds the entry's place:
    a link (to a directory or not), or a file."""
    return entry.is_symlink() or (entry.exists() and not entry.is_dir())


def _regular_file(path: Path, limit: int) -> bytes:
    """The bytes of `path`, a regular file of at most `limit` bytes reached through no
    link; OSError for anything else (a FIFO is not waited on, /dev/zero not read)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(descriptor, "rb") as stream:
        facts = os.fstat(stream.fileno())
        if not stat.S_ISREG(facts.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if facts.st_size > limit:
            raise OSError(errno.EFBIG, f"{facts.st_size} bytes, over the {limit} an entry may hold")
        return stream.read()  # a file that grew since is then one of another hash


@dataclass(frozen=True, kw_only=True)
class CachePart:
    """One part of the cache, measured: what it is, where, its bytes on disk, and how many
    entries it holds where that is told (the torch environments)."""

    part: str
    path: Path
    size: int
    count: int | None = None

    def document(self) -> dict[str, object]:
        return {
            "part": self.part,
            "path": str(self.path),
            "bytes": self.size,
            **({"entries": self.count} if self.count is not None else {}),
        }


def cache_usage(root: Path, compile_root: Path) -> list[CachePart]:
    """The cache under `root` (and the local compile cache at `compile_root`) by part:
    the toolchains without the torch environments, the torch environments, the finished
    wheels, the compile cache and csrc's device code."""
    toolchains = toolchain_cache(root)
    environments = envcache.environments(toolchains)
    in_environments = sum(e.size for e in environments)
    return [
        CachePart(
            part="toolchains",
            path=toolchains,
            size=max(0, envcache.size_of(toolchains) - in_environments),
        ),
        CachePart(
            part="torch environments",
            path=toolchains,
            size=in_environments,
            count=len(environments),
        ),
        CachePart(part="wheels", path=root / "wheels", size=envcache.size_of(root / "wheels")),
        CachePart(part="compile cache", path=compile_root, size=envcache.size_of(compile_root)),
        CachePart(part="device code", path=root / "device", size=envcache.size_of(root / "device")),
    ]
