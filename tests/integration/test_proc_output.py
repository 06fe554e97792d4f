"""What release.proc keeps of a child's output: all of it up to OUTPUT_KEPT_BYTES a pipe,
past that its first bytes and its last (where a failing program says why), with the bytes
between counted; a reader of a whole listing then fails (`proc.too_long`). A program that
printed a gigabyte was held whole (a `--cuobjdump` given to audit, or the real one on a
fatbin made to list that much)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from release import proc
from tests.integration.indexes import ELF, audited, link_to, static_server, write_page
from tests.integration.wheels import make_wheel

FLOOD = (
    "import sys; w = sys.stdout.write; w('first line\\n'); "
    "[w('x' * 1023 + '\\n') for _ in range({n})]; w('the cause\\n')"
)


def test_output_past_the_bound_keeps_its_start_and_its_end() -> None:
    megabytes = proc.OUTPUT_KEPT_BYTES // 2**20 + 36
    done = proc.run([sys.executable, "-c", FLOOD.format(n=megabytes * 1024)], env=dict(os.environ))
    assert done.ok
    assert done.output.startswith("first line\n")
    assert done.output.endswith("the cause\n")
    assert len(done.output) < proc.OUTPUT_KEPT_BYTES + 200
    assert done.left_out > 35 * 2**20
    assert f"[... {done.left_out} bytes of output left out ...]" in done.output
    assert proc.tail(done.output, 1) == "the cause"
    assert proc.too_long("it", done) == (
        f"it printed more than {proc.OUTPUT_KEPT_BYTES // 2**20} MiB, more than is read"
    )


def test_output_within_the_bound_is_kept_whole_and_read_as_text() -> None:
    program = "import sys; sys.stdout.buffer.write(b'a\\r\\nb\\rc\\xff\\n' + b'y' * 70000)"
    lines: list[str] = []
    done = proc.run([sys.executable, "-c", program], env=dict(os.environ), on_line=lines.append)
    assert done.left_out == 0
    assert proc.too_long("it", done) is None
    assert done.output == "a\nb\nc\ufffd\n" + "y" * 70000  # as a text-mode pipe reads it
    assert lines == ["a", "b", "c\ufffd", "y" * proc.LINE_CHARACTERS, "y" * 4464]


def test_a_child_printing_far_more_is_read_in_bounded_memory() -> None:
    """In a process of its own, 256 MiB through a pipe, with no secret in its environment to
    mask (whose case-folded copies of the text come and go). Its peak is its own memory's
    high-water mark (VmHWM); ru_maxrss keeps the forking worker's across exec."""
    program = (
        "import os, re\n"
        "from release import proc\n"
        "env = {'PATH': os.environ['PATH']}\n"
        "done = proc.run(['head', '-c', str(256 * 2**20), '/dev/zero'], env=env)\n"
        "status = open('/proc/self/status').read()\n"
        "peak = re.search(r'VmHWM:\\s*(\\d+) kB', status)[1]\n"
        "print(done.returncode, getattr(done, 'left_out', 0), peak)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=300
    )
    code, left_out, peak_kib = map(int, done.stdout.split())
    assert peak_kib < 300 * 1024, peak_kib  # it held the bytes, then the text: 525 MB
    assert (code, left_out) == (0, 256 * 2**20 - proc.OUTPUT_KEPT_BYTES)


def test_audit_names_a_cuobjdump_that_prints_more_than_is_read(tmp_path: Path) -> None:
    flooding = tmp_path / "cuobjdump"
    flooding.write_text(f"#!/bin/sh\nhead -c {proc.OUTPUT_KEPT_BYTES + 2**20} /dev/zero\n")
    flooding.chmod(0o755)
    fatbin = (ELF.parent / "elf-device" / "prebuilt.fatbin").read_bytes()
    wheel = make_wheel(
        tmp_path / "files", platform="manylinux_2_28_x86_64",
        members={"k3_kernels/device/kernels.fatbin": fatbin},
    )  # fmt: skip
    page = tmp_path / "k3-kernels"
    write_page(page, [link_to(wheel, page)])
    with static_server(tmp_path) as url:
        done = audited(f"{url}k3-kernels/", "--cuobjdump", str(flooding))
    assert done.returncode == 7, done.stderr
    details = [f["detail"] for f in json.loads(done.stdout)["findings"]]
    assert any(
        f"cuobjdump printed more than {proc.OUTPUT_KEPT_BYTES // 2**20} MiB" in d for d in details
    ), details
