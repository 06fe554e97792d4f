"""The torch fast path: the common call, packed with a few attribute reads and comparisons.

A serving engine calls each kernel once per layer from Python, so the cost of the call
itself counts. For plain torch tensors (exactly `torch.Tensor`) with the usual layout,
`mla_fast` and `swiglu_fast` read data_ptr(), shape, stride() and dtype directly and
build the host library's argument block, as `_ops.mla_block` / `_ops.swiglu_block`
would. Anything they do not recognise at a glance (another array type, a subclass, an
unusual stride, a bad value, no tokens) makes them return None, and the caller takes
the general path, which accepts the same calls and names what is wrong with the rest.
So every condition here only has to imply that the general path would accept the call
and build the same block; csrc/tests/test_k3_fastpath.py checks that they agree.
"""

from __future__ import annotations

from typing import Any

from . import _torch_api
from ._arrays import stream_value
from ._native import DTYPE_FP8_E4M3, FLOAT32_MAX, Backend, pack_mla, pack_swiglu


def mla_fast(  # noqa: PLR0917 - a hot path: positional calls are the cheapest
    backend: Backend,
    kv_c: Any,
    k_pe: Any,
    positions: Any,
    cos_sin: Any,
    slots: Any,
    cache: Any,
    kv_scale: Any,
    rope: Any,
    stream: Any,
) -> bytes | None:
    """The k3_mla_args block of a common call, or None: take the general path."""
    api = _torch_api.API
    if api is None:
        return None
    tensor = api.tensor
    if (
        type(kv_c) is not tensor
        or type(k_pe) is not tensor
        or type(slots) is not tensor
        or type(cache) is not tensor
    ):
        return None
    dtype = kv_c.dtype
    in_code = api.float_codes.get(dtype)
    if in_code is None or k_pe.dtype is not dtype or slots.dtype is not api.int64:
        return None
    cache_dtype = cache.dtype
    cache_code = in_code if cache_dtype is dtype else api.cache_codes.get(cache_dtype)
    if cache_code is None:
        return None
    device = kv_c.get_device()
    if (
        device < 0
        or not (kv_c.is_cuda and k_pe.is_cuda and slots.is_cuda and cache.is_cuda)
        or k_pe.get_device() != device
        or slots.get_device() != device
        or cache.get_device() != device
    ):
        return None

    kc_shape = kv_c.shape
    pe_shape = k_pe.shape
    sm_shape = slots.shape
    cache_shape = cache.shape
    if len(kc_shape) != 2 or len(sm_shape) != 1 or len(cache_shape) != 3:
        return None
    num_tokens, rank = kc_shape
    rope_dim = pe_shape[-1]
    if len(pe_shape) == 3:
        if pe_shape[1] != 1:
            return None
    elif len(pe_shape) != 2:
        return None
    num_blocks, block_size, entry_size = cache_shape
    if (
        num_tokens == 0
        or pe_shape[0] != num_tokens
        or sm_shape[0] != num_tokens
        or entry_size < rank + rope_dim
    ):
        return None
    kc_stride = kv_c.stride()
    pe_stride = k_pe.stride()
    cache_stride = cache.stride()
    if kc_stride[1] != 1 or pe_stride[-1] != 1 or cache_stride[2] != 1 or not slots.is_contiguous():
        return None

    if rope is None:
        rope_code = 0
        pos_ptr = cs_ptr = cs_stride = max_pos = 0
        cs_code: int | None = in_code
    else:
        if rope == "neox":
            rope_code = 1
        elif rope == "gptj":
            rope_code = 2
        else:
            return None
        if type(positions) is not tensor or type(cos_sin) is not tensor:
            return None
        cs_dtype = cos_sin.dtype
        cs_code = in_code if cs_dtype is dtype else api.cos_sin_codes.get(cs_dtype)
        if cs_code is None:
            return None
        pos_shape = positions.shape
        cs_shape = cos_sin.shape
        if (
            positions.dtype is not api.int64
            or not (positions.is_cuda and cos_sin.is_cuda)
            or positions.get_device() != device
            or cos_sin.get_device() != device
            or len(pos_shape) != 1
            or pos_shape[0] != num_tokens
            or not positions.is_contiguous()
            or len(cs_shape) != 2
            or cs_shape[1] != rope_dim
            or rope_dim % 2
        ):
            return None
        cs_strides = cos_sin.stride()
        if cs_strides[1] != 1:
            return None
        pos_ptr = positions.data_ptr()
        cs_ptr = cos_sin.data_ptr()
        cs_stride = cs_strides[0]
        max_pos = cs_shape[0]

    scale = 0.0
    scale_ptr = 0
    if cache_code == DTYPE_FP8_E4M3:
        if type(kv_scale) is float:
            if not 0.0 < kv_scale <= FLOAT32_MAX:  # NaN fails too
                return None
            scale = kv_scale
        elif type(kv_scale) is tensor:
            if (
                kv_scale.dtype is not api.float32
                or kv_scale.numel() != 1
                or not kv_scale.is_cuda
                or kv_scale.get_device() != device
            ):
                return None
            scale_ptr = kv_scale.data_ptr()
        else:
            return None
    elif kv_scale is not None:
        return None

    handle = api.current_stream(device) if stream is None else stream_value(stream)
    if handle is None:
        return None
    return pack_mla(
        backend.handle("mla_kv_cache", device),
        device,
        handle,
        kv_c.data_ptr(),
        k_pe.data_ptr(),
        pos_ptr,
        cs_ptr,
        slots.data_ptr(),
        cache.data_ptr(),
        scale_ptr,
        num_tokens,
        rank,
        rope_dim,
        kc_stride[0],
        pe_stride[0],
        cs_stride,
        max_pos,
        num_blocks,
        block_size,
        entry_size,
        cache_stride[0],
        cache_stride[1],
        in_code,
        cache_code,
        cs_code,
        rope_code,
        scale,
        0,
    )


