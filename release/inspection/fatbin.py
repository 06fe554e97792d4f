"""What a fatbin holds: the SMs it has cubins for and the virtual archs it has PTX for.

`parse_cuobjdump_listing` is pure; `list_fatbin` runs cuobjdump (through release.proc) on
bytes and reports a fatbin cuobjdump cannot read as an `error`, which the inspection turns
into a problem of that wheel rather than a failure of the whole build.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from release import proc


@dataclass(frozen=True, kw_only=True)
class FatbinContents:
    """Cubin SMs (`"75"`, `"90a"`) and PTX virtual archs (`"100"`) of one fatbin."""

    sms: tuple[str, ...]
    ptx: tuple[str, ...]
    error: str | None = None  # why the fatbin could not be read
    # bytes of each target's code as cuobjdump extracts it (uncompressed): `sm_90`, `ptx_100`
    sizes: tuple[tuple[str, int], ...] = ()


FatbinLister = Callable[[str, Path], FatbinContents]
"""(name inside the wheel, the fatbin copied to a scratch file) -> what it holds."""

_ELF_RE = re.compile(r"^ELF file\s+\d+:\s*\S*?\bsm_([0-9]{1,4}[af]?)\.cubin\s*$", re.MULTILINE)
_PTX_RE = re.compile(r"^PTX file\s+\d+:\s*\S*?\bsm_([0-9]{1,4}[af]?)\.ptx\s*$", re.MULTILINE)


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


_EXTRACTED = re.compile(r"\.sm_([0-9]{1,4}[af]?)\.(cubin|ptx)$")


def target_sizes(files: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """Bytes per target from the files `cuobjdump -xelf all -xptx all` writes
    (`swiglu.sm_90.cubin`, `swiglu.sm_100.ptx`), summed: `sm_90` for cubins, `ptx_100` for
    PTX; cubins first, each kind by SM."""
    labelled = []
    for name, size in files.items():
        found = _EXTRACTED.search(name)
        if found is not None:
            target, kind = found.groups()
            labelled.append((f"sm_{target}" if kind == "cubin" else f"ptx_{target}", size))
    return summed_sizes([labelled])


def _label_key(label: str) -> tuple[int, tuple[int, str]]:
    kind, _, target = label.partition("_")
    return (0 if kind == "sm" else 1, target_key(target))


def summed_sizes(parts: Sequence[Sequence[tuple[str, int]]]) -> tuple[tuple[str, int], ...]:
    """Per-target bytes of several fatbins together: cubins first, each kind by SM."""
    totals: dict[str, int] = {}
    for sizes in parts:
        for label, size in sizes:
            totals[label] = totals.get(label, 0) + size
    return tuple((label, totals[label]) for label in sorted(totals, key=_label_key))


def extract_command(cuobjdump: Path, path: Path) -> list[str]:
    return [str(cuobjdump), "-xelf", "all", "-xptx", "all", str(path)]


def measured(
    path: Path, *, cuobjdump: Path, env: Mapping[str, str], runner: proc.Runner = proc.run
) -> tuple[tuple[str, int], ...]:
    """The bytes per target of the device code in `path` (a fatbin or a shared object),
    extracted by cuobjdump into a directory of its own; none where it cannot extract."""
    with tempfile.TemporaryDirectory(prefix="release-extract-") as tmp:
        done = runner(extract_command(cuobjdump, path), env=env, cwd=Path(tmp))
        if done.returncode != 0:
            return ()
        return target_sizes({f.name: f.stat().st_size for f in Path(tmp).iterdir()})


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
    if (too_long := proc.too_long("cuobjdump", done)) is not None:
        return FatbinContents(sms=(), ptx=(), error=too_long)
    sizes = measured(path, cuobjdump=cuobjdump, env=env, runner=runner)
    return replace(parse_cuobjdump_listing(done.output), sizes=sizes)


def lister(cuobjdump: Path, env: Mapping[str, str], runner: proc.Runner = proc.run) -> FatbinLister:
    """A `FatbinLister` that runs cuobjdump on each fatbin's scratch copy."""

    def list_fatbin(name: str, path: Path) -> FatbinContents:
        return list_file(path, cuobjdump=cuobjdump, env=env, runner=runner)

    return list_fatbin
