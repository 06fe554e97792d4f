"""The JSON Schema generated from the model agrees with the loader; any YAML either loads
or raises ConfigError."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from release.errors import ConfigError
from release.matrix import matrix_from_text, matrix_json_schema, parse_yaml
from release.matrix.spec import MatrixSpec
from release.yamlspec import Problem, as_plain, load_document

DATA = Path(__file__).parent.parent / "data" / "matrix"
REPO = Path(__file__).resolve().parents[2]
SCHEMA = matrix_json_schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def problems_of(text: str) -> list[Problem]:
    """The loader's problems with the document's shape alone (no rules, no project)."""
    _, loader = load_document(MatrixSpec, parse_yaml(text, "matrix.yaml"))
    return loader.problems


def schema_accepts(text: str) -> bool:
    document = YAML(typ="rt").load(text)
    return VALIDATOR.is_valid(as_plain(document))


def test_schema_is_valid_draft_2020_12() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["required"] == ["project", "cuda", "destinations"]


def test_schema_accepts_the_shipped_and_good_matrices() -> None:
    for path in [REPO / "matrix.yaml", *sorted((DATA / "good").glob("*.yaml"))]:
        assert schema_accepts(path.read_text()), path


SHAPE_ERRORS = ["unknown-key", "wrong-types", "missing-keys"]


@pytest.mark.parametrize("name", SHAPE_ERRORS)
def test_schema_rejects_what_the_loader_rejects_for_shape(name: str) -> None:
    text = (DATA / "bad" / f"{name}.yaml").read_text()
    assert problems_of(text), "the loader must find shape problems"
    assert not schema_accepts(text)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 200),
    st.sampled_from(
        [
            "x86_64",
            "aarch64",
            "pypi",
            "github",
            "2_28",
            "90a",
            "12.9",
            "cu129",
            "o/r",
            "none",
            "2.30.7",
            "",
            "v{version}",
            "git-index",
            "WHL_TOKEN",
        ]
    ),
)
KEYS = [
    "project",
    "defaults",
    "cuda",
    "destinations",
    "exclude",
    "arches",
    "sms",
    "ptx",
    "manylinux",
    "nccl",
    "destination",
    "local-label",
    "kind",
    "repository",
    "tag",
    "index-url",
    "12.9",
    "13.0",
    "pypi",
    "github",
    "cuda ",
    "smss",
    "name",
    "token-secret",
    "index",
    "branch",
]
documents = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.sampled_from(KEYS), children, max_size=5),
    ),
    max_leaves=25,
)


def dump(document: Any) -> str:
    stream = io.StringIO()
    YAML(typ="safe").dump(document, stream)
    return stream.getvalue()


@settings(max_examples=300)
@given(document=documents)
def test_any_yaml_either_loads_or_raises_config_error(document: Any, tmp_path_factory: Any) -> None:
    root = tmp_path_factory.getbasetemp() / "prop"
    (root / "csrc").mkdir(parents=True, exist_ok=True)
    (root / "csrc" / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "1.0"\n')
    text = dump(document)
    try:
        matrix_from_text(text, root / "matrix.yaml")
    except ConfigError as error:
        problems: tuple[str, ...] | None = error.problems
    else:
        problems = None
    if problems is not None:
        assert problems
        assert all(p.startswith("matrix.yaml") for p in problems)


@settings(max_examples=200)
@given(text=st.text(max_size=200))
def test_any_text_either_loads_or_raises_config_error(text: str, tmp_path_factory: Any) -> None:
    try:
        matrix_from_text(text, tmp_path_factory.getbasetemp() / "matrix.yaml")
    except ConfigError as error:
        problems: tuple[str, ...] = error.problems
    else:
        problems = ("loaded",)
    assert problems


@settings(max_examples=300)
@given(document=documents)
def test_schema_and_loader_agree_on_shape(document: Any) -> None:
    text = dump(document)
    assert (not problems_of(text)) == VALIDATOR.is_valid(as_plain(YAML(typ="rt").load(text))), text


settings_values = st.fixed_dictionaries(
    {},
    optional={
        "arches": st.lists(st.sampled_from(["x86_64", "aarch64", "arm64"]), max_size=2),
        "sms": st.one_of(
            st.lists(st.sampled_from([75, 80, "90a", "100f", "9x"]), max_size=3), st.just("75")
        ),
        "ptx": st.sampled_from([100, "none", False, "90a", None, "x"]),
        "manylinux": st.sampled_from(["2_28", 228, "manylinux_2_17", "2-28"]),
        "nccl": st.sampled_from(["2.30.7", 2.3, "2.x", None]),
    },
)
near_valid = st.fixed_dictionaries(
    {
        "project": st.sampled_from(["csrc", 3]),
        "cuda": st.dictionaries(
            st.sampled_from(["12.9", "13.0", "13"]),
            st.one_of(
                settings_values.map(lambda d: {**d, "destination": "pypi"}),
                settings_values.map(lambda d: {**d, "destination": "gh", "local-label": "cu1"}),
                settings_values.map(
                    lambda d: {**d, "destination": ["pypi", {"name": "gh", "local-label": "cu1"}]}
                ),
                st.just({"destination": [{"nam": "gh"}, 3]}),
                st.just({"destination": "pypi", "labl": "x"}),
            ),
            max_size=2,
        ),
        "destinations": st.just(
            {"pypi": {"kind": "pypi"}, "gh": {"kind": "github", "repository": "o/r"}}
        ),
    },
    optional={"defaults": settings_values, "exclude": st.just([{"arch": "aarch64"}])},
)


@settings(max_examples=300)
@given(document=near_valid)
def test_schema_and_loader_agree_on_near_valid_documents(document: Any) -> None:
    text = dump(document)
    loader_ok = not problems_of(text)
    schema_ok = VALIDATOR.is_valid(as_plain(YAML(typ="rt").load(text)))
    assert loader_ok == schema_ok, text
