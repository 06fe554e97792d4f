"""Plan every destination first (read-only), print the plan, and upload nothing if any file is a
CONFLICT or refused. Then upload destination by destination and regenerate the pip index of the
GitHub-hosted variants from everything published. Credentials: TWINE_API_KEY or
TWINE_USERNAME/TWINE_PASSWORD (or trusted publishing in GitHub Actions), GITHUB_TOKEN.

`release publish`: plan every destination, stop on a conflict, upload, write the index.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from release.commands.parsing import arguments, common
from release.commands.parsing.options import asked_url, public_url
from release.console import Advance, Output, markdown_table
from release.errors import ConfigError, IncompleteError, ReleaseError, one_line

if TYPE_CHECKING:
    from release.destinations.decide import CompanionDecision, FileDecision
    from release.destinations.reach import Reach
    from release.nightly.publish import NightlyOutcome
    from release.publish.run import PublishOutcome, PublishSettings
    from release.records.published import Published

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
    return [
        _row(d, d.entry.destination.name, d.entry.destination.kind, built=False)
        for d in outcome.applied
    ]


def _row(decision: FileDecision, name: str, kind: str, *, built: bool = True) -> list[str]:
    """A decision's row; `built`: the file as built (a rebuild under its built name, whose
    reason says the name it goes as), else as published."""
    return [
        (decision.rebuilt_from if built else None) or decision.entry.filename,
        f"{name} ({kind})",
        decision.action.value,
        decision.reason,
        decision.url,
    ]


def plan_summary(outcome: PublishOutcome) -> str:
    from release.destinations.decide import Action

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
    for note in outcome.notes:  # each one line: a name a server gave stays on it
        out.line(one_line(note))
    out.table(PLAN_COLUMNS, applied_rows(outcome), "published")
    for index in outcome.indexes:
        where = index.url or "(no index URL configured)"
        commit = f" (commit {index.commit[:12]})" if index.commit else ""
        out.line(
            f"index {index.label}: {len(index.files)} files, written to {index.where}{commit}, "
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
            # only on a rebuild published under a build tag, so other documents stay as they were
            **({"rebuilt_from": d.rebuilt_from} if d.rebuilt_from else {}),
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
            {
                "label": i.label,
                "url": i.url,
                "directory": i.where,
                "files": len(i.files),
                **({"commit": i.commit} if i.commit else {}),
            }
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
    rebuilt = parser.add_mutually_exclusive_group()
    rebuilt.add_argument(
        "--build-tag",
        action="store_true",
        help="publish a wheel whose name a destination holds other bytes under as the next "
        "build of that name (NAME-1-...whl), leaving the old bytes where they are",
    )
    rebuilt.add_argument(
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
        type=asked_url,
        metavar="URL",
        help="PyPI upload URL (e.g. https://test.pypi.org/legacy/)",
    )
    arguments.add_output_dir(
        parser, "--index-dir", "where to write the index (default: <dist>/index)"
    )
    parser.add_argument(
        "--index-base-url",
        type=public_url,
        metavar="URL",
        help="where the index is served (default: the destination's index-url)",
    )
    arguments.add_github_api_url_option(
        parser, "GitHub REST API base (default: the destination's, api.github.com)"
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
    from release.publish.run import PublishSettings

    return arguments.options_from(PublishSettings, args, only=tuple(args.only))


def reach_from(args: argparse.Namespace, environ: Mapping[str, str]) -> Reach:
    """How this publish reaches its destinations: the environment's credentials, and the
    command line's URLs where given."""
    from release.destinations.reach import Reach

    return Reach(
        environ,
        command="release publish --dry-run" if args.dry_run else "release publish",
        github_api_url=args.github_api_url,
        repository_url=args.repository_url,
        index_base_url=args.index_base_url,
        read_only=args.dry_run,
    )


def run(args: argparse.Namespace, out: Output) -> int:
    from release.publish.run import publish

    environ = dict(os.environ)
    if args.channel == "nightly":
        return run_nightly(args, out, environ)
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
            outcome = publish(settings, reach_from(args, environ), show_plan=show)
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


# --- release publish --channel nightly ---

NIGHTLY_COLUMNS = ("file", "action", "reason", "URL")


def _nightly_row(d: FileDecision) -> list[str]:
    return [d.entry.filename, d.action.value, d.reason, d.url]


def _nightly_companion_row(c: CompanionDecision) -> list[str]:
    return [c.companion.filename, c.action.value, f"{c.companion.purpose}; {c.reason}", c.url]


