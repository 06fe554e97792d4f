"""The cache variable a CMakeLists.txt enables CUDA behind, where it does: bitsandbytes'
`set(COMPUTE_BACKEND "cpu" CACHE STRING ...)`, whose `if(${COMPUTE_BACKEND} STREQUAL
"cuda")` sets BUILD_CUDA, whose `if(BUILD_CUDA)` holds `enable_language(CUDA)`; or an
`option(WITH_CUDA ... OFF)` tested directly. Built as it is, such a project compiles no CUDA,
and its wheel fails the inspection; the cell passes the value that enables it as a `-D`
define (scikit-build-core's `cmake.define.NAME`). Read alongside the file's commands
(`SwitchReader.feed`, one pass), one variable between the cache entry and the `if` at most.
Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from release.project.places import Place

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TRUE = frozenset({"1", "ON", "YES", "TRUE", "Y"})

Condition = tuple[str, ...] | None  # an open `if`'s words; None: its else() branch


@dataclass(frozen=True, kw_only=True)
class CudaSwitch:
    """The cache variable whose value decides whether CMake enables CUDA, the value that
    does, and its default (which does not)."""

    name: str
    value: str  # "cuda", or "ON" for a variable tested as a boolean
    default: str
    declared: Place  # its option() or set(... CACHE ...)
    via: str | None = None  # the variable the `if` tests, set from it (BUILD_CUDA)

    @property
    def define(self) -> str:
        """The scikit-build-core config-setting that passes it."""
        return f"cmake.define.{self.name}"


def _truthy(value: str) -> bool:
    """CMake's truth of a constant (a number other than 0 is true too)."""
    upper = value.upper()
    return upper in _TRUE or (upper.isdigit() and int(upper) != 0)


def _variable(word: str) -> str | None:
    """The variable a condition's word names: `NAME` or `${NAME}`."""
    inner = word[2:-1] if word.startswith("${") and word.endswith("}") else word
    return inner if _NAME.fullmatch(inner) else None


def _tested(words: tuple[str, ...]) -> tuple[str, str] | None:
    """(variable, the value that makes the condition true) where it is `NAME` or `NAME
    STREQUAL value`."""
    if len(words) == 1 and (name := _variable(words[0])) is not None:
        return name, "ON"
    if len(words) == 3 and words[1] == "STREQUAL":
        name = _variable(words[0])
        if name is not None and "${" not in words[2]:
            return name, words[2]
    return None


class SwitchReader:
    """What `feed` saw of the file's `if`s, cache entries and `set(NAME ON)`s, and the
    condition CUDA was first enabled under (`cuda_enabled`)."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.stack: list[Condition] = []
        self.cache: dict[str, tuple[str, Place]] = {}  # its default, where it is declared
        self.setters: dict[str, list[Condition]] = {}  # set(NAME ON): the `if` it is in
        self.condition: Condition = ()  # () until CUDA is enabled, or where it is outright

    def feed(self, name: str, words: tuple[str, ...], line: int) -> None:
        if name == "if":
            self.stack.append(words)
        elif name == "elseif" and self.stack:
            self.stack[-1] = words
        elif name == "else" and self.stack:
            self.stack[-1] = None
        elif name == "endif" and self.stack:
            self.stack.pop()
        elif name == "option" and words:
            default = words[2] if len(words) > 2 else "OFF"
            self.cache.setdefault(words[0], (default, Place(file=self.file, line=line)))
        elif name == "set" and "CACHE" in words[1:]:
            default = words[1] if words.index("CACHE") > 1 else ""
            self.cache.setdefault(words[0], (default, Place(file=self.file, line=line)))
        elif name == "set" and len(words) == 2 and _truthy(words[1]) and self.stack:
            self.setters.setdefault(words[0], []).append(self.stack[-1])

    def cuda_enabled(self) -> None:
        """CUDA is enabled here (the first time): under the innermost open `if`."""
        self.condition = self.stack[-1] if self.stack else ()

    def switch(self) -> CudaSwitch | None:
        """The cache variable CUDA was enabled behind, where its default leaves it off."""
        if not self.condition:
            return None
        tested = _tested(self.condition)
        if tested is None:
            return None
        name, value = tested
        if name in self.cache:
            return self._off_by_default(name, value, via=None)
        if value != "ON":
            return None
        for outer in self.setters.get(name, ()):
            found = _tested(outer) if outer else None
            if found is not None and found[0] in self.cache:
                return self._off_by_default(found[0], found[1], via=name)
        return None

    def _off_by_default(self, name: str, value: str, *, via: str | None) -> CudaSwitch | None:
        default, declared = self.cache[name]
        if "${" in default:  # computed: whether it enables CUDA is not known here
            return None
        if _truthy(default) if value == "ON" else default == value:
            return None
        return CudaSwitch(name=name, value=value, default=default, declared=declared, via=via)
