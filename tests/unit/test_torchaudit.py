"""torch-abi-audit's JSON report read into a stable-ABI wheel's problems: torch's unstable
C++ API, shims newer than the wheel's TORCH_TARGET_VERSION, a library it could not read,
and a report that is not one. The reports have the shape torch-abi-audit 0.3.0 prints for
`python -m torch_abi_audit.cli DIR --json` (one package, or an envelope of several)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from packaging.version import Version

from release.inspection.limitedapi import LISTED_PER_OBJECT
from release.inspection.torchaudit import audit_command, audit_problems

ROOT = "/scratch/release-torch-abi-x/wheel"
TARGET = Version("2.10")


def library(
    name: str,
    *,
    unstable: tuple[str, ...] = (),
    minimum: str | None = "2.10.0",
    defining: tuple[str, ...] = ("torch_call_dispatcher",),
    error: str | None = None,
) -> dict[str, Any]:
    return {
        "path": f"{ROOT}/{name}",
        "cpython": {"intent": True, "compliant": False, "violations": []},
        "torch": {
            "uses_torch": True,
            "stable": not unstable,
            "unstable_symbols": list(unstable),
            "stable_shim_count": 45,
            "min_torch_version": minimum,
            "version_defining_symbols": list(defining),
            "unknown_shim_symbols": [],
        },
        "error": error,
    }


def report(*extensions: dict[str, Any], bundled: tuple[dict[str, Any], ...] = ()) -> str:
    package = {"name": "wheel", "root": ROOT, "extensions": list(extensions)}
    return json.dumps({**package, "bundled_libs": list(bundled), "error": None})


def test_the_command_runs_the_tool_module_on_the_directory_with_json() -> None:
    assert audit_command("/py", Path("/t/wheel")) == [
        "/py", "-m", "torch_abi_audit.cli", "/t/wheel", "--json",
    ]  # fmt: skip


def test_a_stable_library_within_its_target_has_no_problem() -> None:
    assert audit_problems(report(bundled=(library("k3/_C.abi3.so"),)), TARGET, ROOT) == []


def test_a_library_using_no_torch_shim_has_no_problem() -> None:
    helper = library("k3/libhelper.so", minimum=None, defining=())
    assert audit_problems(report(helper), TARGET, ROOT) == []


def test_unstable_cxx_symbols_are_named_up_to_the_limit() -> None:
    symbols = tuple(f"c10::detail::f{i}(int)" for i in range(LISTED_PER_OBJECT + 2))
    found = audit_problems(report(library("k3/_C.abi3.so", unstable=symbols)), TARGET, ROOT)
    assert len(found) == LISTED_PER_OBJECT + 1
    assert found[0].startswith("k3/_C.abi3.so: c10::detail::f0(int) is torch's unstable C++ API")
    assert found[-1] == "k3/_C.abi3.so: and 2 more of it"


def test_a_shim_newer_than_the_target_is_named_with_its_torch() -> None:
    newer = library("k3/_C.abi3.so", minimum="2.12.0", defining=("torch_new_thing",))
    (problem,) = audit_problems(report(bundled=(newer,)), TARGET, ROOT)
    assert problem.startswith(
        "k3/_C.abi3.so: calls shims of torch 2.12.0 (torch_new_thing), newer than its "
        "TORCH_TARGET_VERSION 2.10"
    )
    assert "torch>=2.10" in problem
    assert audit_problems(report(bundled=(newer,)), Version("2.12"), ROOT) == []


def test_a_library_it_could_not_read_is_a_problem() -> None:
    broken = library("k3/_C.abi3.so", error="'nm' not found in PATH (install binutils)")
    assert audit_problems(report(broken), TARGET, ROOT) == [
        "k3/_C.abi3.so: torch-abi-audit could not read it: 'nm' not found in PATH "
        "(install binutils)"
    ]


def test_the_envelope_of_several_packages_is_read_too() -> None:
    first = json.loads(report(library("a/_C.so")))
    second = json.loads(report(library("b/_C.so", unstable=("at::native::x()",))))
    envelope = json.dumps({"site_packages": ".", "packages": [first, second]})
    (problem,) = audit_problems(envelope, TARGET, ROOT)
    assert problem.startswith("b/_C.so: at::native::x()")


def test_no_report_or_no_library_is_a_problem_not_a_pass() -> None:
    assert audit_problems("Traceback (most recent call last): boom", TARGET) == [
        "torch-abi-audit gave no report: Traceback (most recent call last): boom"
    ]
    assert audit_problems(report(), TARGET) == [
        "torch-abi-audit found no shared object in the wheel"
    ]
