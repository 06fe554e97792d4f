"""The one reader of JSON and TOML documents (release.fsutil, issue 49): whatever bytes come
from disk or a server, the answer is the document or one UnreadableDocument line naming where
it came from; never a RecursionError, a UnicodeDecodeError or another traceback. And no
module of release/ parses a document any other way."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from release.errors import ConfigError
from release.fsutil import (
    MAX_DOCUMENT_BYTES,
    MAX_DOCUMENT_DEPTH,
    MAX_DOCUMENT_VALUES,
    UnreadableDocument,
    json_document,
    read_json,
    toml_document,
)

PACKAGE = Path(__file__).resolve().parents[2] / "release"
WHERE = "https://h/x.json"
TOO_DEEP = f"nested too deep: more than {MAX_DOCUMENT_DEPTH} levels"


def refusal(read: object, data: bytes | str) -> UnreadableDocument:
    assert callable(read)
    with pytest.raises(UnreadableDocument) as caught:
        read(data, WHERE)
    message = str(caught.value)
    assert message == f"{WHERE}: {caught.value.reason}"
    assert "\n" not in message
    assert len(message) < 300, message[:300]
    return caught.value


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=30,
)


@given(JSON_VALUES)
def test_json_it_can_read_reads_as_json_does(value: object) -> None:
    assert json_document(json.dumps(value).encode(), WHERE) == value


@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_any_bytes_are_a_document_or_one_line_naming_where(data: bytes) -> None:
    for read in (json_document, toml_document):
        message = f"{WHERE}: read"
        try:
            read(data, WHERE)
        except UnreadableDocument as error:
            message = str(error)
        assert message.startswith(f"{WHERE}: ")
        assert "\n" not in message


NESTINGS = [("[", "]"), ('{"a":', "}"), ('[1, {"a":', "}]"), ('{"b": [0,', "]}")]


@settings(max_examples=40)
@given(st.integers(min_value=MAX_DOCUMENT_DEPTH + 1, max_value=300_000), st.sampled_from(NESTINGS))
def test_json_nested_deeper_than_the_limit_is_refused_at_any_depth(
    depth: int, nesting: tuple[str, str]
) -> None:
    opener, closer = nesting
    assert refusal(json_document, opener * depth + "1" + closer * depth).reason == TOO_DEEP


@pytest.mark.parametrize("depth", [MAX_DOCUMENT_DEPTH + 1, 980, 200_000])
def test_json_arrays_nested_too_deep_are_refused(depth: int) -> None:
    assert refusal(json_document, "[" * depth + "]" * depth).reason == TOO_DEEP


def test_json_at_the_depth_limit_is_read() -> None:
    depth = MAX_DOCUMENT_DEPTH
    assert json_document('{"a":' * depth + "1" + "}" * depth, WHERE) is not None


@pytest.mark.parametrize(
    "text",
    [
        "a = " + "[" * 2_000 + "]" * 2_000,  # tomllib's own recursion
        "a = " + "{b = " * 2_000 + "1" + "}" * 2_000,
        "[" + ".".join(["t"] * (MAX_DOCUMENT_DEPTH + 1)) + "]\nx = 1\n",  # no recursion at all
    ],
    ids=["arrays", "inline-tables", "table-header"],
)
def test_toml_nested_too_deep_is_refused(text: str) -> None:
    assert refusal(toml_document, text).reason == TOO_DEEP


@pytest.mark.parametrize("read", [json_document, toml_document])
def test_a_document_over_the_size_limit_is_refused_before_it_is_parsed(read: object) -> None:
    error = refusal(read, b" " * (MAX_DOCUMENT_BYTES + 1))
    assert error.reason == f"larger than {MAX_DOCUMENT_BYTES // 2**20} MiB"


MANY = f"more than {MAX_DOCUMENT_VALUES:,} values, past any such document"


@pytest.mark.parametrize(
    ("read", "text"),
    [
        (json_document, "[" + "{}," * MAX_DOCUMENT_VALUES + "{}]"),  # 1.4 GB to parse
        (json_document, '{"a": [' + '"ab",' * MAX_DOCUMENT_VALUES + "0]}"),
        (toml_document, "a = 1\n" * (MAX_DOCUMENT_VALUES + 1)),
        (toml_document, "a = [" + "{}," * MAX_DOCUMENT_VALUES + "]"),
    ],
    ids=["json-objects", "json-strings", "toml-keys", "toml-tables"],
)
def test_a_document_of_too_many_values_is_refused_before_it_is_parsed(
    read: object, text: str
) -> None:
    assert refusal(read, text).reason == MANY


def test_a_document_of_as_many_values_as_allowed_is_read() -> None:
    text = "[" + "0," * (MAX_DOCUMENT_VALUES - 2) + "0]"
    assert len(json_document(text, WHERE)) == MAX_DOCUMENT_VALUES - 1


@pytest.mark.parametrize(
    ("read", "data", "reason"),
    [
        (json_document, b'{"a":\n  "\xff"}', "not UTF-8 (byte 0xff at line 2, column 4)"),
        (json_document, b"\xfe\xff\x00[\x00]", "not UTF-8 (byte 0xfe at line 1, column 1)"),
        (
            toml_document,
            b"[project]\nname = 'k\xe9'\n",
            "not UTF-8 (byte 0xe9 at line 2, column 10)",
        ),
    ],
    ids=["json", "json-utf16", "toml-latin1"],
)
def test_bytes_that_are_not_utf8_are_named_by_line(read: object, data: bytes, reason: str) -> None:
    assert refusal(read, data).reason == reason


def test_a_byte_order_mark_is_ignored_before_json_and_refused_before_toml() -> None:
    assert json_document(b'\xef\xbb\xbf{"a": 1}', WHERE) == {"a": 1}
    error = refusal(toml_document, b"\xef\xbb\xbf[project]\nname = 'k'\n")
    assert error.reason == "not TOML: it starts with a byte order mark"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"a": NaN}', "not JSON: NaN is not JSON"),
        ("[Infinity]", "not JSON: Infinity is not JSON"),
        ("1" * 5_000, "not JSON: Exceeds the limit"),
        ('{"a": 1', "not JSON: Expecting ',' delimiter (at line 1, column 8)"),
    ],
)
def test_what_is_not_json_says_why(text: str, reason: str) -> None:
    assert refusal(json_document, text).reason.startswith(reason)


@pytest.mark.parametrize(
    "text", [r'{"name": "w\ud800hl"}', r'[1, {"\udfff": 2}]', r'["\ude00\ud83d"]']
)
def test_a_lone_surrogate_escape_is_refused_not_carried_into_a_file_or_terminal(
    text: str,
) -> None:
    # json.loads decodes it to a str no UTF-8 output can encode: publish --dry-run of a
    # manifest holding one ended in a UnicodeEncodeError traceback
    assert refusal(json_document, text).reason == (
        "a string holds a lone surrogate (\\uD800-\\uDFFF)"
    )


def test_a_surrogate_pair_and_an_escaped_backslash_are_text() -> None:
    assert json_document(r'["\ud83d\ude00", "\\ud800"]', WHERE) == ["\U0001f600", "\\ud800"]


def test_toml_syntax_names_tomllib_line() -> None:
    error = refusal(toml_document, "[project]\nname = 'k'\n~\n")
    assert error.reason == "not TOML: Invalid statement (at line 3, column 1)"


def test_read_json_reads_no_more_than_the_limit_and_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    with path.open("wb") as handle:  # sparse: a file larger than the limit, cheaply
        handle.truncate(MAX_DOCUMENT_BYTES * 4)
    with pytest.raises(ConfigError) as caught:
        read_json(path, "manifest", "run `release build` first")
    assert caught.value.message == f"{path}: not a readable manifest: larger than 64 MiB"


# What parses a document and where it may: only the reader above. pydantic's
# `model_validate_json` (pypi-attestations' models) has a bounded parser of its own.
PARSERS = {("json", "loads"), ("json", "load"), ("tomllib", "loads"), ("tomllib", "load")}


def parsing_calls(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner = node.func.value
        name = owner.id if isinstance(owner, ast.Name) else ""
        if (name, node.func.attr) in PARSERS or (node.func.attr == "json" and not node.args):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


def test_no_module_parses_a_document_but_through_the_reader() -> None:
    modules = [p for p in PACKAGE.rglob("*.py") if p != PACKAGE / "fsutil.py"]
    assert [call for path in modules for call in parsing_calls(path)] == []


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('{"sha256": "aa", "sha256": "bb"}', "'sha256'"),
        ('{"files": [{"url": "a", "size": 1, "url": "b"}]}', "'url'"),
        ('{"a": 1, "\\u0061": 2}', "'a'"),  # the same key, escaped
        ('{"' + "k" * 500 + '": 1, "' + "k" * 500 + '": 2}', "'kkkk"),
    ],
)
def test_an_object_that_gives_a_key_twice_is_refused_naming_the_key(text: str, key: str) -> None:
    """Python keeps a repeated key's last value and other readers its first: a record or
    an answer could say one digest to this program and another to the next reader."""
    reason = refusal(json_document, text).reason
    assert reason.startswith(f"the key {key}"), reason
    assert reason.endswith("stands twice in an object"), reason
    assert json_document('{"a": {"b": 1}, "b": {"a": 2}}', WHERE) == {"a": {"b": 1}, "b": {"a": 2}}
