"""The GPU targets a compile line asks nvcc for, held to the cell's.

torch's cpp_extension drops TORCH_CUDA_ARCH_LIST as soon as a project's own nvcc flags
carry `-gencode` or `-arch`, and a CMake project can set its own flags beside (or instead
of) CMAKE_CUDA_ARCHITECTURES: then the cell's SMs never reach nvcc. The inspection finds
that out after the whole build; a compile line says it before anything compiles.

nvcc's spellings read here: `-gencode` / `--generate-code` `arch=compute_X,code=[sm_X,
compute_X]` (one list or several `code=`), `-arch` / `--gpu-architecture` (`sm_X` alone
is `compute_X` with `code=sm_X,compute_X`; `compute_X` alone is PTX only), `-code` /
`--gpu-code`; each as `-opt=value` or `-opt value`. CMake's CMAKE_CUDA_ARCHITECTURES
(`75-real;100-virtual;90`) carries the cell's own request to the compile's wrapper.

Pure: parsing, the compile a line is, the stop record and its message, and the literal
flags of a setup.py's source (`release build --dry-run`, `release doctor`).
"""

from __future__ import annotations

import itertools
import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from release.fsutil import json_document
from release.targets import GpuTarget

GENCODE = ("-gencode", "--generate-code")
ARCH = ("-arch", "--gpu-architecture")
CODE = ("-code", "--gpu-code")
# nvcc's default target where a line names none: its lowest SM, cubin and PTX
DEFAULT_SM = {12: 52, 13: 75}
# a line that only preprocesses, lists dependencies or asks nvcc about itself
NOT_A_COMPILE = frozenset(
    {"-E", "--preprocess", "-M", "-MM", "--generate-dependencies",
     "--generate-nonsystem-dependencies", "--dryrun", "--version", "-V", "--help", "-h"}
)  # fmt: skip
CUDA_AS = ("-x", "--x")  # `-x cu`: the C/C++ sources of the line are CUDA
HOST_SOURCES = (".c", ".cc", ".cpp", ".cxx", ".c++")
EXIT_STOPPED = 86  # the compile wrapper's exit where the cell was stopped (a marker, not a signal)
STOP_LINE = "release: stopped the cell's build at its first compile"


@dataclass(frozen=True, kw_only=True)
class ArchRequest:
    """The device code asked for: a cubin per target in `cubins`, PTX per target in `ptx`;
    `unknown` holds values that name no one target (`-arch=all`, `native`, `lto_90`)."""

    cubins: frozenset[GpuTarget]
    ptx: frozenset[GpuTarget]
    unknown: tuple[str, ...] = ()

    def describe(self) -> str:
        """`sm_75, sm_80, PTX compute_100` / `sm_80, no PTX`."""
        cubins = ", ".join(t.sm for t in sorted(self.cubins)) or "no cubin"
        ptx = ", ".join(t.compute for t in sorted(self.ptx))
        parts = [cubins, f"PTX {ptx}" if ptx else "no PTX", *self.unknown]
        return ", ".join(parts)

    def differs(self, other: ArchRequest) -> bool:
        return (self.cubins, self.ptx) != (other.cubins, other.ptx) or bool(self.unknown)


@dataclass(frozen=True, kw_only=True)
class ArchFlag:
    """One arch flag of a compile line: its kind (`gencode`, `arch`, `code`), its value,
    and how the line spelled it."""

    kind: str
    value: str
    text: str


def cell_request(sms: Sequence[GpuTarget], ptx: GpuTarget | None) -> ArchRequest:
    """What a cell asks for: a cubin for each of its SMs, PTX for its PTX target."""
    return ArchRequest(cubins=frozenset(sms), ptx=frozenset([ptx] if ptx else []))


def from_cmake(architectures: str) -> ArchRequest:
    """CMAKE_CUDA_ARCHITECTURES as this tool spells it (`75-real;90a-real;100-virtual`; a
    plain `90` is both); ValueError for anything else (`all`, `native`)."""
    cubins: set[GpuTarget] = set()
    ptx: set[GpuTarget] = set()
    for entry in filter(None, (e.strip() for e in architectures.split(";"))):
        number, _, kind = entry.partition("-")
        target = GpuTarget.parse(number)
        if kind not in ("", "real", "virtual"):
            raise ValueError(f"{entry!r} is not a CMAKE_CUDA_ARCHITECTURES entry")
        if kind != "virtual":
            cubins.add(target)
        if kind != "real":
            ptx.add(target)
    return ArchRequest(cubins=frozenset(cubins), ptx=frozenset(ptx))


