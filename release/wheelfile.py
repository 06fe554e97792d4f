"""What a wheel says about itself: its .dist-info, METADATA (read with `packaging`) and WHEEL.

One reader for every stage that looks inside a wheel: the inspection after a build, the
dist/ check before plan, publish and verify, PyPI's refusal rules, and the PEP 658
`.metadata` sidecar. `wheel_facts` works on bytes; `read_wheel` on a file; `record_hash` is
the hash of a member as RECORD writes it.

The one writer of a wheel changed after its build is release.wheelrewrite.

A wheel's filename has one owner, `WheelName`: every module composes, parses, relabels and
retags a name through it, so that a change to the name (a variant label, a build tag) is one
change here. The parsers of what comes from outside (a filename, a version a wheel states)
never raise packaging's errors: `WheelName.parse` and `readable_wheel` raise NotAWheel, which
says why in a few words for the caller to put beside the path or URL; `version_or_none`
gives None.
"""

from __future__ import annotations

import base64
import csv
import email.parser
import hashlib
import io
import math
import re
import string
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.metadata import ExceptionGroup as MetadataErrors
from packaging.metadata import InvalidMetadata, Metadata
from packaging.tags import Tag, parse_tag
from packaging.utils import (
    BuildTag,
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import Version

from release.errors import FileError, shown
from release.ziparchive import MAX_MEMBERS, MEMBER_ERRORS, zip_problem

WHEEL_SUFFIX = ".whl"
# The bytes of a .dist-info file read whole (METADATA, WHEEL, RECORD): a METADATA that
# inflates to gigabytes is damage, not a wheel.
MAX_DIST_INFO_FILE = 64 * 2**20  # RECORD (torch's is about 2 MiB), read as CSV rows
# METADATA and WHEEL, parsed as e-mail headers (about ten times their size in memory, in
# each of audit's workers); the longest real ones, a README as the description, are < 1 MiB
MAX_HEADERS_FILE = 8 * 2**20
# ... and header lines, each an object of its own there (2 million empty ones in 8 MiB took
# 530 MB to parse): torch's METADATA has about 60, a package of many extras a few hundred
MAX_HEADER_LINES = 10_000
# lines folded into headers (an old Description header holds its README: thousands of lines)
MAX_FOLDED_LINES = 100_000
LISTED_RECORD_PROBLEMS = 20
# RECORD's characters in a row, its lines together (a path is at most 4,096 bytes): the csv
# module split one line of 67 million commas into as many fields, 866 MB
MOST_RECORD_ROW = 16 * 2**10
# A filename's tags, its compressed tag sets multiplied out (packaging makes each a Tag: 250
# of each part took gigabytes); a real one has a few (py2.py3, two manylinux spellings)
MOST_NAME_TAGS = 1_000


class NotAWheel(ValueError):
    """Why a file or a filename is not a wheel, in a few words (its `str()`), without the
    name: the caller says which path, asset or link it is. `detail` is the longer text
    where there is one (packaging's message on a filename)."""

    def __init__(self, reason: str, *, detail: str | None = None) -> None:
        super().__init__(reason)
        self.detail = detail or reason


@dataclass(frozen=True, kw_only=True)
class WheelName:
    """A wheel's filename, the one place it is composed and taken apart:
    `{distribution}-{version}(-{build})?-{python}-{abi}-{platform}.whl` (PEP 427). The tag
    parts keep their spelling in the name (a compressed tag set: `manylinux_2_28_x86_64.
    manylinux2014_x86_64`); `tags` expands them. A local label or a build tag is a change
    of this value (`relabelled`, `with_version`, `retagged`, `with_build`), never of a
    string."""

    distribution: str  # as the filename spells it: k3_kernels
    version: Version
    python: str
    abi: str
    platform: str
    build: BuildTag = ()

    @classmethod
    def parse(cls, filename: str) -> WheelName:
        """The parts of `filename`; NotAWheel where it is not a .whl file, or says which
        part of the name is wrong (in packaging's words: `invalid version`, `wrong number
        of parts`, ...; its whole message is the error's `detail`)."""
        if not filename.endswith(WHEEL_SUFFIX):
            raise NotAWheel(f"not a {WHEEL_SUFFIX} file")
        if not filename.isprintable() or " " in filename:
            raise NotAWheel("not a valid wheel filename (a space or a control character)")
        if odd := next((c for c in filename if c not in WHEEL_NAME_CHARACTERS), None):
            # packaging takes any tag text: a name is put into paths, commands and pages
            raise NotAWheel(f"not a valid wheel filename (a character no wheel name has: {odd!r})")
        tags = math.prod(p.count(".") + 1 for p in filename[:-4].split("-")[-3:])
        if tags > MOST_NAME_TAGS:
            raise NotAWheel(f"not a valid wheel filename ({tags} tags, more than {MOST_NAME_TAGS})")
        try:
            _, version, build, _ = parse_wheel_filename(filename)
        except InvalidWheelFilename as error:
            found = _PACKAGING_REASON.match(str(error))
            reason = found["reason"] if found else str(error).split(":", 1)[0].lower()
            raise NotAWheel(f"not a valid wheel filename ({reason})", detail=str(error)) from None
        except ValueError as error:  # int() of a number of more digits than Python converts
            reason = "a number too long to read"
            raise NotAWheel(f"not a valid wheel filename ({reason})", detail=str(error)) from None
        parts = filename[: -len(WHEEL_SUFFIX)].split("-")
        python, abi, platform = parts[-3:]
        return cls(
            distribution=parts[0], version=version, python=python, abi=abi, platform=platform,
            build=build,
        )  # fmt: skip

    @classmethod
    def compose(
        cls, project: str, version: Version, *, python: str, abi: str, platform: str
    ) -> WheelName:
        """The name of a wheel of `project` (any spelling: `k3-kernels`) at `version`."""
        distribution = canonicalize_name(project).replace("-", "_")
        return cls(
            distribution=distribution, version=version, python=python, abi=abi, platform=platform
        )

    @property
    def filename(self) -> str:
        build = f"-{self.build[0]}{self.build[1]}" if self.build else ""
        tags = f"{self.python}-{self.abi}-{self.platform}"
        return f"{self.distribution}-{self.version}{build}-{tags}{WHEEL_SUFFIX}"

    def __str__(self) -> str:
        return self.filename

    @property
    def project(self) -> NormalizedName:
        """The distribution's normalized name (`k3-kernels`)."""
        return canonicalize_name(self.distribution)

    @property
    def tags(self) -> frozenset[Tag]:
        return parse_tag(f"{self.python}-{self.abi}-{self.platform}")

    @property
    def platforms(self) -> tuple[str, ...]:
        """Its platform tags, in the name's order."""
        return tuple(self.platform.split("."))

    @property
    def local_label(self) -> str | None:
        return self.version.local

    @property
    def unversioned(self) -> tuple[str, ...]:
        """What stays the same from one version of this wheel to the next: the
        distribution and the python, abi and platform tags (a build tag numbers the
        rebuilds of one version: the next version's wheel starts without one)."""
        return (self.distribution, self.python, self.abi, self.platform)

    def is_pip_same(self, other: WheelName) -> bool:
        """Whether pip takes `other` for a build of this wheel, whatever the spelling: the
        same project, the same version by value and a tag in common (it then installs the
        highest build tag)."""
        return (
            other.project == self.project
            and other.version == self.version
            and bool(other.tags & self.tags)
        )

    def with_version(self, version: Version) -> WheelName:
        return replace(self, version=version)

    def relabelled(self, label: str | None) -> WheelName:
        """This wheel with the local label `label` (None: the plain version)."""
        public = self.version.public
        return self.with_version(Version(f"{public}+{label}" if label else public))

    def retagged(self, platform: str) -> WheelName:
        """This wheel with the platform tag(s) `platform` (`manylinux_2_28_x86_64`)."""
        return replace(self, platform=platform)

    def with_build(self, build: BuildTag) -> WheelName:
        return replace(self, build=build)


# PEP 427's parts: a name and version escaped to [A-Za-z0-9_.] (a local label's +, an
# epoch's !), tags of [A-Za-z0-9_.], joined by -
WHEEL_NAME_CHARACTERS = frozenset(string.ascii_letters + string.digits + "_.+!-")
_PACKAGING_REASON = re.compile(r"Invalid wheel filename \((?P<reason>[^)]*)\)")


def is_wheel_name(filename: str) -> bool:
    """Whether `filename` is a valid wheel filename."""
    try:
        WheelName.parse(filename)
    except NotAWheel:
        return False
    return True


def wheel_name_or_none(filename: str) -> WheelName | None:
    """`filename`'s parts, or None where it is not a valid wheel filename."""
    try:
        return WheelName.parse(filename)
    except NotAWheel:
        return None


def version_or_none(text: str) -> Version | None:
    """`text` as a PEP 440 version (the one a .dist-info folder or METADATA states), or None
    where it is not one."""
    try:
        return Version(text)
    except ValueError:  # InvalidVersion, or a number of more digits than Python converts
        return None


@dataclass(frozen=True, kw_only=True)
class WheelFacts:
    """What a wheel's .dist-info holds."""

    size: int
    unreadable: str | None = None  # why the file could not be read as a wheel
    dist_info: str | None = None
    metadata_name: str | None = None
    metadata_version: str | None = None
    has_metadata: bool = False
    has_record: bool = False
    has_wheel_file: bool = False
    metadata_problems: tuple[str, ...] = ()
    requires_python: str | None = None
    requires_dist: tuple[str, ...] = ()  # METADATA's Requires-Dist lines
    metadata: bytes | None = None  # the METADATA file's bytes (the PEP 658 sidecar)
    wheel_tags: tuple[str, ...] = ()  # the WHEEL file's `Tag:` lines
    root_is_purelib: str | None = None


def record_hash(data: bytes) -> str:
    """A member's hash as a wheel's RECORD holds it: `sha256=` and the digest in urlsafe
    base64 without padding."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def identity_problems(
    project: NormalizedName,
    version: Version,
    metadata_name: str | None,
    metadata_version: str | None,
) -> list[str]:
    """Where METADATA's Name and Version do not say what the filename says: the name as
    PEP 503 normalises it, the version by PEP 440 equality (`1.0` is `1.0.0`). pip refuses
    such a wheel; uv installs it."""
    problems = []
    if metadata_name is None or canonicalize_name(metadata_name) != project:
        problems.append(f"METADATA Name is {shown(metadata_name)}, the filename says {project}")
    if metadata_version is None or version_or_none(metadata_version) != version:
        problems.append(
            f"METADATA Version is {shown(metadata_version)}, the filename says {version}"
        )
    return problems


def tag_problems(tag_lines: Iterable[str], tags: frozenset[Tag]) -> list[str]:
    """Where the WHEEL file's `Tag:` lines are not the filename's tags."""
    problems: list[str] = []
    wheel_tags: set[Tag] = set()
    for text in tag_lines:
        parts = text.strip().split("-")
        if len(parts) != 3 or not all(parts):
            problems.append(f"WHEEL has the tag {shown(text.strip())}, not python-abi-platform")
            continue
        wheel_tags.add(Tag(*parts))
    if wheel_tags != set(tags):
        found, named = sorted(str(t) for t in wheel_tags), sorted(str(t) for t in tags)
        problems.append(
            f"WHEEL tags {shown(found, 200)} differ from the filename's {shown(named, 200)}"
        )
    return problems


def record_problems(archive: zipfile.ZipFile, dist_info: str) -> list[str]:
    """Where RECORD does not list every member with its hash and size, the first
    LISTED_RECORD_PROBLEMS said and the rest counted; each member is hashed as it streams
    out of the archive, never held whole."""
    name = f"{dist_info}/RECORD"
    try:
        if archive.getinfo(name).file_size > MAX_DIST_INFO_FILE:
            return [f"{name} is over {MAX_DIST_INFO_FILE // 2**20} MiB"]
    except KeyError:
        return [f"{name} is missing"]
    # read as it inflates, a line at a time (held whole as text it took four times its size)
    with archive.open(name) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="\n")
        taken = [0]  # a row's characters so far
        problems = _all_record_problems(archive, dist_info, _row_lines(text, taken), taken)
    if len(problems) <= LISTED_RECORD_PROBLEMS:
        return problems
    more = len(problems) - LISTED_RECORD_PROBLEMS
    return [*problems[:LISTED_RECORD_PROBLEMS], f"and {more} more RECORD problems"]


def _row_lines(text: io.TextIOWrapper, taken: list[int]) -> Iterator[str]:
    while line := text.readline(MOST_RECORD_ROW + 1):
        taken[0] += len(line)
        if taken[0] > MOST_RECORD_ROW:
            raise csv.Error(f"a row of more than {MOST_RECORD_ROW} characters")
        yield line


def _all_record_problems(
    archive: zipfile.ZipFile, dist_info: str, record: Iterable[str], taken: list[int]
) -> list[str]:
    problems: list[str] = []
    listed: dict[str, tuple[str, str]] = {}
    rows = 0
    try:
        for row in csv.reader(record):
            taken[0] = 0
            if not row:
                continue
            rows += 1
            if rows > MAX_MEMBERS:  # a row a member, and a zip of more members is refused
                return [f"{dist_info}/RECORD has more than {MAX_MEMBERS} rows"]
            if len(row) != 3:
                problems.append(f"RECORD row {shown(row)} does not have 3 fields")
                continue
            listed[row[0]] = (row[1], row[2])
    except csv.Error as error:  # a field over the csv module's limit, a bare carriage return
        return [f"{dist_info}/RECORD is not CSV ({error})"]
    names = {i.filename for i in archive.infolist() if not i.is_dir()}
    for name in sorted(names - set(listed)):
        problems.append(f"{name} is in the wheel but not in RECORD")
    for name, (digest, size) in sorted(listed.items()):
        if name == f"{dist_info}/RECORD":
            continue
        if name not in names:
            problems.append(f"RECORD lists {name}, which is not in the wheel")
            continue
        hashed, length = _streamed_hash(archive, name)
        if digest != hashed:
            problems.append(f"RECORD hash of {name} is wrong")
        if size != str(length):
            problems.append(f"RECORD size of {name} is {size}, the file has {length} bytes")
    return problems


def _streamed_hash(archive: zipfile.ZipFile, name: str) -> tuple[str, int]:
    """A member's hash as RECORD writes it, and its size, read in chunks."""
    digest = hashlib.sha256()
    size = 0
    with archive.open(name) as member:
        while chunk := member.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return "sha256=" + base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode(), size


def wheel_facts(data: bytes) -> WheelFacts:
    """Read the .dist-info of a wheel given as bytes."""
    return _read(io.BytesIO(data), len(data))


def read_wheel(path: Path) -> WheelFacts:
    """`wheel_facts` of the file at `path` (read in place); a file that cannot be read is
    `unreadable`."""
    try:
        size = path.stat().st_size
    except OSError as error:
        return WheelFacts(size=0, unreadable=f"cannot read {path.name}: {error.strerror}")
    return _read(path, size)


def readable_wheel(path: Path) -> tuple[WheelName, WheelFacts]:
    """The wheel file at `path`, named and read in place. NotAWheel where it is not a
    file, not a .whl file, not a valid wheel filename, not a zip archive whose members all
    read back, or has not exactly one .dist-info; FileError where it cannot be read at all."""
    if not path.is_file():
        raise NotAWheel("not a file" if path.exists() else "no such file or directory")
    name = WheelName.parse(path.name)
    try:
        with path.open("rb"):
            pass
    except OSError as error:
        raise FileError.of(error, "read") from None
    damage = zip_problem(path)
    if damage is not None:
        raise NotAWheel(damage)
    facts = read_wheel(path)
    if facts.unreadable:
        raise NotAWheel(facts.unreadable)
    return name, facts


def _read(source: Path | io.BytesIO, size: int) -> WheelFacts:
    try:
        with zipfile.ZipFile(source) as archive:
            names = archive.namelist()
            tops = {n.split("/", 1)[0] for n in names}
            dist_infos = sorted(top for top in tops if top.endswith(".dist-info"))
            if len(dist_infos) != 1:
                return WheelFacts(
                    size=size, unreadable=f"has {len(dist_infos)} .dist-info directories, not 1"
                )
            dist_info = dist_infos[0]
            present = set(names)
            metadata = _member(archive, present, f"{dist_info}/METADATA")
            wheel = _member(archive, present, f"{dist_info}/WHEEL")
            has_record = f"{dist_info}/RECORD" in present
    except (*MEMBER_ERRORS, OSError) as error:
        return WheelFacts(size=size, unreadable=f"not a readable zip file ({error})")
    for what, text in (("METADATA", metadata), ("WHEEL", wheel)):
        if (problem := header_lines_problem(text or b"")) is not None:
            return WheelFacts(size=size, unreadable=f"its {what} {problem}")
    wheel_headers = email.parser.BytesParser().parsebytes(wheel or b"", headersonly=True)
    facts = {
        "size": size,
        "dist_info": dist_info,
        "has_record": has_record,
        "has_wheel_file": wheel is not None,
        "wheel_tags": tuple(str(t).strip() for t in wheel_headers.get_all("Tag") or []),
        "root_is_purelib": _text(wheel_headers.get("Root-Is-Purelib")),
    }
    if metadata is None:
        return WheelFacts(**facts)  # type: ignore[arg-type]
    headers = email.parser.BytesParser().parsebytes(metadata, headersonly=True)
    problems: list[str] = []
    try:
        Metadata.from_email(metadata, validate=True)
    except InvalidMetadata as error:
        problems.append(str(error))
    except MetadataErrors as group:
        problems.extend(str(e) for e in group.exceptions)
    except ValueError as error:  # a version number of more digits than Python converts
        problems.append(f"METADATA does not read ({error})")
    return WheelFacts(
        **facts,  # type: ignore[arg-type]
        has_metadata=True,
        metadata=metadata,
        metadata_name=_text(headers.get("Name")),
        metadata_version=_text(headers.get("Version")),
        metadata_problems=tuple(problems),
        requires_python=headers.get("Requires-Python"),
        requires_dist=tuple(str(line) for line in headers.get_all("Requires-Dist") or []),
    )


def header_lines_problem(text: bytes) -> str | None:
    """Why a METADATA or WHEEL file has too many header lines to parse, as the email parser
    splits them: at CRLF, LF or a CR alone (a CR-only file of 2.8 million lines counted as
    one by LF). A folded line, a long Description's, is one header; the lines folded into
    headers are held to MAX_FOLDED_LINES (the parser keeps each as an object: 2.8 million
    took 340 MB)."""
    block = text.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n\n", 1)[0]
    lines = block.count(b"\n") + (1 if block and not block.endswith(b"\n") else 0)
    folded = block.count(b"\n ") + block.count(b"\n\t") + block.startswith((b" ", b"\t"))
    if lines - folded > MAX_HEADER_LINES:
        return f"has more than {MAX_HEADER_LINES} header lines"
    if folded > MAX_FOLDED_LINES:
        return f"has more than {MAX_FOLDED_LINES} lines folded into its headers"
    return None


def _text(value: object) -> str | None:
    """A header's value as text: email gives a Header object, not a str, for bytes that
    are not ASCII (each undecodable byte becomes U+FFFD)."""
    return None if value is None else str(value)


def _member(archive: zipfile.ZipFile, present: set[str], name: str) -> bytes | None:
    return _dist_info_file(archive, name, MAX_HEADERS_FILE) if name in present else None


def _dist_info_file(archive: zipfile.ZipFile, name: str, most: int = MAX_DIST_INFO_FILE) -> bytes:
    """The .dist-info file `name`, read whole: KeyError where it is absent, ValueError past
    `most` bytes (zipfile reads a member no further than the size its entry declares)."""
    if archive.getinfo(name).file_size > most:
        raise ValueError(f"{name} is over {most // 2**20} MiB")
    return archive.read(name)
