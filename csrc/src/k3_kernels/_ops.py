"""The general launch path: any accepted array type, every check with its own message.

`mla_block` and `swiglu_block` turn the arguments of a call into the host library's
packed argument block, or raise KernelArgumentError saying what is wrong; nothing is
launched here. The torch fast path (_fast.py) produces the same blocks for the common
case and hands everything else to these.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from . import _torch_api
from ._arrays import GpuArray, as_gpu_array, stream_handle
from ._errors import KernelArgumentError
from ._native import (
    DTYPE_BF16,
    DTYPE_F16,
    DTYPE_F32,
    DTYPE_FP8_E4M3,
    FLOAT32_MAX,
    ROPE_CODES,
    Backend,
    pack_mla,
    pack_swiglu,
)

_FLOAT_CODES = {"float32": DTYPE_F32, "float16": DTYPE_F16, "bfloat16": DTYPE_BF16}
_FP8_STORAGE = ("uint8", "float8_e4m3fn")


def _fail(message: str) -> KernelArgumentError:
    return KernelArgumentError(message)


def _require_ndim(a: GpuArray, ndims: tuple[int, ...], layout: str) -> None:
    if len(a.shape) not in ndims:
        raise _fail(f"{a.name} must be {layout}, got shape {list(a.shape)}")


def _require_inner_contiguous(a: GpuArray) -> None:
    if a.shape and a.shape[-1] > 1 and a.strides[-1] != 1:
        raise _fail(
            f"{a.name} must be contiguous in its last dimension (stride {a.strides[-1]}); "
            "call .contiguous() first"
        )


def _require_vector_contiguous(a: GpuArray) -> None:
    if a.shape[0] > 1 and a.strides[0] != 1:
        raise _fail(f"{a.name} must be contiguous (stride {a.strides[0]}); call .contiguous()")


def _float_code(a: GpuArray, what: str) -> int:
    code = _FLOAT_CODES.get(a.dtype)
    if code is None:
        raise _fail(f"{a.name} has dtype {a.dtype}; {what} must be float32, float16 or bfloat16")
    return code


def _same_device(arrays: tuple[GpuArray, ...]) -> int:
    devices = {a.device for a in arrays if a.device >= 0}
    if len(devices) > 1:
        listing = ", ".join(f"{a.name} on cuda:{a.device}" for a in arrays if a.device >= 0)
        raise _fail(f"all arrays must be on one GPU: {listing}")
    return devices.pop() if devices else 0


def _positive_float(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(f"{name} must be a number, got {type(value).__name__}")
    f = float(value)
    if not math.isfinite(f) or f <= 0.0:
        raise _fail(f"{name} must be a positive finite number, got {value!r}")
    if f > FLOAT32_MAX:
        raise _fail(f"{name} is {value!r}, beyond float32 (the kernels compute in float32)")
    return f


def mla_block(
    backend: Backend, arrays: tuple[Any, ...], kv_scale: Any, rope: Any, stream: Any
) -> bytes | None:
    """The k3_mla_args block of a call, or None when there are no tokens (no launch).
    `arrays`: the call's six, in the entry point's order (kv_c, k_pe, positions,
    cos_sin_cache, slot_mapping, kv_cache); the fast path took them one by one."""
    kv_c, k_pe, positions, cos_sin_cache, slot_mapping, kv_cache = arrays
    if not (rope is None or isinstance(rope, str)) or rope not in ROPE_CODES:
        raise _fail(f"rope must be 'neox', 'gptj' or None, got {rope!r}")
    kc = as_gpu_array("kv_c", kv_c, backend)
    kp = as_gpu_array("k_pe", k_pe, backend)
    sm = as_gpu_array("slot_mapping", slot_mapping, backend)
    cache = as_gpu_array("kv_cache", kv_cache, backend)
    arrays = [kc, kp, sm, cache]
    pos = cs = None
    if rope is not None:
        pos = as_gpu_array("positions", positions, backend)
        cs = as_gpu_array("cos_sin_cache", cos_sin_cache, backend)
        arrays += [pos, cs]

    _require_ndim(kc, (2,), "[num_tokens, kv_lora_rank]")
    _require_ndim(kp, (2, 3), "[num_tokens, rope_dim] or [num_tokens, 1, rope_dim]")
    if len(kp.shape) == 3 and kp.shape[1] != 1:
        raise _fail(f"k_pe must be [num_tokens, 1, rope_dim], got shape {list(kp.shape)}")
    _require_ndim(sm, (1,), "[num_tokens]")
    _require_ndim(cache, (3,), "[num_blocks, block_size, entry_size]")
    for a in (kc, kp, cache):
        _require_inner_contiguous(a)
    _require_vector_contiguous(sm)

    in_code = _float_code(kc, "kv_c")
    if kp.dtype != kc.dtype:
        raise _fail(f"k_pe has dtype {kp.dtype} but kv_c has {kc.dtype}; they must match")
    if sm.dtype != "int64":
        raise _fail(f"slot_mapping must be int64, got {sm.dtype}")
    num_tokens, rank = kc.shape
    rope_dim = kp.shape[-1]
    for a in (kp, sm):
        if a.shape[0] != num_tokens:
            raise _fail(
                f"{a.name} has {a.shape[0]} tokens but kv_c has {num_tokens} "
                f"({kc.describe()}, {a.describe()})"
            )
    num_blocks, block_size, entry_size = cache.shape
    if entry_size < rank + rope_dim:
        raise _fail(
            f"kv_cache entries hold {entry_size} values but kv_c + k_pe need "
            f"{rank} + {rope_dim} = {rank + rope_dim}"
        )
    if cache.dtype in _FP8_STORAGE:
        cache_code = DTYPE_FP8_E4M3
    elif cache.dtype == kc.dtype:
        cache_code = in_code
    else:
        raise _fail(
            f"kv_cache has dtype {cache.dtype}; it must be {kc.dtype} (the input dtype) "
            "or uint8 / float8_e4m3fn for an FP8 cache"
        )

    pos_ptr = cs_ptr = cs_stride = max_pos = 0
    cs_code = in_code
    if pos is not None and cs is not None:
        _require_ndim(pos, (1,), "[num_tokens]")
        _require_vector_contiguous(pos)
        if pos.dtype != "int64":
            raise _fail(f"positions must be int64, got {pos.dtype}")
        if pos.shape[0] != num_tokens:
            raise _fail(f"positions has {pos.shape[0]} tokens but kv_c has {num_tokens}")
        _require_ndim(cs, (2,), "[max_position, rope_dim]")
        _require_inner_contiguous(cs)
        if cs.shape[1] != rope_dim:
            raise _fail(f"cos_sin_cache has {cs.shape[1]} columns but rope_dim is {rope_dim}")
        if rope_dim % 2:
            raise _fail(f"rope_dim {rope_dim} must be even to rotate pairs")
        if cs.dtype not in ("float32", kc.dtype):
            raise _fail(f"cos_sin_cache has dtype {cs.dtype}; it must be float32 or {kc.dtype}")
        pos_ptr, cs_ptr = pos.ptr, cs.ptr
        cs_stride, max_pos = cs.strides[0], cs.shape[0]
        cs_code = _FLOAT_CODES[cs.dtype]

    scale = 0.0
    scale_ptr = 0
    if cache_code == DTYPE_FP8_E4M3:
        if kv_scale is None:
            raise _fail("kv_scale is required with an FP8 (uint8 / float8_e4m3fn) kv_cache")
        if isinstance(kv_scale, (int, float)):
            scale = _positive_float(kv_scale, "kv_scale")
        else:
            sc = as_gpu_array("kv_scale", kv_scale, backend)
            if sc.dtype != "float32" or math.prod(sc.shape) != 1:
                raise _fail(f"kv_scale must be a one-element float32 tensor, got {sc.describe()}")
            arrays.append(sc)
            scale_ptr = sc.ptr
    elif kv_scale is not None:
        raise _fail(f"kv_scale applies only to an FP8 kv_cache; this one is {cache.dtype}")

    device = _same_device(tuple(arrays))
    if num_tokens == 0:
        return None
    handle = backend.handle("mla_kv_cache", device)
    return pack_mla(
        handle,
        device,
        stream_handle(stream, tuple(arrays), device),
        kc.ptr,
        kp.ptr,
        pos_ptr,
        cs_ptr,
        sm.ptr,
        cache.ptr,
        scale_ptr,
        num_tokens,
        rank,
        rope_dim,
        kc.strides[0],
        kp.strides[0],
        cs_stride,
        max_pos,
        num_blocks,
        block_size,
        entry_size,
        cache.strides[0],
        cache.strides[1],
        in_code,
        cache_code,
        cs_code,
        ROPE_CODES[rope],
        scale,
        0,
    )


def allocate_like(x: GpuArray, shape: tuple[int, int]) -> Any:
    if x.source == "torch" and _torch_api.API is not None:
        return _torch_api.API.empty(shape, dtype=x.obj.dtype, device=x.obj.device)
    if x.source == "cupy":
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(x.device):
            return cupy.empty(shape, dtype=x.obj.dtype)
    raise _fail(f"pass out= for {type(x.obj).__name__} arrays (only torch and cupy can allocate)")


def swiglu_block(
    backend: Backend, x: Any, clamp: Any, out: Any, stream: Any
) -> tuple[bytes | None, Any]:
    """The k3_swiglu_args block of a call (None: nothing to compute) and `out`, which is
    allocated here when not given."""
    xa = as_gpu_array("x", x, backend)
    _require_ndim(xa, (2,), "[num_tokens, 2 * d]")
    _require_inner_contiguous(xa)
    code = _float_code(xa, "x")
    rows, width = xa.shape
    if width % 2:
        raise _fail(f"x has {width} columns; it must be [num_tokens, 2 * d] (gate | up)")
    d = width // 2
    clamp_value = None if clamp is None else _positive_float(clamp, "clamp")
    if out is None:
        out = allocate_like(xa, (rows, d))
    oa = as_gpu_array("out", out, backend)
    _require_ndim(oa, (2,), "[num_tokens, d]")
    _require_inner_contiguous(oa)
    if oa.shape != (rows, d):
        raise _fail(f"out must have shape {[rows, d]}, got {list(oa.shape)}")
    if oa.dtype != xa.dtype:
        raise _fail(f"out has dtype {oa.dtype} but x has {xa.dtype}; they must match")
    device = _same_device((xa, oa))
    if rows == 0 or d == 0:
        return None, out
    handle = backend.handle("swiglu", device)
    block = pack_swiglu(
        handle,
        device,
        stream_handle(stream, (xa, oa), device),
        xa.ptr,
        oa.ptr,
        rows,
        d,
        xa.strides[0],
        oa.strides[0],
        code,
        0 if clamp_value is None else 1,
        0.0 if clamp_value is None else clamp_value,
        0,
    )
    return block, out
