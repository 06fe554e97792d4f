"""`release plan`: every cell of the matrix, the wheel it makes, where that wheel goes, and
what the destination already holds under its name.

Pure core: the state of one file from the publisher seam's decision (`built_state`) or, for
a cell not built yet, from what the destination lists (`unbuilt_state`); the rows, the
verdict (`failure`) and the renderings (table rows, Markdown, JSON). The command
(release/commands/plan.py) does the reading: the matrix, dist/, the toolchain cache and
read-only requests to each destination.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from release.console import markdown_table
from release.errors import ConfigError, ConflictError, PublishError, ReleaseError, ToolchainError
from release.manifest import DestinationRef, WheelEntry
from release.matrix import Cell
from release.publish.base import Action, FileDecision, RemoteFile


class State(enum.Enum):
    NEW = "new"
    IDENTICAL = "identical (skip)"
    CONFLICT = "CONFLICT"
    REFUSED = "refused"
    ABSENT = "absent"
    PRESENT = "present (cannot compare: not built)"


@dataclass(frozen=True, kw_only=True)
class ToolchainVerdict:
    ok: bool
    text: str  # "nvcc from PyPI (nvidia-cuda-nvcc==13.0.88), provisioned" or the problem


@dataclass(frozen=True, kw_only=True)
class PlanRow:
    cell: str
    wheel: str
    built: bool
    size: int | None
    destination: str  # "pypi (pypi)"
    url: str  # where the file is, or will be, downloadable
    state: State
    reason: str
    toolchain: ToolchainVerdict


@dataclass(frozen=True, kw_only=True)
class NcclLine:
    file: str
    requirement: str
    purpose: str


@dataclass(frozen=True, kw_only=True)
class ReleasePlan:
    project: str
    version: str
    rows: tuple[PlanRow, ...]
    nccl: tuple[NcclLine, ...]
    problems: tuple[str, ...] = ()

    def with_state(self, *states: State) -> tuple[PlanRow, ...]:
        return tuple(r for r in self.rows if r.state in states)

    @property
    def missing_toolchains(self) -> tuple[PlanRow, ...]:
        return tuple(r for r in self.rows if not r.toolchain.ok)


COLUMNS = ("cell", "wheel", "size", "destination", "state", "final URL", "toolchain")


def unbuilt_entry(cell: Cell) -> WheelEntry:
    """What the manifest would say about a cell before it is built: its name and
    destination; no size or digest yet."""
    return WheelEntry.of(
        cell, filename=cell.wheel_filename, size=0, sha256="", sms=(), ptx=None, toolchain={}
    )


def built_state(decision: FileDecision) -> tuple[State, str]:
    """A built file's state, from the publisher seam's decision (never with --replace)."""
    states = {
        Action.UPLOAD: State.NEW,
        Action.SKIP: State.IDENTICAL,
        Action.CONFLICT: State.CONFLICT,
        Action.REFUSED: State.REFUSED,
        Action.REPLACE: State.CONFLICT,
    }
    state = states[decision.action]
    reason = "" if decision.reason in ("new", "same sha256") else decision.reason
    return state, reason


def unbuilt_state(remote: RemoteFile | None) -> tuple[State, str]:
    if remote is None:
        return State.ABSENT, ""
    if remote.state != "uploaded":
        return State.ABSENT, f"leftover of a failed upload ({remote.state})"
    return State.PRESENT, ""


def tag_problems(cells: Sequence[Cell], version: str, tag: str) -> list[str]:
    """Why a pushed tag does not release this matrix's version, if it does not."""
    tags = sorted({t for c in cells if (t := DestinationRef.of(c).tag) is not None})
    if tags:
        return [
            f"--expect-tag {tag}: the GitHub release of version {version} is tagged {t}"
            for t in tags
            if t != tag
        ]
    if tag.removeprefix("v") != version:
        return [f"--expect-tag {tag}: the matrix releases version {version}"]
    return []


def summary(plan: ReleasePlan) -> str:
    counts: dict[str, int] = {}
    for row in plan.rows:
        counts[row.state.value] = counts.get(row.state.value, 0) + 1
    parts = [f"{counts[s.value]} {s.value}" for s in State if s.value in counts]
    built = sum(1 for r in plan.rows if r.built)
    text = f"{len(plan.rows)} cells, {built} built: " + (", ".join(parts) or "nothing")
    if plan.missing_toolchains:
        text += f"; {len(plan.missing_toolchains)} missing toolchain"
    return text


def _size(row: PlanRow) -> str:
    return "not built" if row.size is None else f"{row.size / 2**20:.2f} MiB"


def _state(row: PlanRow) -> str:
    return row.state.value + (f": {row.reason}" if row.reason else "")


def table_rows(plan: ReleasePlan) -> list[list[str]]:
    return [
        [r.cell, r.wheel, _size(r), r.destination, _state(r), r.url, r.toolchain.text]
        for r in plan.rows
    ]


def markdown(plan: ReleasePlan) -> str:
    lines = [
        f"## Release plan: {plan.project} {plan.version}",
        "",
        summary(plan),
        "",
        markdown_table(COLUMNS, table_rows(plan)),
    ]
    if plan.nccl:
        lines += [
            "NCCL override files:",
            "",
            *(f"- `{n.file}`: `{n.requirement}` ({n.purpose})" for n in plan.nccl),
            "",
        ]
    lines += [f"- problem: {p}" for p in plan.problems]
    return "\n".join(lines) + "\n"


def to_json(plan: ReleasePlan) -> dict[str, Any]:
    return {
        "project": plan.project,
        "version": plan.version,
        "ok": failure(plan) is None,
        "cells": [
            {
                "cell": r.cell,
                "wheel": r.wheel,
                "built": r.built,
                "size": r.size,
                "destination": r.destination,
                "url": r.url,
                "state": r.state.value,
                "reason": r.reason,
                "toolchain_ok": r.toolchain.ok,
                "toolchain": r.toolchain.text,
            }
            for r in plan.rows
        ],
        "nccl_files": [vars(n) for n in plan.nccl],
        "problems": list(plan.problems),
    }


def failure(plan: ReleasePlan) -> ReleaseError | None:
    """The error the plan ends with: conflicts first, then missing toolchains, refused
    files and a tag that does not match; None when the release can go ahead."""
    conflicts = plan.with_state(State.CONFLICT)
    missing = plan.missing_toolchains
    refused = plan.with_state(State.REFUSED)
    parts = []
    if conflicts:
        parts.append(f"{len(conflicts)} CONFLICT ({', '.join(r.wheel for r in conflicts)})")
    if missing:
        parts.append(f"{len(missing)} missing toolchain ({', '.join(r.cell for r in missing)})")
    if refused:
        parts.append(f"{len(refused)} refused ({', '.join(r.wheel for r in refused)})")
    if conflicts:
        return ConflictError(
            "; ".join(parts),
            hint="a destination holds other bytes under the same filename: bump the version "
            "before tagging (GitHub assets can be replaced with `release publish --replace`)",
        )
    if missing:
        return ToolchainError(
            "; ".join(parts),
            hint="use a CUDA version with a known PyPI toolchain, or point --cuda-home at a "
            "toolkit; `release doctor` shows every toolchain",
        )
    if refused:
        return PublishError("; ".join(parts), hint="fix the refused files (reasons above)")
    if plan.problems:
        return ConfigError(plan.problems, hint="tag the version the matrix releases")
    return None
