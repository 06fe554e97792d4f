"""Whether a setup.py builds for libtorch's stable ABI, read with `ast` without running it:
the `-DTORCH_TARGET_VERSION=0x...` define it passes, the torch release that value names,
and which compilers it reaches (`extra_compile_args`' "cxx" and "nvcc" lists, through the
names they are built from). A define that reaches one compiler and not the other lets that
half use torch API newer than the target: the wheel then claims `torch>=X.Y` and breaks
beside X.Y. `release init` and `release build --dry-run` say this with `stable_abi_note`.

Pure: a parsed setup.py's index (release.project.pysource) in, a `StableAbi` (or None) out,
in time linear in the file's size.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from packaging.version import Version

from release.project.places import Place, ProjectChange
from release.project.pysource import SourceIndex, in_file_order

DEFINE = "TORCH_TARGET_VERSION"
_FLAG = re.compile(r"-D\s*TORCH_TARGET_VERSION\b")
# the value as C reads a literal: digits, an integer suffix (ULL), then no letter or digit
_VALUE = re.compile(r"TORCH_TARGET_VERSION=(0[xX][0-9a-fA-F]+|[0-9]+)[uUlL]*(?![0-9A-Za-z_.])")
_NUMBER = re.compile(r"0[xX][0-9a-fA-F]+|[0-9]+")
COMPILERS = ("cxx", "nvcc")


def target_version(value: str) -> Version | None:
    """The torch release a TORCH_TARGET_VERSION value names: torch's TORCH_ABI_VERSION
    layout, major in the top byte, then minor, then patch (`0x020A000000000000` is 2.10).
    None where the value is not a C integer literal of 64 bits (`0020...` is octal to C,
    and holds digits octal has not; one of more digits does not fit a uint64_t)."""
    number = _c_integer(value)
    if number is None:
        return None
    major, minor, patch = (number >> 56) & 0xFF, (number >> 48) & 0xFF, (number >> 40) & 0xFF
    return Version(f"{major}.{minor}" + (f".{patch}" if patch else ""))


def _c_integer(text: str) -> int | None:
    """`text` read as C reads an integer literal without suffix (hex `0x`, octal `0`,
    decimal), or None where it is none or does not fit 64 bits."""
    try:
        if text[:2] in ("0x", "0X"):
            number = int(text[2:], 16)
        elif text.startswith("0"):
            number = int(text, 8)
        else:
            number = int(text, 10)
    except ValueError:  # 8 or 9 in an octal literal, or more digits than Python reads
        return None
    return number if number < 1 << 64 else None


@dataclass(frozen=True, kw_only=True)
class StableAbi:
    """The TORCH_TARGET_VERSION define of a setup.py and the compilers it reaches."""

    place: Place
    target: Version | None  # None: the value is computed
    reaches: tuple[str, ...]  # of COMPILERS
    condition: Place | None = None  # the `if` it is defined under, if any

    @property
    def requirement(self) -> str | None:
        """What the wheel will require at least: `torch>=X.Y` of the target (the build raises
        it to the first torch of the cell's CUDA major: release.inspection.stabletorch)."""
        return f"torch>={self.target}" if self.target is not None else None


def stable_abi_in(index: SourceIndex, file: str) -> StableAbi | None:
    """The first TORCH_TARGET_VERSION define of a parsed setup.py (None: none), as
    release.project.setuppy's `read_setup_py` reads it."""
    macro = _define_macro(index)
    if macro is not None:
        line, target = macro
        return StableAbi(place=Place(file=file, line=line), target=target, reaches=COMPILERS)
    defines = _defines(index)
    define = next(iter(defines), None)
    if define is None:
        return None
    match = _VALUE.search(_text(define))
    # the compiler takes the last of two defines, and the build reads what it compiled
    # with; here, two values (or one C cannot read) name no target
    values = {found.group(1) for d in defines if (found := _VALUE.search(_text(d)))}
    literal = isinstance(define, ast.Constant) and match is not None and len(values) == 1
    assignments = _assignments(index)
    passed = {id(d) for d in defines}  # any of its defines: one a compiler's list spells anew
    holders = _holders(assignments, passed)
    by_name = _by_name(assignments)
    reaches = tuple(
        compiler
        for compiler in COMPILERS
        if any(
            _reaches(by_name, value, passed, holders) for value in _compile_args(index, compiler)
        )
    )
    guard = _guard(index, define)
    return StableAbi(
        place=Place(file=file, line=define.lineno),
        target=target_version(match.group(1)) if literal and match else None,
        reaches=reaches,
        condition=Place(file=file, line=guard.lineno) if guard is not None else None,
    )


def _guard(index: SourceIndex, node: ast.AST) -> ast.If | None:
    """The innermost `if` whose body holds `node`: up from it, the first `if` it is in the
    body of (not the test, not the `else`)."""
    child, parent = node, index.parents.get(id(node))
    while parent is not None:
        if isinstance(parent, ast.If) and any(part is child for part in parent.body):
            return parent
        child, parent = parent, index.parents.get(id(parent))
    return None


def _define_macro(index: SourceIndex) -> tuple[int, Version | None] | None:
    """`define_macros=[("TORCH_TARGET_VERSION", "0x...")]`: setuptools passes it to every
    compile, the C++ and the CUDA ones alike. (line, target) of the first."""
    for node in index.of(ast.Tuple):
        if (
            isinstance(node, ast.Tuple)
            and len(node.elts) == 2
            and isinstance(node.elts[0], ast.Constant)
            and node.elts[0].value == DEFINE
        ):
            value = node.elts[1]
            text = value.value if isinstance(value, ast.Constant) else None
            number = text if isinstance(text, str) and _NUMBER.fullmatch(text) else None
            return node.lineno, target_version(str(number)) if number else None
    return None


def stable_abi_note(abi: StableAbi) -> str:
    """What init and the dry run say of a stable-ABI project: its target, and the
    requirement its wheel gets."""
    target = f"torch {abi.target}" if abi.target is not None else "a computed torch release"
    note = f"{abi.place}: libtorch's stable ABI, TORCH_TARGET_VERSION {target}"
    if abi.condition is not None:
        note += f" (where the condition at {abi.condition} holds)"
    if abi.requirement is not None:
        note += (
            ": one wheel a platform for every torch from it (its wheel requires "
            f"{abi.requirement}, or from the first torch of its cell's CUDA major on the torch "
            "index)"
        )
    return note


def stable_abi_crossing(abi: StableAbi) -> ProjectChange | None:
    """Where the define reaches one compiler and not the other (None: both, or neither is
    known): init's change."""
    missing = [c for c in COMPILERS if c not in abi.reaches]
    if not abi.reaches or not missing:
        return None
    return ProjectChange(
        place=abi.place,
        text=f"TORCH_TARGET_VERSION reaches the {abi.reaches[0]} compiler but not "
        f'{missing[0]} (extra_compile_args["{missing[0]}"]): that half of the extension can '
        f"use torch API newer than the target, and the wheel, which will require "
        f"{abi.requirement or 'torch>=the target'}, then breaks beside that torch. Pass the "
        f"define to both",
        fix='add the define to extra_compile_args["cxx"] and ["nvcc"] alike',
    )


def stable_abi_warning(abi: StableAbi) -> str | None:
    """The crossing as the dry run warns of it: its place and text."""
    crossing = stable_abi_crossing(abi)
    return f"{crossing.place}: {crossing.text}" if crossing is not None else None


def _defines(index: SourceIndex) -> list[ast.expr]:
    """The strings (f-strings whole) that pass the define, in the order of the file."""
    strings = [
        n
        for n in index.of_kinds(ast.JoinedStr, ast.Constant)
        if isinstance(n, ast.JoinedStr)
        or (isinstance(n, ast.Constant) and isinstance(n.value, str))
    ]
    inner = {id(v) for n in strings if isinstance(n, ast.JoinedStr) for v in n.values}
    return in_file_order(n for n in strings if id(n) not in inner and _FLAG.search(_text(n)))


def _text(node: ast.AST) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_text(v) if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return ""


_Assignments = list[tuple[str, ast.AST]]  # (a name, a value assigned or added to it)


def _assignments(index: SourceIndex) -> _Assignments:
    """Every assignment of the file, in the order of the walk."""
    found: _Assignments = []
    for node in index.of_kinds(ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Call):
        target, value = _assignment(node)
        if target is not None and value is not None:
            found.append((target, value))
    return found


def _by_name(assignments: _Assignments) -> dict[str, list[ast.AST]]:
    found: dict[str, list[ast.AST]] = {}
    for target, value in assignments:
        found.setdefault(target, []).append(value)
    return found


def _holders(assignments: _Assignments, defines: set[int]) -> set[str]:
    """The names that hold the define: assigned a value that holds it, or appended,
    extended or added to with one (to a depth of three names)."""
    holders: set[str] = set()
    for _ in range(3):
        for target, value in assignments:
            if _holds(value, defines, holders):
                holders.add(target)
    return holders


def _assignment(node: ast.AST) -> tuple[str | None, ast.AST | None]:
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        return (target.id if isinstance(target, ast.Name) else None), node.value
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
        return node.target.id, node.value
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("append", "extend", "insert")
        and isinstance(node.func.value, ast.Name)
    ):
        return node.func.value.id, node
    return None, None


def _holds(value: ast.AST, defines: set[int], holders: set[str]) -> bool:
    """Whether `value` holds one of the define nodes (by id) or a name that holds one."""
    return any(
        id(n) in defines or (isinstance(n, ast.Name) and n.id in holders) for n in ast.walk(value)
    )


def _compile_args(index: SourceIndex, compiler: str) -> list[ast.expr]:
    """The values of the `compiler` key of every dict in the file (extra_compile_args)."""
    return [
        value
        for node in index.of(ast.Dict)
        if isinstance(node, ast.Dict)
        for key, value in zip(node.keys, node.values, strict=True)
        if isinstance(key, ast.Constant) and key.value == compiler
    ]


def _reaches(
    assignments: dict[str, list[ast.AST]], value: ast.expr, defines: set[int], holders: set[str]
) -> bool:
    if _holds(value, defines, holders):
        return True
    names = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
    return any(
        _holds(assigned, defines, holders)
        for name in names
        for assigned in assignments.get(name, ())
    )
