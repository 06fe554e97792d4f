"""What k3_kernels sets up when torch is importable."""

from __future__ import annotations

from . import _torch_api


def register() -> None:
    """Installs the torch fast path, if torch imports."""
    try:
        import torch  # noqa: PLC0415 - optional: only when it is installed
    except ImportError:
        return
    _torch_api.install(_torch_api.from_torch(torch))
