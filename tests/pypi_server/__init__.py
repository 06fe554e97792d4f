"""A real pypiserver on 127.0.0.1 (from PyPI) for publishing and installing.

It runs once per session (per xdist worker) with authentication on for uploads, downloads and
listing (`-a update,download,list`), no fallback to pypi.org, sha256 link fragments and the
plain directory backend (no listing cache); the `pypiserver` fixture empties its packages
directory for every test and restarts it if a test stopped it. Import the fixtures into a
conftest.py (tests/integration's and tests/full's do).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import venv
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from passlib.apache import HtpasswdFile  # type: ignore[import-untyped]  # no stubs

from tests.local_http import LOCAL
from tests.s3_server import free_port

USERNAME = "uploader"
PASSWORD = "pw-Upl0ad-3f9c1e7a"  # the test server's password, nothing else


@dataclass
class PypiServer:
    """A pypiserver process; `url` ends in `/` and accepts uploads, `index_url` is `simple/`."""

    root: Path
    port: int
    username: str = USERNAME
    password: str = PASSWORD
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def index_url(self) -> str:
        return f"{self.url}simple/"

    @property
    def packages(self) -> Path:
        return self.root / "packages"

    @property
    def log_file(self) -> Path:
        return self.root / "pypiserver.log"

    def pip_install(self, requirement: str, where: Path) -> Path:
        """`pip install --no-deps` of `requirement` from this index, as a user would, by a
        fresh venv's pip into `where`/target (returned)."""
        env_dir, target = where / "venv", where / "target"
        venv.EnvBuilder(with_pip=True).create(env_dir)
        private = self.index_url.replace("http://", f"http://{self.username}:{self.password}@")
        subprocess.run(
            [str(env_dir / "bin" / "python"), "-m", "pip", "--isolated", "install", "--no-deps",
             "--no-cache-dir", "--target", str(target), "--index-url", private, requirement],
            check=True, capture_output=True,
        )  # fmt: skip
        return target

    def env(self) -> dict[str, str]:
        """Upload credentials as `release publish` reads them."""
        return {"TWINE_USERNAME": self.username, "TWINE_PASSWORD": self.password}

    def start(self) -> None:
        self.packages.mkdir(parents=True, exist_ok=True)
        htpasswd = self.root / "htpasswd"
        if not htpasswd.exists():
            users = HtpasswdFile(str(htpasswd), new=True)
            users.set_password(self.username, self.password)
            users.save()
        script = Path(sys.executable).with_name("pypi-server")
        cmd = [
            str(script), "run",
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--authenticate", "update,download,list",
            "--passwords", str(htpasswd),
            "--disable-fallback",
            "--hash-algo", "sha256",
            "--backend", "simple-dir",
            "--log-file", str(self.log_file),
            str(self.packages),
        ]  # fmt: skip
        self.process = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ)
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"pypiserver exited with {self.process.returncode}")
            try:
                if LOCAL.get(f"{self.url}health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError("pypiserver did not answer within 30 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def files(self) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in sorted(self.packages.iterdir())}

    def clear(self) -> None:
        for path in self.packages.iterdir():
            path.unlink()


@pytest.fixture(scope="session")
def pypiserver_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PypiServer]:
    server = PypiServer(root=tmp_path_factory.mktemp("pypiserver"), port=free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pypiserver(pypiserver_session: PypiServer) -> Iterator[PypiServer]:
    """The session's pypiserver, empty and running at the start of the test."""
    if not pypiserver_session.running:
        pypiserver_session.start()
    pypiserver_session.clear()
    yield pypiserver_session
    if not pypiserver_session.running:
        pypiserver_session.start()
