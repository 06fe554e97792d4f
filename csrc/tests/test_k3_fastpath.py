"""k3_kernels' argument parsing on the CPU: the torch fast path against the general path.

No GPU, no torch, no host library: the tensors are stand-ins with torch's attributes
(data_ptr(), shape, stride(), dtype, get_device(), is_cuda, is_contiguous(), numel()),
installed as the "torch" the package sees. For every call built here the fast path
must either decline (return None: the general path takes the call) or produce exactly
the argument block the general path produces; where the general path raises, the fast
path must decline, so each bad input still gets its message before any launch.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

CSRC = Path(__file__).resolve().parents[1]
PACKAGE_SRC = CSRC / "src"
MLA_HANDLE, SWIGLU_HANDLE = 3, 4


@dataclass(frozen=True)
class Dtype:
    name: str

    def __str__(self) -> str:
        return f"torch.{self.name}"


F32, F16, BF16, F64 = Dtype("float32"), Dtype("float16"), Dtype("bfloat16"), Dtype("float64")
I64, I32, U8, FP8 = Dtype("int64"), Dtype("int32"), Dtype("uint8"), Dtype("float8_e4m3fn")


@dataclass(frozen=True)
class Device:
    type: str
    index: int | None


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides, written apart from the package's own (its rule is what is checked)."""
    return tuple(math.prod(max(size, 1) for size in shape[i + 1 :]) for i in range(len(shape)))


class Tensor:
    """A stand-in for torch.Tensor: what the fast path and the general path read."""

    __module__ = "torch"  # the general path recognises torch tensors by their module
    _next_ptr = 1 << 20

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: Dtype,
        *,
        strides: tuple[int, ...] | None = None,
        device: int = 0,
    ) -> None:
        self.shape = shape
        self.dtype = dtype
        self._strides = strides if strides is not None else _contiguous(shape)
        self._device = device
        self._ptr = Tensor._next_ptr
        Tensor._next_ptr += 1 << 20

    def data_ptr(self) -> int:
        return self._ptr

    def stride(self) -> tuple[int, ...]:
        return self._strides

    def get_device(self) -> int:
        return self._device

    @property
    def is_cuda(self) -> bool:
        return self._device >= 0

    @property
    def device(self) -> Device:
        return Device("cuda", self._device) if self._device >= 0 else Device("cpu", None)

    def numel(self) -> int:
        return math.prod(self.shape)

    def is_contiguous(self) -> bool:  # torch's rule: size-1 dimensions have any stride
        expected = _contiguous(self.shape)
        return self.numel() == 0 or all(
            size == 1 or got == want
            for size, got, want in zip(self.shape, self._strides, expected, strict=True)
        )

    def on(self, device: int) -> Tensor:
        self._device = device
        return self


class SubTensor(Tensor):
    """A subclass: not exactly the tensor type, so never the fast path."""


def _empty(shape: tuple[int, ...], *, dtype: Dtype, device: Device) -> Tensor:
    return Tensor(shape, dtype, device=device.index if device.index is not None else -1)


class FakeBackend:
    """The host library's part in parsing: a handle per kernel library. Pointers of
    non-torch arrays are never looked up here."""

    def handle(self, stem: str, device: int) -> int:
        return {"mla_kv_cache": MLA_HANDLE, "swiglu": SWIGLU_HANDLE}[stem]

    def pointer_device(self, ptr: int, what: str) -> int:
        raise AssertionError("only torch stand-ins are used here")


@dataclass(frozen=True)
class K3:
    fast: Any
    ops: Any
    native: Any
    kernels: Any
    torch_api: Any
    main: Any
    errors: Any


