"""`release publish`: plan every destination, stop on a conflict, upload, write the index."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from release.console import make_console
from release.errors import ReleaseError
from release.publish.run import PublishOutcome, PublishSettings, publish
from release.report import (
    error_annotations,
    print_applied,
    print_plan,
    publish_json,
    publish_markdown,
    write_reports,
)


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
