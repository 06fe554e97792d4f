"""A real S3 API on 127.0.0.1 (moto's server mode, from PyPI) for the compile cache."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

ACCESS_KEY = "AKIAK3CACHETEST0001"
SECRET_KEY = "s3-Secr3t-7f1d2c9b8a"  # the test server's key, nothing else


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class S3Server:
    root: Path
    port: int
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The keys as sccache reads them."""
        return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}

    def start(self) -> None:
        script = Path(sys.executable).with_name("moto_server")
        with (self.root / "moto.log").open("ab") as log:
            self.process = subprocess.Popen(
                [str(script), "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "true"},
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self.process.returncode}")
            try:
                httpx.get(f"{self.endpoint}/moto-api/", timeout=1)
                return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError("moto_server did not answer within 60 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None

    def create_bucket(self, name: str) -> None:
        httpx.put(f"{self.endpoint}/{name}", timeout=10).raise_for_status()

    def keys(self, bucket: str) -> list[str]:
        """Every object key in `bucket` (ListObjectsV2, all pages)."""
        found: list[str] = []
        token = ""
        while True:
            params = {"list-type": "2", **({"continuation-token": token} if token else {})}
            listed = httpx.get(f"{self.endpoint}/{bucket}", params=params, timeout=10)
            listed.raise_for_status()
            found += re.findall(r"<Key>([^<]+)</Key>", listed.text)
            more = re.search(r"<NextContinuationToken>([^<]+)</NextContinuationToken>", listed.text)
            if not more:
                return found
            token = more.group(1)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    server = S3Server(root=tmp_path_factory.mktemp("s3"), port=free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()
