"""Wheel inspection: a wheel counts as built only when everything about it is what its cell
asked for.

Checked: the filename, METADATA and WHEEL tags agree; the local label is exactly the cell's;
every fatbin file and every shared object with device code (release.inspection.devicecode) holds a
cubin for exactly the cell's SMs and PTX for exactly its target (a cell of `device-code:
none`: no member holds any device code); every shared library is
an ELF of the platform's machine that asks no runtime symbol version beyond the wheel's
manylinux tag, needs CUDA libraries of the cell's CUDA major only, and requires torch where
it links torch's libraries (release.inspection.served: the checks `release verify` and
`release audit` apply to any wheel as served; which libraries it may need is the manylinux
policy's, judged by auditwheel: release.inspection.verdict); RECORD hashes and
sizes are right; an abi3 wheel keeps to the limited
API of its floor (abi3audit, passed in), a py3-none one uses no Python C-API
(release.inspection.pythonapi); the size fits the destination. The
core works on the wheel's bytes; listing a fatbin's or a shared object's targets is passed
in (cuobjdump runs at the edge).
"""

from __future__ import annotations

import email.parser
import hashlib
import io
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.tags import Tag
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from release.fsutil import json_document
from release.inspection.devicecode import (
    ElfLister,
    MemberDeviceCode,
    coverage_problems,
    device_bytes,
    found_targets,
    host_only_problems,
    scan,
)
from release.inspection.elffacts import machine_problem, read_member
from release.inspection.fatbin import FatbinContents, FatbinLister
from release.inspection.limitedapi import LimitedApiAudit
from release.inspection.pythonapi import python_api_problems
from release.inspection.served import native_checks
from release.matrix import Cell
from release.wheelfile import (
    NotAWheel,
    WheelName,
    identity_problems,
    record_problems,
    tag_problems,
    version_or_none,
)
from release.ziparchive import zip_problem


@dataclass(frozen=True, kw_only=True)
class WheelReport:
    filename: str
    size: int
    sha256: str
    sms: tuple[str, ...]
    ptx: tuple[str, ...]
    build_info: Mapping[str, object] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    device_bytes: tuple[tuple[str, int], ...] = ()  # per target, uncompressed: `sm_90`, `ptx_100`

    @property
    def ok(self) -> bool:
        return not self.problems


def check_record(archive: zipfile.ZipFile, dist_info: str) -> list[str]:
    """RECORD's hashes and sizes against the members (release.wheelfile.record_problems)."""
    return record_problems(archive, dist_info)


def check_elf(name: str, data: bytes, *, arch: str) -> list[str]:
    """Whether one shared library is an ELF file of the wheel platform's machine."""
    problem = machine_problem(read_member(name, data), arch)
    return [] if problem is None else [problem]


def inspect_wheel(
    filename: str,
    data: bytes,
    cell: Cell,
    *,
    list_fatbin: FatbinLister,
    list_elf: ElfLister | None = None,
    max_size: int | None = None,
    audit_limited_api: LimitedApiAudit | None = None,
) -> WheelReport:
    """Every check above, on the wheel's bytes; problems are collected, not raised. An abi3
    cell's wheel also goes through `audit_limited_api`, where one is given."""
    problems: list[str] = []
    sha256 = hashlib.sha256(data).hexdigest()
    limit = cell.destination.max_file_size if max_size is None else max_size

    def report(**extra: object) -> WheelReport:
        return WheelReport(
            filename=filename,
            size=len(data),
            sha256=sha256,
            problems=tuple(problems),
            **extra,  # type: ignore[arg-type]
        )

    if filename != cell.wheel_filename:
        problems.append(f"the wheel is named {filename}, the cell expects {cell.wheel_filename}")
    try:
        wheel = WheelName.parse(filename)
    except NotAWheel as error:
        problems.append(f"invalid wheel filename: {error.detail}")
        return report(sms=(), ptx=())
    name, version, tags = wheel.project, wheel.version, wheel.tags
    if version != cell.version:
        problems.append(f"the filename's version is {version}, the cell's is {cell.version}")
    if (version.local or None) != cell.local_label:
        problems.append(f"the local label is {version.local!r}, the cell's is {cell.local_label!r}")
    damage = zip_problem(data)
    if damage is not None:
        problems.append(f"the wheel is {damage}")
        return report(sms=(), ptx=())
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        dist_info = _dist_info(archive, name, version)
        if dist_info is None:
            problems.append(f"no {name}-{version}.dist-info directory in the wheel")
            return report(sms=(), ptx=())
        problems += _check_metadata(archive, dist_info, name, version, tags)
        problems += check_record(archive, dist_info)
        native = native_checks(
            archive,
            tags=tags,
            arch=cell.arch,
            label=cell.local_label,
            requires_dist=_requires_dist(archive, dist_info),
            cell_major=cell.cuda.major,
        )
        problems += [detail for _, detail in native.problems]
        build_info = _build_info(archive)
    if cell.abi3 is not None and audit_limited_api is not None:
        problems += [f"abi3audit: {p}" for p in audit_limited_api(filename, data)]
    if cell.abi_tag == "none":
        problems += python_api_problems(data)
    members: tuple[MemberDeviceCode, ...] = ()
    if cell.host_only:
        problems += host_only_problems(data)
    else:
        members = scan(data, list_fatbin=list_fatbin, list_elf=list_elf or _unlisted)
        problems += coverage_problems(members, cell.sms, cell.ptx)
    sms, ptx = found_targets(members)
    sizes = device_bytes(members)
    if len(data) > limit:
        problems.append(size_problem(len(data), limit, cell.destination.name, sizes))
    return report(sms=sms, ptx=ptx, build_info=build_info, device_bytes=sizes)


