"""Device code wherever a wheel holds it, held to the cell's SMs and PTX.

csrc ships its device code as `*.fatbin` files; CMake and torch projects link it into
their shared objects, where nvcc puts the fatbin in the `.nv_fatbin` ELF section (or
`__nv_relfatbin` with relocatable device code). `scan` finds both kinds in a wheel's
members and asks a lister what each holds; `coverage_problems` holds every member to the
cell, so a project that drops an architecture fails whatever builds it (the
SKBUILD_CMAKE_ARGS `;` trap builds the first SM alone and exits 0: this is what catches it).

Pure: `device_sections`, `scan`, `parse_fatbin_headers`, `coverage_problems`. Edge:
`elf_lister` runs cuobjdump on one member through release.proc.

A shared object is listed from cuobjdump's fatbin headers (`cuobjdump lib.so`), not its
`--list-elf` names: those name a family-specific cubin (`sm_100f`) `sm_100`, while the
header says `arch = sm_100f`.
"""

from __future__ import annotations

import io
import re
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from elftools.elf.elffile import ELFFile

from release import proc
from release.elfread import ELF_READ_ERRORS
from release.inspection.fatbin import (
    FatbinContents,
    FatbinLister,
    measured,
    summed_sizes,
    target_key,
)
from release.targets import GpuTarget

DEVICE_SECTIONS = frozenset({".nv_fatbin", "__nv_relfatbin"})
DEVICE_CODE_FILES = (".fatbin", ".cubin", ".ptx")
FATBIN_MAGIC = b"\x50\xed\x55\xba"  # the first bytes of a fatbin (and of .nv_fatbin)
ELF_MAGIC = b"\x7fELF"
COPY_CHUNK = 2**20  # what `scan` holds of a member at once

# The two reasons a wheel that should carry device code carries none, with the way out of
# each: a build that skipped CUDA, and a project that carries none by design.
SKIPPED_CUDA = (
    "the build skipped CUDA (a project that compiles its kernels only where it finds a GPU "
    "builds without them on a release builder): set the project's force-CUDA switch in the "
    'matrix\'s build.env (FORCE_CUDA: "1" in most projects)'
)
JIT_FIRST = (
    "the project compiles its kernels at run time and carries no device code (a JIT-first "
    "project): declare device-code: none for the cell in matrix.yaml"
)
NO_DEVICE_CODE = (
    "the wheel holds no device code (no fatbin file, and no shared object with a .nv_fatbin "
    f"section). Either {SKIPPED_CUDA}; or {JIT_FIRST}"
)

ElfLister = Callable[[str, Path], FatbinContents]
"""(name inside the wheel, the shared object copied to a scratch file) -> what its embedded
fatbins hold."""


@dataclass(frozen=True, kw_only=True)
class MemberDeviceCode:
    """The device code of one wheel member: a fatbin file or a shared object."""

    name: str
    kind: str  # "fatbin" or "shared object"
    contents: FatbinContents