def nightly_json(outcome: NightlyOutcome, *, dry_run: bool) -> dict[str, Any]:
    preview = outcome.preview
    pointer = preview.state.nightly if outcome.promoted is None else outcome.pointer
    pruned = preview.fallen if outcome.promoted is None else outcome.pruned
    return {
        "project": outcome.manifest.project,
        "version": outcome.manifest.version,
        "channel": "nightly",
        "commit": outcome.commit.sha,
        "dry_run": dry_run,
        "blocked": outcome.plan.blocked,
        "plan": [
            {"filename": d.entry.filename, "action": d.action.value, "reason": d.reason,
             "url": d.url, "sha256": d.entry.sha256, "size": d.entry.size}
            for d in outcome.plan.decisions
        ],
        "companions": [
            {"filename": c.companion.filename, "of": c.companion.of, "action": c.action.value,
             "url": c.url, "sha256": c.companion.sha256, "size": c.companion.size}
            for c in outcome.plan.companions
        ],
        "promotes": preview.promoted,
        "promoted": outcome.promoted,
        "nightly": None if pointer is None else {
            "commit": pointer.commit, "version": pointer.version,
        },
        "prune": [{"commit": p.commit, "action": p.action} for p in pruned],
        "indexes": [
            {"label": label, "url": outcome.index_url(label, nightly=True),
             "commit_url": outcome.index_url(label, nightly=False)}
            for label in outcome.labels
        ],
    }  # fmt: skip


def _outcome_lines(outcome: NightlyOutcome, *, dry_run: bool) -> list[str]:
    from release.nightly.finals import finals_lines

    lines = finals_lines(outcome.finals)
    version = outcome.manifest.version
    if dry_run:
        moves = outcome.preview.promoted
        reason = "" if moves else " (a newer commit is there)"
        verb = "would move" if moves else "would not move"
        lines.append(f"{verb} /nightly/ to {version}{reason}")
    elif outcome.promoted:
        lines.append(f"/nightly/ serves {version} (the channel's state points at it)")
    else:
        there = outcome.pointer.version if outcome.pointer else "nothing"
        lines.append(f"/nightly/ stays on {there}, a newer commit than {version}")
    verb = "would prune" if dry_run else "pruned"
    fallen = outcome.preview.fallen if outcome.promoted is None else outcome.pruned
    shapes = outcome.preview.state.shapes
    for pruned in fallen:
        shape = shapes.get(pruned.shape)
        version = shape.version(pruned.time) if shape else "?"
        lines.append(f"{verb} {version} ({pruned.commit[:12]}, {pruned.action})")
    lines += [one_line(note) for note in outcome.notes]
    for label in outcome.labels:
        nightly = outcome.index_url(label, nightly=True)
        pinned = outcome.index_url(label, nightly=False)
        lines.append(f"index {label or 'default'}: {nightly} (this commit alone: {pinned})")
    return lines


def run_nightly(args: argparse.Namespace, out: Output, environ: Mapping[str, str]) -> int:
    """`release publish --channel nightly` (boto3 is imported for the nightly channel only)."""
    from release.destinations.reach import Reach
    from release.nightly.publish import NightlySettings, publish_nightly
    from release.nightly.verify import verify_commit
    from release.verify.checks import VerifySettings

    if args.build_tag:
        raise ConfigError(
            ["--build-tag: a nightly's version is new with every commit and takes no build tag"],
            hint="drop --build-tag with --channel nightly",
        )
    matrix = common.load(args.matrix, out)
    verifying = VerifySettings(pip=False, provenance=False)
    reach = Reach(
        environ,
        command="release publish --channel nightly",
        github_api_url=args.github_api_url,
        repository_url=args.repository_url,
        read_only=args.dry_run,
    )

    def gate(published: Published) -> Sequence[str]:
        report = verify_commit(published, reach, verifying)
        return [f"{c.check} {c.subject}: {c.detail}" for c in report.failed]

    shown: list[NightlyOutcome] = []

    def show(outcome: NightlyOutcome) -> None:
        shown.append(outcome)
        rows = [_nightly_row(d) for d in outcome.plan.decisions]
        rows += [_nightly_companion_row(c) for c in outcome.plan.companions]
        title = f"{outcome.manifest.project} {outcome.manifest.version}: nightly publish plan"
        out.table(NIGHTLY_COLUMNS, rows, title + (" (dry run)" if args.dry_run else ""))

    settings = NightlySettings(dist=args.dist, dry_run=args.dry_run)

    def report(outcome: NightlyOutcome) -> None:
        lines = _outcome_lines(outcome, dry_run=args.dry_run)
        for line in lines:
            out.line(line)
        rows = [_nightly_row(d) for d in outcome.plan.decisions]
        markdown = (
            f"## Nightly {outcome.manifest.project} {outcome.manifest.version}\n\n"
            + markdown_table(NIGHTLY_COLUMNS, rows)
            + "".join(f"- {line}\n" for line in lines)
        )
        common.write_report(out, nightly_json(outcome, dry_run=args.dry_run), markdown,
                            args.markdown)  # fmt: skip

    try:
        outcome = publish_nightly(settings, matrix, reach, gate=gate, show_plan=show)
    except ReleaseError:
        if shown:
            out.document(nightly_json(shown[-1], dry_run=args.dry_run))
        raise
    report(outcome)
    return 0
