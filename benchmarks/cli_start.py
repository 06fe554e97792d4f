"""How much CPU `release` costs before it does anything, measured side by side in one run.

Each command runs `--rounds` times (default 20), interleaved with the others so that the
machine's noise falls on all of them alike; a run's cost is its CPU time (user + system,
children included), and each figure is the median of its rounds:

- `python -c pass`: the interpreter alone;
- `twine --version`: a packaging tool of the same kind (it loads its own commands);
- `release --version`: goal at most 0.15 s of CPU;
- `release matrix` on the shipped matrix.yaml: goal at most 2 times `twine --version`.

Run from the repository root, in the venv the README's set-up makes:
    .venv/bin/python benchmarks/cli_start.py [--rounds 20]
It ends with the lines `release --version: S s of CPU (R x python -c pass)` and
`release matrix / twine --version: R`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "twine --version": [str(BIN / "twine"), "--version"],
    "release --version": [str(BIN / "release"), "--version"],
    "release matrix": [str(BIN / "release"), "matrix"],
}


def cpu_seconds(command: list[str]) -> float:
    """The CPU time (user + system) of one run of `command` and its children."""
    before = os.times()
    subprocess.run(
        command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True
    )
    after = os.times()
    return (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=20)
    rounds = parser.parse_args().rounds
    for command in COMMANDS.values():  # warm: byte-compiled modules, the page cache
        cpu_seconds(command)
    samples: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(rounds):
        for name, command in COMMANDS.items():
            samples[name].append(cpu_seconds(command))
    median = {name: statistics.median(values) for name, values in samples.items()}
    for name, value in median.items():
        print(f"{name:20} {value:.3f} s of CPU (median of {rounds})")
    python = max(median["python -c pass"], 1e-3)
    print(
        f"release --version: {median['release --version']:.3f} s of CPU "
        f"({median['release --version'] / python:.1f} x python -c pass)"
    )
    ratio = median["release matrix"] / median["twine --version"]
    print(f"release matrix / twine --version: {ratio:.2f}")


if __name__ == "__main__":
    main()
