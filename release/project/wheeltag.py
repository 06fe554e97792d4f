"""A bdist_wheel subclass of a setup.py whose get_tag() tags the wheel with no Python ABI
(xformers' `bdist_wheel_abi_none`: `return "py39", "none", plat_tag`), read with `ast`,
never run: the project declares one wheel for every Python, its extensions using no Python
C-API (libtorch's TORCH_LIBRARY, loaded by torch.ops). Pure.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from release.project.places import Place
from release.project.pysource import SourceIndex, classes_based_on, string_of


@dataclass(frozen=True, kw_only=True)
class AbiNone:
    """The class and where its get_tag() returns the `none` ABI, with the Python tag it
    returns (None where computed)."""

    command: str
    place: Place
    python_tag: str | None


def abi_none_in(index: SourceIndex, file: str) -> AbiNone | None:
    """The first bdist_wheel subclass whose get_tag() returns a tag of the `none` ABI (every
    return of it does)."""
    for node in classes_based_on(index, "bdist_wheel"):
        for method in node.body:
            if not isinstance(method, ast.FunctionDef) or method.name != "get_tag":
                continue
            returns = [n for n in ast.walk(method) if isinstance(n, ast.Return)]
            tags = [r.value for r in returns if isinstance(r.value, ast.Tuple)]
            if not returns or len(tags) != len(returns):
                continue
            if all(len(t.elts) == 3 and string_of(t.elts[1]) == "none" for t in tags):
                first = tags[0]
                return AbiNone(
                    command=node.name,
                    place=Place(file=file, line=first.lineno),
                    python_tag=string_of(first.elts[0]),
                )
    return None
