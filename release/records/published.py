"""`published.json`: where every built file went and where it is downloadable, written by
`release publish` after each destination and read by `release verify` and `release pins`.

The record holds URLs; sizes and sha256 always come from the manifest (what was built),
never from the record. Companions (PEP 658 sidecars, NCCL files, the release manifest)
are recorded with the sha256 of the bytes that were sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from release.credentials import mask, written_url_problem
from release.errors import ConfigError, shown
from release.fsutil import json_document, json_text, read_document, read_json, write_atomic
from release.records.manifest import SHA256_HEX, Manifest, WheelEntry
from release.records.release_manifest import ReleaseWheel

RECORD_NAME = "published.json"
RECORD_SCHEMA = 1


@dataclass(frozen=True, kw_only=True)
class PublishedFile(ReleaseWheel):
    """A wheel with the fields the release manifest records, and where it is downloadable:
    its URL and the index pip finds it in. `size` is -1 where no size is known (an index
    page that lists none)."""

    url: str
    index_url: str | None

    @classmethod
    def from_entry(
        cls, entry: WheelEntry, *, url: str, index_url: str | None, attested: bool = False
    ) -> PublishedFile:
        """The manifest's wheel `entry`, downloadable at `url`."""
        wheel = ReleaseWheel.of(entry, attested=attested)
        return cls(**asdict(wheel), url=url, index_url=index_url)


@dataclass(frozen=True, kw_only=True)
class PublishedCompanion:
    filename: str
    sha256: str
    size: int
    url: str
    of: str  # the wheel it belongs to, or "release"
    purpose: str


SDIST_PURPOSE = "sdist"


@dataclass(frozen=True, kw_only=True)
class Published:
    project: str
    version: str
    files: tuple[PublishedFile, ...]
    companions: tuple[PublishedCompanion, ...] = field(default=())
    # what the manifest records for a destination the record lists files of, and the record
    # lacks: publish sends it with them, so it was never published (verify fails it)
    unlisted: tuple[str, ...] = field(default=())


def read_record(path: Path, manifest: Manifest) -> Published:
    """The publish record, checked against the manifest (the manifest's sha256 wins)."""
    data = read_json(path, "publish record", "run `release publish` first (it writes it)")
    built = manifest.by_filename()
    files: list[PublishedFile] = []
    seen: set[str] = set()
    problems = []
    raw_files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(raw_files, list):
        raise ConfigError(
            [f"{path}: 'files' is missing or not a list"],
            hint="run `release publish` again to rewrite it",
        )
    for index, raw in enumerate(raw_files):
        where = f"{path}: files[{index}]"
        if not isinstance(raw, dict):
            problems.append(f"{where}: not an object")
            continue
        name, url, index_url = raw.get("filename"), raw.get("url"), raw.get("index_url")
        if not isinstance(name, str) or name not in built:
            problems.append(f"{where}: {shown(name)} is not in the manifest")
            continue
        if (bad := written_url_problem(url)) is not None:
            problems.append(f"{where}.url: {shown(url)} {bad}")
            continue
        if index_url is not None and (bad := written_url_problem(index_url)) is not None:
            problems.append(f"{where}.index_url: {shown(index_url)} {bad}")
            continue
        if name in seen:
            problems.append(f"{where}: {name} is listed twice")
            continue
        seen.add(name)
        attested = raw.get("attested") is True
        files.append(
            PublishedFile.from_entry(
                built[name], url=str(url), index_url=index_url, attested=attested
            )
        )
    companions = _companions(data.get("companions", []), path, problems)
    problems += _sdist_problems(companions, manifest, path)
    if problems:
        urls = any(p.startswith(f"{path}: files[") and "url: " in p for p in problems)
        raise ConfigError(
            problems,
            hint="its URLs are the destinations' answers when `release publish` ran: check "
            "the release's files there, then run `release publish` again to rewrite it"
            if urls
            else "the record and the manifest are from different builds",
        )
    if not files:
        raise ConfigError([f"{path}: lists no files"], hint="run `release publish` first")
    return Published(
        project=manifest.project,
        version=manifest.version,
        files=tuple(files),
        companions=tuple(companions),
        unlisted=_unlisted_sdist(manifest, files, companions),
    )


def _sdist_problems(
    companions: Sequence[PublishedCompanion], manifest: Manifest, path: Path
) -> list[str]:
    """An sdist the record lists is the manifest's, with its size and sha256."""
    sdist = manifest.sdist
    recorded = (sdist.filename, sdist.sha256, sdist.size) if sdist is not None else None
    return [
        f"{path}: the sdist {c.filename} is not the one the manifest records"
        for c in companions
        if c.purpose == SDIST_PURPOSE and (c.filename, c.sha256, c.size) != recorded
    ]


