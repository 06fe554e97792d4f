"""The index on a GitHub Pages branch: the rendered tree committed as the whole content of a
branch, without touching the checkout's working tree or index, and optionally pushed.
`check_pages` asks, before the release's first upload, what the commit and the push need:
a branch name git takes, a git repository, a remote that answers. The files go in as they
are (`hash-object --no-filters`): no clean or smudge filter of the repository's runs."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from release import proc
from release.errors import ConfigError, PublishError, shown
from release.matrix.gitindex import is_ref_name
from release.remote.gitindex import without_advice

REPO_HINT = "--pages-repo must be a git repository you can commit to"
REMOTE_TIMEOUT_S = 60
_BATCH = 500  # paths per git command line


def _git(
    repo: Path,
    args: Sequence[str],
    env: Mapping[str, str],
    *,
    check: bool = True,
    timeout: float | None = None,
) -> proc.Completed:
    done = proc.run(["git", "-C", str(repo), *args], env=env, separate_stderr=True, timeout=timeout)
    if done.returncode != 0 and check:
        raise PublishError(
            f"git {args[0]} failed in {repo}: {proc.one_line_tail(done.stderr + done.output, 1)}",
            hint=REPO_HINT,
        )
    return done


def _out(repo: Path, args: Sequence[str], env: Mapping[str, str]) -> str:
    return _git(repo, args, env).output.strip()


def check_pages(
    repo: Path, *, branch: str, environ: Mapping[str, str], push_remote: str | None = None
) -> None:
    """What `commit_pages` needs, asked before anything is published: `branch` a name git
    takes for a branch, `repo` a git repository, `push_remote` (where given) one that
    answers. ConfigError naming the option for the first two, PublishError for the last."""
    if not _git(repo, ["rev-parse", "--absolute-git-dir"], environ, check=False).ok:
        raise ConfigError([f"--pages-repo {repo}: not a git repository"], hint=REPO_HINT)
    named = ["refs/heads/" + branch] if is_ref_name(branch) else []
    if not named or not _git(repo, ["check-ref-format", *named], environ, check=False).ok:
        raise ConfigError(
            [f"--pages-branch {shown(branch)}: not a name git takes for a branch"],
            hint="name a branch as `git branch` would take it (gh-pages)",
        )
    if push_remote is None:
        return
    done = _git(
        repo, ["ls-remote", "--heads", "--", push_remote, named[0]], {**environ,
        "GIT_TERMINAL_PROMPT": "0"}, check=False, timeout=REMOTE_TIMEOUT_S,
    )  # fmt: skip
    if not done.ok:
        said = proc.one_line_tail(without_advice(done.stderr + done.output), 2)
        raise PublishError(
            f"--pages-remote {shown(push_remote)}: git cannot reach it: {shown(said, 300)}",
            hint="name a remote of --pages-repo (or a URL) that you can push to; nothing "
            "was uploaded anywhere",
        )


def _index_files(directory: Path) -> list[str]:
    """The files under `directory`, relative (POSIX), without following a link."""
    found = []
    for folder, _, names in os.walk(directory):
        base = Path(folder).relative_to(directory)
        found += [(base / name).as_posix() for name in names if (Path(folder) / name).is_file()]
    return sorted(found)


def _tree(directory: Path, repo: Path, env: Mapping[str, str]) -> str:
    """The tree of the files in `directory`, stored as they are (no filter, no attribute of
    the repository's applies), built in the temporary index `env` names."""
    _git(repo, ["read-tree", "--empty"], env)
    files = _index_files(directory)
    for start in range(0, len(files), _BATCH):
        batch = files[start : start + _BATCH]
        paths = [str(directory / f) for f in batch]
        blobs = _out(repo, ["hash-object", "-w", "--no-filters", "--", *paths], env).split()
        infos = [
            a for f, b in zip(batch, blobs, strict=True) for a in ("--cacheinfo", f"100644,{b},{f}")
        ]
        _git(repo, ["update-index", "--add", *infos], env)
    return _out(repo, ["write-tree"], env)


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
    git_dir = _out(repo, ["rev-parse", "--absolute-git-dir"], environ)
    with tempfile.TemporaryDirectory() as tmp:
        env = {**environ, "GIT_INDEX_FILE": str(Path(tmp) / "index"), "GIT_DIR": git_dir}
        tree = _tree(directory.resolve(), repo, env)
    ref = f"refs/heads/{branch}"
    parent = _git(repo, ["rev-parse", "--verify", "--quiet", ref], environ, check=False)
    tip = parent.output.strip() if parent.ok else ""
    if tip and _out(repo, ["rev-parse", f"{tip}^{{tree}}"], environ) == tree:
        commit = tip
    else:
        parents = ["-p", tip] if tip else []
        commit = _out(repo, ["commit-tree", tree, *parents, "-m", message], environ)
        _git(repo, ["update-ref", ref, commit], environ)
    if push_remote:
        _git(repo, ["push", "--", push_remote, f"{ref}:{ref}"], environ)
    return commit
