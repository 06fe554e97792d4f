"""What a CMakeLists.txt says without running CMake: whether it builds CUDA (`project(...
CUDA)`, `enable_language(CUDA)`), the CMAKE_CUDA_ARCHITECTURES it sets (a default, or an
override of the one the build passes), per-target CUDA_ARCHITECTURES, literal `-gencode`
flags, the CUDA libraries it links (`CUDA::nvrtc`), and whether its own first comment
lines say it is there for an IDE's indexing only (DeepGEMM's: "just for CMake-based IDE
(e.g. CLion) indexing, the real compilation is done via JIT"). Pure: text in, a
`CMakeLists` out.

The commands are read as CMake writes them: `name(arguments)` over any number of lines,
`#` comments and `#[[ ]]` bracket comments dropped, quoted arguments kept whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from release.project.places import Place, Said
from release.project.setuppy import BARE_FLAGS, GENCODE, Gencode, gencode_targets

CMAKELISTS = "CMakeLists.txt"
ARCHITECTURES = "CMAKE_CUDA_ARCHITECTURES"
_COMMAND = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_ARGUMENT = re.compile(r'"((?:[^"\\]|\\.)*)"|([^\s()"]+)')
# what a comment says of a CMakeLists.txt that only an IDE reads
_IDE_ONLY = re.compile(
    r"\b(IDEs?|CLion|clangd|indexing|code[- ]completion|not (?:used )?(?:for|to) build\w*)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, kw_only=True)
class Command:
    name: str  # lower case
    arguments: tuple[str, ...]
    line: int


@dataclass(frozen=True, kw_only=True)
class ArchitecturesSet:
    """`set(CMAKE_CUDA_ARCHITECTURES ...)`: its entries (`75-real`, `90a`, ...), and
    whether it replaces the value the build passes (`-D`): a plain `set` outside an
    `if(... CMAKE_CUDA_ARCHITECTURES ...)`, or a cache entry with FORCE."""

    place: Place
    entries: tuple[str, ...]
    overrides: bool


@dataclass(frozen=True, kw_only=True)
class CMakeLists:
    cuda: Place | None  # where CUDA is enabled
    architectures: tuple[ArchitecturesSet, ...]
    target_architectures: tuple[Place, ...]  # set_target_properties(... CUDA_ARCHITECTURES)
    gencode: tuple[Gencode, ...]
    ide_only: Said | None = None  # the first comment line that says an IDE alone reads it
    cuda_libraries: tuple[Said, ...] = ()  # CUDA::X targets linked (X: nvrtc, cublasLt, ...)


def commands(text: str) -> list[Command]:
    """The commands of a CMake file, in order, with the line each starts on."""
    clean = _without_comments(text)
    found: list[Command] = []
    position = 0
    line, counted = 1, 0  # the line of `counted`, the offset lines are counted up to
    while (match := _COMMAND.search(clean, position)) is not None:
        start, depth, index = match.end(), 1, match.end()
        quoted = False
        while index < len(clean) and depth:
            char = clean[index]
            if char == '"' and clean[index - 1] != "\\":
                quoted = not quoted
            elif not quoted and char == "(":
                depth += 1
            elif not quoted and char == ")":
                depth -= 1
            index += 1
        body = clean[start : index - 1]
        arguments = tuple(
            m.group(1) if m.group(1) is not None else m.group(2) for m in _ARGUMENT.finditer(body)
        )
        line += clean.count("\n", counted, match.start())
        counted = match.start()
        found.append(Command(name=match.group(1).lower(), arguments=arguments, line=line))
        position = index
    return found


_BRACKET_COMMENT = re.compile(r"#\[(=*)\[")


def _without_comments(text: str) -> str:
    """`text` with its comments blanked (newlines kept, so lines still count)."""
    out: list[str] = []
    index, quoted = 0, False
    while index < len(text):
        char = text[index]
        if char == '"' and (index == 0 or text[index - 1] != "\\"):
            quoted = not quoted
        if char == "#" and not quoted:
            bracket = _BRACKET_COMMENT.match(text, index)
            if bracket:
                close = text.find(f"]{bracket.group(1)}]", index)
                end = len(text) if close < 0 else close + len(bracket.group(1)) + 2
            else:
                newline = text.find("\n", index)
                end = len(text) if newline < 0 else newline
            out.append("\n" * text.count("\n", index, end))
            index = end
            continue
        out.append(char)
        index += 1
    return "".join(out)


def read_cmakelists(text: str, file: str = CMAKELISTS) -> CMakeLists:
    cuda: Place | None = None
    sets: list[ArchitecturesSet] = []
    targets: list[Place] = []
    gencode: list[Gencode] = []
    libraries: list[Said] = []
    conditions: list[tuple[str, ...]] = []
    for command in commands(text):
        place = Place(file=file, line=command.line)
        words = command.arguments
        if command.name == "if":
            conditions.append(words)
        elif command.name == "endif" and conditions:
            conditions.pop()
        elif command.name in ("project", "enable_language", "check_language"):
            if cuda is None and "CUDA" in words[(1 if command.name == "project" else 0) :]:
                cuda = place
        elif command.name == "set" and words and words[0] == ARCHITECTURES:
            sets.append(_architectures(words[1:], place, conditions))
        elif command.name in ("set_target_properties", "set_property") and (
            "CUDA_ARCHITECTURES" in words
        ):
            targets.append(place)
        if command.name == "target_link_libraries":
            libraries += [
                Said(place=place, value=w.removeprefix("CUDA::"))
                for w in words
                if w.startswith("CUDA::")
            ]
        for word in words:
            if GENCODE.search(word) and word not in BARE_FLAGS:
                cubins, ptx = gencode_targets(word)
                gencode.append(Gencode(place=place, text=word, cubins=cubins, ptx=ptx))
    return CMakeLists(
        cuda=cuda,
        architectures=tuple(sets),
        target_architectures=tuple(targets),
        gencode=tuple(gencode),
        ide_only=_ide_only(text, file),
        cuda_libraries=tuple(libraries),
    )


def _ide_only(text: str, file: str) -> Said | None:
    """The first of the comment lines before the first command that says the file is
    there for an IDE (indexing, clangd, CLion) or not for building."""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return None
        match = _IDE_ONLY.search(stripped)
        if match:
            return Said(place=Place(file=file, line=number), value=stripped.lstrip("# "))
    return None


def _architectures(
    values: tuple[str, ...], place: Place, conditions: list[tuple[str, ...]]
) -> ArchitecturesSet:
    cache = "CACHE" in values
    listed = values[: values.index("CACHE")] if cache else values
    entries = tuple(e for value in listed for e in value.split(";") if e)
    guarded = any(ARCHITECTURES in " ".join(words) for words in conditions)
    overrides = ("FORCE" in values) if cache else not guarded
    return ArchitecturesSet(place=place, entries=entries, overrides=overrides)
