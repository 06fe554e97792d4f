"""swiglu against the PyTorch reference: every dtype x clamp x layout (see reference.py
for the tolerance). Outputs start as NaN, so an element the kernel skipped fails."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import pytest

from gpu.reference import float_dtype, swiglu_reference

torch = pytest.importorskip("torch")
k3 = pytest.importorskip("k3_kernels")

pytestmark = pytest.mark.gpu

RTOL = {"f32": 1e-5, "f16": 2.0**-10, "bf16": 2.0**-7}
ATOL = {"f32": 1e-6, "f16": 1e-6, "bf16": 1e-6}


@dataclass(frozen=True)
class Shape:
    name: str
    rows: int
    d: int
    misaligned: bool  # x and out are views at an odd element offset with odd row strides


SHAPES = (
    Shape("aligned", 37, 4096, False),
    Shape("odd-d", 37, 1001, False),
    Shape("misaligned", 19, 1024, True),
    Shape("many-rows", 70_000, 24, False),  # more rows than one grid dimension holds
)


def _inputs(shape: Shape, dtype: Any, seed: int) -> tuple[Any, Any, Any]:
    torch.manual_seed(seed)
    off = 1 if shape.misaligned else 0
    x_parent = (torch.randn(shape.rows, 2 * shape.d + 3, device="cuda") * 6).to(dtype)
    x = x_parent[:, off : off + 2 * shape.d]
    out_parent = torch.full((shape.rows, shape.d + 2 * off), float("nan"), device="cuda")
    out_parent = out_parent.to(dtype)
    out = out_parent[:, off : off + shape.d]
    return x, out, out_parent


def _assert_close(got: Any, expected: Any, name: str) -> None:
    assert not bool(got.isnan().any()), "an output element was not written"
    torch.testing.assert_close(
        got.float(), expected.float(), rtol=RTOL[name], atol=ATOL[name], equal_nan=False
    )


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
@pytest.mark.parametrize("clamp", [None, 7.0], ids=["no-clamp", "clamp"])
@pytest.mark.parametrize("name", ["f32", "f16", "bf16"])
def test_swiglu_matches_reference(name: str, clamp: float | None, shape: Shape) -> None:
    dtype = float_dtype(torch, name)
    x, out, out_parent = _inputs(shape, dtype, seed=shape.rows + shape.d)
    result = k3.swiglu(x, clamp=clamp, out=out)
    torch.cuda.synchronize()
    assert result is out
    _assert_close(out, swiglu_reference(torch, x, clamp), name)
    if shape.misaligned:  # the columns around the view are untouched
        assert bool(out_parent[:, 0].isnan().all())
        assert bool(out_parent[:, -1].isnan().all())


@pytest.mark.parametrize("name", ["f32", "f16", "bf16"])
def test_swiglu_allocates_out(name: str) -> None:
    dtype = float_dtype(torch, name)
    x = (torch.randn(5, 2 * 96, device="cuda") * 4).to(dtype)
    out = k3.swiglu(x, clamp=3.0)
    torch.cuda.synchronize()
    assert out.shape == (5, 96)
    assert out.dtype == dtype
    _assert_close(out, swiglu_reference(torch, x, 3.0), name)


def test_swiglu_clamp_is_applied() -> None:
    # With the clamp, huge gates and ups give exactly silu(c) * c in fp32.
    x = torch.full((2, 2 * 64), 1e4, device="cuda")
    x[1, 64:] = -1e4
    out = k3.swiglu(x, clamp=5.0)
    torch.cuda.synchronize()
    c = torch.tensor(5.0)
    silu_c = float(c / (1 + torch.exp(-c)))
    assert torch.allclose(out[0].cpu(), torch.full((64,), silu_c * 5.0), rtol=1e-6)
    assert torch.allclose(out[1].cpu(), torch.full((64,), -silu_c * 5.0), rtol=1e-6)


def test_swiglu_cupy_and_dlpack_inputs() -> None:
    """Arrays that are not torch tensors: cupy (via __cuda_array_interface__), and a
    bare object that only speaks DLPack (bf16 included, which CAI cannot describe)."""

    class DlpackOnly:
        def __init__(self, t: Any) -> None:
            self._t = t

        def __dlpack__(self, **kwargs: Any) -> Any:
            return self._t.__dlpack__()

        def __dlpack_device__(self) -> Any:
            return self._t.__dlpack_device__()

    x = (torch.randn(9, 2 * 200, device="cuda") * 4).to(torch.bfloat16)
    out = torch.full((9, 200), float("nan"), device="cuda").to(torch.bfloat16)
    k3.swiglu(DlpackOnly(x), out=DlpackOnly(out), clamp=6.0)
    torch.cuda.synchronize()
    _assert_close(out, swiglu_reference(torch, x, 6.0), "bf16")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # cupy may warn about toolkit paths it does not need
        cupy = pytest.importorskip("cupy")
    # Host-side dtype conversion and plain copies only: no cupy kernel has to compile.
    xc = cupy.asarray((torch.randn(9, 2 * 200) * 4).half().numpy())
    oc = k3.swiglu(xc)
    cupy.cuda.get_current_stream().synchronize()
    assert type(oc).__module__.startswith("cupy")
    got = torch.as_tensor(cupy.asnumpy(oc)).cuda()
    ref = swiglu_reference(torch, torch.as_tensor(cupy.asnumpy(xc)).cuda(), None)
    _assert_close(got, ref, "f16")
