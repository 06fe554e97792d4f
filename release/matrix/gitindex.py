"""The git-index destinations of matrix.yaml, and the keys of a github destination that
reach past its own repository: `token-secret` (the token that writes there) and `index`
(the git-index destination that lists its wheels).

A git-index destination is a directory of a git repository holding the pip index of
github destinations' wheels, one folder per local label, beside other projects' pages:
sgl-project/whl's `cu129/`, `cu130/` on its gh-pages branch, served at
https://docs.sglang.io/whl/. release.matrix.load runs these while it loads the
destinations.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from itertools import pairwise
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from release.credentials import (
    has_credentials,
    is_secret_name,
    looks_like_token,
    url_shape_problem,
)
from release.errors import shown
from release.github_names import repository_problem
from release.matrix.spec import DestinationSpec
from release.proc import is_environment_name
from release.yamlspec import DocumentLoader, join_path

if TYPE_CHECKING:  # the value types, whose module loads these keys through this one
    from release.matrix.destination import Destination, IndexDestination

DEFAULT_INDEX_BRANCH = "gh-pages"  # the branch GitHub Pages serves a repository from
DEFAULT_TOKEN_VARIABLE = "GITHUB_TOKEN"  # noqa: S105 (a variable's name, not a secret)
# what git takes as a remote here: a URL of a transport, scp-like user@host:path, or a path;
# no host or user starting with `-`, which ssh would read as an option (-oProxyCommand=...)
_GIT_URL = re.compile(r"(?:(?:https?|ssh|git|file)://(?!-)\S+|[\w.][\w.-]*@[\w.][\w.-]*:\S+|/\S*)")
# git check-ref-format's rules, for one branch or tag name
_BAD_REF = re.compile(r"(^[-/.])|(\.\.)|(//)|(@\{)|([/.]$)|(\.lock$)|([\s~^:?*\[\\\x00-\x1f\x7f])")


def is_ref_name(name: str) -> bool:
    """Whether git takes `name` as a branch's or a tag's name (git check-ref-format, and
    `git branch`, which refuses HEAD)."""
    # `refs/heads/x` would name refs/heads/refs/heads/x: a name is the branch's own
    return (
        bool(name)
        and name not in ("@", "HEAD")
        and not name.startswith("refs/")
        and _BAD_REF.search(name) is None
    )


# the words after PYPI (or TESTPYPI) in the name of a variable holding a PyPI credential:
# PYPI_API_TOKEN, TEST_PYPI_TOKEN; not GH_TOKEN_FOR_PYPI_MIRROR, a GitHub token
_PYPI_CREDENTIAL_WORDS = frozenset({"TOKEN", "API", "KEY", "PASSWORD", "PASS", "SECRET", "PAT"})


def _names_pypi_credential(name: str) -> bool:
    """Whether `name` is a PyPI credential's variable: twine's, or PYPI followed by a word
    a credential is named by."""
    words = name.upper().split("_")
    return words[0] == "TWINE" or any(
        word in ("PYPI", "TESTPYPI") and following in _PYPI_CREDENTIAL_WORDS
        for word, following in pairwise(words)
    )


def token_secret_problem(name: str) -> str | None:
    """Why `name` cannot name the repository secret (and environment variable) holding a
    destination's token; None when it can. A token pasted in its place is not shown."""
    if looks_like_token(name):
        return (
            "looks like a token itself, not the name of the secret holding it: name the "
            "secret (WHL_TOKEN), put the token there, and revoke this one (matrix.yaml is "
            "committed)"
        )
    if not is_environment_name(name):
        return (
            f"{shown(name)} is not an environment variable's name (letters, digits and _, "
            "not starting with a digit)"
        )
    if _names_pypi_credential(name):  # a value that is a PyPI token is refused in Reach too
        return (
            f"{name} names a PyPI credential, which is sent to PyPI alone: name the "
            "variable holding the GitHub token (WHL_TOKEN)"
        )
    if name.upper().startswith("GITHUB_") and name != DEFAULT_TOKEN_VARIABLE:
        return f"{name}: GitHub refuses secret names that start with GITHUB_"
    if not is_secret_name(name):
        return (
            f"{name} does not say it holds a secret, so its value would not be hidden in "
            "output: name it with TOKEN, PAT, SECRET, PASSWORD, CREDENTIAL or API_KEY in it "
            "(WHL_TOKEN)"
        )
    return None


def check_token_secret(name: str, spec: DestinationSpec, loader: DocumentLoader) -> None:
    if spec.token_secret is not None and (problem := token_secret_problem(spec.token_secret)):
        loader.problem(join_path(join_path("destinations", name), "token-secret"), problem)


def _directory(value: str | None, path: str, loader: DocumentLoader) -> str:
    """The index's directory in the repository: "" for its root, else a relative path."""
    text = (value or ".").strip()
    if problem := index_directory_problem(text):
        loader.problem(path, problem)
    return "/".join(p for p in PurePosixPath(text).parts if p != ".")


def _remote(name: str, spec: DestinationSpec, loader: DocumentLoader) -> tuple[str, str | None]:
    """The URL git talks to, and the OWNER/NAME on GitHub where the index is there."""
    path = join_path("destinations", name)
    if (spec.repository is None) == (spec.url is None):
        loader.problem(
            path,
            "a git-index destination names its repository: repository (OWNER/NAME on "
            "github.com) or url (any git URL), one of them",
        )
        return "", None
    if spec.repository is not None:
        if problem := repository_problem(spec.repository):
            loader.problem(
                join_path(path, "repository"),
                f"{shown(spec.repository)} is not a GitHub repository ({problem})",
            )
        return f"https://github.com/{spec.repository}.git", spec.repository
    url = spec.url or ""
    if problem := git_url_problem(url):
        loader.problem(join_path(path, "url"), problem)
    return url, None


