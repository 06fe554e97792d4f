"""The commit of cuda-wheel-release that the caller `release init` writes pins its `uses:`
lines to (`@<40 hex> # v<version>`), read from how this copy of the tool was installed:

1. a release's wheel holds `release/init/commit.txt`, written by tool-release.yml from the
   tagged commit it builds (`GITHUB_SHA`) before the build;
2. an install from the repository (`pip install git+https://github.com/...@<commit>`, the
   README's install before the first release) has the commit in PEP 610's direct_url.json;
3. a checkout of the repository (an editable install, the tests) has it as git's HEAD.

None of them: None, and the caller pins the release's tag with a note to pin its commit.
"""

from __future__ import annotations

import re
from importlib import metadata, resources
from pathlib import Path

from release.fsutil import json_document

DISTRIBUTION = "cuda-wheel-release"
_COMMIT = re.compile(r"[0-9a-f]{40}")


def tool_commit() -> str | None:
    return _embedded() or _direct_url() or checkout_head(Path(__file__).resolve().parents[2])


def _embedded() -> str | None:
    file = resources.files("release.init").joinpath("commit.txt")
    if not file.is_file():
        return None
    text = file.read_text("utf-8").strip()
    return text if _COMMIT.fullmatch(text) else None


def _direct_url() -> str | None:
    try:
        raw = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    return commit_of_direct_url(raw)


def commit_of_direct_url(raw: str | None) -> str | None:
    """The commit of a PEP 610 direct_url.json that records a VCS install, else None (a
    local directory, an archive, an editable install)."""
    try:
        data = json_document(raw, "direct_url.json") if raw else None
    except ValueError:
        return None
    vcs = data.get("vcs_info") if isinstance(data, dict) else None
    commit = vcs.get("commit_id") if isinstance(vcs, dict) else None
    return commit if isinstance(commit, str) and _COMMIT.fullmatch(commit) else None


def checkout_head(source: Path) -> str | None:
    """git's HEAD of the tool's checkout at `source`, read from its files (a worktree's
    `.git` file names its git directory; a branch's commit is in refs/ or packed-refs)."""
    if not (source / "release" / "__init__.py").is_file():
        return None
    dot_git = source / ".git"
    try:
        if dot_git.is_file():
            dot_git = source / dot_git.read_text("utf-8").removeprefix("gitdir:").strip()
        head = (dot_git / "HEAD").read_text("utf-8").strip()
        if _COMMIT.fullmatch(head):
            return head
        ref = head.removeprefix("ref:").strip()
        common = dot_git / "commondir"
        roots = [dot_git]
        if common.is_file():
            roots.append(dot_git / common.read_text("utf-8").strip())
        return next((c for root in roots if (c := _ref_commit(root, ref))), None)
    except OSError:
        return None


def _ref_commit(root: Path, ref: str) -> str | None:
    loose = root / ref
    if loose.is_file():
        commit = loose.read_text("utf-8").strip()
        return commit if _COMMIT.fullmatch(commit) else None
    packed = root / "packed-refs"
    if packed.is_file():
        for line in packed.read_text("utf-8").splitlines():
            if line.endswith(f" {ref}") and _COMMIT.fullmatch(line[:40]):
                return line[:40]
    return None
