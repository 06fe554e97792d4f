"""release.inspection.limitedapi: abi3audit's report (`--report`, as abi3audit 0.0.26
prints it for a wheel) read into one problem per symbol, with the version that added it."""

from __future__ import annotations

import json
from pathlib import Path

from release.inspection.limitedapi import audit_command, limited_api_problems


def report(non_abi3: list[str], future: dict[str, str], baseline: str = "3.10") -> str:
    result = {
        "is_abi3": not non_abi3,
        "is_abi3_baseline_compatible": not future,
        "baseline": baseline,
        "computed": max([baseline, *future.values()]),
        "non_abi3_symbols": non_abi3,
        "future_abi3_objects": future,
    }
    wheel = {"kind": "wheel", "wheel": [{"name": "_C.abi3.so", "result": result}]}
    return json.dumps({"specs": {"/w/k3-0.1.0-cp310-abi3-linux_x86_64.whl": wheel}})


def test_a_wheel_within_the_limited_api_of_its_floor_has_no_problem() -> None:
    assert limited_api_problems(report([], {}), "3.10") == []


def test_each_symbol_outside_the_limited_api_is_named() -> None:
    problems = limited_api_problems(report(["PyFrame_GetCode", "_PyObject_GC_New"], {}), "3.10")
    assert len(problems) == 2
    assert problems[0].startswith("_C.abi3.so: PyFrame_GetCode is not in the limited API")
    assert "_PyObject_GC_New" in problems[1]


def test_a_symbol_that_joined_the_limited_api_after_the_floor_is_named_with_its_version() -> None:
    (problem,) = limited_api_problems(report([], {"PyUnicode_AsUTF8": "3.13"}), "3.10")
    assert "PyUnicode_AsUTF8 joined the limited API in Python 3.13" in problem
    assert "after the cell's abi3 floor 3.10" in problem
    assert 'abi3: "3.13"' in problem
    # one that is within the floor is not a problem, whatever abi3audit's baseline was
    assert limited_api_problems(report([], {"PyUnicode_AsUTF8": "3.13"}), "3.13") == []


def test_many_symbols_are_counted_past_the_first_five() -> None:
    names = [f"_Py_private_{i}" for i in range(8)]
    problems = limited_api_problems(report(names, {}), "3.10")
    assert len(problems) == 6
    assert problems[-1] == "_C.abi3.so: and 3 more outside it"


def test_output_that_is_no_report_is_one_problem_not_a_traceback() -> None:
    (problem,) = limited_api_problems("processing error: not a wheel", "3.10")
    assert problem.startswith("abi3audit gave no report: processing error")


def test_the_audit_holds_the_wheel_to_the_cells_floor() -> None:

    command = audit_command("/py", Path("/w/x.whl"), "3.10")
    assert command == [
        "/py", "-m", "abi3audit", "--report", "--assume-minimum-abi3", "3.10", "/w/x.whl"
    ]  # fmt: skip
