"""mla_key_concat_kv_cache against the PyTorch reference: every dtype x cache x rope x layout.

Every cache starts filled with a NaN sentinel, and the whole allocation (padding slots,
unused slots, the columns past rank + rope_dim, the bytes around a strided view) is
compared with the reference: a skipped token, a no-op launch or a stray write fails.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import pytest

from gpu.reference import (
    SENTINEL_BYTE,
    describe_mismatch,
    float_dtype,
    mla_reference,
    same_bytes,
)

torch = pytest.importorskip("torch")
k3 = pytest.importorskip("k3_kernels")

pytestmark = pytest.mark.gpu

MAX_POS = 4096
FP8_SCALE = 0.02


@dataclass(frozen=True)
class Layout:
    name: str
    tokens: int
    rank: int
    rope_dim: int
    entry: int  # cache entry width (>= rank + rope_dim)
    block_size: int
    misaligned: bool  # kv_c, cos_sin and the cache are views at an odd offset, odd strides
    misaligned_pe: bool  # k_pe is such a view
    k_pe_3d: bool
    cos_sin_same_dtype: bool  # else fp32


# Between them: the rank 512 + rope 64 entry point with and without paired k_pe accesses,
# the any-shape entry point's vector path (rank <= 512, rope_dim <= 64) and its general
# path with vectors (rank > 512) and element-wise, an odd token count, padded cache
# entries, and a block size that is not a power of two.
LAYOUTS = (
    Layout("aligned", 203, 512, 64, 576, 16, False, False, False, False),
    Layout("narrow", 77, 256, 32, 288, 16, False, False, False, True),
    Layout("odd", 67, 509, 62, 577, 16, True, True, True, True),
    Layout("wide", 1000, 512, 64, 640, 64, False, False, True, True),
    Layout("pe-odd", 99, 512, 64, 576, 24, False, True, False, False),
    Layout("big", 45, 1024, 128, 1152, 16, False, False, False, False),
)


@dataclass
class Case:
    kv_c: Any
    k_pe: Any
    positions: Any
    cos_sin: Any
    slots: Any
    parent: Any  # the allocation the cache is a view of
    cache: Any
    view: tuple[slice, ...]

    def operands(self) -> tuple[Any, ...]:
        """The six tensors of an MLA call, in the entry point's positional order."""
        return (self.kv_c, self.k_pe, self.positions, self.cos_sin, self.slots, self.cache)


def _cos_sin(rope_dim: int, dtype: Any) -> Any:
    half = rope_dim // 2
    inv_freq = 1.0 / (10000.0 ** (torch.arange(half, dtype=torch.float64) / half))
    angles = torch.arange(MAX_POS, dtype=torch.float64)[:, None] * inv_freq[None, :]
    table = torch.cat([angles.cos(), angles.sin()], dim=1).to(dtype)
    return table.cuda()