def size_problem(size: int, limit: int, destination: str, sizes: Sequence[tuple[str, int]]) -> str:
    """A wheel over its destination's file limit, and the targets that weigh most."""
    weighs = heaviest(sizes)
    return f"{size / 2**20:.1f} MiB is over {destination}'s limit of {limit / 2**20:.0f} MiB" + (
        f" (heaviest device code: {weighs})" if weighs else ""
    )


BUDGET_WARNING = 0.9  # of a destination's file limit: `release build` says so from here


def budget_warning(report: WheelReport, cell: Cell) -> str | None:
    """Where a wheel that fits its destination's file limit is near it."""
    limit = cell.destination.max_file_size
    if not BUDGET_WARNING * limit < report.size <= limit:
        return None
    weighs = heaviest(report.device_bytes)
    return (
        f"{report.filename} is {report.size / 2**20:.1f} MiB, {100 * report.size / limit:.0f}% "
        f"of {cell.destination.name}'s {limit / 2**20:.0f} MiB file limit"
        + (f" (heaviest device code: {weighs})" if weighs else "")
    )


def heaviest(sizes: Sequence[tuple[str, int]], count: int = 3) -> str:
    """The targets whose code weighs most: `sm_100 1.2 MiB, sm_90 1.1 MiB`."""
    ranked = sorted(sizes, key=lambda kv: -kv[1])[:count]
    return ", ".join(f"{label} {n / 2**20:.1f} MiB" for label, n in ranked)


def _unlisted(name: str, path: Path) -> FatbinContents:
    return FatbinContents(sms=(), ptx=(), error="holds device code, and no lister was given")


def _dist_info(archive: zipfile.ZipFile, name: str, version: Version) -> str | None:
    for entry in archive.namelist():
        top = entry.split("/", 1)[0]
        if not top.endswith(".dist-info"):
            continue
        dist, _, dist_version = top[: -len(".dist-info")].rpartition("-")
        if canonicalize_name(dist) == name and version_or_none(dist_version) == version:
            return top
    return None


def _check_metadata(
    archive: zipfile.ZipFile,
    dist_info: str,
    name: NormalizedName,
    version: Version,
    tags: frozenset[Tag],
) -> list[str]:
    try:
        metadata = email.parser.BytesParser().parsebytes(archive.read(f"{dist_info}/METADATA"))
    except KeyError:
        return [f"{dist_info}/METADATA is missing"]
    problems = identity_problems(name, version, metadata.get("Name"), metadata.get("Version"))
    try:
        wheel = email.parser.BytesParser().parsebytes(archive.read(f"{dist_info}/WHEEL"))
    except KeyError:
        return [*problems, f"{dist_info}/WHEEL is missing"]
    problems += tag_problems([str(t) for t in wheel.get_all("Tag") or []], tags)
    if wheel.get("Root-Is-Purelib", "").strip().lower() != "false":
        problems.append("WHEEL says Root-Is-Purelib: true for a wheel with native code")
    return problems


def _requires_dist(archive: zipfile.ZipFile, dist_info: str) -> tuple[str, ...]:
    try:
        metadata = archive.read(f"{dist_info}/METADATA")
    except KeyError:
        return ()
    headers = email.parser.BytesParser().parsebytes(metadata, headersonly=True)
    return tuple(str(line) for line in headers.get_all("Requires-Dist") or [])


def _build_info(archive: zipfile.ZipFile) -> Mapping[str, object]:
    for entry in archive.namelist():
        if entry.endswith("/_build_info.json"):
            try:
                data = json_document(archive.read(entry), entry)
            except ValueError:
                return {}
            return data if isinstance(data, dict) else {}
    return {}