def _unlisted_sdist(
    manifest: Manifest, files: Sequence[PublishedFile], companions: Sequence[PublishedCompanion]
) -> tuple[str, ...]:
    """The manifest's sdist, where the record lists wheels of its destination but not it."""
    sdist = manifest.sdist
    if sdist is None or sdist.destination.name not in {f.destination for f in files}:
        return ()
    if any(c.purpose == SDIST_PURPOSE and c.filename == sdist.filename for c in companions):
        return ()
    return (sdist.filename,)


def _companions(raw_list: object, path: Path, problems: list[str]) -> list[PublishedCompanion]:
    if not isinstance(raw_list, list):
        problems.append(f"{path}: 'companions' is not a list")
        return []
    out = []
    for index, raw in enumerate(raw_list):
        where = f"{path}: companions[{index}]"
        if not isinstance(raw, dict):
            problems.append(f"{where}: not an object")
            continue
        name, url, sha256, size = (raw.get(k) for k in ("filename", "url", "sha256", "size"))
        if not isinstance(name, str) or "/" in name or written_url_problem(url) is not None:
            problems.append(f"{where}: needs a file name and an http(s) URL (no credentials)")
            continue
        if not isinstance(sha256, str) or not SHA256_HEX.fullmatch(sha256):
            problems.append(f"{where}.sha256: not 64 hex digits")
            continue
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            problems.append(f"{where}.size: not a size")
            continue
        out.append(
            PublishedCompanion(
                filename=name,
                sha256=sha256,
                size=size,
                url=str(url),
                of=str(raw.get("of", "")),
                purpose=str(raw.get("purpose", "")),
            )
        )
    return out


def with_overrides(published: Published, overrides: Mapping[str, str]) -> Published:
    """`--index-url NAME=URL` (or a label: `cu129=URL`) replaces where pip looks."""
    if not overrides:
        return published
    files = tuple(
        replace(
            f,
            index_url=overrides.get(f.destination)
            or overrides.get(f.local_label or "")
            or f.index_url,
        )
        for f in published.files
    )
    return replace(published, files=files)


def check_overrides(overrides: Mapping[str, str], releases: Sequence[Published]) -> None:
    """ConfigError naming each `--index-url NAME=URL` whose NAME is no destination or local
    label of `releases` (an override that would change nothing), with the names there are."""
    known = {f.destination for r in releases for f in r.files}
    known |= {f.local_label for r in releases for f in r.files if f.local_label}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ConfigError(
            [f"--index-url {shown(name)}=...: no destination or local label of that name"
             for name in unknown],
            hint=f"the release has: {', '.join(sorted(known)) or 'no files'}",
        )  # fmt: skip


def write_record(
    path: Path,
    manifest: Manifest,
    files: Sequence[PublishedFile],
    companions: Sequence[PublishedCompanion],
    secrets: Sequence[str],
) -> None:
    """Write `published.json`, merged with an earlier record of the same version (another
    `--only` run) by filename. Each file's cell is the manifest's."""
    previous: dict[str, Any] = {}
    previous_companions: dict[str, Any] = {}
    if path.exists():
        try:
            data = json_document(read_document(path), str(path))
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict) and (data.get("project"), data.get("version")) == (
            manifest.project,
            manifest.version,
        ):
            previous = _by_name(data.get("files"))
            previous_companions = _by_name(data.get("companions"))
    cells = manifest.by_filename()
    previous.update({f.filename: _file_json(f, cells[f.filename].cell) for f in files})
    previous_companions.update({c.filename: asdict(c) for c in companions})
    record = {
        "schema": RECORD_SCHEMA,
        "project": manifest.project,
        "version": manifest.version,
        "files": [previous[name] for name in sorted(previous)],
        "companions": [previous_companions[name] for name in sorted(previous_companions)],
    }
    write_atomic(path, mask(json_text(record), secrets).encode())


def _file_json(file: PublishedFile, cell: str) -> dict[str, Any]:
    """One of the record's 'files', its keys in the order they are written."""
    return {
        "filename": file.filename,
        "cell": cell,
        "arch": file.arch,
        "local_label": file.local_label,
        "sha256": file.sha256,
        "size": file.size,
        "destination": file.destination,
        "kind": file.kind,
        "url": file.url,
        "index_url": file.index_url,
        "attested": file.attested,
    }


def _by_name(items: object) -> dict[str, Any]:
    if not isinstance(items, list):
        return {}
    return {
        item["filename"]: item
        for item in items
        if isinstance(item, dict) and isinstance(item.get("filename"), str)
    }
