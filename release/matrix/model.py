"""The validated release matrix: the cells `release` builds, each with everything it is
built with and where its wheel goes. Frozen; made only by release.matrix.load's loader, which
checks every rule first, so nothing downstream re-checks a field.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from packaging.version import Version

from release.backends import BuildRecipe, backend_for
from release.errors import ConfigError, as_given
from release.matrix.compilecache import CompileCache
from release.matrix.destination import Destination, IndexDestination, S3Destination
from release.matrix.spec import DeviceCode, Fallout
from release.targets import Arch, CudaVersion, GpuTarget
from release.wheelfile import WheelName


@dataclass(frozen=True, kw_only=True)
class Project:
    name: str
    version: Version
    path: Path


@dataclass(frozen=True, kw_only=True)
class Copy:
    """One place a cell's wheel is published: a destination and the local label the wheel
    carries there. A cell builds one wheel, its first copy's; each other copy is that
    wheel relabelled (release.building.relabel), never a build of its own."""

    destination: Destination
    local_label: str | None


@dataclass(frozen=True, kw_only=True)
class Commit:
    """The commit a nightly builds: its id and its committer time (seconds since 1970),
    which gives the nightly its dev version and orders the channel."""

    sha: str
    time: int


DEFAULT_KEEP = 60  # PyTorch's test-infra keeps 60 nightly versions (KEEP_THRESHOLD)


@dataclass(frozen=True, kw_only=True)
class Nightly:
    """The nightly channel of matrix.yaml (release.matrix.nightly checks it)."""

    destination: S3Destination
    keep: int = DEFAULT_KEEP
    keep_list: tuple[Version, ...] = ()
    keep_list_object: str | None = None  # a key under the destination's prefix
    fallout: Fallout = "archive"
    archive_prefix: str = "archive/"


def nccl_package(cuda_major: int) -> str:
    return f"nvidia-nccl-cu{cuda_major}"


def nccl_requirement(cuda_major: int, version: Version) -> str:
    """The NCCL pin as pip and uv read it: `nvidia-nccl-cu12==2.30.7`."""
    return f"{nccl_package(cuda_major)}=={version}"


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One wheel: a (CUDA version, CPU architecture) pair with everything it is built with."""

    project: Project
    cuda: CudaVersion
    arch: Arch
    sms: tuple[GpuTarget, ...]
    ptx: GpuTarget | None
    local_label: str | None
    destination: Destination
    nccl: Version | None
    manylinux: str
    build: BuildRecipe = field(default_factory=BuildRecipe)
    torch: Version | None = None  # the exact torch a torch cell builds against
    torch_index: str | None = None  # where that torch comes from (None: pip's index)
    python: str | None = None  # the CPython of a cp3X-cp3X cell ("3.11")
    abi3: str | None = None  # the Py_LIMITED_API floor of a cp3X-abi3 cell ("3.10")
    # a stable-ABI torch cell built against a newer torch than the oldest its wheel admits,
    # on purpose (matrix.yaml's torch-build: newer)
    newer_torch: bool = False
    compress_mode: str | None = None  # nvcc's --compress-mode (None: the backend's own)
    # "none": the wheel carries no device code (no sms, no ptx: a JIT-first project)
    device_code: DeviceCode = "fatbin"
    excluded_sms: tuple[GpuTarget, ...] = ()  # what matrix.yaml's exclude removed from sms
    # the image with the CUDA toolkit it builds in where PyPI has no nvcc for its CUDA
    # version (cuda[...].toolkit-image of its arch; None: the tool's own pin)
    toolkit_image: str | None = None
    # the copies after the first (`destination` and `local_label` are the first's, the
    # wheel the build makes): the same wheel relabelled for each of these
    relabelled: tuple[Copy, ...] = ()

    @property
    def copies(self) -> tuple[Copy, ...]:
        """Every place its wheel goes: the built copy first, then the relabelled ones."""
        return (Copy(destination=self.destination, local_label=self.local_label), *self.relabelled)

    def as_copy(self, copy: Copy) -> Cell:
        """The cell as `copy` publishes it: that copy's destination, label, version and
        wheel filename, with no other copy."""
        return replace(
            self, destination=copy.destination, local_label=copy.local_label, relabelled=()
        )

    @property
    def id(self) -> str:
        """`13.0-x86_64`; a torch cell adds its torch and, unless abi3, its Python:
        `13.0-x86_64-torch2.11.0-cp312`."""
        parts = [f"{self.cuda}-{self.arch}"]
        if self.torch is not None:
            parts.append(f"torch{self.torch}")
        if self.python is not None and self.abi3 is None:
            parts.append(self.python_tag)
        return "-".join(parts)

    @property
    def host_only(self) -> bool:
        """Its wheel carries no device code (`device-code: none`)."""
        return self.device_code == "none"

    @property
    def python_tag(self) -> str:
        floor = self.abi3 or self.python
        return "py3" if floor is None else "cp" + floor.replace(".", "")

    @property
    def abi_tag(self) -> str:
        if self.abi3 is not None:
            return "abi3"
        return "none" if self.python is None else self.python_tag

    @property
    def version(self) -> Version:
        base = self.project.version.public
        return Version(f"{base}+{self.local_label}" if self.local_label else base)

    @property
    def platform_tag(self) -> str:
        return f"manylinux_{self.manylinux}_{self.arch}"

    @property
    def wheel_name(self) -> WheelName:
        return WheelName.compose(
            self.project.name,
            self.version,
            python=self.python_tag,
            abi=self.abi_tag,
            platform=self.platform_tag,
        )

    @property
    def wheel_filename(self) -> str:
        return self.wheel_name.filename


