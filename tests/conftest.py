"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def release_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cache `release build` provisions toolchains into, shared by a whole test run.

    $RELEASE_TEST_CACHE keeps it between runs (toolchains are hundreds of MB); by default
    it is fresh, so a run proves provisioning from PyPI works.
    """
    kept = os.environ.get("RELEASE_TEST_CACHE")
    if kept:
        path = Path(kept).resolve()
        path.mkdir(parents=True, exist_ok=True)
        return path
    return tmp_path_factory.mktemp("release-cache")
