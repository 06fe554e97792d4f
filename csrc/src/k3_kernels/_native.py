"""ctypes binding of libk3_host.so and the package's data files (found next to this file)."""

from __future__ import annotations

import ctypes
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._errors import DriverError, KernelArgumentError, KernelError, UnsupportedGPUError
from ._fatbin import FatbinContents, covers, describe, parse_fatbin

PACKAGE_DIR = Path(__file__).resolve().parent
HOST_LIBRARY = PACKAGE_DIR / "libk3_host.so"
DEVICE_DIR = PACKAGE_DIR / "device"
BUILD_INFO = PACKAGE_DIR / "_build_info.json"
KERNEL_STEMS = ("mla_kv_cache", "swiglu")
ABI_VERSION = 1

K3_OK = 0
K3_ERR_INVALID_ARGUMENT = 1
K3_ERR_DRIVER_UNAVAILABLE = 2
K3_ERR_NO_KERNEL_IMAGE = 3

DTYPE_F32 = 0
DTYPE_F16 = 1
DTYPE_BF16 = 2
DTYPE_FP8_E4M3 = 3

ROPE_CODES = {None: 0, "neox": 1, "gptj": 2}

_c_i64 = ctypes.c_int64
_c_i32 = ctypes.c_int32
_c_ptr = ctypes.c_void_p


class MlaArgs(ctypes.Structure):
    """Mirror of k3_mla_args in csrc/host/k3_host.h."""

    _fields_ = [
        ("kv_c", _c_ptr),
        ("k_pe", _c_ptr),
        ("positions", _c_ptr),
        ("cos_sin", _c_ptr),
        ("slot_mapping", _c_ptr),
        ("kv_cache", _c_ptr),
        ("scale_ptr", _c_ptr),
        ("num_tokens", _c_i64),
        ("rank", _c_i64),
        ("rope_dim", _c_i64),
        ("kv_c_stride", _c_i64),
        ("k_pe_stride", _c_i64),
        ("cos_sin_stride", _c_i64),
        ("max_pos", _c_i64),
        ("num_blocks", _c_i64),
        ("block_size", _c_i64),
        ("entry_size", _c_i64),
        ("block_stride", _c_i64),
        ("entry_stride", _c_i64),
        ("in_dtype", _c_i32),
        ("cache_dtype", _c_i32),
        ("cos_sin_dtype", _c_i32),
        ("rope", _c_i32),
        ("scale", ctypes.c_float),
        ("reserved", _c_i32),
    ]


class SwigluArgs(ctypes.Structure):
    """Mirror of k3_swiglu_args in csrc/host/k3_host.h."""

    _fields_ = [
        ("x", _c_ptr),
        ("out", _c_ptr),
        ("rows", _c_i64),
        ("d", _c_i64),
        ("x_stride", _c_i64),
        ("out_stride", _c_i64),
        ("dtype", _c_i32),
        ("has_clamp", _c_i32),
        ("clamp", ctypes.c_float),
        ("reserved", _c_i32),
    ]


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    major: int
    minor: int

    @property
    def sm(self) -> int:
        return self.major * 10 + self.minor


