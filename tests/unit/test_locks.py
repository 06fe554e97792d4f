"""The hash-locked requirement files the workflows install from (docs/ci.md): every line an
exact pin with its sha256 hashes, and tool.txt a lock of exactly what pyproject.toml asks
for, so that `pip install --require-hashes --no-deps` of it plus the tool's wheel is the
tool with its whole environment.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

ROOT = Path(__file__).resolve().parents[2]
LOCKS = ROOT / ".github" / "requirements"
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")


def entries(path: Path) -> Iterator[tuple[Requirement, list[str]]]:
    text = re.sub(r"\\\n", " ", path.read_text(encoding="utf-8"))
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        spec, _, options = line.partition(" --hash")
        yield Requirement(spec), HASH.findall("--hash" + options) if options else []


@pytest.mark.parametrize("name", ["tool.txt", "build.txt"])
def test_every_line_is_an_exact_pin_with_hashes(name: str) -> None:
    found = list(entries(LOCKS / name))
    assert len(found) > 10
    for requirement, hashes in found:
        (spec,) = requirement.specifier
        assert spec.operator == "==", requirement
        assert hashes, f"{name}: {requirement} has no --hash"


def test_tool_lock_pins_every_dependency_of_pyproject_within_its_range() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pinned: dict[str, list[Version]] = {}
    for requirement, _ in entries(LOCKS / "tool.txt"):
        (spec,) = requirement.specifier
        pinned.setdefault(canonicalize_name(requirement.name), []).append(Version(spec.version))
    for line in project["dependencies"]:
        wanted = Requirement(line)
        versions = pinned.get(canonicalize_name(wanted.name))
        assert versions, f"{wanted.name} is not in .github/requirements/tool.txt: re-lock it"
        for version in versions:
            assert wanted.specifier.contains(version, prereleases=True), (
                f"tool.txt pins {wanted.name}=={version}, outside {wanted}: re-lock it"
            )
    # githubkit 0.16.1 fails at import with hishel 2.0.0, which its own bound admits
    assert all(v < Version("2") for v in pinned["hishel"])


def test_the_tool_itself_is_not_in_its_lock() -> None:
    """The tool's own line (with its wheel's sha256) is added by the tool's release."""
    names = {canonicalize_name(r.name) for r, _ in entries(LOCKS / "tool.txt")}
    assert "cuda-wheel-release" not in names
