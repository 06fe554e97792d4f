"""A Python file of a kernel project as the readers take it: its bytes decoded as Python
decodes them (PEP 263's coding declaration, a UTF-8 BOM, else UTF-8), and its syntax tree
walked once into an index (`SourceIndex`), so that every question release.project.setuppy
and release.project.stableabi ask costs time linear in the file's size: the nodes of each
kind in the order of the walk, each node's parent, and a node's source text
(`ast.get_source_segment` splits the whole file again at every call); and the small
questions both ask of a node (`named`, `string_of`, `dict_item`, `module_assignments`). Pure.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property, lru_cache
from typing import TypeVar

from release.errors import ConfigError

_LINE_END = re.compile(r"\r\n|\r|\n")
N = TypeVar("N", bound=ast.AST)


def decode_python(data: bytes, file: str) -> str:
    """The text of the Python file `file` as Python reads it (newlines as `\\n`); a
    ConfigError naming the file, and the line where it can, where it does not decode."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        if not error.msg.startswith("invalid or missing encoding declaration"):
            # an unknown coding, or a BOM beside another coding
            raise ConfigError(
                [f"{file}: {error.msg}"], hint="declare an encoding Python knows (PEP 263)"
            ) from None
        encoding = "utf-8"  # no declaration: its first lines are not UTF-8, said below
    try:
        text = data.decode(encoding)
    except LookupError:  # a codec that is no text encoding: rot13, hex, zlib_codec
        raise ConfigError(
            [f"{file}: {encoding} is not a text encoding"],
            hint="declare an encoding Python knows (PEP 263)",
        ) from None
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ConfigError(
            [f"{file}:{line}: byte 0x{data[error.start]:02x} is not {encoding}: not Python source"],
            hint="save it as UTF-8, or declare its encoding on its first lines (PEP 263)",
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


# The most tokens a Python file may hold to be handed to Python's parser, which takes about
# 600 bytes of memory a token (its tokens, its memo, the tree): 25 MB of ordinary code holds
# about 2.3 million (benchmarks/init_large.py), a 25 MB one-line list of 12.6 million numbers
# 25 million, which took 14 GB. As many as a JSON or TOML document may hold values.
MAX_PYTHON_TOKENS = 4_000_000
# A token as `token_count` takes it: a string (a triple-quoted one across lines), a comment,
# digits (`1or` is two tokens), a name, or one character of an operator. Each alternative
# begins with its own characters and none can fail once begun (an unclosed string runs to
# its line's or the file's end), so the count never backtracks: linear in the text's length.
_TOKEN = re.compile(
    r'"""(?:[^"\\]+|\\.?|"(?!""))*(?:"""|\Z)'
    r"|'''(?:[^'\\]+|\\.?|'(?!''))*(?:'''|\Z)"
    r'|"(?:[^"\\\n]+|\\.?)*"?'
    r"|'(?:[^'\\\n]+|\\.?)*'?"
    r"|#[^\n]*|\d+|\w+|[^\w\s]",
    re.DOTALL,
)


class Unparsed(ValueError):
    """A Python file that is not parsed: `reason` says why in words (`not Python: invalid
    syntax`), `line` where, if known."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line


@lru_cache(maxsize=2)
def token_count(text: str) -> int:
    """About how many tokens `text` holds, at least as many as Python's tokenizer gives the
    parser bar its NEWLINE and INDENT tokens (an f-string's `{` is counted again, for the
    expression in it), counted without parsing: about a second for 25 MB. Kept for the last
    two texts: a setup.py is parsed by more than one reader."""
    return _TOKEN.subn("", text)[1] + text.count("{")


@lru_cache(maxsize=1)
def _parsed(text: str) -> ast.Module:
    """`ast.parse(text)`, kept for the last text: setup.py's readers (its settings, its
    native sources, its local-version switch) each ask for its tree, which no reader changes.
    A text that fails is parsed again by each (lru_cache keeps no exception)."""
    return ast.parse(text)


def python_tree(text: str) -> ast.Module:
    """The syntax tree of `text`; `Unparsed` saying why where Python would not compile it
    (a syntax error, a NUL, an expression nested past the parser's limits: `L+L+...` of a
    few thousand terms, `not not ...`), or where it holds more than MAX_PYTHON_TOKENS, which
    is then not parsed at all. Each is the file's fault, not a bug of the reader."""
    if len(text) > MAX_PYTHON_TOKENS // 2 and (tokens := token_count(text)) > MAX_PYTHON_TOKENS:
        raise Unparsed(
            f"too large to parse: about {tokens:,} tokens, more than the {MAX_PYTHON_TOKENS:,} "
            "read (25 MB of ordinary code holds about 2.3 million)"
        )
    try:
        return _parsed(text)
    except SyntaxError as error:
        raise Unparsed(f"not Python: {error.msg}", error.lineno) from None
    except ValueError as error:  # a NUL (Python 3.12 makes it a SyntaxError)
        nul = text.find("\0")
        line = text.count("\n", 0, nul) + 1 if nul >= 0 else None
        raise Unparsed(f"not Python: {error}", line) from None
    except (RecursionError, MemoryError):  # the parser's MemoryError says nothing
        raise Unparsed(
            "not Python as Python's parser reads it: an expression nested too deep for it "
            "(operators, brackets, `not` or `lambda` chained past its limits)"
        ) from None


