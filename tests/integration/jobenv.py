"""The environment of a publish job against the stand-ins: none of the runner's own
variables (a test may run inside GitHub Actions), the pypiserver's upload credentials and
a GitHub token."""

from __future__ import annotations

import pytest

from tests.pypi_server import PypiServer

RUNNER_VARIABLES = ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "TWINE_API_KEY", "GH_TOKEN")


def publish_job_env(
    monkeypatch: pytest.MonkeyPatch, pypiserver: PypiServer, github_token: str
) -> None:
    for name in RUNNER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in pypiserver.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GITHUB_TOKEN", github_token)
