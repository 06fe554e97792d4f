"""A real S3 API on 127.0.0.1 (moto's S3, from PyPI) for the compile cache and the nightly
channel: `serve.py` runs it with conditional writes made atomic, a request log and faults
(its docstring says why and how); `faults.py` is a proxy a test puts in front of it for
the answers moto cannot give."""

from __future__ import annotations

import json
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

from tests.local_http import LOCAL

SERVE = Path(__file__).with_name("serve.py")
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
        with (self.root / "moto.log").open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(SERVE), str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "true"},
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self.process.returncode}")
            try:
                LOCAL.get(f"{self.endpoint}/moto-api/", timeout=1)
                return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError("moto_server did not answer within 60 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None

    def create_bucket(self, name: str, *, public: bool = False) -> None:
        """A bucket; `public`: anyone may GET its objects (a bucket policy), as pip reads a
        nightly index."""
        LOCAL.put(f"{self.endpoint}/{name}", timeout=10).raise_for_status()
        if public:
            policy = {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": "*",
                        "Action": "s3:GetObject",
                        "Resource": f"arn:aws:s3:::{name}/*",
                    }
                ],
            }
            answer = LOCAL.put(
                f"{self.endpoint}/{name}", params={"policy": ""}, content=json.dumps(policy),
                timeout=10,
            )  # fmt: skip
            answer.raise_for_status()

    def requests(self, *, reset: bool = False) -> list[dict[str, str]]:
        """Every request the server answered since the last reset (method, path, query,
        agent); `reset` starts the log again after this answer."""
        method = "DELETE" if reset else "GET"
        answer = LOCAL.request(method, f"{self.endpoint}/__requests__", timeout=10)
        answer.raise_for_status()
        found: list[dict[str, str]] = answer.json()
        return found

    def fault(
        self,
        method: str,
        match: str,
        *,
        status: int = 503,
        times: int = 1,
        hang: bool = False,
        after: bool = False,
    ) -> None:
        """Answer the next `times` requests of `method` whose path holds `match` with
        `status`, or hold them (`hang`) until `clear_faults`; `after`: let each through
        first and lose moto's answer (a write that landed, answered `status`)."""
        fault = {"method": method, "match": match, "status": status, "times": times}
        LOCAL.post(
            f"{self.endpoint}/__faults__",
            json={**fault, "hang": hang, "after": after},
            timeout=10,
        ).raise_for_status()

    def clear_faults(self) -> None:
        LOCAL.delete(f"{self.endpoint}/__faults__", timeout=10).raise_for_status()

    def keys(self, bucket: str) -> list[str]:
        """Every object key in `bucket` (ListObjectsV2, all pages)."""
        found: list[str] = []
        token = ""
        while True:
            params = {"list-type": "2", **({"continuation-token": token} if token else {})}
            listed = LOCAL.get(f"{self.endpoint}/{bucket}", params=params, timeout=10)
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
