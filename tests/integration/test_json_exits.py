"""`--json` keeps its promise on the way out that a unit test cannot take: a real `release`
stopped by SIGINT or SIGTERM while it waits on a server still prints its one document
(issue 49, F25), with the exit code the shell sees."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RELEASE = Path(sys.executable).with_name("release")
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_run_stopped_by_a_signal_prints_one_document(
    number: signal.Signals, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in PROXIES and k != "GITHUB_TOKEN"}
    with socket.create_server(("127.0.0.1", 0)) as server:  # takes the request, never answers
        api = f"http://127.0.0.1:{server.getsockname()[1]}"
        child = subprocess.Popen(
            [str(RELEASE), "verify", "--matrix", str(ROOT / "matrix.yaml"), "--tag",
             "k3-kernels-v0.1.0", "--github-api-url", api, "--json", "--json-file",
             str(tmp_path / "verify.json")],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            server.settimeout(60)
            connection, _ = server.accept()  # the command now waits for GitHub's answer
            child.send_signal(number)
            out, err = child.communicate(timeout=60)
            connection.close()
        finally:
            if child.poll() is None:
                child.kill()
    assert child.returncode == 128 + number, err
    document = json.loads(out)
    assert document["command"] == "verify"
    assert document["ok"] is False
    assert document["error"] == {
        "message": f"interrupted by {number.name}",
        "hint": None,
        "exit_code": 128 + number,
    }
    assert json.loads((tmp_path / "verify.json").read_text()) == document
    assert f"error: interrupted by {number.name}" in err.splitlines()