_SSH_USER = re.compile(r"^ssh://[A-Za-z0-9_][A-Za-z0-9._-]*@(?=[A-Za-z0-9\[])")


def git_url_problem(url: str) -> str | None:
    """Why git must not be given `url` as a git-index destination's remote; None when it may
    (matrix.yaml's `url`, and the manifest's record of it)."""
    # ssh's user name (`ssh://git@host/...`, as `git@host:path`) is no credential
    if has_credentials(_SSH_USER.sub("ssh://", url, count=1)):
        return (
            f"{shown(url)} holds credentials, which logs would show: give the token in the "
            "variable token-secret names"
        )
    if not _GIT_URL.fullmatch(url):
        return (
            f"{shown(url)} is not a git URL (https://HOST/PATH.git, ssh://..., "
            "user@host:path, file:///path or /path)"
        )
    return None


def recorded_index_problem(record: Mapping[str, str | None]) -> tuple[str, str] | None:
    """The key and the problem of a git index as the manifest records it (`index_url`,
    `url`, `repository`, `branch`, `directory`, `token_secret`), held to matrix.yaml's rules
    (git would read a url of `--upload-pack=CMD` as its option); None where each is sound."""
    index_url, url, repository = record["index_url"] or "", record["url"], record["repository"]
    branch, directory, token_secret = record["branch"], record["directory"], record["token_secret"]
    if problem := url_shape_problem(index_url):
        return "index_url", f"{index_url[:40]!r} {problem}"
    if token_secret is not None and (problem := token_secret_problem(token_secret)):
        return "token_secret", problem
    if branch is not None and not is_ref_name(branch):
        return "branch", f"{branch[:40]!r} is not a git branch's name"
    parts = (directory or ".").split("/")
    if directory and (
        any(p in ("", ".", "..") for p in parts) or index_directory_problem(directory)
    ):
        return "directory", f"{directory[:40]!r} is not a relative path"
    if url is not None and (problem := git_url_problem(url)):
        return "url", problem
    if repository is not None and (problem := repository_problem(repository)):
        return "repository", f"{repository[:40]!r} {problem}"
    return None


def index_directory_problem(text: str) -> str | None:
    """Why `text` is not an index's directory inside its repository; None when it is."""
    parts = [p for p in PurePosixPath(text).parts if p != "."]
    # .git, and git's own files beside it (.gitmodules, .gitattributes): never an index's
    if (
        text.startswith("/")
        or "\\" in text
        or any(p == ".." or p.lower().startswith(".git") for p in parts)
    ):
        return (
            f"{shown(text)} is not a directory inside the repository (a relative path "
            'without .. or a .git name, e.g. "." or "whl")'
        )
    if any(not c.isprintable() for c in text):
        return f"{shown(text)} holds a control character, which no directory name may"
    return None


def index_place(
    name: str, spec: DestinationSpec, loader: DocumentLoader
) -> tuple[str, str | None, str, str]:
    """Where a git-index destination is, as matrix.yaml writes it: the URL git talks to,
    the OWNER/NAME on GitHub where it is there, its branch, and its directory ("" for the
    root); each wrong key reported."""
    path = join_path("destinations", name)
    url, repository = _remote(name, spec, loader)
    branch = spec.branch if spec.branch is not None else DEFAULT_INDEX_BRANCH
    if not is_ref_name(branch):
        loader.problem(join_path(path, "branch"), f"{shown(branch)} is not a branch name")
    if spec.index_url is None:
        loader.problem(
            join_path(path, "index-url"),
            "required key 'index-url' is missing for a git-index destination (where its "
            "directory is served: https://OWNER.github.io/NAME/)",
        )
    check_token_secret(name, spec, loader)
    return url, repository, branch, _directory(spec.directory, join_path(path, "directory"), loader)


def link_indexes(
    destinations: Mapping[str, Destination],
    indexes: Mapping[str, IndexDestination],
    specs: Mapping[str, DestinationSpec],
    loader: DocumentLoader,
) -> tuple[dict[str, Destination], dict[str, IndexDestination]]:
    """Each destination with its `index` (a github destination's: whose URL becomes its
    index URL) and each git index with the destinations it lists; an `index` that is not a
    git-index destination, and a git index that lists nothing, are reported."""
    linked = dict(destinations)
    lists: dict[str, list[str]] = {name: [] for name in indexes}
    for name, destination in destinations.items():
        index = specs[name].index
        if index is None or "index" not in destination.KEYS:
            continue
        path = join_path(join_path("destinations", name), "index")
        if index not in indexes:
            known = ", ".join(indexes) or "none"
            loader.problem(
                path,
                f"{shown(index)} is not a git-index destination (git-index destinations: {known})",
            )
            continue
        if specs[name].index_url is not None:
            loader.problem(
                join_path(join_path("destinations", name), "index-url"),
                f"its wheels are listed by {index!r}, whose index-url pip "
                "installs them from (remove it here)",
            )
        lists[index].append(name)
        linked[name] = replace(destination, index_url=indexes[index].index_url)
    for name in indexes:
        if not lists[name]:
            loader.problem(
                join_path("destinations", name),
                "no github destination names it as its index, so it would list nothing "
                f"(write index: {name} in the github destination whose wheels it lists)",
            )
    return linked, {n: replace(d, lists=tuple(lists[n])) for n, d in indexes.items()}
