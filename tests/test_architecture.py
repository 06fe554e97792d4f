"""The structure of release/, checked: one edge per outside thing, layers that only import
downward (import-linter's contracts in pyproject.toml), and no module too big to read."""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "release"
MAX_LINES = 600

# Which modules may touch each outside thing. Commands and the CLI read options from the
# environment and hand them down; nothing else reads os.environ.
EDGES: dict[str, set[str]] = {
    "subprocess": {"release.proc"},
    "httpx": {"release.remote.httpclient", "release.remote.github"},
    "httpcore": {"release.remote.socket_deadline"},
    "githubkit": {"release.remote.github"},
    "twine": {"release.destinations.pypi_publisher"},
    "boto3": {"release.remote.s3"},
    "botocore": {"release.remote.s3"},
    "pypi_attestations": {"release.provenance.attestation"},
    # nvccwrap is a program of its own (every CUDA compile of a torch or CMake cell runs
    # it): its main reads the build's environment as cli.py reads the user's
    "os.environ": {"release.cli", "release.console", "release.toolchain.nvccwrap"},
}
ENVIRONMENT_READERS_PREFIX = "release.commands."


def modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, path


@functools.cache
def parsed(path: Path) -> ast.Module:
    """A module's tree, parsed once a run: the checks below ask for each many times."""
    return ast.parse(path.read_text(encoding="utf-8"))


@functools.cache
def nodes(tree: ast.AST) -> tuple[ast.AST, ...]:
    """Every node of `tree` (ast.walk's order), walked once a tree."""
    return tuple(ast.walk(tree))


