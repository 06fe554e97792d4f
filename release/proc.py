"""The one way this program runs a subprocess.

`run` captures the output, masks secrets in it, appends it to a log file, bounds the time
with `timeout`, and never raises for the child's sake: a program that cannot start is exit
127, a timeout exit 124. Every child runs in a process session of its own and is
registered while it runs, so that `stop_all` (on SIGINT or SIGTERM) ends it and everything
it started within a few seconds, and no new child starts until `reset`.

A child's process group is ended as a terminal's ^C would begin: SIGINT first, on which a
Python program (the PEP 517 frontend, which makes its isolated build environment in TMPDIR)
removes what it made, where SIGTERM ends it without (each interrupted build left its
`build-env-*` behind); then SIGTERM, for what ignores SIGINT (a shell's background jobs) or
still runs; then SIGKILL where the child itself outlives both. A run `until_exit` (a
project's own staging command) also marks its child's environment, so that what it left
running outside its group (a daemon started with `setsid`) is found by that mark and ended
with it; a process that drops its environment, or that variable, escapes the mark.
"""

from __future__ import annotations

import codecs
import io
import os
import re
import shlex
import signal
import subprocess
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO

from release.credentials import mask, secret_values

EXIT_CANNOT_RUN = 127
EXIT_TIMEOUT = 124
EXIT_STOPPED = 130
STOP_GRACE_SECONDS = 0.5
# the variable that marks a run's descendants where it runs `until_exit`
MARK_VARIABLE = "RELEASE_RUN_MARK"
INTERRUPT_GRACE_SECONDS = 2.0  # how long a group has after SIGINT, before SIGTERM
WATCH_SECONDS = 0.2  # how often `stop_when` is asked
# how long a child that `stop_when` stops may take to end by itself (a build tool prints
# the failed command and exits) before it is ended
STOP_WHEN_GRACE_SECONDS = 2.0
# what a run keeps of each pipe of a child's output: its first bytes and, of these, its last
# bytes; a reader of a listing or a table fails where output was left out (`left_out`)
OUTPUT_KEPT_BYTES = 32 * 2**20
OUTPUT_TAIL_BYTES = 2**20
LINE_CHARACTERS = 2**16  # a longer line goes to `on_line` in pieces


@dataclass(frozen=True, kw_only=True)
class Completed:
    returncode: int
    output: str  # stdout and stderr together, or stdout alone with separate_stderr
    seconds: float
    log: Path | None = None
    stderr: str = ""  # only with separate_stderr
    timed_out: bool = False  # ended at its `timeout` (returncode EXIT_TIMEOUT)
    left_out: int = 0  # bytes of output not kept (OUTPUT_KEPT_BYTES): a reader of all of it fails

    @property
    def ok(self) -> bool:
        return self.returncode == 0


_lock = threading.Lock()
# Held while a child is started, which inherits this process's working directory: a reader
# that chdir()s the whole process elsewhere for a while (auditwheel, into a temporary
# directory it then removes) holds it too, so that no child of another thread starts in a
# directory about to vanish (`python -m build` then fails at os.getcwd()).
WORKING_DIRECTORY = threading.Lock()
_running: set[subprocess.Popen[bytes]] = set()
_marks: dict[subprocess.Popen[bytes], str] = {}  # the mark of each run until_exit
_stopped = threading.Event()


_ENVIRONMENT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_environment_name(text: str) -> bool:
    """Whether `text` can name a variable of a child's environment (POSIX's portable set)."""
    return _ENVIRONMENT_NAME.fullmatch(text) is not None


