"""dist/manifest.json: what was built, the single input of publish and verify.

Per wheel: the cell, filename, size, sha256, the SMs and PTX found in its fatbins, the
toolchain versions and the destination (with everything publish needs to reach it, so the
manifest and the wheels beside it are a complete release artifact). A release built with
`--sdist` also records its sdist, apart from the wheels (`sdist`: name, size, sha256 and
the default variant's PyPI destination, the only one it goes to).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from release.credentials import has_credentials, url_shape_problem
from release.errors import ConfigError, shown
from release.fsutil import json_text, read_json, write_atomic
from release.github_names import repository_problem
from release.matrix import (
    INDEX_KINDS,
    KINDS,
    Cell,
    Commit,
    IndexDestination,
    destination_name_problem,
    kinds_text,
    nccl_requirement,
)
from release.matrix.gitindex import is_ref_name, recorded_index_problem, token_secret_problem
from release.records.sdistfile import SDIST_SUFFIX
from release.wheelfile import WheelName, is_wheel_name

SCHEMA_VERSION = 1
MANIFEST_NAME = "manifest.json"


@dataclass(frozen=True, kw_only=True)
class DestinationRef:
    """Where a wheel goes, as recorded in the manifest."""

    name: str
    kind: str  # a kind of release.matrix.KINDS
    index_url: str | None
    max_file_size: int
    max_project_size: int | None = None  # what the project may hold there; None: no limit
    repository_url: str | None = None  # pypi: upload endpoint
    repository: str | None = None  # github: owner/name
    tag: str | None = None  # github: the release tag for this version
    api_url: str | None = None  # github: REST API base
    # github: the variable holding the token that writes there (None: GITHUB_TOKEN), and
    # the git-index destination that lists its wheels (None: an index on Pages)
    token_secret: str | None = None
    index: str | None = None
    bucket: str | None = None  # s3: the bucket, its key prefix, its API and region
    prefix: str | None = None
    endpoint: str | None = None
    region: str | None = None

    @classmethod
    def of(cls, cell: Cell) -> DestinationRef:
        """The cell's destination as the manifest records it: what every destination has,
        and what its kind records of itself for this release (its tag, its bucket...)."""
        destination = cell.destination
        return cls(
            name=destination.name,
            kind=destination.kind,
            index_url=destination.index_url,
            max_file_size=destination.max_file_size,
            max_project_size=destination.max_project_size,
            **destination.recorded(cell.project.version),
        )


@dataclass(frozen=True, kw_only=True)
class IndexRef:
    """A destination that lists other destinations' wheels (a git index: the `index` of a
    github destination), as the manifest records it: what publish needs to write it."""

    name: str
    kind: str  # a kind of release.matrix.INDEX_KINDS
    index_url: str  # where pip reads it
    url: str | None = None  # git-index: the remote, its branch and the directory in it
    repository: str | None = None
    branch: str | None = None
    directory: str | None = None
    token_secret: str | None = None  # the variable holding the token that writes there

    @classmethod
    def of(cls, index: IndexDestination, version: Version) -> IndexRef:
        return cls(
            name=index.name, kind=index.kind, index_url=index.index_url, **index.recorded(version)
        )


def index_refs(
    indexes: Mapping[str, IndexDestination], wheels: Iterable[WheelEntry], version: str
) -> tuple[IndexRef, ...]:
    """The indexes that list the destinations of `wheels`, as the manifest records them."""
    named = {w.destination.index for w in wheels if w.destination.index is not None}
    return tuple(
        IndexRef.of(indexes[name], Version(version)) for name in sorted(named) if name in indexes
    )


@dataclass(frozen=True, kw_only=True)
class WheelEntry:
    cell: str  # "12.9-x86_64"
    cuda: str
    arch: str
    filename: str
    version: str
    local_label: str | None
    size: int
    sha256: str
    sms: tuple[str, ...]  # found in the fatbins, not what was asked for
    ptx: str | None
    toolchain: Mapping[str, str]
    destination: DestinationRef
    nccl: str | None = None  # "nvidia-nccl-cu12==2.30.7"
    # bytes of each target's device code, uncompressed (`sm_90`, `ptx_100`); empty in a
    # manifest written before they were measured
    device_bytes: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(
        cls,
        cell: Cell,
        *,
        filename: str,
        size: int,
        sha256: str,
        sms: tuple[str, ...],
        ptx: str | None,
        toolchain: Mapping[str, str],
        device_bytes: tuple[tuple[str, int], ...] = (),
    ) -> WheelEntry:
        """A cell's entry: what the cell fixes (names, versions, destination, NCCL pin)
        and what its wheel was found to hold."""
        return cls(
            cell=cell.id,
            cuda=str(cell.cuda),
            arch=cell.arch,
            filename=filename,
            version=str(cell.version),
            local_label=cell.local_label,
            size=size,
            sha256=sha256,
            sms=sms,
            ptx=ptx,
            toolchain=dict(toolchain),
            destination=DestinationRef.of(cell),
            nccl=nccl_requirement(cell.cuda.major, cell.nccl) if cell.nccl else None,
            device_bytes=device_bytes,
        )


@dataclass(frozen=True, kw_only=True)
class SdistEntry:
    """The project's source distribution: built once per release, for the PyPI destination
    of the default variant only (a local label never applies to it)."""

    filename: str  # "k3_kernels-0.1.0.tar.gz" (PEP 625)
    version: str
    size: int
    sha256: str
    destination: DestinationRef


def sdist_cell_of(cells: Iterable[Cell]) -> Cell | None:
    """The cell whose build makes the release's sdist and whose destination gets it: the
    first of the default variant (no local label, a PyPI destination); None where every
    PyPI cell has a local label (an sdist has none, and PyPI takes one a version)."""
    return next((c for c in cells if c.local_label is None and c.destination.TAKES_SDIST), None)


def sdist_filename(project: str, version: str) -> str:
    """PEP 625's name: `k3_kernels-0.1.0.tar.gz`."""
    return f"{canonicalize_name(project).replace('-', '_')}-{version}{SDIST_SUFFIX}"


