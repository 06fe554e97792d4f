"""Kernel throughput and call cost on the GPU, against a copy and torch ops in the same run.

    python benchmarks/kernels.py [--tokens 65536] [--json results.json]

Three views of each kernel:

* GPU: effective bandwidth = the bytes a kernel must move (inputs read once, outputs
  written once) / its GPU time, as a fraction of a device-to-device copy (torch's
  `dst.copy_(src)` of 1 GiB, counted as 2 GiB moved). The GPU time is the best of 5
  batches of back-to-back launches timed with CUDA events, the GPU held busy while the
  host enqueues a batch, so it is the kernels alone.
* Caller's view: one call at a time with the GPU idle, CUDA events recorded just before
  and just after the call (the median of 30): what a caller without CUDA graphs sees,
  the host's enqueue time included. Also as a fraction of the copy.
  Beside the MLA rows, the same two views of torch's `copy_` moving the same bytes (the
  most a single launch of that size can show a caller) and of the MLA call captured in
  a CUDA graph (each call a replay: what a caller with graphs sees). The table's "host
  us" is the enqueue time per call within the GPU-time batches, with the GPU busy.
* Host: the time to enqueue one call (Python, argument checks, the host library, the
  driver), the median of 5 runs of 3000 calls on small inputs, beside torch's own
  `index_copy_` (one torch op: the anchor) and `silu` + `mul(out=)` measured in the
  same run.

Goals: host <= 10 us for MLA and <= 8 us for SwiGLU (and MLA <= 1.2x index_copy_);
caller's view >= 0.8 of copy for MLA bf16 and FP8 at the first token count. Needs torch
with a CUDA GPU and an importable k3_kernels.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

GPU_GOALS = {"mla bf16->bf16 neox": 0.8, "mla bf16->fp8 neox": 0.8, "swiglu bf16": 0.8}
CALLER_GOALS = {"mla bf16->bf16 neox": 0.8, "mla bf16->fp8 neox": 0.8}
HOST_GOALS = {"mla": 10.0, "swiglu": 8.0}  # microseconds per call
ANCHOR_RATIO = 1.2  # MLA host time at most this times index_copy_'s
HOST_CALLS = 3000


@dataclass(frozen=True)
class Row:
    kernel: str
    shape: str
    tokens: int
    microseconds: float  # GPU time per call, back to back
    host_microseconds: float  # enqueue time per call within those batches
    gb_per_s: float
    fraction_of_copy: float
    caller_microseconds: float  # one call, GPU idle, events around the call
    caller_fraction_of_copy: float


@dataclass(frozen=True)
class HostRow:
    call: str
    microseconds: float
    goal: float | None  # microseconds, None: shown for comparison


def time_per_call(torch: Any, fn: Callable[[], object], iters: int) -> tuple[float, float]:
    """(GPU seconds per call, host seconds per call): best of 5 batches of `iters` calls.

    Before each batch a sleep kernel keeps the GPU busy while the host enqueues the
    whole batch, so the GPU time is the kernels back to back, not the host's pace.
    """
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    sleep = getattr(torch.cuda, "_sleep", None)
    host = float("inf")
    gpu = float("inf")
    for _ in range(5):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        if sleep is not None:
            busy = 0.002 if host == float("inf") else 3 * host * iters + 0.0005
            sleep(int(busy * 2e9))  # cycles at ~2 GHz
        t0 = time.perf_counter()
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        host = min(host, (time.perf_counter() - t0) / iters)
        end.synchronize()
        gpu = min(gpu, start.elapsed_time(end) / 1000.0 / iters)
    return gpu, host


def callers_view(torch: Any, fn: Callable[[], object], calls: int = 30) -> float:
    """Seconds from an event recorded just before one call to one recorded just after,
    with the GPU idle before each call: the median over `calls`."""
    fn()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    seconds = []
    for _ in range(calls):
        torch.cuda.synchronize()
        start.record()
        fn()
        end.record()
        end.synchronize()
        seconds.append(start.elapsed_time(end) / 1000.0)
    return float(statistics.median(seconds))


def host_per_call(torch: Any, fn: Callable[[], object], calls: int = HOST_CALLS) -> float:
    """Seconds to enqueue one call: the median of 5 runs of `calls` calls each."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        runs.append((time.perf_counter() - t0) / calls)
        torch.cuda.synchronize()
    return float(statistics.median(runs))


def copy_bandwidth(torch: Any, iters: int) -> tuple[float, float]:
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda").fill_(1)
    dst = torch.empty_like(src)
    seconds, _ = time_per_call(torch, lambda: dst.copy_(src), iters)
    return seconds, 2 * n / seconds


