"""A wheel's version rewritten to carry a local label, for builds that cannot set one, and
a nightly's dev version, which no build sets.

csrc's backend writes `0.1.0+cu129` into its metadata itself; a CMake or torch project
builds `0.1.0`. `relabel` turns such a wheel into the labelled one the way a build would
have made it: the `.dist-info` (and `.data`) folder renamed, METADATA's `Version` set,
RECORD's paths and METADATA's hash and size updated, and the filename built from the new
version. WHEEL moves with its folder; its content names no version. `rewrite_version` does
the same for any version that differs from the built one only in its local label and its
dev part (a nightly: `0.1.1` built, `0.1.1.dev1733212345+cu129` published); the release,
its epoch and its pre- and post-release parts may never change. `copies_of` relabels a
cell's wheel for each of its other copies (a CUDA version published to several places:
sgl-project's CUDA 13.0 plain on PyPI and `+cu130` on a GitHub release): one build, a file
per copy.

`as_platlib` marks a wheel whose build made it pure (`py3-none-any`, `Root-Is-Purelib:
true`) but that holds a shared object (a library the project built beside its build
backend and ships as package data) as the platform wheel it is once it carries the cell's
platform tag: WHEEL's `Root-Is-Purelib: false`, and RECORD's row for WHEEL.

Pure and deterministic: the same wheel bytes give the same output bytes. Members keep
their order, dates, modes and compression; members that do not change keep their content.
"""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
from dataclasses import dataclass

from packaging.version import Version

from release.matrix import Cell
from release.wheelfile import NotAWheel, WheelName, version_or_none
from release.wheelrewrite import rewritten_record, rewritten_wheel


class RelabelError(ValueError):
    """The wheel cannot be given that version (the message says why)."""


@dataclass(frozen=True, kw_only=True)
class Relabelled:
    filename: str
    data: bytes
    old_version: str
    new_version: str

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def labelled_version(version: Version, label: str | None) -> Version:
    """`version`'s release with `label` as its local part (none: the public version)."""
    public = version.public
    return Version(f"{public}+{label}" if label else public)


_VERSION_LINE = re.compile(rb"^Version:[ \t]*(?P<value>[^\r\n]*)(?P<end>\r?\n|$)", re.MULTILINE)


def _metadata_with_version(metadata: bytes, version: str) -> bytes:
    """METADATA with its `Version:` header (the first, in the header block) set."""
    header_end = metadata.find(b"\n\n")
    head = metadata if header_end < 0 else metadata[: header_end + 1]
    match = _VERSION_LINE.search(head)
    if match is None:
        raise RelabelError("METADATA has no Version header")
    start, end = match.span("value")
    return metadata[:start] + version.encode() + metadata[end:]


def relabel(filename: str, data: bytes, label: str | None) -> Relabelled:
    """The wheel `filename` (bytes `data`) with version `<release>+<label>`; raises
    RelabelError for a wheel that cannot be rewritten (not a wheel, no or two .dist-info
    folders, a METADATA that disagrees with the filename, a signed RECORD)."""
    try:
        version = WheelName.parse(filename).version
    except NotAWheel as error:
        raise RelabelError(f"{filename}: {error.detail}") from None
    try:
        new_version = labelled_version(version, label)
    except ValueError:  # InvalidVersion, or a number of more digits than int() reads
        raise RelabelError(f"{label!r} is not a valid local version label") from None
    return rewrite_version(filename, data, new_version)


def copies_of(cell: Cell, filename: str, data: bytes) -> list[tuple[Cell, Relabelled]]:
    """The wheel `filename` (bytes `data`) the cell's build made, relabelled for each of its
    other copies (matrix.yaml's list of destinations), with the cell as that copy publishes
    it: one build, a file per copy. RelabelError where the wheel cannot be rewritten."""
    out = []
    for copy in cell.relabelled:
        seen = cell.as_copy(copy)
        out.append((seen, rewrite_version(filename, data, seen.version)))
    return out


def version_change_problem(built: Version, target: Version) -> str | None:
    """Why the built version may not become `target` by rewriting, if it may not: only
    the local label and the dev part change (the dev part only to another one)."""
    same = (built.epoch, built.release, built.pre, built.post) == (
        target.epoch,
        target.release,
        target.pre,
        target.post,
    )
    if not same or (built.dev is not None and target.dev is None):
        return (
            f"the build made version {built}, the cell is {target} (only the local label "
            "and a nightly's dev part are rewritten, never the release)"
        )
    return None


