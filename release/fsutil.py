"""Small filesystem edges shared by every command, and the one reader of JSON and TOML
documents: every one the tool reads, from disk, a server or a tool's report, goes through
`json_document` or `toml_document` (`read_json` for a file), which bound its size and depth
and read it as UTF-8, so that no document can end a command in a RecursionError or a
UnicodeDecodeError: what is wrong is one line that names where the document came from."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from release.errors import ConfigError, FileError, shown

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

_umask_lock = threading.Lock()


def current_umask() -> int:
    """This process's umask, read without changing it where /proc tells it."""
    try:
        status = Path("/proc/self/status").read_text(encoding="ascii")
        match = re.search(r"^Umask:\s*([0-7]+)$", status, re.MULTILINE)
        if match:
            return int(match.group(1), 8)
    except OSError:
        pass
    with _umask_lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def write_atomic(path: Path, data: bytes, *, mode: int = 0o666) -> None:
    """Write `data` to `path` so that readers see the old file or the new one, never half.
    The file gets `mode` less the umask, as `open()` would give it (mkstemp's 0600 would
    hide dist/ from other users and non-root containers). An OSError names `path`, never
    the temporary file, which is gone."""
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if path.exists() and not path.is_file():
        # os.replace would put a regular file where a device, FIFO or /dev/stdout was
        raise FileError(f"{path}: not a regular file", hint="write to a file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # a file where a directory must be
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path)) from None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as error:
        raise _naming(error, path) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode & ~current_umask())
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as error:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise _naming(error, path) from None
        raise


def _naming(error: OSError, path: Path) -> OSError:
    """`error` (of the same class, for the callers' `except`) about `path`."""
    return type(error)(error.errno, error.strerror or str(error), str(path))


def output_dir_problem(path: Path) -> str | None:
    """Why `path` cannot be (or be created as) a directory this user writes in, or None."""
    if path.exists():
        if not path.is_dir():
            return "is a file, not a directory"
        if not os.access(path, os.W_OK | os.X_OK):
            return "not writable by this user"
        return None
    ancestor = path.absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"cannot be created: {ancestor} is not a directory"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"cannot be created: {ancestor} is not writable by this user"
    return None


# ---------------------------------------------------------------- JSON and TOML documents

