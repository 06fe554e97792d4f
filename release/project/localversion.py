"""A setup.py whose version function adds a local label (`+<git sha>`) when an environment
variable is on, and whose default turns it on: DeepGEMM's
`DG_USE_LOCAL_VERSION = int(os.getenv('DG_USE_LOCAL_VERSION', '1')) == 1`, then `if
DG_USE_LOCAL_VERSION: revision = '+' + <git rev-parse --short HEAD>`. Such a build makes a
wheel of another version than the release's. Read with `ast`, never run: the switch's test
is worked out for the variable's default and for the values that could turn it off. Pure.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from release.project.envtest import call_name, works_out
from release.project.places import Place
from release.project.pysource import parse_python

OFF_CANDIDATES = ("0", "", "false", "False", "no", "off")


@dataclass(frozen=True, kw_only=True)
class LocalVersionSwitch:
    """The variable, where it is read with its default, the value that turns it off, the
    version function and where it adds the label."""

    name: str
    place: Place
    default: str
    off: str
    function: str
    label: Place


def local_version_switch(text: str, file: str = "setup.py") -> LocalVersionSwitch | None:
    """The switch of the module doc where setup()'s version function has one that is on
    by default; None otherwise (or where the file does not parse)."""
    tree = parse_python(text)
    if tree is None:
        return None
    constants = {
        t.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    function = _version_function(tree, constants)
    if function is None:
        return None
    for branch in ast.walk(function):
        if not isinstance(branch, ast.If):
            continue
        label = next((n for b in branch.body for n in ast.walk(b) if _starts_label(n)), None)
        if label is None:
            continue
        found = _switch(branch.test, constants, file)
        if found is not None:
            name, place, default, off = found
            labelled = Place(file=file, line=getattr(label, "lineno", None))
            return LocalVersionSwitch(
                name=name, place=place, default=default, off=off, function=function.name,
                label=labelled,
            )  # fmt: skip
    return None


def _version_function(tree: ast.Module, constants: dict[str, ast.expr]) -> ast.FunctionDef | None:
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and call_name(n.func) == "setup"]
    version = next((k.value for c in calls for k in c.keywords if k.arg == "version"), None)
    if isinstance(version, ast.Name):
        version = constants.get(version.id)
    if not isinstance(version, ast.Call) or not isinstance(version.func, ast.Name):
        return None
    wanted = version.func.id
    return next((f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == wanted), None)


def _starts_label(node: ast.AST) -> bool:
    """A string that starts a local label: `'+'`, `'+local'`, `f'+{sha}'`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.startswith("+")
    if isinstance(node, ast.JoinedStr) and node.values:
        first = node.values[0]
        return isinstance(first, ast.Constant) and str(first.value).startswith("+")
    return False


def _switch(
    test: ast.expr, constants: dict[str, ast.expr], file: str
) -> tuple[str, Place, str, str] | None:
    """(variable, where it is read, its default, a value that turns the test off) where the
    test reads one variable with a default that turns it on."""
    expression = constants.get(test.id, test) if isinstance(test, ast.Name) else test
    reads = [n for n in ast.walk(expression) if _env_read(n) is not None]
    if len(reads) != 1:
        return None
    name, default = _env_read(reads[0]) or ("", None)
    if default is None:
        return None
    if _works_out(expression, default, constants) is not True:
        return None
    off = next((v for v in OFF_CANDIDATES if _works_out(expression, v, constants) is False), None)
    if off is None:
        return None
    return name, Place(file=file, line=getattr(reads[0], "lineno", None)), default, off


def _env_read(node: ast.AST) -> tuple[str, str | None] | None:
    """(variable, default) of `os.getenv("X", "1")` or `os.environ.get("X", "1")`."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    reads = call_name(func) == "getenv" or (
        isinstance(func, ast.Attribute)
        and func.attr == "get"
        and call_name(func.value) == "environ"
    )
    first = node.args[0]
    if not reads or not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        return None
    default = node.args[1] if len(node.args) > 1 else None
    if isinstance(default, ast.Constant) and isinstance(default.value, (str, int)):
        return first.value, str(default.value)
    return first.value, None


def _works_out(expression: ast.expr, value: str, constants: dict[str, ast.expr]) -> bool | None:
    """Whether the test is on with the variable at `value`; None where it cannot say."""
    return works_out(expression, value, lambda node: _env_read(node) is not None, constants)
