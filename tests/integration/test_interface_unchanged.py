"""The full tier's part of every command's recorded interface (tests/integration/interface.py
says how it is recorded and compared): the real build of the shipped matrix's four cells,
`build --compare`, and what reads that build's dist/ and the toolchains it provisioned
(doctor, `build --dry-run`, env, plan, the publish dry run). Slow: two full builds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.interface import (
    Invocation,
    Workspace,
    check_unchanged,
    of_tier,
    workspace_at,
)

pytestmark = pytest.mark.slow

INVOCATIONS = of_tier("full")


@pytest.fixture(scope="module")
def workspace(release_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    """A build cache of its own (shared toolchains, empty device and wheel caches, so that
    the build's `cached` fields say false every run)."""
    tmp = tmp_path_factory.mktemp("interface")
    (release_cache / "toolchains").mkdir(exist_ok=True)
    (tmp / "cache").mkdir()
    (tmp / "cache" / "toolchains").symlink_to(
        release_cache / "toolchains", target_is_directory=True
    )
    with workspace_at(tmp, release_cache) as workspace:
        yield workspace


@pytest.mark.parametrize("invocation", INVOCATIONS, ids=[i.name for i in INVOCATIONS])
def test_the_interface_is_unchanged(workspace: Workspace, invocation: Invocation) -> None:
    check_unchanged(workspace, invocation)
