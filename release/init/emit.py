"""The YAML `release init` writes, emitted by ruamel.yaml rather than pasted into text.

A template under release/init/templates is a YAML document: the tool's comments and fixed
keys, and a slot `{slot: NAME}` wherever a value goes. `emit` loads it, puts each value into
its slot as data (or drops the entry, for a value that is absent) and dumps the document, so
that every value is quoted and escaped as YAML needs, whatever it holds, and reads back as
exactly that value. Comments are the tool's text; where they quote the project (a file's
line, a note, a path), the quote is made comment-safe first (`comment_safe`): no line break
or control character can end a comment or make the file unreadable. A template comment names
what it quotes as `@(NAME)`; a comment line that is `# @(NAME)` alone becomes that text
wrapped as `#` lines at its indent, or nothing where it is empty. Pure.
"""

from __future__ import annotations

import copy
import io
import re
import textwrap
import unicodedata
from collections.abc import Mapping
from importlib import resources
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, ScalarString
from ruamel.yaml.tokens import CommentToken

WIDTH = 92  # of a wrapped comment
SLOT = "slot"
_PLACEHOLDER = re.compile(r"@\((\w+)\)")
_BLOCK = re.compile(r"^( *)# @\((\w+)\)$")


class Absent:
    """A value that is not there: its slot's entry is left out of the file."""


ABSENT = Absent()


def yaml() -> YAML:
    """The round-trip emitter init writes with: comments kept, lines never folded."""
    emitter = YAML(typ="rt")
    emitter.preserve_quotes = True
    emitter.width = 1 << 16
    emitter.indent(mapping=2, sequence=4, offset=2)
    emitter.allow_unicode = True
    return emitter


def quoted(text: str) -> DoubleQuotedScalarString:
    """`text` written in double quotes (a version, a switch's value): the emitter escapes
    whatever needs it."""
    said: DoubleQuotedScalarString = DoubleQuotedScalarString(text)
    return said


def flow(items: list[Any]) -> CommentedSeq:
    """A list written on one line, `[a, b]`."""
    seq = CommentedSeq(items)
    seq.fa.set_flow_style()
    return seq


def commented(entries: list[tuple[str, Any, str]], indent: int) -> CommentedMap:
    """A block mapping whose every key has the comment lines `said` above it, at `indent`."""
    mapping = CommentedMap()
    prefix = " " * indent + "# "
    for key, value, said in entries:
        mapping[key] = value
        lines = [line.removeprefix(prefix) for line in wrapped(said, prefix).split("\n")]
        if said:
            mapping.yaml_set_comment_before_after_key(key, before="\n".join(lines), indent=indent)
    return mapping


def emit(
    template: str,
    values: Mapping[str, Any],
    comments: Mapping[str, str],
) -> str:
    """The template `template` with its comments filled from `comments` and each slot set
    to `values[NAME]` (left out where that is ABSENT), dumped by ruamel.yaml."""
    text = resources.files("release.init").joinpath("templates").joinpath(template)
    document = yaml().load(fill_comments(text.read_text("utf-8"), comments))
    used: set[str] = set()
    _fill_slots(document, values, used)
    unused = set(values) - used
    if unused:
        raise KeyError(f"{template} has no slot for {sorted(unused)}")
    out = io.StringIO()
    yaml().dump(document, out)
    if yaml().load(out.getvalue()) != document:  # the emitter's promise, checked
        raise ValueError(f"{template} as emitted does not read back as its values")
    return out.getvalue()


def _fill_slots(node: Any, values: Mapping[str, Any], used: set[str]) -> None:
    if isinstance(node, list):
        for item in node:
            _fill_slots(item, values, used)
        return
    if not isinstance(node, dict):
        return
    for key, value in list(node.items()):
        name = _slot_name(value)
        if name is None:
            _fill_slots(value, values, used)
            continue
        used.add(name)
        chosen = values[name]
        if isinstance(chosen, Absent):
            _drop(node, key)
        else:  # a copy each time: one object in two slots would be written as an alias
            node[key] = _faithful(copy.deepcopy(chosen))