# what a gpu-gate command may name in braces; {torch} is a torch cell's torch (empty for
# other cells), so that the command installs the wheel beside exactly that torch
GATE_PLACEHOLDERS = ("wheel", "expect_arch", "torch")
_PLACEHOLDER = re.compile(r"\{(" + "|".join(GATE_PLACEHOLDERS) + r")\}")


@dataclass(frozen=True, kw_only=True)
class GpuRunner:
    labels: tuple[str, ...]
    sms: tuple[GpuTarget, ...]
    arch: Arch

    @property
    def name(self) -> str:
        return "/".join(self.labels)


@dataclass(frozen=True, kw_only=True)
class GateRun:
    """One run of the GPU test command: a cell's wheel as built (`build="cubin"`) or a
    PTX-only build of it for its lowest SM (`build="ptx"`), whose code the driver JIT-compiles
    so that the oldest GPU's code path runs on the runner's newer GPU."""

    cell: Cell
    build: Literal["cubin", "ptx"]

    @property
    def built_cell(self) -> Cell:
        """The cell as this run builds it: itself, or PTX only for its lowest SM. torch
        adds PTX only to an SM it also builds (`7.5+PTX`): its cell keeps that one cubin,
        which a GPU of a newer major cannot load, so the driver JIT-compiles the PTX."""
        if self.build == "cubin":
            return self.cell
        sms = (self.lowest,) if backend_for(self.cell.build.backend).ptx_beside_cubin else ()
        return replace(self.cell, sms=sms, ptx=self.lowest)

    @property
    def lowest(self) -> GpuTarget:
        targets = [*self.cell.sms, *((self.cell.ptx,) if self.cell.ptx else ())]
        return GpuTarget(min(t.number for t in targets))

    @property
    def expect_arch(self) -> str:
        """The `__CUDA_ARCH__` the loaded code must report: the PTX target's, for a PTX-only
        build; empty (the tests derive it) for the cubins."""
        return str(self.lowest.number * 10) if self.build == "ptx" else ""

    @property
    def name(self) -> str:
        return f"{self.cell.id} {self.build}" + (
            f" (compute_{self.lowest.number})" if self.build == "ptx" else ""
        )

    def unrunnable_on(self, runner: GpuRunner) -> str | None:
        """Why no GPU of one of the runner's SMs runs the code this run loads, or None. A
        driver loads a cubin on a GPU of its major at or above its SM (an `a` cubin on its
        own SM only) and JIT-compiles PTX for a GPU at or above its compute target."""
        cell = self.built_cell
        if cell.host_only:
            return None
        for gpu in runner.sms:
            if not any(_cubin_runs(sm, gpu) for sm in cell.sms) and not (
                cell.ptx is not None and _ptx_runs(cell.ptx, gpu)
            ):
                code = ", ".join(
                    [sm.sm for sm in cell.sms] + ([cell.ptx.compute] if cell.ptx else [])
                )
                return (
                    f"a GPU of SM {gpu.number} runs none of its code ({code}): give the runner "
                    "a GPU the cell builds for, or the cell an SM or PTX target this GPU runs"
                )
        return None


def _cubin_runs(sm: GpuTarget, gpu: GpuTarget) -> bool:
    if sm.suffix == "a":
        return sm.number == gpu.number
    return sm.number // 10 == gpu.number // 10 and sm.number <= gpu.number


def _ptx_runs(ptx: GpuTarget, gpu: GpuTarget) -> bool:
    return _cubin_runs(ptx, gpu) if ptx.suffix else ptx.number <= gpu.number


_GATE_BUILDS: tuple[Literal["cubin", "ptx"], ...] = ("cubin", "ptx")


