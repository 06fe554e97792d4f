"""A py3-none wheel promises every CPython: its shared objects use no Python C-API, as an
abi3 wheel's keep to the limited API (release.inspection.limitedapi). A C-API symbol it
leaves undefined (`Py*`, `_Py*`) binds it to the CPython it was built with, or fails to
load in the others (`undefined symbol: PyUnicode_AsUTF8`).

Pure: `python_api_problems` over the wheel's bytes.
"""

from __future__ import annotations

from release.inspection.limitedapi import capped
from release.inspection.torchabi import PYTHON_PREFIXES, shared_objects

PY3_NONE_REMEDY = (
    "a py3-none wheel loads in every CPython and may use no Python C-API (build one wheel "
    "per Python, python: [...], or for the limited API, abi3:)"
)


def python_api_problems(wheel_data: bytes) -> list[str]:
    """Each shared object of the wheel `wheel_data` that leaves a Python C-API symbol
    undefined, with the symbols (at most LISTED_PER_OBJECT of them, then how many more)."""
    problems: list[str] = []
    for member in shared_objects(wheel_data):
        names = sorted(s.name for s in member.undefined if s.name.startswith(PYTHON_PREFIXES))
        problems += capped(
            member.name,
            [f"undefined symbol {name} of the Python C-API: {PY3_NONE_REMEDY}" for name in names],
            "more of the Python C-API",
        )
    return problems