@contextlib.contextmanager
def installed_k3() -> Iterator[K3]:
    """k3_kernels from csrc/src, with the stand-ins installed as its torch."""
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(PACKAGE_SRC))
        mods = {
            name: importlib.import_module(f"k3_kernels.{module}")
            for name, module in [
                ("fast", "_fast"),
                ("ops", "_ops"),
                ("native", "_native"),
                ("kernels", "_kernels"),
                ("torch_api", "_torch_api"),
                ("main", "__main__"),
                ("errors", "_errors"),
            ]
        }
        api = mods["torch_api"].TorchApi(
            tensor=Tensor,
            float_codes={F32: 0, F16: 1, BF16: 2},
            int64=I64,
            float32=F32,
            cache_codes={U8: 3, FP8: 3},
            cos_sin_codes={F32: 0},
            current_stream=lambda device: 0xA000 + device,
            empty=_empty,
        )
        previous = mods["torch_api"].install(api)
        try:
            yield K3(**mods)
        finally:
            mods["torch_api"].install(previous)


@pytest.fixture
def k3() -> Iterator[K3]:
    with installed_k3() as k:
        yield k


# ---------------------------------------------------------------- MLA

T, RANK, ROPE, MAX_POS, BLOCKS, BLOCK_SIZE = 5, 512, 64, 128, 4, 16
Case = dict[str, Any]


def mla_case(
    dtype: Dtype = BF16, *, fp8: bool = False, rope: str | None = "neox", tokens: int = T
) -> Case:
    return {
        "kv_c": Tensor((tokens, RANK), dtype),
        "k_pe": Tensor((tokens, ROPE), dtype),
        "positions": Tensor((tokens,), I64),
        "cos_sin_cache": Tensor((MAX_POS, ROPE), F32),
        "slot_mapping": Tensor((tokens,), I64),
        "kv_cache": Tensor((BLOCKS, BLOCK_SIZE, RANK + ROPE), U8 if fp8 else dtype),
        "kv_scale": 0.02 if fp8 else None,
        "rope": rope,
        "stream": None,
    }


ARG_ORDER = (
    "kv_c",
    "k_pe",
    "positions",
    "cos_sin_cache",
    "slot_mapping",
    "kv_cache",
    "kv_scale",
    "rope",
    "stream",
)


def mla_paths(k3: K3, case: Case) -> tuple[bytes | None, bytes | Exception | None]:
    """(fast path block or None, general path block / None / the error it raised)."""
    args = [case[name] for name in ARG_ORDER]
    fast = k3.fast.mla_fast(FakeBackend(), *args)
    arrays, options = tuple(args[:6]), args[6:]
    try:
        general: bytes | Exception | None = k3.ops.mla_block(FakeBackend(), arrays, *options)
    except k3.errors.KernelArgumentError as exc:
        general = exc
    return fast, general


def fields(k3: K3, kind: str, block: bytes) -> dict[str, Any]:
    layout = k3.native.MLA_FIELDS if kind == "mla" else k3.native.SWIGLU_FIELDS
    table = k3.native.MLA_ARGS if kind == "mla" else k3.native.SWIGLU_ARGS
    return dict(zip((name for name, _ in layout), table.unpack(block), strict=True))


def test_common_calls_take_the_fast_path(k3: K3) -> None:
    for case in (
        mla_case(),
        mla_case(fp8=True),
        mla_case(F16, fp8=True, rope="gptj"),
        mla_case(F32, rope=None, tokens=1),
    ):
        fast, general = mla_paths(k3, case)
        assert fast is not None
        assert fast == general


def test_the_block_holds_the_call(k3: K3) -> None:
    case = mla_case(fp8=True)
    case["k_pe"] = Tensor((T, 1, ROPE), BF16, strides=(2 * ROPE, ROPE, 1))
    case["kv_cache"] = Tensor((BLOCKS, BLOCK_SIZE, 656), U8)
    fast, _ = mla_paths(k3, case)
    assert fast is not None
    got = fields(k3, "mla", fast)
    assert got == {
        "handle": MLA_HANDLE,
        "device": 0,
        "stream": 0xA000,
        "kv_c": case["kv_c"].data_ptr(),
        "k_pe": case["k_pe"].data_ptr(),
        "positions": case["positions"].data_ptr(),
        "cos_sin": case["cos_sin_cache"].data_ptr(),
        "slot_mapping": case["slot_mapping"].data_ptr(),
        "kv_cache": case["kv_cache"].data_ptr(),
        "scale_ptr": 0,
        "num_tokens": T,
        "rank": RANK,
        "rope_dim": ROPE,
        "kv_c_stride": RANK,
        "k_pe_stride": 2 * ROPE,
        "cos_sin_stride": ROPE,
        "max_pos": MAX_POS,
        "num_blocks": BLOCKS,
        "block_size": BLOCK_SIZE,
        "entry_size": 656,
        "block_stride": BLOCK_SIZE * 656,
        "entry_stride": 656,
        "in_dtype": 2,
        "cache_dtype": 3,
        "cos_sin_dtype": 0,
        "rope": 1,
        "scale": pytest.approx(0.02),
        "reserved": 0,
    }


