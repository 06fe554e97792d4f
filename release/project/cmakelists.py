"""What a CMakeLists.txt says without running CMake: whether it builds CUDA (`project(...
CUDA)`, `enable_language(CUDA)`), the CMAKE_CUDA_ARCHITECTURES it sets (a default, or an
override of the one the build passes), per-target CUDA_ARCHITECTURES, literal `-gencode`
flags, the CUDA libraries it links (`CUDA::nvrtc`), the cache variable it enables CUDA
behind (release.project.cmakeswitch), and whether its own first comment
lines say it is there for an IDE's indexing only (DeepGEMM's: "just for CMake-based IDE
(e.g. CLion) indexing, the real compilation is done via JIT"). Pure: text in, a
`CMakeLists` out.

The commands are read as CMake writes them: `name(arguments)` over any number of lines,
`#` comments and `#[[ ]]` bracket comments dropped, quoted arguments kept whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from release.project.cmakeswitch import CudaSwitch, SwitchReader
from release.project.native import CUDA_LIBRARIES
from release.project.places import Place, Said
from release.project.setuppy import BARE_FLAGS, GENCODE, Gencode, gencode_targets

CMAKELISTS = "CMakeLists.txt"
ARCHITECTURES = "CMAKE_CUDA_ARCHITECTURES"
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


# the libraries a target may link by their own name (the driver's `cuda` among them)
LINKED_BY_NAME = CUDA_LIBRARIES | {"cuda"}


@dataclass(frozen=True, kw_only=True)
class CMakeLists:
    cuda: Place | None  # where CUDA is enabled
    architectures: tuple[ArchitecturesSet, ...]
    target_architectures: tuple[Place, ...]  # set_target_properties(... CUDA_ARCHITECTURES)
    gencode: tuple[Gencode, ...]
    ide_only: Said | None = None  # the first comment line that says an IDE alone reads it
    # the CUDA libraries linked, as written: CUDA::X targets (CUDA::nvrtc, CUDA::cuda_driver),
    # or a library's own name (sgl-kernel's `c10 cuda cublas cublasLt`: -lcuda, -lcublas, ...)
    cuda_libraries: tuple[Said, ...] = ()
    cuda_switch: CudaSwitch | None = None  # a cache variable CUDA is enabled behind


# What a CMake file holds, one piece at a time: a command of plain words (most are), a
# quoted argument, a comment (a bracket comment `#[==[ ... ]==]` or one to the line's end),
# a parenthesis, or a word (an unquoted argument, or a command's name). A command of plain
# words that is not one (a quote or a comment in it) is given up at the first such
# character, the rest of the alternatives begin with their own characters and none of them
# can fail once begun (an unclosed quote or bracket comment runs to the file's end, as
# CMake reads it): the file is read in one pass of the regular expression engine, linear
# in its size, and a quoted argument of 25 MB costs its own length, where matching it a
# character at a time kept the engine's state for each (3.6 GB).
_PIECE = re.compile(
    r"(?P<simple>(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*\((?P<plain>[^()\"#\\]*)\))"
    r'|(?P<quoted>"(?:[^"\\]+|\\.?)*(?P<closed>")?)'
    r"|(?P<comment>#(?:\[(?P<level>=*)\[.*?(?:\](?P=level)\]|\Z)|[^\n]*))"
    r"|(?P<open>\()|(?P<close>\))"
    r'|(?P<word>[^\s()"#]+)',
    re.DOTALL,
)
_NAME_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"


def commands(text: str) -> list[Command]:
    """The commands of a CMake file, in order, with the line each starts on."""
    return list(each_command(text))


def each_command(text: str) -> Iterator[Command]:
    """`commands`, one at a time (a reader keeps only what it needs of each): a name, then
    `(` (after white space, if any), arguments (parentheses within kept in balance, their
    arguments the command's), `)`."""
    name, start = "", -1  # the word before a `(` outside a command, where it starts
    depth, arguments = 0, list[str]()
    line, counted = 1, 0  # the line of `counted`, the offset lines are counted up to
    for piece in _PIECE.finditer(text):
        kind = piece.lastgroup
        if kind == "simple":  # `name(plain words)`, the most of any file, read at once
            words = [piece.group("name"), *piece.group("plain").split()]
            if depth:
                arguments += words
            else:
                line += text.count("\n", counted, piece.start())
                counted = piece.start()
                yield Command(name=words[0].lower(), arguments=tuple(words[1:]), line=line)
            name = ""
            continue
        if depth:
            if kind == "word":
                arguments.append(piece.group())
            elif kind == "quoted":
                closed = piece.group("closed") is not None
                arguments.append(text[piece.start() + 1 : piece.end() - closed])
            elif kind == "open":
                depth += 1
            elif kind == "close":
                depth -= 1
                if not depth:
                    line += text.count("\n", counted, start)
                    counted = start
                    yield Command(name=name, arguments=tuple(arguments), line=line)
            continue
        if kind == "open" and name:
            depth, arguments = 1, []
            continue
        if kind == "word":
            # the identifier the word ends with (`x.set(` calls `set`, as CMake's own
            # scanner would stop there), read from its end: linear in the word's length
            word = piece.group()
            tail = word[len(word.rstrip(_NAME_CHARS)) :].lstrip("0123456789")
            name, start = tail.lower(), piece.end() - len(tail)
            continue
        name = ""


def read_cmakelists(text: str, file: str = CMAKELISTS) -> CMakeLists:
    cuda: Place | None = None
    sets: list[ArchitecturesSet] = []
    targets: list[Place] = []
    gencode: list[Gencode] = []
    libraries: list[Said] = []
    # each open `if(...)`: whether it names CMAKE_CUDA_ARCHITECTURES; and how many do (a count
    # kept, not the open ifs searched again at each set: 100,000 nested ifs were quadratic)
    conditions: list[bool] = []
    guards = 0
    switches = SwitchReader(file)
    for command in each_command(text):
        place = Place(file=file, line=command.line)
        words = command.arguments
        switches.feed(command.name, words, command.line)
        if command.name == "if":
            conditions.append(any(ARCHITECTURES in word for word in words))
            guards += conditions[-1]
        elif command.name == "endif" and conditions:
            guards -= conditions.pop()
        elif command.name in ("project", "enable_language", "check_language"):
            if cuda is None and "CUDA" in words[(1 if command.name == "project" else 0) :]:
                cuda = place
                switches.cuda_enabled()
        elif command.name == "set" and words and words[0] == ARCHITECTURES:
            sets.append(_architectures(words[1:], place, guarded=guards > 0))
        elif command.name in ("set_target_properties", "set_property") and (
            "CUDA_ARCHITECTURES" in words
        ):
            targets.append(place)
        if command.name == "target_link_libraries":
            libraries += [
                Said(place=place, value=w)
                for w in words
                if w.startswith("CUDA::") or w in LINKED_BY_NAME
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
        cuda_switch=switches.switch(),
    )


def _ide_only(text: str, file: str) -> Said | None:
    """The first of the comment lines before the first command that says the file is
    there for an IDE (indexing, clangd, CLion) or not for building."""
    for number, line in enumerate(_lines(text), start=1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return None
        match = _IDE_ONLY.search(stripped)
        if match:
            return Said(place=Place(file=file, line=number), value=stripped.lstrip("# "))
    return None


def _lines(text: str) -> Iterator[str]:
    """The lines of `text`, one at a time: a reader that stops at the first command splits
    no more of the file than it reads."""
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        yield text[start:end]
        start = end + 1


def _architectures(values: tuple[str, ...], place: Place, *, guarded: bool) -> ArchitecturesSet:
    cache = "CACHE" in values
    listed = values[: values.index("CACHE")] if cache else values
    entries = tuple(e for value in listed for e in value.split(";") if e)
    overrides = ("FORCE" in values) if cache else not guarded
    return ArchitecturesSet(place=place, entries=entries, overrides=overrides)
