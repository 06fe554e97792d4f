"""Kernel throughput on the GPU as a fraction of a device-to-device copy in the same run.

    python benchmarks/kernels.py [--tokens 65536] [--json results.json]

Effective bandwidth = the bytes a kernel must move (inputs read once, outputs written
once) / its GPU time. The copy is torch's `dst.copy_(src)` of 1 GiB (a
cudaMemcpyAsync), counted as 2 GiB moved. Each time is the best of 5 batches of
back-to-back launches timed with CUDA events, with the GPU held busy while the host
enqueues a batch (the host's own time per call is shown apart). Needs torch with a CUDA
GPU and an importable k3_kernels.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

GOALS = {"mla bf16->bf16 neox": 0.8, "mla bf16->fp8 neox": 0.8, "swiglu bf16": 0.8}


@dataclass(frozen=True)
class Row:
    kernel: str
    shape: str
    microseconds: float
    host_microseconds: float  # Python + driver time to enqueue one call
    gb_per_s: float
    fraction_of_copy: float


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


@dataclass(frozen=True)
class SwigluSpec:
    name: str
    rows: int
    d: int
    dtype: str
    clamp: float | None


def mla_case(torch: Any, k3: Any, spec: MlaSpec) -> tuple[Callable[[], object], int]:
    rank, rope_dim, block_size, max_pos = 512, 64, 64, 8192
    tokens, in_dtype = spec.tokens, getattr(torch, spec.dtype)
    kv_c = torch.randn(tokens, rank, device="cuda").to(in_dtype)
    k_pe = torch.randn(tokens, 1, rope_dim, device="cuda").to(in_dtype)
    positions = torch.randint(0, max_pos, (tokens,), device="cuda", dtype=torch.int64)
    cos_sin = torch.rand(max_pos, rope_dim, device="cuda")
    num_blocks = (tokens + block_size - 1) // block_size
    slots = torch.randperm(num_blocks * block_size, device="cuda")[:tokens].to(torch.int64)
    cache_dtype = torch.uint8 if spec.fp8 else in_dtype
    cache = torch.zeros(num_blocks, block_size, rank + rope_dim, dtype=cache_dtype, device="cuda")
    in_size = kv_c.element_size()
    out_size = cache.element_size()
    moved = tokens * (rank + rope_dim) * (in_size + out_size) + tokens * 16
    moved += max_pos * rope_dim * 4 if spec.rope is not None else 0
    scale: Any = 0.05 if spec.fp8 else None
    if spec.tensor_scale:
        scale = torch.tensor([0.05], dtype=torch.float32, device="cuda")

    def launch() -> object:
        k3.mla_key_concat_kv_cache(
            kv_c, k_pe, positions, cos_sin, slots, cache, kv_scale=scale, rope=spec.rope
        )
        return None

    return launch, moved


def swiglu_case(torch: Any, k3: Any, spec: SwigluSpec) -> tuple[Callable[[], object], int]:
    dtype = getattr(torch, spec.dtype)
    x = torch.randn(spec.rows, 2 * spec.d, device="cuda").to(dtype)
    out = torch.empty(spec.rows, spec.d, device="cuda", dtype=dtype)
    moved = spec.rows * 3 * spec.d * x.element_size()
    return (lambda: k3.swiglu(x, clamp=spec.clamp, out=out)), moved


def specs(tokens: int) -> list[MlaSpec | SwigluSpec]:
    out: list[MlaSpec | SwigluSpec] = []
    for t in (tokens, 4 * tokens):
        out += [
            MlaSpec("mla bf16->bf16 neox", t, "bfloat16", False, "neox"),
            MlaSpec("mla bf16->fp8 neox", t, "bfloat16", True, "neox"),
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
            shape = f"T={spec.tokens} 512+64"
        else:
            fn, moved = swiglu_case(torch, k3, spec)
            shape = f"[{spec.rows}, 2*{spec.d}]"
        seconds, host = time_per_call(torch, fn, iters)
        bw = moved / seconds
        rows.append(Row(spec.name, shape, seconds * 1e6, host * 1e6, bw / 1e9, bw / copy_bw))
        del fn
        torch.cuda.empty_cache()
    return copy_bw, rows


def table(copy_bw: float, rows: Sequence[Row]) -> str:
    lines = [
        f"device-to-device copy: {copy_bw / 1e9:.0f} GB/s",
        f"{'kernel':<34} {'shape':<18} {'GPU us':>8} {'host us':>8} {'GB/s':>6} "
        f"{'of copy':>7}  goal",
    ]
    for r in rows:
        goal = GOALS.get(r.kernel)
        verdict = (
            ""
            if goal is None
            else ("ok" if r.fraction_of_copy >= goal else "BELOW") + (f" (>= {goal})")
        )
        lines.append(
            f"{r.kernel:<34} {r.shape:<18} {r.microseconds:8.1f} {r.host_microseconds:8.1f} "
            f"{r.gb_per_s:6.0f} {r.fraction_of_copy:7.2f}  {verdict}"
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
        importlib.import_module("k3_kernels")
    except ImportError as exc:
        print(f"skipped: {exc}")
        return 0
    if not torch.cuda.is_available():
        print("skipped: no CUDA GPU")
        return 0
    copy_bw, rows = run(args.tokens, args.iters)
    print(f"GPU: {torch.cuda.get_device_name()}")
    print(table(copy_bw, rows))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"copy_gb_per_s": copy_bw / 1e9, "rows": [asdict(r) for r in rows]}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
