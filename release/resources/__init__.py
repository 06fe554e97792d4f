"""Scripts that `release` runs in other interpreters (a toolchain's, a torch environment's,
a PEP 517 build environment's): real modules that ruff and mypy read, each run as
`python SCRIPT ARGS` and importing nothing but the standard library."""

from __future__ import annotations

from importlib.resources import as_file, files
from pathlib import Path


def script(name: str) -> Path:
    """The path of the script `name` (`nvrtc_version.py`) as installed with this package."""
    with as_file(files(__name__) / name) as path:
        return Path(path)
