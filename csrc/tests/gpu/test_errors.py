"""Bad inputs from Python: each raises k3_kernels.KernelError with a clear message, nothing
crashes, and nothing is written (the cache / output keep their sentinel bytes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gpu.reference import SENTINEL_BYTE, same_bytes

torch = pytest.importorskip("torch")
k3 = pytest.importorskip("k3_kernels")

pytestmark = pytest.mark.gpu

T, RANK, ROPE_DIM, MAX_POS = 8, 512, 64, 128


def mla_args() -> dict[str, Any]:
    torch.manual_seed(0)
    bf16 = torch.bfloat16
    cache = torch.empty(2, 16, RANK + ROPE_DIM, dtype=bf16, device="cuda")
    cache.view(torch.uint8).fill_(SENTINEL_BYTE)
    return {
        "kv_c": torch.randn(T, RANK, device="cuda").to(bf16),
        "k_pe": torch.randn(T, ROPE_DIM, device="cuda").to(bf16),
        "positions": torch.arange(T, dtype=torch.int64, device="cuda"),
        "cos_sin_cache": torch.rand(MAX_POS, ROPE_DIM, device="cuda"),
        "slot_mapping": torch.arange(T, dtype=torch.int64, device="cuda"),
        "kv_cache": cache,
    }


Mutation = Callable[[dict[str, Any]], None]


def _edit(**how: Callable[[Any], Any]) -> Mutation:
    """Replaces each argument named with how(its value): _edit(k_pe=lambda t: t.half())."""
    return lambda a: a.update({name: change(a[name]) for name, change in how.items()})


def _with(**values: Any) -> Mutation:
    """Replaces each argument named with the value given."""
    return lambda a: a.update(values)


def _fp8_cache() -> Any:
    return torch.full((2, 16, RANK + ROPE_DIM), SENTINEL_BYTE, dtype=torch.uint8, device="cuda")


def _fp8(scale: Callable[[], Any]) -> Mutation:
    """An FP8 cache with kv_scale=scale(), both made when the case runs."""
    return lambda a: a.update(kv_cache=_fp8_cache(), kv_scale=scale())


def _fp16_scale() -> Any:
    return torch.ones(1, dtype=torch.float16, device="cuda")


def _strided_columns(a: dict[str, Any]) -> None:
    a["kv_c"] = torch.cat([a["kv_c"], a["kv_c"]], 1)[:, ::2]


def _short_entries(a: dict[str, Any]) -> None:
    a["kv_cache"] = a["kv_cache"][:, :, :500]


def _two_head_k_pe(a: dict[str, Any]) -> None:
    a["k_pe"] = a["k_pe"].reshape(T, 2, 32)


def _odd_rope(a: dict[str, Any]) -> None:
    a["k_pe"] = a["k_pe"][:, :63].contiguous()
    a["cos_sin_cache"] = a["cos_sin_cache"][:, :63].contiguous()


def _overlapping_rows(a: dict[str, Any]) -> None:
    a["kv_c"] = torch.as_strided(a["kv_c"], (T, RANK), (RANK // 2, 1))


def _overlapping_entries(a: dict[str, Any]) -> None:
    c = a["kv_cache"]
    a["kv_cache"] = torch.as_strided(c, (2, 16, RANK + ROPE_DIM), (16 * 576, 500, 1))


MLA_BAD: list[tuple[str, Mutation, str]] = [
    ("kv_c float64", _edit(kv_c=lambda t: t.double()), r"kv_c has dtype float64"),
    ("k_pe dtype", _edit(k_pe=lambda t: t.half()), r"k_pe has dtype float16 but kv_c has bfloat16"),
    ("cache dtype", _edit(kv_cache=lambda t: t.float()), r"kv_cache has dtype float32"),
    ("kv_c on cpu", _edit(kv_c=lambda t: t.cpu()), r"kv_c .*cpu"),
    ("kv_c strided columns", _strided_columns, r"kv_c must be contiguous in its last dimension"),
    ("slots int32", _edit(slot_mapping=lambda t: t.int()), r"slot_mapping must be int64"),
    ("positions int32", _edit(positions=lambda t: t.int()), r"positions must be int64"),
    ("token count", _edit(k_pe=lambda t: t[:7]), r"k_pe has 7 tokens but kv_c has 8"),
    ("entry too small", _short_entries, r"kv_cache entries hold 500 values"),
    ("k_pe 3-d", _two_head_k_pe, r"k_pe must be \[num_tokens, 1, rope_dim\]"),
    ("kv_c 1-d", _edit(kv_c=lambda t: t[0]), r"kv_c must be \[num_tokens"),
    ("cos_sin columns", _edit(cos_sin_cache=lambda t: t[:, :32]), r"cos_sin_cache has 32 columns"),
    ("cos_sin dtype", _edit(cos_sin_cache=lambda t: t.half()), r"cos_sin_cache has dtype float16"),
    ("odd rope dim", _odd_rope, r"kv_cache entries hold|must be even"),
    ("positions None", _with(positions=None), r"positions is None"),
    ("not an array", _with(kv_c=object()), r"expected a torch tensor"),
    ("fp8 without scale", lambda a: a.update(kv_cache=_fp8_cache()), r"kv_scale is required"),
    ("fp8 negative scale", _fp8(lambda: -1.0), r"kv_scale must be a positive finite number"),
    ("fp8 nan scale", _fp8(lambda: float("nan")), r"kv_scale must be a positive finite number"),
    ("fp8 fp16 scale tensor", _fp8(_fp16_scale), r"kv_scale must be a one-element float32 tensor"),
    ("scale without fp8", _with(kv_scale=1.0), r"kv_scale applies only to an FP8 kv_cache"),
    ("rope name", _with(rope="yarn"), r"rope must be 'neox', 'gptj' or None"),
    ("overlapping kv_c rows", _overlapping_rows, r"kv_c rows overlap"),
    ("overlapping cache entries", _overlapping_entries, r"kv_cache entries overlap"),
    ("stream type", _with(stream="default"), r"stream is a str"),
]


@pytest.mark.parametrize(
    ("mutate", "match"), [(m, r) for _, m, r in MLA_BAD], ids=[n for n, _, _ in MLA_BAD]
)
def test_mla_rejects(mutate: Mutation, match: str) -> None:
    args = mla_args()
    args["rope"] = "neox"
    mutate(args)
    cache = args["kv_cache"]
    before = cache.clone()
    with pytest.raises(k3.KernelError, match=match) as info:
        k3.mla_key_concat_kv_cache(**args)
    assert isinstance(info.value, ValueError)  # argument errors are ValueErrors too
    torch.cuda.synchronize()
    assert same_bytes(torch, cache, before), "a rejected call wrote to the cache"


SWIGLU_BAD: list[tuple[str, dict[str, Any], str]] = [
    ("x float64", {"x": lambda: torch.randn(4, 16, device="cuda").double()}, r"float64"),
    ("odd width", {"x": lambda: torch.randn(4, 7, device="cuda")}, r"x has 7 columns"),
    ("x 3-d", {"x": lambda: torch.randn(2, 4, 16, device="cuda")}, r"x must be"),
    ("x on cpu", {"x": lambda: torch.randn(4, 16)}, r"cpu"),
    ("out shape", {"out": lambda: _nan_out(4, 9)}, r"out must have shape \[4, 8\]"),
    ("out dtype", {"out": lambda: _nan_out(4, 8).half()}, r"out has dtype float16"),
    ("out columns", {"out": lambda: _nan_out(4, 16)[:, ::2]}, r"out must be contiguous"),
    ("clamp negative", {"clamp": -1.0}, r"clamp must be a positive finite number"),
    ("clamp zero", {"clamp": 0.0}, r"clamp must be a positive finite number"),
    ("clamp nan", {"clamp": float("nan")}, r"clamp must be a positive finite number"),
    ("clamp str", {"clamp": "7"}, r"clamp must be a number"),
]


def _nan_out(rows: int, cols: int) -> Any:
    return torch.full((rows, cols), float("nan"), device="cuda")


@pytest.mark.parametrize(
    ("change", "match"), [(c, r) for _, c, r in SWIGLU_BAD], ids=[n for n, _, _ in SWIGLU_BAD]
)
def test_swiglu_rejects(change: dict[str, Any], match: str) -> None:
    x = change["x"]() if "x" in change else torch.randn(4, 16, device="cuda")
    out = change["out"]() if "out" in change else _nan_out(4, 8)
    clamp = change.get("clamp")
    before = out.clone()
    with pytest.raises(k3.KernelError, match=match):
        k3.swiglu(x, clamp=clamp, out=out)
    torch.cuda.synchronize()
    assert same_bytes(torch, out, before), "a rejected call wrote to out"


def test_numpy_array_is_rejected() -> None:
    pytest.importorskip("numpy")
    x = torch.randn(4, 16).numpy()
    with pytest.raises(k3.KernelError, match=r"numpy \(CPU\) array"):
        k3.swiglu(x)


def test_error_hierarchy() -> None:
    assert issubclass(k3.KernelArgumentError, k3.KernelError)
    assert issubclass(k3.KernelArgumentError, ValueError)
    assert issubclass(k3.UnsupportedGPUError, k3.KernelError)
    assert issubclass(k3.KernelError, RuntimeError)
