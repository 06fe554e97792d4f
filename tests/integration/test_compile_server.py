"""The compile cache's sccache server, started for real (no compile): its TMPDIR is a
directory of its own, short enough for the Unix socket its start goes through whatever the
temporary directory is, and `stop` leaves none of it behind."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from release.building.compilecache import (
    SERVER_TMPDIR_MOST,
    client_env,
    end_compiles_of,
    start_server,
)
from release.matrix.compilecache import CompileCache

SLEEP = shutil.which("sleep") or "/bin/sleep"


def test_a_long_temporary_directory_still_starts_the_server_and_stop_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sccache's start failed under a TMPDIR longer than 88 characters (`path must be
    shorter than SUN_LEN`), and with it every compile of the cell; a compile the server
    dropped (a build stopped by a signal) left its sccache_nvcc* directory in TMPDIR."""
    deep = tmp_path / ("t" * 90)
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    environ = {**os.environ, "TMPDIR": str(deep)}
    server = start_server(
        CompileCache(storage="local"), local_dir=tmp_path / "compile", environ=environ, log=None
    )
    try:
        assert server.env["TMPDIR"] == str(server.scratch)
        assert len(str(server.scratch)) <= SERVER_TMPDIR_MOST
        (server.scratch / "sccache_nvccXYZ").mkdir()  # what a dropped compile leaves
    finally:
        server.stop()
    assert not server.scratch.exists()
    assert list(deep.iterdir()) == []


def test_stopping_kills_no_process_that_only_shares_the_port_number(tmp_path: Path) -> None:
    """A process of someone else's that exported the server's port number (a shell, another
    build) was SIGKILLed with the server's compiles; only one carrying the server's own
    directory too is one of them."""
    client = client_env(45123, tmp_path / "compile")
    base = {k: v for k, v in os.environ.items() if not k.startswith("SCCACHE_")}
    bystander = subprocess.Popen([SLEEP, "60"], env={**base, "SCCACHE_SERVER_PORT": "45123"})
    compile_ = subprocess.Popen([SLEEP, "60"], env={**base, **client})
    try:
        time.sleep(0.2)  # both exec'd: their environment is sleep's
        end_compiles_of(client, server=True)
        assert compile_.wait(timeout=10) == -signal.SIGKILL
        assert bystander.poll() is None
    finally:
        bystander.kill()
        compile_.kill()
        bystander.wait()
