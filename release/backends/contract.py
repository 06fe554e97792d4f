"""csrc's own backend: the RELEASE_* contract of csrc/BUILDING.md. The project builds its
device code once per CUDA version (NVRTC or nvcc, into the shared device cache) and its
host library with zig for either CPU arch; the local label is set at build time. Its nvcc
compiles go through the compile cache (RELEASE_COMPILE_LAUNCHER) behind that device cache;
NVRTC, a library, cannot.
"""

from __future__ import annotations

from collections.abc import Sequence

from release.backends.archflags import ArchHints
from release.backends.base import BuildContext, BuildInputs, CellTargets
from release.backends.recipe import BackendName
from release.targets import GpuTarget


class ContractBackend:
    name: BackendName = "release"
    needs_nvcc = False
    owned_env = frozenset(
        {
            "RELEASE_SMS",
            "RELEASE_PTX",
            "RELEASE_TARGET_ARCH",
            "RELEASE_LOCAL_LABEL",
            "RELEASE_CUDA_VERSION",
            "RELEASE_DEVICE_COMPILER",
            "RELEASE_CUDA_HOME",
            "RELEASE_CC",
            "RELEASE_COMPRESS_MODE",
            "RELEASE_COMPILE_LAUNCHER",
        }
    )
    owned_settings = owned_env
    torch_axes = False
    ptx_beside_cubin = False
    labels_by_rewriting = False
    tag_remedy = ""

    arch_hints: ArchHints | None = None  # csrc's fatbins are compiled from the cell's targets alone

    def environment(self, cell: CellTargets) -> None:
        return None  # an isolated PEP 517 environment of the tool's Python

    def uses_compile_cache(self, device_compiler: str) -> bool:
        # nvcc's compiles through sccache, behind csrc's own device cache (a hit there
        # compiles nothing); NVRTC is a library, so its cells keep that device cache only
        return device_compiler == "nvcc"

    def setting_problem(self, name: str, value: str) -> str | None:
        return None

    def targets_problem(self, sms: Sequence[GpuTarget], ptx: GpuTarget | None) -> str | None:
        return None

    def inputs(self, cell: CellTargets, context: BuildContext) -> BuildInputs:
        env = dict(context.toolchain_env)
        env.update(
            {
                "RELEASE_SMS": ";".join(str(s) for s in cell.sms),
                "RELEASE_PTX": str(cell.ptx) if cell.ptx else "",
                "RELEASE_TARGET_ARCH": cell.arch,
                "RELEASE_LOCAL_LABEL": cell.local_label or "",
                "RELEASE_CUDA_VERSION": cell.cuda,
                "RELEASE_DEVICE_CACHE": str(context.device_cache),
                "RELEASE_DEVICE_LOG": str(context.device_log),
                "RELEASE_JOBS": str(context.jobs),
            }
        )
        if cell.compress_mode is not None:
            env["RELEASE_COMPRESS_MODE"] = cell.compress_mode
        if context.compile_launcher is not None:
            env["RELEASE_COMPILE_LAUNCHER"] = str(context.compile_launcher)
        return BuildInputs(env=env, config_settings={})

    def describe(self, cell: CellTargets, build_tools: str) -> tuple[str, str]:
        return (
            "csrc's backend (zig for the host library)",
            "RELEASE_SMS, RELEASE_PTX, RELEASE_TARGET_ARCH, RELEASE_LOCAL_LABEL, "
            + (f"RELEASE_COMPRESS_MODE {cell.compress_mode}, " if cell.compress_mode else "")
            + "...",
        )
