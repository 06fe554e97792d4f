"""Where a project file says something: a `Place` (file and line), a `Said` value, the
literal a file gives or the expression that computes it, and a `ProjectChange`, what the
file must change and how. Pure."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class Place:
    """A file of the project (relative to its directory) and a 1-based line, if known."""

    file: str
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    def at(self, directory: Path) -> str:
        """The place with the file's path under `directory`."""
        where = str(directory / self.file)
        return f"{where}:{self.line}" if self.line else where


@dataclass(frozen=True, kw_only=True)
class Said:
    """One value as a project file says it: `value` where it is a literal (or a constant
    that holds one, at `via`), else `expression`, the code that computes it."""

    place: Place
    value: str | None = None
    expression: str = ""
    via: Place | None = None

    @property
    def literal(self) -> bool:
        return self.value is not None

    def source(self) -> str:
        """`setup.py:74`, or `setup.py:74 (library_name, setup.py:19)` through a constant."""
        return f"{self.place} ({self.expression}, {self.via})" if self.via else str(self.place)


# a table's header: `[name]`, `[[name]]`, a comment after it (no nested quantifiers: a line
# of `[` and 60,000 spaces is read in time linear in its length)
_TABLE = re.compile(r"^\s*\[\[?([^\]]*)\]\]?\s*(#.*)?$")


def toml_line(text: str, table: str, key: str, needle: str | None = None) -> int | None:
    """The line where `key` is set in `[table]` of a TOML text (`needle`: the first line at
    or after it that holds that text, for an entry of a multi-line array), or None."""
    start, found = _toml_scan(text, table, key, [needle] if needle is not None else [])
    if needle is None:
        return start
    return found[0] if found else None


def toml_lines(text: str, table: str, key: str, needles: Sequence[str]) -> list[int | None]:
    """`toml_line` of each of `needles` (the entries of one array, in its order), read in one
    pass: each from the line the one before it was found on; one not found is placed at the
    key's line."""
    start, found = _toml_scan(text, table, key, needles)
    return [*found, *[start] * (len(needles) - len(found))]


def _toml_scan(
    text: str, table: str, key: str, needles: Sequence[str]
) -> tuple[int | None, list[int]]:
    """The key's line, and the lines of the leading needles found in order after it."""
    current = ""
    start: int | None = None
    found: list[int] = []
    key_line = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
    for number, line in enumerate(text.splitlines(), start=1):
        header = _TABLE.match(line) if line.lstrip().startswith("[") else None
        if header:
            if start is not None:
                break
            current = header.group(1).strip().replace('"', "").replace("'", "")
            continue
        if start is None and current == table and key_line.match(line):
            start = number
        if start is not None:
            while len(found) < len(needles) and needles[len(found)] in line:
                found.append(number)
            if len(found) == len(needles):
                break
    return start, found


def ini_line(text: str, section: str, key: str) -> int | None:
    """The line where `key` is set in `[section]` of an INI text (setup.cfg), or None."""
    current = ""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            current = stripped[1:-1].strip()
        elif current == section and re.match(rf"^{re.escape(key)}\s*[=:]", stripped):
            return number
    return None


@dataclass(frozen=True, kw_only=True)
class ProjectChange:
    """What a project must change before the matrix decides its build, where, and how."""

    place: Place
    text: str
    fix: str

    def line(self) -> str:
        return f"{self.place}: {self.text}; fix: {self.fix}"
