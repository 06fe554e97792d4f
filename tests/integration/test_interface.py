"""The fast tier's part of every command's recorded interface (tests/integration/interface.py
says how it is recorded and compared): `--help` and `--version`, every command that needs no
compiler run and no toolchain download, its `--json` and `--schema` documents and its error
exits; the commands that read a dist/ read a stand-in of the shipped matrix's, and doctor
and `build --dry-run` an empty cache."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from release.cli import COMMANDS
from tests.integration.interface import (
    BY_NAME,
    GOLDEN,
    INVOCATIONS,
    RECORDING,
    Invocation,
    Workspace,
    check_unchanged,
    of_tier,
    standin_dist,
    workspace_at,
)

FAST = of_tier("fast")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    """An empty cache, the stand-in dist, and every fast invocation run side by side."""
    tmp = tmp_path_factory.mktemp("interface")
    cache = tmp / "cache"
    cache.mkdir()
    standin_dist(tmp / "dist")
    with workspace_at(tmp, cache) as workspace:
        workspace.run_all(FAST)
        yield workspace


@pytest.mark.parametrize("invocation", FAST, ids=[i.name for i in FAST])
def test_the_interface_is_unchanged(workspace: Workspace, invocation: Invocation) -> None:
    check_unchanged(workspace, invocation)


def test_every_golden_file_is_an_invocation() -> None:
    """A golden file without its invocation would silently stop being compared."""
    if RECORDING:
        for stale in set(GOLDEN.glob("*.json")) - {GOLDEN / f"{n}.json" for n in BY_NAME}:
            stale.unlink()
    recorded = sorted(p.stem for p in GOLDEN.glob("*.json"))
    assert recorded == sorted(BY_NAME)


def test_every_command_has_its_help_recorded() -> None:
    assert {f"help-{c}" for c in COMMANDS} <= {i.name for i in INVOCATIONS}
