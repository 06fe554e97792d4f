"""The full tier's part of every command's recorded interface (tests/integration/interface.py
says how it is recorded and compared): the real build of the shipped matrix's four cells,
`build --compare`, and what reads that build's dist/ and the toolchains it provisioned
(doctor, `build --dry-run`, env, plan, the publish dry run). Slow: two full builds, the
first of them the session's `shipped_build`."""

from __future__ import annotations

import pytest

from tests.full.shared_builds import ShippedBuild
from tests.integration.interface import Invocation, Workspace, check_unchanged, of_tier

pytestmark = pytest.mark.slow

INVOCATIONS = of_tier("full")


@pytest.fixture(scope="module")
def workspace(shipped_build: ShippedBuild) -> Workspace:
    """The session's build of the shipped matrix, which is the `build` invocation (a cache
    of its own, so that its `cached` fields say false every run), then every other full
    invocation side by side."""
    workspace = shipped_build.workspace
    workspace.run_all(tuple(i for i in INVOCATIONS if i.name not in workspace.results))
    return workspace


@pytest.mark.parametrize("invocation", INVOCATIONS, ids=[i.name for i in INVOCATIONS])
def test_the_interface_is_unchanged(workspace: Workspace, invocation: Invocation) -> None:
    check_unchanged(workspace, invocation)
