"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

# The full tier provisions torch environments of several torch releases (5 GB each) into one
# cache: within the default budget (release.toolchain.envcache) a later build would prune
# one an earlier one made and a later test downloads it again. Unless the run says
# otherwise, it keeps them all; the budget's own tests give theirs.
os.environ.setdefault("RELEASE_TORCH_ENV_BUDGET", "none")

# Checks that take a minute from a fresh clone (mypy --strict has no cache there) start as
# soon as collection selects them, on the other core, while the rest of the suite runs; the
# test itself then reads the result (`early_result`).
EARLY: dict[str, tuple[str, ...]] = {
    "tests/test_lint.py::test_mypy_strict": (str(BIN / "mypy"),),
}
_early: dict[str, tuple[subprocess.Popen[bytes], IO[bytes]]] = {}


def pytest_collection_finish(session: pytest.Session) -> None:
    for item in session.items:
        command = EARLY.get(item.nodeid)
        if command is not None and item.nodeid not in _early:
            output = tempfile.TemporaryFile()  # noqa: SIM115  # read and closed by early_result
            try:
                process = subprocess.Popen(
                    command, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT
                )
            except OSError:  # not installed here: the test runs it and says so
                output.close()
                continue
            _early[item.nodeid] = (process, output)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """What a stopped session (-x, ^C) never read ends with it."""
    for process, output in _early.values():
        process.kill()
        process.wait()
        output.close()
    _early.clear()


@pytest.fixture
def early_result(request: pytest.FixtureRequest) -> Iterator[tuple[int, str]]:
    """The exit code and output of the test's EARLY command: started at collection, or
    run now where collection did not start it (the test named on its own, say)."""
    started = _early.pop(request.node.nodeid, None)
    if started is None:
        command = EARLY[request.node.nodeid]
        try:
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
        except OSError as error:
            yield 127, f"{command[0]}: {error}"
            return
        yield done.returncode, done.stdout + done.stderr
        return
    process, output = started
    with output:
        returncode = process.wait()
        output.seek(0)
        yield returncode, output.read().decode(errors="replace")


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
