"""The full tier: every test here runs a real compiler, downloads a toolchain, installs or
starts torch, or resolves and installs with real pip and uv (docs/testing.md). The folder is
the tier: `pytest tests/full` runs it, the README's `pytest` runs the other folders, and
tests/conftest.py refuses a `slow` mark outside this folder and a test without it inside.

The expensive builds the session shares are in `shared_builds.py`; the servers are the fast
tier's (tests/pypi_server, tests/github_standin).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import run_dir
from tests.full.shared_builds import (
    shipped_build,
    torch_cache,
    torch_environment,
    torch_regular,
    torch_stable,
)
from tests.github_standin.fixtures import ghes_standin, github_standin
from tests.pypi_server import PypiServer, pypiserver, pypiserver_session

__all__ = [
    "PypiServer",
    "ghes_standin",
    "github_standin",
    "pypiserver",
    "pypiserver_session",
    "shipped_build",
    "torch_cache",
    "torch_environment",
    "torch_regular",
    "torch_stable",
]


@pytest.fixture(scope="session")
def release_cache() -> Path:
    """The cache `release build` provisions toolchains into, shared by a whole test run and
    by its xdist workers (provisioning into one cache from two processes is safe: each
    install lands whole, by a rename).

    $RELEASE_TEST_CACHE keeps it between runs (toolchains are hundreds of MB); by default
    it is fresh, so a run proves provisioning from PyPI works.
    """
    kept = os.environ.get("RELEASE_TEST_CACHE")
    path = Path(kept).resolve() if kept else run_dir() / "release-cache"
    path.mkdir(parents=True, exist_ok=True)
    return path