def parse_python(text: str) -> ast.Module | None:
    """`python_tree`, or None where it is `Unparsed`."""
    try:
        return python_tree(text)
    except Unparsed:
        return None


def unparsed(node: ast.AST) -> str:
    """`node`'s source as ast writes it, or a placeholder where it nests too deep to write."""
    try:
        return ast.unparse(node)
    except RecursionError:
        return "(an expression nested too deep to show)"


class SourceIndex:
    """A parsed file's nodes, walked once (breadth first, as `ast.walk`)."""

    def __init__(self, tree: ast.Module, text: str) -> None:
        self.tree = tree
        self.text = text
        self.parents: dict[int, ast.AST] = {}
        self.nodes: list[ast.AST] = [tree]
        kinds: defaultdict[type, list[ast.AST]] = defaultdict(list)
        parents, nodes = self.parents, self.nodes
        index = 0
        while index < len(nodes):  # ast.walk's order; iter_child_nodes inlined (the hot loop)
            node = nodes[index]
            index += 1
            kinds[type(node)].append(node)
            for name in node._fields:
                value = getattr(node, name, None)
                if isinstance(value, ast.AST):
                    parents[id(value)] = node
                    nodes.append(value)
                elif isinstance(value, list):
                    for item in value:
                        if isinstance(item, ast.AST):
                            parents[id(item)] = node
                            nodes.append(item)
        self._kinds = dict(kinds)

    def of(self, kind: type) -> Sequence[ast.AST]:
        """Every node of `kind` (exactly), in the order of the walk."""
        return self._kinds.get(kind, ())

    def of_kinds(self, *kinds: type) -> list[ast.AST]:
        """Every node of any of `kinds` (exactly), in the order of the walk."""
        wanted = set(kinds)
        return [node for node in self.nodes if type(node) in wanted]

    def in_failing_branch(self, node: ast.AST) -> bool:
        """Whether the branch of an `if` that holds `node` also fails outright (`raise`,
        `assert False`), as a project's "not implemented" branch does: nothing built there."""
        child, parent = node, self.parents.get(id(node))
        while parent is not None and not isinstance(parent, ast.If):
            child, parent = parent, self.parents.get(id(parent))
        if parent is None:
            return False
        block = parent.body if any(child is s for s in parent.body) else parent.orelse
        return any(
            isinstance(s, ast.Raise)
            or (isinstance(s, ast.Assert) and isinstance(s.test, ast.Constant) and not s.test.value)
            for s in block
        )

    def test_of(self, node: ast.AST) -> tuple[ast.expr, ast.If | ast.IfExp] | None:
        """(the test, its `if` statement or `x if test else y`) where `node` is (part of)
        the test of one."""
        child, parent = node, self.parents.get(id(node))
        while isinstance(parent, ast.expr) and not (
            isinstance(parent, ast.IfExp) and parent.test is child
        ):
            child, parent = parent, self.parents.get(id(parent))
        if isinstance(parent, (ast.If, ast.IfExp)) and parent.test is child:
            return parent.test, parent
        return None

    @cached_property
    def _line_starts(self) -> list[int]:
        return [0, *(match.end() for match in _LINE_END.finditer(self.text))]

    def _line(self, number: int) -> str:
        starts = self._line_starts
        end = starts[number + 1] if number + 1 < len(starts) else len(self.text)
        return self.text[starts[number] : end]

    def segment(self, node: ast.AST) -> str | None:
        """`ast.get_source_segment(text, node)`, reading only the node's lines."""
        first, last = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
        start, end = getattr(node, "col_offset", None), getattr(node, "end_col_offset", None)
        if first is None or last is None or start is None or end is None:
            return None
        if first == last:
            return self._line(first - 1).encode()[start:end].decode()
        lines = [self._line(first - 1).encode()[start:].decode()]
        lines += [self._line(number) for number in range(first, last - 1)]
        lines.append(self._line(last - 1).encode()[:end].decode())
        return "".join(lines)