def make_case(layout: Layout, in_dtype: Any, cache_dtype: Any, seed: int) -> Case:
    torch.manual_seed(seed)
    t, rank, rd = layout.tokens, layout.rank, layout.rope_dim
    off = 1 if layout.misaligned else 0
    pe_off = 1 if layout.misaligned_pe else 0
    kv_parent = (torch.randn(t, rank + 6, device="cuda") * 3).to(in_dtype)
    kv_c = kv_parent[:, off : off + rank]
    pe_parent = torch.randn(t, 1, rd + pe_off, device="cuda").to(in_dtype)
    k_pe = pe_parent[:, :, pe_off:] if layout.k_pe_3d else pe_parent[:, 0, pe_off:]
    cs_dtype = in_dtype if layout.cos_sin_same_dtype else torch.float32
    cs_table = _cos_sin(rd, cs_dtype)
    if layout.misaligned:
        cs_parent = torch.zeros(MAX_POS, rd + 1, dtype=cs_dtype, device="cuda")
        cs_parent[:, 1:] = cs_table
        cos_sin = cs_parent[:, 1:]
    else:
        cos_sin = cs_table
    positions = torch.randint(0, MAX_POS, (t,), device="cuda", dtype=torch.int64)
    num_blocks = (t + t // 2) // layout.block_size + 1
    slots = torch.randperm(num_blocks * layout.block_size, device="cuda")[:t].to(torch.int64)
    pad = torch.rand(t, device="cuda") < 0.25
    pad[0] = True
    pad[-1] = True
    slots[pad] = -1
    width = layout.entry + 2 * off
    parent = torch.empty(num_blocks, layout.block_size, width, dtype=cache_dtype, device="cuda")
    parent.view(torch.uint8).fill_(SENTINEL_BYTE)
    view = (slice(None), slice(None), slice(off, off + layout.entry))
    return Case(kv_c, k_pe, positions, cos_sin, slots, parent, parent[view], view)


def expected_parent(case: Case, *, rope: str | None, fp8_scale: float | None) -> Any:
    """The whole allocation as the reference leaves it: the view written, the rest as is."""
    expected = case.parent.clone()
    expected[case.view] = mla_reference(
        torch,
        kv_c=case.kv_c,
        k_pe=case.k_pe,
        positions=case.positions,
        cos_sin=case.cos_sin,
        slots=case.slots,
        cache_before=case.cache.clone(),
        rope=rope,
        fp8_scale=fp8_scale,
    )
    return expected


def check_case(
    case: Case, *, rope: str | None, fp8_scale: float | None, tensor_scale: bool = False
) -> None:
    """Launch once (the FP8 scale as a number, or as a one-element tensor) and compare."""
    expected = expected_parent(case, rope=rope, fp8_scale=fp8_scale)
    kv_scale: Any = fp8_scale
    if tensor_scale and fp8_scale is not None:
        kv_scale = torch.tensor([fp8_scale], dtype=torch.float32, device="cuda")
    k3.mla_key_concat_kv_cache(*case.operands(), kv_scale=kv_scale, rope=rope)
    torch.cuda.synchronize()
    assert same_bytes(torch, case.parent, expected), describe_mismatch(torch, case.parent, expected)
    # Independently of the reference: every real token's row was written (no sentinel
    # NaN left in it) and every padding token left no trace.
    rank_rope = case.kv_c.shape[1] + case.k_pe.shape[-1]
    block_size = case.cache.shape[1]
    valid = case.slots[case.slots >= 0]
    rows = case.cache[valid // block_size, valid % block_size, :rank_rope]
    sentinel_left = (rows.view(torch.uint8) == SENTINEL_BYTE).all(dim=-1)
    assert not bool(sentinel_left.any()), "a non-padding token's row was not written"
    written = torch.zeros(case.cache.shape[:2], dtype=torch.bool, device="cuda")
    written[valid // block_size, valid % block_size] = True
    untouched = case.parent.view(torch.uint8)[~written]
    assert bool((untouched == SENTINEL_BYTE).all()), "a slot that no token maps to was written"


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda lay: lay.name)
@pytest.mark.parametrize("rope", [None, "neox", "gptj"], ids=str)
@pytest.mark.parametrize("fp8", [False, True], ids=["same-dtype", "fp8"])
@pytest.mark.parametrize("in_name", ["f32", "f16", "bf16"])
def test_mla_matches_reference(in_name: str, fp8: bool, rope: str | None, layout: Layout) -> None:
    in_dtype = float_dtype(torch, in_name)
    cache_dtype = torch.uint8 if fp8 else in_dtype
    case = make_case(
        layout, in_dtype, cache_dtype, seed=zlib.crc32(f"{in_name}{fp8}{rope}".encode())
    )
    check_case(case, rope=rope, fp8_scale=FP8_SCALE if fp8 else None)


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda lay: lay.name)
def test_mla_float8_dtype_cache_and_tensor_scale(layout: Layout) -> None:
    case = make_case(layout, torch.bfloat16, torch.float8_e4m3fn, seed=7)
    check_case(case, rope="gptj", fp8_scale=FP8_SCALE, tensor_scale=True)


def _fp8_specials() -> list[float]:
    tiny = 2.0**-9  # the smallest e4m3 subnormal
    values = [0.0, -0.0, float("inf"), -float("inf"), 448.0, -448.0, 449.0, 464.0, 465.0]
    values += [480.0, 1e30, -1e30, 2.0**-6, 2.0**-6 * 0.97, tiny, tiny / 2, tiny * 1.5]
    values += [tiny * 2.5, tiny * 0.49, tiny * 0.51, 1.0625, 1.1875, 0.999, 3.0e-8, 15.5, 240.0]
    return values + [-v for v in values]


@pytest.mark.parametrize("scale", [1.0, 0.37, 3.0e-3, 1024.5])
@pytest.mark.parametrize("in_name", ["f32", "f16", "bf16"])
def test_mla_fp8_conversion_edges(in_name: str, scale: float) -> None:
    """x / scale, then saturation, ties to even, subnormals, infinities and NaN of e4m3."""
    in_dtype = float_dtype(torch, in_name)
    specials = torch.tensor(_fp8_specials(), dtype=torch.float32) * scale
    rank = 512
    torch.manual_seed(11)
    # log-uniform quotients from 2^-12 to 2^10 cover every e4m3 binade and its rounding.
    mags = torch.exp2(torch.rand(rank * 8) * 22 - 12) * torch.sign(torch.randn(rank * 8))
    flat = torch.cat([specials, mags * scale])[: rank * 8]
    kv_c = flat.reshape(8, rank).to(in_dtype).cuda()
    kv_c[3, 5] = float("nan")
    kv_c[4, 7] = -float("nan")
    k_pe = torch.randn(8, 64, device="cuda").to(in_dtype)
    slots = torch.arange(8, dtype=torch.int64, device="cuda")
    cache = torch.full((1, 8, 576), SENTINEL_BYTE, dtype=torch.uint8, device="cuda")
    k3.mla_key_concat_kv_cache(kv_c, k_pe, None, None, slots, cache, kv_scale=scale, rope=None)
    torch.cuda.synchronize()
    got = cache[0, :, :rank].cpu()
    x = kv_c.float()
    q = (x / torch.full_like(x, scale)).clamp(-448.0, 448.0)
    ref = q.to(torch.float8_e4m3fn).view(torch.uint8).cpu()
    nan = x.isnan().cpu()
    assert bool(((got[nan] & 0x7F) == 0x7F).all()), "NaN must stay NaN"
    mismatch = (got != ref) & ~nan
    where = mismatch.nonzero().tolist()[:5]
    detail = [(x[i, j].item(), int(got[i, j]), int(ref[i, j])) for i, j in where]
    assert not bool(mismatch.any()), f"(input, kernel byte, reference byte): {detail}"


def test_mla_out_of_range_tokens_are_not_written() -> None:
    """A slot past the cache or a position past the cos/sin table: that token is skipped
    (never an out-of-bounds access); every other token is written as usual."""
    case = make_case(LAYOUTS[0], torch.bfloat16, torch.bfloat16, seed=9)
    num_slots = case.cache.shape[0] * case.cache.shape[1]
    valid = (case.slots >= 0).nonzero().flatten().tolist()
    bad_slot, bad_pos, bad_neg = valid[0], valid[1], valid[2]
    skipped = case.slots.clone()
    skipped[[bad_slot, bad_pos, bad_neg]] = -1
    expected = mla_reference(
        torch,
        kv_c=case.kv_c,
        k_pe=case.k_pe,
        positions=case.positions.clamp(0, MAX_POS - 1),
        cos_sin=case.cos_sin,
        slots=skipped,
        cache_before=case.parent.clone(),
        rope="neox",
        fp8_scale=None,
    )
    case.slots[bad_slot] = num_slots + 3
    case.positions[bad_pos] = MAX_POS
    case.positions[bad_neg] = -5
    k3.mla_key_concat_kv_cache(
        case.kv_c, case.k_pe, case.positions, case.cos_sin, case.slots, case.cache, rope="neox"
    )
    torch.cuda.synchronize()
    assert same_bytes(torch, case.parent, expected), describe_mismatch(torch, case.parent, expected)


def test_mla_many_tokens_grid_stride() -> None:
    layout = Layout("many", 50_001, 512, 64, 576, 64, False, False, False, False)
    case = make_case(layout, torch.bfloat16, torch.uint8, seed=3)
    check_case(case, rope="neox", fp8_scale=FP8_SCALE)


def test_mla_runs_on_the_current_and_the_given_stream() -> None:
    layout = LAYOUTS[0]
    for explicit in (False, True):
        case = make_case(layout, torch.float16, torch.float16, seed=5)
        expected = expected_parent(case, rope="neox", fp8_scale=None)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        args = (case.kv_c, case.k_pe, case.positions, case.cos_sin, case.slots, case.cache)
        if explicit:
            k3.mla_key_concat_kv_cache(*args, rope="neox", stream=stream)
        else:
            with torch.cuda.stream(stream):
                k3.mla_key_concat_kv_cache(*args, rope="neox")
        stream.synchronize()
        assert same_bytes(torch, case.parent, expected)


def test_mla_no_tokens_is_a_no_op() -> None:
    case = make_case(LAYOUTS[0], torch.bfloat16, torch.bfloat16, seed=1)
    before = case.parent.clone()
    empty = case.kv_c[:0]
    k3.mla_key_concat_kv_cache(
        empty, case.k_pe[:0], case.positions[:0], case.cos_sin, case.slots[:0], case.cache
    )
    torch.cuda.synchronize()
    assert same_bytes(torch, case.parent, before)