def rewrite_version(filename: str, data: bytes, new_version: Version) -> Relabelled:
    """The wheel `filename` (bytes `data`) with version `new_version`, which differs from
    the built one in its local label and dev part only (`version_change_problem`)."""
    try:
        wheel = WheelName.parse(filename)
    except NotAWheel as error:
        raise RelabelError(f"{filename}: {error.detail}") from None
    version = wheel.version
    if wheel.build:
        raise RelabelError(f"{filename}: a wheel with a build tag cannot be relabelled")
    problem = version_change_problem(version, new_version)
    if problem is not None:
        raise RelabelError(problem)
    new_filename = wheel.with_version(new_version).filename
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise RelabelError(f"{filename} is not a zip archive") from None
    with archive:
        infos = archive.infolist()
        tops = {info.filename.split("/", 1)[0] for info in infos}
        dist_infos = sorted(t for t in tops if t.endswith(".dist-info"))
        if len(dist_infos) != 1:
            raise RelabelError(f"{filename} has {len(dist_infos)} .dist-info folders, not 1")
        old_info = dist_infos[0]
        old_prefix = old_info[: -len(".dist-info")]
        dist, _, info_version = old_prefix.rpartition("-")
        if version_or_none(info_version) != version:
            raise RelabelError(
                f"{filename}: the folder {old_info} does not have the filename's version {version}"
            )
        names = {info.filename for info in infos}
        if f"{old_info}/RECORD.jws" in names or f"{old_info}/RECORD.p7s" in names:
            raise RelabelError(f"{filename} is signed: relabelling would void its signature")
        new_prefix = f"{dist}-{new_version}"
        renames = {old_info: f"{new_prefix}.dist-info"}
        if f"{old_prefix}.data" in tops:
            renames[f"{old_prefix}.data"] = f"{new_prefix}.data"
        metadata_name = f"{new_prefix}.dist-info/METADATA"
        try:
            metadata = archive.read(f"{old_info}/METADATA")
            record = archive.read(f"{old_info}/RECORD")
        except KeyError as missing:
            raise RelabelError(f"{filename} has no {missing.args[0]}") from None
        found = re.search(rb"^Version:[ \t]*([^\r\n]*)", metadata, re.MULTILINE)
        stated = found.group(1).decode("utf-8", errors="replace").strip() if found else ""
        if version_or_none(stated) != version:
            raise RelabelError(f"{filename}: METADATA's Version is not the filename's {version}")
        new_metadata = _metadata_with_version(metadata, str(new_version))
        new_record = rewritten_record(record, renames, (metadata_name, new_metadata))
        contents = {metadata_name: new_metadata, f"{new_prefix}.dist-info/RECORD": new_record}
        new_data = rewritten_wheel(archive, renames, contents)
    return Relabelled(
        filename=new_filename,
        data=new_data,
        old_version=str(version),
        new_version=str(new_version),
    )


_PURELIB = re.compile(rb"^Root-Is-Purelib:[ \t]*true[ \t]*$", re.IGNORECASE | re.MULTILINE)


def as_platlib(data: bytes) -> bytes:
    """The wheel `data` with WHEEL's `Root-Is-Purelib: true` made `false` (and RECORD's row
    for WHEEL updated); the same bytes where it says no such thing."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        tops = {name.split("/", 1)[0] for name in archive.namelist()}
        dist_infos = sorted(top for top in tops if top.endswith(".dist-info"))
        if len(dist_infos) != 1:
            raise RelabelError(f"the wheel has {len(dist_infos)} .dist-info folders, not 1")
        wheel_name, record_name = f"{dist_infos[0]}/WHEEL", f"{dist_infos[0]}/RECORD"
        try:
            wheel, record = archive.read(wheel_name), archive.read(record_name)
        except KeyError as missing:
            raise RelabelError(f"the wheel has no {missing.args[0]}") from None
        platlib = _PURELIB.sub(b"Root-Is-Purelib: false", wheel)
        if platlib == wheel:
            return data
        new_record = rewritten_record(record, {}, (wheel_name, platlib))
        return rewritten_wheel(archive, {}, {wheel_name: platlib, record_name: new_record})
