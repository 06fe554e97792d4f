"""The PEP 517 frontend of a cell whose isolated build gets build requirements besides the
project's own (matrix.yaml's build.requires): `python -m release.toolchain.frontend
--requires REQ ... --outdir DIR [-C KEY=VALUE ...] SRCDIR`, run by the tool's own Python as
`python -m build --wheel` would be. It is pypa/build's isolated environment and builder
(its library API): the project's [build-system] requires and the given requirements are
installed together, then what the backend asks for, then the wheel is built. A program of
its own, run by the build stage (release.building.pipeline.build_command).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from build import BuildBackendException, BuildException, ProjectBuilder
from build.env import DefaultIsolatedEnv

MODULE = "release.toolchain.frontend"


def command(python: str, project: Path, outdir: Path, requires: Sequence[str]) -> list[str]:
    """The command line of this frontend for one wheel of `project` into `outdir`."""
    extra = [arg for requirement in requires for arg in ("--requires", requirement)]
    return [python, "-m", MODULE, *extra, "--outdir", str(outdir), str(project)]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    parser.add_argument("srcdir", type=Path)
    parser.add_argument("--outdir", type=Path, required=True)
    parser.add_argument("--requires", action="append", default=[], metavar="REQUIREMENT")
    parser.add_argument("--config-setting", "-C", action="append", default=[], metavar="KEY=VALUE")
    return parser


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(argv)
    settings: dict[str, str | list[str]] = {}
    for item in args.config_setting:
        key, _, value = item.partition("=")
        settings[key] = value
    try:
        with DefaultIsolatedEnv() as env:
            builder = ProjectBuilder.from_isolated_env(env, args.srcdir)
            wanted = sorted(builder.build_system_requires | set(args.requires))
            print(f"* Installing packages in isolated environment: {', '.join(wanted)}")
            env.install(wanted)
            asked = builder.get_requires_for_build("wheel", settings)
            if asked:
                print(f"* Installing what the backend asks for: {', '.join(sorted(asked))}")
                env.install(asked)
            print("* Building wheel...", flush=True)
            built = builder.build("wheel", args.outdir, settings)
    except (BuildException, BuildBackendException) as error:
        print(f"ERROR {error}", file=sys.stderr)
        return 1
    print(f"Successfully built {Path(built).name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