@dataclass(frozen=True, kw_only=True)
class Manifest:
    project: str
    version: str  # the public version, without a local label
    wheels: tuple[WheelEntry, ...]
    nccl_files: tuple[str, ...] = field(default=())
    source_date_epoch: int | None = None  # the timestamp the wheels were built with
    commit: Commit | None = None  # a nightly build's commit; None for a release
    sdist: SdistEntry | None = None  # `release build --sdist`; not a wheel, not in `wheels`
    indexes: tuple[IndexRef, ...] = ()  # the indexes that list some of its destinations

    def by_filename(self) -> dict[str, WheelEntry]:
        return {w.filename: w for w in self.wheels}

    def merged(self, other: Manifest) -> Manifest:
        """This manifest with `other`'s wheels added; a cell in both takes `other`'s entry."""
        mine = (self.project, self.version, self.commit)
        if (other.project, other.version, other.commit) != mine:
            raise ConfigError(
                [
                    f"cannot merge manifests of {self.project} {self.version} and "
                    f"{other.project} {other.version}"
                ]
            )
        cells = {w.cell for w in other.wheels}
        wheels = tuple(w for w in self.wheels if w.cell not in cells) + other.wheels
        indexes = {i.name: i for i in (*self.indexes, *other.indexes)}
        files = tuple(sorted(set(self.nccl_files) | set(other.nccl_files)))
        epoch = other.source_date_epoch
        if epoch is None:
            epoch = self.source_date_epoch
        return Manifest(
            project=self.project,
            version=self.version,
            wheels=wheels,
            nccl_files=files,
            source_date_epoch=epoch,
            commit=self.commit or other.commit,
            sdist=other.sdist or self.sdist,
            indexes=tuple(indexes[name] for name in sorted(indexes)),
        )


