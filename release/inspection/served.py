"""A wheel inspected from its bytes alone, with no build context: what `release verify`
runs on every wheel it downloads and `release audit` on any index's wheels. The build's
inspection (release.inspection.wheel) applies the same functions with its cell's CUDA.

The rules (release.inspection.findings) it applies to one wheel:

- `archive`: a wheel filename, a zip whose every member reads back, one .dist-info, RECORD's
  hashes and sizes (release.wheelfile), every Requires-Dist PEP 508 (release.pep508);
- `filename`: the filename's name, version and tags are METADATA's and WHEEL's (pip refuses
  a wheel whose versions differ, uv installs it);
- `manylinux`: every ELF file is of the tag's machine and asks no GLIBC, GLIBCXX, CXXABI or
  GCC version beyond the manylinux tag (release.inspection.symbols, auditwheel's policy);
- `cuda-major` and `torch`: the CUDA libraries it NEEDs against its label, each other and
  the torch it requires (release.inspection.cudalibs);
- `device-code`: where a fatbin lister is given (cuobjdump), every fatbin file and device
  code section reads, and the SMs and PTX found are reported for the index-level comparison.

The wheel is read from a file (or bytes) member by member: nothing holds it whole.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.tags import Tag

from release.errors import shown
from release.inspection.cudalibs import (
    TorchCuda,
    cuda_needs,
    cuda_problems,
    torch_problems,
    unparsed_requirements,
)
from release.inspection.devicecode import ElfLister, found_targets, scan
from release.inspection.elffacts import machine_problem, wheel_elfs
from release.inspection.fatbin import FatbinLister
from release.inspection.findings import Finding, finding
from release.inspection.symbols import known_policy, symbol_problems, tag_arch
from release.targets import ELF_MACHINES
from release.wheelfile import (
    NotAWheel,
    WheelName,
    identity_problems,
    read_wheel,
    record_problems,
    tag_problems,
    wheel_facts,
)
from release.ziparchive import zip_problem


@dataclass(frozen=True, kw_only=True)
class NativeChecks:
    """What the ELF files of a wheel gave: (rule, detail) problems, the rules that ran, and
    (rule, why) for a rule that could not."""

    problems: tuple[tuple[str, str], ...]
    checked: frozenset[str]
    unchecked: tuple[tuple[str, str], ...] = ()


def wheel_arch(tags: frozenset[Tag]) -> str | None:
    """The one Linux CPU arch a wheel's platform tags name, or None (pure, several)."""
    arches = {tag_arch(t.platform) for t in tags} - {None}
    return arches.pop() if len(arches) == 1 else None


def native_checks(
    archive: zipfile.ZipFile,
    *,
    tags: frozenset[Tag],
    arch: str | None,
    label: str | None,
    requires_dist: Sequence[str],
    cell_major: int | None = None,
    torch_cuda: TorchCuda | None = None,
) -> NativeChecks:
    """The `manylinux`, `cuda-major` and `torch` rules over every shared object of
    `archive`; `cell_major` is the CUDA the build's cell asked for (None: the label's)."""
    elfs = list(wheel_elfs(archive))
    if not elfs:
        return NativeChecks(problems=(), checked=frozenset())
    problems: list[tuple[str, str]] = []
    checked = {"cuda-major", "torch"}
    platforms = {t.platform for t in tags}
    if known_policy(platforms) or (arch is not None and arch in ELF_MACHINES):
        checked.add("manylinux")
    readable = []  # of the tag's machine: another machine's symbol versions mean nothing
    for facts in elfs:
        wrong = machine_problem(facts, arch) if arch is not None else None
        if wrong is None and facts.unreadable is not None:
            wrong = f"{facts.member} {facts.unreadable}"
        if wrong is not None:
            problems.append(("manylinux", wrong))
        else:
            readable.append(facts)
    problems += [("manylinux", detail) for _, detail in symbol_problems(readable, platforms)]
    needs = cuda_needs(readable)
    problems += [
        ("cuda-major", detail)
        for _, detail in cuda_problems(needs, label=label, cell_major=cell_major)
    ]
    torch, why = torch_problems(
        readable, requires_dist, label=label, arch=arch, torch_cuda=torch_cuda
    )
    problems += [("torch", detail) for _, detail in torch]
    unchecked = (("torch", why),) if why else ()
    return NativeChecks(problems=tuple(problems), checked=frozenset(checked), unchecked=unchecked)