Mutation = Callable[[Case], None]


def _named(label: str, mutate: Mutation) -> Mutation:
    mutate.__name__ = label
    return mutate


def _set(name: str, value: Callable[[], Any], label: str) -> Mutation:
    def mutate(case: Case) -> None:
        case[name] = value()

    return _named(f"{name}={label}", mutate)


def _tensor_change(name: str, label: str, change: Callable[[Tensor], Any]) -> Mutation:
    """Replaces case[name] by change(case[name]) where it is a tensor stand-in."""

    def mutate(case: Case) -> None:
        if isinstance(case[name], Tensor):
            case[name] = change(case[name])

    return _named(f"{name} {label}", mutate)


def _retype(name: str, dtype: Dtype) -> Mutation:
    return _tensor_change(name, dtype.name, lambda t: Tensor(t.shape, dtype, strides=t.stride()))


def _reshape(name: str, shape: tuple[int, ...], strides: tuple[int, ...] | None = None) -> Any:
    label = f"{list(shape)}" + ("" if strides is None else f" strides {list(strides)}")
    return _tensor_change(name, label, lambda t: Tensor(shape, t.dtype, strides=strides))


def _move(name: str, device: int) -> Mutation:
    return _tensor_change(name, f"on {device}", lambda t: t.on(device))


def _subclass(name: str) -> Mutation:
    return _tensor_change(
        name,
        "subclass",
        lambda t: SubTensor(t.shape, t.dtype, strides=t.stride(), device=t.get_device()),
    )


def _every_tensor(label: str, change: Callable[[str, Tensor], Tensor]) -> Mutation:
    def mutate(case: Case) -> None:
        for name, value in case.items():
            if isinstance(value, Tensor):
                case[name] = change(name, value)

    return _named(label, mutate)


def _to_f32(name: str, t: Tensor) -> Tensor:
    keep = name in {"positions", "slot_mapping", "kv_scale"} or t.dtype in (U8, FP8)
    return t if keep else Tensor(t.shape, F32, strides=t.stride(), device=t.get_device())


def _without_tokens(name: str, t: Tensor) -> Tensor:
    if name in {"kv_c", "k_pe", "positions", "slot_mapping"}:
        return Tensor((0, *t.shape[1:]), t.dtype, device=t.get_device())
    return t


class StreamObject:
    cuda_stream = 0x5150