def swiglu_fast(
    backend: Backend, x: Any, clamp: Any, out: Any, stream: Any
) -> tuple[bytes, Any] | None:
    """The k3_swiglu_args block of a common call and `out` (allocated when None), or
    None: take the general path."""
    api = _torch_api.API
    if api is None:
        return None
    tensor = api.tensor
    if type(x) is not tensor or not (out is None or type(out) is tensor):
        return None
    dtype = x.dtype
    code = api.float_codes.get(dtype)
    device = x.get_device()
    x_shape = x.shape
    if code is None or device < 0 or not x.is_cuda or len(x_shape) != 2:
        return None
    rows, width = x_shape
    d = width >> 1
    x_stride = x.stride()
    if rows == 0 or d == 0 or width & 1 or x_stride[1] != 1:
        return None
    if clamp is None:
        has_clamp = 0
        clamp = 0.0
    elif type(clamp) is float and 0.0 < clamp <= FLOAT32_MAX:  # NaN fails too
        has_clamp = 1
    else:
        return None
    if out is None:
        out = api.empty((rows, d), dtype=dtype, device=x.device)
    out_shape = out.shape
    if (
        out.dtype is not dtype
        or not out.is_cuda
        or out.get_device() != device
        or len(out_shape) != 2
        or out_shape[0] != rows
        or out_shape[1] != d
    ):
        return None
    out_stride = out.stride()
    handle = api.current_stream(device) if stream is None else stream_value(stream)
    if out_stride[1] != 1 or handle is None:
        return None
    block = pack_swiglu(
        backend.handle("swiglu", device),
        device,
        handle,
        x.data_ptr(),
        out.data_ptr(),
        rows,
        d,
        x_stride[0],
        out_stride[0],
        code,
        has_clamp,
        clamp,
        0,
    )
    return block, out
