"""Fixtures of the fast tier's integration tests: a real pypiserver on 127.0.0.1
(tests/pypi_server), the stand-in GitHub (tests/github_standin)."""

from __future__ import annotations

from tests.github_standin.fixtures import ghes_standin, github_standin
from tests.pypi_server import PypiServer, pypiserver, pypiserver_session

__all__ = ["PypiServer", "ghes_standin", "github_standin", "pypiserver", "pypiserver_session"]
