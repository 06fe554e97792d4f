"""The folder is the tier (docs/testing.md): every test module under tests/full/ is marked
`slow` as a whole, no module elsewhere marks anything `slow` or reaches into tests/full/, and
the commands the README and CI run select the tiers by folder. Read from the files, as text:
tests/conftest.py also refuses a misplaced test when a run collects it."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from tests.conftest import FULL_TIER, LONGEST_FIRST, ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

TEST_ROOTS = (ROOT / "tests", ROOT / "csrc" / "tests")


def modules() -> list[Path]:
    found = [p for root in TEST_ROOTS for p in root.rglob("*.py") if "fixtures" not in p.parts]
    return sorted(found)


def module_marks(tree: ast.Module) -> str:
    """The source of the module's `pytestmark`, or ""."""
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets):
            assert isinstance(node, ast.Assign)
            return ast.unparse(node.value)
    return ""


def uses_slow(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Attribute) and node.attr == "slow" and "mark" in ast.unparse(node)
        for node in ast.walk(tree)
    )


def imports_full_tier(tree: ast.Module) -> bool:
    names = [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    ] + [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    return any(name == "tests.full" or name.startswith("tests.full.") for name in names)


def test_every_module_of_the_full_tier_is_slow_as_a_whole() -> None:
    unmarked = []
    for path in modules():
        in_full = FULL_TIER in path.parents and path.name.startswith("test_")
        if in_full and "pytest.mark.slow" not in module_marks(ast.parse(path.read_text())):
            unmarked.append(path.relative_to(ROOT).as_posix())
    assert not unmarked, f"no `pytestmark = pytest.mark.slow`: {unmarked}"


def test_no_module_outside_the_full_tier_marks_slow_or_imports_it() -> None:
    misplaced = []
    for path in modules():
        if FULL_TIER in path.parents or path == ROOT / "tests" / "conftest.py":
            continue
        tree = ast.parse(path.read_text())
        if uses_slow(tree) or imports_full_tier(tree):
            misplaced.append(path.relative_to(ROOT).as_posix())
    assert not misplaced, f"fast-tier modules that mark slow or import tests.full: {misplaced}"


def test_the_full_tiers_fixtures_live_in_its_folder() -> None:
    """A fast test cannot ask for a shared build: the fixtures that build are defined in
    tests/full/, which pytest shows only to the tests below it."""
    outside = ROOT / "tests" / "conftest.py", ROOT / "tests" / "integration" / "conftest.py"
    for conftest in outside:
        tree = ast.parse(conftest.read_text())
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert not defined & {"release_cache", "shipped_build", "torch_cache", "torch_stable"}


def test_the_plain_command_runs_the_fast_folders_and_ci_the_full_one() -> None:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    paths = [ROOT / p for p in options["testpaths"]]
    assert all(FULL_TIER not in p.parents and p != FULL_TIER for p in paths)
    assert ROOT / "tests" / "unit" in paths
    assert ROOT / "tests" / "integration" in paths
    assert "slow" not in " ".join(options["addopts"])  # the folder selects, not a -m
    ci = (ROOT / ".ci" / "run").read_text()
    assert ".venv/bin/pytest tests/full\n" in ci
    # the main job runs from an empty cache of its own, which the newcomer's test then reads
    assert 'RELEASE_CACHE_DIR="$newcomer_cache" bash -euo pipefail -c "${commands[0]}"' in ci
    assert 'RELEASE_TEST_README_CHECKOUT="$PWD" ' in ci
    assert 'RELEASE_TEST_README_CACHE="$newcomer_cache" \\\n' in ci


def test_the_full_tiers_longest_first_order_names_its_modules() -> None:
    """A renamed module would drop out of the order silently and be handed out last."""
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    missing = [name for name in LONGEST_FIRST if not (FULL_TIER / name).is_file()]
    assert not missing, f"LONGEST_FIRST (tests/conftest.py) names no module here: {missing}"