def read_build_info() -> dict[str, Any]:
    try:
        data = json.loads(BUILD_INFO.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise KernelError(
            f"{BUILD_INFO} is missing: k3_kernels is not installed from a wheel"
        ) from None
    except ValueError as exc:
        raise KernelError(f"{BUILD_INFO} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise KernelError(f"{BUILD_INFO} does not hold a JSON object")
    return data


def fatbin_path(stem: str) -> Path:
    return DEVICE_DIR / f"{stem}.fatbin"


def read_fatbin(stem: str) -> tuple[bytes, FatbinContents]:
    path = fatbin_path(stem)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise KernelError(f"{path} is missing: the k3_kernels installation is incomplete") from None
    try:
        return data, parse_fatbin(data)
    except ValueError as exc:
        raise KernelError(f"{path}: {exc}") from None


def _bind(lib: ctypes.CDLL) -> None:
    i = ctypes.c_int
    pi = ctypes.POINTER(ctypes.c_int)
    signatures: dict[str, tuple[Any, ...]] = {
        "k3_abi_version": (i,),
        "k3_last_error": (ctypes.c_char_p,),
        "k3_driver_version": (i, pi),
        "k3_device_count": (i, pi),
        "k3_device_info": (i, i, pi, pi, ctypes.c_char_p, i),
        "k3_pointer_info": (i, _c_ptr, pi, pi, pi),
        "k3_load_library": (i, ctypes.c_char_p, ctypes.c_size_t, pi),
        "k3_arch_probe": (i, i, i, pi),
        "k3_mla_key_concat_kv_cache": (i, i, i, ctypes.POINTER(MlaArgs), _c_ptr),
        "k3_swiglu": (i, i, i, ctypes.POINTER(SwigluArgs), _c_ptr),
    }
    for name, (restype, *argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


class Native:
    """The loaded host library plus, per kernel stem, its loaded fatbin."""

    def __init__(self) -> None:
        try:
            self.lib = ctypes.CDLL(str(HOST_LIBRARY))
        except OSError as exc:
            raise KernelError(f"cannot load {HOST_LIBRARY}: {exc}") from None
        _bind(self.lib)
        abi = int(self.lib.k3_abi_version())
        if abi != ABI_VERSION:
            raise KernelError(f"{HOST_LIBRARY} has ABI {abi}, this package needs {ABI_VERSION}")
        self._lock = threading.Lock()
        self._handles: dict[str, int] = {}
        self._contents: dict[str, FatbinContents] = {}
        self._gpus: dict[int, GpuInfo] = {}
        self._covered: set[tuple[str, int]] = set()

    def check(self, status: int, what: str) -> None:
        if status == K3_OK:
            return
        message = self.lib.k3_last_error().decode("utf-8", "replace")
        text = f"{what}: {message}"
        if status == K3_ERR_INVALID_ARGUMENT:
            raise KernelArgumentError(text)
        if status == K3_ERR_NO_KERNEL_IMAGE:
            raise UnsupportedGPUError(text)
        if status == K3_ERR_DRIVER_UNAVAILABLE:
            raise DriverError(text)
        raise DriverError(text)

    def driver_version(self) -> int:
        v = ctypes.c_int(0)
        self.check(self.lib.k3_driver_version(ctypes.byref(v)), "CUDA driver")
        return v.value

    def device_count(self) -> int:
        n = ctypes.c_int(0)
        self.check(self.lib.k3_device_count(ctypes.byref(n)), "CUDA devices")
        return n.value

    def device(self, index: int) -> GpuInfo:
        major = ctypes.c_int(0)
        minor = ctypes.c_int(0)
        name = ctypes.create_string_buffer(256)
        self.check(
            self.lib.k3_device_info(
                index, ctypes.byref(major), ctypes.byref(minor), name, len(name)
            ),
            f"CUDA device {index}",
        )
        return GpuInfo(index, name.value.decode("utf-8", "replace"), major.value, minor.value)

    def pointer_device(self, ptr: int, what: str) -> int:
        device = ctypes.c_int(-1)
        memory_type = ctypes.c_int(0)
        managed = ctypes.c_int(0)
        self.check(
            self.lib.k3_pointer_info(
                ptr, ctypes.byref(device), ctypes.byref(memory_type), ctypes.byref(managed)
            ),
            what,
        )
        if memory_type.value == 1 and not managed.value:  # CU_MEMORYTYPE_HOST
            raise KernelArgumentError(f"{what} is in host (pinned CPU) memory, not on a GPU")
        return device.value

    def handle(self, stem: str, device: int) -> int:
        """The loaded library of `stem`, after checking it has code for `device`."""
        with self._lock:
            if stem not in self._handles:
                data, contents = read_fatbin(stem)
                h = ctypes.c_int(-1)
                self.check(
                    self.lib.k3_load_library(data, len(data), ctypes.byref(h)),
                    f"loading {fatbin_path(stem).name}",
                )
                self._handles[stem] = h.value
                self._contents[stem] = contents
            if (stem, device) not in self._covered:
                gpu = self._gpus.get(device)
                if gpu is None:
                    gpu = self._gpus[device] = self.device(device)
                self._require_coverage(stem, self._contents[stem], gpu)
                self._covered.add((stem, device))
            return self._handles[stem]

    @staticmethod
    def _require_coverage(stem: str, contents: FatbinContents, gpu: GpuInfo) -> None:
        if covers(contents, gpu.major, gpu.minor) is None:
            raise UnsupportedGPUError(
                f"GPU {gpu.index} ({gpu.name}) is sm_{gpu.sm}, but this k3-kernels build "
                f"has code only for {describe(contents.sms, contents.ptx)} in {stem}.fatbin: "
                "install a k3-kernels wheel built for this GPU"
            )

    def arch_probe(self, stem: str, device: int) -> int:
        handle = self.handle(stem, device)
        arch = ctypes.c_int(0)
        self.check(self.lib.k3_arch_probe(handle, device, ctypes.byref(arch)), "k3_arch_probe")
        return arch.value


_state: dict[str, Native] = {}
_state_lock = threading.Lock()


def native() -> Native:
    """The process-wide host library binding, created on first use."""
    with _state_lock:
        if "native" not in _state:
            _state["native"] = Native()
        return _state["native"]