def _drop(mapping: dict[Any, Any], key: Any) -> None:
    """`key` left out of `mapping`, the comment lines above it kept above the next key
    (ruamel.yaml keeps the lines after a `{...}` as the next key's)."""
    keys = list(mapping)
    comments = mapping.ca.items if isinstance(mapping, CommentedMap) else {}
    above = comments.pop(key, [None, None])[1]
    del mapping[key]
    if not above:
        return
    following = keys[keys.index(key) + 1 :]
    if following:
        slot = comments.setdefault(following[0], [None, None, None, None])
        slot[1] = [*above, *(slot[1] or [])]
        return
    if not isinstance(mapping, CommentedMap) or not mapping:
        raise ValueError(f"a template's comment above {key!r} has no key to stay beside")
    _trail(mapping, above)


def _trail(mapping: CommentedMap, tokens: list[CommentToken]) -> None:
    """`tokens` (whole-line comments) written after the mapping's last entry, at their own
    column: after its value's last entry where that is a block mapping."""
    last = list(mapping)[-1]
    value = mapping[last]
    if isinstance(value, CommentedMap) and not value.fa.flow_style():
        _trail(value, tokens)
        return
    lines = "".join(" " * token.column + token.value for token in tokens)
    slot = mapping.ca.items.setdefault(last, [None, None, None, None])
    said = slot[2].value if slot[2] is not None else "\n"
    slot[2] = CommentToken(said + lines, CommentMark(0), None)


def _faithful(value: Any) -> Any:
    """`value` with every plain string that holds a character YAML reads as a break or
    cannot print written in double quotes, where each is escaped (ruamel.yaml's single-quoted
    and plain styles fold a NEL)."""
    if isinstance(value, str) and not isinstance(value, ScalarString) and _needs_escapes(value):
        return quoted(value)
    if isinstance(value, dict):
        for key in list(value):
            value[key] = _faithful(value[key])
    elif isinstance(value, list):
        value[:] = [_faithful(item) for item in value]
    return value


def _needs_escapes(text: str) -> bool:
    return any(_unsafe(char) or char in "\x85\xa0" or not char.isprintable() for char in text)


def _slot_name(value: Any) -> str | None:
    if isinstance(value, dict) and list(value) == [SLOT]:
        return str(value[SLOT])
    return None


def fill_comments(template: str, comments: Mapping[str, str]) -> str:
    """The template's comment placeholders filled, each quote made comment-safe; a
    placeholder outside a comment is the template's bug."""
    out: list[str] = []
    for line in template.splitlines(keepends=True):
        block = _BLOCK.match(line.rstrip("\n"))
        if block is not None:
            said = wrapped(comments[block.group(2)], f"{block.group(1)}# ")
            out.append(said + "\n" if said else "")
            continue
        for match in _PLACEHOLDER.finditer(line):
            if "#" not in line[: match.start()]:
                raise ValueError(f"the placeholder {match.group(0)} is not in a comment: {line}")
        out.append(_PLACEHOLDER.sub(lambda m: comment_safe(comments[m.group(1)]), line))
    return "".join(out)


def comment_safe(text: str) -> str:
    """`text` on one comment line: every line break, control, format or unassigned
    character written as its escape (`\\n`, `\\u2028`), so that the comment holds all of
    it and nothing after it is read as YAML."""
    return "".join(
        char.encode("unicode_escape").decode("ascii") if _unsafe(char) else char for char in text
    )


def _unsafe(char: str) -> bool:
    return unicodedata.category(char)[0] == "C" or unicodedata.category(char) in ("Zl", "Zp")


def wrapped(text: str, prefix: str) -> str:
    """`text` as comment lines: each paragraph line made comment-safe and wrapped, `- `
    items hanging."""
    out = []
    for line in text.removesuffix("\n").split("\n") if text else ():
        if not line:
            out.append(prefix.rstrip())
            continue
        hanging = "  " if line.startswith("- ") else ""
        out.append(
            textwrap.fill(
                comment_safe(line),
                width=WIDTH,
                initial_indent=prefix,
                subsequent_indent=prefix + hanging,
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
    return "\n".join(out)