def to_cmake(request: ArchRequest) -> str:
    """The inverse of `from_cmake` (a cubin with PTX of the same target as a plain entry)."""
    real = [f"{t}-real" for t in sorted(request.cubins - request.ptx)]
    both = [str(t) for t in sorted(request.cubins & request.ptx)]
    virtual = [f"{t}-virtual" for t in sorted(request.ptx - request.cubins)]
    return ";".join([*real, *both, *virtual])


def arch_flags(argv: Sequence[str]) -> tuple[ArchFlag, ...]:
    """Every arch flag of a compile line, in order."""
    found: list[ArchFlag] = []
    options = {**dict.fromkeys(GENCODE, "gencode"), **dict.fromkeys(ARCH, "arch")}
    options.update(dict.fromkeys(CODE, "code"))
    index = 0
    while index < len(argv):
        arg = argv[index]
        name, equals, value = arg.partition("=")
        kind = options.get(name)
        if kind is not None and equals:
            found.append(ArchFlag(kind=kind, value=value, text=arg))
        elif kind is not None and index + 1 < len(argv):
            index += 1
            found.append(ArchFlag(kind=kind, value=argv[index], text=f"{arg} {argv[index]}"))
        index += 1
    return tuple(found)


def _codes(text: str) -> list[str]:
    return [c for c in re.split(r"[\s,]+", text.strip("[]\"' ").replace("]", "")) if c]


def _classify(code: str, cubins: set[GpuTarget], ptx: set[GpuTarget], unknown: list[str]) -> None:
    cleaned = code.strip("[]\"' ").lower()
    try:
        target = GpuTarget.parse(cleaned)
    except ValueError:
        unknown.append(cleaned)
        return
    if cleaned.startswith("sm_"):
        cubins.add(target)
    elif cleaned.startswith("compute_"):
        ptx.add(target)
    else:
        unknown.append(cleaned)


def _gencode(value: str, cubins: set[GpuTarget], ptx: set[GpuTarget], unknown: list[str]) -> None:
    """`arch=compute_80,code=[sm_80,compute_80]` and `arch=compute_80,code=sm_80,code=sm_86`."""
    codes: list[str] = []
    for part in re.split(r",(?=\s*(?:arch|code)=)", value.strip("\"'")):
        key, _, rest = part.strip().partition("=")
        if key == "code":
            codes += _codes(rest)
    for code in codes:
        _classify(code, cubins, ptx, unknown)


def requested(flags: Sequence[ArchFlag]) -> ArchRequest | None:
    """What the flags ask nvcc for, or None where there are none (nvcc's default)."""
    if not flags:
        return None
    cubins: set[GpuTarget] = set()
    ptx: set[GpuTarget] = set()
    unknown: list[str] = []
    for flag in flags:
        if flag.kind == "gencode":
            _gencode(flag.value, cubins, ptx, unknown)
    arches = [f.value.strip("\"' ").lower() for f in flags if f.kind == "arch"]
    codes = [c for f in flags if f.kind == "code" for c in _codes(f.value)]
    for code in codes:
        _classify(code, cubins, ptx, unknown)
    if arches and not codes:
        arch = arches[-1]
        if arch.startswith("sm_"):
            _classify(arch, cubins, ptx, unknown)
            _classify("compute_" + arch.removeprefix("sm_"), cubins, ptx, unknown)
        else:
            _classify(arch, cubins, ptx, unknown)
    return ArchRequest(cubins=frozenset(cubins), ptx=frozenset(ptx), unknown=tuple(unknown))


def default_request(cuda_major: int) -> ArchRequest:
    """What nvcc of a CUDA major builds where a line names no target."""
    target = GpuTarget(DEFAULT_SM.get(cuda_major, DEFAULT_SM[max(DEFAULT_SM)]))
    return ArchRequest(cubins=frozenset([target]), ptx=frozenset([target]))


