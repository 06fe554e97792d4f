"""The compile cache's sccache server, started for real (no compile): its TMPDIR is a
directory of its own, short enough for the Unix socket its start goes through whatever the
temporary directory is, and `stop` leaves none of it behind."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from release.building.compilecache import SERVER_TMPDIR_MOST, start_server
from release.matrix.compilecache import CompileCache


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
