"""A libtorch stable-ABI wheel held to the stable ABI by torch-abi-audit, the tool vLLM and
the PyTorch ecosystem gate stable-ABI builds with: every shared object of the wheel takes
from torch only its C shim (`aoti_torch_*`, `torch_*`) and the `torch::stable` /
`torch::headeronly` wrappers, never `at::`, `c10::` or `torch::` internals, and the newest
shim it calls was in torch by the `torch>=X.Y` the wheel will require (torch-abi-audit maps
each shim to the torch release that introduced it).

Whether each undefined symbol is found beside the pinned torch at all stays with
release.inspection.torchabi: torch-abi-audit classifies symbols, it does not resolve them.

torch-abi-audit needs Python 3.11; it runs as the tool it is (`python -m
torch_abi_audit.cli PATH --json`) on the wheel's shared objects, unpacked. Where it is not
installed (this tool on Python 3.10) the auditor answers None and torchabi's own check of
C++ symbols stands in.

Pure: `audit_command`, `audit_problems` (its JSON report). Edge: `torch_abi_auditor`.
"""

from __future__ import annotations

import io
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from packaging.version import Version

from release import proc
from release.fsutil import json_document
from release.inspection.devicecode import is_shared_object
from release.inspection.limitedapi import capped

TOOL = "torch-abi-audit"
MODULE = "torch_abi_audit"
_MISSING = f"No module named {MODULE}"

StableAbiAudit = Callable[[bytes, Version], "list[str] | None"]
"""(a wheel's bytes, its stable target torch) -> its stable-ABI problems, or None where
torch-abi-audit is not installed."""


def audit_command(python: str, target: Path) -> list[str]:
    return [python, "-m", f"{MODULE}.cli", str(target), "--json"]


def _libraries(report: Any) -> list[dict[str, Any]]:
    packages = report.get("packages", [report])
    return [
        library
        for package in packages
        for key in ("extensions", "bundled_libs")
        for library in package.get(key, [])
    ]


def audit_problems(report: str, target: Version, root: str = "") -> list[str]:
    """The problems torch-abi-audit's `--json` report names, one line each: a library it
    could not read, one that uses torch's unstable C++ API (at most LISTED_PER_OBJECT
    symbols), and one whose shims need a torch newer than
    `target` (the TORCH_TARGET_VERSION the wheel will require). Paths are shown relative
    to `root`."""
    try:
        libraries = _libraries(json_document(report, f"{TOOL}'s report"))
    except (ValueError, TypeError, AttributeError):
        return [f"{TOOL} gave no report: {proc.one_line_tail(report)}"]
    if not libraries:
        return [f"{TOOL} found no shared object in the wheel"]
    problems: list[str] = []
    for library in libraries:
        name = str(library.get("path", "?")).removeprefix(root).lstrip("/")
        torch = library.get("torch") or {}
        if library.get("error"):
            problems.append(f"{name}: {TOOL} could not read it: {library['error']}")
            continue
        unstable = [
            f"{symbol} is torch's unstable C++ API: a stable-ABI build may use only the C "
            "shim and torch::stable (it binds the wheel to one torch)"
            for symbol in torch.get("unstable_symbols", [])
        ]
        problems += capped(name, unstable, "more of it")
        needed = _version(torch.get("min_torch_version"))
        if needed is not None and needed > target:
            shims = ", ".join(str(s) for s in torch.get("version_defining_symbols", [])[:3])
            problems.append(
                f"{name}: calls shims of torch {needed} ({shims}), newer than its "
                f"TORCH_TARGET_VERSION {target}: beside torch {target}, which the wheel "
                f"allows (torch>={target}), it fails to load. Raise TORCH_TARGET_VERSION "
                "or stop calling them"
            )
    return problems


def _version(text: object) -> Version | None:
    try:
        return Version(str(text)) if text else None
    except ValueError:  # InvalidVersion, or a number of more digits than int() reads
        return None


def _unpacked(data: bytes, into: Path) -> None:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in archive.infolist():
            if not info.is_dir() and is_shared_object(info.filename):
                archive.extract(info, into)


def torch_abi_auditor(
    python: str, env: Mapping[str, str], runner: proc.Runner = proc.run
) -> StableAbiAudit:
    """A `StableAbiAudit` that runs torch-abi-audit (beside this tool, in `python`) on the
    shared objects of each wheel, unpacked into a temporary directory."""

    def audit(data: bytes, target: Version) -> list[str] | None:
        with tempfile.TemporaryDirectory(prefix="release-torch-abi-") as tmp:
            root = Path(tmp).resolve() / "wheel"
            _unpacked(data, root)
            done = runner(audit_command(python, root), env=env, separate_stderr=True)
        if _MISSING in done.stderr.replace("'", ""):
            return None
        if not done.output.strip():  # 1: a violation, 2: a library it could not read
            return [proc.failure(TOOL, done)]
        if (too_long := proc.too_long(TOOL, done)) is not None:
            return [too_long]
        return audit_problems(done.output, target, str(root))

    return audit
