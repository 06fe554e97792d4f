"""A setup.py whose version function adds a local label (`+<git sha>`) when an environment
variable is on, and whose default turns it on: DeepGEMM's
`DG_USE_LOCAL_VERSION = int(os.getenv('DG_USE_LOCAL_VERSION', '1')) == 1`, then `if
DG_USE_LOCAL_VERSION: revision = '+' + <git rev-parse --short HEAD>`. Such a build makes a
wheel of another version than the release's. Read with `ast`, never run: the switch's test
is worked out for the variable's default and for the values that could turn it off. Or a
version that gets its label outside any test, so that no variable turns it off: DeepEP's
version function, FlashMLA's `version="1.0.0" + rev`. Pure.
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


@dataclass(frozen=True, kw_only=True)
class LocalLabel:
    """A version that gets a local label whatever the environment says (DeepEP's version
    function: `'+' + <git rev-parse --short HEAD>`, else `'+local'`; FlashMLA's `version=
    "1.0.0" + rev`, `rev` a git hash or the time), and where."""

    function: str | None  # the version function; None: setup()'s version expression
    label: Place

    @property
    def text(self) -> str:
        """What init says of it, as a change the project needs."""
        subject = (
            f"{self.function}() adds a local label to every version"
            if self.function
            else "setup()'s version always gets a local label"
        )
        return (
            f"{subject}, and no variable turns it off: each wheel would carry it, where a "
            "release's version has none (matrix.yaml's local-label gives each copy its own)"
        )

    fix = (
        "add it only when a variable is set (flash-attention's FLASH_ATTN_LOCAL_VERSION), or "
        "drop it"
    )


@dataclass(frozen=True, kw_only=True)
class LocalVersion:
    """How setup.py's version gets a local label: a switch on by default, or no switch."""

    switch: LocalVersionSwitch | None = None
    label: LocalLabel | None = None


def local_version(text: str, file: str = "setup.py") -> LocalVersion:
    """The local label setup()'s version gets by default (see the classes); the version
    read once (or not at all where the file does not parse)."""
    tree = parse_python(text)
    if tree is None:
        return LocalVersion()
    constants = {
        t.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    version = _setup_version(tree)
    if isinstance(version, ast.Name):  # a module constant; else assigned in a block
        version = constants.get(version.id, version)
    function = _version_function(tree, version)
    if function is not None:
        switch = _switch_of(function, constants, file)
        labels = _unguarded_labels(function.body)
    elif version is not None:
        switch = None
        names = {n.id for n in ast.walk(version) if isinstance(n, ast.Name)}
        assigned = [
            a.value
            for a in _unguarded_statements(tree.body)
            if isinstance(a, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id in names for t in a.targets)
        ]
        labels = _unguarded_labels([version, *assigned])
    else:
        return LocalVersion()
    label = None
    if labels:
        line = min(getattr(n, "lineno", 0) for n in labels)
        label = LocalLabel(
            function=function.name if function else None, label=Place(file=file, line=line)
        )
    return LocalVersion(switch=switch, label=label)


def local_version_switch(text: str, file: str = "setup.py") -> LocalVersionSwitch | None:
    """The switch of the module doc where setup()'s version function has one that is on
    by default; None otherwise (or where the file does not parse)."""
    return local_version(text, file).switch


def _switch_of(
    function: ast.FunctionDef, constants: dict[str, ast.expr], file: str
) -> LocalVersionSwitch | None:
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


def _unguarded_labels(nodes: list[ast.stmt] | list[ast.expr]) -> list[ast.AST]:
    """The local labels `nodes` add outside any test (`if`, a conditional expression) and any
    function, whatever the environment says: a `"+..."` string that is a value (assigned,
    returned, added), not an argument or an operand of a comparison (`v.split("+")`,
    `"+" in v` read a label, they add none)."""
    out: list[ast.AST] = []
    pending: list[tuple[ast.AST, ast.AST | None]] = [(n, None) for n in nodes]
    while pending:
        node, parent = pending.pop()
        if isinstance(node, (ast.If, ast.IfExp, ast.FunctionDef, ast.Lambda, ast.ClassDef)):
            continue  # a label under a test may be a switch's (_switch_of)
        if _starts_label(node):
            if not isinstance(parent, (ast.Call, ast.Compare, ast.keyword)):
                out.append(node)
            continue
        pending.extend((child, node) for child in ast.iter_child_nodes(node))
    return out


def _unguarded_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of `body` and of the `try`, `with` and loop blocks in it, outside any
    `if` and any function: the module's, without walking its expressions."""
    out: list[ast.stmt] = []
    pending = list(body)
    while pending:
        statement = pending.pop()
        if isinstance(statement, (ast.If, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        out.append(statement)
        for name in ("body", "orelse", "finalbody", "handlers"):
            for child in getattr(statement, name, ()):
                pending.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])
    return out


def _setup_version(tree: ast.Module) -> ast.expr | None:
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and call_name(n.func) == "setup"]
    return next((k.value for c in calls for k in c.keywords if k.arg == "version"), None)


def _version_function(tree: ast.Module, version: ast.expr | None) -> ast.FunctionDef | None:
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
