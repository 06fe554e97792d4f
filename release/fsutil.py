"""Small filesystem edges shared by every command."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import tempfile
import threading
from pathlib import Path
from typing import Any

from release.errors import ConfigError, FileError

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


def read_json(path: Path, what: str, missing_hint: str) -> Any:
    """The JSON document at `path`: a FileError that names the file (and, for a missing
    one, `missing_hint`) where it cannot be read, a ConfigError where it is no JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileError(f"{path}: no such file", hint=missing_hint) from None
    except OSError as error:
        raise FileError.of(error, f"read the {what}") from None
    except ValueError as error:
        raise ConfigError([f"{path}: not a readable {what}: {error}"]) from None


def json_text(document: object, *, sort_keys: bool = False) -> str:
    """`document` as this project writes a JSON file: indented by two, a newline at the end."""
    return json.dumps(document, indent=2, sort_keys=sort_keys) + "\n"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
