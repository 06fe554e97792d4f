"""A pip index committed to a directory of a git repository, beside other projects' pages:
sgl-project/whl's layout (`cu129/`, `cu130/` on its gh-pages branch, each holding one
folder per project and a root page listing them, served by GitHub Pages).

The core is pure: `merge_pages` takes this project's pages (release.destinations.index's
`render_index` tree, read by `PackagePages.from_rendered`), the files the branch holds under
the directory and the root pages among them, and says what to write and delete. This
project's folder of each label it has pages for is replaced whole (never appended to); the
root page of that label is rewritten, in the caller's format, only where it does not list
exactly the project folders the label holds, so that it stays in sync; nothing else is ever
written or deleted: other projects' pages, other labels, the directory's own landing page
and every file outside the directory stay as they are, byte for byte.

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
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from packaging.utils import canonicalize_name

from release import proc
from release.credentials import Secret, redact, without_credentials
from release.errors import PublishError
from release.remote.simple_index import root_html_links, root_html_projects, root_json_projects

ROOT_HTML = "index.html"
ROOT_JSON = "index.json"
ATTEMPTS = 4  # pushes, each after a fresh fetch
BACKOFF_SECONDS = 1.0  # before the second attempt; doubled after each
# The pages of one label's root, given the project folders it holds: files by name
# (index.html, and index.json where the caller writes PEP 691 too).
RootPages = Callable[[str, Sequence[str]], Mapping[str, bytes]]


# --- The core: pages in, the change out. ---


def _segment_problem(name: str) -> str | None:
    if not name or name in {".", ".."} or name.startswith(".git") or "/" in name or "\\" in name:
        return f"{name!r} cannot be a folder of an index"
    return None


@dataclass(frozen=True, kw_only=True)
class PackagePages:
    """One project's pages of an index: for each local label, the files of its folder
    `<label>/<project>/` (index.html, index.json)."""

    project: str  # canonical: the folder's name
    pages: Mapping[str, Mapping[str, bytes]]  # label -> file name -> bytes

    @classmethod
    def from_rendered(cls, tree: Mapping[str, bytes], project: str) -> PackagePages:
        """This project's pages from a rendered index tree (`<label>/<project>/<file>`);
        its label roots are left out (`merge_pages` keeps each in sync with its folder).
        ValueError for any other file, or one of another project: a shared index takes
        a project's own pages only."""
        name = str(canonicalize_name(project))
        pages: dict[str, dict[str, bytes]] = {}
        for path, data in sorted(tree.items()):
            parts = path.split("/")
            if len(parts) == 2 and parts[1] in (ROOT_HTML, ROOT_JSON):
                continue
            if len(parts) != 3 or parts[1] != name:
                raise ValueError(f"{path}: not a page of {name} under a label's folder")
            problem = _segment_problem(parts[0]) or _segment_problem(parts[2])
            if problem is not None:
                raise ValueError(f"{path}: {problem}")
            pages.setdefault(parts[0], {})[parts[2]] = data
        if not pages:
            raise ValueError(f"no page of {name} to publish")
        return cls(project=name, pages=pages)


def commit_message(pages: PackagePages, version: str) -> str:
    """The commit's message: the project, its version and the labels it lists, as
    sgl-project's own scripts name theirs (`update sgl-deep-gemm whl index for v0.1.4`)."""
    return f"{pages.project} {version}: index pages ({', '.join(sorted(pages.pages))})"


@dataclass(frozen=True, kw_only=True)
class IndexChange:
    """What one publish does to the branch: paths from the repository's root."""

    writes: Mapping[str, bytes]
    deletes: tuple[str, ...] = ()

    @property
    def paths(self) -> tuple[str, ...]:
        return (*sorted(self.writes), *self.deletes)


def _join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


# the files that make a folder of a label a project's page (PEP 503 HTML, as a static host
# serves a directory; PEP 691 JSON alone)
_PROJECT_PAGES = (ROOT_HTML, "index.htm", ROOT_JSON)


