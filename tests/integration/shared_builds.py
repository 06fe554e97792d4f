"""The full tier's expensive builds, made once per session and shared (docs/testing.md).

- `shipped_build`: one cold `release build` of the shipped matrix.yaml, exactly the
  interface goldens' `build` invocation (tests/integration/interface.py: SOURCE_DATE_EPOCH
  fixed, the repository root, a cache of its own whose toolchains are the session's).
  test_build, test_csrc_build, the reproducible pair's first side and the interface goldens
  read what it made.

What these made is read, never changed: a test that builds into a cache takes a copy
(`ShippedBuild.cache_copy`) or a cache of its own (`linked_cache`).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.interface import Workspace, workspace_at


def linked_cache(where: Path, release_cache: Path) -> Path:
    """A cache directory of its own (device code, wheels, compile cache) whose toolchains
    are the session's."""
    where.mkdir(parents=True)
    (release_cache / "toolchains").mkdir(parents=True, exist_ok=True)
    (where / "toolchains").symlink_to(release_cache / "toolchains", target_is_directory=True)
    return where


def cache_copy(cache: Path, where: Path) -> Path:
    """`cache` (its device code, wheels and compile cache) copied to `where`; the toolchains
    stay the session's."""
    shutil.copytree(cache, where, symlinks=True)
    return where


@dataclass(frozen=True)
class ShippedBuild:
    """The shipped matrix's cold build: dist/ and cache/ under the interface workspace's
    temporary directory, and what the command printed."""

    workspace: Workspace

    @property
    def result(self) -> subprocess.CompletedProcess[str]:
        return self.workspace.results["build"]

    @property
    def dist(self) -> Path:
        return self.workspace.tmp / "dist"

    @property
    def cache(self) -> Path:
        return self.workspace.tmp / "cache"

    @property
    def code(self) -> int:
        return self.result.returncode

    @property
    def stderr(self) -> str:
        return self.result.stderr

    def cache_copy(self, where: Path) -> Path:
        """The build's cache copied to `where`, for a test that builds into it."""
        return cache_copy(self.cache, where)


@pytest.fixture(scope="session")
def shipped_build(
    release_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ShippedBuild]:
    """`release build` of matrix.yaml in the repository root, from a cache with the
    session's toolchains but no device code or wheels, so that what its device log and
    `--json` document say is about this build."""
    tmp = tmp_path_factory.mktemp("shipped")
    linked_cache(tmp / "cache", release_cache)
    with workspace_at(tmp, release_cache) as workspace:
        workspace.run("build")
        yield ShippedBuild(workspace)
