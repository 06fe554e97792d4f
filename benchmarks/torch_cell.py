"""A torch cell's build cost and wheel size, measured side by side in one run, on the
torch fixture (tests/fixtures/torch_ops, libtorch stable ABI flavour, torch 2.14.1):

1. cold: an empty cache, so nvcc and the pinned torch are provisioned, then compiled
2. compile only: the toolchains (torch included) present, empty device and wheel caches
3. warm: nothing changed: goal 0 compiles, the wheel from the cache, same bytes
4. wheel size per SM: the 4-SM wheel (75 80 90 100 + PTX 100) against a 1-SM one (90)

Run: .venv/bin/python benchmarks/torch_cell.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RELEASE = str(Path(sys.executable).parent / "release")
FIXTURE = REPO / "tests" / "fixtures" / "torch_ops"

MATRIX = """\
project: {project}
build:
  backend: torch
  env: {{K3_TORCH_ABI: stable}}
defaults:
  arches: [x86_64]
  sms: [{sms}]
  ptx: {ptx}
  manylinux: "2_34"
cuda:
  "13.0": {{destination: pypi, torch: "2.14.1", abi3: "3.10"}}
destinations:
  pypi: {{kind: pypi}}
"""


def build(matrix: Path, out: Path, cache: Path) -> tuple[float, dict[str, object]]:
    start = time.monotonic()
    done = subprocess.run(
        [RELEASE, "build", "--matrix", str(matrix), "--out", str(out), "--cache-dir",
         str(cache), "--json"],
        capture_output=True, text=True, check=False,
        env={**os.environ, "SOURCE_DATE_EPOCH": "1700000000"},
    )  # fmt: skip
    seconds = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"release build failed:\n{done.stderr[-3000:]}")
    (entry,) = json.loads((out / "manifest.json").read_text())["wheels"]
    return seconds, entry


def nvcc_runs(out: Path) -> int:
    logs = out / "logs"
    return sum(log.read_text().count("cuda-home/bin/nvcc ") for log in logs.glob("*.log"))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keep", type=Path, help="work here instead of a temp dir")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="torch-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    four = root / "four.yaml"
    four.write_text(MATRIX.format(project=FIXTURE, sms="75, 80, 90, 100", ptx=100))
    one = root / "one.yaml"
    one.write_text(MATRIX.format(project=FIXTURE, sms="90", ptx=90))
    cache = root / "cache"
    shutil.rmtree(cache, ignore_errors=True)

    cold, entry = build(four, root / "cold", cache)
    cold_digest = entry["sha256"]
    for kept in ("device", "wheels"):
        shutil.rmtree(cache / kept, ignore_errors=True)
    compile_only, entry = build(four, root / "compile", cache)
    warm, warm_entry = build(four, root / "warm", cache)
    _, one_entry = build(one, root / "one", cache)

    size_four = int(str(entry["size"]))
    size_one = int(str(one_entry["size"]))
    rows = [
        ("1. cold (nvcc and torch provisioned)", f"{cold:.1f} s", "", ""),
        ("2. compile only (toolchains cached)", f"{compile_only:.1f} s",
         f"{compile_only / cold:.2f} of cold", ""),
        ("3. warm, nothing changed", f"{warm:.1f} s", f"{warm / cold:.3f} of cold",
         f"nvcc runs: {nvcc_runs(root / 'warm')}, same bytes as 2: "
         f"{warm_entry['sha256'] == entry['sha256']}"),
        ("4. wheel, 4 SMs + PTX", f"{size_four:,} B", f"{size_four / size_one:.2f}x the 1-SM",
         f"1 SM (90 + PTX 90): {size_one:,} B"),
    ]  # fmt: skip
    print("| measure | time / size | ratio | note |\n| --- | --- | --- | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    # False today: nvcc names internal-linkage host symbols after a per-process number
    print(f"\ncold and compile-only wheels identical: {entry['sha256'] == cold_digest}")
    wheel = root / "compile" / str(entry["filename"])
    print(f"sha256 {hashlib.sha256(wheel.read_bytes()).hexdigest()} {wheel.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
