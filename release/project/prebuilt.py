"""A bdist_wheel subclass of a setup.py whose run() downloads a prebuilt wheel instead of
building (flash-attention's `CachedWheelsCommand`), read with `ast`, never run: where it
downloads, and the variables whose values make run() build instead, worked out from which
branch holds the download. Pure.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from release.project.envtest import EnvRead, env_name, value_for, with_constants
from release.project.places import Place
from release.project.pysource import SourceIndex, classes_based_on


@dataclass(frozen=True, kw_only=True)
class PrebuiltDownload:
    """A bdist_wheel subclass whose run() downloads a prebuilt wheel, and the variables its
    tests read: each, at its `on` value, makes run() build (`FLASH_ATTENTION_FORCE_BUILD=TRUE`)."""

    command: str  # the class
    place: Place  # the download
    forced_by: tuple[EnvRead, ...]


# what a bdist_wheel.run() calls to fetch a wheel
DOWNLOADS = frozenset({"urlretrieve", "urlopen", "download", "download_file", "download_url"})
HTTP_MODULES = frozenset({"requests", "httpx", "urllib3"})


def prebuilt_in(
    index: SourceIndex, file: str, constants: Mapping[str, ast.expr]
) -> PrebuiltDownload | None:
    """The first class based on bdist_wheel whose run() downloads."""
    for node in classes_based_on(index, "bdist_wheel"):
        for run in node.body:
            if not isinstance(run, ast.FunctionDef) or run.name != "run":
                continue
            fetch = next((n for n in ast.walk(run) if _is_download(n)), None)
            if fetch is None:
                continue
            found: dict[str, EnvRead] = {}
            for branch in (n for n in ast.walk(run) if isinstance(n, ast.If)):
                for read in _building(branch, fetch, file, constants):
                    found.setdefault(read.name, read)
            return PrebuiltDownload(
                command=node.name,
                place=Place(file=file, line=getattr(fetch, "lineno", None)),
                forced_by=tuple(found.values()),
            )
    return None


def _building(
    branch: ast.If, fetch: ast.AST, file: str, constants: Mapping[str, ast.expr]
) -> Iterator[EnvRead]:
    """The variables of `branch`'s test, each with a value that makes run() build: one that
    keeps the branch from running where it holds the download, one that runs it where it
    builds or returns first (`if FORCE or not KEEP: return super().run()`)."""
    if any(n is fetch for s in branch.body for n in ast.walk(s)):
        want = False
    elif any(_builds_or_returns(n) for s in branch.body for n in ast.walk(s)):
        want = True
    else:
        return
    for inner in with_constants(branch.test, constants):
        name = env_name(inner)
        if name is not None:
            on = value_for(branch.test, inner, constants, want=want)
            yield EnvRead(
                name=name, place=Place(file=file, line=getattr(inner, "lineno", None)), on=on
            )


def _builds_or_returns(node: ast.AST) -> bool:
    """A `return`, or a call of `run` (`super().run()`, `_bdist_wheel.run(self)`)."""
    return isinstance(node, ast.Return) or (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "run"
    )


def _is_download(node: ast.AST) -> bool:
    """`urllib.request.urlretrieve(...)`, `requests.get(...)` and their kind."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name in DOWNLOADS:
        return True
    return (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id in HTTP_MODULES
    )
