"""`release publish`: plan every destination, stop on a conflict, upload, write the index."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from release.console import error_annotations, make_console, markdown_table, table, write_reports
from release.errors import ReleaseError
from release.publish.decide import Action, FileDecision
from release.publish.run import PublishOutcome, PublishSettings, publish

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


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "publish",
        help="upload the built wheels to PyPI and GitHub Releases, and write the index",
        description=(
            "Plan every destination first (read-only), print the plan, and upload nothing if "
            "any file is a CONFLICT or refused. Then upload destination by destination and "
            "regenerate the pip index of the GitHub-hosted variants from everything "
            "published. Credentials: TWINE_API_KEY or TWINE_USERNAME/TWINE_PASSWORD (or "
            "trusted publishing in GitHub Actions), GITHUB_TOKEN."
        ),
    )
    parser.add_argument(
        "--dist",
        type=Path,
        default=Path("dist"),
        metavar="DIR",
        help="directory with manifest.json and the wheels (default: dist)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan with final URLs; read-only requests only",
    )
    parser.add_argument(
        "--replace",
        action="store_true",
        help="replace GitHub assets that hold other bytes (never on PyPI)",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="pypi|github|NAME",
        help="publish only to this destination kind or name (repeatable)",
    )
    parser.add_argument(
        "--repository-url",
        metavar="URL",
        help="PyPI upload URL (e.g. https://test.pypi.org/legacy/)",
    )
    parser.add_argument(
        "--index-dir",
        type=Path,
        metavar="DIR",
        help="where to write the index (default: <dist>/index)",
    )
    parser.add_argument(
        "--index-base-url",
        metavar="URL",
        help="where the index is served (default: the destination's index-url)",
    )
    parser.add_argument(
        "--github-api-url",
        metavar="URL",
        help="GitHub REST API base (default: the destination's, api.github.com)",
    )
    parser.add_argument(
        "--pages-branch",
        metavar="BRANCH",
        help="also commit the index as the whole content of this git branch",
    )
    parser.add_argument(
        "--pages-repo",
        type=Path,
        metavar="PATH",
        help="the git repository for --pages-branch (default: .)",
    )
    parser.add_argument(
        "--pages-remote", metavar="REMOTE", help="push --pages-branch to this remote"
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the plan/result as JSON")
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="write it as Markdown")
    parser.set_defaults(func=run)  # fmt: skip


def settings_from(args: argparse.Namespace) -> PublishSettings:
    return PublishSettings(
        dist=args.dist,
        dry_run=args.dry_run,
        replace=args.replace,
        only=tuple(args.only),
        repository_url=args.repository_url,
        index_dir=args.index_dir,
        index_base_url=args.index_base_url,
        github_api_url=args.github_api_url,
        pages_repo=args.pages_repo,
        pages_branch=args.pages_branch,
        pages_remote=args.pages_remote,
    )


def run(args: argparse.Namespace) -> int:
    console = make_console()
    environ = dict(os.environ)
    settings = settings_from(args)
    shown: list[PublishOutcome] = []

    def show(outcome: PublishOutcome) -> None:
        shown.append(outcome)
        print_plan(console, outcome, dry_run=settings.dry_run)

    def report(outcome: PublishOutcome) -> None:
        write_reports(
            data=publish_json(outcome, dry_run=settings.dry_run),
            markdown=publish_markdown(outcome, dry_run=settings.dry_run),
            json_path=args.json,
            markdown_path=args.markdown,
            environ=environ,
        )

    try:
        outcome = publish(settings, environ, show_plan=show)
    except ReleaseError as error:
        if shown:
            report(shown[-1])
        for line in error_annotations([error.message], environ):
            print(line, file=sys.stderr)
        raise
    if not settings.dry_run:
        print_applied(console, outcome)
    report(outcome)
    return 0
