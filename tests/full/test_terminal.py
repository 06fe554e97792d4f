"""A provisioning run on a terminal shows its downloads as they go (a pseudo-terminal, pip
fetching real toolchain wheels over HTTP from an index on 127.0.0.1); piped, the same run
writes plain lines."""

from __future__ import annotations

import functools
import os
import pty
import select
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from release.toolchain import INSPECTOR_PINS, ZIG_PINS

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
NVCC = "#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n"


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A PEP 503 index over the real zig and cuobjdump wheels, served on 127.0.0.1."""
    root = tmp_path_factory.mktemp("index")
    files = root / "files"
    pins = [str(p) for p in (*ZIG_PINS, *INSPECTOR_PINS)]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
         "--disable-pip-version-check", "--quiet", "-d", str(files), *pins],
        check=True,
    )  # fmt: skip
    for wheel in files.glob("*.whl"):
        project = wheel.name.split("-")[0].replace("_", "-").lower()
        page = root / "simple" / project
        page.mkdir(parents=True, exist_ok=True)
        (page / "index.html").write_text(f'<a href="../../files/{wheel.name}">{wheel.name}</a>\n')
    handler = functools.partial(_Quiet, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple/"
    server.shutdown()
    server.server_close()


def provision_args(tmp_path: Path) -> list[str]:
    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "nvcc").write_text(NVCC)
    (home / "bin" / "nvcc").chmod(0o755)
    matrix = Path(__file__).resolve().parents[2] / "matrix.yaml"
    return [str(BIN / "release"), "doctor", "--provision", "--matrix", str(matrix), "--cuda",
            "13.0", "--arch", "x86_64", "--cuda-home", str(home), "--cache-dir",
            str(tmp_path / "cache")]  # fmt: skip


def environment(index: str, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "GITHUB_"))}
    return {
        **env,
        "PIP_CONFIG_FILE": os.devnull,  # only the index below: pip must download
        "PIP_INDEX_URL": index,
        "TERM": "xterm-256color",
        "COLUMNS": "100",
        "HOME": str(tmp_path),
    }


def test_provisioning_on_a_terminal_shows_download_progress(index: str, tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    child = subprocess.Popen(
        provision_args(tmp_path),
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=environment(index, tmp_path),
        close_fds=True,
    )
    os.close(follower)
    captured = bytearray()
    while True:
        ready, _, _ = select.select([leader], [], [], 600)
        if not ready:
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        captured += chunk
    os.close(leader)
    assert child.wait(timeout=60) == 0, captured.decode(errors="replace")[-3000:]
    screen = captured.decode(errors="replace")
    assert "ziglang" in screen
    assert "MB" in screen  # rich's download column: done/total
    assert "\r" in screen or "\x1b[" in screen  # redrawn in place, as a terminal bar is
    assert "toolchains in" in screen


def test_provisioning_piped_writes_plain_progress_lines(index: str, tmp_path: Path) -> None:
    done = subprocess.run(
        provision_args(tmp_path),
        env=environment(index, tmp_path),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("toolchains:")]
    assert lines, done.stderr[-2000:]
    assert any("MiB of" in ln for ln in lines)
    assert "\x1b[" not in done.stderr