def to_json(manifest: Manifest) -> dict[str, Any]:
    nightly = manifest.commit
    return {
        "schema": SCHEMA_VERSION,
        "project": manifest.project,
        "version": manifest.version,
        # a nightly's commit only, so that a release's manifest stays as it was
        **({"nightly": {"commit": nightly.sha, "time": nightly.time}} if nightly else {}),
        "source_date_epoch": manifest.source_date_epoch,
        "nccl_files": list(manifest.nccl_files),
        "wheels": [
            {
                "cell": w.cell,
                "cuda": w.cuda,
                "arch": w.arch,
                "filename": w.filename,
                "version": w.version,
                "local_label": w.local_label,
                "size": w.size,
                "sha256": w.sha256,
                "sms": list(w.sms),
                "ptx": w.ptx,
                "toolchain": dict(w.toolchain),
                "nccl": w.nccl,
                "device_bytes": dict(w.device_bytes),
                "destination": _destination_json(w.destination),
            }
            for w in sorted(manifest.wheels, key=lambda w: w.filename)
        ],
        # only where one was built, so that a manifest of wheels alone stays as it was
        **({"sdist": _sdist_json(manifest.sdist)} if manifest.sdist else {}),
        # only where a destination is listed by one, likewise
        **({"indexes": [_ref_json(i) for i in manifest.indexes]} if manifest.indexes else {}),
    }


def _destination_json(destination: DestinationRef) -> dict[str, Any]:
    return {k: v for k, v in vars(destination).items() if v is not None or k in ("index_url",)}


def _ref_json(index: IndexRef) -> dict[str, Any]:
    return {k: v for k, v in vars(index).items() if v is not None}


def _sdist_json(sdist: SdistEntry) -> dict[str, Any]:
    return {**asdict(sdist), "destination": _destination_json(sdist.destination)}


SHA256_HEX = re.compile(r"[0-9a-f]{64}")  # a sha256 as every record writes it (fullmatch)
_TARGET_LABEL = re.compile(r"(sm|ptx)_[0-9]{2,3}[af]?")
_NCCL_FILE = re.compile(r"cu[0-9]{1,3}(-constraints|-reinstall)?\.txt")