def _projects_in(listing: Collection[str], label_dir: str) -> dict[str, str]:
    """The project folders of a label's folder (those holding a page: _PROJECT_PAGES),
    canonical name -> folder name."""
    prefix = label_dir + "/" if label_dir else ""
    found: dict[str, str] = {}
    for path in sorted(listing):
        rest = path[len(prefix) :] if path.startswith(prefix) else None
        if rest is None:
            continue
        parts = rest.split("/")
        if len(parts) == 2 and parts[1] in _PROJECT_PAGES:
            found.setdefault(str(canonicalize_name(parts[0])), parts[0])
    return found


def _listed_elsewhere(read: Mapping[str, bytes], html: str, holds: set[str]) -> str | None:
    """A link of a label's root page to a page elsewhere (another host, an absolute path
    or a folder above: `https://mirror.example/cu130/omega/`, `/omega/`, `../omega/`) that
    rewriting the root, which lists the label's folders, would drop; None where there is
    none. A relative link to a folder the label no longer holds is stale, and goes."""
    if html not in read:
        return None
    links = root_html_links(read[html].decode("utf-8", errors="replace"))
    elsewhere = sorted(
        href
        for name, href in links.items()
        if name not in holds and (urlsplit(href).netloc or href.startswith(("/", "../")))
    )
    if not elsewhere:
        return None
    return (
        f"{html} links {', '.join(elsewhere[:3])}{' ...' if len(elsewhere) > 3 else ''}, a page "
        "elsewhere: rewriting it to list the label's folders would drop that link"
    )


def pages_to_read(listing: Collection[str], pages: PackagePages, directory: str) -> list[str]:
    """The files `merge_pages` reads: the root pages of the labels it writes, where the
    branch has them."""
    return sorted(
        path
        for label in pages.pages
        for path in (_join(directory, label, ROOT_HTML), _join(directory, label, ROOT_JSON))
        if path in listing
    )


def _root_in_sync(read: Mapping[str, bytes], html: str, json: str, holds: set[str]) -> bool:
    """Whether a label's root pages (those there are) list exactly the folders it holds."""
    if html not in read:
        return False
    if root_html_projects(read[html].decode("utf-8", errors="replace")) != holds:
        return False
    if json not in read:
        return True
    try:
        return root_json_projects(read[json]) == holds
    except ValueError:
        return False


def merge_pages(
    listing: Collection[str],
    read: Mapping[str, bytes],
    pages: PackagePages,
    *,
    directory: str,
    root_pages: RootPages,
    others: Mapping[str, str] | None = None,
) -> IndexChange:
    """The change that puts `pages` into a branch whose files are `listing` (paths from the
    repository's root; `read` holds the bytes of those `pages_to_read` names): this
    project's folder of each of its labels replaced whole, and that label's root rewritten
    by `root_pages` where it does not list exactly the project folders the label will hold.
    Nothing else is written or deleted: ValueError where an entry of the branch that is not
    this project's (a file, a symlink or a submodule in `others`: path -> what it is, or a
    folder) stands where a page or a folder of one goes, which writing would replace."""
    if any(p == ".." or p.startswith(".git") for p in PurePosixPath(directory).parts):
        raise ValueError(f"{directory!r}: not a directory inside the repository")
    writes: dict[str, bytes] = {}
    deletes: list[str] = []
    for label, files in sorted(pages.pages.items()):
        label_dir = _join(directory, label)
        folder = _join(label_dir, pages.project)
        for name, data in sorted(files.items()):
            writes[_join(folder, name)] = data
        entries = [*listing, *(others or {})]
        deletes += sorted(p for p in entries if p.startswith(folder + "/") and p not in writes)
        holds = {**_projects_in(listing, label_dir), pages.project: pages.project}
        html, json = _join(label_dir, ROOT_HTML), _join(label_dir, ROOT_JSON)
        if not _root_in_sync(read, html, json, set(holds)):
            dropped = _listed_elsewhere(read, html, set(holds))
            if dropped is not None:
                raise ValueError(dropped)
            for name, data in root_pages(label, sorted(holds.values())).items():
                writes[_join(label_dir, name)] = data
    change = IndexChange(writes=writes, deletes=tuple(deletes))
    own = [_join(directory, label, pages.project) for label in pages.pages]
    blocked = _in_the_way(listing, others or {}, change, own)
    if blocked is not None:
        raise ValueError(blocked)
    return change


