"""The index on a GitHub Pages branch: the rendered tree committed as the whole content of a
branch, without touching the checkout's working tree or index, and optionally pushed."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from release import proc
from release.errors import PublishError


def _git(
    repo: Path,
    args: Sequence[str],
    env: Mapping[str, str],
    cwd: Path | None = None,
    *,
    check: bool = True,
) -> str:
    done = proc.run(
        ["git", *args] if cwd else ["git", "-C", str(repo), *args],
        cwd=cwd,
        env=env,
        separate_stderr=True,
    )
    if done.returncode != 0 and check:
        raise PublishError(
            f"git {args[0]} failed in {repo}: {proc.one_line_tail(done.stderr + done.output, 1)}",
            hint="--pages-repo must be a git repository you can commit to",
        )
    return done.output.strip() if done.returncode == 0 else ""


def commit_pages(
    directory: Path,
    *,
    repo: Path,
    branch: str,
    message: str,
    environ: Mapping[str, str],
    push_remote: str | None = None,
) -> str:
    """Commit the index tree in `directory` as the whole content of `branch` in `repo`
    (without touching its working tree or index), optionally push it; return the commit."""
    git_dir = _git(repo, ["rev-parse", "--absolute-git-dir"], environ)
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **environ,
            "GIT_INDEX_FILE": str(Path(tmp) / "index"),
            "GIT_DIR": git_dir,
            "GIT_WORK_TREE": str(directory.resolve()),
        }
        _git(repo, ["add", "--all", "--force", "."], env, cwd=directory.resolve())
        tree = _git(repo, ["write-tree"], env, cwd=directory.resolve())
        parent = _git(
            repo, ["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"], environ, check=False
        )
        if parent and _git(repo, ["rev-parse", f"{parent}^{{tree}}"], environ) == tree:
            commit = parent
        else:
            parents = ["-p", parent] if parent else []
            commit = _git(repo, ["commit-tree", tree, *parents, "-m", message], environ)
            _git(repo, ["update-ref", f"refs/heads/{branch}", commit], environ)
    if push_remote:
        _git(repo, ["push", push_remote, f"refs/heads/{branch}:refs/heads/{branch}"], environ)
    return commit