@dataclass(frozen=True, kw_only=True)
class ServedWheel:
    """One wheel's findings, the rules that ran on it, and the device code it holds (where
    listed)."""

    filename: str
    url: str
    findings: tuple[Finding, ...]
    checked: frozenset[str]
    unchecked: tuple[tuple[str, str], ...] = ()
    sms: tuple[str, ...] = ()
    ptx: tuple[str, ...] = ()
    device_listed: bool = False  # the fatbins were listed (a lister was given)
    metadata_sha256: str | None = None  # of its METADATA, where it has one to read


def inspect_served(
    filename: str,
    source: Path | bytes,
    *,
    url: str,
    cell_major: int | None = None,
    list_fatbin: FatbinLister | None = None,
    list_elf: ElfLister | None = None,
    torch_cuda: TorchCuda | None = None,
) -> ServedWheel:
    """Every rule of the module doc on the wheel `filename` whose bytes are `source` (a
    file, or bytes), read from `url`; `cell_major` is the CUDA major a release says the
    wheel is for, where one does."""

    def found(rule: str, details: Sequence[str]) -> list[Finding]:
        return [finding(rule, filename, url, detail) for detail in details]

    def result(findings: list[Finding], checked: set[str], **more: object) -> ServedWheel:
        return ServedWheel(
            filename=filename, url=url, findings=tuple(findings), checked=frozenset(checked),
            **more,  # type: ignore[arg-type]
        )  # fmt: skip

    try:
        name = WheelName.parse(filename)
    except NotAWheel as error:
        return result(found("archive", [f"{filename}: {error}"]), {"archive"})
    damage = zip_problem(source)
    if damage is not None:
        return result(found("archive", [f"the file is {damage}"]), {"archive"})
    facts = wheel_facts(source) if isinstance(source, bytes) else read_wheel(source)
    if facts.unreadable is not None or facts.dist_info is None:
        return result(found("archive", [f"the wheel: {facts.unreadable}"]), {"archive"})
    metadata = hashlib.sha256(facts.metadata).hexdigest() if facts.metadata else None
    findings = found(
        "filename",
        identity_problems(name.project, name.version, facts.metadata_name, facts.metadata_version)
        + tag_problems(facts.wheel_tags, name.tags),
    )
    with zipfile.ZipFile(io.BytesIO(source) if isinstance(source, bytes) else source) as archive:
        findings += found("archive", record_problems(archive, facts.dist_info))
        findings += found(
            "archive",
            [
                f"METADATA's Requires-Dist {shown(line)} is not PEP 508: pip refuses the wheel"
                for line in unparsed_requirements(facts.requires_dist)
            ],
        )
        native = native_checks(
            archive,
            tags=name.tags,
            arch=wheel_arch(name.tags),
            label=name.version.local,
            requires_dist=facts.requires_dist,
            cell_major=cell_major,
            torch_cuda=torch_cuda,
        )
    for rule, detail in native.problems:
        findings += found(rule, [detail])
    checked = {"archive", "filename", *native.checked}
    if list_fatbin is None or list_elf is None:
        return result(findings, checked, unchecked=native.unchecked, metadata_sha256=metadata)
    members = scan(source, list_fatbin=list_fatbin, list_elf=list_elf)
    if members:
        checked.add("device-code")
    findings += found(
        "device-code",
        [f"{m.name}: {m.contents.error}" for m in members if m.contents.error is not None],
    )
    sms, ptx = found_targets(members)
    return result(
        findings,
        checked,
        unchecked=native.unchecked,
        sms=sms,
        ptx=ptx,
        device_listed=True,
        metadata_sha256=metadata,
    )
