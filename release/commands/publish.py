"""Plan every destination first (read-only), print the plan, and upload nothing if any file is a
CONFLICT or refused. Then upload destination by destination and regenerate the pip index of the
GitHub-hosted variants from everything published. Credentials: TWINE_API_KEY or
TWINE_USERNAME/TWINE_PASSWORD (or trusted publishing in GitHub Actions), GITHUB_TOKEN.

`release publish`: plan every destination, stop on a conflict, upload, write the index.
"""

from __future__ import annotations

import argparse
import os
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

from release.commands import arguments, common
from release.console import Advance, Output, markdown_table
from release.errors import IncompleteError, ReleaseError
from release.publish.decide import Action, CompanionDecision, FileDecision
from release.publish.run import PublishOutcome, PublishSettings, publish

PLAN_COLUMNS = ("file", "destination", "action", "reason", "final URL")


def plan_rows(outcome: PublishOutcome) -> list[list[str]]:
    rows = []
    for item in outcome.plans:
        for d in item.plan.decisions:
            rows.append(_row(d, item.destination.name, item.destination.kind))
        for c in item.plan.companions:
            rows.append(_companion_row(c, item.destination.name, item.destination.kind))
    return rows


def _companion_row(decision: CompanionDecision, name: str, kind: str) -> list[str]:
    companion = decision.companion
    return [
        companion.filename,
        f"{name} ({kind})",
        decision.action.value,
        f"{companion.purpose}; {decision.reason}",
        decision.url,
    ]


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


def print_plan(out: Output, outcome: PublishOutcome, *, dry_run: bool) -> None:
    title = (
        f"{outcome.manifest.project} {outcome.manifest.version}: publish plan"
        f"{' (dry run: nothing will change)' if dry_run else ''}"
    )
    out.table(PLAN_COLUMNS, plan_rows(outcome), title)
    out.line(f"plan: {plan_summary(outcome)}")
    for line in outcome.over_budget:
        out.line(f"refused: {line}")
    for line in outcome.unasked:
        out.line(f"not asked: {line}")


def print_applied(out: Output, outcome: PublishOutcome) -> None:
    for note in outcome.notes:
        out.line(note)
    out.table(PLAN_COLUMNS, applied_rows(outcome), "published")
    for index in outcome.indexes:
        where = index.url or "(no index URL configured)"
        out.line(
            f"index {index.label}: {len(index.files)} files, written to {index.directory}, "
            f"served at {where}"
        )
    if outcome.record is not None:
        out.line(f"record: {outcome.record}")


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

    def companion(c: CompanionDecision) -> dict[str, Any]:
        return {
            "filename": c.companion.filename,
            "of": c.companion.of,
            "purpose": c.companion.purpose,
            "action": c.action.value,
            "reason": c.reason,
            "url": c.url,
            "sha256": c.companion.sha256,
            "size": c.companion.size,
        }

    return {
        "project": outcome.manifest.project,
        "version": outcome.manifest.version,
        "dry_run": dry_run,
        "blocked": outcome.blocked,
        "over_project_limit": list(outcome.over_budget),
        "not_asked": list(outcome.unasked),
        "plan": [decision(d) for p in outcome.plans for d in p.plan.decisions],
        "companions": [companion(c) for p in outcome.plans for c in p.plan.companions],
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
    lines += [f"- **refused**: {line}" for line in outcome.over_budget]
    if outcome.applied:
        lines += ["### Published", "", markdown_table(PLAN_COLUMNS, applied_rows(outcome))]
    for index in outcome.indexes:
        lines.append(f"- index `{index.label}`: {len(index.files)} files at {index.url or '-'}")
    return "\n".join(lines) + "\n"


HELP = "upload the built wheels to PyPI and GitHub Releases, and write the index"
SHARED: tuple[arguments.Shared, ...] = ("matrix", "output")


def add_options(parser: argparse.ArgumentParser) -> None:
    arguments.add_dist_option(
        parser,
        "directory with manifest.json and the wheels, where published.json is written "
        "(default: dist)",
        written=True,
    )
    arguments.add_channel_option(
        parser,
        "a `release build --channel nightly` dist to matrix.yaml's nightly destination: "
        "/<commit>/, then /nightly/ once verified (keys: AWS_ACCESS_KEY_ID, "
        "AWS_SECRET_ACCESS_KEY)",
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
    arguments.add_output_dir(
        parser, "--index-dir", "where to write the index (default: <dist>/index)"
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
    arguments.add_markdown_option(parser, "write it as Markdown")


def settings_from(args: argparse.Namespace) -> PublishSettings:
    return PublishSettings(
        dist=args.dist,
        dry_run=args.dry_run,
        replace=args.replace,
        command="release publish --dry-run" if args.dry_run else "release publish",
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
    out = common.output_for(args, "publish")
    environ = dict(os.environ)
    if args.channel == "nightly":
        from release.commands import channel  # noqa: PLC0415  # boto3: nightly only

        return channel.run_publish(args, out, environ)
    shown: list[PublishOutcome] = []
    progress = ExitStack()
    advance: list[Advance] = []
    sent = [0, 0]  # bytes sent, bytes to send

    def show(outcome: PublishOutcome) -> None:
        shown.append(outcome)
        print_plan(out, outcome, dry_run=settings.dry_run)
        if not settings.dry_run and not outcome.blocked and outcome.upload_bytes:
            sent[1] = outcome.upload_bytes
            advance.append(
                progress.enter_context(out.progress("uploads", total=sent[1], unit="bytes"))
            )

    def uploaded(name: str, size: int) -> None:
        sent[0] += size
        if advance:
            advance[0](sent[0], sent[1], name)

    settings = replace(settings_from(args), on_upload=uploaded)

    def report(outcome: PublishOutcome) -> None:
        common.write_report(
            out,
            publish_json(outcome, dry_run=settings.dry_run),
            publish_markdown(outcome, dry_run=settings.dry_run),
            args.markdown,
        )

    try:
        with progress:
            outcome = publish(settings, environ, show_plan=show)
    except ReleaseError:
        if shown:
            report(shown[-1])
        raise
    if not settings.dry_run:
        print_applied(out, outcome)
    report(outcome)
    if outcome.unasked:
        raise IncompleteError(
            f"{len(outcome.unasked)} destination(s) not asked: " + "; ".join(outcome.unasked),
            hint="everything known locally is shown above; set the credentials or reach the "
            "destination to see what it holds",
        )
    return 0
