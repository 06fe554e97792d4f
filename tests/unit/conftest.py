"""Unit tests run no processes and open no sockets: the fixture below makes both fail."""

from __future__ import annotations

import socket
import subprocess
from typing import Any

import pytest


class ForbiddenInUnitTests(AssertionError):
    pass


@pytest.fixture(autouse=True)
def _no_processes_or_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ForbiddenInUnitTests("unit tests may not spawn processes or open connections")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
