"""The map cannot drift: each folder's docstring names exactly its modules and subfolders, and
docs/architecture.md names only folders, modules and paths that exist (issue 41)."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path
from typing import get_args

import pytest

from release.destinations.registry import KINDS as STAGE_KINDS
from release.matrix.destination import INDEX_KINDS
from release.matrix.destination import KINDS as MATRIX_KINDS
from release.matrix.spec import DestinationKind

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "release"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
FOLDERS = sorted(p.parent for p in PACKAGE.rglob("__init__.py"))
ENTRY = re.compile(r"^- `([a-z_0-9]+/?)`: \S", re.MULTILINE)


def contents(folder: Path) -> set[str]:
    """The modules and subpackages a folder holds, as its docstring names them."""
    modules = {p.stem for p in folder.glob("*.py") if p.name != "__init__.py"}
    packages = {f"{p.name}/" for p in folder.iterdir() if (p / "__init__.py").is_file()}
    return modules | packages


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: str(f.relative_to(ROOT)))
def test_folder_docstring_names_its_modules(folder: Path) -> None:
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
    named = ENTRY.findall(doc)
    assert len(named) == len(set(named)), f"{folder}: a module is named twice"
    assert set(named) == contents(folder), f"{folder}/__init__.py's docstring is out of date"


def table_rows() -> dict[str, str]:
    rows = re.findall(r"^\| `([a-z]+)/` \| (.+) \|$", ARCHITECTURE.read_text(), re.MULTILINE)
    return dict(rows)


def test_architecture_table_names_every_folder() -> None:
    folders = {p.name for p in FOLDERS if p.parent == PACKAGE}
    assert set(table_rows()) == folders


def test_architecture_table_names_modules_of_their_folder() -> None:
    wrong = []
    for folder, text in table_rows().items():
        for name in re.findall(r"\(`([a-z_0-9]+)`[),:;]", text):
            if not any((PACKAGE / folder).rglob(f"{name}.py")):
                wrong.append(f"{folder}/{name}")
    assert wrong == []


def test_architecture_paths_exist() -> None:
    text = ARCHITECTURE.read_text()
    missing = []
    for token in set(re.findall(r"`([A-Za-z_0-9./]+)`", text)):
        if token.startswith("release."):
            parts = token.split(".")
            # the longest prefix that is a module or package; the rest may be an attribute
            if not any(
                (ROOT.joinpath(*parts[:n]).with_suffix(".py")).is_file()
                or (ROOT.joinpath(*parts[:n]) / "__init__.py").is_file()
                for n in range(2, len(parts) + 1)
            ):
                missing.append(token)
        elif (token.endswith((".py", "/")) and "/" in token.rstrip("/")) or token.endswith("/"):
            if not ((PACKAGE / token).exists() or (ROOT / token).exists()):
                missing.append(token)
        elif token.endswith(".py") and not (PACKAGE / token).is_file():
            missing.append(token)
    assert sorted(missing) == []


# --- The recipe of a new destination, held to the tree (issue 52). ---

RECIPE = re.compile(r"^- \*\*A new destination\*\*.*?(?=^- \*\*|^## )", re.MULTILINE | re.DOTALL)
# the nightly channel is held by s3 destinations alone (matrix.destination's `channel`): its
# modules name the s3 value type as the type of the channel's store
CHANNEL = {"matrix/model.py", "nightly/verify.py"}
DESTINATIONS = PACKAGE / "destinations"
VALUE_TYPES = {**MATRIX_KINDS, **INDEX_KINDS}


def recipe_files() -> set[str]:
    found = RECIPE.search(ARCHITECTURE.read_text())
    assert found, "docs/architecture.md has no `A new destination` recipe"
    named = set(re.findall(r"`((?:[a-z_]+/)+[a-z_.]+\.(?:py|json|md))`", found.group(0)))
    return {name.removeprefix("release/") for name in named}


def identifiers(tree: ast.AST) -> set[str]:
    """What a module's code names: its names, attributes, and what it imports (names and
    whole module paths); not its docstrings or comments."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


@functools.cache
def identifiers_by_module() -> dict[str, frozenset[str]]:
    """`identifiers` of each module of release/ by its path there, read once a run."""
    return {
        str(path.relative_to(PACKAGE)): frozenset(identifiers(ast.parse(path.read_text())))
        for path in PACKAGE.rglob("*.py")
    }


def naming(symbols: set[str]) -> set[str]:
    """The modules of release/ whose code names one of `symbols`."""
    return {module for module, named in identifiers_by_module().items() if named & symbols}


def test_the_recipe_names_files_that_exist() -> None:
    for name in recipe_files():
        assert (PACKAGE / name).is_file() or (ROOT / name).is_file(), name


def test_every_kind_is_registered_on_both_sides_and_has_its_module() -> None:
    value_types = {**MATRIX_KINDS, **INDEX_KINDS}
    assert list(get_args(DestinationKind)) == list(value_types) == list(STAGE_KINDS)
    for name, kind in STAGE_KINDS.items():
        assert kind.name == name
        assert value_types[name].__dataclass_fields__["kind"].default == name
        assert type(kind).__module__ == f"release.destinations.{name.replace('-', '_')}"


@pytest.mark.parametrize("kind", list(STAGE_KINDS))
def test_a_kind_is_named_only_in_the_files_the_recipe_names(kind: str) -> None:
    """A kind's value type, its kind class and its modules are named in its own modules
    (and the folders' maps) and in the recipe's files only: a stage that names one, to
    branch on it or to reach it, breaks the recipe."""
    stage = STAGE_KINDS[kind]
    module = type(stage).__module__
    stem = module.rsplit(".", 1)[1]
    helpers = {f"release.destinations.{p.stem}" for p in DESTINATIONS.glob(f"{stem}_*.py")}
    symbols = {VALUE_TYPES[kind].__name__, type(stage).__name__, module, *helpers}
    own = {f"{m.removeprefix('release.').replace('.', '/')}.py" for m in (module, *helpers)}
    own |= {"destinations/__init__.py", "matrix/__init__.py", "destinations/registry.py"}
    allowed = recipe_files() | own | (CHANNEL if kind == "s3" else set())
    assert naming(symbols) - allowed == set()


def test_the_check_sees_a_stage_that_names_a_kind() -> None:
    code = "from release.matrix import PypiDestination\nisinstance(d, PypiDestination)\n"
    assert "PypiDestination" in identifiers(ast.parse(code))
    code = "from release.destinations import pypi_publisher\n"
    assert "release.destinations.pypi_publisher" in identifiers(ast.parse(code))
    assert "PypiDestination" not in identifiers(ast.parse('"""PypiDestination"""\n'))


def test_no_stage_compares_a_kind_with_a_kinds_name() -> None:
    names = "|".join(map(re.escape, STAGE_KINDS))
    compared = re.compile(rf"kind\s*(==|!=|in|not in)\s*\(?\"({names})\"|\"({names})\"\s*(==|!=)")
    found = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in PACKAGE.rglob("*.py")
        if path.parent.name != "destinations"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if compared.search(line)
    ]
    assert found == []