def compiled_source(argv: Sequence[str]) -> str | None:
    """The one CUDA source a compile line compiles (`*.cu`, or a C/C++ source after `-x cu`);
    None for a line that compiles none, several, or only preprocesses."""
    if any(arg in NOT_A_COMPILE for arg in argv):
        return None
    pairs = list(itertools.pairwise(["", *argv]))
    as_cuda = any(arg in CUDA_AS and following == "cu" for arg, following in pairs) or any(
        arg in ("-xcu", "--x=cu") for arg in argv
    )
    outputs = {"-o", "--output-file", "-MF", "--dependency-output", "-MT", "-MQ", "-include"}
    sources = [
        arg
        for previous, arg in pairs
        if previous not in outputs
        and not arg.startswith("-")
        and (arg.endswith(".cu") or (as_cuda and arg.lower().endswith(HOST_SOURCES)))
    ]
    return sources[0] if len(sources) == 1 else None


def project_name(source: str, *, root: str | None, cwd: str) -> str | None:
    """The source's path inside the project `root` (None: outside it, or in CMake's own
    check projects under a CMakeFiles/ directory); without a root, its path as given."""
    path = PurePosixPath(source if source.startswith("/") else f"{cwd}/{source}")
    if "CMakeFiles" in path.parts:
        return None
    if root is None:
        return source
    try:
        return str(path.relative_to(root))
    except ValueError:
        return None


@dataclass(frozen=True, kw_only=True)
class Stop:
    """A compile whose arch flags ask for other device code than the cell: the record the
    compile wrapper writes and the build reads back."""

    source: str  # the .cu file, inside the project
    flags: tuple[str, ...]  # its arch flags, as the line spelled them
    asked: ArchRequest  # what they ask for (nvcc's default where there are none)
    cell: ArchRequest

    def to_json(self) -> str:
        def plain(request: ArchRequest) -> dict[str, object]:
            return {
                "cubins": [str(t) for t in sorted(request.cubins)],
                "ptx": [str(t) for t in sorted(request.ptx)],
                "unknown": list(request.unknown),
            }

        return json.dumps(
            {"source": self.source, "flags": list(self.flags), "asked": plain(self.asked),
             "cell": plain(self.cell)},
            sort_keys=True,
        )  # fmt: skip

    @classmethod
    def from_json(cls, text: str) -> Stop:
        """ValueError where `text` is not a stop record."""
        data = json_document(text, "the stop record")

        def request(item: dict[str, list[str]]) -> ArchRequest:
            return ArchRequest(
                cubins=frozenset(GpuTarget.parse(t) for t in item["cubins"]),
                ptx=frozenset(GpuTarget.parse(t) for t in item["ptx"]),
                unknown=tuple(str(u) for u in item["unknown"]),
            )

        try:
            return cls(
                source=str(data["source"]),
                flags=tuple(str(f) for f in data["flags"]),
                asked=request(data["asked"]),
                cell=request(data["cell"]),
            )
        except (KeyError, TypeError) as error:
            raise ValueError(f"not a stop record: {error}") from None


def stop_of(
    argv: Sequence[str], *, cell: ArchRequest, root: str | None, cwd: str, cuda_major: int
) -> Stop | None:
    """The stop record of a compile line that asks for other device code than `cell`; None
    for a line that is no compile of the project's, or that asks for exactly the cell's."""
    source = compiled_source(argv)
    name = project_name(source, root=root, cwd=cwd) if source is not None else None
    if name is None:
        return None
    flags = arch_flags(argv)
    asked = requested(flags)
    if asked is None:
        asked = default_request(cuda_major)
    if not asked.differs(cell):
        return None
    texts = tuple(f.text for f in flags) or ("(no arch flag: nvcc's default target)",)
    return Stop(source=name, flags=texts, asked=asked, cell=cell)


def stop_line(stop: Stop) -> str:
    """The one line the wrapper prints where it stops a compile."""
    return (
        f"{STOP_LINE}: {stop.source} asks nvcc for {stop.asked.describe()} "
        f"({' '.join(stop.flags)}), the cell for {stop.cell.describe()}"
    )


# ---------------------------------------------------------------- messages


@dataclass(frozen=True, kw_only=True)
class ArchHints:
    """How a backend hands the cell's targets to the build, for the messages: the variable,
    why a project's own flags win over it, and how a project honours it."""

    variable: str  # "TORCH_CUDA_ARCH_LIST"
    cause: str
    honour: str
    arch_file: str  # the project file that says its own GPU targets, for `release init`
    gencode_sits: str  # where hard-coded -gencode flags compile: "instead of" the variable's
    literal_source: str | None = None  # the project file whose literal flags say it early


