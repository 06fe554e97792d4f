"""Files a command writes together, all or nothing (`release init`'s matrix.yaml and
workflow, `release pins`' requirement files, `release nccl`'s override files): each is
staged as a temporary file next to its destination, with every directory it needs made
first, and only when all are staged are they moved in place. Where anything before that
fails (a file where a directory must be, a directory that cannot be written), the staged
files and the directories made for them are removed: nothing of the user's is written or
replaced.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from release.errors import FileError
from release.fsutil import current_umask

WRITE_HINT = "nothing was written; make the path a writable directory (or move what is in the way)"


@dataclass(frozen=True, kw_only=True)
class _Staged:
    path: Path
    temporary: Path
    # a hard link to the file it replaces (a symlink as the link itself), to put back should
    # a later move fail: nothing of it is read, so a link to /dev/zero or a huge file is kept
    # as it is
    backup: Path | None


def write_together(files: Sequence[tuple[Path, bytes]]) -> None:
    """Write every (path, bytes) of `files`, or none of them (a FileError naming the path
    that could not be written)."""
    made: list[Path] = []
    staged: list[_Staged] = []
    try:
        for path, data in files:
            staged.append(_stage(path, data, made))
    except BaseException:
        _remove(staged, made)
        raise
    done: list[_Staged] = []
    try:
        for each in staged:
            os.replace(each.temporary, each.path)
            done.append(each)
    except OSError as error:
        for each in done:  # put back what was moved in place
            _put_back(each)
        _remove([s for s in staged if s not in done], [])
        raise FileError(f"cannot write {error.filename or '?'}: {error.strerror}") from None
    for each in staged:
        if each.backup is not None:
            each.backup.unlink(missing_ok=True)


def _stage(path: Path, data: bytes, made: list[Path]) -> _Staged:
    backup = _existing(path)
    try:
        _make_directories(path.parent, made)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except BaseException as error:
        if backup is not None:
            backup.unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise _refused(path.parent, error) from None
        raise
    temporary = Path(name)
    staged = _Staged(path=path, temporary=temporary, backup=backup)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o666 & ~current_umask())
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException as error:
        _remove([staged], [])
        if isinstance(error, OSError):
            raise _refused(path, error) from None
        raise
    return staged


def _existing(path: Path) -> Path | None:
    """A hard link beside `path` to the file it replaces (None: there is none); anything
    but a regular file or a symlink there is refused (os.replace would put a file where a
    directory or FIFO was)."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        raise _refused(path, error) from None
    if not stat.S_ISREG(mode) and not stat.S_ISLNK(mode):
        raise FileError(f"cannot write {path}: it is not a regular file", hint=WRITE_HINT)
    while True:
        backup = path.with_name(f".{path.name}.{secrets.token_hex(4)}.old")
        try:
            os.link(path, backup, follow_symlinks=False)
        except FileExistsError:
            continue
        except OSError as error:
            raise _refused(path, error) from None
        return backup


def _make_directories(directory: Path, made: list[Path]) -> None:
    """Make `directory` and each missing parent, recording each made (outermost first)."""
    missing = []
    for candidate in (directory, *directory.parents):
        if candidate.is_dir():
            break
        missing.append(candidate)
    for candidate in reversed(missing):
        try:
            candidate.mkdir()
        except OSError as error:
            if isinstance(error, (FileExistsError, NotADirectoryError)):
                raise FileError(
                    f"cannot create the directory {candidate}: a file is in the way",
                    hint=WRITE_HINT,
                ) from None
            raise _refused(candidate, error) from None
        made.append(candidate)


def _refused(path: Path, error: OSError) -> FileError:
    return FileError(f"cannot write {path}: {error.strerror or error}", hint=WRITE_HINT)


def _remove(staged: Sequence[_Staged], made: Sequence[Path]) -> None:
    for each in staged:
        each.temporary.unlink(missing_ok=True)
        if each.backup is not None:
            each.backup.unlink(missing_ok=True)
    for directory in reversed(made):
        with contextlib.suppress(OSError):
            directory.rmdir()


def _put_back(each: _Staged) -> None:
    with contextlib.suppress(OSError):
        if each.backup is None:
            each.path.unlink(missing_ok=True)
        else:
            os.replace(each.backup, each.path)
