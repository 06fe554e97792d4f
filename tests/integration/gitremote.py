"""A git repository on disk in the role of sgl-project/whl: a bare repository whose
gh-pages branch already holds another package's pages, and the git calls the tests make
on it (as another project's own scripts would, under their own identity)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

GIT = shutil.which("git") or "git"  # git from PATH, as the product runs it
BRANCH = "gh-pages"
IDENTITY = {
    "GIT_AUTHOR_NAME": "other-bot",
    "GIT_AUTHOR_EMAIL": "other@example.org",
    "GIT_COMMITTER_NAME": "other-bot",
    "GIT_COMMITTER_EMAIL": "other@example.org",
}
# another package's pages as its own scripts write them: no DOCTYPE, a CRLF, a byte that is
# not UTF-8, no newline at the end; the cu130 root lists it
OTHERS = {
    "index.html": b'<h1>Kernel wheels</h1>\n<a href="cu130/">cu130</a><br>\n',
    "README.md": b"# wheels\n",
    "cu130/index.html": b'<!DOCTYPE html>\n<a href="acme-kernel/">acme-kernel</a>\n',
    "cu130/acme-kernel/index.html": (
        b'<a href="https://h.example/acme_kernel-1.0+cu130-cp310-abi3-linux_x86_64.whl'
        b"#sha256=" + b"0" * 64 + b'">acme_kernel-1.0+cu130</a><br>\r\n<!-- \xff -->'
    ),
    "nightly/cu129/acme/index.html": b"<a href='a.whl'>a.whl</a>",
}


def clean_env() -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LC_ALL": "C", **IDENTITY}


def git(*args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None) -> str:
    done = subprocess.run(
        [GIT, *args], cwd=cwd, capture_output=True, check=True, env={**clean_env(), **(env or {})}
    )
    return done.stdout.decode("utf-8", errors="replace").strip()


def seeded(bare: Path, seed: Path) -> Path:
    """`bare`, a bare repository whose gh-pages branch holds OTHERS, pushed from `seed`."""
    git("init", "--quiet", "--bare", f"--initial-branch={BRANCH}", str(bare))
    git("init", "--quiet", f"--initial-branch={BRANCH}", str(seed))
    for path, data in OTHERS.items():
        (seed / path).parent.mkdir(parents=True, exist_ok=True)
        (seed / path).write_bytes(data)
    git("add", "--all", cwd=seed)
    git("commit", "--quiet", "-m", "acme-kernel 1.0", cwd=seed)
    git("push", "--quiet", str(bare), BRANCH, cwd=seed)
    return bare


def tree_of(remote: Path, ref: str = BRANCH) -> dict[str, bytes]:
    """Every file of `ref` in `remote`, with its bytes."""
    paths = git("ls-tree", "-r", "--name-only", ref, cwd=remote).splitlines()
    return {
        path: subprocess.run(
            [GIT, "cat-file", "blob", f"{ref}:{path}"], cwd=remote, capture_output=True,
            check=True,
        ).stdout
        for path in paths
    }  # fmt: skip