def matrix_targets(request: ArchRequest) -> str:
    """The cell's `sms:` and `ptx:` that ask for exactly `request`, ready to paste into
    matrix.yaml (`sms: [80, 90]` and `ptx: 90`, or `ptx: none`)."""
    sms = ", ".join(str(t) for t in sorted(request.cubins))
    line = f"sms: [{sms}]"
    if not request.ptx:
        return f"{line} and ptx: none"
    if len(request.ptx) == 1:
        (ptx,) = request.ptx
        return f"{line} and ptx: {ptx}"
    listed = ", ".join(t.compute for t in sorted(request.ptx))
    return f"{line}; the project builds PTX for {listed}, and a cell holds one PTX target"


def stop_message(stop: Stop, hints: ArchHints, *, remedy_problem: str | None = None) -> str:
    """Why the cell stopped at its first compile, one line each: what the cell asked for,
    what the project's flags ask for, where they come from, the cause, the two ways out.
    `remedy_problem` says why the matrix cannot ask for what the project builds."""
    pasted = matrix_targets(stop.asked)
    first = f"set the cell's targets to exactly what the project builds: {pasted}"
    if remedy_problem is not None:
        first = f"(the matrix cannot say what the project builds: {remedy_problem})"
    return "\n".join(
        [
            "the build compiles other GPU targets than the cell's: stopped at its first "
            "compile, before the rest compiled",
            f"  the cell asks for:           {stop.cell.describe()} (its sms and ptx, "
            f"given to the build as {hints.variable})",
            f"  the project's flags ask for: {stop.asked.describe()}",
            f"  they come from:              {stop.source}, compiled with {' '.join(stop.flags)}",
            f"  why: {hints.cause}",
            f"  either {first}",
            f"  or {hints.honour}",
        ]
    )


def stop_in_log(log_text: str, cell: ArchRequest, *, cuda_major: int) -> Stop | None:
    """The first compile line of a build log (`ninja -v` prints each) whose arch flags ask
    for other device code than `cell`: what the inspection's message adds where it finds
    other targets than the cell's in a wheel built without the compile wrapper's check."""
    for line in log_text.splitlines():
        if "nvcc" not in line or ".cu" not in line:
            continue
        try:
            argv = shlex.split(line)
        except ValueError:
            argv = line.split()
        stop = stop_of(argv, cell=cell, root=None, cwd="/", cuda_major=cuda_major)
        if stop is not None and arch_flags(argv):
            return stop
    return None


# ---------------------------------------------------------------- setup.py, read as text


@dataclass(frozen=True, kw_only=True)
class LiteralFlags:
    """The arch flags a setup.py's source spells out, with the first line they are on."""

    line: int
    flags: tuple[str, ...]

    @property
    def request(self) -> ArchRequest | None:
        parsed: list[ArchFlag] = []
        for text in self.flags:
            cleaned = text.replace('"', "").replace("'", "")
            if cleaned.startswith("arch="):
                cleaned = f"-gencode={cleaned}"
            parsed += arch_flags(cleaned.replace(" ", "=", 1).split())
        return requested(parsed)


def literal_warning(
    path: str, literal: LiteralFlags, cell: ArchRequest, hints: ArchHints
) -> str | None:
    """The dry run's and doctor's warning where a setup.py spells out other targets than
    the cell's (None where they are exactly the cell's)."""
    asked = literal.request
    if asked is not None and not asked.differs(cell):
        return None
    shown = " ".join(literal.flags[:4]) + (" ..." if len(literal.flags) > 4 else "")
    what = f" ({asked.describe()})" if asked is not None else ""
    return (
        f"{path}:{literal.line} passes its own nvcc arch flags {shown}{what}, the cell asks for "
        f"{cell.describe()}: {hints.cause}; the first compile will stop the cell. Set the "
        f"cell's targets to what the project builds"
        # targets to paste only where the flags spell them all (not `compute_{a}`)
        + (f" ({matrix_targets(asked)})" if asked and not asked.unknown and asked.cubins else "")
        + f", or {hints.honour}"
    )
