"""Terminal output: rich tables that stay readable when piped, and CI-aware extras."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table

from release.fsutil import write_atomic


def make_console(stream: TextIO | None = None) -> Console:
    """A console that never truncates wheel filenames: wide when not a terminal."""
    stream = stream or sys.stdout
    interactive = stream.isatty()
    return Console(
        file=stream,
        width=None if interactive else 240,
        no_color=not interactive or "NO_COLOR" in os.environ,
        highlight=False,
        soft_wrap=False,
    )


def table(columns: Sequence[str], rows: Sequence[Sequence[str]], title: str | None = None) -> Table:
    out = Table(title=title, show_lines=False, title_justify="left")
    for column in columns:
        out.add_column(column, overflow="fold")
    for row in rows:
        out.add_row(*row)
    return out


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = [
        "| " + " | ".join(cell(c) for c in columns) + " |",
        "| " + " | ".join("---" for _ in columns) + " |",
    ]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def step_summary_path(environ: Mapping[str, str]) -> str | None:
    """Where GitHub Actions collects the job summary, when running there."""
    return environ.get("GITHUB_STEP_SUMMARY") or None


def write_reports(
    *,
    data: Mapping[str, Any],
    markdown: str,
    json_path: Path | None,
    markdown_path: Path | None,
    environ: Mapping[str, str],
) -> None:
    if json_path is not None:
        write_atomic(json_path, (json.dumps(data, indent=2) + "\n").encode())
    if markdown_path is not None:
        write_atomic(markdown_path, markdown.encode())
    summary = step_summary_path(environ)
    if summary is not None:
        with Path(summary).open("a", encoding="utf-8") as handle:
            handle.write(markdown + "\n")


def error_annotations(messages: Sequence[str], environ: Mapping[str, str]) -> list[str]:
    """`::error::` lines for GitHub Actions (empty elsewhere)."""
    if environ.get("GITHUB_ACTIONS") != "true":
        return []
    return [f"::error::{m.replace('%', '%25').replace(chr(10), '%0A')}" for m in messages]