@dataclass(frozen=True)
class MlaSpec:
    name: str
    tokens: int
    dtype: str  # torch dtype attribute name
    fp8: bool
    rope: str | None
    tensor_scale: bool = False  # the FP8 scale as a one-element tensor (vLLM's form)
    graph: bool = False  # the call captured in a CUDA graph; each call is a replay


@dataclass(frozen=True)
class CopySpec:
    """torch's copy_ moving the bytes of an MLA row: the anchor for the caller's view."""

    name: str
    tokens: int
    bytes_moved: int


@dataclass(frozen=True)
class SwigluSpec:
    name: str
    rows: int
    d: int
    dtype: str
    clamp: float | None


def mla_tensors(torch: Any, spec: MlaSpec) -> dict[str, Any]:
    """The arguments of one MLA call (rank 512, rope dim 64, blocks of 64)."""
    rank, rope_dim, block_size, max_pos = 512, 64, 64, 8192
    tokens, in_dtype = spec.tokens, getattr(torch, spec.dtype)
    num_blocks = (tokens + block_size - 1) // block_size
    slots = torch.randperm(num_blocks * block_size, device="cuda")[:tokens].to(torch.int64)
    cache_dtype = torch.uint8 if spec.fp8 else in_dtype
    scale: Any = 0.05 if spec.fp8 else None
    if spec.tensor_scale:
        scale = torch.tensor([0.05], dtype=torch.float32, device="cuda")
    return {
        "kv_c": torch.randn(tokens, rank, device="cuda").to(in_dtype),
        "k_pe": torch.randn(tokens, 1, rope_dim, device="cuda").to(in_dtype),
        "positions": torch.randint(0, max_pos, (tokens,), device="cuda", dtype=torch.int64),
        "cos_sin_cache": torch.rand(max_pos, rope_dim, device="cuda"),
        "slot_mapping": slots,
        "kv_cache": torch.zeros(
            num_blocks, block_size, rank + rope_dim, dtype=cache_dtype, device="cuda"
        ),
        "kv_scale": scale,
    }


def mla_bytes(tokens: int, in_size: int, cache_size: int, rope: bool) -> int:
    """Bytes an MLA call must move: rows in and out, slot and position, the cos/sin table."""
    return tokens * 576 * (in_size + cache_size) + tokens * 16 + (8192 * 64 * 4 if rope else 0)


