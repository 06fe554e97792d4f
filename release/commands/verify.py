"""Fetch every URL in <dist>/published.json (redirects followed, no Authorization header past a
change of host) and compare status, size and sha256 with the manifest; check PyPI and each index
list the files with the same sha256; check `pip install --dry-run` picks the expected wheel for
every cell.

`release verify`: every published URL resolves to the bytes in the manifest.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from release.commands.parsing import arguments, common
from release.commands.parsing.options import (
    Seconds,
    WholeNumber,
    asked_url,
    github_repository,
)
from release.console import Annotation, Output, markdown_table
from release.defaults import RELEASE_WORKFLOW, VERIFY_CONCURRENCY
from release.errors import VerifyError, one_line
from release.github_names import api_url_problem, repository_problem
from release.inspection.findings import RULES

if TYPE_CHECKING:
    from release.verify.checks import VerifyReport

CONCURRENCY = WholeNumber(1, 64)
ATTEMPTS = WholeNumber(1, 100)
TIMEOUT = Seconds(most=86400.0)  # a day: past that, a propagation delay is an outage
LATEST = WholeNumber(1, 1000)
REPOSITORY = "a GitHub repository's OWNER/REPO"
API_URL = "a GitHub API base URL"
VERIFY_COLUMNS = ("result", "check", "subject", "detail", "URL")
PROVENANCE_HINT = (
    "attest each file in the release workflow (actions/attest-build-provenance; PyPI trusted "
    "publishing), or name that workflow with --provenance-workflow (and a reusable workflow "
    "that signs for it with --provenance-signer-workflow)"
)

# the rules a wheel as served breaks (release.verify.served): publishing again cannot fix them
INSPECTION_RULES = frozenset(r.id for r in RULES if r.scope == "wheel") - {"download"}
INSPECTION_HINT = (
    "the wheel as served breaks that rule (docs/verify.md#the-rules); the bytes under a "
    "published filename cannot change: fix the build and release the fix"
)


def signer_workflow(text: str) -> str:
    """argparse type: a workflow in another repository, `[github.com/]OWNER/REPO/PATH[@REF]`."""
    given = text.removeprefix("https://").removeprefix("github.com/")
    workflow, _, ref = given.partition("@")
    parts = workflow.split("/", 2)
    if len(parts) < 3 or not all(parts) or (not ref and given.endswith("@")):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not OWNER/REPO/PATH[@REF] (e.g. "
            "k3-org/release-tools/.github/workflows/release.yml)"
        )
    return given


def verify_rows(report: VerifyReport) -> list[list[str]]:
    ordered = sorted(report.checks, key=lambda c: (c.ok, c.check, c.subject))
    return [
        ["ok" if c.ok else "FAILED", c.check, c.subject, c.detail, c.url or ""] for c in ordered
    ]


def print_verify(out: Output, report: VerifyReport) -> None:
    failed = len(report.failed)
    title = (
        f"{report.project} {report.version}: verify: {len(report.checks) - failed} ok, "
        f"{failed} failed"
    )
    out.table(VERIFY_COLUMNS, verify_rows(report), title)


def verify_markdown(report: VerifyReport) -> str:
    failed = len(report.failed)
    status = "all checks passed" if not failed else f"{failed} of {len(report.checks)} failed"
    return f"## Verify {report.project} {report.version}: {status}\n\n" + markdown_table(
        VERIFY_COLUMNS, verify_rows(report)
    )


def verify_json(report: VerifyReport) -> dict[str, Any]:
    from release.verify.checks import report_json

    return report_json(report)


HELP = "check every published file, index link and pip resolution against the manifest"
SHARED: tuple[arguments.Shared, ...] = ("matrix", "output")


def add_provenance_options(parser: argparse.ArgumentParser) -> None:
    """Which provenance is checked, and whose signature it must carry."""
    parser.add_argument("--no-provenance", action="store_true", help="skip the provenance checks")
    parser.add_argument(
        "--require-provenance",
        action="store_true",
        help="fail for a published file with no attestation (default: only where the publish "
        "record or release-manifest.json says the release was attested)",
    )
    parser.add_argument(
        "--provenance-workflow",
        default=RELEASE_WORKFLOW,
        metavar="PATH",
        help="the workflow whose run must have signed each attestation, in the GitHub "
        f"destination's repository, at the release's tag (default {RELEASE_WORKFLOW})",
    )
    parser.add_argument(
        "--provenance-signer-workflow",
        type=signer_workflow,
        metavar="OWNER/REPO/PATH[@REF]",
        help="the reusable workflow that run calls to sign, as `gh attestation verify "
        "--signer-workflow` names it (default: the workflow signs itself)",
    )
    parser.add_argument(
        "--provenance-repository",
        type=github_repository,
        metavar="OWNER/REPO",
        help="the repository whose workflow signed, where the matrix names no GitHub "
        "destination (default: $GITHUB_REPOSITORY, the repository a workflow runs in)",
    )


def add_options(parser: argparse.ArgumentParser) -> None:
    arguments.add_dist_option(
        parser,
        "directory with manifest.json and published.json (default: dist)",
    )
    arguments.add_index_url_overrides(
        parser, "check pip against this index for a destination or local label"
    )
    parser.add_argument(
        "--concurrency",
        type=CONCURRENCY,
        default=VERIFY_CONCURRENCY,
        metavar="N",
        help=f"parallel requests ({CONCURRENCY.accepted}; default {VERIFY_CONCURRENCY})",
    )
    parser.add_argument(
        "--attempts",
        type=ATTEMPTS,
        default=5,
        metavar="N",
        help=f"tries per URL, for propagation delay ({ATTEMPTS.accepted}; default 5)",
    )
    parser.add_argument(
        "--timeout",
        type=TIMEOUT,
        default=300.0,
        metavar="SECONDS",
        help=f"bound on the whole verification's retries ({TIMEOUT.accepted}; default 300)",
    )
    parser.add_argument("--no-pip", action="store_true", help="skip the pip resolution checks")
    add_provenance_options(parser)
    parser.add_argument(
        "--tag",
        action="append",
        default=[],
        metavar="TAG",
        help="verify the release of TAG as its destinations hold it, with no dist/ "
        "(read from the GitHub release, its release-manifest.json and the indexes)",
    )
    parser.add_argument(
        "--latest",
        type=LATEST,
        metavar="N",
        help=f"verify the newest N published releases ({LATEST.accepted}; the scheduled URL watch)",
    )
    arguments.add_github_api_url_option(parser, "GitHub REST API base, as for `release publish`")
    parser.add_argument(
        "--index-base-url",
        type=asked_url,
        metavar="URL",
        help="where the index of the GitHub-hosted variants is served (default: the matrix's)",
    )
    arguments.add_channel_option(
        parser,
        "what /nightly/ serves, read from matrix.yaml's nightly destination (its state, "
        "every page and link, pip's pick per cell), with no dist/",
    )
    arguments.add_markdown_option(parser, "write it as Markdown")


def run(args: argparse.Namespace, out: Output) -> int:
    from release.destinations.reach import Reach
    from release.remote.retry import RetryPolicy
    from release.verify.checks import VerifySettings
    from release.verify.run import VerifyTarget, verify_release

    environ = dict(os.environ)
    if args.github_api_url is None:  # the signer's GitHub, where no destination names one
        common.checked_variable(environ, "GITHUB_API_URL", api_url_problem, API_URL)
    target = VerifyTarget(
        dist=args.dist,
        matrix=args.matrix,
        matrix_given=args.matrix_given,
        tags=tuple(args.tag),
        latest=args.latest,
        overrides=common.parse_overrides(args.index_url),
    )
    settings = VerifySettings(
        concurrency=args.concurrency,
        attempts=args.attempts,
        deadline_s=args.timeout,
        pip=not args.no_pip,
        provenance=not args.no_provenance,
        require_provenance=args.require_provenance,
        provenance_workflow=args.provenance_workflow,
        provenance_signer_workflow=args.provenance_signer_workflow,
        provenance_repository=args.provenance_repository
        or common.checked_variable(environ, "GITHUB_REPOSITORY", repository_problem, REPOSITORY),
    )
    reach = Reach(
        environ,
        command="release verify",
        github_api_url=args.github_api_url,
        index_base_url=args.index_base_url,
        read_only=True,
        # every GitHub read (the attestations, a release by --tag) within --timeout too
        github_policy=RetryPolicy(
            attempts=settings.attempts, initial_delay=settings.backoff_s, total=settings.deadline_s
        ),
    )
    if args.channel == "nightly":
        from release.nightly.verify import verify_channel  # boto3: nightly only

        report = verify_channel(common.load(args.matrix, out), reach, settings)
        print_verify(out, report)
    else:
        outcome = verify_release(target, settings, reach)
        for one in outcome.reports:
            print_verify(out, one)
        report = outcome.report
    common.write_report(out, verify_json(report), verify_markdown(report), args.markdown)
    if report.failed:
        for check in report.failed:
            out.annotate(
                Annotation(
                    message=one_line(
                        f"{check.check} {check.subject}: {check.detail} ({check.url or '-'})"
                    ),
                    title=f"release verify: {check.check}",
                )
            )
        first = report.failed[0]
        again = "release publish" + (" --channel nightly" if args.channel == "nightly" else "")
        said = one_line(f"{first.check} {first.subject}: {first.detail}")  # a key with a newline
        raise VerifyError(
            f"{len(report.failed)} of {len(report.checks)} checks failed; first: {said}",
            hint=PROVENANCE_HINT
            if first.check == "provenance"
            else INSPECTION_HINT
            if first.check in INSPECTION_RULES
            else f"re-run `{again}` to finish a partial publish, then verify again",
        )
    return 0