def tail(text: str, lines: int = 25) -> str:
    """The last `lines` non-blank lines of `text`."""
    kept = [line.rstrip() for line in text.splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


# the most characters of a program's line a message quotes (a remote's hook may print
# megabytes on one line)
EXCERPT_CHARS = 300


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """`text` cut to `limit` characters, saying how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters)"


def one_line_tail(text: str, lines: int = 3) -> str:
    """The last `lines` non-blank lines, each cut to an `excerpt`, joined with ' | ', for
    one-line messages."""
    kept = (excerpt(line.strip()) for line in tail(text, lines).splitlines())
    return " | ".join(kept) or "(no output)"


# How programs say that they do not take their command line: optparse (pip), argparse
# (build, auditwheel, twine, wheel), clap (uv), nvcc, CMake, gcc and clang.
_REJECTED = re.compile(
    r"no such option|invalid choice|unrecognized arguments|unexpected argument|"
    r"the following arguments are required|unknown option|unknown argument|"
    r"unrecognized (?:command[- ]line )?option|invalid value '[^']*' for",
    re.IGNORECASE,
)


def rejected_arguments(output: str) -> str | None:
    """The line near the end of a failed program's output that says it does not take its
    arguments (an option its version does not know), or None when it failed otherwise."""
    for line in reversed(tail(output, 10).splitlines()):
        if _REJECTED.search(line):
            return line.strip()
    return None


def too_long(what: str, result: Completed) -> str | None:
    """Why `result`'s output cannot be read whole (a listing, a table), or None: `what`
    printed more than a run keeps."""
    if not result.left_out:
        return None
    return f"{what} printed more than {OUTPUT_KEPT_BYTES // 2**20} MiB, more than is read"


def failure(what: str, result: Completed, *, detail: bool = True) -> str:
    """One line on a failed run: `what rejected its arguments: ...` when it did (the
    remedy is then a newer tool, not the network), else `what failed (exit N): tail`
    (without the tail when `detail` is False: the caller shows the log)."""
    text = result.stderr + result.output
    rejected = rejected_arguments(text)
    if rejected is not None:
        return f"{what} rejected its arguments (exit {result.returncode}): {rejected}"
    if not detail:
        return f"{what} failed"
    return f"{what} failed (exit {result.returncode}): {one_line_tail(text, 4)}"


def reproduce_command(
    cmd: Sequence[str], env: Mapping[str, str], cwd: Path | None, *, parent: Mapping[str, str]
) -> str:
    """A shell line that re-runs `cmd` with the variables that differ from `parent`'s (the
    environment the user runs it from)."""
    changed = {k: v for k, v in env.items() if parent.get(k) != v and not k.startswith("_")}
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(changed.items()))
    where = f"cd {shlex.quote(str(cwd))} && " if cwd else ""
    return mask(f"{where}{prefix} {shlex.join(cmd)}".strip(), secret_values(env))


class Runner:
    """The subprocess runner of the module doc; `run` is the one this program uses. Stages
    take a runner (`run` by default) so that a unit test can hand in a fake: a subclass
    whose `__call__` answers without starting anything."""

    def __call__(
        self,
        cmd: Sequence[str],
        *,
        env: Mapping[str, str],
        log: Path | None = None,
        cwd: Path | None = None,
        timeout: float | None = None,
        separate_stderr: bool = False,
        secrets: Iterable[str] = (),
        on_line: Callable[[str], None] | None = None,
        stop_when: Callable[[], bool] | None = None,
        until_exit: bool = False,
    ) -> Completed:
        """Run `cmd` to its end (or its timeout, or `stop_all`); see the module doc.
        `on_line` sees each line of stdout as it comes (masked), for progress displays.
        `stop_when` is asked every WATCH_SECONDS while it runs: once it says so, the child
        and everything it started is ended as `stop_all` ends them, unless it ends by
        itself within STOP_WHEN_GRACE_SECONDS. With `until_exit`, the run is over when the
        child itself exits, not when its output ends: what it left running in its group (a
        background job that holds stdout) is ended then."""
        hidden = (*secret_values(env), *secrets)
        start = time.monotonic()
        stderr_text = ""
        timed_out = False
        mark = uuid.uuid4().hex if until_exit else None
        with _lock:
            if _stopped.is_set():
                return Completed(returncode=EXIT_STOPPED, output="stopped", seconds=0.0, log=log)
            marked = {**env, MARK_VARIABLE: mark} if mark else env
            started = _start(cmd, marked, cwd, separate_stderr=separate_stderr)
            if not isinstance(started, str):
                _running.add(started)
                if mark:
                    _marks[started] = mark
        left_out = 0
        if isinstance(started, str):
            code, output = EXIT_CANNOT_RUN, started
        else:
            child = started
            finished = threading.Event()
            if stop_when is not None:
                _watch(child, stop_when, finished)
            shown = None if on_line is None else (lambda line: on_line(mask(line, hidden)))
            readers = _Reader.started(child, shown)
            try:
                _wait(child, readers, timeout, until_exit=until_exit)
                code = child.returncode
            except subprocess.TimeoutExpired:
                _end(child)
                if until_exit:
                    _end_left(child)
                code, timed_out = EXIT_TIMEOUT, True
            finally:
                finished.set()
                with _lock:
                    _running.discard(child)
                    _marks.pop(child, None)
                if mark:
                    _end_marked(mark)
            # a process that left the group may hold a pipe open: it then stays open
            grace = STOP_GRACE_SECONDS if until_exit or timed_out else None
            output, stderr_text, left_out = _Reader.collected(readers, grace)
            if timed_out:
                output += f"\n(timed out after {timeout:.0f} s)"
            if _stopped.is_set() and code != 0:
                code = EXIT_STOPPED
        seconds = time.monotonic() - start
        output = mask(output, hidden)
        stderr_text = mask(stderr_text, hidden)
        if log is not None:
            _append_log(log, mask(shlex.join(cmd), hidden), output + stderr_text, code, seconds)
        return Completed(
            returncode=code, output=output, seconds=seconds, log=log, stderr=stderr_text,
            timed_out=timed_out, left_out=left_out,
        )  # fmt: skip


run = Runner()


def _start(
    cmd: Sequence[str], env: Mapping[str, str], cwd: Path | None, *, separate_stderr: bool
) -> subprocess.Popen[bytes] | str:
    """The child running `cmd` in a session of its own, or why it cannot run."""
    try:
        with WORKING_DIRECTORY:
            return subprocess.Popen(
                list(cmd),
                env=dict(env),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE if separate_stderr else subprocess.STDOUT,
                start_new_session=True,
            )
    except OSError as error:
        return f"cannot run {cmd[0]}: {error.strerror or error}"


class _Reader:
    """A thread that reads one of a child's pipes to its end (so that no pipe fills up and
    blocks the child) and keeps what `_Kept` keeps of it; stdout's lines go to `on_line`,
    decoded as text mode decodes them."""

    def __init__(self, pipe: IO[bytes], on_line: Callable[[str], None] | None) -> None:
        self.pipe = pipe
        self.kept = _Kept()
        self.on_line = on_line
        self.thread = threading.Thread(target=_unsignalled(self._read), daemon=True)
        self.thread.start()

    @classmethod
    def started(
        cls, child: subprocess.Popen[bytes], on_line: Callable[[str], None] | None
    ) -> list[_Reader]:
        """A reader of stdout (with `on_line`), and one of stderr where it is apart."""
        pipes = [p for p in (child.stdout, child.stderr) if p is not None]
        return [cls(pipe, on_line if pipe is child.stdout else None) for pipe in pipes]

    def _read(self) -> None:
        lines = _text_decoder()
        pending = ""
        while data := os.read(self.pipe.fileno(), 65536):
            self.kept.add(data)
            if self.on_line is None:
                continue
            *complete, pending = (pending + lines.decode(data)).split("\n")
            for line in complete:
                self.on_line(line)
            while len(pending) > LINE_CHARACTERS:  # a line with no end is shown in pieces
                self.on_line(pending[:LINE_CHARACTERS])
                pending = pending[LINE_CHARACTERS:]
        if self.on_line is not None and (pending := pending + lines.decode(b"", final=True)):
            self.on_line(pending)

    @staticmethod
    def collected(readers: Sequence[_Reader], grace: float | None) -> tuple[str, str, int]:
        """stdout's text, stderr's (empty where it is not apart) and how many bytes of
        theirs were left out, once each reader reached its pipe's end (or `grace` seconds
        later); a pipe is closed once its reader is done."""
        for reader in readers:
            reader.thread.join(grace)
            if not reader.thread.is_alive():
                reader.pipe.close()
        texts = [reader.kept.text() for reader in readers]
        left_out = sum(reader.kept.left_out for reader in readers)
        return texts[0], texts[1] if len(texts) > 1 else "", left_out


class _Kept:
    """What a run keeps of one pipe: its first bytes, up to OUTPUT_KEPT_BYTES in all with
    its last OUTPUT_TAIL_BYTES (where a failing program says why); the bytes between are
    counted, not held (a program that prints a gigabyte)."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail: deque[bytes] = deque()  # the chunks read last (a chunk is never copied whole)
        self.tail_bytes = 0
        self.left_out = 0

    def add(self, data: bytes) -> None:
        room = OUTPUT_KEPT_BYTES - OUTPUT_TAIL_BYTES - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.tail.append(data)
        self.tail_bytes += len(data)
        over = self.tail_bytes - OUTPUT_TAIL_BYTES
        while over > 0:
            first = self.tail.popleft()
            if len(first) > over:
                self.tail.appendleft(first[over:])
            cut = min(len(first), over)
            over -= cut
            self.tail_bytes -= cut
            self.left_out += cut

    def text(self) -> str:
        tail_bytes = b"".join(self.tail)
        if not self.left_out:
            return _text_decoder().decode(bytes(self.head) + tail_bytes, final=True)
        head = _text_decoder().decode(bytes(self.head), final=True)
        tail = _text_decoder().decode(tail_bytes, final=True)
        return f"{head}\n[... {self.left_out} bytes of output left out ...]\n{tail}"


