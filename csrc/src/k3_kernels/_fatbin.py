"""Reading the table of contents of a CUDA fatbin, and deciding which GPUs it covers.

A fatbin is one or more containers: a 16-byte header (magic 0xBA55ED50, version,
header size, payload size) followed by entries. Each entry starts with its own header:
kind (1 = PTX, 2 = ELF cubin) at offset 0, the entry header size at offset 4, the
payload size at offset 8 and the SM (e.g. 90) at offset 28; the payload follows it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX = 1
KIND_ELF = 2

_HEADER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQ")  # kind, version, header size, payload size
_ENTRY_MIN = 32


class FatbinFormatError(ValueError):
    """The bytes are not a fatbin this module understands."""


@dataclass(frozen=True)
class FatbinEntry:
    kind: str  # "ptx" or "elf"
    sm: int  # e.g. 90 for sm_90 / compute_90
    size: int  # payload bytes as stored


@dataclass(frozen=True)
class FatbinContents:
    entries: tuple[FatbinEntry, ...]

    @property
    def sms(self) -> tuple[int, ...]:
        return tuple(sorted({e.sm for e in self.entries if e.kind == "elf"}))

    @property
    def ptx(self) -> tuple[int, ...]:
        return tuple(sorted({e.sm for e in self.entries if e.kind == "ptx"}))


def parse_fatbin(data: bytes) -> FatbinContents:
    """Lists the entries of every container in `data`."""
    entries = []
    offset = 0
    if len(data) < _HEADER.size:
        raise FatbinFormatError(f"{len(data)} bytes is too short for a fatbin header")
    while offset + _HEADER.size <= len(data):
        magic, _version, header_size, payload = _HEADER.unpack_from(data, offset)
        if magic != FATBIN_MAGIC:
            if offset == 0:
                raise FatbinFormatError(f"bad fatbin magic 0x{magic:08x}")
            break  # trailing padding after the last container
        end = offset + header_size + payload
        if end > len(data) or header_size < _HEADER.size:
            raise FatbinFormatError(f"fatbin container at byte {offset} is truncated")
        pos = offset + header_size
        while pos + _ENTRY_MIN <= end:
            kind, _ev, entry_header, entry_payload = _ENTRY.unpack_from(data, pos)
            if entry_header < _ENTRY_MIN:
                raise FatbinFormatError(f"fatbin entry at byte {pos} has a bad header size")
            (sm,) = struct.unpack_from("<I", data, pos + 28)
            if kind in (KIND_PTX, KIND_ELF):
                entries.append(
                    FatbinEntry("ptx" if kind == KIND_PTX else "elf", int(sm), int(entry_payload))
                )
            pos += entry_header + entry_payload
        offset = end
    return FatbinContents(tuple(entries))


def covers(contents: FatbinContents, major: int, minor: int) -> str | None:
    """How a GPU of compute capability major.minor would run this fatbin, or None.

    A cubin for sm_XY runs on X.Z with Z >= Y; PTX for compute_XY is JIT-compiled by
    the driver for any GPU of capability >= X.Y.
    """
    cc = major * 10 + minor
    cubins = [sm for sm in contents.sms if sm // 10 == major and sm % 10 <= minor]
    if cubins:
        return f"cubin sm_{max(cubins)}"
    ptx = [sm for sm in contents.ptx if sm <= cc]
    if ptx:
        return f"PTX compute_{max(ptx)} (JIT)"
    return None


def describe(sms: Iterable[int], ptx: Iterable[int]) -> str:
    parts = [f"sm_{s}" for s in sms] + [f"compute_{p} (PTX)" for p in ptx]
    return ", ".join(parts) if parts else "no code"
