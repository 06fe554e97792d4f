"""The public kernel functions: build the argument block (fast path, else the general
path), then make one call into the host library.

While torch.compile traces them they call the torch.ops.k3 operators instead (which
Dynamo puts into its graph); `_torch_ops.register` connects them when torch is
importable. The operators' implementations call these functions again, outside tracing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import _native
from ._fast import mla_fast, swiglu_fast
from ._ops import mla_block, swiglu_block


def _never() -> bool:
    return False


class _Traced:
    """What the public functions call while torch.compile traces them (set by
    _torch_ops.register): whether it is tracing, and the operator calls to trace."""

    compiling: Callable[[], bool] = _never
    mla: Callable[..., None]
    swiglu: Callable[[Any, Any, Any], Any]


def mla_key_concat_kv_cache(  # noqa: PLR0917 - the issue fixes this positional signature
    kv_c: Any,
    k_pe: Any,
    positions: Any,
    cos_sin_cache: Any,
    slot_mapping: Any,
    kv_cache: Any,
    *,
    kv_scale: Any = None,
    rope: str | None = "neox",
    stream: Any = None,
    check_indices: bool = False,
) -> None:
    """Writes [kv_c[t], rope(k_pe[t])] into kv_cache[slot // block_size, slot % block_size].

    kv_c: [T, rank]; k_pe: [T, rope_dim] or [T, 1, rope_dim]; both fp32, fp16 or bf16.
    positions, slot_mapping: [T] int64 (slot -1 = padding: that token is not written).
    cos_sin_cache: [max_pos, rope_dim] (cos half | sin half), fp32 or the input dtype;
    positions and cos_sin_cache may be None when rope is None.
    kv_cache: [num_blocks, block_size, >= rank + rope_dim], the input dtype, or uint8 /
    float8_e4m3fn holding x / kv_scale saturated to +-448 (then kv_scale is required: a
    positive float or a one-element float32 tensor on the same GPU).
    rope: "neox" (rotate halves), "gptj" (rotate interleaved pairs) or None.
    check_indices: first copy slot_mapping (and positions) to the host and raise
    KernelArgumentError, writing nothing, if a slot is neither -1 nor inside the cache or
    a written token's position is outside cos_sin_cache. This waits for the stream (a
    device-to-host copy and a synchronize per call), so it is off by default and refused
    during CUDA graph capture; without it such tokens are skipped on the GPU.
    """
    if stream is None and _Traced.compiling():
        _Traced.mla(
            kv_c,
            k_pe,
            positions,
            cos_sin_cache,
            slot_mapping,
            kv_cache,
            kv_scale,
            rope,
            check_indices,
        )
        return
    nat = _native._native or _native.native()
    block = mla_fast(
        nat, kv_c, k_pe, positions, cos_sin_cache, slot_mapping, kv_cache, kv_scale, rope, stream
    ) or mla_block(
        nat, (kv_c, k_pe, positions, cos_sin_cache, slot_mapping, kv_cache), kv_scale, rope, stream
    )
    if block is None:
        return  # no tokens
    if check_indices:
        status = nat.mla_check_indices(block)
        if status:
            nat.check(status, "mla_key_concat_kv_cache")
    status = nat.mla(block)
    if status:
        nat.check(status, "mla_key_concat_kv_cache")


def swiglu(x: Any, *, clamp: float | None = None, out: Any = None, stream: Any = None) -> Any:
    """out[t, i] = silu(g) * u for x = [gate | up] of shape [T, 2D]; returns out [T, D].

    With clamp: g = min(gate, clamp), u = clip(up, -clamp, clamp). fp32, fp16 or bf16.
    """
    if stream is None and _Traced.compiling():
        return _Traced.swiglu(x, clamp, out)
    nat = _native._native or _native.native()
    block, out = swiglu_fast(nat, x, clamp, out, stream) or swiglu_block(nat, x, clamp, out, stream)
    if block is not None:
        status = nat.swiglu(block)
        if status:
            nat.check(status, "swiglu")
    return out
