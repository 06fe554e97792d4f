"""`release audit` of a large index served locally: its wall time and its peak memory, at two
sizes side by side, so that the memory's bound shows as the index grows tenfold.

The index: one project, the default variant and `+cu129`, each on its own PEP 503 page,
versions 0.0.1, 0.0.2, ... with an x86_64 and an aarch64 wheel each; every wheel a small
real one (tests/integration/wheels.py) holding a real ELF library of its arch
(tests/data/elf) and `--payload` KiB of incompressible bytes, served by a static server on
127.0.0.1 from this process. Each audit runs as the console script in a child process with
its defaults (4 wheels at once, one scratch file each); its peak memory is the child's own
high-water mark (tests/peak.py), its time the wall clock. The server's memory is this
process's, not counted.

Run from the repository root, in the venv the README's set-up makes:
    .venv/bin/python -m benchmarks.audit [--wheels 2000] [--small 200] [--payload 64]
It ends with the line `2000 wheels: W s, peak M MiB (200 wheels: w s, peak m MiB)`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from tests.integration.indexes import host_library, link_to, static_server, write_page
from tests.integration.wheels import make_wheel
from tests.peak import run_measured

BIN = Path(sys.executable).parent


def write_index(root: Path, wheels: int, payload_kib: int) -> int:
    """`wheels` wheels on two pages under `root`; their total size in bytes."""
    total = 0
    per_page = wheels // 2
    for label in ("", "cu129"):
        page_dir = root / label / "k3-kernels" if label else root / "k3-kernels"
        links = []
        for n in range(per_page // 2):
            version = f"0.0.{n + 1}" + (f"+{label}" if label else "")
            for arch in ("x86_64", "aarch64"):
                wheel = make_wheel(
                    root / "files", version=version, platform=f"manylinux_2_28_{arch}",
                    members={"k3_kernels/libk3_host.so": host_library(arch)},
                    payload=os.urandom(payload_kib * 1024),
                )  # fmt: skip
                total += wheel.stat().st_size
                links.append(link_to(wheel, page_dir))
        write_page(page_dir, links)
    return total


def audited(base: str) -> tuple[float, float, dict[str, object]]:
    """(wall seconds, peak MiB, the --json document) of one `release audit` of the index."""
    command = ["audit", f"{base}k3-kernels/", f"{base}cu129/k3-kernels/", "--no-torch-index",
               "--json"]  # fmt: skip
    start = time.monotonic()
    done, peak = run_measured(command, capture_output=True)
    wall = time.monotonic() - start
    document = json.loads(done.stdout)
    if done.returncode != 0:
        raise SystemExit(f"release audit exited {done.returncode}: {document.get('findings')}")
    return wall, peak, document


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--wheels", type=int, default=2000)
    parser.add_argument("--small", type=int, default=200)
    parser.add_argument("--payload", type=int, default=64, help="KiB of payload per wheel")
    args = parser.parse_args()
    results = {}
    for count in (args.small, args.wheels):
        with tempfile.TemporaryDirectory(prefix="bench-audit-") as tmp:
            size = write_index(Path(tmp), count, args.payload)
            with static_server(Path(tmp)) as base:
                wall, peak, document = audited(base)
        assert document["files"] == count, document["files"]
        results[count] = (wall, peak)
        print(f"{count} wheels ({size / 2**20:.0f} MiB served): {wall:.1f} s wall, "
              f"peak {peak:.0f} MiB resident, {document['files']} files checked, "
              f"{len(document['findings'])} findings")  # type: ignore[arg-type]  # fmt: skip
    big, small = results[args.wheels], results[args.small]
    print(f"{args.wheels} wheels: {big[0]:.1f} s, peak {big[1]:.0f} MiB "
          f"({args.small} wheels: {small[0]:.1f} s, peak {small[1]:.0f} MiB)")  # fmt: skip


if __name__ == "__main__":
    main()
