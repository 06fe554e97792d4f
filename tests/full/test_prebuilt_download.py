"""A wheel whose binaries this build did not compile fails its cell (exit 4).

tests/fixtures/prebuilt_download's setup.py does what flash-attention's does: its
bdist_wheel downloads the project's prebuilt wheel and renames it, unless
K3_PREBUILT_OPS_FORCE_BUILD=TRUE. Upstream is an HTTP server on 127.0.0.1 serving a real,
correctly built wheel of the project (the forced build's, for the cell's own SM), so its
tags and device code are right and only the check that every fatbin of the wheel was
written by a compile of this build (release.backends.compiled) can tell.
"""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from release.toolchain.torchenv import TorchEnv
from tests.full.shared_builds import (
    ONE_SM,
    REPO,
    TORCH,
    TORCH_CLI,
    TORCH_EPOCH,
    TORCH_MATRIX,
    linked_cache,
)

pytestmark = pytest.mark.slow

FIXTURE = REPO / "tests" / "fixtures" / "prebuilt_download"
WHEEL = "k3_prebuilt_ops-0.1.0-cp310-abi3-manylinux_2_34_x86_64.whl"
UPSTREAM_NAME = "k3_prebuilt_ops-0.1.0-cp310-abi3-linux_x86_64.whl"


def release_build(where: Path, env: str, release_cache: Path) -> subprocess.CompletedProcess[str]:
    matrix = where / "matrix.yaml"
    where.mkdir(parents=True)
    matrix.write_text(
        TORCH_MATRIX.format(project=FIXTURE, env=env, sms=ONE_SM, ptx="none", torch=TORCH),
        encoding="utf-8",
    )
    cache = linked_cache(where / "cache", release_cache)
    return subprocess.run(
        [sys.executable, "-c", TORCH_CLI,
         "build", "--matrix", str(matrix), "--out", str(where / "dist"), "--cache-dir", str(cache)],
        capture_output=True, text=True, check=False,
        env={**os.environ, "SOURCE_DATE_EPOCH": TORCH_EPOCH},
    )  # fmt: skip


class Upstream(http.server.BaseHTTPRequestHandler):
    """Upstream's GitHub Release: the one wheel, and the paths asked for."""

    wheel: ClassVar[bytes] = b""
    asked: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).asked.append(self.path)
        if self.path != f"/{UPSTREAM_NAME}":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.wheel)))
        self.end_headers()
        self.wfile.write(self.wheel)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[tuple[str, type[Upstream]]]:
    handler = type("Served", (Upstream,), {"asked": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{UPSTREAM_NAME}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_a_downloaded_prebuilt_wheel_fails_the_cell_and_a_forced_build_passes(
    torch_environment: TorchEnv,
    release_cache: Path,
    tmp_path: Path,
    upstream: tuple[str, type[Upstream]],
) -> None:
    url, served = upstream
    forced = release_build(
        tmp_path / "forced",
        f'{{K3_PREBUILT_OPS_FORCE_BUILD: "TRUE", K3_PREBUILT_OPS_WHEEL_URL: "{url}"}}',
        release_cache,
    )
    assert forced.returncode == 0, forced.stdout[-3000:] + forced.stderr[-3000:]
    built = tmp_path / "forced" / "dist" / WHEEL
    assert built.is_file()
    assert served.asked == []  # forced: nothing downloaded
    served.wheel = built.read_bytes()

    downloaded = release_build(
        tmp_path / "downloaded", f'{{K3_PREBUILT_OPS_WHEEL_URL: "{url}"}}', release_cache
    )
    print(downloaded.stderr)
    assert served.asked == [f"/{UPSTREAM_NAME}"]  # the setup.py took upstream's wheel
    assert downloaded.returncode == 4, downloaded.stdout[-3000:] + downloaded.stderr[-3000:]
    assert (
        "no CUDA compile of this build wrote device code, yet the wheel holds some: "
        "k3_prebuilt_ops/_C.abi3.so (1 of 1 fatbins: .nv_fatbin " in downloaded.stderr
    ), downloaded.stderr
    assert "_FORCE_BUILD=TRUE" in downloaded.stderr
    assert not (tmp_path / "downloaded" / "dist" / WHEEL).exists()
