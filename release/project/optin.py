"""The extensions a setup.py builds only when an environment variable turns them on, read
with `ast`, never run: apex's `if has_flag("--cuda_ext", "APEX_CUDA_EXT"):` around its CUDA
extensions (through a function of the file that reads the variable its argument names), or
`if os.environ.get("BUILD_CUDA_EXT", "0") == "1":` spelled in place. Where no CUDA
extension is built without one, a release build that sets none builds no CUDA: the switch
that builds the most of them is the one to turn on (release.init.torchaxes writes it to
build.env), and the -gencode flags of a branch left off decide no target. Pure.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

from release.project.envtest import env_default, env_key, on_value, with_constants, works_out
from release.project.places import Place
from release.project.pysource import SourceIndex, string_of

EXTENSIONS = frozenset({"CUDAExtension", "CppExtension"})


@dataclass(frozen=True, kw_only=True)
class OptIn:
    """An `if` whose branch builds extensions only when `name` is `on`, off where unset."""

    name: str
    on: str
    place: Place  # the `if`
    read: Place  # where the variable is read (inside `via` where there is one)
    via: str | None  # the file's function the test calls, e.g. has_flag
    cuda_extensions: int
    extensions: int
    lines: tuple[int, int]  # the branch, first and last line


@dataclass(frozen=True, kw_only=True)
class OptIns:
    switches: tuple[OptIn, ...] = ()  # one a variable, its branches' extensions summed
    branches: tuple[tuple[str, int, int], ...] = ()  # each `if`: variable, first, last line
    cuda_unguarded: bool = True  # a CUDAExtension is built with no switch on, or none is

    @property
    def chosen(self) -> OptIn | None:
        """The switch that builds the most CUDA extensions (the first of equals), where
        none is built without one."""
        cuda = [s for s in self.switches if s.cuda_extensions]
        if self.cuda_unguarded or not cuda:
            return None
        return max(cuda, key=lambda s: (s.cuda_extensions, -(s.place.line or 0)))

    @property
    def others(self) -> tuple[OptIn, ...]:
        """The switches init leaves off, where it turns one on."""
        chosen = self.chosen
        return tuple(s for s in self.switches if chosen is not None and s is not chosen)

    def left_off(self, line: int | None, env: Mapping[str, str] | None = None) -> bool:
        """Whether `line` lies in the branch of a switch left off: by init (each but the
        chosen one's), or by a cell whose build.env (`env`) does not set its variable."""
        chosen = self.chosen
        by_init = {chosen.name} if chosen is not None else set()
        on = set(env) if env is not None else by_init
        return line is not None and any(
            first <= line <= last for name, first, last in self.branches if name not in on
        )


NO_OPT_INS = OptIns()


def opt_ins_in(index: SourceIndex, file: str, constants: Mapping[str, ast.expr]) -> OptIns:
    """Each switch whose `if` holds extensions, merged by variable; whether a CUDA
    extension is built outside every such `if`."""
    reader = _Switches(index, file, constants)
    found: dict[int, OptIn] = {}
    cuda = unguarded = 0
    for node in index.of(ast.Call):
        kind = _extension(node)
        if kind is None:
            continue
        cuda += kind == "CUDAExtension"
        guard = reader.guard(node)
        if guard is None:
            unguarded += kind == "CUDAExtension"
            continue
        if_node, switch = guard
        counted = found.get(id(if_node), switch)
        found[id(if_node)] = replace(
            counted,
            extensions=counted.extensions + 1,
            cuda_extensions=counted.cuda_extensions + (kind == "CUDAExtension"),
        )
    merged: dict[str, OptIn] = {}
    for branch in sorted(found.values(), key=lambda s: s.place.line or 0):
        first = merged.get(branch.name)
        merged[branch.name] = (
            branch
            if first is None
            else replace(
                first,
                extensions=first.extensions + branch.extensions,
                cuda_extensions=first.cuda_extensions + branch.cuda_extensions,
            )
        )
    return OptIns(
        switches=tuple(merged.values()),
        branches=tuple((b.name, *b.lines) for b in found.values()),
        cuda_unguarded=cuda == 0 or unguarded > 0,
    )


def _extension(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    return name if name in EXTENSIONS else None


# (the parameter the variable's name comes from, or None and the name itself; the value
# that turns it on; the line it is read at)
_FunctionRead = tuple[str | None, str | None, str, int]
FUNCTION_READS = 64  # the reads of one function worked out: past any switch helper's


class _Switches:
    """Each `if`'s switch, and each function's reads, worked out once: a file of thousands
    of `if has_flag(...)` costs one reading of has_flag, not one a call."""

    def __init__(self, index: SourceIndex, file: str, constants: Mapping[str, ast.expr]) -> None:
        self.index = index
        self.file = file
        self.constants = constants
        self.functions = {f.name: f for f in index.tree.body if isinstance(f, ast.FunctionDef)}
        self.of_if: dict[int, OptIn | None] = {}
        self.of_function: dict[str, tuple[_FunctionRead, ...]] = {}

    def guard(self, node: ast.AST) -> tuple[ast.If, OptIn] | None:
        """The nearest enclosing `if` whose body holds `node` and whose test is a switch."""
        child, parent = node, self.index.parents.get(id(node))
        while parent is not None:
            if isinstance(parent, ast.If) and any(child is s for s in parent.body):
                if id(parent) not in self.of_if:
                    self.of_if[id(parent)] = self._switch(parent)
                switch = self.of_if[id(parent)]
                if switch is not None:
                    return parent, switch
            child, parent = parent, self.index.parents.get(id(parent))
        return None

    def _switch(self, branch: ast.If) -> OptIn | None:
        test = branch.test
        lines = (branch.lineno, getattr(branch.body[-1], "end_lineno", None) or branch.lineno)
        place = Place(file=self.file, line=branch.lineno)
        if isinstance(test, ast.Call) and isinstance(test.func, ast.Name):
            function = self.functions.get(test.func.id)
            bound = _bound(function, test) if function is not None else None
            if function is None or bound is None:
                return None
            for param, literal, on, line in self._function_reads(function):
                name = bound.get(param) if param is not None else literal
                if name is not None:
                    return OptIn(
                        name=name, on=on, place=place, via=function.name, lines=lines,
                        read=Place(file=self.file, line=line), cuda_extensions=0, extensions=0,
                    )  # fmt: skip
            return None
        for node in with_constants(test, self.constants):  # `if KEEP_CUDA_BUILD:`
            variable = string_of(env_key(node))
            if variable is None or not isinstance(node, ast.expr):
                continue
            operand = _operand_holding(test, node, self.constants)
            value = _off_unless(operand, node, self.constants)
            if value is not None:
                return OptIn(
                    name=variable, on=value, place=place, via=None, lines=lines,
                    read=Place(file=self.file, line=node.lineno), cuda_extensions=0, extensions=0,
                )  # fmt: skip
        return None

    def _function_reads(self, function: ast.FunctionDef) -> tuple[_FunctionRead, ...]:
        if function.name not in self.of_function:
            params = {a.arg for a in function.args.args}
            reads: list[_FunctionRead] = []
            for expression, read, key in _function_tests(function, FUNCTION_READS):
                param = key.id if isinstance(key, ast.Name) and key.id in params else None
                literal = string_of(key)
                on = _off_unless(expression, read, self.constants)
                if on is not None and (param is not None or literal is not None):
                    reads.append((param, literal, on, read.lineno))
            self.of_function[function.name] = tuple(reads)
        return self.of_function[function.name]


def _bound(function: ast.FunctionDef, call: ast.Call) -> dict[str, str] | None:
    """The function's parameters bound to the call's literal string arguments."""
    params = [a.arg for a in function.args.args]
    bound: dict[str, str] = {}
    for param, argument in zip(params, call.args, strict=False):
        if (text := string_of(argument)) is not None:
            bound[param] = text
    for keyword in call.keywords:
        if keyword.arg in params and (text := string_of(keyword.value)) is not None:
            bound[keyword.arg] = text
    return bound or None


def _function_tests(
    function: ast.FunctionDef, most: int
) -> Iterator[tuple[ast.expr, ast.expr, ast.expr]]:
    """(expression, read, key) for each environment read (at most `most`) in a test that
    makes the function return True (`if ...: return True`) or in what it returns."""
    count = 0
    for node in ast.walk(function):
        if isinstance(node, ast.If) and _returns_true(node.body):
            expression: ast.expr = node.test
        elif isinstance(node, ast.Return) and node.value is not None:
            expression = node.value
        else:
            continue
        for read in ast.walk(expression):
            key = env_key(read)
            if key is None or not isinstance(read, ast.expr):
                continue
            count += 1
            if count > most:
                return
            yield _operand_holding(expression, read), read, key


def _returns_true(body: list[ast.stmt]) -> bool:
    first = body[0] if body else None
    return (
        isinstance(first, ast.Return)
        and isinstance(first.value, ast.Constant)
        and first.value.value is True
    )


def _operand_holding(
    test: ast.expr, read: ast.expr, constants: Mapping[str, ast.expr] | None = None
) -> ast.expr:
    """The operand of a top-level `or` that holds `read`, itself or through a constant it
    names (that one true makes the test true), else the test."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        for operand in test.values:
            if any(n is read for n in with_constants(operand, constants or {})):
                return operand
    return test


def _off_unless(
    expression: ast.expr, read: ast.expr, constants: Mapping[str, ast.expr]
) -> str | None:
    """The value of the variable that makes `expression` true, where it is false with the
    variable unset (read at its literal default, else empty)."""
    on = on_value(expression, read, constants)
    if on is None:
        return None
    unset = works_out(expression, env_default(read) or "", lambda n: n is read, constants)
    return on if unset is False else None
