"""`--channel nightly` of `release plan`, `release publish` and `release verify`: each
command's nightly road, from its options to the stage's entry point and back to the
report. The stages are release.publish.nightly_plan, release.publish.nightly (with the
verify gate of release.verify.nightly handed in) and release.verify.nightly."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from release.commands import common
from release.console import Output, markdown_table
from release.errors import ReleaseError
from release.publish.decide import CompanionDecision, FileDecision
from release.publish.nightly import NightlyOutcome, NightlySettings, publish_nightly
from release.publish.nightly_plan import NightlyPlan, make_nightly_plan, nightly_failure
from release.records.published import Published
from release.verify.checks import VerifyReport, VerifySettings
from release.verify.nightly import verify_channel, verify_commit

PLAN_COLUMNS = ("cell", "wheel", "size", "destination", "state", "URL")
PUBLISH_COLUMNS = ("file", "action", "reason", "URL")


def install_lines(index: Mapping[str, str], project: str) -> list[str]:
    """The documented install lines for each variant's index (docs/nightly.md)."""
    lines = []
    for label, url in sorted(index.items()):
        name = label or "default"
        lines.append(f"pip ({name}): pip install --pre {project} --extra-index-url {url}")
        lines.append(
            f"uv ({name}): uv pip install --prerelease allow --index-strategy "
            f"unsafe-best-match --extra-index-url {url} {project}"
        )
    return lines


def _finals_lines(finals: Any) -> list[str]:
    if not finals.releases:
        return ["version order: no final release on the release's destinations yet"]
    return [f"latest final release on {f.destination}: {f.version.public}" for f in finals.releases]


# --- release plan --channel nightly ---


def plan_json(plan: NightlyPlan) -> dict[str, Any]:
    return {
        "project": plan.project,
        "version": plan.version,
        "channel": "nightly",
        "commit": plan.commit.sha,
        "ok": nightly_failure(plan) is None,
        "cells": [
            {
                "cell": r.cell,
                "wheel": r.wheel,
                "built": r.built,
                "size": r.size,
                "destination": plan.destination,
                "url": r.url,
                "state": r.state,
                "reason": r.reason,
            }
            for r in plan.rows
        ],
        "latest_final": [
            {"destination": f.destination, "version": f.version.public, "variant": f.variant}
            for f in plan.finals.releases
        ],
        "version_order_ok": plan.order is None,
        "problems": [plan.order.message] if plan.order else [],
        "nightly": None
        if plan.pointer is None
        else {
            "commit": plan.pointer.commit,
            "version": plan.pointer.version,
            "generation": plan.pointer.generation,
        },
        "promotes": plan.promotes,
        "keep": plan.keep,
        "keep_list": list(plan.pins),
        "prune": [
            {"commit": p.commit, "version": p.version, "action": p.action, "why": p.why}
            for p in plan.prunes
        ],
        "not_asked": [*plan.not_asked, *plan.finals.not_asked],
    }


def plan_text(plan: NightlyPlan) -> list[str]:
    pointer = plan.pointer
    now = f"{pointer.version} ({pointer.commit[:12]})" if pointer else "nothing yet"
    lines = _finals_lines(plan.finals)
    if plan.order is not None:
        lines.append(f"refused: {plan.order.message}")
    lines.append(f"/nightly/ serves {now}")
    moves = "move /nightly/ to it" if plan.promotes else "not move /nightly/ (a newer one is there)"
    lines.append(f"{plan.version} ({plan.commit.sha[:12]}) would {moves}")
    lines.append(
        f"retention: keep {plan.keep} commits"
        + (f", and {', '.join(plan.pins)} (keep-list)" if plan.pins else "")
    )
    lines += [f"the next run prunes {p.version} ({p.action}): {p.why}" for p in plan.prunes]
    if not plan.prunes:
        lines.append("the next run prunes nothing")
    lines += [f"not asked: {n}" for n in (*plan.not_asked, *plan.finals.not_asked)]
    return lines


