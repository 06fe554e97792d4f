"""NCCL pins: one set of files per CUDA major, for every client downstream uses.

Every CUDA major with a pin gets its files, CUDA 12 as well as 13: an override applied to
one major only is how a CUDA 12 build once picked up the wrong NCCL. A serving image
installs torch, which pins `nvidia-nccl-cuNN` exactly; what each client can do about it:

- `cuNN.txt`: an override for uv (`UV_OVERRIDE=cuNN.txt` or `--override`): it replaces
  the exact pin during resolution, so one `uv pip install` gives the pinned NCCL.
- `cuNN-reinstall.txt`: for pip, whose constraints cannot override an exact pin: a second
  step after the main install, `pip install --no-deps --force-reinstall -r
  cuNN-reinstall.txt` (what the sglang images do).
- `cuNN-constraints.txt`: `pip -c`, which only narrows: it holds NCCL at the pin where
  nothing pins it otherwise, and fails with ResolutionImpossible against torch's exact pin
  (then use the reinstall file). Its header says so.

The files are written into dist/, published as release assets and served under `nccl/`
in the index. `check_pins_exist` asks an index that each pinned version exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from release.errors import ConfigError, PublishError
from release.matrix import nccl_package, nccl_requirement
from release.remote import simple_index
from release.remote.httpclient import Client, fetch
from release.remote.retry import RetryPolicy
from release.writing import write_together


@dataclass(frozen=True, kw_only=True)
class OverrideFile:
    """A file to write: `name` inside the output directory, and its text."""

    name: str
    text: str
    cuda_major: int
    requirement: str
    purpose: str


def override_files(pins: Mapping[int, object]) -> list[OverrideFile]:
    """The uv override, pip reinstall and pip constraints files of each CUDA major."""
    files: list[OverrideFile] = []
    for major in sorted(pins):
        requirement = nccl_requirement(major, pins[major])  # type: ignore[arg-type]
        files += [
            OverrideFile(
                name=f"cu{major}.txt",
                cuda_major=major,
                requirement=requirement,
                purpose="uv override",
                text=(
                    f"# NCCL for CUDA {major}.x wheels: an override for uv; it replaces any\n"
                    "# exact pin (torch's) during resolution.\n"
                    f"#   UV_OVERRIDE=cu{major}.txt uv pip install ...\n"
                    f"#   uv pip install --override cu{major}.txt ...\n"
                    f"{requirement}\n"
                ),
            ),
            OverrideFile(
                name=f"cu{major}-reinstall.txt",
                cuda_major=major,
                requirement=requirement,
                purpose="pip, second step",
                text=(
                    f"# NCCL for CUDA {major}.x wheels, for pip: pip cannot override an exact\n"
                    "# pin (torch's), so install the pinned NCCL over it after the main install:\n"
                    "#   pip install ...\n"
                    f"#   pip install --no-deps --force-reinstall -r cu{major}-reinstall.txt\n"
                    f"{requirement}\n"
                ),
            ),
            OverrideFile(
                name=f"cu{major}-constraints.txt",
                cuda_major=major,
                requirement=requirement,
                purpose="pip constraints",
                text=(
                    f"# NCCL for CUDA {major}.x wheels: constraints for pip. They only narrow:\n"
                    "# they hold NCCL at this version where nothing else pins it, and fail\n"
                    "# (ResolutionImpossible) against an exact pin such as torch's; use\n"
                    f"# cu{major}-reinstall.txt then.\n"
                    f"#   pip install -c cu{major}-constraints.txt ...\n"
                    f"{requirement}\n"
                ),
            ),
        ]
    return files


def write_override_files(files: list[OverrideFile], out_dir: Path) -> list[Path]:
    written = [out_dir / file.name for file in files]
    write_together([(path, file.text.encode()) for path, file in zip(written, files, strict=True)])
    return written


def check_pins_exist(pins: Mapping[int, object], *, index_url: str, client: Client) -> list[str]:
    """Ask the index for each pinned NCCL; return one problem line per missing version."""
    problems: list[str] = []
    for major in sorted(pins):
        package = nccl_package(major)
        url = simple_index.project_page_url(index_url, package)
        got = fetch(
            client,
            url,
            keep=True,
            accept=simple_index.ACCEPT,
            policy=RetryPolicy(attempts=3, initial_delay=1.0, total=60.0),
        )
        if got.status == 404:
            problems.append(f"{package} is not on {index_url} (CUDA {major}.x has no NCCL there)")
            continue
        if not got.ok or got.body is None:
            raise PublishError(
                f"cannot read {url}: {got.error or f'HTTP {got.status}'}",
                hint="check the network, or pass --index-url",
            )
        try:
            versions = simple_index.versions_listed(
                simple_index.parse_project_page(got.body, got.content_type, url)
            )
        except ValueError as error:
            raise PublishError(f"{url}: unreadable index page: {error}") from None
        if pins[major] not in versions:
            newest = ", ".join(str(v) for v in sorted(versions)[-3:]) or "none"
            problems.append(
                f"{package}=={pins[major]} does not exist on {index_url} "
                f"(newest there: {newest}); fix nccl for CUDA {major}.x in the matrix"
            )
    return problems


def require_pins(pins: Mapping[int, object]) -> None:
    if not pins:
        raise ConfigError(
            ["no CUDA version in the selection pins NCCL"],
            hint="set `nccl:` under defaults or a CUDA version in matrix.yaml",
        )
