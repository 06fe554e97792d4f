"""`release pins`: hash-pinned requirement files for the consumers of a release."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from release.commands.common import output_dir, parse_overrides
from release.console import make_console, table
from release.dist import load_dist
from release.fsutil import write_atomic
from release.pins import install_lines, pin_files
from release.published import RECORD_NAME, read_record, with_overrides


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "pins",
        help="write hash-pinned requirement files for each variant of a publish",
        description="From <dist>/published.json: per variant, `<variant>.txt` (the index and "
        "the version with the sha256 of every platform's wheel, for pip and uv) and "
        "`<variant>-urls.txt` (each wheel's URL with its sha256 and a platform marker, "
        "for Dockerfiles).",
    )
    parser.add_argument(
        "--dist",
        type=Path,
        default=Path("dist"),
        metavar="DIR",
        help="directory with the manifest and published.json (default: dist)",
    )
    parser.add_argument(
        "--out", type=Path, default=None, metavar="DIR", help="default: <dist>/pins"
    )
    parser.add_argument(
        "--index-url",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="the index of a destination or label, where it is served elsewhere",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    manifest = load_dist(args.dist, missing_ok=True)
    published = with_overrides(
        read_record(args.dist / RECORD_NAME, manifest), parse_overrides(args.index_url)
    )
    out = output_dir(args.out or args.dist / "pins", "--out")
    files = pin_files(published)
    for file in files:
        write_atomic(out / file.name, file.text.encode())
    make_console().print(
        table(
            ["variant", "file", "index"],
            [[f.variant, str(out / f.name), f.index_url or "-"] for f in files],
            title=f"{published.project} {published.version}: pins",
        )
    )
    for line in install_lines(published):
        print(f"  {line}", file=sys.stderr)
    return 0
