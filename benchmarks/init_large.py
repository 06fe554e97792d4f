"""`release init` on a setup.py of 5, 10 and 25 MB of code (issue 49, F22), side by side in
one run: each size in a fresh `release init --offline` process, its seconds, its time over
the 5 MB one's, the seconds of Python's own parse of the same file (`ast.parse`, the floor
under any static read of it) and the peak memory. A read linear in the file's size gives
ratios of about 2 and 5; before, each class of the file cost a split of the whole file (25 MB
did not finish in 300 s). The setup.py is `big_setup_py` of
tests/unit/test_project_pysource.py: classes and functions with docstrings, compile-argument
dicts and environment switches, then setup().

Goal: linear (the ratios), and a few seconds for 25 MB on an idle core.

Run from the repository root, in the venv the README's set-up makes:
    .venv/bin/python benchmarks/init_large.py
"""

from __future__ import annotations

import ast
import gc
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.peak import run_measured  # noqa: E402
from tests.unit.test_project_pysource import PYPROJECT, big_setup_py  # noqa: E402

RELEASE = Path(sys.executable).parent / "release"
SIZES_MB = (5, 10, 25)


def init_once(project: Path) -> tuple[float, int]:
    """Seconds of one `release init` in a fresh process, and its peak memory (MiB)."""
    started = time.perf_counter()
    done, peak = run_measured(["init", "--offline", "--force", str(project)], capture_output=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"release init failed: {done.stderr}")
    return seconds, round(peak)


def parse_seconds(text: str) -> float:
    """Seconds of Python's own parse of `text`: the floor under any static read of it."""
    started = time.perf_counter()
    tree = ast.parse(text)
    seconds = time.perf_counter() - started
    del tree
    gc.collect()
    return seconds


def main() -> int:
    rows = []
    with tempfile.TemporaryDirectory(prefix="release-bench-") as tmp:
        project = Path(tmp)
        (project / "pyproject.toml").write_text(PYPROJECT)
        for size in SIZES_MB:
            text = big_setup_py(size * 1_000_000)
            (project / "setup.py").write_text(text)
            seconds, peak = init_once(project)
            rows.append((size, seconds, parse_seconds(text), peak))
    base = rows[0][1]
    print(
        f"{'setup.py':>9} {'seconds':>8} {'s/MB':>6} {'x 5 MB':>7} {'ast.parse':>10} {'peak MB':>8}"
    )
    for size, seconds, parse, peak in rows:
        print(
            f"{size:>6} MB {seconds:>8.2f} {seconds / size:>6.2f} {seconds / base:>7.2f} "
            f"{parse:>10.2f} {peak:>8}"
        )
    print(f"linear would be: {' '.join(f'{s / SIZES_MB[0]:.2f}' for s in SIZES_MB)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
