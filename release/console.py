"""Where every command's output goes, from one place: the terminal, GitHub Actions, machines.

- Human output (tables, lines) goes to stdout, or to stderr when the command writes its
  JSON document to stdout (`--json`). Tables fit the width: COLUMNS when set, the
  terminal's, else 100; under 100 columns each row is stacked as `column: value` lines,
  wrapped to the width. NO_COLOR turns colour off, FORCE_COLOR on (even when piped).
- In GitHub Actions (`GITHUB_ACTIONS=true`): `::error` / `::warning` annotations with
  `file`, `line`, `col` and `title` where known, escaped per the workflow-command rules;
  `::group::` folds around long logs; `::add-mask::` for every secret at start; a Markdown
  step summary appended to `$GITHUB_STEP_SUMMARY`.
- One JSON document per command (`--json` to stdout, `--json-file PATH`), each with its
  `schema` version and `command`, written atomically when the command ends (`finish`), and
  on every failure too: `"ok": false` and the `error` (message, hint, exit code).
- Nothing it shows or writes carries a secret: every line, table cell, annotation, step
  summary and document string is masked (release.credentials.mask: the environment's
  secret values, and the credentials of every URL), whatever the caller passed.
- Progress of long work: a rich progress display on a terminal, plain periodic lines in
  CI and when piped.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from release.credentials import add_mask_lines, mask, secret_values
from release.fsutil import LONE_SURROGATE, json_text, write_atomic

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.progress import Progress, TaskID

# rich is imported where a table, a line or a progress bar is drawn: a command that only
# writes its --json document, and `release --version`, never load it.

DOCUMENT_SCHEMA = 1
STACK_BELOW = 100  # columns: narrower than this, table rows are stacked
PIPED_WIDTH = 100
PLAIN_PROGRESS_SECONDS = 10.0  # one plain progress line per this many seconds at most


def width_of(stream: TextIO, environ: Mapping[str, str]) -> int | None:
    """COLUMNS when it is a number, else the terminal's (None: rich asks), else 100."""
    text = environ.get("COLUMNS", "")
    if text.isdigit() and int(text) > 0:
        return int(text)
    return None if stream.isatty() else PIPED_WIDTH


def make_console(stream: TextIO | None = None, environ: Mapping[str, str] | None = None) -> Console:
    from rich.console import Console

    stream = stream or sys.stdout
    env = environ or {}
    force = bool(env.get("FORCE_COLOR"))
    return Console(
        file=stream,
        width=width_of(stream, env),
        no_color="NO_COLOR" in env or not (stream.isatty() or force),
        force_terminal=True if force else None,
        highlight=False,
        soft_wrap=False,
    )


