"""Matrix build speed and wheel size, as ratios measured side by side in one run.

1. cold full matrix vs the naive way (every cell builds everything on its own, one after
   another, as most projects' pipelines do): goal <= 0.5
2. warm rebuild, nothing changed: goal < 3 s for the whole matrix and 0 compiler runs
3. one kernel file changed: only that kernel is recompiled, per CUDA version
4. wheel size vs the uncompressed fatbins a naive build ships (cubin and PTX for every
   SM): goal <= 0.5
5. rebuild in another checkout path with the cache copied there (a CI cache restored on
   another runner): goal 0 compiles, every wheel from the cache, identical bytes
6. `release build --compare` (a rebuild from empty caches, compared byte for byte) vs a
   plain cold build: the price of proving a build reproducible

Toolchains are provisioned once before anything is timed (both ways use the same ones).
Run: .venv/bin/python benchmarks/matrix_build.py [--matrix matrix.yaml] [--cache-dir DIR]
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
import uuid
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RELEASE = str(Path(sys.executable).parent / "release")


def release_build(
    matrix: Path,
    out: Path | None,
    cache: Path,
    *extra: str,
    stdout: list[str] | None = None,
    epoch: int | None = None,
) -> float:
    env = dict(os.environ, SOURCE_DATE_EPOCH=str(epoch)) if epoch is not None else None
    start = time.monotonic()
    result = subprocess.run(
        [
            RELEASE,
            "build",
            "--matrix",
            str(matrix),
            *(["--out", str(out)] if out is not None else []),
            "--cache-dir",
            str(cache),
            *extra,
        ],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    seconds = time.monotonic() - start
    if result.returncode != 0:
        sys.exit(f"release build failed:\n{result.stderr[-3000:]}")
    if stdout is not None:
        stdout.append(result.stdout)
    return seconds


def digests(out: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.glob("*.whl")}


def compiles(out: Path) -> Counter[str]:
    log = out / "logs" / "device.jsonl"
    if not log.exists():
        return Counter()
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return Counter(str(e["kernel"]) for e in events if e["action"] == "compile")


def fresh_cache(root: Path, name: str, toolchains: Path) -> Path:
    """A cache with the shared toolchains and nothing else: no device code, no wheels."""
    cache = root / name
    cache.mkdir()
    (cache / "toolchains").symlink_to(toolchains, target_is_directory=True)
    return cache


def cells(matrix: Path) -> list[dict[str, str]]:
    out = subprocess.run(
        [RELEASE, "matrix", "--matrix", str(matrix), "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    cells: list[dict[str, str]] = json.loads(out)["cells"]
    return cells


def naive_fatbin_bytes(toolchains: Path, sms: list[str], work: Path) -> int:
    """Uncompressed fatbins with a cubin and PTX for every SM, from the CUDA 13 nvcc."""
    nvcc = next(toolchains.glob("cuda-13.0-nvcc-*/nvidia/*/bin/nvcc"))
    total = 0
    for kernel in sorted((REPO / "csrc" / "kernels").glob("*.cu")):
        target = work / f"{kernel.stem}.fatbin"
        gencode = [f"-gencode=arch=compute_{s},code=[sm_{s},compute_{s}]" for s in sms]
        subprocess.run(
            [
                str(nvcc),
                "--fatbin",
                "-O3",
                "--std=c++17",
                "--compress-mode=none",
                *gencode,
                "-I",
                str(kernel.parent),
                "-o",
                str(target),
                str(kernel),
            ],
            check=True,
            capture_output=True,
        )
        total += target.stat().st_size
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrix", type=Path, default=REPO / "matrix.yaml")
    parser.add_argument(
        "--cache-dir",
        type=Path,
        help="provision the toolchains into this cache (kept) instead of a temporary one",
    )
    args = parser.parse_args()
    matrix = args.matrix.resolve()
    with tempfile.TemporaryDirectory(prefix="matrix-bench-") as tmp:
        root = Path(tmp)
        provision = args.cache_dir.resolve() if args.cache_dir else root / "provision"
        subprocess.run(
            [RELEASE, "doctor", "--matrix", str(matrix), "--provision", "--cache-dir",
             str(provision)],
            capture_output=True,
            check=True,
        )  # fmt: skip
        toolchains = provision / "toolchains"
        all_cells = cells(matrix)

        naive = 0.0
        for cell in all_cells:
            cache = fresh_cache(root, f"naive-{cell['id']}", toolchains)
            naive += release_build(
                matrix,
                root / f"naive-out-{cell['id']}",
                cache,
                "--cuda",
                cell["cuda"],
                "--arch",
                cell["arch"],
            )
        ours_cache = fresh_cache(root, "ours", toolchains)
        ours_out = root / "ours-out"
        cold = release_build(matrix, ours_out, ours_cache)
        cold_compiles = sum(compiles(ours_out).values())

        warm = release_build(matrix, ours_out, ours_cache)
        warm_compiles = sum(compiles(ours_out).values())

        changed_root = root / "changed"
        changed_root.mkdir()
        shutil.copytree(
            REPO / "csrc",
            changed_root / "csrc",
            ignore=shutil.ignore_patterns("build", "dist", "__pycache__"),
        )
        shutil.copy(matrix, changed_root / "matrix.yaml")
        kernel = changed_root / "csrc" / "kernels" / "swiglu.cu"
        kernel.write_text(kernel.read_text() + f"\n// one kernel changed: {uuid.uuid4()}\n")
        changed_out = root / "changed-out"
        one_changed = release_build(changed_root / "matrix.yaml", changed_out, ours_cache)
        per_kernel = compiles(changed_out)

        # A copy has no git history to date the wheels by: it gets the first build's date,
        # as a CI checkout of the same commit would.
        epoch = json.loads((ours_out / "manifest.json").read_text())["source_date_epoch"]
        moved_root = root / "another" / "checkout" / "path"
        shutil.copytree(
            REPO / "csrc",
            moved_root / "csrc",
            ignore=shutil.ignore_patterns("build", "dist", "__pycache__"),
        )
        shutil.copy(matrix, moved_root / "matrix.yaml")
        moved_cache = root / "restored" / "cache"
        shutil.copytree(ours_cache, moved_cache, symlinks=True)
        moved_out = root / "moved-out"
        reports: list[str] = []
        moved = release_build(
            moved_root / "matrix.yaml", moved_out, moved_cache, "--json", stdout=reports,
            epoch=epoch,
        )  # fmt: skip
        moved_compiles = sum(compiles(moved_out).values())
        from_cache = sum(c["cached"] for c in json.loads(reports[-1])["cells"])
        same_bytes = digests(moved_out) == digests(ours_out)

        compared = release_build(
            matrix, None, fresh_cache(root, "compare", toolchains), "--compare",
            str(ours_out / "manifest.json"), "--json", stdout=reports,
        )  # fmt: skip
        identical = json.loads(reports[-1])["identical"]

        wheel_sizes = {
            w["filename"]: w["size"]
            for w in json.loads((ours_out / "manifest.json").read_text())["wheels"]
        }
        largest = max(wheel_sizes.values())
        sms = sorted({s for c in all_cells for s in c["sms"]}, key=int)
        baseline = naive_fatbin_bytes(toolchains, sms, root)

    versions = len({c["cuda"] for c in all_cells})
    print(f"matrix: {len(all_cells)} cells, {versions} CUDA versions; times in seconds")
    print(f"{'measure':<48} {'ours':>10} {'baseline':>10} {'ratio':>8}  goal")
    print(
        f"{'1. cold full matrix vs naive per-cell builds':<48} {cold:>10.1f} {naive:>10.1f} "
        f"{cold / naive:>8.2f}  <= 0.5"
    )
    print(
        f"{'2. warm rebuild, nothing changed':<48} {warm:>10.2f} {cold:>10.1f} "
        f"{warm / cold:>8.3f}  < 3 s, 0 compiles (got {warm_compiles})"
    )
    print(
        f"{'3. one kernel changed (swiglu.cu)':<48} {one_changed:>10.1f} {cold:>10.1f} "
        f"{one_changed / cold:>8.2f}  only swiglu: {dict(per_kernel)} "
        f"(cold compiled {cold_compiles} kernel targets)"
    )
    print(
        f"{'4. largest wheel vs uncompressed PTX-for-every-SM':<48} {largest:>10,} "
        f"{baseline:>10,} {largest / baseline:>8.2f}  <= 0.5"
    )
    print(
        f"{'5. rebuild at another path, cache copied there':<48} {moved:>10.2f} {cold:>10.1f} "
        f"{moved / cold:>8.3f}  0 compiles (got {moved_compiles}), "
        f"{from_cache}/{len(all_cells)} wheels from the cache, identical bytes: {same_bytes}"
    )
    print(
        f"{'6. --compare (rebuild from empty caches) vs cold':<48} {compared:>10.1f} "
        f"{cold:>10.1f} {compared / cold:>8.2f}  identical: {identical}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