MLA_MUTATIONS: list[Mutation] = [
    _retype("kv_c", F64),
    _retype("kv_c", F16),
    _retype("kv_c", I64),
    _retype("k_pe", F16),
    _every_tensor("all float32", _to_f32),
    _retype("kv_cache", U8),
    _retype("kv_cache", FP8),
    _retype("kv_cache", F32),
    _retype("kv_cache", I32),
    _retype("slot_mapping", I32),
    _retype("positions", I32),
    _retype("cos_sin_cache", F16),
    _retype("cos_sin_cache", BF16),
    _set("kv_scale", lambda: None, "None"),
    _set("kv_scale", lambda: 0.37, "0.37"),
    _set("kv_scale", lambda: 1, "1"),
    _set("kv_scale", lambda: True, "True"),
    _set("kv_scale", lambda: -1.0, "-1.0"),
    _set("kv_scale", lambda: 0.0, "0.0"),
    _set("kv_scale", lambda: float("nan"), 'float("nan")'),
    _set("kv_scale", lambda: float("inf"), 'float("inf")'),
    _set("kv_scale", lambda: 1e300, "1e300"),
    _set("kv_scale", lambda: 1e-50, "1e-50"),
    _set("kv_scale", lambda: "0.1", '"0.1"'),
    _set("kv_scale", lambda: Tensor((1,), F32), "Tensor((1,), F32)"),
    _set("kv_scale", lambda: Tensor((), F32), "Tensor((), F32)"),
    _set("kv_scale", lambda: Tensor((1, 1), F32), "Tensor((1, 1), F32)"),
    _set("kv_scale", lambda: Tensor((2,), F32), "Tensor((2,), F32)"),
    _set("kv_scale", lambda: Tensor((1,), F16), "Tensor((1,), F16)"),
    _set("kv_scale", lambda: Tensor((1,), F32, device=1), "Tensor((1,), F32, device=1)"),
    _set("kv_scale", lambda: Tensor((1,), F32, device=-1), "Tensor((1,), F32, device=-1)"),
    _set("rope", lambda: None, "None"),
    _set("rope", lambda: "gptj", '"gptj"'),
    _set("rope", lambda: "yarn", '"yarn"'),
    _set("rope", lambda: ["neox"], '["neox"]'),
    _set("positions", lambda: None, "None"),
    _set("cos_sin_cache", lambda: None, "None"),
    _set("positions", object, "object()"),
    _reshape("positions", (T, 1)),
    _reshape("positions", (T + 1,)),
    _reshape("positions", (T,), (2,)),
    _reshape("positions", (1,), (7,)),
    _reshape("cos_sin_cache", (MAX_POS, 32)),
    _reshape("cos_sin_cache", (MAX_POS * ROPE,)),
    _reshape("cos_sin_cache", (MAX_POS, ROPE), (2 * ROPE, 2)),
    _reshape("cos_sin_cache", (MAX_POS, ROPE), (ROPE + 8, 1)),
    _reshape("slot_mapping", (T, 1)),
    _reshape("slot_mapping", (T - 1,)),
    _reshape("slot_mapping", (T,), (3,)),
    _reshape("kv_c", (T * RANK,)),
    _reshape("kv_c", (T, 2, RANK // 2)),
    _reshape("kv_c", (T, RANK), (RANK * 2, 2)),
    _reshape("kv_c", (T, RANK), (RANK + 16, 1)),
    _reshape("kv_c", (T, RANK), (RANK // 2, 1)),
    _reshape("kv_c", (T, 1), (3, 5)),
    _reshape("k_pe", (T, 1, ROPE)),
    _reshape("k_pe", (T, 2, ROPE // 2)),
    _reshape("k_pe", (T, ROPE - 1)),
    _reshape("k_pe", (T - 1, ROPE)),
    _reshape("k_pe", (T, ROPE), (ROPE, 2)),
    _reshape("k_pe", (T,)),
    _reshape("kv_cache", (BLOCKS * BLOCK_SIZE, RANK + ROPE)),
    _reshape("kv_cache", (BLOCKS, BLOCK_SIZE, RANK)),
    _reshape("kv_cache", (BLOCKS, BLOCK_SIZE, RANK + ROPE + 8)),
    _reshape("kv_cache", (BLOCKS, BLOCK_SIZE, RANK + ROPE), (9999, 600, 1)),
    _reshape("kv_cache", (BLOCKS, BLOCK_SIZE, RANK + ROPE), (9999, 600, 2)),
    _move("k_pe", 1),
    _move("slot_mapping", -1),
    _move("kv_c", -1),
    _move("positions", 1),
    _move("cos_sin_cache", -1),
    _every_tensor("all on device 1", lambda _, t: t.on(1)),
    _every_tensor("no tokens", _without_tokens),
    _subclass("kv_c"),
    _subclass("kv_cache"),
    _subclass("positions"),
    _set("kv_c", object, "object()"),
    _set("stream", lambda: 7, "7"),
    _set("stream", lambda: -1, "-1"),
    _set("stream", lambda: 1 << 64, "1 << 64"),
    _set("stream", StreamObject, "StreamObject()"),
    _set("stream", lambda: "default", '"default"'),
]
BASES: list[Callable[[], Case]] = [
    mla_case,
    lambda: mla_case(fp8=True),
    lambda: mla_case(F16, fp8=True, rope="gptj"),
    lambda: mla_case(F32, rope=None, tokens=1),
]


def _check_mla_agreement(k3: K3, case: Case) -> bool:
    """Asserts the two paths agree on `case`; True when the fast path took it."""
    fast, general = mla_paths(k3, case)
    if isinstance(general, Exception) or general is None:
        assert fast is None, f"the fast path accepted what the general path refused: {general}"
    else:
        assert fast is None or fast == general, _diff(k3, "mla", fast, general)
    return fast is not None


def _diff(k3: K3, kind: str, a: bytes, b: bytes) -> str:
    fa, fb = fields(k3, kind, a), fields(k3, kind, b)
    return str({k: (fa[k], fb[k]) for k in fa if fa[k] != fb[k]})


@pytest.mark.parametrize("mutate", MLA_MUTATIONS, ids=lambda m: m.__name__)
@pytest.mark.parametrize("base", range(len(BASES)))
def test_mla_one_change_paths_agree(k3: K3, base: int, mutate: Callable[[Case], None]) -> None:
    case = BASES[base]()
    mutate(case)
    _check_mla_agreement(k3, case)


@settings(max_examples=300, deadline=None)
@given(
    base=st.integers(0, len(BASES) - 1),
    changes=st.lists(st.sampled_from(MLA_MUTATIONS), max_size=4),
)
def test_mla_several_changes_paths_agree(base: int, changes: list[Callable[[Case], None]]) -> None:
    with installed_k3() as k3:
        case = BASES[base]()
        for change in changes:
            change(case)
        _check_mla_agreement(k3, case)


def test_fast_path_takes_valid_variations(k3: K3) -> None:
    """The fast path is not just declining everything: these all go through it."""
    taken = []
    for mutate in MLA_MUTATIONS:
        case = mla_case()
        mutate(case)
        if _check_mla_agreement(k3, case):
            taken.append(mutate.__name__)
    for expected in ("rope=", "stream=", "kv_cache ", "kv_c ", "k_pe ", "all on device 1"):
        assert any(name.startswith(expected) for name in taken), (expected, taken)


# ---------------------------------------------------------------- SwiGLU


def swiglu_case() -> Case:
    return {"x": Tensor((4, 2 * 96), BF16), "clamp": None, "out": Tensor((4, 96), BF16)}


def swiglu_paths(k3: K3, case: Case) -> tuple[Any, Any]:
    args = (case["x"], case["clamp"], case["out"], case.get("stream"))
    fast = k3.fast.swiglu_fast(FakeBackend(), *args)
    try:
        general = k3.ops.swiglu_block(FakeBackend(), *args)
    except k3.errors.KernelArgumentError as exc:
        general = exc
    return fast, general


SWIGLU_MUTATIONS: list[Mutation] = [
    _retype("x", F32),
    _retype("x", F64),
    _retype("out", F16),
    _set("clamp", lambda: 7.0, "7.0"),
    _set("clamp", lambda: 7, "7"),
    _set("clamp", lambda: -1.0, "-1.0"),
    _set("clamp", lambda: 0.0, "0.0"),
    _set("clamp", lambda: float("nan"), 'float("nan")'),
    _set("clamp", lambda: 1e300, "1e300"),
    _set("clamp", lambda: "7", '"7"'),
    _set("out", lambda: None, "None"),
    _set("out", object, "object()"),
    _reshape("x", (4, 191)),
    _reshape("x", (4, 0)),
    _reshape("x", (0, 192)),
    _reshape("x", (2, 4, 48)),
    _reshape("x", (4, 192), (400, 1)),
    _reshape("x", (4, 192), (384, 2)),
    _reshape("out", (4, 97)),
    _reshape("out", (96,)),
    _reshape("out", (4, 96), (200, 1)),
    _reshape("out", (4, 96), (192, 2)),
    _move("out", 1),
    _move("x", -1),
    _subclass("x"),
    _set("stream", lambda: 9, "9"),
    _set("stream", lambda: "default", '"default"'),
]


@pytest.mark.parametrize("mutate", SWIGLU_MUTATIONS, ids=lambda m: m.__name__)
def test_swiglu_paths_agree(k3: K3, mutate: Callable[[Case], None]) -> None:
    case = swiglu_case()
    mutate(case)
    fast, general = swiglu_paths(k3, case)
    if isinstance(general, Exception) or general[0] is None:
        assert fast is None, f"the fast path accepted what the general path refused: {general}"
    elif fast is not None:
        got, want = fields(k3, "swiglu", fast[0]), fields(k3, "swiglu", general[0])
        if case["out"] is None:  # each path allocated its own out
            assert fast[1].shape == general[1].shape == (4, 96)
            assert fast[1].dtype is general[1].dtype
            got.pop("out")
            want.pop("out")
        assert got == want


def test_swiglu_fast_path_block(k3: K3) -> None:
    case = swiglu_case()
    case["clamp"] = 7.0
    fast, general = swiglu_paths(k3, case)
    assert fast is not None
    assert fast == general
    assert fields(k3, "swiglu", fast[0]) == {
        "handle": SWIGLU_HANDLE,
        "device": 0,
        "stream": 0xA000,
        "x": case["x"].data_ptr(),
        "out": case["out"].data_ptr(),
        "rows": 4,
        "d": 96,
        "x_stride": 192,
        "out_stride": 96,
        "dtype": 2,
        "has_clamp": 1,
        "clamp": 7.0,
        "reserved": 0,
    }


# ---------------------------------------------------------------- torch.compile routing


def test_public_functions_call_the_operators_while_compiling(
    k3: K3, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, tuple[Any, ...]]] = []
    traced = k3.kernels._Traced
    monkeypatch.setattr(traced, "compiling", lambda: True)

    def record(kind: str, result: Any) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            calls.append((kind, args))
            return result

        return call

    monkeypatch.setattr(traced, "mla", record("mla", None), raising=False)
    monkeypatch.setattr(traced, "swiglu", record("swiglu", "out"), raising=False)
    case = mla_case(fp8=True)
    args = [case[name] for name in ARG_ORDER[:6]]
    k3.kernels.mla_key_concat_kv_cache(*args, kv_scale=0.5, rope="gptj", check_indices=True)
    assert calls == [("mla", (*args, 0.5, "gptj", True))]
    x = Tensor((2, 8), F16)
    assert k3.kernels.swiglu(x, clamp=3.0) == "out"
    assert calls[1] == ("swiglu", (x, 3.0, None))


# ---------------------------------------------------------------- info and README


def test_info_text_prints_only_what_is_known(k3: K3) -> None:
    info = importlib.import_module("k3_kernels._info")
    report = info.Info(
        build={"cuda_version": "12.9", "sms": ["90"], "ptx": None, "target_arch": "x86_64"},
        fatbins=(),
        driver_version=None,
        gpus=(),
        driver_problem="no driver here",
    )
    text = k3.main._text(report)
    assert "None" not in text
    assert "?" not in text
    assert "local label" not in text
    assert "device compiler" not in text
    labelled = k3.main._text(
        info.Info(
            build={**report.build, "local_label": "cu129", "device_compiler": "nvrtc"},
            fatbins=(),
            driver_version=None,
            gpus=(),
            driver_problem="no driver here",
        )
    )
    assert "local label: cu129" in labelled
    assert "device compiler nvrtc" in labelled


def test_package_readme_links_are_absolute() -> None:
    """csrc/README.md is the long description on PyPI, where relative links break."""
    text = (CSRC / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)]+)\)", text)
    assert links, "expected at least the link to BUILDING.md"
    assert all(link.startswith("https://") for link in links), links
