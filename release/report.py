"""Reports of `release publish` and `release verify`: terminal tables, JSON and Markdown.

Rows are built once (pure functions over the plan and the verify report) and rendered three
ways. Files are written atomically; on GitHub Actions the Markdown is appended to the job
summary. Nothing here ever sees a credential: messages were masked where they were made.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from release.console import markdown_table, step_summary_path, table
from release.fsutil import write_atomic
from release.publish.base import Action, FileDecision
from release.publish.run import PublishOutcome
from release.verify import VerifyReport, report_json

PLAN_COLUMNS = ("file", "destination", "action", "reason", "final URL")
VERIFY_COLUMNS = ("result", "check", "subject", "detail", "URL")


def plan_rows(outcome: PublishOutcome) -> list[list[str]]:
    rows = []
    for item in outcome.plans:
        for d in item.plan.decisions:
            rows.append(_row(d, item.destination.name, item.destination.kind))
    return rows


def applied_rows(outcome: PublishOutcome) -> list[list[str]]:
    return [_row(d, d.entry.destination.name, d.entry.destination.kind) for d in outcome.applied]


def _row(decision: FileDecision, name: str, kind: str) -> list[str]:
    return [
        decision.entry.filename,
        f"{name} ({kind})",
        decision.action.value,
        decision.reason,
        decision.url,
    ]


def plan_summary(outcome: PublishOutcome) -> str:
    counts: dict[str, int] = {}
    for item in outcome.plans:
        for d in item.plan.decisions:
            counts[d.action.value] = counts.get(d.action.value, 0) + 1
    parts = [f"{counts[a.value]} {a.value}" for a in Action if a.value in counts]
    return ", ".join(parts) or "nothing to publish"


def print_plan(console: Console, outcome: PublishOutcome, *, dry_run: bool) -> None:
    title = (
        f"{outcome.manifest.project} {outcome.manifest.version}: publish plan"
        f"{' (dry run: nothing will change)' if dry_run else ''}"
    )
    console.print(table(PLAN_COLUMNS, plan_rows(outcome), title))
    console.print(f"plan: {plan_summary(outcome)}")


def print_applied(console: Console, outcome: PublishOutcome) -> None:
    for note in outcome.notes:
        console.print(note)
    console.print(table(PLAN_COLUMNS, applied_rows(outcome), "published"))
    for index in outcome.indexes:
        where = index.url or "(no index URL configured)"
        console.print(
            f"index {index.label}: {len(index.files)} files, written to {index.directory}, "
            f"served at {where}"
        )
    if outcome.record is not None:
        console.print(f"record: {outcome.record}")


def publish_json(outcome: PublishOutcome, *, dry_run: bool) -> dict[str, Any]:
    def decision(d: FileDecision) -> dict[str, Any]:
        return {
            "filename": d.entry.filename,
            "destination": d.entry.destination.name,
            "kind": d.entry.destination.kind,
            "action": d.action.value,
            "reason": d.reason,
            "url": d.url,
            "sha256": d.entry.sha256,
            "size": d.entry.size,
        }

    return {
        "project": outcome.manifest.project,
        "version": outcome.manifest.version,
        "dry_run": dry_run,
        "blocked": outcome.blocked,
        "plan": [decision(d) for p in outcome.plans for d in p.plan.decisions],
        "applied": [decision(d) for d in outcome.applied],
        "indexes": [
            {"label": i.label, "url": i.url, "directory": str(i.directory), "files": len(i.files)}
            for i in outcome.indexes
        ],
    }


def publish_markdown(outcome: PublishOutcome, *, dry_run: bool) -> str:
    head = f"## Publish {outcome.manifest.project} {outcome.manifest.version}"
    if dry_run:
        head += " (dry run)"
    lines = [
        head,
        "",
        f"Plan: {plan_summary(outcome)}",
        "",
        markdown_table(PLAN_COLUMNS, plan_rows(outcome)),
    ]
    if outcome.applied:
        lines += ["### Published", "", markdown_table(PLAN_COLUMNS, applied_rows(outcome))]
    for index in outcome.indexes:
        lines.append(f"- index `{index.label}`: {len(index.files)} files at {index.url or '-'}")
    return "\n".join(lines) + "\n"


def verify_rows(report: VerifyReport) -> list[list[str]]:
    ordered = sorted(report.checks, key=lambda c: (c.ok, c.check, c.subject))
    return [
        ["ok" if c.ok else "FAILED", c.check, c.subject, c.detail, c.url or ""] for c in ordered
    ]


def print_verify(console: Console, report: VerifyReport) -> None:
    failed = len(report.failed)
    title = (
        f"{report.project} {report.version}: verify: {len(report.checks) - failed} ok, "
        f"{failed} failed"
    )
    console.print(table(VERIFY_COLUMNS, verify_rows(report), title))


def verify_markdown(report: VerifyReport) -> str:
    failed = len(report.failed)
    status = "all checks passed" if not failed else f"{failed} of {len(report.checks)} failed"
    return f"## Verify {report.project} {report.version}: {status}\n\n" + markdown_table(
        VERIFY_COLUMNS, verify_rows(report)
    )


def verify_json(report: VerifyReport) -> dict[str, Any]:
    return report_json(report)


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