def _in_the_way(
    listing: Collection[str], others: Mapping[str, str], change: IndexChange, own: Sequence[str]
) -> str | None:
    """Why writing `change` would replace an entry that is not this project's (in its own
    folders `own`, everything is replaced whole): a file, symlink or submodule where a
    folder of a written page goes, or anything under a path a page is written to."""
    entries = {**dict.fromkeys(listing, "a file"), **others}

    def ours(path: str) -> bool:
        return any(path == folder or path.startswith(folder + "/") for folder in own)

    for path in sorted(change.writes):
        if path in others and not ours(path):
            return f"{path} is {others[path]} on the branch: writing it would replace it"
        parts = path.split("/")
        for depth in range(1, len(parts)):
            above = "/".join(parts[:depth])
            if above in entries and not ours(above):
                return (
                    f"{above} is {entries[above]} on the branch, where the index's folder "
                    f"{above}/ goes: writing {path} would replace it"
                )
        below = next((p for p in entries if p.startswith(path + "/") and not ours(p)), None)
        if below is not None:
            return (
                f"{path} is a folder on the branch (it holds {below}): writing it would replace it"
            )
    return None


# --- The edge: git. ---


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
    parts = urlsplit(target.url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return env, (target.token.reveal(),)
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
        return done

    def error(self, what: str, done: proc.Completed) -> PublishError:
        """`what failed (exit N): what git said`, or for a refused push (`what` is then the
        whole phrase) what the remote said."""
        refusal = _refusal(done)
        said = (
            f"{what}: {refusal}"
            if refusal is not None
            else f"{what} failed (exit {done.returncode}): "
            + proc.one_line_tail(done.stderr + done.output, 2)
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


def _refusal(done: proc.Completed) -> str | None:
    """Why a push was refused, from its porcelain line and what the remote said (a hook's
    words): `[remote rejected] (pre-receive hook declined): protected branch`."""
    status = next((line for line in done.output.splitlines() if line.startswith("!")), None)
    if status is None:
        return None
    reason = status.split("\t")[-1].strip()
    said = [
        line.removeprefix("remote:").strip()
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
    lost to a text decoding; PublishError for a path that is not UTF-8."""
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
        try:
            path = unquoted_path(quoted)
        except ValueError:
            raise PublishError(
                f"{git.target.shown}: the branch holds {quoted}, a path that is not UTF-8",
                hint="rename it in the index's repository: its pages are listed by name",
            ) from None
        if fields[1] == "blob" and fields[0] in ("100644", "100755"):
            files[path] = fields[2]
        else:
            others[path] = _ENTRY_KINDS.get(fields[0], f"a {fields[1]}")
    return files, others


_C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def unquoted_path(text: str) -> str:
    """A path as git prints it with core.quotePath (`"a\\rb\\303\\251"`: C escapes, octal
    bytes) as the text it stands for; ValueError where its bytes are not UTF-8."""
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
    return out.decode("utf-8")


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
        raise PublishError(
            f"{git.target.shown}: nothing was pushed: {error}",
            hint="release replaces nothing but this project's own pages: move that entry "
            "out of the way in the index's repository",
        ) from None
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
        work, scratch = Path(tmp) / "repo", Path(tmp) / "scratch"
        work.mkdir()
        scratch.mkdir()
        git = _Git(work, target, environ, runner)
        git("init", "--quiet", what="making a scratch repository")
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
