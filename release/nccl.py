"""NCCL override files: one per CUDA major, for uv (`UV_OVERRIDE`) and pip (constraints).

Every CUDA major with a pin gets its files, CUDA 12 as well as 13: an override applied to
one major only is how a CUDA 12 build once picked up the wrong NCCL.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from release.errors import ConfigError, PublishError
from release.fsutil import write_atomic

DEFAULT_INDEX_URL = "https://pypi.org/simple/"


def nccl_package(cuda_major: int) -> str:
    return f"nvidia-nccl-cu{cuda_major}"


def nccl_requirement(cuda_major: int, version: Version) -> str:
    """The pin as pip and uv read it: `nvidia-nccl-cu12==2.30.7`."""
    return f"{nccl_package(cuda_major)}=={version}"


@dataclass(frozen=True, kw_only=True)
class OverrideFile:
    """A file to write: `name` inside the output directory, and its text."""

    name: str
    text: str
    cuda_major: int
    requirement: str
    purpose: str


def override_files(pins: Mapping[int, Version]) -> list[OverrideFile]:
    """The uv override and pip constraints file for each CUDA major, in major order."""
    files: list[OverrideFile] = []
    for major in sorted(pins):
        requirement = nccl_requirement(major, pins[major])
        files.append(
            OverrideFile(
                name=f"cu{major}.txt",
                cuda_major=major,
                requirement=requirement,
                purpose="uv override",
                text=(
                    f"# NCCL for CUDA {major}.x wheels: an override for uv.\n"
                    f"#   UV_OVERRIDE=cu{major}.txt uv pip install ...\n"
                    f"{requirement}\n"
                ),
            )
        )
        files.append(
            OverrideFile(
                name=f"cu{major}-constraints.txt",
                cuda_major=major,
                requirement=requirement,
                purpose="pip constraints",
                text=(
                    f"# NCCL for CUDA {major}.x wheels: constraints for pip.\n"
                    f"#   pip install -c cu{major}-constraints.txt ...\n"
                    f"{requirement}\n"
                ),
            )
        )
    return files


def write_override_files(files: list[OverrideFile], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for file in files:
        path = out_dir / file.name
        write_atomic(path, file.text.encode())
        written.append(path)
    return written


def versions_in_index(
    project_json: Mapping[str, object], page_html: str | None = None
) -> set[Version]:
    """The versions that a PEP 691 JSON page (or a PEP 503 HTML page) lists files for."""
    names: list[str] = []
    files = project_json.get("files")
    if isinstance(files, list):
        names = [str(f.get("filename", "")) for f in files if isinstance(f, dict)]
    elif page_html is not None:
        names = re.findall(r">\s*([^<>\s]+\.(?:whl|tar\.gz|zip))\s*<", page_html)
    found: set[Version] = set()
    for name in names:
        try:
            if name.endswith(".whl"):
                found.add(parse_wheel_filename(name)[1])
            else:
                found.add(parse_sdist_filename(name)[1])
        except (InvalidWheelFilename, InvalidSdistFilename):
            continue
    return found


def check_pins_exist(
    pins: Mapping[int, Version], *, index_url: str, client: httpx.Client
) -> list[str]:
    """Ask the index for each pinned NCCL; return one problem line per missing version."""
    problems: list[str] = []
    for major in sorted(pins):
        package = nccl_package(major)
        url = f"{index_url.rstrip('/')}/{package}/"
        try:
            response = client.get(
                url,
                headers={"Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"},
                follow_redirects=True,
            )
        except httpx.HTTPError as error:
            raise PublishError(
                f"cannot reach {url}: {type(error).__name__}",
                hint="check the network, or pass --index-url",
            ) from None
        if response.status_code == 404:
            problems.append(f"{package} is not on {index_url} (CUDA {major}.x has no NCCL there)")
            continue
        if response.status_code != 200:
            raise PublishError(f"{url} answered HTTP {response.status_code}")
        content_type = response.headers.get("content-type", "")
        if "json" in content_type:
            versions = versions_in_index(json.loads(response.text))
        else:
            versions = versions_in_index({}, response.text)
        if pins[major] not in versions:
            newest = ", ".join(str(v) for v in sorted(versions)[-3:]) or "none"
            problems.append(
                f"{package}=={pins[major]} does not exist on {index_url} "
                f"(newest there: {newest}); fix nccl for CUDA {major}.x in the matrix"
            )
    return problems


def require_pins(pins: Mapping[int, Version]) -> None:
    if not pins:
        raise ConfigError(
            ["no CUDA version in the selection pins NCCL"],
            hint="set `nccl:` under defaults or a CUDA version in matrix.yaml",
        )