def is_shared_object(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.endswith(".so") or ".so." in base


def device_sections(data: bytes | Path) -> tuple[str, ...]:
    """The device-code sections of an ELF file, its bytes or its path (empty for anything
    else)."""
    try:
        with io.BytesIO(data) if isinstance(data, bytes) else data.open("rb") as stream:
            elf = ELFFile(stream)
            names = [section.name for section in elf.iter_sections()]
    except ELF_READ_ERRORS:
        return ()
    return tuple(sorted(DEVICE_SECTIONS.intersection(names)))


def holds_device_code(data: bytes) -> bool:
    """Whether any member of the wheel `data` can hold device code at all: a `*.fatbin`
    file, or a shared object with a device-code section (what `scan` would list)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return any(
            info.filename.endswith(".fatbin")
            or (is_shared_object(info.filename) and bool(device_sections(archive.read(info))))
            for info in archive.infolist()
        )


def device_code_kind(name: str, data: bytes) -> str | None:
    """What device code the wheel member `name` (bytes `data`) is or holds: a fatbin, cubin
    or PTX file (by its name or its first bytes: a fatbin's magic, an ELF file of machine
    EM_CUDA), or an ELF file with a device-code section; None where it holds none."""
    suffix = next((s for s in DEVICE_CODE_FILES if name.endswith(s)), None)
    if suffix is not None:
        return f"a {suffix[1:]} file"
    if data.startswith(FATBIN_MAGIC):
        return "a fatbin"
    if not data.startswith(ELF_MAGIC):
        return None
    try:
        machine = ELFFile(io.BytesIO(data)).header["e_machine"]
    except ELF_READ_ERRORS:
        return None
    if machine == "EM_CUDA":
        return "a cubin"
    sections = device_sections(data)
    return f"device code in its {' and '.join(sections)} section" if sections else None


def host_only_problems(data: bytes) -> list[str]:
    """Where the wheel `data`, whose cell declares `device-code: none`, holds device code
    after all: each member that does, named."""
    problems: list[str] = []
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            kind = device_code_kind(info.filename, archive.read(info))
            if kind is not None:
                problems.append(
                    f"{info.filename} holds {kind}, and the cell declares device-code: none "
                    "(the build compiled CUDA kernels into the wheel: list the SMs it builds "
                    "under sms instead, or leave the kernels out of the build)"
                )
    return problems


def scan(
    data: bytes | Path, *, list_fatbin: FatbinLister, list_elf: ElfLister
) -> tuple[MemberDeviceCode, ...]:
    """Every member of the wheel `data` (its bytes, or its file) that holds device code, in
    archive order, with what it holds: `*.fatbin` files through `list_fatbin`, shared
    objects with a device-code section through `list_elf`. Shared objects without device
    code (csrc's host library) are not listed. Each member is streamed to a scratch file of
    its own and listed there, never held in memory (a served fatbin may inflate to GiBs)."""
    found: list[MemberDeviceCode] = []
    with (
        zipfile.ZipFile(io.BytesIO(data) if isinstance(data, bytes) else data) as archive,
        tempfile.TemporaryDirectory(prefix="release-member-") as tmp,
    ):
        for info in archive.infolist():
            name = info.filename
            fatbin = name.endswith(".fatbin")
            if not fatbin and not is_shared_object(name):
                continue
            path = Path(tmp) / Path(name).name
            with archive.open(info) as member, path.open("wb") as copy:
                shutil.copyfileobj(member, copy, COPY_CHUNK)
            if fatbin:
                contents = list_fatbin(name, path)
                found.append(MemberDeviceCode(name=name, kind="fatbin", contents=contents))
            elif device_sections(path):
                contents = list_elf(name, path)
                found.append(MemberDeviceCode(name=name, kind="shared object", contents=contents))
            path.unlink()
    return tuple(found)


def coverage_problems(
    members: Sequence[MemberDeviceCode], sms: Sequence[GpuTarget], ptx: GpuTarget | None
) -> list[str]:
    """Each member must hold a cubin for exactly `sms` and PTX for exactly `ptx`; a wheel
    without any device code fails."""
    if not members:
        return [NO_DEVICE_CODE]
    problems: list[str] = []
    wanted = {str(s) for s in sms}
    wanted_ptx = {str(ptx)} if ptx is not None else set()
    for member in members:
        name, contents = member.name, member.contents
        if contents.error is not None:
            problems.append(f"{name}: {contents.error}")
            continue
        found = set(contents.sms)
        for missing in sorted(wanted - found, key=target_key):
            problems.append(
                f"{name} has no cubin for sm_{missing}: GPUs of that kind would fail with "
                "'no kernel image is available for execution on the device'"
            )
        for extra in sorted(found - wanted, key=target_key):
            problems.append(f"{name} has a cubin for sm_{extra}, which the cell did not ask for")
        if set(contents.ptx) != wanted_ptx:
            have = ", ".join(f"compute_{p}" for p in contents.ptx) or "none"
            want = f"compute_{ptx}" if ptx is not None else "none"
            problems.append(f"{name} has PTX {have}, the cell asks for {want}")
    return problems


def device_bytes(members: Sequence[MemberDeviceCode]) -> tuple[tuple[str, int], ...]:
    """Bytes per target of all members together (cubins `sm_90`, PTX `ptx_100`)."""
    return summed_sizes([m.contents.sizes for m in members])


def found_targets(members: Sequence[MemberDeviceCode]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(SMs, PTX targets) found in any member, ordered."""
    sms = {s for m in members for s in m.contents.sms}
    ptx = {p for m in members for p in m.contents.ptx}
    return tuple(sorted(sms, key=target_key)), tuple(sorted(ptx, key=target_key))


_HEADER = re.compile(
    r"^Fatbin (?P<kind>elf|ptx) code:\s*\n=+\s*\narch = sm_(?P<arch>\d+[af]?)\s*$", re.MULTILINE
)


def parse_fatbin_headers(output: str) -> FatbinContents:
    """Parse `cuobjdump FILE` (no option): one `Fatbin elf code:` / `Fatbin ptx code:` header
    with its `arch = sm_XX` per embedded cubin or PTX."""
    sms: set[str] = set()
    ptx: set[str] = set()
    for match in _HEADER.finditer(output):
        (sms if match.group("kind") == "elf" else ptx).add(match.group("arch"))
    return FatbinContents(
        sms=tuple(sorted(sms, key=target_key)), ptx=tuple(sorted(ptx, key=target_key))
    )


def header_command(cuobjdump: Path, path: Path) -> list[str]:
    return [str(cuobjdump), str(path)]


def elf_lister(
    cuobjdump: Path, env: Mapping[str, str], runner: proc.Runner = proc.run
) -> ElfLister:
    """An `ElfLister` that runs cuobjdump on each shared object's scratch copy."""

    def list_elf(name: str, path: Path) -> FatbinContents:
        done = runner(header_command(cuobjdump, path), env=env, separate_stderr=True)
        if done.returncode != 0:
            detail = proc.one_line_tail(done.output + done.stderr)
            return FatbinContents(sms=(), ptx=(), error=f"cuobjdump cannot read it: {detail}")
        if (too_long := proc.too_long("cuobjdump", done)) is not None:
            return FatbinContents(sms=(), ptx=(), error=too_long)
        contents = parse_fatbin_headers(done.output)
        if not contents.sms and not contents.ptx:
            return FatbinContents(
                sms=(), ptx=(), error="cuobjdump finds no cubin and no PTX in its fatbin"
            )
        return replace(contents, sizes=measured(path, cuobjdump=cuobjdump, env=env, runner=runner))

    return list_elf
