"""A command imports only what it uses, judged from the modules the real console script
imports (`python -X importtime`), never from a time.

`release --version` needs argparse and the parser side of release.commands; `release
matrix` the matrix and the terminal, never the publishing side (githubkit, pydantic,
sigstore, twine, httpx) or the build side (auditwheel, ELF reading). benchmarks/cli_start.py
measures what that saves.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RELEASE = Path(sys.executable).with_name("release")

# What a command that does not publish, verify or build must never load.
PUBLISHING = frozenset(
    {"githubkit", "pydantic", "sigstore", "pypi_attestations", "twine", "httpx", "cryptography"}
)
BUILDING = frozenset({"auditwheel", "elftools", "build", "wheel", "cibuildwheel"})
# `release --version`: the parser and what it stands on, nothing else of release/
VERSION_MODULES = frozenset(
    {
        "release",
        "release.cli",
        "release.commands",
        "release.commands.parsing",
        "release.commands.parsing.arguments",
        "release.commands.parsing.options",
        "release.console",
        "release.credentials",
        "release.errors",
        "release.fsutil",
        "release.github_names",
        "release.proc",
        "release.targets",
    }
)


def imported(*args: str) -> set[str]:
    """Every module the console script imports for `release ARGS`, beyond those the bare
    interpreter imports (`site`, and whatever this machine's site hooks load)."""
    return _importtime(str(RELEASE), *args) - _importtime("-c", "pass")


def _importtime(*args: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    modules = set()
    for line in result.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            modules.add(line.rsplit("|", 1)[1].strip())
    modules.discard("imported package")  # the header: "self [us] | cumulative | imported package"
    assert modules, "importtime listed nothing: the test would read nothing"
    return modules


def top_levels(modules: set[str]) -> set[str]:
    return {m.split(".", 1)[0] for m in modules}


def test_version_loads_the_parser_only() -> None:
    modules = imported("--version")
    assert "release.cli" in modules
    # `copy` looks for Jython's org.python.core; a namespace `org` on the path answers
    allowed = {"release", "_distutils_hack", "org"}
    outside = top_levels(modules) - set(sys.stdlib_module_names) - allowed
    assert outside == set(), f"release --version imports {sorted(outside)}"
    ours = {m for m in modules if m == "release" or m.startswith("release.")}
    assert ours <= VERSION_MODULES, f"release --version imports {sorted(ours - VERSION_MODULES)}"


@pytest.mark.parametrize("args", [("matrix",), ("matrix", "--json"), ("matrix", "--schema")])
def test_a_read_of_the_matrix_loads_nothing_of_publishing_or_building(
    args: tuple[str, ...],
) -> None:
    modules = imported(*args)
    assert "release.matrix" in modules
    loaded = top_levels(modules) & (PUBLISHING | BUILDING)
    assert loaded == set(), f"release {' '.join(args)} imports {sorted(loaded)}"
    stages = {m for m in modules if m.startswith(("release.publish", "release.verify"))}
    assert stages == set(), f"release {' '.join(args)} imports {sorted(stages)}"
