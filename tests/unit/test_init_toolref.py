"""release.init.toolref: the commit a caller's `uses:` are pinned to, from PEP 610's
direct_url.json of a git install and from a checkout's git files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from release.init.toolref import checkout_head, commit_of_direct_url, tool_commit

COMMIT = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
OTHER = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"


@pytest.mark.parametrize(
    ("recorded", "expected"),
    [
        (  # pip install git+https://github.com/k3-project/cuda-wheel-release@main
            {"url": "https://github.com/k3-project/cuda-wheel-release",
             "vcs_info": {"vcs": "git", "requested_revision": "main", "commit_id": COMMIT}},
            COMMIT,
        ),
        ({"url": "file:///src/cuda-wheel-release", "dir_info": {"editable": True}}, None),
        ({"url": "https://x/a.tar.gz", "archive_info": {"hashes": {"sha256": "0" * 64}}}, None),
        ({"url": "https://x", "vcs_info": {"vcs": "git", "commit_id": "main"}}, None),
    ],
)  # fmt: skip
def test_a_git_install_records_its_commit_and_nothing_else_does(
    recorded: dict[str, object], expected: str | None
) -> None:
    assert commit_of_direct_url(json.dumps(recorded)) == expected


@pytest.mark.parametrize("raw", [None, "", "not json", "[1]"])
def test_no_or_bad_direct_url_is_no_commit(raw: str | None) -> None:
    assert commit_of_direct_url(raw) is None


def checkout(tmp_path: Path) -> Path:
    (tmp_path / "release").mkdir(parents=True)
    (tmp_path / "release" / "__init__.py").write_text("", encoding="utf-8")
    return tmp_path


def test_a_branch_head_is_read_from_refs_or_packed_refs(tmp_path: Path) -> None:
    source = checkout(tmp_path)
    git = source / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    (git / "packed-refs").write_text(
        f"# pack-refs with: peeled\n{OTHER} refs/heads/other\n{COMMIT} refs/heads/main\n",
        encoding="utf-8",
    )
    assert checkout_head(source) == COMMIT
    (git / "refs" / "heads" / "main").write_text(OTHER + "\n", encoding="utf-8")
    assert checkout_head(source) == OTHER  # a loose ref is newer than the packed one


def test_a_worktree_reads_its_head_and_the_common_refs(tmp_path: Path) -> None:
    common = tmp_path / "main" / ".git"
    own = common / "worktrees" / "wt"
    own.mkdir(parents=True)
    (common / "refs" / "heads").mkdir(parents=True)
    (common / "refs" / "heads" / "topic").write_text(COMMIT + "\n", encoding="utf-8")
    (own / "HEAD").write_text("ref: refs/heads/topic\n", encoding="utf-8")
    (own / "commondir").write_text("../..\n", encoding="utf-8")
    source = checkout(tmp_path / "wt")
    (source / ".git").write_text(f"gitdir: {own}\n", encoding="utf-8")
    assert checkout_head(source) == COMMIT
    (own / "HEAD").write_text(OTHER + "\n", encoding="utf-8")  # detached
    assert checkout_head(source) == OTHER


def test_no_checkout_or_another_project_is_no_commit(tmp_path: Path) -> None:
    assert checkout_head(tmp_path) is None
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text(COMMIT, encoding="utf-8")
    assert checkout_head(tmp_path) is None, "not the tool's checkout"


def test_this_copy_of_the_tool_knows_a_commit() -> None:
    found = tool_commit()
    assert found is not None
    assert len(found) == 40
