"""Which environment variable a setup.py node reads (`env_name`), and what a test of one
works out to with the variable at a given value, read with `ast`, never run:
`os.getenv("X", "0") == "1"`, `.lower() in ("1", "true")`, `int(os.getenv("X", "0")) == 2`,
`not`, `and`, `or` (an operand that decides one decides it, whatever the others are),
module constants. Anything else (an f-string, a call it does not know, another variable)
cannot be worked out: None. release.project.localversion asks which value turns a switch
off, release.project.setuppy which turns one on (`on_value`), release.project.prebuilt which
keeps a download from running (`value_for`): a value is only ever one the test comes out
as asked with. Pure.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from release.project.places import Place
from release.project.pysource import named, string_of

IsRead = Callable[[ast.AST], bool]  # whether a node is the read of the variable
ON_FALLBACK = "1"  # tried last, where no literal the test compares with makes it true


@dataclass(frozen=True, kw_only=True)
class EnvRead:
    """An environment variable a file reads, where, and the value that turns it on
    (None: no value was found that the test is true with)."""

    name: str
    place: Place
    on: str | None = "1"
    default: str | None = None  # a literal default it is read with (getenv's second argument)


def env_key(node: ast.AST) -> ast.expr | None:
    """The key `os.environ.get(K)`, `os.getenv(K)` or `os.environ[K]` reads with (a literal
    or an expression, e.g. a function's parameter)."""
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        reads = isinstance(func, ast.Attribute) and func.attr == "get" and is_environ(func.value)
        if reads or named(func, "getenv"):
            return node.args[0]
    if (
        isinstance(node, ast.Subscript)
        and is_environ(node.value)
        and isinstance(node.ctx, ast.Load)
    ):
        return node.slice
    return None


def env_name(node: ast.AST) -> str | None:
    """The variable `os.environ.get("X")`, `os.getenv("X")` or `os.environ["X"]` reads, or
    `"X" in os.environ` asks is set (a switch any value turns on: `works_out` takes its
    value standing in for the test, which a value chosen is never empty for)."""
    if (
        isinstance(node, ast.Compare)
        and len(node.ops) == 1
        and isinstance(node.ops[0], ast.In)
        and is_environ(node.comparators[0])
    ):
        return string_of(node.left)
    return string_of(env_key(node))


def env_default(node: ast.AST) -> str | None:
    """The literal default a read gives (getenv's or environ.get's second argument)."""
    return string_of(node.args[1]) if isinstance(node, ast.Call) and len(node.args) > 1 else None


def is_environ(node: ast.AST) -> bool:
    return named(node, "environ")


class Unknown(Exception):
    """An expression this reader does not work out."""


def works_out(
    expression: ast.expr, value: str, is_read: IsRead, constants: Mapping[str, ast.expr]
) -> bool | None:
    """Whether `expression` is true with the variable (each node `is_read` says is its read)
    at `value`; None where it cannot say."""
    try:
        return bool(value_of(expression, value, is_read, constants, depth=0))
    except Unknown:
        return None


def on_value(expression: ast.AST, read: ast.AST, constants: Mapping[str, ast.expr]) -> str | None:
    """A value of the variable `read` reads that makes `expression` true, proven by working
    the expression out with it: each literal the read is compared with (`== "TRUE"`, `in
    ("1", "true")`, `== 2` for an `int()` of it), then "1"; None where none does (an empty
    value is never chosen: a CI runner or a container may treat it as unset)."""
    return value_for(expression, read, constants, want=True)


def value_for(
    expression: ast.AST, read: ast.AST, constants: Mapping[str, ast.expr], *, want: bool
) -> str | None:
    """`on_value`, for a value that makes `expression` come out `want` (false: the value
    that keeps an `if`'s branch from running)."""
    if not isinstance(expression, ast.expr):
        return None
    for candidate in (*_compared_with(expression, read, constants), ON_FALLBACK):
        if candidate and works_out(expression, candidate, lambda n: n is read, constants) is want:
            return candidate
    return None


def _compared_with(
    expression: ast.expr, read: ast.AST, constants: Mapping[str, ast.expr]
) -> Iterator[str]:
    """The values the other side of each comparison holding `read` works out to, as text:
    in `expression` and in the module constants it names (`FORCE = getenv(...) == "TRUE"`
    tested as `if FORCE or ...`)."""
    for node in with_constants(expression, constants):
        if not isinstance(node, ast.Compare) or len(node.ops) != 1:
            continue
        left, right = node.left, node.comparators[0]
        holds = [side for side in (left, right) if any(n is read for n in ast.walk(side))]
        if len(holds) != 1:
            continue
        other = right if holds[0] is left else left
        try:
            said = value_of(other, "", lambda _: False, constants, depth=0)
        except Unknown:
            continue
        for item in said if isinstance(said, tuple) else (said,):
            if isinstance(item, (str, int)) and not isinstance(item, bool):
                yield str(item)


def with_constants(
    expression: ast.expr, constants: Mapping[str, ast.expr], depth: int = 0
) -> Iterator[ast.AST]:
    """The nodes of `expression`, and of each module constant a name in it stands for (two
    levels deep, as `value_of` reads them)."""
    for node in ast.walk(expression):
        yield node
        if isinstance(node, ast.Name) and node.id in constants and depth < 2:
            yield from with_constants(constants[node.id], constants, depth + 1)


def value_of(
    node: ast.expr, env: str, is_read: IsRead, constants: Mapping[str, ast.expr], depth: int
) -> object:
    """`node` worked out with the variable read at `env` (raises Unknown)."""
    if depth > 8:
        raise Unknown

    def again(inner: ast.expr) -> object:
        return value_of(inner, env, is_read, constants, depth + 1)

    if is_read(node):
        return env
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id in constants:
        return again(constants[node.id])
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not again(node.operand)
    if isinstance(node, ast.BoolOp):  # an operand that decides it decides it, known or not
        deciding = not isinstance(node.op, ast.And)  # `or`: a true one; `and`: a false one
        unknown = False
        for operand in node.values:
            try:
                if bool(again(operand)) is deciding:
                    return deciding
            except Unknown:
                unknown = True
        if unknown:
            raise Unknown
        return not deciding
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return tuple(again(e) for e in node.elts)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        return _compare(node.ops[0], again(node.left), again(node.comparators[0]))
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        return _call(node, again(node.args[0]))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args:
        method = node.func.attr
        subject = again(node.func.value)
        if isinstance(subject, str) and method in ("lower", "upper", "strip") and not node.keywords:
            return getattr(subject, method)()
    raise Unknown


def _compare(op: ast.cmpop, left: object, right: object) -> bool:
    if isinstance(op, ast.Eq):
        return left == right
    if isinstance(op, ast.NotEq):
        return left != right
    if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (tuple, str)):
        if isinstance(right, str) and not isinstance(left, str):
            raise Unknown  # `1 in "1"` raises where Python runs it
        inside = left in right if isinstance(right, tuple) else str(left) in right
        return inside if isinstance(op, ast.In) else not inside
    raise Unknown


def _call(node: ast.Call, argument: object) -> object:
    name = call_name(node.func)
    try:
        if name == "int":
            return int(str(argument))
        if name == "bool":
            return bool(argument)
        if name == "str":
            return str(argument)
    except ValueError:
        raise Unknown from None
    raise Unknown


def call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None