def touches(tree: ast.AST) -> set[str]:
    """The outside things a module's code touches: imported top-level packages of EDGES,
    and reads of os.environ / os.getenv."""
    found: set[str] = set()
    for node in nodes(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
            if node.module == "os" and any(a.name in ("environ", "getenv") for a in node.names):
                found.add("os.environ")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in ("environ", "getenv")
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            found.add("os.environ")
    return found & set(EDGES)


@pytest.mark.parametrize("edge", sorted(EDGES))
def test_each_outside_thing_has_its_one_module(edge: str) -> None:
    users = {name for name, path in modules() if edge in touches(parsed(path))}
    allowed = EDGES[edge]
    if edge == "os.environ":
        users = {u for u in users if not u.startswith(ENVIRONMENT_READERS_PREFIX)}
    assert users <= allowed, f"{edge} is used outside {sorted(allowed)}: {sorted(users - allowed)}"
    assert users, f"no module uses {edge}: update EDGES"


def test_the_edge_check_sees_what_it_must() -> None:
    code = "import subprocess\nimport os\nfrom githubkit import GitHub\nx = os.environ['A']\n"
    assert touches(ast.parse(code)) == {"subprocess", "githubkit", "os.environ"}
    assert touches(ast.parse("from os import getenv\n")) == {"os.environ"}
    assert touches(ast.parse("import httpx.auth\n")) == {"httpx"}


# Who builds a client of a destination or reads a credential from the environment: one Reach
# per command (release.destinations.reach), which the stages and the kinds ask. Each name
# with the module that defines it, and the modules that may call it.
REACHES: dict[str, tuple[str, set[str]]] = {
    "GithubClient": ("release.remote.github", {"release.destinations.reach"}),
    "github_token": ("release.credentials", {"release.destinations.reach"}),
    "index_credentials": (
        "release.credentials",
        {"release.destinations.reach", "release.remote.httpclient"},
    ),
    "index_logins": ("release.remote.httpclient", {"release.destinations.reach"}),
    "s3_credentials": ("release.credentials", {"release.destinations.reach"}),
}


def calls_of(tree: ast.AST, name: str, home: str) -> bool:
    """Whether a module's code calls `name` of module `home`: imported by name and called,
    or called through an import of `home` (`httpclient.index_logins(...)`)."""
    direct: set[str] = set()
    aliases: set[str] = set()
    for node in nodes(tree):
        if isinstance(node, ast.ImportFrom) and node.module == home:
            direct |= {a.asname or a.name for a in node.names if a.name == name}
        elif isinstance(node, ast.ImportFrom) and node.module == home.rpartition(".")[0]:
            leaf = home.rpartition(".")[2]
            aliases |= {a.asname or a.name for a in node.names if a.name == leaf}
        elif isinstance(node, ast.Import):
            aliases |= {a.asname or a.name for a in node.names if a.name == home}
    for node in nodes(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in direct:
            return True
        if (  # a constructor of its own: `GithubClient.from_environment(...)`
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in direct
        ):
            return True
        if (
            isinstance(func, ast.Attribute)
            and func.attr == name
            and isinstance(func.value, ast.Name)
            and func.value.id in aliases
        ):
            return True
    return False


@pytest.mark.parametrize("name", sorted(REACHES))
def test_clients_and_credentials_are_built_by_the_commands_reach_only(name: str) -> None:
    home, allowed = REACHES[name]
    users = {
        module
        for module, path in modules()
        if module != home and calls_of(parsed(path), name, home)
    }
    assert users <= allowed, f"{name} is called outside {sorted(allowed)}: {sorted(users)}"
    assert users, f"nobody calls {name}: update REACHES"


def test_the_call_check_sees_what_it_must() -> None:
    code = (
        "from release.remote.github import GithubClient\n"
        "from release.remote import httpclient\n"
        "GithubClient(api_url=u, token=None)\n"
        "httpclient.index_logins(e, [])\n"
        "reach.index_logins([])\n"
    )
    tree = ast.parse(code)
    assert calls_of(tree, "GithubClient", "release.remote.github")
    assert calls_of(tree, "index_logins", "release.remote.httpclient")
    assert not calls_of(
        ast.parse("reach.index_logins([])\n"), "index_logins", "release.remote.httpclient"
    )
    assert not calls_of(ast.parse("x: GithubClient\n"), "GithubClient", "release.remote.github")
    made = "from release.remote.github import GithubClient\nGithubClient.from_environment(u, e)\n"
    assert calls_of(ast.parse(made), "GithubClient", "release.remote.github")


def test_the_wheel_s_name_is_parsed_by_wheelname_only() -> None:
    """One owner of the wheel's name (release.wheelfile.WheelName: compose, parse, relabel,
    retag), so that a variant label or a build tag is one change."""
    users = {
        module
        for module, path in modules()
        if calls_of(parsed(path), "parse_wheel_filename", "packaging.utils")
    }
    assert users == {"release.wheelfile"}


def test_no_module_is_over_600_lines() -> None:
    long = {
        name: count
        for name, path in modules()
        if (count := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_every_module_is_in_a_layer() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    named = {m.strip() for layer in contract["layers"] for m in re.split(r"[|:]", layer)}
    top = {".".join(name.split(".")[:2]) for name, _ in modules() if name != "release"}
    assert top - named == set(), "modules outside every layer of the import-linter contract"


def test_import_layers_hold() -> None:
    result = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "Contracts: 2 kept, 0 broken." in result.stdout


def test_no_function_is_over_80_lines() -> None:
    """Every function and method of release/ (nested ones too) fits in 80 lines, counted from
    its `def` to its last line: decorators are not counted. The check is first tried on a
    decorated method of exactly 80 lines and on one of 81."""
    limit = 80

    def too_long(node: ast.AST, where: str, prefix: str = "") -> Iterator[str]:
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}."
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (child.end_lineno or child.lineno) - child.lineno + 1
                if length > limit:
                    yield f"{where}:{child.lineno} {name[:-1]} ({length} lines)"
            yield from too_long(child, where, name)

    def probe(lines: int) -> list[str]:
        body = "".join(f"        x{i} = {i}\n" for i in range(lines - 1))
        code = f"class C:\n    @staticmethod\n    @other\n    async def f() -> None:\n{body}"
        return list(too_long(ast.parse(code), "probe.py"))

    assert probe(limit) == []
    assert probe(limit + 1) == [f"probe.py:4 C.f ({limit + 1} lines)"]
    long = [
        found
        for _, path in modules()
        for found in too_long(parsed(path), str(path.relative_to(ROOT)))
    ]
    assert long == [], f"functions over {limit} lines (split them): " + ", ".join(long)
