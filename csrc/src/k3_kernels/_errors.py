"""The exceptions of k3_kernels."""

from __future__ import annotations


class KernelError(RuntimeError):
    """Any failure of a k3_kernels call; the message says what and why."""


class KernelArgumentError(KernelError, ValueError):
    """A wrong dtype, shape, stride, device or option; nothing was launched."""


class UnsupportedGPUError(KernelError):
    """The installed wheel has no code this GPU (or driver) can run."""


class DriverError(KernelError):
    """The NVIDIA driver is missing, too old, or reported an error."""
