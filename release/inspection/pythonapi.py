"""A py3-none wheel promises every CPython: its shared objects use no Python C-API, as an
abi3 wheel's keep to the limited API (release.inspection.limitedapi). A C-API symbol it
leaves undefined (`Py*`, `_Py*`) binds it to the CPython it was built with, or fails to
load in the others (`undefined symbol: PyUnicode_AsUTF8`). Nor does one export a CPython
extension module's entry point (`PyInit_<name>`): whatever it calls, `import` runs it as a
module of the CPython it was written for.

Pure: `python_api_problems` over the wheel's bytes.
"""

from __future__ import annotations

from release.inspection.torchabi import PYTHON_PREFIXES, shared_objects

SHOWN = 5  # symbols named in a message, the rest counted

PY3_NONE_REMEDY = (
    "a py3-none wheel loads in every CPython and may use none of it (an include of Python.h, "
    "pybind11 or torch/python.h brings its symbols, used or not: drop it, or build one wheel "
    "per Python, python: [...], or keep to the limited API, abi3:)"
)


def python_api_problems(wheel_data: bytes) -> list[str]:
    """Each shared object of the wheel `wheel_data` that leaves Python C-API symbols
    undefined, on one line with the first SHOWN of them and how many there are."""
    problems: list[str] = []
    for member in shared_objects(wheel_data):
        names = sorted(s.name for s in member.undefined if s.name.startswith(PYTHON_PREFIXES))
        if not names:
            continue
        shown = ", ".join(names[:SHOWN]) + (", ..." if len(names) > SHOWN else "")
        count = f"{len(names)} symbol{'' if len(names) == 1 else 's'}"
        problems.append(
            f"{member.name} uses {count} of the Python C-API ({shown}): {PY3_NONE_REMEDY}"
        )
    return problems + _entry_point_problems(wheel_data)


def _entry_point_problems(wheel_data: bytes) -> list[str]:
    """Each shared object that exports a CPython extension module's entry point."""
    problems: list[str] = []
    for member in shared_objects(wheel_data):
        entries = sorted(name for name in member.defined if name.startswith("PyInit_"))
        if entries:
            problems.append(
                f"{member.name} exports {', '.join(entries[:SHOWN])}, a CPython extension "
                "module's entry point, which binds it to the CPython it was built for, in a "
                "py3-none wheel (python: any): build one wheel per Python (python: [...]), "
                "keep to the limited API (abi3:), or export no PyInit_ function"
            )
    return problems
