"""ctypes binding of libk3_host.so and the package's data files (found next to this file)."""

from __future__ import annotations

import ctypes
import json
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ._errors import DriverError, KernelArgumentError, KernelError, UnsupportedGPUError
from ._fatbin import FatbinContents, covers, describe, parse_fatbin

PACKAGE_DIR = Path(__file__).resolve().parent
HOST_LIBRARY = PACKAGE_DIR / "libk3_host.so"
DEVICE_DIR = PACKAGE_DIR / "device"
BUILD_INFO = PACKAGE_DIR / "_build_info.json"
KERNEL_STEMS = ("mla_kv_cache", "swiglu")
ABI_VERSION = 2

K3_OK = 0
K3_ERR_INVALID_ARGUMENT = 1
K3_ERR_DRIVER_UNAVAILABLE = 2
K3_ERR_NO_KERNEL_IMAGE = 3

DTYPE_F32 = 0
DTYPE_F16 = 1
DTYPE_BF16 = 2
DTYPE_FP8_E4M3 = 3

ROPE_CODES = {None: 0, "neox": 1, "gptj": 2}


def _layout(fields: tuple[tuple[str, str], ...]) -> struct.Struct:
    """A C struct of the host library as a struct.Struct: little-endian (x86_64 and
    aarch64 alike), every field at its natural alignment, so no padding."""
    return struct.Struct("<" + "".join(code for _, code in fields))


# k3_mla_args and k3_swiglu_args of csrc/host/k3_host.h, field by field (Q: a pointer).
MLA_FIELDS = (
    ("handle", "i"),
    ("device", "i"),
    ("stream", "Q"),
    ("kv_c", "Q"),
    ("k_pe", "Q"),
    ("positions", "Q"),
    ("cos_sin", "Q"),
    ("slot_mapping", "Q"),
    ("kv_cache", "Q"),
    ("scale_ptr", "Q"),
    ("num_tokens", "q"),
    ("rank", "q"),
    ("rope_dim", "q"),
    ("kv_c_stride", "q"),
    ("k_pe_stride", "q"),
    ("cos_sin_stride", "q"),
    ("max_pos", "q"),
    ("num_blocks", "q"),
    ("block_size", "q"),
    ("entry_size", "q"),
    ("block_stride", "q"),
    ("entry_stride", "q"),
    ("in_dtype", "i"),
    ("cache_dtype", "i"),
    ("cos_sin_dtype", "i"),
    ("rope", "i"),
    ("scale", "f"),
    ("reserved", "i"),
)
SWIGLU_FIELDS = (
    ("handle", "i"),
    ("device", "i"),
    ("stream", "Q"),
    ("x", "Q"),
    ("out", "Q"),
    ("rows", "q"),
    ("d", "q"),
    ("x_stride", "q"),
    ("out_stride", "q"),
    ("dtype", "i"),
    ("has_clamp", "i"),
    ("clamp", "f"),
    ("reserved", "i"),
)
MLA_ARGS = _layout(MLA_FIELDS)
SWIGLU_ARGS = _layout(SWIGLU_FIELDS)
# Argument blocks are built by these, with the fields above as positional arguments.
pack_mla = MLA_ARGS.pack
pack_swiglu = SWIGLU_ARGS.pack
# The largest finite float32: a scale or clamp above it cannot be packed.
FLOAT32_MAX = 3.4028234663852886e38


class Backend(Protocol):
    """What argument parsing needs from the host library; Native is the real one."""

    def handle(self, stem: str, device: int) -> int: ...

    def pointer_device(self, ptr: int, what: str) -> int: ...


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
        "k3_pointer_info": (i, ctypes.c_void_p, pi, pi, pi),
        "k3_load_library": (i, ctypes.c_char_p, ctypes.c_size_t, pi),
        "k3_arch_probe": (i, i, i, pi),
        # One argument: a packed k3_mla_args / k3_swiglu_args (bytes, passed by address).
        "k3_mla_key_concat_kv_cache": (i, ctypes.c_char_p),
        "k3_mla_check_indices": (i, ctypes.c_char_p),
        "k3_swiglu": (i, ctypes.c_char_p),
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
        # The launch entry points, called with a packed argument block; 0 is K3_OK.
        self.mla: Callable[[bytes], int] = self.lib.k3_mla_key_concat_kv_cache
        self.mla_check_indices: Callable[[bytes], int] = self.lib.k3_mla_check_indices
        self.swiglu: Callable[[bytes], int] = self.lib.k3_swiglu
        self._lock = threading.Lock()
        self._handles: dict[str, int] = {}
        self._contents: dict[str, FatbinContents] = {}
        self._gpus: dict[int, GpuInfo] = {}
        # (stem, device) -> handle, once the fatbin is loaded and covers that GPU
        self._ready: dict[tuple[str, int], int] = {}

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
        ready = self._ready.get((stem, device))
        if ready is not None:
            return ready
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
            gpu = self._gpus.get(device)
            if gpu is None:
                gpu = self._gpus[device] = self.device(device)
            self._require_coverage(stem, self._contents[stem], gpu)
            self._ready[(stem, device)] = self._handles[stem]
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


_native: Native | None = None
_native_lock = threading.Lock()


def native() -> Native:
    """The process-wide host library binding, created on first use."""
    if _native is not None:
        return _native
    return _create_native()


def _create_native() -> Native:
    global _native  # noqa: PLW0603 - the one process-wide binding
    with _native_lock:
        if _native is None:
            _native = Native()
        return _native