def graphed(torch: Any, fn: Callable[[], object]) -> Callable[[], object]:
    """`fn` captured in a CUDA graph: the returned call replays it."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    replay: Callable[[], object] = graph.replay
    return replay


def copy_case(torch: Any, spec: CopySpec) -> tuple[Callable[[], object], int]:
    n = spec.bytes_moved // 2
    src = torch.ones(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return (lambda: dst.copy_(src)), 2 * n


def mla_case(torch: Any, k3: Any, spec: MlaSpec) -> tuple[Callable[[], object], int]:
    t = mla_tensors(torch, spec)
    kv_c, k_pe, positions, cos_sin = t["kv_c"], t["k_pe"], t["positions"], t["cos_sin_cache"]
    slots, cache, scale = t["slot_mapping"], t["kv_cache"], t["kv_scale"]
    moved = mla_bytes(
        kv_c.shape[0], kv_c.element_size(), cache.element_size(), spec.rope is not None
    )

    def launch() -> object:
        k3.mla_key_concat_kv_cache(
            kv_c, k_pe, positions, cos_sin, slots, cache, kv_scale=scale, rope=spec.rope
        )
        return None

    return (graphed(torch, launch) if spec.graph else launch), moved


def swiglu_case(torch: Any, k3: Any, spec: SwigluSpec) -> tuple[Callable[[], object], int]:
    dtype = getattr(torch, spec.dtype)
    x = torch.randn(spec.rows, 2 * spec.d, device="cuda").to(dtype)
    out = torch.empty(spec.rows, spec.d, device="cuda", dtype=dtype)
    moved = spec.rows * 3 * spec.d * x.element_size()
    return (lambda: k3.swiglu(x, clamp=spec.clamp, out=out)), moved


Spec = MlaSpec | SwigluSpec | CopySpec


def specs(tokens: int) -> list[Spec]:
    out: list[Spec] = []
    for t in (tokens, 4 * tokens):
        out += [
            MlaSpec("mla bf16->bf16 neox", t, "bfloat16", False, "neox"),
            MlaSpec("mla bf16->bf16 neox, CUDA graph", t, "bfloat16", False, "neox", graph=True),
            CopySpec("torch copy_, bytes of bf16->bf16", t, mla_bytes(t, 2, 2, True)),
            MlaSpec("mla bf16->fp8 neox", t, "bfloat16", True, "neox"),
            MlaSpec("mla bf16->fp8 neox, CUDA graph", t, "bfloat16", True, "neox", graph=True),
            CopySpec("torch copy_, bytes of bf16->fp8", t, mla_bytes(t, 2, 1, True)),
            MlaSpec("mla bf16->fp8 neox, scale tensor", t, "bfloat16", True, "neox", True),
            MlaSpec("mla bf16->bf16 gptj", t, "bfloat16", False, "gptj"),
            MlaSpec("mla bf16->bf16 no-rope", t, "bfloat16", False, None),
            MlaSpec("mla f16->fp8 gptj", t, "float16", True, "gptj"),
            MlaSpec("mla f32->f32 neox", t, "float32", False, "neox"),
        ]
    out += [
        SwigluSpec("swiglu bf16", 16384, 7168, "bfloat16", None),
        SwigluSpec("swiglu bf16 clamp", 16384, 7168, "bfloat16", 7.0),
        SwigluSpec("swiglu f16", 16384, 7168, "float16", None),
        SwigluSpec("swiglu f32", 16384, 7168, "float32", None),
    ]
    return out


def run(tokens: int, iters: int) -> tuple[float, list[Row]]:
    torch: Any = importlib.import_module("torch")
    k3: Any = importlib.import_module("k3_kernels")
    _, copy_bw = copy_bandwidth(torch, iters)
    rows = []
    for spec in specs(tokens):
        if isinstance(spec, MlaSpec):
            fn, moved = mla_case(torch, k3, spec)
            shape, count = f"T={spec.tokens} 512+64", spec.tokens
        elif isinstance(spec, CopySpec):
            fn, moved = copy_case(torch, spec)
            shape, count = f"{moved / 1e6:.0f} MB moved", spec.tokens
        else:
            fn, moved = swiglu_case(torch, k3, spec)
            shape, count = f"[{spec.rows}, 2*{spec.d}]", spec.rows
        seconds, host = time_per_call(torch, fn, iters)
        caller = callers_view(torch, fn)
        rows.append(
            Row(
                spec.name,
                shape,
                count,
                seconds * 1e6,
                host * 1e6,
                moved / seconds / 1e9,
                moved / seconds / copy_bw,
                caller * 1e6,
                moved / caller / copy_bw,
            )
        )
        del fn
        torch.cuda.empty_cache()
    return copy_bw, rows


def host_costs(torch: Any, k3: Any) -> list[HostRow]:
    """Enqueue time of small calls (a decode step's shapes), beside torch ops."""
    native: Any = importlib.import_module("k3_kernels._native")
    fast: Any = importlib.import_module("k3_kernels._fast")
    bf16 = mla_tensors(torch, MlaSpec("", 1, "bfloat16", False, "neox"))
    fp8 = mla_tensors(torch, MlaSpec("", 1, "bfloat16", True, "neox"))
    scale = torch.tensor([0.05], dtype=torch.float32, device="cuda")
    x = torch.randn(4, 2 * 7168, device="cuda").to(torch.bfloat16)
    out = torch.empty(4, 7168, device="cuda", dtype=torch.bfloat16)
    flat = bf16["kv_cache"].view(-1, 576)
    row = torch.randn(1, 576, device="cuda").to(torch.bfloat16)
    silu_out = torch.empty(4, 7168, device="cuda", dtype=torch.bfloat16)
    gate, up = x[:, :7168], x[:, 7168:]
    mla = k3.mla_key_concat_kv_cache
    args = [bf16[k] for k in ("kv_c", "k_pe", "positions", "cos_sin_cache", "slot_mapping")]
    args8 = [fp8[k] for k in ("kv_c", "k_pe", "positions", "cos_sin_cache", "slot_mapping")]
    cache, cache8 = bf16["kv_cache"], fp8["kv_cache"]
    nat = native.native()
    block = fast.mla_fast(nat, *args, cache, None, "neox", None)
    ops = torch.ops.k3
    calls: list[tuple[str, Callable[[], object], float | None]] = [
        ("torch index_copy_ (anchor)", lambda: flat.index_copy_(0, args[4], row), None),
        (
            "torch silu then mul(out=)",
            lambda: torch.mul(torch.nn.functional.silu(gate), up, out=silu_out),
            None,
        ),
        ("k3 mla bf16 T=1", lambda: mla(*args, cache), HOST_GOALS["mla"]),
        ("k3 mla FP8 T=1, scale float", lambda: mla(*args8, cache8, kv_scale=0.05), 10.0),
        ("k3 mla FP8 T=1, scale tensor", lambda: mla(*args8, cache8, kv_scale=scale), 10.0),
        ("k3 swiglu 4x7168 out=", lambda: k3.swiglu(x, out=out), HOST_GOALS["swiglu"]),
        ("k3 swiglu 4x7168, allocating", lambda: k3.swiglu(x), None),
        (
            "  of mla bf16: argument block",
            lambda: fast.mla_fast(nat, *args, cache, None, "neox", None),
            None,
        ),
        ("  of mla bf16: host library + driver", lambda: nat.mla(block), None),
        ("torch.ops.k3 mla bf16 T=1", lambda: ops.mla_key_concat_kv_cache(*args, cache), None),
        ("torch.ops.k3 swiglu_out 4x7168", lambda: ops.swiglu_out(out, x), None),
        ("k3 mla bf16 T=1, check_indices", lambda: mla(*args, cache, check_indices=True), None),
    ]
    return [HostRow(name, host_per_call(torch, fn) * 1e6, goal) for name, fn, goal in calls]


def _verdict(value: float, goal: float | None, *, at_most: bool) -> str:
    if goal is None:
        return ""
    if at_most:
        return f"{'ok' if value <= goal else 'ABOVE'} (<= {goal:g})"
    return f"{'ok' if value >= goal else 'BELOW'} (>= {goal:g})"


def table(copy_bw: float, rows: Sequence[Row], first_tokens: int) -> str:
    lines = [
        f"device-to-device copy: {copy_bw / 1e9:.0f} GB/s",
        "GPU: back-to-back launches; caller: one call with the GPU idle, events around it",
        f"{'kernel':<34} {'shape':<18} {'GPU us':>8} {'of copy':>7} {'caller us':>9} "
        f"{'of copy':>7} {'host us':>8}  goal",
    ]
    for r in rows:
        verdicts = [_verdict(r.fraction_of_copy, GPU_GOALS.get(r.kernel), at_most=False)]
        if r.tokens == first_tokens:
            caller_goal = CALLER_GOALS.get(r.kernel)
            if caller_goal is not None:
                verdict = _verdict(r.caller_fraction_of_copy, caller_goal, at_most=False)
                verdicts.append(f"caller {verdict}")
        lines.append(
            f"{r.kernel:<34} {r.shape:<18} {r.microseconds:8.1f} {r.fraction_of_copy:7.2f} "
            f"{r.caller_microseconds:9.1f} {r.caller_fraction_of_copy:7.2f} "
            f"{r.host_microseconds:8.1f}  {'; '.join(v for v in verdicts if v)}"
        )
    return "\n".join(lines)


def host_table(rows: Sequence[HostRow]) -> str:
    anchor = rows[0].microseconds
    lines = [
        f"host time per call (median of 5 x {HOST_CALLS} calls)",
        f"{'call':<40} {'us/call':>8} {'x index_copy_':>13}  goal",
    ]
    for r in rows:
        verdict = _verdict(r.microseconds, r.goal, at_most=True)
        if r.goal is not None and r.call.startswith("k3 mla"):
            ratio_ok = r.microseconds <= ANCHOR_RATIO * anchor
            verdict += f"; {'ok' if ratio_ok else 'ABOVE'} (<= {ANCHOR_RATIO}x index_copy_)"
        lines.append(
            f"{r.call:<40} {r.microseconds:8.1f} {r.microseconds / anchor:13.2f}  {verdict}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=65536, help="MLA tokens (also x4)")
    parser.add_argument("--iters", type=int, default=20, help="launches per timed batch")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    try:
        torch: Any = importlib.import_module("torch")
        k3: Any = importlib.import_module("k3_kernels")
    except ImportError as exc:
        print(f"skipped: {exc}")
        return 0
    if not torch.cuda.is_available():
        print("skipped: no CUDA GPU")
        return 0
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    hosts = host_costs(torch, k3)
    print(host_table(hosts))
    copy_bw, rows = run(args.tokens, args.iters)
    print(table(copy_bw, rows, args.tokens))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "copy_gb_per_s": copy_bw / 1e9,
                    "rows": [asdict(r) for r in rows],
                    "host": [asdict(h) for h in hosts],
                },
                f,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