@dataclass(frozen=True, kw_only=True)
class GpuGate:
    """The GPU tests every release runs before publishing (see matrix_spec.GpuGateSpec)."""

    runners: tuple[GpuRunner, ...]
    command: str

    def runner(self, name: str) -> GpuRunner:
        for runner in self.runners:
            if runner.name == name:
                return runner
        known = ", ".join(r.name for r in self.runners)
        raise ConfigError([f"no GPU runner {name!r} in gpu-gate (runners: {known})"])

    def runs(self, runner: GpuRunner, cells: Sequence[Cell]) -> tuple[GateRun, ...]:
        """What `runner` tests: every cell of its CPU arch, as built and (where it carries
        device code) PTX-only."""
        return tuple(
            GateRun(cell=cell, build=build)
            for cell in cells
            if cell.arch == runner.arch
            # a wheel without device code has no PTX to build alone
            for build in _GATE_BUILDS[: 1 if cell.host_only else 2]
        )

    def command_line(self, run: GateRun, wheel: Path) -> list[str]:
        """The command's words with {wheel}, {expect_arch} and {torch} put in; a placeholder
        stays one word whatever its value holds (spaces, quotes), as the command runs with
        no shell. One that hands a word to a shell (`sh -c '... {wheel}'`) gets the values
        as they are: a wheel's name holds no character a shell reads (WheelName refuses
        one), a torch version is PEP 440's, and the dist directory is the caller's."""
        torch = str(run.cell.torch) if run.cell.torch is not None else ""
        values = {"wheel": str(wheel), "expect_arch": run.expect_arch, "torch": torch}
        return [
            _PLACEHOLDER.sub(lambda m: values[m.group(1)], word)
            for word in shlex.split(self.command)
        ]


@dataclass(frozen=True, kw_only=True)
class Matrix:
    path: Path
    project: Project
    cells: tuple[Cell, ...]
    destinations: Mapping[str, Destination]
    gpu_gate: GpuGate | None = None
    # the git-index destinations, which list github destinations' wheels (none is a cell's)
    indexes: Mapping[str, IndexDestination] = field(default_factory=dict)
    compile_cache: CompileCache = field(default_factory=CompileCache)
    nightly: Nightly | None = None
    commit: Commit | None = None  # set on the nightly matrix of one commit only

    def select(self, *, cuda: Sequence[str] = (), arch: Sequence[str] = ()) -> tuple[Cell, ...]:
        """The cells matching the filters (empty filter = all); a filter that matches nothing
        is an error naming what exists."""
        problems = []
        known_cuda = sorted({str(c.cuda) for c in self.cells})
        known_arch = sorted({c.arch for c in self.cells})
        for value in cuda:
            if value not in known_cuda:
                given = as_given(value)  # short, one line: as typed
                problems.append(
                    f"--cuda {given}: no cell has CUDA {given} in {self.path.name} "
                    f"(it has {', '.join(known_cuda)})"
                )
        for value in arch:
            if value not in known_arch:
                given = as_given(value)
                problems.append(
                    f"--arch {given}: no cell has arch {given} in {self.path.name} "
                    f"(it has {', '.join(known_arch)})"
                )
        if problems:
            raise ConfigError(problems)
        selected = tuple(
            c
            for c in self.cells
            if (not cuda or str(c.cuda) in cuda) and (not arch or c.arch in arch)
        )
        if not selected:
            raise ConfigError(
                ["the filters select no cell"], hint="run `release matrix` to see the cells"
            )
        return selected

    def nccl_pins(self, cells: Iterable[Cell] | None = None) -> dict[int, Version]:
        """NCCL version per CUDA major, for the given cells (default: all)."""
        return {c.cuda.major: c.nccl for c in (self.cells if cells is None else cells) if c.nccl}


def cell_dict(cell: Cell) -> dict[str, Any]:
    """A cell as plain JSON-able data."""
    return {
        "id": cell.id,
        "cuda": str(cell.cuda),
        "arch": cell.arch,
        "sms": [str(s) for s in cell.sms],
        "ptx": str(cell.ptx) if cell.ptx else None,
        "local_label": cell.local_label,
        "version": str(cell.version),
        "wheel": cell.wheel_filename,
        "destination": cell.destination.name,
        "destination_kind": cell.destination.kind,
        "nccl": str(cell.nccl) if cell.nccl else None,
        "manylinux": cell.manylinux,
        "backend": cell.build.backend,
        # torch cells only, so that the documents of other cells stay as they were
        **({"torch": str(cell.torch)} if cell.torch is not None else {}),
        **({"torch_index": cell.torch_index} if cell.torch_index is not None else {}),
        **({"python": cell.python} if cell.python is not None else {}),
        **({"abi3": cell.abi3} if cell.abi3 is not None else {}),
        **({"torch_build": "newer"} if cell.newer_torch else {}),
        **({"compress_mode": cell.compress_mode} if cell.compress_mode is not None else {}),
        **({"device_code": cell.device_code} if cell.host_only else {}),
        **({"excluded_sms": [str(s) for s in cell.excluded_sms]} if cell.excluded_sms else {}),
        **({"toolkit_image": cell.toolkit_image} if cell.toolkit_image is not None else {}),
        # a cell published to more than one place: every copy, the built one first
        **({"copies": [copy_dict(cell, c) for c in cell.copies]} if cell.relabelled else {}),
    }


def copy_dict(cell: Cell, copy: Copy) -> dict[str, Any]:
    """One copy of a cell's wheel as plain JSON-able data."""
    seen = cell.as_copy(copy)
    return {
        "destination": copy.destination.name,
        "destination_kind": copy.destination.kind,
        "local_label": copy.local_label,
        "version": str(seen.version),
        "wheel": seen.wheel_filename,
    }
