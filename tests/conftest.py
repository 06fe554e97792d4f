"""Fixtures and hooks shared by every test folder: the tier of a test is its folder, the
groups pytest-xdist keeps on one worker, and the checks started early on a core of their own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
FULL_TIER = ROOT / "tests" / "full"

# A run starts some 200 Python processes of the same code (4 workers, each collecting every
# module, and the `release` subprocesses): they write and read its bytecode even where the
# environment says not to (PYTHONDONTWRITEBYTECODE: collection took 7.9 s a worker instead
# of 2.7 s). __pycache__/ is ignored by git and by every build of a project.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# The full tier provisions torch environments of several torch releases (5 GB each) into one
# cache: within the default budget (release.toolchain.envcache) a later build would prune
# one an earlier one made and a later test downloads it again. Unless the run says
# otherwise, it keeps them all; the budget's own tests give theirs.
os.environ.setdefault("RELEASE_TORCH_ENV_BUDGET", "none")

# Property tests assert what a value does, never how fast: a hypothesis deadline or its
# too-slow health check is a timing assertion, which a loaded machine fails (a 2 ms example
# took 354 ms beside the other workers). Each test's own settings add to these.
settings.register_profile(
    "suite", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("suite")

# Checks that take a minute from a fresh clone (mypy --strict has no cache there) start as
# soon as collection selects them, in a process of their own beside the workers; the test
# itself then reads the result (`early_result`).
EARLY: dict[str, tuple[str, ...]] = {
    "tests/test_lint.py::test_mypy_strict": (str(BIN / "mypy"),),
}
# A directory of the whole run, made by the controller (the only process without xdist),
# which its workers share: the early checks' results and the full tier's toolchain cache.
RUN_DIR = "K3_TEST_RUN_DIR"
_early: list[subprocess.Popen[bytes]] = []

# Runs a command with its output in a file, then writes its exit code beside it (the
# worker that reads the result is not the process that started it).
_WRAPPER = """
import os, subprocess, sys
out, rc = sys.argv[1], sys.argv[2]
with open(out, "wb") as output:
    code = subprocess.run(sys.argv[3:], stdout=output, stderr=subprocess.STDOUT).returncode
with open(rc + ".part", "w") as part:
    part.write(str(code))
os.replace(rc + ".part", rc)
"""


# The full tier's modules that keep a worker busy longest, longest first (seconds of one
# worker on 2 cores, 3 workers): a run of the full tier alone hands them out in this order,
# then the others in collection order. pytest-xdist's own order (most tests first) handed
# test_first_tag_build.py, one test of 290 s, out last: the run ended 270 s after the
# other workers had nothing left (1102 s instead of about 940).
LONGEST_FIRST = (
    "test_torch_backend.py",  # 615: both torch flavours, their rebuilds and plantings
    "test_first_tag_build.py",  # 287: the template built, reproduced, published, installed
    "test_newcomer.py",  # 267: the README's build (not in CI: .ci/run's), the floors' build
    "test_reproducible.py",  # 225: the shipped build (first to ask makes it), a rebuild
    "test_build.py",  # 189
    "test_project_build.py",  # 161
    "test_jit_gemm.py",  # 135
    "test_interface_unchanged.py",  # 120: `build --compare` of the shipped matrix
    "test_torch_older.py",  # 110
    "test_nightly_build.py",  # 94
)


def _full_tier_only(config: pytest.Config) -> bool:
    paths = [Path(a.split("::")[0]).resolve() for a in config.args]
    return bool(paths) and all(p.is_relative_to(FULL_TIER) for p in paths)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: two workers a core for the fast tier, whose tests mostly wait (on a
    subprocess, a local server, a retry's backoff), so that one worker's wait is another's
    work (on 2 cores, 4 workers ran it in 159 s where 2 took 194 s); one a core and one
    more for a run of the full tier alone, whose compilers keep every core busy but whose
    downloads and installs leave them idle at times (3 workers: 16:50, 2: 17:30-18:10)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) + 1 if _full_tier_only(config) else (cores or 1) * 2


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def run_dir() -> Path:
    """The run's directory shared by the controller and its workers."""
    return Path(os.environ[RUN_DIR])