def _text_decoder() -> io.IncrementalNewlineDecoder:
    """UTF-8 (a byte that is not: U+FFFD) with \\r\\n and \\r read as \\n, as a text-mode
    pipe reads it."""
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    return io.IncrementalNewlineDecoder(utf8, translate=True)


def _wait(
    child: subprocess.Popen[bytes],
    readers: Sequence[_Reader],
    timeout: float | None,
    *,
    until_exit: bool,
) -> None:
    """Wait until the child has exited and its output has ended (TimeoutExpired past
    `timeout`). With `until_exit`, the run is over when the child exits: what it left
    running in its group is ended then, and so is the output."""
    deadline = None if timeout is None else time.monotonic() + timeout
    child.wait(timeout)
    if until_exit:
        _end_left(child)
        return
    for reader in readers:
        reader.thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if reader.thread.is_alive():
            raise subprocess.TimeoutExpired(child.args, timeout or 0)


def _end_left(child: subprocess.Popen[bytes]) -> None:
    """End what the exited child left running in its group: SIGTERM (a shell's background
    job ignores SIGINT), then SIGKILL where something still runs after STOP_GRACE_SECONDS."""
    _signal_group(child, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    while time.monotonic() < deadline:
        try:
            os.killpg(child.pid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.02)
    _signal_group(child, signal.SIGKILL)


def _watch(
    child: subprocess.Popen[bytes], stop_when: Callable[[], bool], finished: threading.Event
) -> None:
    """End `child` (its whole session) once `stop_when` says so, unless it finishes first
    or within STOP_WHEN_GRACE_SECONDS after."""

    def watch() -> None:
        while not finished.wait(WATCH_SECONDS):
            if stop_when():
                if not finished.wait(STOP_WHEN_GRACE_SECONDS):
                    _end(child)
                return

    threading.Thread(target=_unsignalled(watch), daemon=True).start()


def _unsignalled(target: Callable[[], None]) -> Callable[[], None]:
    """`target`, run with SIGINT and SIGTERM blocked in its thread, which starts no
    process (a child would inherit the mask): Linux then hands those signals to a thread
    that takes them, and the main thread, blocked waiting for a child, ends at once."""

    def run() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        target()

    return run


def _append_log(log: Path, command: str, output: str, code: int, seconds: float) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    if log.is_symlink():  # made by a command it logs: release writes its log, not the link's
        log.unlink()
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(f"$ {command}\n{output}\n[exit {code} after {seconds:.1f} s]\n")


def _signal_group(child: subprocess.Popen[bytes], signum: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signum)


def _end(*children: subprocess.Popen[bytes]) -> None:
    """Each child's group ended as the module doc says: SIGINT, SIGTERM, then SIGKILL."""
    for signum, grace in (
        (signal.SIGINT, INTERRUPT_GRACE_SECONDS),
        (signal.SIGTERM, STOP_GRACE_SECONDS),
    ):
        for child in children:
            _signal_group(child, signum)
        deadline = time.monotonic() + grace
        for child in children:
            with suppress(subprocess.TimeoutExpired):
                child.wait(max(0.0, deadline - time.monotonic()))
    for child in children:
        if child.poll() is None:
            _signal_group(child, signal.SIGKILL)


def stop_all() -> None:
    """End every running child and its descendants (`_end`), and what a marked child left
    outside its group; no new child starts until `reset`."""
    with _lock:
        _stopped.set()
        children = list(_running)
        marks = [_marks[c] for c in children if c in _marks]
    _end(*children)
    for mark in marks:
        _end_marked(mark)


def _end_marked(mark: str) -> None:
    """End every process whose environment holds `mark` (a run's descendants that left its
    group: they inherited it): SIGTERM, then SIGKILL after STOP_GRACE_SECONDS."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        pids = marked_processes(mark)
        for pid in pids:
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        while pids and time.monotonic() < deadline:
            time.sleep(0.02)
            pids = marked_processes(mark)
        if not pids:
            return


def marked_processes(mark: str) -> list[int]:
    """The processes whose environment holds the run's `mark`."""
    return list(processes_holding({MARK_VARIABLE: mark}))


def processes_holding(entries: Mapping[str, str]) -> dict[int, list[bytes]]:
    """Each process but this one (Linux's /proc; none elsewhere) whose environment holds
    every one of `entries` (NAME: value), with its whole environment; an exited one that is
    not yet reaped has none and is not listed."""
    wanted = [f"{name}={value}".encode() for name, value in entries.items()]
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    found = {}
    for name in names:
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                environ = handle.read().split(b"\0")
        except OSError:
            continue
        if all(entry in environ for entry in wanted):
            found[int(name)] = environ
    return found


def stopped() -> bool:
    return _stopped.is_set()


def reset() -> None:
    """Allow children again (a new command in the same process)."""
    _stopped.clear()


_received: list[int] = []


def _interrupt(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    raise KeyboardInterrupt


@contextmanager
def interruptible() -> Iterator[None]:
    """SIGTERM interrupts like SIGINT while inside: both raise KeyboardInterrupt in the
    main thread, where the command ends its children and keeps what finished (see
    `last_signal`). The previous handlers come back on the way out."""
    _received.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _interrupt) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def last_signal() -> int:
    """The signal that interrupted the command (SIGINT when none was recorded)."""
    return _received[-1] if _received else int(signal.SIGINT)


def passthrough(command: Sequence[str]) -> int:
    """Run `command` on this process's own streams (a wrapper's child, whose output is the
    caller's); its exit status, 128 + N where signal N ended it, as a shell says."""
    code = subprocess.run(list(command), check=False).returncode
    return 128 - code if code < 0 else code
