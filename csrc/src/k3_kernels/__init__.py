"""k3_kernels: MLA KV-cache concat (with RoPE and FP8) and SwiGLU CUDA kernels.

The kernels ship as fatbins next to this file and are launched through a small C
library (libk3_host.so) that talks to the NVIDIA driver directly; no CUDA toolkit or
runtime is needed at run time. Arrays may be torch tensors, cupy arrays, or any object
with __cuda_array_interface__ or __dlpack__. When torch is installed, the kernels are
also torch operators (torch.ops.k3.*), which torch.compile can trace.
"""

from __future__ import annotations

from ._errors import DriverError, KernelArgumentError, KernelError, UnsupportedGPUError
from ._info import build_info, info, loaded_arch, loaded_arches
from ._kernels import mla_key_concat_kv_cache, swiglu
from ._torch_ops import register as _register_torch_ops

_register_torch_ops()

__all__ = [
    "DriverError",
    "KernelArgumentError",
    "KernelError",
    "UnsupportedGPUError",
    "build_info",
    "info",
    "loaded_arch",
    "loaded_arches",
    "mla_key_concat_kv_cache",
    "swiglu",
]
