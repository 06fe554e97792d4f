"""The index on a git branch for GitHub Pages: committed without touching the working tree,
pushed to a remote, and unchanged content makes no new commit."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from release.destinations.index import IndexFile, render_index, write_index
from release.publish.pages import commit_pages

ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "release",
    "GIT_AUTHOR_EMAIL": "release@example.org",
    "GIT_COMMITTER_NAME": "release",
    "GIT_COMMITTER_EMAIL": "release@example.org",
}


def git(repo: Path, *args: str) -> str:
    cmd = ["git", "-C", str(repo), *args]
    return subprocess.run(  # git from PATH, as in the product
        cmd, env=ENV, check=True, capture_output=True, text=True
    ).stdout.strip()


def wheel(sha: str) -> IndexFile:
    name = "k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_x86_64.whl"
    return IndexFile(filename=name, url=f"https://github.com/o/r/releases/download/v0.1.0/{name}",
                     sha256=sha)  # fmt: skip


def test_commit_pages_pushes_the_tree_and_leaves_the_checkout_alone(tmp_path: Path) -> None:
    repo, remote, site = tmp_path / "repo", tmp_path / "remote.git", tmp_path / "site"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    (repo / "README").write_text("code\n")
    git(repo, "add", "README")
    git(repo, "commit", "-q", "-m", "code")
    git(repo, "remote", "add", "origin", str(remote))

    write_index(render_index([wheel("a" * 64)]), site)
    first = commit_pages(site, repo=repo, branch="gh-pages", message="index", environ=ENV,
                         push_remote="origin")  # fmt: skip
    assert git(repo, "rev-parse", "HEAD") != first
    assert git(repo, "status", "--porcelain") == ""
    files = git(remote, "ls-tree", "-r", "--name-only", "gh-pages").splitlines()
    assert files == [
        "cu129/index.html", "cu129/index.json",
        "cu129/k3-kernels/index.html", "cu129/k3-kernels/index.json",
    ]  # fmt: skip

    again = commit_pages(site, repo=repo, branch="gh-pages", message="index", environ=ENV)
    assert again == first

    write_index(render_index([wheel("b" * 64)]), site)
    second = commit_pages(site, repo=repo, branch="gh-pages", message="index", environ=ENV)
    assert git(repo, "rev-parse", f"{second}^") == first
    page = git(repo, "show", "gh-pages:cu129/k3-kernels/index.html")
    assert "#sha256=" + "b" * 64 in page
    assert "a" * 64 not in page
