"""The map cannot drift: each folder's docstring names exactly its modules and subfolders, and
docs/architecture.md names only folders, modules and paths that exist (issue 41)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

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
