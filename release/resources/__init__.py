"""Scripts that `release` runs in other interpreters (a toolchain's, a torch environment's,
a PEP 517 build environment's): real modules that ruff and mypy read, each run as
`python SCRIPT ARGS` and importing nothing but the standard library.

Its modules:

- `metadata_hook`: A project's metadata from its PEP 517 backend's
  prepare_metadata_for_build_wheel (never a build), as one line of JSON.
- `nvrtc_version`: The versions of an NVRTC and an nvFatbin library, as `MAJOR.MINOR
  MAJOR.MINOR`. python nvrtc_version.py LIBNVRTC LIBNVFATBIN Run by release.toolchain.provision
  to check that the libraries provisioned for a CUDA version are that version; standard library
  only.
- `torch_probe`: What a torch environment holds, as one line of JSON.
"""

from __future__ import annotations

from importlib.resources import as_file, files
from pathlib import Path


def script(name: str) -> Path:
    """The path of the script `name` (`nvrtc_version.py`) as installed with this package."""
    with as_file(files(__name__) / name) as path:
        return Path(path)
