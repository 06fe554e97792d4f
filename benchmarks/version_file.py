"""The read commands on a project whose setup.py computes its version from a file (issue 42),
measured side by side in one run: `release matrix`, `release plan` and `release build
--dry-run` on tests/fixtures/version_file (flash-attention's `get_package_version()`, which
reads `__version__` from the package's __init__.py), each from an empty cache.

Each prints the seconds it took and how much the cache grew. Goal: under 2 s and under
1 MB each (before the tool read such a version statically, `release matrix` provisioned
nvcc and a torch environment to ask setup.py: gigabytes).

Run from the repository root, in the venv the README's set-up makes:
    .venv/bin/python benchmarks/version_file.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.integration.test_version_file import MATRIX as TEST_MATRIX  # noqa: E402

RELEASE = Path(sys.executable).parent / "release"
# the fast test's matrix, its PyPI the stand-in index below
MATRIX = TEST_MATRIX.replace(
    "pypi: {kind: pypi}", 'pypi: {kind: pypi, index-url: "http://127.0.0.1:PORT/simple/"}'
)
COMMANDS = {
    "release matrix": ["matrix"],
    "release plan": ["plan", "--dist", "dist"],
    "release build --dry-run": ["build", "--dry-run"],
}


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # the base's name
        pass


def size_of(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def main() -> int:
    worst = 0.0
    grown = 0
    with tempfile.TemporaryDirectory(prefix="release-bench-") as tmp:
        root = Path(tmp)
        shutil.copytree(REPO / "tests" / "fixtures" / "version_file", root / "proj")
        (root / "index" / "simple").mkdir(parents=True)  # PyPI, on 127.0.0.1: nothing yet
        handler = partial(QuietHandler, directory=str(root / "index"))
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        port = str(server.server_address[1])
        (root / "matrix.yaml").write_text(MATRIX.replace("PORT", port), encoding="utf-8")
        for label, args in COMMANDS.items():
            cache = root / f"cache-{args[0]}"
            env = {**os.environ, "RELEASE_CACHE_DIR": str(cache)}
            start = time.perf_counter()
            done = subprocess.run(
                [str(RELEASE), *args], cwd=root, env=env, capture_output=True, check=False
            )
            seconds = time.perf_counter() - start
            size = size_of(cache)
            worst, grown = max(worst, seconds), max(grown, size)
            print(f"{label}: exit {done.returncode}, {seconds:.2f} s, cache grew {size} bytes")
        server.shutdown()
    print(f"slowest: {worst:.2f} s (goal < 2 s); largest cache growth: {grown} bytes (goal < 1 MB)")
    return 0 if worst < 2 and grown < 2**20 else 1


if __name__ == "__main__":
    sys.exit(main())
