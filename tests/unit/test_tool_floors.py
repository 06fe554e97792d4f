"""What the tool needs of the programs it runs, against what pyproject.toml declares: the
pip floor is one number in two places, and a failure to take an option reads as that."""

from __future__ import annotations

import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

from release import proc
from release.toolchain import PIP_FLOOR, parse_pip_version, pip_problem

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

ROOT = Path(__file__).resolve().parents[2]

# What pip 23.2.1 (the pip Python 3.11 bundles) printed for `--progress-bar raw`.
PIP_23_REJECTS_RAW = """
Usage:
  /tmp/nc1/.venv/bin/python3 -m pip install [options] <requirement specifier> ...
  /tmp/nc1/.venv/bin/python3 -m pip install [options] <archive url/path> ...

option --progress-bar: invalid choice: 'raw' (choose from 'on', 'off')
"""
PIP_OFFLINE = """
WARNING: Retrying (Retry(total=4, ...)) after connection broken by 'NewConnectionError'
ERROR: Could not find a version that satisfies the requirement ziglang==0.17.1 (from versions: none)
ERROR: No matching distribution found for ziglang==0.17.1
"""


def declared_floor(name: str) -> Version:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for line in project["dependencies"]:
        requirement = Requirement(line)
        if requirement.name == name:
            floors = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
            assert len(floors) == 1, line
            return floors[0]
    raise AssertionError(f"pyproject.toml does not depend on {name}")


def test_pyproject_declares_the_pip_that_provisioning_needs() -> None:
    assert declared_floor("pip") == Version(PIP_FLOOR)


def test_pip_versions_against_the_floor() -> None:
    assert parse_pip_version("pip 23.2.1 from /x/lib/site-packages/pip (python 3.11)") == "23.2.1"
    assert parse_pip_version("/x/python: No module named pip") is None
    assert pip_problem(None) == "has no pip"
    assert pip_problem(PIP_FLOOR) is None
    assert pip_problem("26.3") is None
    problem = pip_problem("23.2.1")
    assert problem is not None
    assert "23.2.1" in problem
    assert PIP_FLOOR in problem


def failed(output: str, code: int = 2) -> proc.Completed:
    return proc.Completed(returncode=code, output=output, seconds=0.1)


def test_a_rejected_option_is_named() -> None:
    message = proc.failure("pip installing ziglang==0.17.1", failed(PIP_23_REJECTS_RAW))
    assert message == (
        "pip installing ziglang==0.17.1 rejected its arguments (exit 2): "
        "option --progress-bar: invalid choice: 'raw' (choose from 'on', 'off')"
    )


def test_other_failures_are_not_called_rejected_arguments() -> None:
    message = proc.failure("pip installing ziglang==0.17.1", failed(PIP_OFFLINE, 1))
    assert "rejected" not in message
    assert message.startswith("pip installing ziglang==0.17.1 failed (exit 1): ")
    assert "No matching distribution found" in message


def test_rejections_in_the_words_of_each_tool() -> None:
    said = {
        "argparse": "release: error: unrecognized arguments: --bogus",
        "clap": "error: unexpected argument '--bogus' found",
        "nvcc": "nvcc fatal   : Unknown option '--compress-mode'",
        "cmake": "CMake Error: Unknown argument --bogus",
        "gcc": "g++: error: unrecognized command-line option '-fbogus'",
        "pip": "no such option: --bogus",
    }
    for line in said.values():
        assert proc.rejected_arguments(f"some output\n{line}\n") == line
    build_failed = "ERROR Backend subprocess exited when trying to invoke build_wheel"
    assert proc.rejected_arguments(f"csrc/kernels/swiglu.cu(3): error\n{build_failed}") is None
