"""The kernels as PyTorch operators, registered when torch is importable.

    torch.ops.k3.mla_key_concat_kv_cache(kv_c, k_pe, positions, cos_sin_cache,
        slot_mapping, kv_cache, kv_scale=None, kv_scale_tensor=None, rope="neox",
        check_indices=False)                        # writes kv_cache, returns nothing
    torch.ops.k3.swiglu(x, clamp=None) -> out
    torch.ops.k3.swiglu_out(out, x, clamp=None)     # writes out, returns nothing

Each has a fake (meta) implementation and declares what it mutates, so torch.compile
can trace calls into its graph (fullgraph=True works) and CUDA graphs capture them like
any other operator. The kernels run on torch's current stream. The public functions
k3_kernels.mla_key_concat_kv_cache and k3_kernels.swiglu call these operators while
torch.compile traces them, so code written against either compiles.
"""

from __future__ import annotations

from typing import Any

from . import _torch_api
from ._kernels import _Traced, mla_key_concat_kv_cache, swiglu

MLA_SCHEMA = (
    "(Tensor kv_c, Tensor k_pe, Tensor? positions, Tensor? cos_sin_cache, "
    "Tensor slot_mapping, Tensor(a!) kv_cache, float? kv_scale=None, "
    'Tensor? kv_scale_tensor=None, str? rope="neox", bool check_indices=False) -> ()'
)
SWIGLU_SCHEMA = "(Tensor x, float? clamp=None) -> Tensor"
SWIGLU_OUT_SCHEMA = "(Tensor(a!) out, Tensor x, float? clamp=None) -> ()"
_LIBRARIES: list[Any] = []  # the torch.library.Library objects holding the registrations


def _mla(  # noqa: PLR0917 - the operator's schema, positionally
    kv_c: Any,
    k_pe: Any,
    positions: Any,
    cos_sin_cache: Any,
    slot_mapping: Any,
    kv_cache: Any,
    kv_scale: float | None = None,
    kv_scale_tensor: Any = None,
    rope: str | None = "neox",
    check_indices: bool = False,
) -> None:
    mla_key_concat_kv_cache(
        kv_c,
        k_pe,
        positions,
        cos_sin_cache,
        slot_mapping,
        kv_cache,
        kv_scale=kv_scale if kv_scale_tensor is None else kv_scale_tensor,
        rope=rope,
        check_indices=check_indices,
    )


def _no_result(*args: Any) -> None:
    """The fake implementation of the operators that only write their output arguments."""


def _swiglu(x: Any, clamp: float | None = None) -> Any:
    return swiglu(x, clamp=clamp)


def _swiglu_fake(x: Any, clamp: float | None = None) -> Any:
    return x.new_empty((x.shape[0], x.shape[1] // 2))


def _swiglu_out(out: Any, x: Any, clamp: float | None = None) -> None:
    swiglu(x, clamp=clamp, out=out)


def register() -> None:
    """Installs the torch fast path and registers the operators, if torch imports."""
    try:
        import torch  # noqa: PLC0415 - optional: only when it is installed
    except ImportError:
        return
    _torch_api.install(_torch_api.from_torch(torch))
    if not hasattr(torch.library, "register_fake"):
        return  # torch before 2.4: the functions work, without operators
    # A Library with define/impl rather than torch.library.custom_op: the same operator
    # for the dispatcher and torch.compile, without custom_op's Python wrapper around
    # every eager call (about ten times the dispatch cost). The mutations are in the
    # schemas; the registrations last as long as the Library object.
    library = torch.library.Library("k3", "FRAGMENT")
    ops = {
        "mla_key_concat_kv_cache": (_mla, _no_result, MLA_SCHEMA),
        "swiglu": (_swiglu, _swiglu_fake, SWIGLU_SCHEMA),
        "swiglu_out": (_swiglu_out, _no_result, SWIGLU_OUT_SCHEMA),
    }
    for name, (impl, fake, schema) in ops.items():
        if hasattr(torch.ops.k3, name):
            continue  # registered by another copy of this package in the process
        library.define(name + schema)
        library.impl(name, impl, "CompositeExplicitAutograd")
        torch.library.register_fake(f"k3::{name}", fake, lib=library)
    _LIBRARIES.append(library)
    k3 = torch.ops.k3

    def traced_mla(*args: Any) -> None:
        """The public function's arguments (six arrays, kv_scale, rope, check_indices) as
        an operator call: a tensor scale goes to kv_scale_tensor."""
        *arrays, kv_scale, rope, check_indices = args
        tensor_scale = isinstance(kv_scale, torch.Tensor)
        k3.mla_key_concat_kv_cache(
            *arrays,
            None if tensor_scale else kv_scale,
            kv_scale if tensor_scale else None,
            rope,
            check_indices,
        )

    def traced_swiglu(x: Any, clamp: Any, out: Any) -> Any:
        if out is None:
            return k3.swiglu(x, clamp)
        k3.swiglu_out(out, x, clamp)
        return out

    _Traced.mla = traced_mla
    _Traced.swiglu = traced_swiglu
    # True only while Dynamo traces (it folds the call to a constant); a plain
    # `return False` otherwise, the cheapest check on the eager path.
    compiler = torch.compiler
    _Traced.compiling = getattr(compiler, "is_dynamo_compiling", compiler.is_compiling)
