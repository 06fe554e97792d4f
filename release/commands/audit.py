"""Download every wheel of a PEP 503/691 index (a project page, or a root index: every project,
or --project NAME) or of a list of wheel URLs, and inspect each from the bytes served: its
manylinux tag against the symbol versions its ELF files need, its local label against the
CUDA libraries it links, its torch requirement, METADATA against the filename; and check the
pages whole: duplicate filenames, hashes against the bytes, arches and variants missing.
No matrix, no credentials. Exit 7 on any finding.

`release audit`: the checks of `release verify`, against anyone's index.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from release.commands.parsing import arguments, common
from release.commands.parsing.options import Seconds, WholeNumber, asked_url
from release.console import Annotation, Output, markdown_table
from release.defaults import (
    AUDIT_ATTEMPTS,
    AUDIT_CONCURRENCY,
    AUDIT_FILE_TIMEOUT_S,
    AUDIT_TIMEOUT_S,
    PYPI_SIMPLE,
)
from release.errors import ConfigError, IncompleteError, VerifyError, shown

if TYPE_CHECKING:
    from release.audit.report import AuditReport

HELP = "inspect every wheel of any index or list of wheel URLs, as served (no matrix)"
SHARED: tuple[arguments.Shared, ...] = ("output",)

CONCURRENCY = WholeNumber(1, 64)
ATTEMPTS = WholeNumber(1, 100)
TIMEOUT = Seconds(most=7 * 86400.0)
SUMMARY_COLUMNS = ("rule", "checks", "files checked", "findings")
FINDING_COLUMNS = ("rule", "file", "URL", "detail")
DOCS = "docs/verify.md#release-audit"


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "urls",
        nargs="*",
        metavar="URL",
        help="a project page or root index of a simple index, or a wheel's URL (a "
        "#sha256= fragment is checked against the bytes)",
    )
    parser.add_argument(
        "--urls", dest="urls_file", type=Path, metavar="FILE",
        help="more URLs, one a line (blank lines and # comments skipped)",
    )  # fmt: skip
    parser.add_argument(
        "--project",
        action="append",
        default=[],
        metavar="NAME",
        help="read only this project's page of each URL, a root index (repeatable)",
    )
    parser.add_argument(
        "--concurrency", type=CONCURRENCY, default=AUDIT_CONCURRENCY, metavar="N",
        help=f"wheels read at once, each on disk until inspected ({CONCURRENCY.accepted}; "
        f"default {AUDIT_CONCURRENCY})",
    )  # fmt: skip
    parser.add_argument(
        "--file-timeout", type=TIMEOUT, default=AUDIT_FILE_TIMEOUT_S, metavar="SECONDS",
        help=f"bound on one wheel's download, retries included ({TIMEOUT.accepted}; "
        f"default {AUDIT_FILE_TIMEOUT_S:g})",
    )  # fmt: skip
    parser.add_argument(
        "--timeout", type=TIMEOUT, default=AUDIT_TIMEOUT_S, metavar="SECONDS",
        help="bound on the whole audit; the wheels it leaves unread are named, exit 9 "
        f"({TIMEOUT.accepted}; default {AUDIT_TIMEOUT_S:g})",
    )  # fmt: skip
    parser.add_argument(
        "--attempts", type=ATTEMPTS, default=AUDIT_ATTEMPTS, metavar="N",
        help=f"tries per URL ({ATTEMPTS.accepted}; default {AUDIT_ATTEMPTS})",
    )  # fmt: skip
    parser.add_argument(
        "--torch-index", default=PYPI_SIMPLE, type=asked_url, metavar="URL",
        help="the index whose torch releases' metadata says which CUDA each is built for, "
        f"for a wheel without a CUDA label that links torch (default {PYPI_SIMPLE})",
    )  # fmt: skip
    parser.add_argument(
        "--no-torch-index", action="store_true",
        help="ask no torch index (the requirement's CUDA is then not checked, and says so)",
    )  # fmt: skip
    parser.add_argument(
        "--cuobjdump", type=Path, metavar="PATH",
        help="list the SMs and PTX of every fatbin with this cuobjdump (default: device code "
        "is not listed)",
    )  # fmt: skip
    parser.add_argument(
        "--schema", action="store_true", help="print the JSON Schema of the --json document"
    )
    arguments.add_markdown_option(parser, "write the summary and findings as Markdown")


def print_audit(out: Output, report: AuditReport) -> None:
    from release.audit.report import finding_rows, summary_rows

    title = (
        f"audit: {report.files} wheels on {len(report.pages)} pages, "
        f"{len(report.findings)} findings"
    )
    out.table(SUMMARY_COLUMNS, summary_rows(report), title)
    if report.findings:
        out.table(FINDING_COLUMNS, finding_rows(report), "findings")
    for one in report.unchecked:
        out.note(f"not checked: {one.rule} of {one.file}: {one.why}")
    for url in report.not_reached:
        out.note(f"not reached within --timeout: {url}")


def audit_markdown(report: AuditReport) -> str:
    from release.audit.report import finding_rows, summary_rows

    status = "no finding" if report.ok else f"{len(report.findings)} findings"
    text = f"## Audit of {report.files} wheels: {status}\n\n"
    text += markdown_table(SUMMARY_COLUMNS, summary_rows(report))
    if report.findings:
        text += "\n\n" + markdown_table(FINDING_COLUMNS, finding_rows(report))
    return text


def run(args: argparse.Namespace, out: Output) -> int:
    from release.audit.report import audit_json, audit_schema
    from release.audit.run import AuditSettings, audit
    from release.audit.sources import sources

    if args.schema:
        print(json.dumps(audit_schema(), indent=2))
        return 0
    given = sources(args.urls, args.urls_file)
    problems = [f"--project {shown(name)}: not a project name" for name in args.project
                 if not name.strip()]  # fmt: skip
    cuobjdump = args.cuobjdump
    if cuobjdump is not None and "/" not in str(cuobjdump):
        cuobjdump = Path(shutil.which(cuobjdump) or cuobjdump)  # a name: the one on PATH
    if cuobjdump is not None and not (cuobjdump.is_file() and os.access(cuobjdump, os.X_OK)):
        # else each wheel with device code got a finding, "cuobjdump cannot read it"
        problems.append(f"--cuobjdump {cuobjdump}: not a program this user can run")
    if problems:
        raise ConfigError(problems)
    settings = AuditSettings(
        concurrency=args.concurrency,
        file_timeout_s=args.file_timeout,
        timeout_s=args.timeout,
        attempts=args.attempts,
        projects=tuple(args.project),
        torch_index=None if args.no_torch_index else args.torch_index,
        cuobjdump=cuobjdump,
    )
    report = audit(given, settings, dict(os.environ))
    print_audit(out, report)
    common.write_report(out, audit_json(report), audit_markdown(report), args.markdown)
    if report.findings:
        for one in report.findings:
            out.annotate(
                Annotation(
                    message=f"{one.file}: {one.detail} ({one.url})", title=f"audit: {one.rule}"
                )
            )
        first = report.findings[0]
        count = len(report.findings)
        raise VerifyError(
            f"{count} finding{'' if count == 1 else 's'}; first: {first.rule} {first.file}: "
            f"{first.detail} ({first.url})",
            hint=f"each rule and what fixes it: {DOCS}",
        )
    if report.not_reached:
        pages = sum(1 for url in report.not_reached if not urlsplit(url).path.endswith(".whl"))
        wheels = len(report.not_reached) - pages
        unread = f"{wheels} of {report.files} wheels" + (f" and {pages} pages" if pages else "")
        raise IncompleteError(
            f"{unread} not read within --timeout {args.timeout:g} s; the rest had no finding",
            hint="raise --timeout or --concurrency, or audit fewer projects (--project)",
        )
    return 0