def start(node: ast.AST) -> tuple[int, int]:
    """Where `node` starts in the file: (line, column)."""
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def in_file_order(nodes: Iterable[N]) -> list[N]:
    """`nodes` by where each starts in the file (those that start together: as given). Sort
    only the few a question picked out: sorting every node costs more than the walk."""
    return sorted(nodes, key=start)


def module_assignments(tree: ast.Module) -> Mapping[str, tuple[tuple[ast.expr, bool], ...]]:
    """Every assignment of a name outside functions and classes: its value, and whether it
    is unconditional (straight in the module's body)."""
    found: dict[str, list[tuple[ast.expr, bool]]] = {}

    def visit(body: list[ast.stmt], unconditional: bool) -> None:
        for statement in body:
            if isinstance(statement, ast.Assign):
                for target in statement.targets:
                    if isinstance(target, ast.Name):
                        found.setdefault(target.id, []).append((statement.value, unconditional))
            elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
                if isinstance(statement.target, ast.Name):
                    found.setdefault(statement.target.id, []).append(
                        (statement.value, unconditional)
                    )
            elif isinstance(statement, (ast.If, ast.For, ast.While, ast.Try, ast.With)):
                for field in ("body", "orelse", "finalbody"):
                    visit(getattr(statement, field, []), unconditional=False)
                for handler in getattr(statement, "handlers", []):
                    visit(handler.body, unconditional=False)

    visit(tree.body, unconditional=True)
    return {name: tuple(values) for name, values in found.items()}


def named(node: ast.AST, name: str) -> bool:
    """`name` or `anything.name`."""
    return (isinstance(node, ast.Name) and node.id == name) or (
        isinstance(node, ast.Attribute) and node.attr == name
    )


def string_of(node: ast.AST | None) -> str | None:
    """The string a literal says, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def dict_item(node: ast.Dict, key: str) -> ast.expr | None:
    """The value of the literal key `key` of a dict display."""
    for k, v in zip(node.keys, node.values, strict=True):
        if string_of(k) == key:
            return v
    return None


def classes_based_on(index: SourceIndex, base: str) -> list[ast.ClassDef]:
    """The classes of the file with a base whose source names `base` (`bdist_wheel`,
    `_bdist_wheel`, `setuptools.command.bdist_wheel.bdist_wheel`), in file order."""
    found = [
        node
        for node in index.of(ast.ClassDef)
        if isinstance(node, ast.ClassDef)
        and any(base in (index.segment(b) or unparsed(b)) for b in node.bases)
    ]
    return in_file_order(found)
