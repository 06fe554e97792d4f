"""A library linked against the CUDA_HOME's link stub of the driver's libcuda
(build.cuda-libraries: cuda), on a machine with the NVIDIA driver: tests/fixtures/jit_host's
_driver.so, built by `release build` for CUDA 12.9 (CMake, CUDA::cuda_driver), loaded with
ctypes. The driver's libcuda.so.1 answers every call it makes: cuInit and
cuDriverGetVersion, and cuMemGetInfo as cuda.h compiles it (cuMemGetInfo_v2), inside the
context torch made current, reporting the free memory torch reports.

Needs the wheel that K3_DRIVER_WHEEL names, and torch with a CUDA GPU:

    K3_DRIVER_WHEEL=dist/k3_jit_host-0.1.0-py3-none-manylinux_2_34_x86_64.whl \\
        python -m pytest -s -v tests/gpu/test_fixture_driver.py

Skipped without torch, the wheel or a GPU. What it ran beside is printed (-s).
"""

from __future__ import annotations

import ctypes
import os
import tempfile
import zipfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to torch"),
]


@pytest.fixture(scope="module")
def driver() -> ctypes.CDLL:
    wheel = os.environ.get("K3_DRIVER_WHEEL")
    if not wheel:
        pytest.skip("K3_DRIVER_WHEEL names no wheel")
    target = Path(tempfile.mkdtemp(prefix="k3-driver-"))
    with zipfile.ZipFile(wheel) as archive:
        archive.extract("k3_jit_host/_driver.so", target)
    # RTLD_NOW: every symbol it takes from libcuda.so.1 is bound at load, or the load fails
    library = ctypes.CDLL(str(target / "k3_jit_host" / "_driver.so"), mode=os.RTLD_NOW)
    library.k3_free_memory.restype = ctypes.c_longlong
    return library


def test_the_drivers_libcuda_answers_the_calls_the_stub_stood_in_for(
    driver: ctypes.CDLL,
) -> None:
    version = int(driver.k3_driver_version())
    print(f"driver CUDA {version // 1000}.{version % 1000 // 10}, torch {torch.__version__}")
    assert version >= 12090  # the driver runs CUDA 12.9 code and newer
    torch.zeros(1, device="cuda")  # torch makes the device's primary context current
    free_by_driver = int(driver.k3_free_memory())
    free_by_torch, total = torch.cuda.mem_get_info()
    print(f"free: {free_by_driver} by the driver API, {free_by_torch} by torch, of {total}")
    assert 0 < free_by_driver <= total
    assert abs(free_by_driver - free_by_torch) < total // 100
