"""A pip index committed to a directory of a git repository, beside other projects' pages:
sgl-project/whl's layout (`cu129/`, `cu130/` on its gh-pages branch, each holding one
folder per project and a root page listing them, served by GitHub Pages).

The core is pure (release.remote.gitpages): `merge_pages` says what this project's pages
change on the branch, writing or deleting nothing that is not its own.

The edge, `push_pages`, does it with git (release.proc): it fetches the branch's tip alone
(depth 1), builds the new tree from the fetched one with a temporary index (no checkout, so
no filter or line-ending rule touches anyone's files), makes one commit naming the project
and its version, and pushes it without force. A push that is rejected (a hook, or another
project's commit that moved the branch since the fetch) fetches again and re-applies the
merge on the new tip, a bounded number of times; a push either lands whole or changes
nothing, so a failure leaves the branch as it was. The token goes to git in the environment
as an HTTP header for the remote's origin only (`GIT_CONFIG_*`: never on a command line, in
a URL or in a log), and every message and log is masked.
"""

from __future__ import annotations

import base64
import re
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from release import proc
from release.credentials import Secret, redact, without_credentials
from release.errors import PublishError
from release.remote.gitpages import (
    IndexChange,
    PackagePages,
    RootPages,
    commit_message,
    merge_pages,
    pages_to_read,
)


class InTheWay(PublishError):
    """The branch holds something that is not the project's where its pages go: nothing is
    pushed (as against a branch git could not reach)."""


ATTEMPTS = 4  # pushes, each after a fresh fetch
BACKOFF_SECONDS = 1.0  # before the second attempt; doubled after each


@dataclass(frozen=True, kw_only=True)
class GitIndexTarget:
    """Where the pages go: a git remote's branch and the directory in it, and the token
    that writes there (None: git's own credentials, or none for a path on disk)."""

    url: str
    branch: str
    directory: str  # "" for the root
    token: Secret | None = None

    @property
    def shown(self) -> str:
        return f"{redact(self.url)} ({self.branch})"


@dataclass(frozen=True, kw_only=True)
class IndexPush:
    """What a push did: the branch's commit after it (its tip as found, when nothing
    changed), whether it changed, the attempts it took and the paths it wrote or deleted."""

    commit: str
    changed: bool
    attempts: int
    paths: tuple[str, ...] = ()


DEFAULT_IDENTITY = ("github-actions[bot]", "41898282+github-actions[bot]@users.noreply.github.com")
# variables of the caller's that would point git elsewhere, show what it sends, or set
# configuration in place of ours
_GIT_VARIABLES = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_CURL_VERBOSE",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
)


