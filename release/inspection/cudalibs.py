"""The CUDA a wheel's shared objects link, against the CUDA its name and its requirements
say: the `cuda-major` and `torch` rules.

- A CUDA library whose soname carries the toolkit's major (libcudart.so.13, libcublas.so.12,
  libnvrtc.so.12, ...; not cuFFT, cuRAND, cuSOLVER or cuSPARSE, whose sonames count on their
  own) ties the wheel to that major. A local label `+cu129` (any `cuNNN` segment) says CUDA
  12: a `+cu129` wheel that needs libcudart.so.13 fails beside every CUDA 12 runtime.
- A wheel that NEEDs libtorch*/libc10* loads only beside a torch: its METADATA must require
  one, and that torch must be built for the CUDA major the wheel links. Which CUDA a
  required torch is built for is the requirement's own `+cuNNN` pin, else the wheel's label
  (its variant's torch index), else what a torch index's metadata says of each release the
  requirement admits (`TorchCuda`, release.inspection.torchcuda).

Pure: `cuda_needs`, `label_cuda_major`, `cuda_problems`, `torch_requirements`,
`torch_problems`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from packaging.markers import UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from release import pep508
from release.inspection.elffacts import ElfFacts

# the CUDA libraries whose soname major is the toolkit's major
_TRACKS_TOOLKIT = re.compile(
    r"lib(?:cudart|cublas|cublasLt|nvrtc|nvrtc-builtins|nvJitLink|nvfatbin|cupti|nvjpeg"
    r"|npp[a-z]*)\.so\.(?P<major>[0-9]{1,9})(?:\.\d+)*"
)
_TORCH_LIBRARY = re.compile(r"lib(?:torch|c10)(?:_[a-z_]+)?\.so(?:\.\d+)*")
_CUDA_LABEL = re.compile(r"cu(?P<digits>\d{3,4})")


def cuda_needs(elfs: Sequence[ElfFacts]) -> dict[str, dict[str, int]]:
    """Per member, the CUDA libraries it NEEDs that name a toolkit major, with the major."""
    found: dict[str, dict[str, int]] = {}
    for facts in elfs:
        for soname in facts.needed:
            match = _TRACKS_TOOLKIT.fullmatch(soname)
            if match is not None:
                found.setdefault(facts.member, {})[soname] = int(match["major"])
    return found


def label_cuda_major(label: str | None) -> int | None:
    """The CUDA major a local label names (`cu129`: 12, `cu130.torch211`: 13), or None."""
    for segment in re.split(r"[._-]", label or ""):
        match = _CUDA_LABEL.fullmatch(segment)
        if match is not None:
            return int(match["digits"][:-1])
    return None


def cuda_problems(
    needs: Mapping[str, Mapping[str, int]], *, label: str | None, cell_major: int | None = None
) -> list[tuple[str, str]]:
    """(member, detail) where a NEEDED CUDA library's major is not the cell's (the build),
    not the label's, or (with neither) not the one every other CUDA library of the wheel
    names."""
    expected, because = cell_major, "the cell is CUDA {}"
    if expected is None and label_cuda_major(label) is not None:
        expected, because = label_cuda_major(label), f"the +{label} label says CUDA {{}}"
    problems: list[tuple[str, str]] = []
    if expected is not None:
        for member, libraries in needs.items():
            for soname, major in sorted(libraries.items()):
                if major != expected:
                    why = because.format(expected)
                    problems.append((member, f"{member} needs {soname}; {why}"))
        return problems
    majors = {major for libraries in needs.values() for major in libraries.values()}
    if len(majors) > 1:
        listing = ", ".join(
            f"{member}: {soname}"
            for member, libraries in sorted(needs.items())
            for soname in sorted(libraries)
        )
        first = sorted(needs)[0]
        problems.append((first, f"the wheel links two CUDA majors ({listing})"))
    return problems


def links_torch(elfs: Sequence[ElfFacts]) -> dict[str, str]:
    """Per member, the first torch library (libtorch*, libc10*) it NEEDs."""
    found: dict[str, str] = {}
    for facts in elfs:
        for soname in facts.needed:
            if _TORCH_LIBRARY.fullmatch(soname):
                found.setdefault(facts.member, soname)
    return found


def torch_requirements(
    requires_dist: Sequence[str], arch: str | None, python: str | None = None
) -> list[Requirement]:
    """The `Requires-Dist: torch` lines that apply to a plain install on Linux `arch`
    under Python `python` (`3.10`; None: this one's), markers evaluated there, no extra;
    one that does not parse is left out."""
    environment = {"extra": "", "sys_platform": "linux", "platform_system": "Linux"}
    if arch:
        environment["platform_machine"] = arch
    if python:
        environment |= {"python_version": python, "python_full_version": f"{python}.0"}
    found = []
    for line in requires_dist:
        try:
            requirement = pep508.requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(requirement.name) != "torch":
            continue
        try:
            applies = requirement.marker is None or requirement.marker.evaluate(environment)
        except UndefinedEnvironmentName:
            applies = True
        if applies:
            found.append(requirement)
    return found


def joined_torch_requirement(
    requires_dist: Sequence[str], arch: str | None, python: str | None = None
) -> Requirement | None:
    """The one requirement on torch a plain install on Linux `arch` holds the wheel to:
    every `Requires-Dist: torch` line that applies, their specifiers joined as pip joins
    them (`torch>=2.11` and `torch<2.13`: `torch<2.13,>=2.11`); None where none applies.
    ValueError where one names torch by a URL, which pins no version."""
    found = torch_requirements(requires_dist, arch, python)
    if not found:
        return None
    joined = SpecifierSet()
    for requirement in found:
        if requirement.url:
            raise ValueError(f"Requires-Dist {str(requirement)!r} names torch by a URL")
        joined &= requirement.specifier
    return Requirement(f"torch{joined}")


def unparsed_requirements(requires_dist: Sequence[str]) -> list[str]:
    """The `Requires-Dist` lines that are not PEP 508 (pip refuses to install the wheel)."""
    unparsed = []
    for line in requires_dist:
        try:
            pep508.requirement(line)
        except InvalidRequirement:
            unparsed.append(line)
    return unparsed


def pinned_cuda(requirement: Requirement) -> int | None:
    """The CUDA major an `==X.Y.Z+cuNNN` pin of the requirement names, or None."""
    for spec in requirement.specifier:
        if spec.operator in ("==", "===") and "+" in spec.version:
            return label_cuda_major(spec.version.split("+", 1)[1])
    return None


@dataclass(frozen=True, kw_only=True)
class TorchCudaAnswer:
    """The torch releases a requirement admits on a torch index, with the CUDA major each is
    built for there (None: a CPU build), or why the index could not say."""

    index: str
    cuda: Mapping[Version, int | None]
    error: str | None = None


TorchCuda = Callable[[Requirement, str | None], TorchCudaAnswer]
"""(torch requirement, the wheel's arch) -> what the torch index says of the releases it
admits (release.inspection.torchcuda.TorchIndex.cuda_of)."""


def torch_problems(
    elfs: Sequence[ElfFacts],
    requires_dist: Sequence[str],
    *,
    label: str | None,
    arch: str | None,
    torch_cuda: TorchCuda | None,
) -> tuple[list[tuple[str, str]], str | None]:
    """(member, detail) for a wheel that links torch and requires none, or requires a torch
    of another CUDA major than its CUDA libraries; and why the requirement's CUDA could not
    be checked, where it could not (no torch index to ask, or none answered)."""
    linked = links_torch(elfs)
    if not linked:
        return [], None
    member, soname = sorted(linked.items())[0]
    requirements = torch_requirements(requires_dist, arch)
    if len(requirements) > 1 and not any(r.url for r in requirements):
        # pip holds the wheel to all of them at once: `torch<2.13` alone admits a torch of
        # CUDA 12 that `torch>=2.11` beside it leaves out
        requirements = [r for r in [joined_torch_requirement(requires_dist, arch)] if r]
    if not requirements:
        return [
            (member, f"{member} needs {soname}, and METADATA requires no torch: pip installs "
             "it beside any torch, or none")
        ], None  # fmt: skip
    needs = cuda_needs(elfs)
    majors = sorted({m for libraries in needs.values() for m in libraries.values()})
    if len(majors) != 1 or label_cuda_major(label) is not None:
        return [], None  # no CUDA linked, or the cuda-major rule's to judge
    major = majors[0]
    cuda_member, libraries = sorted(needs.items())[0]
    linked_text = f"{cuda_member} needs {sorted(libraries)[0]}"
    problems: list[tuple[str, str]] = []
    for requirement in requirements:
        pinned = pinned_cuda(requirement)
        if pinned is not None:
            if pinned != major:
                problems.append((cuda_member, f"requires {requirement}, and {linked_text}"))
            continue
        if torch_cuda is None:
            return problems, f"the CUDA of {requirement}: no torch index to ask"
        answer = torch_cuda(requirement, arch)
        if answer.error is not None:
            return problems, f"the CUDA of {requirement}: {answer.error}"
        other = [(v, c) for v, c in sorted(answer.cuda.items()) if c is not None and c != major]
        if other:
            named = ", ".join(f"{v} (CUDA {c})" for v, c in other[:3])
            more = f" and {len(other) - 3} more" if len(other) > 3 else ""
            problems.append(
                (cuda_member, f"requires {requirement}, which admits torch {named}{more} on "
                 f"{answer.index}; {linked_text}")
            )  # fmt: skip
    return problems, None
