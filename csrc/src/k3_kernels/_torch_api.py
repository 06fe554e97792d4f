"""The few torch objects the launch paths use, kept apart so that torch stays optional.

Nothing here imports torch: when torch is importable, k3_kernels builds a TorchApi from
it at import time (`from_torch`) and installs it. Until then (and without torch) `API` is
None: there is no torch fast path and no torch stream. Tests install stand-ins.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._native import DTYPE_BF16, DTYPE_F16, DTYPE_F32, DTYPE_FP8_E4M3


@dataclass(frozen=True)
class TorchApi:
    tensor: type  # objects of exactly this type take the fast path
    float_codes: Mapping[Any, int]  # dtype -> DTYPE_F32 / DTYPE_F16 / DTYPE_BF16
    int64: Any
    float32: Any
    # The dtypes kv_cache and cos_sin_cache may have other than the input's, with their codes.
    cache_codes: Mapping[Any, int]  # FP8 storage (uint8, float8_e4m3fn) -> DTYPE_FP8_E4M3
    cos_sin_codes: Mapping[Any, int]  # float32 -> DTYPE_F32
    current_stream: Callable[[int], int]  # device -> the CUstream of torch's current stream
    empty: Callable[..., Any]  # torch.empty


API: TorchApi | None = None


def install(api: TorchApi | None) -> TorchApi | None:
    """Makes `api` the one the launch paths use; returns the one it replaces."""
    global API
    previous, API = API, api
    return previous


def current_torch_stream() -> Callable[[int], int] | None:
    return None if API is None else API.current_stream


def from_torch(torch: Any) -> TorchApi:
    # torch._C._cuda_getCurrentRawStream (what torch.compile's generated code uses) gives
    # the handle as an int without creating a torch.cuda.Stream object.
    raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw_stream is None:

        def raw_stream(device: int) -> int:
            return int(torch.cuda.current_stream(device).cuda_stream)

    fp8 = {torch.uint8}
    if hasattr(torch, "float8_e4m3fn"):
        fp8.add(torch.float8_e4m3fn)
    return TorchApi(
        tensor=torch.Tensor,
        float_codes={
            torch.float32: DTYPE_F32,
            torch.float16: DTYPE_F16,
            torch.bfloat16: DTYPE_BF16,
        },
        int64=torch.int64,
        float32=torch.float32,
        cache_codes=dict.fromkeys(fp8, DTYPE_FP8_E4M3),
        cos_sin_codes={torch.float32: DTYPE_F32},
        current_stream=raw_stream,
        empty=torch.empty,
    )
