"""release.proc's `stop_when`: a child is ended, with what it started, as soon as the
predicate says so (as the build ends when its compile wrapper records a stop), and not
before; a child that finishes first is left alone; a Python child removes what it made
before it ends (SIGINT first, as `stop_all` ends every child on ^C or SIGTERM)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from release import proc


def test_the_child_and_what_it_started_end_once_stop_when_says_so(tmp_path: Path) -> None:
    flag = tmp_path / "stop"
    pid_file = tmp_path / "sleeper.pid"
    script = f"sleep 60 & echo $! > {pid_file}; sleep 1; touch {flag}; wait"
    start = time.monotonic()
    done = proc.run(["sh", "-c", script], env=dict(os.environ), stop_when=flag.exists)
    seconds = time.monotonic() - start
    assert done.returncode != 0
    assert seconds < 20, seconds  # not the 60 s its sleep would take
    sleeper = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{sleeper}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (
        not Path(f"/proc/{sleeper}").exists()
        or "Z" in Path(f"/proc/{sleeper}/stat").read_text().split()[2]
    )


def test_a_child_that_finishes_first_is_not_stopped(tmp_path: Path) -> None:
    asked: list[float] = []

    def never() -> bool:
        asked.append(time.monotonic())
        return False

    done = proc.run(["sh", "-c", "sleep 0.5; echo done"], env=dict(os.environ), stop_when=never)
    assert done.returncode == 0
    assert done.output.strip() == "done"
    assert asked  # it was asked while the child ran


def test_the_watching_thread_leaves_sigterm_and_sigint_to_the_main_thread() -> None:
    """A process-directed signal goes to a thread that does not block it: the watcher
    blocks both, so that one never lands where nothing handles it while the main thread
    sits waiting for the child."""
    masks: list[set[int | signal.Signals]] = []

    def record() -> bool:
        masks.append(signal.pthread_sigmask(signal.SIG_BLOCK, []))
        return False

    proc.run(["sh", "-c", "sleep 0.5"], env=dict(os.environ), stop_when=record)
    assert masks
    assert {signal.SIGTERM, signal.SIGINT} <= masks[0]
    assert signal.SIGTERM not in signal.pthread_sigmask(signal.SIG_BLOCK, [])


def test_a_stopped_python_child_removes_what_it_made_before_it_ends(tmp_path: Path) -> None:
    """pypa build makes its isolated environment in TMPDIR and removes it on its way out:
    ended by SIGTERM it never did, and each interrupted `release build` left its
    `build-env-*` directories in /tmp."""
    made, ready = tmp_path / "build-env-x", tmp_path / "ready"
    program = (
        "import pathlib, shutil, time\n"
        f"made = pathlib.Path({str(made)!r})\n"
        "made.mkdir()\n"
        f"pathlib.Path({str(ready)!r}).touch()\n"
        "try:\n"
        "    time.sleep(60)\n"
        "finally:\n"
        "    shutil.rmtree(made)\n"
    )
    # A suite started in the background of a script ignores SIGINT, and so would the child
    # (an ignored signal is inherited); `release` handles it (proc.interruptible).
    ignored = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        done = proc.run(
            [sys.executable, "-c", program], env=dict(os.environ), stop_when=ready.exists
        )
    finally:
        signal.signal(signal.SIGINT, ignored)
    assert done.returncode != 0
    assert ready.exists()
    assert not made.exists()


def _ended(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().split()[2] == "Z"


def test_a_daemon_a_run_until_exit_left_in_a_session_of_its_own_is_ended(
    tmp_path: Path,
) -> None:
    """A staging command's `setsid sleep &` left its group, so the group's stop missed it
    and it ran on beside the build (it could change what the step staged); it holds the
    run's mark in its environment and is ended with the run, and a process of another
    run's mark is left alone."""
    pid_file = tmp_path / "daemon.pid"
    other = proc.run(["sh", "-c", "setsid sleep 60 > /dev/null 2>&1 & echo $!; sleep 0.5"],
                     env=dict(os.environ))  # fmt: skip
    bystander = int(other.output.split()[-1])
    try:
        started = "setsid sleep 60 > /dev/null 2>&1 < /dev/null &"
        script = f"{started} echo $! > {pid_file}; sleep 0.5; echo ok"
        done = proc.run(["sh", "-c", script], env=dict(os.environ), until_exit=True)
        assert done.returncode == 0
        assert done.output.strip() == "ok"
        daemon = int(pid_file.read_text())
        assert _ended(daemon)
        state = Path(f"/proc/{bystander}/stat").read_text().split()[2]
        assert state != "Z", "a process of no mark of this run is not ended"
    finally:
        os.kill(bystander, signal.SIGKILL)
