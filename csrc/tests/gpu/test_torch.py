"""k3_kernels with torch: the fast path, the torch.ops.k3 operators, torch.compile and
CUDA graphs.

* The fast path (plain torch tensors) must build exactly the argument block of the
  general path for every layout test_mla.py runs.
* torch.ops.k3.* pass torch.library.opcheck (schema, mutation, fake tensors, AOT
  dispatch), run on fake tensors, and compile with fullgraph=True, from the operators
  and from the public functions alike, with the results of eager calls.
* CUDA graphs capture the public functions and the operators; replays with new inputs
  give the eager results.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import pytest

from gpu.reference import SENTINEL_BYTE, same_bytes
from gpu.test_mla import LAYOUTS, Layout, make_case

torch = pytest.importorskip("torch")
k3 = pytest.importorskip("k3_kernels")
fast = pytest.importorskip("k3_kernels._fast")
general = pytest.importorskip("k3_kernels._ops")
native = pytest.importorskip("k3_kernels._native")

pytestmark = pytest.mark.gpu

RANK, ROPE_DIM, MAX_POS, BLOCK_SIZE = 512, 64, 256, 16
SCALE = 0.05


# ---------------------------------------------------------------- fast path


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda lay: lay.name)
@pytest.mark.parametrize("scale", [None, "float", "tensor"])
@pytest.mark.parametrize("rope", [None, "neox", "gptj"], ids=str)
@pytest.mark.parametrize("in_name", ["f32", "f16", "bf16"])
def test_fast_path_builds_the_general_block(
    in_name: str, rope: str | None, scale: str | None, layout: Layout
) -> None:
    in_dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[in_name]
    cache_dtype = in_dtype if scale is None else torch.uint8
    case = make_case(layout, in_dtype, cache_dtype, seed=zlib.crc32(in_name.encode()))
    kv_scale: Any = {
        None: None,
        "float": SCALE,
        "tensor": torch.tensor([SCALE], device="cuda"),
    }[scale]
    args = (*case.operands(), kv_scale, rope)
    nat = native.native()
    for stream in (None, torch.cuda.Stream(), 0):
        got = fast.mla_fast(nat, *args, stream)
        assert got is not None, "a plain torch call should take the fast path"
        assert got == general.mla_block(nat, case.operands(), kv_scale, rope, stream)


def test_fast_path_swiglu_block() -> None:
    nat = native.native()
    x = torch.randn(7, 2 * 96, device="cuda").to(torch.bfloat16)
    out = torch.empty(7, 96, device="cuda", dtype=torch.bfloat16)
    for clamp in (None, 3.5):
        got = fast.swiglu_fast(nat, x, clamp, out, None)
        assert got is not None
        assert got == general.swiglu_block(nat, x, clamp, out, None)


# ---------------------------------------------------------------- operators


def mla_inputs(tokens: int, in_dtype: Any, fp8: bool, seed: int) -> dict[str, Any]:
    torch.manual_seed(seed)
    num_blocks = tokens // BLOCK_SIZE + 2
    slots = torch.randperm(num_blocks * BLOCK_SIZE, device="cuda")[:tokens]
    slots[::5] = -1
    cache_dtype = torch.uint8 if fp8 else in_dtype
    cache = torch.empty(num_blocks, BLOCK_SIZE, RANK + ROPE_DIM, dtype=cache_dtype, device="cuda")
    cache.view(torch.uint8).fill_(SENTINEL_BYTE)
    return {
        "kv_c": (torch.randn(tokens, RANK, device="cuda") * 3).to(in_dtype),
        "k_pe": (torch.randn(tokens, 1, ROPE_DIM, device="cuda") * 3).to(in_dtype),
        "positions": torch.randint(0, MAX_POS, (tokens,), device="cuda"),
        "cos_sin_cache": torch.rand(MAX_POS, ROPE_DIM, device="cuda") * 2 - 1,
        "slot_mapping": slots.to(torch.int64),
        "kv_cache": cache,
    }


def test_operators_are_registered() -> None:
    for name in ("mla_key_concat_kv_cache", "swiglu", "swiglu_out"):
        assert hasattr(torch.ops.k3, name), name
    schema = str(torch.ops.k3.mla_key_concat_kv_cache.default._schema)
    assert "Tensor(a!) kv_cache" in schema
    assert "Tensor(a!) out" in str(torch.ops.k3.swiglu_out.default._schema)


@pytest.mark.parametrize("scale", [None, "float", "tensor"])
def test_opcheck_mla(scale: str | None) -> None:
    inputs = mla_inputs(40, torch.bfloat16, scale is not None, seed=1)
    kwargs: dict[str, Any] = {"rope": "neox"}
    if scale == "float":
        kwargs["kv_scale"] = SCALE
    elif scale == "tensor":
        kwargs["kv_scale_tensor"] = torch.tensor([SCALE], device="cuda")
    torch.library.opcheck(
        torch.ops.k3.mla_key_concat_kv_cache.default, tuple(inputs.values()), kwargs
    )


def test_opcheck_swiglu() -> None:
    x = (torch.randn(6, 2 * 80, device="cuda") * 3).to(torch.float16)
    out = torch.empty(6, 80, device="cuda", dtype=torch.float16)
    torch.library.opcheck(torch.ops.k3.swiglu.default, (x,), {"clamp": 2.0})
    torch.library.opcheck(torch.ops.k3.swiglu_out.default, (out, x), {"clamp": None})


def test_fake_tensors() -> None:
    fake_tensor = pytest.importorskip("torch._subclasses.fake_tensor")
    with fake_tensor.FakeTensorMode():
        x = torch.empty(5, 64, dtype=torch.bfloat16, device="cuda")
        y = torch.ops.k3.swiglu(x, 2.0)
        assert (y.shape, y.dtype, y.device.type) == ((5, 32), torch.bfloat16, "cuda")
        torch.ops.k3.swiglu_out(torch.empty_like(y), x)
        cache = torch.empty(4, BLOCK_SIZE, RANK + ROPE_DIM, dtype=torch.uint8, device="cuda")
        torch.ops.k3.mla_key_concat_kv_cache(
            torch.empty(3, RANK, device="cuda"),
            torch.empty(3, ROPE_DIM, device="cuda"),
            torch.zeros(3, dtype=torch.int64, device="cuda"),
            torch.empty(MAX_POS, ROPE_DIM, device="cuda"),
            torch.zeros(3, dtype=torch.int64, device="cuda"),
            cache,
            kv_scale=SCALE,
        )
        assert cache.shape == (4, BLOCK_SIZE, RANK + ROPE_DIM)


# ---------------------------------------------------------------- compile and graphs


def layer(
    bf16: dict[str, Any], fp8: dict[str, Any], scale: Any, x: Any, out: Any
) -> tuple[Any, Any]:
    """Every form of call: public functions and operators, float and tensor scales."""
    k3.mla_key_concat_kv_cache(*bf16.values(), rope="neox")
    torch.ops.k3.mla_key_concat_kv_cache(*fp8.values(), kv_scale_tensor=scale, rope="gptj")
    k3.mla_key_concat_kv_cache(*fp8.values(), kv_scale=SCALE, rope=None)
    k3.swiglu(x, out=out)
    return k3.swiglu(x, clamp=4.0), torch.ops.k3.swiglu(x, None)


def _inputs(seed: int) -> tuple[dict[str, Any], dict[str, Any], Any, Any, Any]:
    bf16 = mla_inputs(64, torch.bfloat16, False, seed)
    fp8 = mla_inputs(48, torch.float16, True, seed + 1)
    x = (torch.randn(9, 2 * 128, device="cuda") * 3).to(torch.bfloat16)
    out = torch.full((9, 128), float("nan"), device="cuda", dtype=torch.bfloat16)
    return bf16, fp8, torch.tensor([SCALE * 2], device="cuda"), x, out


def _clone(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value.clone()


def _assert_same(got: tuple[Any, ...], want: tuple[Any, ...]) -> None:
    for a, b in zip(got, want, strict=True):
        if isinstance(a, dict):
            _assert_same(tuple(a.values()), tuple(b.values()))
        else:
            assert same_bytes(torch, a, b)


def _run(fn: Callable[..., tuple[Any, Any]], inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    y1, y2 = fn(*inputs)
    torch.cuda.synchronize()
    return (*inputs, y1, y2)


@pytest.mark.filterwarnings("default")  # torch.compile's own warnings are not failures here
def test_compile_fullgraph_matches_eager() -> None:
    compiled = torch.compile(layer, fullgraph=True)
    for seed in (1, 2):
        inputs = _inputs(seed)
        want = _run(layer, tuple(_clone(value) for value in inputs))
        got = _run(compiled, inputs)
        _assert_same(got, want)
        # kv_cache was written in place: the caller's tensor holds the result.
        assert not bool((inputs[0]["kv_cache"].view(torch.uint8) == SENTINEL_BYTE).all())


def test_cuda_graph_capture_and_replay() -> None:
    static = _inputs(3)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        layer(*static)  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y1, y2 = layer(*static)
    for seed in (4, 5, 6):
        fresh = _inputs(seed)
        for target, source in zip(static, fresh, strict=True):
            if isinstance(target, dict):
                for name in target:
                    target[name].copy_(source[name])
            else:
                target.copy_(source)
        graph.replay()
        torch.cuda.synchronize()
        want = _run(layer, fresh)
        _assert_same((*static, y1, y2), want)
