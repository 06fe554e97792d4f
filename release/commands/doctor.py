"""Show, per CUDA version and arch, the device compiler, the host C compiler and the fatbin
inspector that a build would use, and where each comes from.

`release doctor`: per CUDA version and arch, which tools a build will use and from where;
per cell, what its build backend will use and receive, and whether it builds here; what the
cache holds, by part, and the torch environments' budget.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from release.commands.parsing import arguments, common
from release.console import Output
from release.credentials import without_credentials

if TYPE_CHECKING:
    from release.building.cache import CachePart
    from release.toolchain import PinSet, Toolchain, ToolchainPlan, envcache

HELP = "show the toolchain of every CUDA version and arch"
SHARED: tuple[arguments.Shared, ...] = ("matrix", "cells", "output")


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--provision",
        action="store_true",
        help="install missing toolchains and show the versions the tools report",
    )
    arguments.add_toolchain_options(parser)


@dataclass(frozen=True)
class Tool:
    """What a tool is (`nvcc 13.0.88`) and where it comes from."""

    name: str
    source: str


@dataclass(frozen=True)
class DoctorRow:
    cuda: str
    arch: str
    device: Tool
    host_cc: Tool
    inspector: Tool

    KEYS = (
        "cuda",
        "arch",
        "device_compiler",
        "device_compiler_source",
        "host_cc",
        "host_cc_source",
        "inspector",
        "inspector_source",
    )
    COLUMNS = (
        "CUDA",
        "arch",
        "device compiler",
        "from",
        "host C compiler",
        "from",
        "inspector",
        "from",
    )

    def cells(self) -> tuple[str, ...]:
        tools = (self.device, self.host_cc, self.inspector)
        return (self.cuda, self.arch, *(text for t in tools for text in (t.name, t.source)))


def _pinned(pinset: PinSet, plan: ToolchainPlan, present: frozenset[Path]) -> str:
    state = "cached" if plan.install_dir(pinset) in present else "not yet installed"
    return f"PyPI {', '.join(pinset.requirements)} ({state}: {plan.install_dir(pinset)})"


def doctor_rows(
    plans: Sequence[ToolchainPlan],
    *,
    toolchains: Mapping[tuple[str, str], Toolchain] | None = None,
    present: frozenset[Path] = frozenset(),
) -> list[DoctorRow]:
    """One row per (CUDA, arch): what each tool is and where it comes from.

    `toolchains` (keyed by (cuda, target arch)) adds the versions the tools reported;
    without it the pinned versions are shown. `present` are the cache dirs that exist and
    the system toolkits that hold bin/nvcc (`present_dirs`).
    """
    rows = []
    for plan in plans:
        tc = (toolchains or {}).get((plan.cuda, plan.target_arch))
        inspector_version = tc.inspector_version if tc else plan.inspector.pins[0].version
        rows.append(
            DoctorRow(
                cuda=plan.cuda,
                arch=plan.target_arch,
                device=_device(plan, tc, present),
                host_cc=_host_cc(plan, tc, present),
                inspector=Tool(
                    f"cuobjdump {inspector_version}", _pinned(plan.inspector, plan, present)
                ),
            )
        )
    return rows


def _device(plan: ToolchainPlan, tc: Toolchain | None, present: frozenset[Path]) -> Tool:
    if plan.device is None:
        version = tc.device_version if tc else f"CUDA {plan.cuda} expected"
        missing = "" if plan.cuda_home in present else ": no bin/nvcc there, a build stops"
        return Tool(f"nvcc {version}", f"system toolkit {plan.cuda_home}{missing}")
    pinned = plan.device.pins[0].version
    return Tool(
        f"{plan.device_compiler} {tc.device_version if tc else pinned}",
        _pinned(plan.device, plan, present),
    )


def _host_cc(plan: ToolchainPlan, tc: Toolchain | None, present: frozenset[Path]) -> Tool:
    from release.toolchain import zig_target

    if plan.host_cc is None:
        cc_cmd = shlex.join(plan.system_cc or ())
        return Tool(f"{cc_cmd} {tc.cc_version}" if tc else cc_cmd, "system")
    zig_version = tc.cc_version if tc else plan.host_cc.pins[0].version
    return Tool(
        f"zig {zig_version} cc -target {zig_target(plan.target_arch)}",
        _pinned(plan.host_cc, plan, present),
    )


def run(args: argparse.Namespace, out: Output) -> int:
    from release.building import preview
    from release.building.archstop import project_setup_py
    from release.building.cache import cache_usage
    from release.building.settings import SETTING_COLUMNS, SETTING_KEYS, GivenOptions
    from release.commands.parsing import buildopts
    from release.toolchain import envcache, present_dirs
    from release.toolchain.buildenv import cell_plan
    from release.toolchain.cacheroot import toolchain_cache

    matrix = common.load(args.matrix, out, cache_dir=args.cache_dir)
    cells = matrix.select(cuda=args.cuda, arch=args.arch)
    layered = buildopts.layered_from(
        GivenOptions(cache_dir=args.cache_dir, cuda_home=args.cuda_home), matrix, os.environ
    )
    root = toolchain_cache(layered.cache_dir.value)
    cuda_home = layered.cuda_home.value
    by_cell = {c.id: cell_plan(c, cuda_home=cuda_home, cache_dir=root) for c in cells}
    plans = list(dict.fromkeys(by_cell.values()))
    toolchains = None
    if args.provision:
        toolchains = provision_with_progress(plans, out)
    rows = doctor_rows(plans, toolchains=toolchains, present=present_dirs(plans))
    backends = preview.doctor_rows(cells, by_cell)
    backend_keys = preview.BackendRow.KEYS
    settings = layered.rows()
    warnings = list(
        dict.fromkeys(w for c in cells for w in preview.arch_warnings(c, project_setup_py(c)))
    )
    compile_root = layered.compile_cache.value.dir or layered.cache_dir.value / "compile"
    usage = cache_usage(layered.cache_dir.value, compile_root)
    budget = envcache.budget_of(os.environ)
    out.document(
        {
            "cache": str(root),
            "toolchains": [dict(zip(DoctorRow.KEYS, r.cells(), strict=True)) for r in rows],
            "backends": [dict(zip(backend_keys, r.cells(), strict=True)) for r in backends],
            "settings": [dict(zip(SETTING_KEYS, row, strict=True)) for row in settings],
            "cache_usage": {
                "parts": [part.document() for part in usage],
                "torch_environments_budget": {"budget": budget.size, "source": budget.source},
            },
            **({"warnings": warnings} if warnings else {}),
        }
    )
    for warning in warnings:
        out.warning(warning, title="release doctor")
    out.table(list(DoctorRow.COLUMNS), [list(r.cells()) for r in rows], f"toolchains in {root}")
    out.table(
        list(preview.BackendRow.COLUMNS), [list(r.cells()) for r in backends], "build backends"
    )
    out.table(list(SETTING_COLUMNS), [list(row) for row in settings], "settings")
    out.table(
        ["part", "size", "where"],
        [usage_row(part, budget) for part in usage],
        f"cache in {layered.cache_dir.value}",
    )
    return 0


def usage_row(part: CachePart, budget: envcache.Budget) -> list[str]:
    """A part of the cache as doctor's table shows it."""
    from release.toolchain import envcache

    size = envcache.shown_size(part.size)
    if part.count is not None:
        plural = "" if part.count == 1 else "s"
        size += (
            f" in {part.count} environment{plural} (budget {budget.describe()}, "
            f"{budget.source}; the least recently used pruned first)"
        )
    return [part.part, size, str(part.path)]


def provision_with_progress(
    plans: Sequence[ToolchainPlan], out: Output
) -> dict[tuple[str, str], Toolchain]:
    """Provision every plan, showing the downloads (bytes) as they go."""
    from release.toolchain import provision

    environ = without_credentials(os.environ)
    done: dict[tuple[str, str], Toolchain] = {}
    with out.progress("toolchains", total=None, unit="bytes") as advance:
        for plan in plans:
            done[(plan.cuda, plan.target_arch)] = provision(
                plan,
                python=sys.executable,
                env=environ,
                progress=lambda what, got, total: advance(got, total, what),
            )
    return done
