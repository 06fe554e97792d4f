"""The torch fixture's wheel (tests/fixtures/torch_ops, built by `release`'s torch backend;
its stable-ABI flavour is one wheel for every torch it admits) on a GPU: its CUDA kernel is
registered, and `scaled_add` on CUDA gives what its CPU kernel and torch's own
`a + alpha * b` give on the CPU, for both dtypes it takes, for contiguous, strided,
empty and many-block tensors. The stable flavour's `total` (a reduction whose kernels
return `torch::stable::view(result, {})`) must give a 0-dim tensor on CUDA as on the CPU,
equal to torch's own `a.sum()`: a wheel built against a newer torch's headers than the one
it loads beside returned a [1, 4] tensor there (issue 53), and this is the check that sees
it.

Needs torch with a CUDA GPU and k3_torch_ops: installed, or the wheel that
K3_TORCH_OPS_WHEEL names, unpacked here on sys.path (so that one wheel can be tried beside
several torch releases without installing it):

    K3_TORCH_OPS_WHEEL=dist/k3_torch_ops-0.1.0-cp310-abi3-manylinux_2_34_x86_64.whl \\
        python -m pytest -v tests/gpu/test_fixture_torch_ops.py

Skipped without torch, the wheel or a GPU. The torch the wheel loads beside and the torch
requirement it states are printed (-s) and checked against each other.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import pytest


def _unpacked(wheel: str) -> None:
    path = Path(wheel)
    if not path.is_file():
        raise FileNotFoundError(f"K3_TORCH_OPS_WHEEL={wheel}: no such wheel")
    target = tempfile.mkdtemp(prefix="k3-torch-ops-")
    with zipfile.ZipFile(path) as archive:
        archive.extractall(target)
    sys.path.insert(0, target)


if os.environ.get("K3_TORCH_OPS_WHEEL"):
    _unpacked(os.environ["K3_TORCH_OPS_WHEEL"])

torch = pytest.importorskip("torch")
k3 = pytest.importorskip("k3_torch_ops")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to torch"),
]


def test_the_wheel_allows_the_torch_it_loads_beside() -> None:
    requires = importlib.metadata.requires("k3-torch-ops") or []
    (pin,) = [r for r in requires if r.split(";")[0].strip().startswith("torch")]
    device = torch.cuda.get_device_name()
    print(f"\nk3-torch-ops requires {pin}; loaded beside torch {torch.__version__} on {device}")
    packaging = pytest.importorskip("packaging.requirements")
    requirement = packaging.Requirement(pin)
    assert requirement.specifier.contains(torch.__version__.split("+")[0], prereleases=True)


def test_the_cuda_kernel_is_registered() -> None:
    assert k3.has_kernel("CUDA"), "the wheel was built without its CUDA kernel"
    assert k3.has_kernel("CPU")


def cases() -> list[Any]:
    return [
        pytest.param((3, 1000), False, id="small"),
        pytest.param((1, 1), False, id="one"),
        pytest.param((4097, 1031), False, id="many-blocks"),
        pytest.param((257, 129), True, id="strided"),
        pytest.param((0,), False, id="empty"),
    ]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("shape", "strided"), cases())
def test_cuda_matches_the_cpu_kernel_and_torch(
    shape: tuple[int, ...], strided: bool, dtype: str
) -> None:
    generator = torch.Generator().manual_seed(sum(shape) + len(dtype))
    a, b = (torch.randn(*shape, generator=generator, dtype=getattr(torch, dtype)) for _ in "ab")
    if strided:
        a, b = a.t(), b.t()
    alpha = -1.375
    on_cpu = k3.scaled_add(a, b, alpha)
    on_gpu = k3.scaled_add(a.cuda(), b.cuda(), alpha)
    torch.cuda.synchronize()
    assert on_gpu.device.type == "cuda"
    assert on_gpu.shape == a.shape
    assert on_gpu.dtype == a.dtype
    torch.testing.assert_close(on_gpu.cpu(), on_cpu)
    torch.testing.assert_close(on_gpu.cpu(), a + alpha * b)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(3, 1000), (1,), (4097, 1031), (0,)],
                         ids=["small", "one", "many-blocks", "empty"])  # fmt: skip
def test_total_on_cuda_is_the_scalar_the_cpu_op_and_torch_give(
    shape: tuple[int, ...], dtype: str
) -> None:
    if not k3.has_op("total"):
        pytest.skip("the regular flavour has no total op")
    generator = torch.Generator().manual_seed(sum(shape) + 7)
    a = torch.randn(*shape, generator=generator, dtype=getattr(torch, dtype))
    on_cpu = k3.total(a)
    on_gpu = k3.total(a.cuda())
    torch.cuda.synchronize()
    print(f"\ntotal of {list(shape)} {dtype}: CUDA shape {list(on_gpu.shape)}, "
          f"CPU op shape {list(on_cpu.shape)}, torch.sum shape {list(a.sum().shape)}")  # fmt: skip
    assert on_gpu.device.type == "cuda"
    assert on_gpu.shape == torch.Size([]), f"CUDA total has shape {list(on_gpu.shape)}"
    assert on_cpu.shape == torch.Size([]), f"CPU total has shape {list(on_cpu.shape)}"
    assert on_gpu.dtype == a.dtype
    reference = a.double().sum().to(a.dtype)
    tolerance = {"atol": 1e-3 * max(1.0, a.numel() ** 0.5), "rtol": 1e-4}
    torch.testing.assert_close(on_gpu.cpu(), on_cpu, **tolerance)
    torch.testing.assert_close(on_gpu.cpu(), reference, **tolerance)


def test_a_dtype_it_does_not_take_is_refused_on_cuda_too() -> None:
    half = torch.ones(4, device="cuda", dtype=torch.float16)
    with pytest.raises(RuntimeError, match=r"float32 or float64 only|not implemented for .Half."):
        k3.scaled_add(half, half, 1.0)