def table(
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    title: str | None = None,
    *,
    width: int | None = None,
) -> RenderableType:
    """Rows as a table, or stacked (`column: value`, one row after the other) when the
    width is under STACK_BELOW columns or the table would not fit in it (so that no value
    is cut or folded across lines where a wide terminal shows it whole)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    if width is not None and (width < STACK_BELOW or natural_width(columns, rows) > width):
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(overflow="fold")
        for index, row in enumerate(rows):
            if index:
                grid.add_row("", "")
            for column, value in zip(columns, row, strict=False):
                grid.add_row(f"{column}:", value)
        return Group(Text(title or "", overflow="fold"), grid) if title else grid
    out = Table(title=title, show_lines=False, title_justify="left")
    for column in columns:
        out.add_column(column, overflow="fold")
    for row in rows:
        out.add_row(*row)
    return out


def natural_width(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> int:
    """The columns a table needs to show every value on one line (rich's default box:
    one space either side of each value and a rule between columns)."""
    widest = [len(column) for column in columns]
    for row in rows:
        for index, value in enumerate(row[: len(columns)]):
            longest = max((len(line) for line in value.splitlines()), default=0)
            widest[index] = max(widest[index], longest)
    return sum(w + 3 for w in widest) + 1


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = [
        "| " + " | ".join(cell(c) for c in columns) + " |",
        "| " + " | ".join("---" for _ in columns) + " |",
    ]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# --- GitHub Actions workflow commands. ---


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # but line feed and tab


def _escaped(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


@dataclass(frozen=True, kw_only=True)
class Failure:
    """How a command ended when it failed: what its --json document says in `error`."""

    message: str
    hint: str | None
    exit_code: int

    def as_json(self) -> dict[str, Any]:
        return {"message": self.message, "hint": self.hint, "exit_code": self.exit_code}


def masked_json(value: Any, secrets: Sequence[str]) -> Any:
    """`value` (JSON data) with every string masked and made text: a lone surrogate (a
    path's byte that is not UTF-8, `\\udcff`) written as its escape, as errors show it,
    so that every document is JSON a strict reader takes."""
    if isinstance(value, str):
        return _text(mask(value, secrets))
    if isinstance(value, Mapping):
        return {_text(mask(str(k), secrets)): masked_json(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [masked_json(v, secrets) for v in value]
    return value


def _text(text: str) -> str:
    if not LONE_SURROGATE.search(text):
        return text
    return LONE_SURROGATE.sub(lambda found: ascii(found.group())[1:-1], text)


@dataclass(frozen=True, kw_only=True)
class Annotation:
    """One `::error` / `::warning`: where (as far as known) and what."""

    message: str
    level: str = "error"
    file: str | None = None
    line: int | None = None
    col: int | None = None
    title: str | None = None

    def command(self) -> str:
        fields = [
            (key, value)
            for key, value in (
                ("file", self.file),
                ("line", self.line),
                ("col", self.col),
                ("title", self.title),
            )
            if value is not None
        ]
        props = ",".join(f"{key}={escape_property(str(value))}" for key, value in fields)
        return f"::{self.level}{' ' + props if props else ''}::{escape_data(self.message)}"


class Output:
    """A command's output: see the module doc."""

    def __init__(
        self,
        environ: Mapping[str, str],
        *,
        json_mode: bool = False,
        json_file: Path | None = None,
        command: str = "",
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
    ) -> None:
        self.environ = environ
        self.actions = environ.get("GITHUB_ACTIONS") == "true"
        self.json_mode = json_mode
        self.json_file = json_file
        self.command = command
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr
        self.secrets = secret_values(environ)
        self._document: dict[str, Any] | None = None

    def safe(self, text: str) -> str:
        """`text` as it may be shown: secrets and the credentials of URLs masked."""
        return mask(text, self.secrets)

    def shown(self, text: str) -> str:
        """`safe(text)` for a terminal: a control character (an escape sequence, a carriage
        return, a bell) that a served file's name or a page's text brought is written as
        its escape, so that it can neither recolour nor rewrite what the terminal shows."""
        return _CONTROL.sub(_escaped, self.safe(text))

    @cached_property
    def err(self) -> Console:
        return make_console(self.stderr, self.environ)

    @cached_property
    def out(self) -> Console:
        """Where the report goes: stdout, or stderr with --json."""
        return self.err if self.json_mode else make_console(self.stdout, self.environ)

    # - human output -

    def table(self, columns: Sequence[str], rows: Sequence[Sequence[str]], title: str) -> None:
        # masked before rich folds a long value across lines, where a mask could not see it
        rows = [[self.shown(value) for value in row] for row in rows]
        with self.out.capture() as captured:
            self.out.print(table(columns, rows, self.safe(title), width=self.out.width))
        # rich pads each line to the table's width: drop the padding, keep the layout
        lines = [line.rstrip() for line in captured.get().splitlines()]
        self.out.file.write("\n".join(lines) + "\n")
        self.out.file.flush()

    def line(self, text: str) -> None:
        """A line of the report (stdout, or stderr under --json)."""
        self.out.print(self.shown(text), soft_wrap=True, markup=False)

    def note(self, text: str) -> None:
        """A line about the work in progress: always stderr."""
        print(self.shown(text), file=self.stderr, flush=True)

    # - GitHub Actions -

    def annotate(self, annotation: Annotation) -> None:
        if self.actions:
            print(self.safe(annotation.command()), file=self.stderr, flush=True)

    def warning(self, text: str, **where: Any) -> None:
        self.note(f"warning: {text}")
        self.annotate(Annotation(message=text, level="warning", **where))

    def mask_secrets(self) -> None:
        for line in add_mask_lines(self.environ):
            print(line, file=self.stderr, flush=True)

    @contextmanager
    def group(self, title: str) -> Iterator[None]:
        """A fold in the Actions log; a plain heading elsewhere."""
        if self.actions:
            print(f"::group::{escape_data(title)}", file=self.stderr, flush=True)
        else:
            self.note(f"--- {title} ---")
        try:
            yield
        finally:
            if self.actions:
                print("::endgroup::", file=self.stderr, flush=True)

    def summary(self, markdown: str) -> None:
        path = self.environ.get("GITHUB_STEP_SUMMARY")
        if path:
            with Path(path).open("a", encoding="utf-8") as handle:
                handle.write(self.safe(markdown) + "\n")

    def write_file(self, path: Path, text: str) -> None:
        """A report file the user asked for (`--markdown`), masked, written atomically."""
        write_atomic(path, self.safe(text).encode())

    # - the machine document -

    def document(self, data: Mapping[str, Any]) -> None:
        """The command's JSON document, written by `finish` (to stdout with --json, to
        --json-file): one per command, so a second is a bug."""
        if self._document is not None:
            raise RuntimeError(f"release {self.command} made a second JSON document")
        self._document = {"schema": DOCUMENT_SCHEMA, "command": self.command, **data}

    @property
    def documented(self) -> bool:
        return self._document is not None

    def finish(self, failure: Failure | None) -> None:
        """Write the command's one document: as it made it, or with `"ok": false` and the
        `error` of `failure` in it (the whole document, where it failed before making one).
        A command that ends well without a document (`matrix --format github`) writes none.
        An OSError of --json-file comes back to the caller, having written nothing."""
        if not self.json_mode and self.json_file is None:
            return
        full = dict(self._document or {"schema": DOCUMENT_SCHEMA, "command": self.command})
        if failure is not None:
            full |= {"ok": False, "error": failure.as_json()}
        elif self._document is None:
            return
        text = json_text(masked_json(full, self.secrets))
        if self.json_file is not None:
            write_atomic(self.json_file, text.encode())
        if self.json_mode:
            self.stdout.write(text)
            self.stdout.flush()

    # - progress -

    @contextmanager
    def progress(self, what: str, *, total: float | None, unit: str = "") -> Iterator[Advance]:
        """`advance(done, total, label)` reports progress of one piece of work."""
        if self.stderr.isatty() and not self.actions:
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            count = TextColumn("{task.completed:.0f}/{task.total:.0f}")
            columns: list[Any] = [TextColumn("{task.description}"), BarColumn()]
            columns += [DownloadColumn() if unit == "bytes" else count, TimeRemainingColumn()]
            with Progress(*columns, console=self.err, transient=False) as bar:
                task = bar.add_task(what, total=total)
                yield _RichAdvance(bar, task)
            return
        yield _PlainAdvance(self, what, unit)


class Advance:
    def __call__(self, done: float, total: float | None = None, label: str | None = None) -> None:
        raise NotImplementedError


class _RichAdvance(Advance):
    def __init__(self, bar: Progress, task: TaskID) -> None:
        self.bar = bar
        self.task = task

    def __call__(self, done: float, total: float | None = None, label: str | None = None) -> None:
        self.bar.update(self.task, completed=done, total=total, description=label or None)


class _PlainAdvance(Advance):
    """A line now and then (and at the end of each piece), for logs that keep every line."""

    def __init__(self, output: Output, what: str, unit: str) -> None:
        self.output = output
        self.what = what
        self.unit = unit
        self.last = 0.0

    def __call__(self, done: float, total: float | None = None, label: str | None = None) -> None:
        now = time.monotonic()
        finished = total is not None and done >= total
        if not finished and now - self.last < PLAIN_PROGRESS_SECONDS:
            return
        self.last = now
        shown = _amount(done, self.unit)
        of = f" of {_amount(total, self.unit)}" if total else ""
        self.output.note(f"{self.what}: {label + ': ' if label else ''}{shown}{of}")


def _amount(value: float, unit: str) -> str:
    if unit == "bytes":
        return f"{value / 2**20:.1f} MiB"
    return f"{value:.0f}"
