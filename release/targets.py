"""The targets a release builds for: CPU architectures, and GPU targets (SM numbers with
their `a`/`f` suffixes) with what each CUDA version can build.

Pure data and functions, the one place these lists live: the matrix validation asks these
tables, the build passes `GpuTarget.sm` / `.compute` to the device compiler, the
inspection reads `ELF_MACHINES`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering
from typing import Literal, get_args

from release.errors import shown

Arch = Literal["x86_64", "aarch64"]
ARCHES: tuple[Arch, ...] = get_args(Arch)
# The ELF e_machine of each arch, as pyelftools names it.
ELF_MACHINES: dict[str, str] = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64"}

_TARGET_RE = re.compile(r"^(?:sm_|compute_)?(?P<number>[0-9]{2,3})(?P<suffix>[af]?)$")
# The same rule as an ECMA-262 pattern (no named groups), for the JSON Schema.
TARGET_PATTERN = "^(?:sm_|compute_)?[0-9]{2,3}[af]?$"


@dataclass(frozen=True, order=True)
class CudaVersion:
    """A CUDA toolkit version as `major.minor` (the granularity a release matrix uses)."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> CudaVersion:
        match = re.fullmatch(r"([0-9]{1,2})\.([0-9]{1,2})", text)
        if match is None:
            raise ValueError(
                f'{shown(text)} is not a CUDA version of the form MAJOR.MINOR (e.g. "12.9")'
            )
        version = cls(int(match.group(1)), int(match.group(2)))
        if str(version) != text:  # "13.00", "12.09": a key that reads as another's
            raise ValueError(f"{shown(text)} is CUDA {version}: write it {str(version)!r}")
        return version

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @property
    def tag(self) -> str:
        """`cu129`, `cu130`: the conventional short name of the version."""
        return f"cu{self.major}{self.minor}"


@total_ordering
@dataclass(frozen=True)
class GpuTarget:
    """One GPU architecture: `number` is the SM (75, 90, 100), `suffix` '' / 'a' / 'f'."""

    number: int
    suffix: str = ""

    @classmethod
    def parse(cls, value: int | str) -> GpuTarget:
        match = _TARGET_RE.fullmatch(str(value).strip().lower())
        if match is None:
            raise ValueError(
                f"{shown(value)} is not a GPU target (write an SM number like 90, or 90a, 100f)"
            )
        return cls(int(match.group("number")), match.group("suffix"))

    @classmethod
    def from_yaml(cls, value: object) -> GpuTarget:
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise ValueError(
                f"expected an SM number like 90 or a string like '90a', got {shown(value)}"
            )
        if _TARGET_RE.fullmatch(str(value)) is None:
            raise ValueError(
                f"{shown(value)} is not a GPU target (write an SM number like 90, or 90a, 100f)"
            )
        return cls.parse(value)

    @classmethod
    def yaml_schema(cls) -> dict[str, object]:
        return {
            "anyOf": [
                {"type": "integer", "minimum": 10, "maximum": 999},
                {"type": "string", "pattern": TARGET_PATTERN},
            ]
        }

    def __str__(self) -> str:
        return f"{self.number}{self.suffix}"

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, GpuTarget):
            return NotImplemented
        return (self.number, self.suffix) < (other.number, other.suffix)

    @property
    def sm(self) -> str:
        return f"sm_{self}"

    @property
    def compute(self) -> str:
        return f"compute_{self}"


_V = CudaVersion

# First CUDA version that can compile each SM, and the one that dropped it (None: still there).
SM_SUPPORT: dict[int, tuple[CudaVersion, CudaVersion | None]] = {
    50: (_V(6, 0), _V(13, 0)),
    52: (_V(7, 0), _V(13, 0)),
    53: (_V(7, 0), _V(13, 0)),
    60: (_V(8, 0), _V(13, 0)),
    61: (_V(8, 0), _V(13, 0)),
    62: (_V(8, 0), _V(13, 0)),
    70: (_V(9, 0), _V(13, 0)),
    72: (_V(10, 0), _V(13, 0)),
    75: (_V(10, 0), None),
    80: (_V(11, 0), None),
    86: (_V(11, 1), None),
    87: (_V(11, 4), None),
    88: (_V(13, 0), None),
    89: (_V(11, 8), None),
    90: (_V(11, 8), None),
    100: (_V(12, 8), None),
    101: (_V(12, 8), _V(13, 0)),
    103: (_V(12, 9), None),
    110: (_V(13, 0), None),
    120: (_V(12, 8), None),
    121: (_V(12, 9), None),
}

# SMs with architecture-specific (`a`) variants, and the first CUDA version that has each.
ARCH_SPECIFIC_SINCE: dict[int, CudaVersion] = {
    90: _V(12, 0),
    100: _V(12, 8),
    101: _V(12, 8),
    103: _V(12, 9),
    110: _V(13, 0),
    120: _V(12, 8),
    121: _V(12, 9),
}

# Family-specific (`f`) targets arrived with CUDA 12.9, for Blackwell and later.
FAMILY_SINCE = _V(12, 9)
FAMILY_SMS = frozenset({100, 101, 103, 110, 120, 121})

RENAMED_IN_13 = {101: 110}


def target_problem(target: GpuTarget, cuda: CudaVersion) -> str | None:
    """Why `cuda` cannot build `target`, with the remedy; None when it can."""
    support = SM_SUPPORT.get(target.number)
    if support is None:
        known = ", ".join(str(n) for n in sorted(SM_SUPPORT))
        return f"sm_{target.number} is not a known GPU architecture (known: {known})"
    first, dropped = support
    if target.number in RENAMED_IN_13 and cuda.major >= 13:
        new = RENAMED_IN_13[target.number]
        return (
            f"sm_{target} is called sm_{new}{target.suffix} from CUDA 13.0 on "
            f"(write {new}{target.suffix})"
        )
    if cuda < first:
        old = {v: k for k, v in RENAMED_IN_13.items()}.get(target.number)
        remedy = (
            f"write {old}{target.suffix}, its name before 13.0"
            if old
            else f"use CUDA {first} or newer, or drop it"
        )
        return f"sm_{target.number} needs CUDA {first} or newer, not {cuda} ({remedy})"
    if dropped is not None and cuda >= dropped:
        floor = min(n for n, (_, gone) in SM_SUPPORT.items() if gone is None)
        return (
            f"CUDA {dropped} dropped sm_{target.number}: CUDA {cuda} starts at sm_{floor} "
            f"(drop it, or build it with CUDA {dropped.major - 1}.x)"
        )
    if target.suffix == "a":
        since = ARCH_SPECIFIC_SINCE.get(target.number)
        if since is None:
            return (
                f"sm_{target.number} has no architecture-specific 'a' variant "
                f"(write {target.number})"
            )
        if cuda < since:
            return f"sm_{target.number}a needs CUDA {since} or newer, not {cuda}"
    if target.suffix == "f":
        if target.number not in FAMILY_SMS:
            return (
                f"sm_{target.number} has no family-specific 'f' variant "
                f"(write {target.number}; 'f' exists for "
                f"{', '.join(str(n) for n in sorted(FAMILY_SMS))})"
            )
        if cuda < FAMILY_SINCE:
            return f"sm_{target.number}f needs CUDA {FAMILY_SINCE} or newer, not {cuda}"
    return None
