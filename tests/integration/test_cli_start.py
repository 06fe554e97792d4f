"""A command imports only what it uses, judged from the modules the real console script
imports (`python -X importtime`), never from a time.

`release --version` needs argparse and the parser side of release.commands; every
command's `--help` and usage error that and the command's own module, never its stage (a
command imports its stage when it runs); `release matrix` the matrix and the terminal, never
the publishing side (githubkit, pydantic, sigstore, twine, httpx) or the build side
(auditwheel, ELF reading); `release plan` githubkit (it asks GitHub) but nothing that signs,
checks a signature or uploads. benchmarks/cli_start.py measures what that saves.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import pytest

from release.cli import COMMANDS
from tests.github_standin import GitHubStandIn
from tests.integration.jobenv import publish_job_env
from tests.pypi_server import PypiServer

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
# What a command's --help may load besides: the edges the commands share, the defaults its
# options show, the build stage's events (which build and env subclass) and the rules'
# names (which verify's hints sort), each a module that imports no stage
HELP_MODULES = VERSION_MODULES | {
    "release.commands.parsing.common",
    "release.defaults",
    "release.building",
    "release.building.events",
    "release.inspection",
    "release.inspection.findings",
}
# The heavy ones that every command's --help used to load through its stage (sigstore and
# pypi_attestations via provenance, githubkit, twine and docutils, boto3, pydantic): named
# in the failure message
HEAVY = frozenset(
    {"sigstore", "pypi_attestations", "githubkit", "twine", "docutils", "boto3", "pydantic"}
)
# `copy` looks for Jython's org.python.core; a namespace `org` on the path answers
NOT_THIRD_PARTY = {"release", "_distutils_hack", "org"}


def imported(*args: str, exit_code: int = 0) -> set[str]:
    """Every module the console script imports for `release ARGS` (which ends with
    `exit_code`), beyond those the bare interpreter imports (`site`, and whatever this
    machine's site hooks load)."""
    return _importtime(str(RELEASE), *args, exit_code=exit_code) - _bare_interpreter()


@functools.cache
def _bare_interpreter() -> frozenset[str]:
    return frozenset(_importtime("-c", "pass"))


def _importtime(*args: str, exit_code: int = 0) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == exit_code, result.stderr[-2000:]
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
    outside = top_levels(modules) - set(sys.stdlib_module_names) - NOT_THIRD_PARTY
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


def loads_the_parser_side_only(modules: set[str], what: str) -> None:
    """No third-party module (the heavy ones named first), and of release/ only what
    `--version` loads and HELP_MODULES. The command modules themselves are not listed:
    `-X importtime` does not see what cli.py imports through importlib, only what those
    modules import."""
    heavy = top_levels(modules) & HEAVY
    assert heavy == set(), f"{what} imports {sorted(heavy)}"
    outside = top_levels(modules) - set(sys.stdlib_module_names) - NOT_THIRD_PARTY
    assert outside == set(), f"{what} imports {sorted(outside)}"
    ours = {m for m in modules if m == "release" or m.startswith("release.")}
    assert ours <= HELP_MODULES, f"{what} imports {sorted(ours - HELP_MODULES)}"


@pytest.mark.parametrize("command", COMMANDS)
def test_a_commands_help_loads_its_options_only(command: str) -> None:
    loads_the_parser_side_only(imported(command, "--help"), f"release {command} --help")


@pytest.mark.parametrize("command", COMMANDS)
def test_a_usage_error_loads_the_commands_options_only(command: str) -> None:
    modules = imported(command, "--no-such-option", exit_code=2)
    loads_the_parser_side_only(modules, f"release {command} --no-such-option")


def test_release_help_loads_every_commands_options_and_no_stage() -> None:
    loads_the_parser_side_only(imported("--help"), "release --help")


# What only signing, checking a signature, uploading to PyPI or the nightly channel's S3 use
SIGNING_OR_UPLOADING = frozenset(
    {"pypi_attestations", "sigstore.models", "sigstore.verify", "twine", "docutils", "boto3"}
)


def test_a_plan_asks_github_and_pypi_but_loads_nothing_that_signs_or_uploads(
    tmp_path: Path,
    pypiserver: PypiServer,
    github_standin: GitHubStandIn,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`release plan` of the shipped matrix makes a GitHub client (githubkit) and reads the
    PyPI index; it checks no attestation (there is none) and uploads nothing, so sigstore's
    verifier, pypi-attestations, twine (and docutils through it) and boto3 stay unloaded."""
    github_standin.add_repo("k3-project/k3-kernels")
    publish_job_env(monkeypatch, pypiserver, github_standin.token)
    modules = imported(
        "plan",
        "--json",
        "--dist", str(tmp_path / "dist"),
        "--cache-dir", str(tmp_path / "cache"),
        "--github-api-url", github_standin.api_url,
        "--repository-url", pypiserver.url,
    )  # fmt: skip
    assert "githubkit" in modules  # it asked GitHub what the release holds
    assert github_standin.request_log, "the plan asked the stand-in GitHub nothing"
    loaded = {m for m in modules if {m, m.split(".")[0]} & SIGNING_OR_UPLOADING}
    assert loaded == set(), f"release plan imports {sorted(loaded)}"
    # nor httpx's own command line, which needs click and pygments (a quarter of a short
    # command's start where those are installed, as they are beside this suite)
    assert "httpx" in modules
    assert not top_levels(modules) & {"click", "pygments"}, sorted(modules)
