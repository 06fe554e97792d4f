"""From <dist>/published.json: per variant, `<variant>.txt` (the index and the version with the
sha256 of every platform's wheel, for pip and uv) and `<variant>-urls.txt` (each wheel's URL
with its sha256 and a platform marker, for Dockerfiles).

`release pins`: hash-pinned requirement files for the consumers of a release.
"""

from __future__ import annotations

import argparse

from release.commands.parsing import arguments, common
from release.console import Output

HELP = "write hash-pinned requirement files for each variant of a publish"
SHARED: tuple[arguments.Shared, ...] = ("output",)


def add_options(parser: argparse.ArgumentParser) -> None:
    arguments.add_dist_option(
        parser,
        "directory with the manifest and published.json (default: dist)",
    )
    arguments.add_output_dir(parser, "--out", "default: <dist>/pins")
    arguments.add_index_url_overrides(
        parser, "the index of a destination or label, where it is served elsewhere"
    )


def run(args: argparse.Namespace, output: Output) -> int:
    from release.downstream.requirement_files import install_lines, pin_files
    from release.records.dist import load_dist
    from release.records.published import (
        RECORD_NAME,
        check_overrides,
        read_record,
        with_overrides,
    )
    from release.writing import write_together

    overrides = common.parse_overrides(args.index_url, written=True)
    manifest = load_dist(args.dist, missing_ok=True)
    record = read_record(args.dist / RECORD_NAME, manifest)
    check_overrides(overrides, [record])
    published = with_overrides(record, overrides)
    out = common.output_dir(args.out or args.dist / "pins", "--out")
    files = pin_files(published)
    write_together([(out / file.name, file.text.encode()) for file in files])  # or none
    lines = install_lines(published)
    output.document(
        {
            "project": published.project,
            "version": published.version,
            "files": [
                {"path": str(out / f.name), "variant": f.variant, "index_url": f.index_url}
                for f in files
            ],
            "install": lines,
        }
    )
    output.table(
        ["variant", "file", "index"],
        [[f.variant, str(out / f.name), f.index_url or "-"] for f in files],
        f"{published.project} {published.version}: pins",
    )
    for line in lines:
        output.line(f"  {line}")
    return 0
