"""Turning torch tensors, cupy arrays and other GPU arrays into pointers, shapes and strides.

Accepted: torch tensors (read natively, so bf16 and fp8 work), anything with
`__cuda_array_interface__` (cupy, numba, ...), and anything with `__dlpack__`.
Strides are in elements.
"""

from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass
from typing import Any

from ._errors import KernelArgumentError
from ._native import Backend
from ._torch_api import current_torch_stream

_CAI_TYPES = {
    "f4": "float32",
    "f2": "float16",
    "i8": "int64",
    "i4": "int32",
    "u1": "uint8",
    "i1": "int8",
    "u2": "uint16",
    "f8": "float64",
}
# DLPack (code, bits) -> dtype
_DLPACK_TYPES = {
    (2, 32): "float32",
    (2, 16): "float16",
    (4, 16): "bfloat16",
    (0, 64): "int64",
    (0, 32): "int32",
    (1, 8): "uint8",
    (10, 8): "float8_e4m3fn",
    (2, 64): "float64",
}
_ITEMSIZE = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "int64": 8,
    "int32": 4,
    "uint8": 1,
    "int8": 1,
    "uint16": 2,
    "float64": 8,
    "float8_e4m3fn": 1,
}
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13


@dataclass(frozen=True)
class GpuArray:
    name: str
    obj: Any
    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str
    device: int
    source: str  # "torch", "cupy", "cai" or "dlpack"
    keepalive: Any = None

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE.get(self.dtype, 0)

    def describe(self) -> str:
        return f"{self.name} (shape {list(self.shape)}, {self.dtype})"


def _module_root(obj: Any) -> str:
    return type(obj).__module__.split(".", 1)[0]


_TORCH_DTYPES: dict[Any, str] = {}


def _from_torch(name: str, t: Any) -> GpuArray:
    if not t.is_cuda:
        raise KernelArgumentError(
            f"{name} is a torch tensor on the {t.device.type} device; "
            "k3_kernels needs CUDA tensors (move it with .cuda())"
        )
    dtype = _TORCH_DTYPES.get(t.dtype)
    if dtype is None:
        dtype = _TORCH_DTYPES.setdefault(t.dtype, str(t.dtype).replace("torch.", ""))
    return GpuArray(
        name, t, t.data_ptr(), tuple(t.shape), t.stride(), dtype, t.get_device(), "torch"
    )


def _from_cai(name: str, obj: Any, backend: Backend) -> GpuArray:
    cai = obj.__cuda_array_interface__
    typestr = str(cai["typestr"])
    dtype = _CAI_TYPES.get(typestr[1:], typestr)
    shape = tuple(int(s) for s in cai["shape"])
    ptr = int(cai["data"][0] or 0)
    itemsize = _ITEMSIZE.get(dtype, 1)
    raw = cai.get("strides")
    if raw is None:
        strides = _contiguous_strides(shape)
    else:
        if any(int(s) % itemsize for s in raw):
            raise KernelArgumentError(f"{name} has strides not a multiple of its element size")
        strides = tuple(int(s) // itemsize for s in raw)
    device = _device_of(name, ptr, shape, backend)
    source = "cupy" if _module_root(obj) == "cupy" else "cai"
    return GpuArray(name, obj, ptr, shape, strides, dtype, device, source)


def _from_dlpack(name: str, obj: Any) -> GpuArray:
    device_type, device_id = obj.__dlpack_device__()
    if device_type == _DL_CPU:
        raise KernelArgumentError(f"{name} is a CPU array; k3_kernels needs GPU memory")
    if device_type == _DL_CUDA_HOST:
        raise KernelArgumentError(f"{name} is in pinned host memory, not on a GPU")
    if device_type not in (_DL_CUDA, _DL_CUDA_MANAGED):
        raise KernelArgumentError(f"{name} is on DLPack device type {device_type}, not CUDA")
    capsule = obj.__dlpack__()
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    address = get_pointer(capsule, b"dltensor")
    t = _DLTensor.from_address(address)
    ndim = int(t.ndim)
    shape = tuple(int(t.shape[i]) for i in range(ndim))
    dtype = _DLPACK_TYPES.get((int(t.dtype.code), int(t.dtype.bits)))
    if dtype is None or int(t.dtype.lanes) != 1:
        raise KernelArgumentError(
            f"{name} has DLPack dtype code {t.dtype.code}, {t.dtype.bits} bits: not supported"
        )
    strides = (
        tuple(int(t.strides[i]) for i in range(ndim)) if t.strides else _contiguous_strides(shape)
    )
    ptr = int(t.data or 0) + int(t.byte_offset)
    # The capsule owns the memory view: keep it until the kernel is launched.
    return GpuArray(name, obj, ptr, shape, strides, dtype, int(device_id), "dlpack", capsule)


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = []
    step = 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _device_of(name: str, ptr: int, shape: tuple[int, ...], backend: Backend) -> int:
    if ptr == 0:
        if 0 in shape:
            return -1  # an empty array has no memory and no device
        raise KernelArgumentError(f"{name} has a null data pointer")
    return backend.pointer_device(ptr, name)


def as_gpu_array(name: str, obj: Any, backend: Backend) -> GpuArray:
    if obj is None:
        raise KernelArgumentError(f"{name} is None; expected a CUDA tensor")
    if _module_root(obj) == "torch" and hasattr(obj, "data_ptr"):
        return _from_torch(name, obj)
    if _module_root(obj) == "numpy":
        raise KernelArgumentError(f"{name} is a numpy (CPU) array; k3_kernels needs GPU memory")
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_cai(name, obj, backend)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return _from_dlpack(name, obj)
    raise KernelArgumentError(
        f"{name} is a {type(obj).__name__}: expected a torch tensor, a cupy array or an "
        "object with __cuda_array_interface__ or __dlpack__"
    )


def stream_value(stream: Any) -> int | None:
    """The CUstream handle of a stream the caller passed, or None if it is not a stream."""
    value = stream
    if not isinstance(value, int):
        value = next(
            (
                v
                for v in (getattr(stream, a, None) for a in ("cuda_stream", "ptr", "handle"))
                if isinstance(v, int)
            ),
            None,
        )
        protocol = getattr(stream, "__cuda_stream__", None)
        if value is None and protocol is not None:
            value = int(protocol()[1])
    if value is None or not 0 <= value < 1 << 64:
        return None
    return int(value)


def given_stream(stream: Any) -> int:
    value = stream_value(stream)
    if value is not None:
        return value
    if isinstance(stream, int):
        raise KernelArgumentError(f"stream handle {stream} is not a CUstream value")
    raise KernelArgumentError(
        f"stream is a {type(stream).__name__}: pass an int handle, a torch.cuda.Stream "
        "or a cupy Stream"
    )


def stream_handle(stream: Any, arrays: tuple[GpuArray, ...], device: int) -> int:
    """The CUstream to launch on: the given one, else the current torch/cupy stream."""
    if stream is not None:
        return given_stream(stream)
    sources = {a.source for a in arrays}
    if "torch" in sources:
        current = current_torch_stream()
        if current is not None:
            return current(device)
    if "cupy" in sources and "cupy" in sys.modules:
        cupy = sys.modules["cupy"]
        return int(cupy.cuda.get_current_stream().ptr)
    return 0