def run_plan(
    args: argparse.Namespace, out: Output, release: Any, environ: Mapping[str, str]
) -> int:
    nightly = common.channel_matrix(release, "nightly", environ)
    plan = make_nightly_plan(
        release,
        nightly,
        dist=args.dist,
        environ=environ,
        github_api_url=args.github_api_url,
        repository_url=args.repository_url,
    )
    rows = [
        [r.cell, r.wheel, "not built" if r.size is None else f"{r.size / 2**20:.2f} MiB",
         plan.destination, r.state + (f": {r.reason}" if r.reason else ""), r.url]
        for r in plan.rows
    ]  # fmt: skip
    out.table(PLAN_COLUMNS, rows, f"{plan.project} {plan.version}: nightly plan")
    text = plan_text(plan)
    for line in text:
        out.line(line)
    markdown = (
        f"## Nightly plan: {plan.project} {plan.version}\n\n"
        + markdown_table(PLAN_COLUMNS, rows)
        + "".join(f"- {line}\n" for line in text)
    )
    common.write_report(out, plan_json(plan), markdown, args.markdown)
    error = nightly_failure(plan)
    if error is not None:
        raise error
    return 0


# --- release publish --channel nightly ---


def _decision_row(d: FileDecision) -> list[str]:
    return [d.entry.filename, d.action.value, d.reason, d.url]


def _companion_row(c: CompanionDecision) -> list[str]:
    return [c.companion.filename, c.action.value, f"{c.companion.purpose}; {c.reason}", c.url]


def publish_json(outcome: NightlyOutcome, *, dry_run: bool) -> dict[str, Any]:
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
    lines = _finals_lines(outcome.finals)
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
    lines += list(outcome.notes)
    for label in outcome.labels:
        nightly = outcome.index_url(label, nightly=True)
        pinned = outcome.index_url(label, nightly=False)
        lines.append(f"index {label or 'default'}: {nightly} (this commit alone: {pinned})")
    return lines


def run_publish(args: argparse.Namespace, out: Output, environ: Mapping[str, str]) -> int:
    matrix = common.load(args.matrix, out)
    verifying = VerifySettings(pip=False, provenance=False)

    def gate(published: Published) -> Sequence[str]:
        report = verify_commit(published, environ, verifying)
        return [f"{c.check} {c.subject}: {c.detail}" for c in report.failed]

    shown: list[NightlyOutcome] = []

    def show(outcome: NightlyOutcome) -> None:
        shown.append(outcome)
        rows = [_decision_row(d) for d in outcome.plan.decisions]
        rows += [_companion_row(c) for c in outcome.plan.companions]
        title = f"{outcome.manifest.project} {outcome.manifest.version}: nightly publish plan"
        out.table(PUBLISH_COLUMNS, rows, title + (" (dry run)" if args.dry_run else ""))

    settings = NightlySettings(
        dist=args.dist,
        dry_run=args.dry_run,
        github_api_url=args.github_api_url,
        repository_url=args.repository_url,
    )

    def report(outcome: NightlyOutcome) -> None:
        lines = _outcome_lines(outcome, dry_run=args.dry_run)
        for line in lines:
            out.line(line)
        rows = [_decision_row(d) for d in outcome.plan.decisions]
        markdown = (
            f"## Nightly {outcome.manifest.project} {outcome.manifest.version}\n\n"
            + markdown_table(PUBLISH_COLUMNS, rows)
            + "".join(f"- {line}\n" for line in lines)
        )
        common.write_report(out, publish_json(outcome, dry_run=args.dry_run), markdown,
                            args.markdown)  # fmt: skip

    try:
        outcome = publish_nightly(settings, matrix, environ, gate=gate, show_plan=show)
    except ReleaseError:
        if shown:
            out.document(publish_json(shown[-1], dry_run=args.dry_run))
        raise
    report(outcome)
    return 0


# --- release verify --channel nightly ---


def run_verify(
    args: argparse.Namespace, out: Output, environ: Mapping[str, str], settings: VerifySettings
) -> VerifyReport:
    matrix = common.load(args.matrix, out)
    return verify_channel(matrix, environ, settings)
