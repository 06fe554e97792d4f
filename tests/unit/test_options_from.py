"""A command line's options become their dataclass by name (arguments.options_from): every
field a command takes from its command line is one of its parser's options, so that an
option renamed on one side fails here instead of leaving the field at its default."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from release.cli import build_parser
from release.commands.parsing import arguments, buildopts
from release.matrix.compilecache import CompileCache
from release.publish.run import PublishSettings

# fields a command gives itself rather than taking them from its parser
GIVEN: dict[type, set[str]] = {PublishSettings: {"only", "on_upload"}}


TOOLCHAIN = {"cache_dir", "cuda_home"}  # all env and gpu-gate take of BuildOptions


@pytest.mark.parametrize(
    ("command", "kind", "required", "taken"),
    [
        ("build", buildopts.BuildOptions, [], None),
        ("env", buildopts.BuildOptions, ["--cuda", "13.0", "--arch", "x86_64"], TOOLCHAIN),
        ("gpu-gate", buildopts.BuildOptions, ["--runner", "h100"], TOOLCHAIN),
        ("publish", PublishSettings, [], None),
    ],
)
def test_every_field_a_command_takes_is_one_of_its_options(
    command: str, kind: type, required: list[str], taken: set[str] | None
) -> None:
    """`taken`: the fields the command takes from its line (None: every field of `kind`
    but those it gives itself)."""
    args = build_parser([command]).parse_args([command, *required])
    fields = taken or {f.name for f in dataclasses.fields(kind) if f.init} - GIVEN.get(kind, set())
    assert fields <= set(vars(args)), sorted(fields - set(vars(args)))


def test_build_options_carry_what_the_command_line_says(tmp_path: Path) -> None:
    line = [
        "build",
        "--jobs", "3",
        "--fail-fast",
        "--cache-dir", str(tmp_path / "cache"),
        "--cuda-home", str(tmp_path / "cuda"),
        "--compile-jobs", "2",
        "--compile-cache", "none",
    ]  # fmt: skip
    args = build_parser(line).parse_args(line)
    assert arguments.options_from(buildopts.BuildOptions, args) == buildopts.BuildOptions(
        jobs=3,
        fail_fast=True,
        cache_dir=tmp_path / "cache",
        cuda_home=tmp_path / "cuda",
        compile_jobs=2,
        compile_cache=CompileCache(storage="none"),
    )


def test_what_a_command_gives_itself_wins_over_an_option_of_the_same_name() -> None:
    line = ["publish", "--dist", "somewhere", "--dry-run"]
    args = build_parser(line).parse_args(line)
    assert args.command == "publish"  # argparse's own dest for the subcommand
    assert args.only == []
    settings = arguments.options_from(PublishSettings, args, only=("pypi",))
    assert settings.only == ("pypi",)
    assert settings.dist == Path("somewhere")
    assert settings.dry_run is True