def carries_token(url: str) -> bool:
    """Whether git sends a token to the remote at `url`: over HTTP(S) alone (ssh has its
    own keys; a path or file: URL is this machine's)."""
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def git_environment(
    environ: Mapping[str, str], target: GitIndexTarget
) -> tuple[dict[str, str], tuple[str, ...]]:
    """The environment git runs in, and the values to mask in what it prints: the caller's
    without credentials and git's redirections, never prompting, and the token (if any) as
    an `Authorization` header for the remote's origin, in `GIT_CONFIG_*`."""
    env = {
        k: v
        for k, v in without_credentials(environ).items()
        if k not in _GIT_VARIABLES
        and not k.startswith(("GIT_TRACE", "GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))
    }
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["LC_ALL"] = "C"  # git's messages in English, which the errors quote
    if target.token is None:
        return env, ()
    if not carries_token(target.url):
        return env, (target.token.reveal(),)
    parts = urlsplit(target.url)
    token = target.token.reveal()
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    env["GIT_CONFIG_COUNT"] = "2"
    env["GIT_CONFIG_KEY_0"] = f"http.{parts.scheme}://{parts.netloc}/.extraheader"
    env["GIT_CONFIG_VALUE_0"] = f"Authorization: basic {basic}"
    # git sends a URL's extra header on to wherever the remote redirects (another host
    # included): a remote that redirects gets no request of ours after its answer
    env["GIT_CONFIG_KEY_1"] = "http.followRedirects"
    env["GIT_CONFIG_VALUE_1"] = "false"
    return env, (token, basic)


class _Git:
    """git in one scratch repository, every call through the runner, masked."""

    def __init__(
        self,
        work: Path,
        target: GitIndexTarget,
        environ: Mapping[str, str],
        runner: proc.Runner,
    ) -> None:
        self.work = work
        self.target = target
        self.env, self.secrets = git_environment(environ, target)
        self.runner = runner

    def __call__(
        self, *args: str, what: str, env: Mapping[str, str] | None = None, check: bool = True
    ) -> proc.Completed:
        done = self.runner(
            ["git", *args],
            env={**self.env, **(env or {})},
            cwd=self.work,
            timeout=300,
            separate_stderr=True,
            secrets=self.secrets,
        )
        if check and not done.ok:
            raise self.error(what, done)
        if (too_long := proc.too_long("git", done)) is not None:
            raise PublishError(f"git index {self.target.shown}: {what}: {too_long}")
        return done

    def error(self, what: str, done: proc.Completed) -> PublishError:
        """`what failed (exit N): what git said`, or for a refused push (`what` is then the
        whole phrase) what the remote said."""
        refusal = _refusal(done)
        said = (
            f"{what}: {refusal}"
            if refusal is not None
            else f"{what} failed (exit {done.returncode}): "
            + proc.one_line_tail(without_advice(done.stderr + done.output), 2)
        )
        redirected = re.search(r"returned error: 30[12378]\b", done.stderr + done.output)
        return PublishError(
            f"git index {self.target.shown}: {said}",
            hint="the remote redirects elsewhere, where its token is not sent: write the URL "
            "it redirects to as the git-index destination's url"
            if redirected
            else "check the git-index destination's url and branch, and that its token-secret "
            "variable holds a token that may push there (contents: write)",
        )


# what git says after any failure to reach a remote, which would hide the cause before it
# (`ssh: connect to host ...: Connection refused`, `'/x' does not appear to be a git repository`)
_ADVICE = ("Please make sure you have the correct access rights", "and the repository exists.")


def without_advice(text: str) -> str:
    """What git said, without the advice it adds to every failure to reach a remote, which
    would stand in a message's last line in place of the cause."""
    return "\n".join(line for line in text.splitlines() if line.strip() not in _ADVICE)


def _refusal(done: proc.Completed) -> str | None:
    """Why a push was refused, from its porcelain line and what the remote said (a hook's
    words): `[remote rejected] (pre-receive hook declined): protected branch`."""
    status = next((line for line in done.output.splitlines() if line.startswith("!")), None)
    if status is None:
        return None
    reason = proc.excerpt(status.split("\t")[-1].strip())
    said = [
        proc.excerpt(line.removeprefix("remote:").strip())
        for line in done.stderr.splitlines()
        if line.startswith("remote:") and line.removeprefix("remote:").strip()
    ]
    return f"{reason}: {' | '.join(said[-2:])}" if said else reason


FETCHED = "refs/remotes/index/tip"


def _fetch(git: _Git) -> str | None:
    """The branch's tip, fetched alone (depth 1), or None where the remote has no such
    branch yet (the first commit makes it)."""
    branch = f"refs/heads/{git.target.branch}"
    listed = git("ls-remote", "--", git.target.url, branch, what="reading the branch")
    if not any(line.endswith(f"\t{branch}") for line in listed.output.splitlines()):
        return None
    refspec = f"+{branch}:{FETCHED}"
    git(
        "fetch", "--depth=1", "--no-tags", "--", git.target.url, refspec, what="fetching the branch"
    )
    return git("rev-parse", "--verify", FETCHED, what="reading the branch").output.strip()


_ENTRY_KINDS = {"120000": "a symlink", "160000": "a submodule"}


def _listing(git: _Git, tip: str | None) -> tuple[dict[str, str], dict[str, str]]:
    """The entries under the directory at `tip`: the files (path -> blob id), and every
    other entry (path -> what it is: a symlink, a submodule). Paths come C-quoted where
    they hold anything unusual (a carriage return, a byte past ASCII), so that no byte is
    lost to a text decoding; one that is not UTF-8 reads as `unquoted_path` reads it."""
    if tip is None:
        return {}, {}
    where = [git.target.directory] if git.target.directory else []
    done = git(
        "-c", "core.quotePath=true", "ls-tree", "-r", "--full-tree", tip, "--", *where,
        what="listing the tree",
    )  # fmt: skip
    files: dict[str, str] = {}
    others: dict[str, str] = {}
    for line in done.output.split("\n"):
        head, _, quoted = line.partition("\t")
        fields = head.split()
        if len(fields) != 3:
            continue
        path = unquoted_path(quoted)
        if fields[1] == "blob" and fields[0] in ("100644", "100755"):
            files[path] = fields[2]
        else:
            others[path] = _ENTRY_KINDS.get(fields[0], f"a {fields[1]}")
    return files, others


_C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def unquoted_path(text: str) -> str:
    """A path as git prints it with core.quotePath (`"a\\rb\\303\\251"`: C escapes, octal
    bytes) as the text it stands for. Bytes that are not UTF-8 read as os.fsdecode reads
    them (lone surrogates): another project's file so named is left as it is, and a git
    command given the path gets its bytes back."""
    if len(text) < 2 or not (text.startswith('"') and text.endswith('"')):
        return text
    body, out, at = text[1:-1], bytearray(), 0
    while at < len(body):
        if body[at] != "\\":
            out += body[at].encode()
            at += 1
        elif body[at + 1 : at + 2] in _C_ESCAPES:
            out.append(_C_ESCAPES[body[at + 1]])
            at += 2
        else:
            out.append(int(body[at + 1 : at + 4], 8) & 0xFF)
            at += 4
    return out.decode("utf-8", "surrogateescape")


def _new_tree(git: _Git, tip: str | None, change: IndexChange, scratch: Path) -> str:
    """The tree of `tip` with `change` applied, built in a temporary index."""
    env = {"GIT_INDEX_FILE": str(scratch / "index")}
    (scratch / "index").unlink(missing_ok=True)
    if tip is not None:
        git("read-tree", tip, what="reading the tree", env=env)
    else:
        git("read-tree", "--empty", what="reading the tree", env=env)
    files = []
    for number, (path, data) in enumerate(sorted(change.writes.items())):
        file = scratch / f"blob-{number}"
        file.write_bytes(data)
        files.append((path, file))
    if files:
        hashed = git(
            "hash-object", "-w", "--no-filters", "--", *(str(f) for _, f in files),
            what="storing the pages",
        )  # fmt: skip
        blobs = hashed.output.split()
        infos = [f"100644,{blob},{path}" for (path, _), blob in zip(files, blobs, strict=True)]
        added = [a for info in infos for a in ("--cacheinfo", info)]
        git("update-index", "--add", "--replace", *added, what="staging the pages", env=env)
    if change.deletes:
        git(
            "update-index", "--force-remove", "--", *change.deletes,
            what="staging the removals", env=env,
        )  # fmt: skip
    return git("write-tree", what="writing the tree", env=env).output.strip()


def _identity(git: _Git, environ: Mapping[str, str]) -> dict[str, str]:
    """Who commits: the caller's git identity, else the Actions bot's."""
    if environ.get("GIT_AUTHOR_NAME") or git("config", "user.name", what="", check=False).ok:
        return {}
    name, email = DEFAULT_IDENTITY
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


def _change(
    git: _Git, pages: PackagePages, root_pages: RootPages
) -> tuple[str | None, IndexChange]:
    """The branch's tip, fetched, and the change that puts `pages` on it (PublishError:
    something not this project's is in the way, and nothing is pushed)."""
    tip = _fetch(git)
    listing, others = _listing(git, tip)
    read = {
        path: git("cat-file", "blob", listing[path], what="reading a root page").output.encode()
        for path in pages_to_read(listing, pages, git.target.directory)
    }
    try:
        change = merge_pages(
            listing,
            read,
            pages,
            directory=git.target.directory,
            root_pages=root_pages,
            others=others,
        )
    except ValueError as error:
        raise InTheWay(
            f"{git.target.shown}: nothing was pushed: {error}",
            hint="release replaces nothing but this project's own pages: move that entry "
            "out of the way in the index's repository",
        ) from None
    return tip, change


def _attempt(
    git: _Git,
    *,
    pages: PackagePages,
    root_pages: RootPages,
    message: str,
    identity: Mapping[str, str],
    scratch: Path,
) -> tuple[IndexPush | None, proc.Completed | None]:
    """One fetch, merge and push: the outcome, or the push that was refused."""
    tip, change = _change(git, pages, root_pages)
    tree = _new_tree(git, tip, change, scratch)
    if tip is not None and git("rev-parse", f"{tip}^{{tree}}", what="").output.strip() == tree:
        return IndexPush(commit=tip, changed=False, attempts=0), None
    parents = ["-p", tip] if tip is not None else []
    commit = git(
        "commit-tree", tree, *parents, "-m", message, what="committing", env=identity
    ).output.strip()
    ref = f"{commit}:refs/heads/{git.target.branch}"
    # --no-verify: no pre-push hook of the caller's; the remote's own hooks run as ever
    pushed = git(
        "push", "--no-verify", "--porcelain", "--", git.target.url, ref, what="", check=False
    )
    if not pushed.ok:
        return None, pushed
    return IndexPush(commit=commit, changed=True, attempts=0, paths=change.paths), None


def _scratch_repository(
    tmp: Path, target: GitIndexTarget, environ: Mapping[str, str], runner: proc.Runner
) -> _Git:
    """git in an empty repository made in `tmp`, talking to `target`."""
    work = tmp / "repo"
    work.mkdir()
    git = _Git(work, target, environ, runner)
    git("init", "--quiet", what="making a scratch repository")
    return git


def check_pages(
    target: GitIndexTarget,
    pages: PackagePages,
    *,
    root_pages: RootPages,
    environ: Mapping[str, str],
    runner: proc.Runner = proc.run,
) -> None:
    """What `push_pages` would find, found before anything of the release is published:
    the branch reached and its tip fetched, and the merge of `pages` worked out (its
    pages' bytes do not matter, their paths do); nothing is committed or pushed.
    PublishError as `push_pages` raises it: git cannot reach the branch, or an entry that
    is not this project's is in the way."""
    with tempfile.TemporaryDirectory(prefix="release-git-index-") as tmp:
        _change(_scratch_repository(Path(tmp), target, environ, runner), pages, root_pages)


def push_pages(
    target: GitIndexTarget,
    pages: PackagePages,
    *,
    root_pages: RootPages,
    version: str,
    environ: Mapping[str, str],
    runner: proc.Runner = proc.run,
    attempts: int = ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
) -> IndexPush:
    """Commit `pages` (of the project's release `version`) to the target's branch as one
    commit and push it; see the module doc. Raises PublishError, with the branch
    as it was, when git cannot reach it or every attempt's push is refused."""
    with tempfile.TemporaryDirectory(prefix="release-git-index-") as tmp:
        git = _scratch_repository(Path(tmp), target, environ, runner)
        scratch = Path(tmp) / "scratch"
        scratch.mkdir()
        identity = _identity(git, environ)
        refused: proc.Completed | None = None
        for attempt in range(1, attempts + 1):
            if attempt > 1:
                sleep(BACKOFF_SECONDS * 2 ** (attempt - 2))
            outcome, refused = _attempt(
                git,
                pages=pages,
                root_pages=root_pages,
                message=commit_message(pages, version),
                identity=identity,
                scratch=scratch,
            )
            if outcome is not None:
                return IndexPush(
                    commit=outcome.commit,
                    changed=outcome.changed,
                    attempts=attempt,
                    paths=outcome.paths,
                )
        if refused is None:
            raise ValueError(f"attempts: {attempts}, not at least 1")
        what = f"the push was refused {attempts} times and the branch is as it was"
        raise git.error(what, refused)