def _early_files(nodeid: str) -> tuple[Path, Path]:
    stem = nodeid.replace("/", "_").replace(":", "_")
    return run_dir() / f"{stem}.out", run_dir() / f"{stem}.rc"


def _start_early(nodeids: Sequence[str]) -> None:
    for nodeid in nodeids:
        command = EARLY.get(nodeid)
        if command is None or _early_files(nodeid)[0].exists():
            continue
        out, rc = _early_files(nodeid)
        out.touch()
        try:
            _early.append(
                subprocess.Popen(
                    [sys.executable, "-c", _WRAPPER, str(out), str(rc), *command], cwd=ROOT
                )
            )
        except OSError:  # the test runs it and says so
            out.unlink()


# What a terminal says about itself changes how `release` lays out its text (a table
# stacks and folds to COLUMNS): every test starts from a pipe, whatever ran pytest. And
# a workflow job's runner changes what `release` does (annotations, a step summary, where
# a token may go, trusted publishing): every test starts outside one, whatever ran it,
# and a test of a job sets the job's variables itself.
TERMINAL_SETTINGS = ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR")
RUNNER_SETTINGS = (
    *("GITHUB_ACTIONS", "GITHUB_API_URL", "GITHUB_SERVER_URL", "GITHUB_STEP_SUMMARY"),
    *("ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN"),
)


def pytest_configure(config: pytest.Config) -> None:
    for name in (*TERMINAL_SETTINGS, *RUNNER_SETTINGS):
        os.environ.pop(name, None)
    if not _is_worker(config):
        os.environ[RUN_DIR] = tempfile.mkdtemp(prefix="k3-tests-")
        if _full_tier_only(config) and hasattr(config.option, "loadscopereorder"):
            config.option.loadscopereorder = False  # LONGEST_FIRST's order, not xdist's


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuses a `slow` mark outside tests/full and a test without it inside (the folder is
    the tier: docs/testing.md); in a run of the full tier alone, puts its LONGEST_FIRST
    modules first."""
    misplaced = []
    for item in items:
        inside = FULL_TIER in item.path.parents
        if inside != (item.get_closest_marker("slow") is not None):
            misplaced.append(item.nodeid)
    if _full_tier_only(config):
        rank = {name: index for index, name in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
    if misplaced:
        raise pytest.UsageError(
            "the folder is the tier: a test in tests/full/ carries `pytestmark = "
            "pytest.mark.slow`, and no test elsewhere does (docs/testing.md); misplaced: "
            + ", ".join(misplaced[:10])
        )


def pytest_collection_finish(session: pytest.Session) -> None:
    if not _is_worker(session.config) and not session.config.pluginmanager.has_plugin("dsession"):
        _start_early([item.nodeid for item in session.items])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: object, ids: Sequence[str]) -> None:
    """pytest-xdist's controller: the first worker to finish collecting says what runs."""
    _start_early(ids)


def pytest_unconfigure(config: pytest.Config) -> None:
    """What a stopped session (-x, ^C) never read ends with it."""
    if _is_worker(config):
        return
    for process in _early:
        process.kill()
        process.wait()
    _early.clear()
    shutil.rmtree(os.environ.pop(RUN_DIR), ignore_errors=True)


@pytest.fixture
def early_result(request: pytest.FixtureRequest) -> Iterator[tuple[int, str]]:
    """The exit code and output of the test's EARLY command: started at collection, or
    run now where collection did not start it (the test named on its own, say)."""
    nodeid = request.node.nodeid
    out, rc = _early_files(nodeid)
    if not out.exists():
        command = EARLY[nodeid]
        try:
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
        except OSError as error:
            yield 127, f"{command[0]}: {error}"
            return
        yield done.returncode, done.stdout + done.stderr
        return
    while not rc.exists():  # pytest-timeout ends a hang with this test's name
        time.sleep(0.2)
    yield int(rc.read_text()), out.read_text(errors="replace")