# The largest document read: a manifest of a thousand wheels is about 1 MB, PyPI's JSON page
# of a project with ten thousand files about 5 MB.
MAX_DOCUMENT_BYTES = 64 * 2**20
# The deepest nesting read (a Sigstore bundle in GitHub's attestations answer is about 8):
# what is handed on can be walked, dumped and validated recursively without a RecursionError.
MAX_DOCUMENT_DEPTH = 64
# The most values a document may hold, counted before it is parsed (each value but the first
# of a list or a table follows a `,`; a TOML key takes an `=`): PyPI's root JSON page of
# 750,000 projects holds about 2.3 million. 64 MiB of `[{},{},...]` took 1.4 GB to parse.
MAX_DOCUMENT_VALUES = 4_000_000
_BOM = "\ufeff"
# A UTF-16 surrogate on its own: what a JSON `\ud800` or a YAML "\ud800" escape decodes to,
# which is no character and which no UTF-8 text (a file, a terminal) can carry.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class UnreadableDocument(ValueError):
    """A JSON or TOML document that cannot be read: larger than MAX_DOCUMENT_BYTES, not
    UTF-8, nested deeper than MAX_DOCUMENT_DEPTH, or not JSON (TOML). `where` names the file
    or URL, `reason` says what is wrong in one line; the message is both."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where = where
        self.reason = reason


def utf8_text(data: bytes | str, where: str) -> str:
    """`data` as text: UnreadableDocument where it is larger than MAX_DOCUMENT_BYTES or is
    not UTF-8 (naming the first bad byte's line and column)."""
    if len(data) > MAX_DOCUMENT_BYTES:
        raise UnreadableDocument(where, f"larger than {MAX_DOCUMENT_BYTES // 2**20} MiB")
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise not_utf8(where, error) from None


def undecodable_at(error: UnicodeDecodeError) -> tuple[int, int]:
    """The 1-based line and column (in characters, as an editor counts them) of the first
    byte a UnicodeDecodeError of a whole document found not to be UTF-8."""
    data = bytes(error.object)
    line_start = data.rfind(b"\n", 0, error.start) + 1
    line = data.count(b"\n", 0, error.start) + 1
    return line, len(data[line_start : error.start].decode("utf-8")) + 1


def not_utf8(where: str, error: UnicodeDecodeError) -> UnreadableDocument:
    """What a UnicodeDecodeError of a whole document says: the byte, its line and column."""
    line, column = undecodable_at(error)
    byte = bytes(error.object)[error.start]
    return UnreadableDocument(
        where, f"not UTF-8 (byte 0x{byte:02x} at line {line}, column {column})"
    )


def _too_deep(document: object) -> bool:
    """Whether `document` nests lists and objects deeper than MAX_DOCUMENT_DEPTH; walked a
    level at a time, never recursively."""
    level = [document] if isinstance(document, (dict, list)) else []
    depth = 0
    while level:
        depth += 1
        if depth > MAX_DOCUMENT_DEPTH:
            return True
        level = [
            child
            for value in level
            for child in (value.values() if isinstance(value, dict) else value)
            if isinstance(child, (dict, list))
        ]
    return False


def _nested(where: str) -> UnreadableDocument:
    return UnreadableDocument(where, f"nested too deep: more than {MAX_DOCUMENT_DEPTH} levels")


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


class _RepeatedKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's members, refused where a key stands twice: readers disagree on its value
    (Python's keeps the last, others the first), so a document could say one thing to this
    program and another to the next reader."""
    members = dict(pairs)
    if len(members) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _RepeatedKey(key)
            seen.add(key)
    return members


def json_document(
    data: bytes | str, where: str, *, values_at_most: int = MAX_DOCUMENT_VALUES
) -> Any:
    """The JSON document `data` (a UTF-8 byte order mark before it is ignored, as RFC 8259
    lets a reader do); UnreadableDocument naming `where` for anything else: too large, not
    UTF-8, of more than `values_at_most` values, nested too deep, not JSON (NaN and Infinity
    included), or an object that gives one key twice."""
    text = _counted(utf8_text(data, where).removeprefix(_BOM), where, ",[{", values_at_most)
    try:
        document = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except RecursionError:  # deeper than the interpreter's stack, so deeper than the limit
        raise _nested(where) from None
    except json.JSONDecodeError as error:
        reason = f"not JSON: {error.msg} (at line {error.lineno}, column {error.colno})"
        raise UnreadableDocument(where, reason) from None
    except _RepeatedKey as error:
        reason = f"the key {shown(error.key)} stands twice in an object"
        raise UnreadableDocument(where, reason) from None
    except ValueError as error:  # an integer of too many digits, NaN
        raise UnreadableDocument(where, f"not JSON: {error}") from None
    if _too_deep(document):
        raise _nested(where)
    if _SURROGATE_ESCAPE.search(text) and any(map(LONE_SURROGATE.search, _strings(document))):
        raise UnreadableDocument(where, "a string holds a lone surrogate (\\uD800-\\uDFFF)")
    return document


def _counted(text: str, where: str, separators: str, at_most: int) -> str:
    """`text`, unless it holds more than `at_most` of the characters that begin or
    separate its values (some may stand in strings: the count is at least the values')."""
    if sum(map(text.count, separators)) > at_most:
        raise UnreadableDocument(where, f"more than {at_most:,} values, past any such document")
    return text


def _strings(document: object) -> list[str]:
    """Every string of a JSON `document`, keys included; walked a level at a time."""
    found: list[str] = []
    level = [document]
    while level:
        found.extend(value for value in level if isinstance(value, str))
        level = [
            child
            for value in level
            if isinstance(value, (dict, list))
            for child in ([*value.keys(), *value.values()] if isinstance(value, dict) else value)
        ]
    return found


def toml_document(data: bytes | str, where: str) -> dict[str, Any]:
    """The TOML document `data`; UnreadableDocument naming `where` for anything else: too
    large, not UTF-8, nested too deep, not TOML (tomllib's reason, with its line), or a
    byte order mark first (which tomllib, and so pip and build, refuse)."""
    text = _counted(utf8_text(data, where), where, ",[{=", MAX_DOCUMENT_VALUES)
    if text.startswith(_BOM):
        raise UnreadableDocument(where, "not TOML: it starts with a byte order mark")
    try:
        document: dict[str, Any] = tomllib.loads(text)
    except RecursionError:
        raise _nested(where) from None
    except tomllib.TOMLDecodeError as error:
        raise UnreadableDocument(where, f"not TOML: {error}") from None
    if _too_deep(document):
        raise _nested(where)
    return document


def read_document(path: Path) -> bytes:
    """The bytes of the file at `path`, at most one more than MAX_DOCUMENT_BYTES (so that
    `json_document` and `toml_document` refuse a larger one without reading it all); an
    OSError naming it where it is no regular file (a FIFO would block the read forever)."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    with path.open("rb") as handle:
        return handle.read(MAX_DOCUMENT_BYTES + 1)


def read_json(path: Path, what: str, missing_hint: str) -> Any:
    """The JSON document at `path`: a FileError that names the file (and, for a missing
    one, `missing_hint`) where it cannot be read, a ConfigError where it is no JSON."""
    try:
        data = read_document(path)
    except FileNotFoundError:
        raise FileError(f"{path}: no such file", hint=missing_hint) from None
    except OSError as error:
        raise FileError.of(error, f"read the {what}") from None
    try:
        return json_document(data, str(path))
    except UnreadableDocument as error:
        raise ConfigError([f"{path}: not a readable {what}: {error.reason}"]) from None


def json_text(document: object, *, sort_keys: bool = False) -> str:
    """`document` as this project writes a JSON file: indented by two, a newline at the end."""
    return json.dumps(document, indent=2, sort_keys=sort_keys) + "\n"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def remove_unfollowed(path: Path) -> None:
    """Remove what is at `path`, never through a link: a link or a file is unlinked, a
    directory removed with what it holds (what cannot be removed is left)."""
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def linked_part(root: Path, path: Path) -> Path | None:
    """The first path from `root` down to `path` (itself included) that is a symbolic link,
    or None: a path under `root` that matrix.yaml names must stay under it."""
    current = root
    for part in path.relative_to(root).parts:
        current = current / part
        if current.is_symlink():
            return current
    return None


def tree_files(root: Path, *, pruned: Callable[[str], bool]) -> Iterator[tuple[str, Path]]:
    """Every file under `root` as (path relative to it, POSIX; path), in name order,
    through links to directories out of `root`, as a compiler or a backend goes through
    them. A link to a directory in `root` is not followed: its files are given where they
    lie (a staging script's `ln -s $ROOT/third-party/cutlass/include/cutlass` gives them
    once, and the same whether or not an earlier run left the link). Each directory is
    entered once, under the first name that reaches it (links that reach one directory by
    2**24 paths took forever; a loop ends there). A directory whose name `pruned` says is
    left out is not entered. What cannot be listed is left out, as rglob does; a tree of
    any depth is walked without recursion."""
    inside = _resolved(root)
    seen: set[tuple[int, int]] = set()
    # what is left to give, the next last: a file, or a directory to list (is_dir), with
    # its name relative to root
    pending: list[tuple[Path, str, bool]] = [(root, "", True)]
    while pending:
        path, name, is_directory = pending.pop()
        if not is_directory:
            yield name, path
            continue
        try:
            facts = path.stat()
            if (facts.st_dev, facts.st_ino) in seen:
                continue
            seen.add((facts.st_dev, facts.st_ino))
            with os.scandir(path) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError:
            continue
        below: list[tuple[Path, str, bool]] = []
        for entry in entries:
            try:
                is_dir, is_file, is_link = entry.is_dir(), entry.is_file(), entry.is_symlink()
            except OSError:
                continue
            if is_dir and is_link and _within(path / entry.name, inside):
                continue
            if is_dir and not pruned(entry.name):
                below.append((path / entry.name, f"{name}{entry.name}/", True))
            elif is_file:
                below.append((path / entry.name, f"{name}{entry.name}", False))
        pending.extend(reversed(below))


def _resolved(path: Path) -> Path | None:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return None


def _within(link: Path, root: Path | None) -> bool:
    target = _resolved(link)
    return root is not None and target is not None and target.is_relative_to(root)
