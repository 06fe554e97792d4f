"""GPU tests: every test here is skipped, with the reason, where they cannot run.

They need torch with a CUDA GPU and an importable k3_kernels (an installed wheel, or a
wheel-like directory on PYTHONPATH). csrc/tests/gpu/run_on_device.sh sets up a k3 wheel and
sets K3_GPU_TESTS_REQUIRED, which turns a missing torch, GPU or k3_kernels into an error (on
the device a skip would read as success).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent


def gpu_skip_reason() -> str | None:
    try:
        torch: Any = importlib.import_module("torch")
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU visible to torch"
    return None


def k3_skip_reason() -> str | None:
    try:
        importlib.import_module("k3_kernels")
    except ImportError as exc:
        return f"k3_kernels is not importable ({exc}); see csrc/tests/gpu/run_on_device.sh"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    required = bool(os.environ.get("K3_GPU_TESTS_REQUIRED"))
    ours = [item for item in items if HERE in Path(item.path).resolve().parents]
    if required:
        # the k3 modules skip themselves at import without k3_kernels: ask here
        reason = gpu_skip_reason() or k3_skip_reason()
        if reason is not None:
            raise pytest.UsageError(f"GPU tests required but cannot run: {reason}")
        return
    if not ours:
        return
    reason = gpu_skip_reason() or k3_skip_reason()
    if reason is None:
        return
    marker = pytest.mark.skip(reason=reason)
    for item in ours:
        item.add_marker(marker)
