"""pytest fixtures of the stand-in GitHub.

Import them into a conftest.py (``from tests.github_standin.fixtures import
github_standin``); tests/integration/conftest.py and tests/full/conftest.py do.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .server import DEFAULT_REPO, GitHubStandIn


@pytest.fixture
def github_standin() -> Iterator[GitHubStandIn]:
    """A fresh stand-in GitHub per test, with the repository ``k3-org/k3-kernels``."""
    with GitHubStandIn() as standin:
        standin.add_repo(DEFAULT_REPO)
        yield standin


@pytest.fixture
def ghes_standin() -> Iterator[GitHubStandIn]:
    """A fresh stand-in GitHub Enterprise Server (API, uploads, web and storage on four
    origins, none github.com), with the repository ``k3-org/k3-kernels``."""
    with GitHubStandIn(enterprise=True) as standin:
        standin.add_repo(DEFAULT_REPO)
        yield standin
