"""What a fatbin holds: the SMs it has cubins for and the virtual archs it has PTX for.

`parse_cuobjdump_listing` is pure; `list_fatbin` runs cuobjdump (through release.proc) on
bytes and reports a fatbin cuobjdump cannot read as an `error`, which the inspection turns
into a problem of that wheel rather than a failure of the whole build.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from release import proc


@dataclass(frozen=True, kw_only=True)
class FatbinContents:
    """Cubin SMs (`"75"`, `"90a"`) and PTX virtual archs (`"100"`) of one fatbin."""

    sms: tuple[str, ...]
    ptx: tuple[str, ...]
    error: str | None = None  # why the fatbin could not be read


FatbinLister = Callable[[str, bytes], FatbinContents]
"""(name inside the wheel, fatbin bytes) -> what it holds."""

_ELF_RE = re.compile(r"^ELF file\s+\d+:\s*\S*?\bsm_(\d+[af]?)\.cubin\s*$", re.MULTILINE)
_PTX_RE = re.compile(r"^PTX file\s+\d+:\s*\S*?\bsm_(\d+[af]?)\.ptx\s*$", re.MULTILINE)


def target_key(target: str) -> tuple[int, str]:
    """Order of targets: by SM number, then suffix (`90` < `90a`)."""
    return int(target.rstrip("af")), target


def parse_cuobjdump_listing(output: str) -> FatbinContents:
    """Parse `cuobjdump --list-elf --list-ptx` output (it reads compressed fatbins too)."""

    def ordered(values: list[str]) -> tuple[str, ...]:
        return tuple(sorted(set(values), key=target_key))

    return FatbinContents(
        sms=ordered(_ELF_RE.findall(output)), ptx=ordered(_PTX_RE.findall(output))
    )


def list_command(cuobjdump: Path, path: Path) -> list[str]:
    return [str(cuobjdump), "--list-elf", "--list-ptx", str(path)]


def list_file(
    path: Path, *, cuobjdump: Path, env: Mapping[str, str], runner: proc.Runner = proc.run
) -> FatbinContents:
    """What the fatbin at `path` holds, or why cuobjdump could not say."""
    done = runner(list_command(cuobjdump, path), env=env)
    if done.returncode != 0:
        detail = proc.one_line_tail(done.output + done.stderr)
        return FatbinContents(sms=(), ptx=(), error=f"cuobjdump cannot read it: {detail}")
    return parse_cuobjdump_listing(done.output)


def lister(cuobjdump: Path, env: Mapping[str, str], runner: proc.Runner = proc.run) -> FatbinLister:
    """A `FatbinLister` that runs cuobjdump on each fatbin's bytes."""

    def list_fatbin(name: str, data: bytes) -> FatbinContents:
        with tempfile.TemporaryDirectory(prefix="release-fatbin-") as tmp:
            path = Path(tmp) / Path(name).name
            path.write_bytes(data)
            return list_file(path, cuobjdump=cuobjdump, env=env, runner=runner)

    return list_fatbin
