"""A wheel without code for this GPU: a clear UnsupportedGPUError, from Python's fatbin
check and from the host library itself. Runs only against such a build
(K3_EXPECT_UNSUPPORTED=1, e.g. a wheel with only sm_80 cubins on an SM90 GPU)."""

from __future__ import annotations

import ctypes
import os

import pytest

torch = pytest.importorskip("torch")
k3 = pytest.importorskip("k3_kernels")
k3_native = pytest.importorskip("k3_kernels._native")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not os.environ.get("K3_EXPECT_UNSUPPORTED"),
        reason="needs a build without code for this GPU (K3_EXPECT_UNSUPPORTED=1)",
    ),
]


def test_kernels_refuse_with_a_clear_message() -> None:
    x = torch.randn(4, 16, device="cuda")
    out = torch.full((4, 8), float("nan"), device="cuda")
    major, minor = torch.cuda.get_device_capability()
    with pytest.raises(k3.UnsupportedGPUError, match=rf"is sm_{major}{minor}, but .* install"):
        k3.swiglu(x, out=out)
    torch.cuda.synchronize()
    assert bool(out.isnan().all())
    with pytest.raises(k3.UnsupportedGPUError):
        k3.loaded_arch()
    report = k3.info()
    assert not report.gpus[0].covered


def test_host_library_reports_no_kernel_image() -> None:
    nat = k3_native.native()
    data, _ = k3_native.read_fatbin("swiglu")
    handle = ctypes.c_int(-1)
    assert nat.lib.k3_load_library(data, len(data), ctypes.byref(handle)) == 0
    arch = ctypes.c_int(0)
    status = nat.lib.k3_arch_probe(handle.value, 0, ctypes.byref(arch))
    message = nat.lib.k3_last_error().decode()
    assert status == k3_native.K3_ERR_NO_KERNEL_IMAGE, (status, message)
    assert "CUDA_ERROR_NO_BINARY_FOR_GPU" in message