def _require(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        name = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ValueError(f"{where}.{key}: missing or not {name}")
    return value


def _optional(data: Mapping[str, Any], key: str, where: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{where}.{key}: not a string")
    return value


def _strings(data: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    values = _require(data, key, list, where)
    if not all(isinstance(v, str) for v in values):
        raise ValueError(f"{where}.{key}: not a list of strings")
    return tuple(values)


def _filename(data: Mapping[str, Any], where: str) -> str:
    """A wheel filename, and nothing that could name a file outside the dist directory."""
    name: str = _require(data, "filename", str, where)
    if not is_wheel_name(name):
        raise ValueError(f"{where}.filename: {name[:80]!r} is not a wheel filename") from None
    if "/" in name or "\\" in name or name.startswith("."):
        raise ValueError(f"{where}.filename: {name[:80]!r} is not a plain file name")
    return name


_DESTINATION_TEXT = (
    *("repository_url", "repository", "tag", "api_url", "index_url", "token_secret", "index"),
    *("bucket", "prefix", "endpoint", "region"),
)


def _destination(raw: Mapping[str, Any], where: str) -> DestinationRef:
    dest = _require(raw, "destination", dict, where)
    where = f"{where}.destination"
    kind = dest.get("kind")
    value_type = KINDS.get(kind) if isinstance(kind, str) else None
    if value_type is None:
        raise ValueError(f"{where}.kind: {str(kind)[:20]!r} is not {kinds_text()}")
    destination = DestinationRef(
        name=_require(dest, "name", str, where),
        kind=str(kind),
        max_file_size=_require(dest, "max_file_size", int, where),
        max_project_size=_project_limit(dest, value_type.DEFAULT_PROJECT_SIZE, where),
        **{k: _optional(dest, k, where) for k in _DESTINATION_TEXT},
    )
    if problem := destination_name_problem(destination.name):
        raise ValueError(f"{where}.name: {problem}")
    needs = value_type.RECORD_NEEDS
    if not all(getattr(destination, key) for key in needs):
        raise ValueError(f"{where}: {kind} needs {' and '.join(needs)}")
    secret = destination.token_secret
    if secret is not None and (problem := token_secret_problem(secret)) is not None:
        raise ValueError(f"{where}.token_secret: {problem}")
    for key in ("max_file_size", "max_project_size"):
        size = getattr(destination, key)
        if size is not None and not 0 < size < 2**63:
            raise ValueError(f"{where}.{key}: {str(size)[:20]} is not a size")
    for key in _DESTINATION_TEXT:
        text = getattr(destination, key)
        if text is not None and (not text.isprintable() or len(text) > 4096):
            raise ValueError(f"{where}.{key}: {shown(text, 24)} holds a control character")
    if destination.repository and (problem := repository_problem(destination.repository)):
        raise ValueError(f"{where}.repository: {destination.repository[:40]!r}: {problem}")
    if destination.tag is not None and not is_ref_name(destination.tag):
        raise ValueError(f"{where}.tag: {destination.tag[:40]!r} is not a git tag's name")
    for key in ("api_url", "index_url", "repository_url", "endpoint"):
        url = getattr(destination, key)
        if url is not None and (problem := url_shape_problem(url)):
            raise ValueError(f"{where}.{key}: {shown(url, 40)} {problem}")
        if url is not None and has_credentials(url):
            raise ValueError(f"{where}.{key}: holds credentials, which no record may hold")
    return destination


def _project_limit(dest: Mapping[str, Any], default: int | None, where: str) -> int | None:
    """The project size limit; a manifest written before it was recorded gets its kind's
    default (PyPI's)."""
    if "max_project_size" in dest:
        limit: int = _require(dest, "max_project_size", int, where)
        return limit
    return default


def _digest_and_size(raw: dict[str, object], where: str) -> tuple[str, int]:
    """A file's `sha256` (64 lower-case hex digits) and `size` (not negative)."""
    sha256: str = _require(raw, "sha256", str, where)
    if not SHA256_HEX.fullmatch(sha256):
        raise ValueError(f"{where}.sha256: not 64 lower-case hex digits")
    size: int = _require(raw, "size", int, where)
    if size < 0:
        raise ValueError(f"{where}.size: negative")
    return sha256, size


def _wheel(raw: object, where: str) -> WheelEntry:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: not an object")
    toolchain = _require(raw, "toolchain", dict, where)
    if not all(isinstance(v, str | int | float) for v in toolchain.values()):
        raise ValueError(f"{where}.toolchain: values must be strings")
    sha256, size = _digest_and_size(raw, where)
    entry = WheelEntry(
        cell=_require(raw, "cell", str, where),
        cuda=_require(raw, "cuda", str, where),
        arch=_require(raw, "arch", str, where),
        filename=_filename(raw, where),
        version=_require(raw, "version", str, where),
        local_label=_optional(raw, "local_label", where),
        size=size,
        sha256=sha256,
        sms=_strings(raw, "sms", where),
        ptx=_optional(raw, "ptx", where),
        toolchain={str(k): str(v) for k, v in toolchain.items()},
        destination=_destination(raw, where),
        nccl=_optional(raw, "nccl", where),
        device_bytes=_device_bytes(raw, where),
    )
    _check_wheel_fields(entry, where)
    return entry


_CUDA = re.compile(r"[0-9]{1,3}\.[0-9]{1,3}")
_ARCH = re.compile(r"[a-z0-9_]{1,32}")
_TARGET = re.compile(r"[0-9]{2,3}[af]?")  # an SM or a PTX target as the records write it


def _check_wheel_fields(entry: WheelEntry, where: str) -> None:
    """What a wheel's entry says of itself that its filename also says agrees with it, and
    the rest has the shape the build writes (a path, a URL or a line of text in a CUDA
    version, an arch or an SM would reach file names, URLs and messages)."""
    name = WheelName.parse(entry.filename)
    try:
        version = Version(entry.version)
    except InvalidVersion:
        raise ValueError(f"{where}.version: {entry.version[:40]!r} is not a version") from None
    if version != name.version:
        raise ValueError(
            f"{where}.version: {entry.version[:40]} is not its filename's {name.version}"
        )
    if entry.local_label != name.version.local:
        raise ValueError(
            f"{where}.local_label: {str(entry.local_label)[:40]} is not its filename's "
            f"{name.version.local}"
        )
    if not _CUDA.fullmatch(entry.cuda):
        raise ValueError(f"{where}.cuda: {entry.cuda[:20]!r} is not a CUDA version (13.0)")
    if not _ARCH.fullmatch(entry.arch):
        raise ValueError(f"{where}.arch: {entry.arch[:20]!r} is not a CPU architecture")
    for target in (*entry.sms, *([entry.ptx] if entry.ptx is not None else [])):
        if not _TARGET.fullmatch(target):
            raise ValueError(f"{where}: {target[:20]!r} is not an SM (90, 90a, 100f)")


def _device_bytes(raw: Mapping[str, Any], where: str) -> tuple[tuple[str, int], ...]:
    found = raw.get("device_bytes", {})
    if not isinstance(found, dict):
        raise ValueError(f"{where}.device_bytes: not an object")
    for label, size in found.items():
        if not _TARGET_LABEL.fullmatch(str(label)):
            raise ValueError(f"{where}.device_bytes: {str(label)[:20]!r} is not sm_N or ptx_N")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ValueError(f"{where}.device_bytes.{label}: not a number of bytes")
    return tuple((str(k), int(v)) for k, v in found.items())


def from_json(data: object) -> Manifest:
    """Parse a manifest; raise ValueError with the key path on anything malformed."""
    if not isinstance(data, dict):
        raise ValueError("the manifest is not a JSON object")
    if data.get("schema") != SCHEMA_VERSION:
        raise ValueError(f"schema {str(data.get('schema'))[:20]!r} is not {SCHEMA_VERSION}")
    raw_wheels = _require(data, "wheels", list, "manifest")
    wheels = tuple(_wheel(raw, f"wheels[{index}]") for index, raw in enumerate(raw_wheels))
    files = _strings(data, "nccl_files", "manifest") if "nccl_files" in data else ()
    for name in files:
        if not _NCCL_FILE.fullmatch(name):
            raise ValueError(f"manifest.nccl_files: {name[:40]!r} is not an NCCL file name")
    epoch = data.get("source_date_epoch")
    if epoch is not None and (not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0):
        raise ValueError("manifest.source_date_epoch: not a number of seconds")
    commit = _commit(data.get("nightly"))
    names = [w.filename for w in wheels]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"manifest: {twice[0]} is listed more than once")
    indexes = _indexes(data.get("indexes"), wheels)
    project: str = _require(data, "project", str, "manifest")
    for number, wheel in enumerate(wheels):
        distribution = WheelName.parse(wheel.filename).distribution
        if canonicalize_name(distribution) != canonicalize_name(project):
            raise ValueError(f"wheels[{number}].filename: not a wheel of {project[:40]}")
    return Manifest(
        project=project,
        version=_require(data, "version", str, "manifest"),
        wheels=wheels,
        nccl_files=files,
        source_date_epoch=epoch,
        commit=commit,
        sdist=_sdist(data.get("sdist")),
        indexes=indexes,
    )


def _indexes(raw: object, wheels: Iterable[WheelEntry]) -> tuple[IndexRef, ...]:
    """The `indexes` section: one entry of a kind that lists wheels for each `index` a
    wheel's destination names."""
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise ValueError("manifest.indexes: not a list")
    found: dict[str, IndexRef] = {}
    for number, item in enumerate(raw):
        where = f"manifest.indexes[{number}]"
        if not isinstance(item, dict):
            raise ValueError(f"{where}: not an object")
        kind = item.get("kind")
        value_type = INDEX_KINDS.get(kind) if isinstance(kind, str) else None
        if value_type is None:
            raise ValueError(f"{where}.kind: {str(kind)[:20]!r} is not {' or '.join(INDEX_KINDS)}")
        index = IndexRef(
            name=_require(item, "name", str, where),
            kind=str(kind),
            index_url=_require(item, "index_url", str, where),
            **{k: _optional(item, k, where) for k in _INDEX_TEXT},
        )
        if problem := destination_name_problem(index.name):
            raise ValueError(f"{where}.name: {problem}")
        if not all(getattr(index, key) is not None for key in value_type.RECORD_NEEDS):
            raise ValueError(f"{where}: {kind} needs {' and '.join(value_type.RECORD_NEEDS)}")
        record = {key: getattr(index, key) for key in ("index_url", *_INDEX_TEXT)}
        if wrong := recorded_index_problem(record):
            raise ValueError(f"{where}.{wrong[0]}: {wrong[1]}")
        found[index.name] = index
    for wheel in wheels:
        named = wheel.destination.index
        if named is not None and named not in found:
            raise ValueError(
                f"{wheel.filename}: its destination is listed by {named[:40]!r}, which "
                "manifest.indexes does not record"
            )
    return tuple(found[name] for name in sorted(found))


_INDEX_TEXT = ("url", "repository", "branch", "directory", "token_secret")


_SDIST_NAME = re.compile(r"[A-Za-z0-9_.]+-[A-Za-z0-9_.!]+\.tar\.gz")


def _sdist(raw: object) -> SdistEntry | None:
    """The `sdist` section: a plain `.tar.gz` name, its digest and size, and PyPI."""
    if raw is None:
        return None
    where = "manifest.sdist"
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: not an object")
    name: str = _require(raw, "filename", str, where)
    if not _SDIST_NAME.fullmatch(name) or name.startswith("."):
        raise ValueError(f"{where}.filename: {name[:80]!r} is not an sdist filename")
    sha256, size = _digest_and_size(raw, where)
    destination = _destination(raw, where)
    if not KINDS[destination.kind].TAKES_SDIST:
        raise ValueError(f"{where}.destination.kind: an sdist goes to PyPI only")
    return SdistEntry(
        filename=name,
        version=_require(raw, "version", str, where),
        size=size,
        sha256=sha256,
        destination=destination,
    )


def _commit(raw: object) -> Commit | None:
    """A nightly manifest's `nightly` section: the commit it was built from."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError("manifest.nightly: not an object")
    sha, time = raw.get("commit"), raw.get("time")
    if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{40}", sha):
        raise ValueError("manifest.nightly.commit: not a 40-digit commit id")
    if not isinstance(time, int) or isinstance(time, bool) or time <= 0:
        raise ValueError("manifest.nightly.time: not a number of seconds")
    return Commit(sha=sha, time=time)


def read_manifest(path: Path) -> Manifest:
    data = read_json(path, "manifest", "run `release build` first, or pass --dist DIR")
    try:
        return from_json(data)
    except ValueError as error:
        raise ConfigError(
            [f"{path}: {error}"], hint="rebuild with `release build` to regenerate it"
        ) from None


def read_manifests(paths: Iterable[Path]) -> Manifest:
    """Several manifests (one per build job) merged into one."""
    merged: Manifest | None = None
    for path in paths:
        manifest = read_manifest(path)
        merged = manifest if merged is None else merged.merged(manifest)
    if merged is None:
        raise ConfigError(["no manifest given"], hint="run `release build` first")
    return merged


def write_manifest(manifest: Manifest, path: Path) -> None:
    write_atomic(path, json_text(to_json(manifest)).encode())
