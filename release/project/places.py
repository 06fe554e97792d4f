"""Where a project file says something: a `Place` (file and line), a `Said` value, the
literal a file gives or the expression that computes it, and a `ProjectChange`, what the
file must change and how. Pure."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
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


# a key set on a line: `name =`, `"name" =`, `'pkg.sub' =`, `wheel.cmake =` (a dotted key)
_KEY = re.compile(r"""\s*(?:"([^"]*)"|'([^']*)'|([A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*))\s*=""")


class TomlPlaces:
    """Where a TOML text sets the keys of `tables`, found in one pass over its lines (each
    asked of the text again made reading a pyproject.toml of 800,000 keys take three times
    tomllib's own parse, and a table of N keys each placed N times as long), and the lines
    of an array's entries, read from its key's line to the next table."""

    def __init__(self, text: str, tables: Collection[str]) -> None:
        self._lines = text.splitlines()
        self._keys: dict[tuple[str, str], int] = {}
        current = ""
        for number, line in enumerate(self._lines, start=1):
            header = _TABLE.match(line) if line.lstrip().startswith("[") else None
            if header:
                current = header.group(1).strip().replace('"', "").replace("'", "")
            elif current in tables and (key := _KEY.match(line)):
                name = next(part for part in key.groups() if part is not None)
                self._keys.setdefault((current, name), number)

    def line(self, table: str, key: str) -> int | None:
        """The line where `key` is set in `[table]`, or None."""
        return self._keys.get((table, key))

    def lines(self, table: str, key: str, needles: Sequence[str]) -> list[int | None]:
        """The line of each of `needles` (the entries of the array `key` holds, in its order),
        each from the line the one before it was found on, up to the next table; one not
        found is placed at the key's line."""
        found = self.found(table, key, needles)
        return [*found, *[self.line(table, key)] * (len(needles) - len(found))]

    def found(self, table: str, key: str, needles: Sequence[str]) -> list[int]:
        """The lines of the leading `needles` found in order from the key's line."""
        start = self.line(table, key)
        found: list[int] = []
        if start is None or not needles:
            return found
        for number in range(start, len(self._lines) + 1):
            line = self._lines[number - 1]
            if number > start and line.lstrip().startswith("[") and _TABLE.match(line):
                break
            while len(found) < len(needles) and needles[len(found)] in line:
                found.append(number)
            if len(found) == len(needles):
                break
        return found


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


# How many of a list of line numbers a message names before it says how many more there are.
LINES_SHOWN = 5


def lines_said(numbers: Sequence[int]) -> str:
    """`line 3`, `lines 3, 4, 9`, or the first LINES_SHOWN and how many more (`lines 3, 4,
    5, 6, 7 and 5,995 more`): a message stays a line however often a file repeats itself."""
    numbers = list(dict.fromkeys(numbers))
    shown = ", ".join(str(n) for n in numbers[:LINES_SHOWN])
    more = f" and {len(numbers) - LINES_SHOWN:,} more" if len(numbers) > LINES_SHOWN else ""
    return f"{'line' if len(numbers) == 1 else 'lines'} {shown}{more}"
