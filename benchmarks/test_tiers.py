"""What each test tier costs (issue 50), so that the next change that adds tests sees it.

Runs the README's test command (the fast tier, every core) from a fresh clone of HEAD, so
that mypy has no cache, and prints its wall time against the 3-minute bar and the 20
slowest tests (setup, call and teardown added up, a module fixture's setup counted on the
test that paid it). With `--serial` it then runs the same tier in one process (`-n0`) in
another fresh clone and prints the ratio of the two, measured side by side in one run.
With `--full` it does the same for the full tier (`pytest tests/full`, about 15 minutes).

Run from the repository root, in the venv the README's set-up makes:
    .venv/bin/python benchmarks/test_tiers.py [--serial] [--full]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTEST = Path(sys.executable).parent / "pytest"
FAST_BAR_S = 180.0


def clone(into: Path) -> Path:
    """HEAD in a fresh clone, with this venv's packages (nothing cached: no .mypy_cache)."""
    checkout = into / "checkout"
    git = shutil.which("git") or "git"
    subprocess.run([git, "clone", "-q", str(REPO), str(checkout)], check=True)
    return checkout


def run_tier(checkout: Path, args: list[str], report: Path) -> tuple[float, int]:
    """Seconds the tier took, and pytest's exit code."""
    start = time.monotonic()
    done = subprocess.run(
        [str(PYTEST), "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *args],
        cwd=checkout,
        stdout=subprocess.DEVNULL,
        check=False,
    )
    return time.monotonic() - start, done.returncode


def slowest(report: Path, count: int) -> list[tuple[float, str]]:
    seconds: dict[str, float] = defaultdict(float)
    # S314: the report is the one pytest just wrote here
    for case in ET.parse(report).getroot().iter("testcase"):  # noqa: S314
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        seconds[name] += float(case.get("time", "0"))
    return sorted(((s, n) for n, s in seconds.items()), reverse=True)[:count]


def measure(tier: str, args: list[str], *, serial: bool, bar: float | None) -> int:
    worst = 0
    with tempfile.TemporaryDirectory(prefix="release-tiers-") as tmp:
        root = Path(tmp)
        wall, code = run_tier(clone(root / "parallel"), args, root / "parallel.xml")
        worst = max(worst, code)
        verdict = "" if bar is None else f" (bar {bar:.0f} s: {'under' if wall < bar else 'OVER'})"
        print(f"{tier} tier, every core: {wall:.1f} s, pytest exit {code}{verdict}")
        print(f"slowest 20 tests of the {tier} tier:")
        for seconds, name in slowest(root / "parallel.xml", 20):
            print(f"  {seconds:7.2f} s  {name}")
        if serial:
            alone, code = run_tier(clone(root / "serial"), [*args, "-n0"], root / "serial.xml")
            worst = max(worst, code)
            print(f"{tier} tier, one process: {alone:.1f} s; every core is {alone / wall:.2f}x")
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serial", action="store_true", help="also run each tier with -n0")
    parser.add_argument("--full", action="store_true", help="also measure the full tier")
    options = parser.parse_args()
    code = measure("fast", [], serial=options.serial, bar=FAST_BAR_S)
    if options.full:
        code = max(code, measure("full", ["tests/full"], serial=options.serial, bar=None))
    return code


if __name__ == "__main__":
    sys.exit(main())
