"""Slots outside the cache are never written: guard bytes around the cache prove it.

The cache is a view into the middle of one allocation: guard bytes directly before it
and directly after it, as many as two whole blocks and an entry (a write for slot
num_slots + block_size would land there). Tokens with slot num_slots, num_slots +
block_size, 2**40, -2 and -2**40 sit between valid ones; the guards must keep their
pattern, the valid tokens must be written as the reference says, and nothing else in the
cache may change. Every entry point runs: rank 512 + rope 64 (its own kernels), a
smaller aligned shape (the any-shape kernel's vector path) and an odd one (its general
path), each input dtype, same-dtype and FP8 caches, every rope. With check_indices=True
the same call raises before anything is launched.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import pytest

from gpu.reference import SENTINEL_BYTE, describe_mismatch, float_dtype, mla_reference

torch = pytest.importorskip("torch")
k3 = pytest.importorskip("k3_kernels")

pytestmark = pytest.mark.gpu

GUARD_BYTE = 0xA5
BLOCKS, BLOCK_SIZE, MAX_POS = 3, 16, 64
NUM_SLOTS = BLOCKS * BLOCK_SIZE
OUTSIDE = (NUM_SLOTS, NUM_SLOTS + BLOCK_SIZE, 2**40, -2, -(2**40))
FP8_SCALE = 0.05
SHAPES = {"512+64": (512, 64, 576), "256+32": (256, 32, 288), "odd": (509, 62, 573)}


@dataclass
class Guarded:
    whole: Any  # uint8: guard | cache | guard
    cache: Any  # the view the kernel writes
    cache_bytes: slice
    guard_bytes: int


def guarded_cache(entry: int, dtype: Any) -> Guarded:
    itemsize = torch.empty(0, dtype=dtype).element_size()
    cache_bytes = NUM_SLOTS * entry * itemsize
    guard = (2 * BLOCK_SIZE + 1) * entry * itemsize
    whole = torch.full((guard + cache_bytes + guard,), GUARD_BYTE, dtype=torch.uint8, device="cuda")
    inside = slice(guard, guard + cache_bytes)
    whole[inside] = SENTINEL_BYTE
    cache = whole[inside].view(dtype).view(BLOCKS, BLOCK_SIZE, entry)
    return Guarded(whole, cache, inside, guard)


def _case(in_name: str, fp8: bool, shape: str, seed: int) -> dict[str, Any]:
    rank, rope_dim, entry = SHAPES[shape]
    in_dtype = float_dtype(torch, in_name)
    torch.manual_seed(seed)
    tokens = 12
    valid = torch.randperm(NUM_SLOTS)[: tokens - len(OUTSIDE)].tolist()
    slots = valid[:3] + list(OUTSIDE) + valid[3:]
    return {
        "kv_c": (torch.randn(tokens, rank, device="cuda") * 2).to(in_dtype),
        "k_pe": (torch.randn(tokens, rope_dim, device="cuda") * 2).to(in_dtype),
        "positions": torch.randint(0, MAX_POS, (tokens,), device="cuda", dtype=torch.int64),
        "cos_sin_cache": torch.rand(MAX_POS, rope_dim, device="cuda") * 2 - 1,
        "slot_mapping": torch.tensor(slots, dtype=torch.int64, device="cuda"),
        "guarded": guarded_cache(entry, torch.uint8 if fp8 else in_dtype),
    }


def _call(case: dict[str, Any], rope: str | None, fp8: bool, check_indices: bool) -> None:
    k3.mla_key_concat_kv_cache(
        case["kv_c"],
        case["k_pe"],
        case["positions"],
        case["cos_sin_cache"],
        case["slot_mapping"],
        case["guarded"].cache,
        kv_scale=FP8_SCALE if fp8 else None,
        rope=rope,
        check_indices=check_indices,
    )


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("rope", [None, "neox", "gptj"], ids=str)
@pytest.mark.parametrize("fp8", [False, True], ids=["same-dtype", "fp8"])
@pytest.mark.parametrize("in_name", ["f32", "f16", "bf16"])
def test_slots_outside_the_cache_leave_the_guards(
    in_name: str, fp8: bool, rope: str | None, shape: str
) -> None:
    case = _case(in_name, fp8, shape, seed=zlib.crc32(f"{in_name}{fp8}{rope}{shape}".encode()))
    g = case["guarded"]
    slots = case["slot_mapping"]
    inside = (slots >= 0) & (slots < NUM_SLOTS)
    expected = mla_reference(
        torch,
        kv_c=case["kv_c"],
        k_pe=case["k_pe"],
        positions=case["positions"],
        cos_sin=case["cos_sin_cache"],
        slots=torch.where(inside, slots, torch.full_like(slots, -1)),
        cache_before=g.cache.clone(),
        rope=rope,
        fp8_scale=FP8_SCALE if fp8 else None,
    )
    _call(case, rope, fp8, check_indices=False)
    torch.cuda.synchronize()
    head = g.whole[: g.cache_bytes.start]
    tail = g.whole[g.cache_bytes.stop :]
    assert bool((head == GUARD_BYTE).all()), "bytes before the cache were written"
    assert bool((tail == GUARD_BYTE).all()), "bytes after the cache were written"
    got = g.cache.contiguous().view(torch.uint8)
    want = expected.contiguous().view(torch.uint8)
    assert bool(torch.equal(got, want)), describe_mismatch(torch, g.cache, expected)


@pytest.mark.parametrize("bad", OUTSIDE)
def test_check_indices_refuses_outside_slots(bad: int) -> None:
    case = _case("bf16", False, "512+64", seed=1)
    case["slot_mapping"] = torch.tensor([0, 1, -1, bad, 5], dtype=torch.int64, device="cuda")
    for name in ("kv_c", "k_pe", "positions"):
        case[name] = case[name][:5]
    before = case["guarded"].whole.clone()
    with pytest.raises(k3.KernelArgumentError, match=rf"slot_mapping\[3\] is {bad}: outside"):
        _call(case, "neox", False, check_indices=True)
    torch.cuda.synchronize()
    assert bool(torch.equal(case["guarded"].whole, before)), "a refused call wrote something"


def test_check_indices_refuses_positions_outside_cos_sin() -> None:
    case = _case("bf16", True, "512+64", seed=2)
    valid = torch.tensor([0, 1, 2, 3], dtype=torch.int64, device="cuda")
    case["slot_mapping"] = valid
    case["positions"] = torch.tensor([0, MAX_POS - 1, MAX_POS, 3], device="cuda")
    for name in ("kv_c", "k_pe"):
        case[name] = case[name][:4]
    before = case["guarded"].whole.clone()
    with pytest.raises(k3.KernelArgumentError, match=rf"positions\[2\] is {MAX_POS}: outside"):
        _call(case, "gptj", True, check_indices=True)
    torch.cuda.synchronize()
    assert bool(torch.equal(case["guarded"].whole, before))
    # A padding token's position is not looked at; without rope, no position is.
    case["slot_mapping"] = torch.tensor([0, 1, -1, 3], dtype=torch.int64, device="cuda")
    _call(case, "gptj", True, check_indices=True)
    _call(case, None, True, check_indices=True)
    torch.cuda.synchronize()


def test_check_indices_passes_valid_calls_and_waits_for_the_stream() -> None:
    """The slots are copied on the launch stream: values written there just before the
    call are the ones checked."""
    case = _case("f16", False, "256+32", seed=3)
    for name in ("kv_c", "k_pe", "positions"):
        case[name] = case[name][:4]
    case["slot_mapping"] = torch.full((4,), NUM_SLOTS, dtype=torch.int64, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        torch.cuda._sleep(20_000_000)  # the fix below lands only after ~10 ms
        case["slot_mapping"].copy_(torch.arange(4, device="cuda"))
        _call(case, "neox", False, check_indices=True)
    stream.synchronize()
    written = case["guarded"].cache[0, :4].contiguous().view(torch.uint8)
    assert not bool((written == SENTINEL_BYTE).all(dim=-1).any()), "valid tokens not written"


def test_check_indices_is_refused_during_graph_capture() -> None:
    case = _case("bf16", False, "512+64", seed=4)
    for name in ("kv_c", "k_pe", "positions", "slot_mapping"):
        case[name] = case[name][:2]
    case["slot_mapping"] = torch.tensor([0, 1], dtype=torch.int64, device="cuda")
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        _call(case, "neox", False, check_indices=False)  # warm up outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    before = case["guarded"].whole.clone()

    def captured() -> None:
        case["guarded"].whole[:1].add_(1)  # so the graph is not empty when the capture ends
        _call(case, "neox", False, check_indices=True)

    with (
        pytest.raises(k3.KernelArgumentError, match=r"captures a CUDA graph"),
        torch.cuda.graph(graph),
    ):
        captured()
    torch.cuda.synchronize()
    assert bool(torch.equal(case["guarded"].whole, before)), "the capture ran something"
