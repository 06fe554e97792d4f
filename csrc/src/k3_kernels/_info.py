"""What this installation holds (build info, fatbin contents) and what the GPU runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._errors import KernelError
from ._fatbin import covers
from ._native import KERNEL_STEMS, GpuInfo, native, read_build_info, read_fatbin


@dataclass(frozen=True)
class FatbinReport:
    stem: str
    size: int
    sms: tuple[int, ...]
    ptx: tuple[int, ...]


@dataclass(frozen=True)
class GpuReport:
    gpu: GpuInfo
    coverage: dict[str, str | None]  # stem -> how it runs, None = no code

    @property
    def covered(self) -> bool:
        return all(v is not None for v in self.coverage.values())


@dataclass(frozen=True)
class Info:
    build: dict[str, Any]
    fatbins: tuple[FatbinReport, ...]
    driver_version: int | None
    gpus: tuple[GpuReport, ...]
    driver_problem: str | None


def build_info() -> dict[str, Any]:
    """The contents of _build_info.json, written when the wheel was built."""
    return read_build_info()


def info() -> Info:
    """Build info, the SMs and PTX actually found in each fatbin, and GPU coverage."""
    fatbins = []
    contents = {}
    for stem in KERNEL_STEMS:
        data, parsed = read_fatbin(stem)
        contents[stem] = parsed
        fatbins.append(FatbinReport(stem, len(data), parsed.sms, parsed.ptx))
    driver_version = None
    problem = None
    gpus = []
    try:
        nat = native()
        driver_version = nat.driver_version()
        for index in range(nat.device_count()):
            gpu = nat.device(index)
            coverage = {s: covers(c, gpu.major, gpu.minor) for s, c in contents.items()}
            gpus.append(GpuReport(gpu, coverage))
    except KernelError as exc:
        problem = str(exc)
    return Info(read_build_info(), tuple(fatbins), driver_version, tuple(gpus), problem)


def loaded_arches(device: int = 0) -> dict[str, int]:
    """Per kernel library: the __CUDA_ARCH__ of the code the driver runs on `device`.

    A PTX-only compute_75 build reports 750 on any GPU: the driver JIT-compiled the
    SM75 code paths.
    """
    nat = native()
    return {stem: nat.arch_probe(stem, device) for stem in KERNEL_STEMS}


def loaded_arch(device: int = 0) -> int:
    """The __CUDA_ARCH__ of the loaded kernels on `device` (all libraries must agree)."""
    arches = loaded_arches(device)
    values = set(arches.values())
    if len(values) != 1:
        raise KernelError(f"the kernel libraries were built for different archs: {arches}")
    return values.pop()
