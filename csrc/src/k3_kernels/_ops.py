"""The kernels' Python entry points: validate everything, then launch once."""

from __future__ import annotations

import ctypes
import math
import sys
from typing import Any

from ._arrays import GpuArray, as_gpu_array, stream_handle
from ._errors import KernelArgumentError
from ._native import (
    DTYPE_BF16,
    DTYPE_F16,
    DTYPE_F32,
    DTYPE_FP8_E4M3,
    ROPE_CODES,
    MlaArgs,
    SwigluArgs,
    native,
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
    return f


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
    """
    nat = native()
    if rope not in ROPE_CODES:
        raise _fail(f"rope must be 'neox', 'gptj' or None, got {rope!r}")
    kc = as_gpu_array("kv_c", kv_c, nat)
    kp = as_gpu_array("k_pe", k_pe, nat)
    sm = as_gpu_array("slot_mapping", slot_mapping, nat)
    cache = as_gpu_array("kv_cache", kv_cache, nat)
    arrays = [kc, kp, sm, cache]
    pos = cs = None
    if rope is not None:
        pos = as_gpu_array("positions", positions, nat)
        cs = as_gpu_array("cos_sin_cache", cos_sin_cache, nat)
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

    args = MlaArgs()
    args.kv_c, args.k_pe, args.slot_mapping, args.kv_cache = kc.ptr, kp.ptr, sm.ptr, cache.ptr
    args.num_tokens, args.rank, args.rope_dim = num_tokens, rank, rope_dim
    args.kv_c_stride, args.k_pe_stride = kc.strides[0], kp.strides[0]
    args.num_blocks, args.block_size, args.entry_size = num_blocks, block_size, entry_size
    args.block_stride, args.entry_stride = cache.strides[0], cache.strides[1]
    args.in_dtype, args.cache_dtype = in_code, cache_code
    args.rope = ROPE_CODES[rope]
    args.cos_sin_dtype = in_code

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
        args.positions, args.cos_sin = pos.ptr, cs.ptr
        args.cos_sin_stride, args.max_pos = cs.strides[0], cs.shape[0]
        args.cos_sin_dtype = _FLOAT_CODES[cs.dtype]

    if cache_code == DTYPE_FP8_E4M3:
        if kv_scale is None:
            raise _fail("kv_scale is required with an FP8 (uint8 / float8_e4m3fn) kv_cache")
        if isinstance(kv_scale, (int, float)):
            args.scale = _positive_float(kv_scale, "kv_scale")
        else:
            sc = as_gpu_array("kv_scale", kv_scale, nat)
            if sc.dtype != "float32" or math.prod(sc.shape) != 1:
                raise _fail(f"kv_scale must be a one-element float32 tensor, got {sc.describe()}")
            arrays.append(sc)
            args.scale_ptr = sc.ptr
    elif kv_scale is not None:
        raise _fail(f"kv_scale applies only to an FP8 kv_cache; this one is {cache.dtype}")

    device = _same_device(tuple(arrays))
    if num_tokens == 0:
        return
    handle = nat.handle("mla_kv_cache", device)
    s = stream_handle(stream, tuple(arrays), device)
    nat.check(
        nat.lib.k3_mla_key_concat_kv_cache(handle, device, ctypes.byref(args), s or None),
        "mla_key_concat_kv_cache",
    )


def _allocate_like(x: GpuArray, shape: tuple[int, int]) -> Any:
    if x.source == "torch":
        torch = sys.modules["torch"]
        return torch.empty(shape, dtype=x.obj.dtype, device=x.obj.device)
    if x.source == "cupy":
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(x.device):
            return cupy.empty(shape, dtype=x.obj.dtype)
    raise _fail(f"pass out= for {type(x.obj).__name__} arrays (only torch and cupy can allocate)")


def swiglu(x: Any, *, clamp: float | None = None, out: Any = None, stream: Any = None) -> Any:
    """out[t, i] = silu(g) * u for x = [gate | up] of shape [T, 2D]; returns out [T, D].

    With clamp: g = min(gate, clamp), u = clip(up, -clamp, clamp). fp32, fp16 or bf16.
    """
    nat = native()
    xa = as_gpu_array("x", x, nat)
    _require_ndim(xa, (2,), "[num_tokens, 2 * d]")
    _require_inner_contiguous(xa)
    code = _float_code(xa, "x")
    rows, width = xa.shape
    if width % 2:
        raise _fail(f"x has {width} columns; it must be [num_tokens, 2 * d] (gate | up)")
    d = width // 2
    clamp_value = None if clamp is None else _positive_float(clamp, "clamp")
    if out is None:
        out = _allocate_like(xa, (rows, d))
    oa = as_gpu_array("out", out, nat)
    _require_ndim(oa, (2,), "[num_tokens, d]")
    _require_inner_contiguous(oa)
    if oa.shape != (rows, d):
        raise _fail(f"out must have shape {[rows, d]}, got {list(oa.shape)}")
    if oa.dtype != xa.dtype:
        raise _fail(f"out has dtype {oa.dtype} but x has {xa.dtype}; they must match")
    device = _same_device((xa, oa))
    if rows == 0 or d == 0:
        return out
    args = SwigluArgs()
    args.x, args.out = xa.ptr, oa.ptr
    args.rows, args.d = rows, d
    args.x_stride, args.out_stride = xa.strides[0], oa.strides[0]
    args.dtype = code
    args.has_clamp = 0 if clamp_value is None else 1
    args.clamp = 0.0 if clamp_value is None else clamp_value
    handle = nat.handle("swiglu", device)
    s = stream_handle(stream, (xa, oa), device)
    nat.check(nat.lib.k3_swiglu(handle, device, ctypes.byref(args), s or None), "swiglu")
    return out
