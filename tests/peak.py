"""A `release` command's own peak memory: its high-water mark (VmHWM), read as it exits.
`os.wait4`'s and RUSAGE_CHILDREN's ru_maxrss are not it: Linux carries the resident set of
the process that forked it across exec, so a benchmark holding a large index or file showed
its own size as the command's."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# the console script's `main` (release.cli), with the high-water mark written on the way out
_MEASURED = """\
import atexit, os, re, sys
from release.cli import main

def peak():
    status = open("/proc/self/status").read()
    kib = re.search(r"VmHWM:\\s*(\\d+) kB", status)[1]
    open(os.environ["RELEASE_BENCH_PEAK"], "w").write(kib)

atexit.register(peak)
sys.exit(main(sys.argv[1:]))
"""


def run_measured(
    args: Sequence[str], **options: Any
) -> tuple[subprocess.CompletedProcess[str], float]:
    """`release ARGS` run to its end as `subprocess.run(..., text=True, **options)` runs it,
    and its peak resident memory in MiB."""
    with tempfile.TemporaryDirectory(prefix="release-peak-") as tmp:
        record = Path(tmp) / "peak"
        env = {**options.pop("env", os.environ), "RELEASE_BENCH_PEAK": str(record)}
        done = subprocess.run(
            [sys.executable, "-c", _MEASURED, *args], text=True, env=env, check=False, **options
        )
        return done, int(record.read_text()) / 1024
