"""Typed loading of YAML documents into frozen dataclasses, with file:line:col errors.

The dataclasses themselves are the specification: their type hints drive both the loader
(`load_document`) and the JSON Schema (`json_schema`), so the two cannot disagree.
Supported field types: str, int, bool, Literal[...], list[T], dict[str, T], T | None,
nested dataclasses, scalar classes that define `from_yaml` and `yaml_schema`, and unions of
types written in different shapes (`str | list[T]`: a scalar, a list, a mapping).

Every problem found is collected (with the key path and the position in the file) before
anything is raised; unknown keys get a "did you mean".
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, get_args, get_origin

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    CollectionStartEvent,
    NodeEvent,
    ScalarEvent,
)
from ruamel.yaml.scalarfloat import ScalarFloat

from release.errors import SHOWN_CHARS, shown
from release.fsutil import LONE_SURROGATE

T = TypeVar("T")

# Bounds on a document, far above what any release matrix needs (a few KB, depth 4).
MAX_DOCUMENT_BYTES = 1 << 20
MAX_DEPTH = 32
MAX_VALUES = 20_000  # scalars and collections, every alias expanded
MAX_ITEMS = 1_000  # entries of one list or mapping
MAX_SCALAR_CHARS = 4_096
# What would act when a value is shown: a carriage return and the other C0 and C1 controls
# (a terminal escape), the Unicode line separators, and every format character (Unicode's
# category Cf: bidi controls, zero-width characters, tag characters U+E0000-E007F, ...),
# which would change or hide what is shown. A tab and a line feed are kept: a command may
# quote a script of several lines (`sh -c '...'` in a literal block); names and paths refuse
# them where they are checked.
_UNSHOWN = re.compile(
    "[\x01-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e"
    "\u2060-\u206f\ufeff\ufff9-\ufffb]"
)


def unshown_character(value: str) -> str | None:
    """The first character of `value` that matrix.yaml refuses in a value (_UNSHOWN, or a
    format character), as it is escaped (`\\n`, `\\u2028`), or None."""
    found = _UNSHOWN.search(value)
    before = value[: found.start()] if found else value
    if not before.isascii():  # a format character is past ASCII: only then is each looked at
        for character in before:
            if character > "\x7f" and unicodedata.category(character) == "Cf":
                return ascii(character)[1:-1]
    return ascii(found.group())[1:-1] if found else None


def scalar_problem(value: str) -> str | None:
    """Why matrix.yaml refuses `value` as a scalar (a key or a value), or None: the one rule
    the loader holds every scalar to, which `release init` asks of each value it writes
    where it reads it."""
    if len(value) > MAX_SCALAR_CHARS:
        return f"a value longer than {MAX_SCALAR_CHARS} characters"
    if "\0" in value:  # no path, name or command can hold one
        return "a value holding a NUL character"
    if LONE_SURROGATE.search(value):  # "\ud800" in YAML: no character, no UTF-8
        return "a value holding a lone surrogate (\\uD800-\\uDFFF)"
    if found := unshown_character(value):
        return (
            f"a value holding the control character {found} (what a terminal or a CI log "
            "acts on: it would be shown as part of a message)"
        )
    return None


# The YAML versions ruamel reads; of another `%YAML` directive it fails an assert.
_YAML_VERSIONS = ("1.1", "1.2")
_DIRECTIVE = re.compile(r"%YAML(?:[ \t]+([^ \t#]*))?(?=[ \t]|$)")


def directive_problem(text: str, filename: str) -> str | None:
    """Why a `%YAML` directive of the document's prologue names a version ruamel cannot
    read (any but 1.1 and 1.2), at its line; None when none does."""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("%"):
            found = _DIRECTIVE.match(line)
            version = found.group(1) if found else None
            if found and version not in _YAML_VERSIONS:
                said = shown(version) if version else "no version"
                return (
                    f"{filename}:{number}:1: a %YAML directive of {said} "
                    f"(YAML {' or '.join(_YAML_VERSIONS)} is read: remove the line)"
                )
        elif line.strip() and not line.lstrip().startswith("#"):
            return None  # the prologue ends where the document begins
    return None


def bounds_problem(text: str, filename: str) -> str | None:
    """Why a YAML document is too large or too deep to load, judged from its parse events
    (which the parser produces without recursion); None when it is within the bounds.
    Aliases count as often as they are expanded, so an alias bomb is caught here, and an
    alias inside the collection it names (which ruamel cannot compose) too."""
    if len(text.encode("utf-8", errors="replace")) > MAX_DOCUMENT_BYTES:
        return f"{filename}: larger than {MAX_DOCUMENT_BYTES // 1024} KiB (a matrix is a few KB)"
    if problem := directive_problem(text, filename):
        return problem
    anchored: dict[str, int] = {}
    stack: list[tuple[int, str | None, int]] = []  # (values inside, anchor, items)
    total = 0

    def where(event: NodeEvent | CollectionEndEvent) -> str:
        mark = event.start_mark
        return f"{filename}:{mark.line + 1}:{mark.column + 1}"

    def add(count: int) -> None:
        nonlocal total
        total += count
        if stack:
            inside, anchor, items = stack[-1]
            stack[-1] = (inside + count, anchor, items + 1)

    for event in YAML(typ="rt").parse(text):
        anchor = getattr(event, "anchor", None)
        if not isinstance(event, AliasEvent) and anchor is not None and anchor in anchored:
            return f"{where(event)}: the anchor &{anchor[:SHOWN_CHARS]} is defined twice"
        if isinstance(event, CollectionStartEvent):
            if len(stack) >= MAX_DEPTH:
                return f"{where(event)}: nested deeper than {MAX_DEPTH} levels"
            stack.append((0, event.anchor, 0))
            if event.anchor is not None:
                anchored[event.anchor] = 1  # a placeholder until its end
        elif isinstance(event, CollectionEndEvent):
            inside, anchor, _ = stack.pop()
            if anchor is not None:
                anchored[anchor] = inside + 1
            add(inside + 1)
        elif isinstance(event, ScalarEvent):
            # ruamel marks each fold of a folded (>) block scalar with \a in its parse
            # events; YAML allows no such character in a block scalar, so it is only that
            folded = event.value.replace("\a", "") if event.style == ">" else event.value
            if problem := scalar_problem(folded):
                return f"{where(event)}: {problem}"
            if event.anchor is not None:
                anchored[event.anchor] = 1
            add(1)
        elif isinstance(event, AliasEvent):
            if any(open_anchor == event.anchor for _, open_anchor, _ in stack):
                return (
                    f"{where(event)}: the alias *{(event.anchor or '')[:SHOWN_CHARS]} is inside "
                    "the collection it names (a recursive alias)"
                )
            add(anchored.get(event.anchor or "", 1))
        else:
            continue
        if stack and stack[-1][2] > MAX_ITEMS:
            return f"{where(event)}: more than {MAX_ITEMS} entries in one list or mapping"
        if total > MAX_VALUES:
            return (
                f"{where(event)}: the document expands to more than {MAX_VALUES} values "
                "(aliases count once per use)"
            )
    return None


@dataclass(frozen=True)
class Position:
    line: int  # 1-based
    column: int  # 1-based


@dataclass(frozen=True)
class Problem:
    position: Position | None
    path: str
    message: str

    def render(self, filename: str) -> str:
        where = filename
        if self.position is not None:
            where = f"{filename}:{self.position.line}:{self.position.column}"
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


def key_of(field: dataclasses.Field[Any]) -> str:
    """The YAML key of a dataclass field: metadata `key`, else the name with dashes."""
    return str(field.metadata.get("key", field.name.replace("_", "-")))


def optional(doc: str) -> Any:
    """A dataclass field for a key the document may leave out (None), with `doc` as its
    description in the JSON Schema."""
    return dataclasses.field(default=None, metadata={"doc": doc})


_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def join_path(parent: str, key: object) -> str:
    """`defaults.sms[2]`, `cuda["12.9"].ptx`: keys that are not names get brackets."""
    if isinstance(key, int) and not isinstance(key, bool):
        return f"{parent}[{key}]"
    text = str(key)
    if len(text) > SHOWN_CHARS:
        text = text[: SHOWN_CHARS - 3] + "..."
    if not _PLAIN_KEY.fullmatch(text):
        return f'{parent}["{text}"]'
    return f"{parent}.{text}" if parent else text


def float_text(value: ScalarFloat | float) -> str:
    """The text a YAML float was written as (`12.10` stays `12.10`, not `12.1`)."""
    if isinstance(value, ScalarFloat):
        width = getattr(value, "_width", None)
        prec = getattr(value, "_prec", None)
        if isinstance(width, int) and isinstance(prec, int) and width > prec >= 0:
            return f"{float(value):.{width - prec - 1}f}"
    return repr(float(value))


# bool before int: a boolean is an int to isinstance
_TYPE_NAMES: tuple[tuple[type, str], ...] = (
    (type(None), "null"),
    (bool, "a boolean"),
    (int, "an integer"),
    (float, "a number"),
    (str, "a string"),
    (list, "a list"),
    (dict, "a mapping"),
)


def _type_name(value: object) -> str:
    for kind, name in _TYPE_NAMES:
        if isinstance(value, kind):
            return name
    return type(value).__name__


def did_you_mean(word: str, options: list[str]) -> str:
    """`; did you mean 'x'?` for the closest option, or ''."""
    close = difflib.get_close_matches(word[:SHOWN_CHARS], options, n=1, cutoff=0.5)
    return f"; did you mean {close[0]!r}?" if close else ""


def _key_text(key: object) -> str:
    return float_text(key) if isinstance(key, float) else str(key)


# A union of several types (`str | list[CopySpec]`) is loaded as the one of its types whose
# YAML shape the node has: so no two of its types may share a shape.
_SHAPE_NAMES = {"scalar": "a string", "list": "a list", "mapping": "a mapping"}


def _shape_of(annotation: Any) -> str:
    """The YAML shape a type of a union is written in: a scalar, a list or a mapping."""
    origin = get_origin(annotation)
    if origin is list:
        return "list"
    if origin is dict or (dataclasses.is_dataclass(annotation) and isinstance(annotation, type)):
        return "mapping"
    if annotation is str:
        return "scalar"
    raise TypeError(f"unsupported type in a union: {annotation!r}")


def _node_shape(node: object) -> str:
    if isinstance(node, list):
        return "list"
    if isinstance(node, dict):
        return "mapping"
    return "scalar" if isinstance(node, str) else "other"


class _Missing:
    pass


MISSING: Any = _Missing()


class DocumentLoader:
    """Walks a ruamel round-trip document against a dataclass, collecting problems."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.positions: dict[str, Position] = {}

    def problem(self, path: str, message: str) -> None:
        self.problems.append(Problem(self.position(path), path, message))

    def position(self, path: str) -> Position | None:
        """The position recorded for `path`, or for its closest recorded parent."""
        probe = path
        while probe:
            if probe in self.positions:
                return self.positions[probe]
            cut = max(probe.rfind("."), probe.rfind("["))
            probe = probe[:cut] if cut > 0 else ""
        return self.positions.get("")

    def _record_children(self, node: object, path: str) -> None:
        """Remember where each child starts: the key of a block, the value of a scalar."""
        if isinstance(node, CommentedMap):
            for key in node:
                try:
                    if isinstance(node[key], dict | list):
                        line, col = node.lc.key(key)
                    else:
                        line, col = node.lc.value(key)
                except (KeyError, TypeError):
                    continue
                child = join_path(path, _key_text(key))
                self.positions.setdefault(child, Position(line + 1, col + 1))
        elif isinstance(node, CommentedSeq):
            for index in range(len(node)):
                try:
                    line, col = node.lc.item(index)
                except (KeyError, IndexError, TypeError):
                    continue
                self.positions.setdefault(join_path(path, index), Position(line + 1, col + 1))

    def _key_position(self, node: CommentedMap, key: object) -> Position | None:
        try:
            line, col = node.lc.key(key)
        except (KeyError, TypeError):
            return None
        return Position(line + 1, col + 1)

    def load(self, annotation: Any, node: object, path: str) -> Any:
        """Convert `node` to `annotation`; on a problem record it and return MISSING."""
        self._record_children(node, path)
        origin = get_origin(annotation)
        if origin in (typing.Union, types.UnionType):
            options = [a for a in get_args(annotation) if a is not type(None)]
            if node is None and len(options) < len(get_args(annotation)):
                return None
            if len(options) == 1:
                return self.load(options[0], node, path)
            chosen = next((o for o in options if _shape_of(o) == _node_shape(node)), None)
            if chosen is None:
                said = " or ".join(_SHAPE_NAMES[_shape_of(o)] for o in options)
                self.problem(path, f"expected {said}, got {_type_name(node)}")
                return MISSING
            return self.load(chosen, node, path)
        if origin is Literal:
            choices = get_args(annotation)
            if node in choices:
                return node
            hint = did_you_mean(str(node), [str(c) for c in choices])
            allowed = ", ".join(repr(c) for c in choices)
            self.problem(path, f"{shown(node)} is not one of {allowed}{hint}")
            return MISSING
        if origin is list:
            (item_type,) = get_args(annotation)
            if not isinstance(node, list):
                self.problem(path, f"expected a list, got {_type_name(node)}")
                return MISSING
            items = [self.load(item_type, item, join_path(path, i)) for i, item in enumerate(node)]
            return MISSING if any(i is MISSING for i in items) else items
        if origin is dict:
            _, value_type = get_args(annotation)
            if not isinstance(node, dict):
                self.problem(path, f"expected a mapping, got {_type_name(node)}")
                return MISSING
            result: dict[str, Any] = {}
            raw_keys: dict[str, object] = {}
            failed = False
            for raw_key, raw_value in node.items():
                key = self.load_key(raw_key, node, path)
                if key is MISSING:
                    failed = True
                    continue
                if key in raw_keys:  # `12.9:` and `"12.9":`, keys to ruamel, are one here
                    self._twice(node, raw_keys[key], raw_key, join_path(path, key))
                    failed = True
                    continue
                raw_keys[key] = raw_key
                value = self.load(value_type, raw_value, join_path(path, key))
                failed = failed or value is MISSING
                result[key] = value
            return MISSING if failed else result
        from_yaml = getattr(annotation, "from_yaml", None)
        if from_yaml is not None:
            try:
                return from_yaml(node)
            except ValueError as error:
                self.problem(path, str(error))
                return MISSING
        if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
            return self.load_dataclass(annotation, node, path)
        if annotation is bool:
            if isinstance(node, bool):
                return node
            self.problem(path, f"expected true or false, got {_type_name(node)}")
            return MISSING
        if annotation is int:
            if isinstance(node, int) and not isinstance(node, bool):
                return node
            self.problem(path, f"expected an integer, got {_type_name(node)}")
            return MISSING
        if annotation is str:
            if isinstance(node, str):
                return node
            remedy = " (quote it)" if isinstance(node, int | float) else ""
            self.problem(path, f"expected a string, got {_type_name(node)}{remedy}")
            return MISSING
        raise TypeError(f"unsupported annotation {annotation!r}")

    def _twice(self, node: Mapping[Any, Any], first: object, again: object, path: str) -> None:
        """A problem at `again`, a key of `node` written as another YAML type than `first`
        (a number, a string) which names the same key."""
        position, before = None, None
        if isinstance(node, CommentedMap):
            position = self._key_position(node, again)
            before = self._key_position(node, first)
        said = f"line {before.line}" if before else "another line"
        self.problems.append(
            Problem(
                position,
                path,
                f"this key is also written at {said} ({shown(first)} there, {shown(again)} "
                "here: two spellings of one key; keep one)",
            )
        )

    def load_key(self, raw_key: object, node: Mapping[Any, Any], path: str) -> Any:
        if isinstance(raw_key, str):
            return raw_key
        if isinstance(raw_key, float):
            return float_text(raw_key)
        if isinstance(raw_key, int) and not isinstance(raw_key, bool):
            return str(raw_key)
        position = self._key_position(node, raw_key) if isinstance(node, CommentedMap) else None
        self.problems.append(
            Problem(position, path, f"keys must be strings, got {_type_name(raw_key)}")
        )
        return MISSING

    def load_dataclass(self, cls: type[T], node: object, path: str) -> T:
        if not isinstance(node, dict):
            self.problem(path, f"expected a mapping, got {_type_name(node)}")
            return typing.cast(T, MISSING)
        hints = typing.get_type_hints(cls)
        fields = {key_of(f): f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        for raw_key in node:
            if str(raw_key) in fields:
                continue
            close = difflib.get_close_matches(
                str(raw_key)[:SHOWN_CHARS], list(fields), n=1, cutoff=0.5
            )
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            allowed = ", ".join(fields)
            position = self._key_position(node, raw_key) if isinstance(node, CommentedMap) else None
            self.problems.append(
                Problem(
                    position,
                    join_path(path, str(raw_key)),
                    f"unknown key{hint}; allowed here: {allowed}",
                )
            )
        values: dict[str, Any] = {}
        failed = False
        for key, field in fields.items():
            child = join_path(path, key)
            if key not in node:
                if field.default is dataclasses.MISSING and (
                    field.default_factory is dataclasses.MISSING
                ):
                    self.problem(child, f"required key {key!r} is missing")
                    failed = True
                continue
            value = self.load(hints[field.name], node[key], child)
            if value is MISSING:
                failed = True
            else:
                values[field.name] = value
        if failed:
            return typing.cast(T, MISSING)
        return cls(**values)


def load_document(cls: type[T], root: object) -> tuple[T | None, DocumentLoader]:
    """Load `root` (a ruamel round-trip document) as `cls`; problems are in the loader."""
    loader = DocumentLoader()
    loader.positions[""] = Position(1, 1)
    if root is None:
        loader.problem("", "the document is empty")
        return None, loader
    loader._record_children(root, "")
    result = loader.load_dataclass(cls, root, "")
    return (None if result is MISSING else result), loader


def json_schema(annotation: Any) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of what `DocumentLoader.load` accepts for `annotation`."""
    origin = get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in get_args(annotation) if a is not type(None)]
        allows_null = len(options) < len(get_args(annotation))
        shapes = [json_schema(o) for o in options]
        if len(shapes) == 1 and not allows_null:
            return shapes[0]
        return {"anyOf": [*shapes, *([{"type": "null"}] if allows_null else [])]}
    if origin is Literal:
        return {"enum": list(get_args(annotation))}
    if origin is list:
        return {"type": "array", "items": json_schema(get_args(annotation)[0])}
    if origin is dict:
        return {
            "type": "object",
            "additionalProperties": json_schema(get_args(annotation)[1]),
        }
    yaml_schema = getattr(annotation, "yaml_schema", None)
    if yaml_schema is not None:
        return dict(yaml_schema())
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        hints = typing.get_type_hints(annotation)
        properties: dict[str, Any] = {}
        required: list[str] = []
        for field in dataclasses.fields(annotation):
            key = key_of(field)
            schema = dict(json_schema(hints[field.name]))
            if "doc" in field.metadata:
                schema["description"] = field.metadata["doc"]
            properties[key] = schema
            no_default = field.default is dataclasses.MISSING
            if no_default and field.default_factory is dataclasses.MISSING:
                required.append(key)
        out: dict[str, Any] = {
            "type": "object",
            "properties": properties,
            "additionalProperties": False,
        }
        if required:
            out["required"] = required
        doc = (annotation.__doc__ or "").strip()
        if doc:
            out["description"] = doc.splitlines()[0]
        return out
    if annotation is bool:
        return {"type": "boolean"}
    if annotation is int:
        return {"type": "integer"}
    if annotation is str:
        return {"type": "string"}
    raise TypeError(f"unsupported annotation {annotation!r}")


def as_plain(node: object) -> object:
    """A ruamel document as plain dicts/lists/scalars (for JSON Schema validation)."""
    if isinstance(node, Mapping):
        return {
            (float_text(k) if isinstance(k, float) else k): as_plain(v) for k, v in node.items()
        }
    if isinstance(node, list):
        return [as_plain(v) for v in node]
    if isinstance(node, ScalarFloat):
        return float(node)
    return node
