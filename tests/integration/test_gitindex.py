"""The git index's edge (release.remote.gitindex.push_pages) against real git: a bare
repository on disk holding another project's pages, which survive byte for byte; one commit
per publish; a push refused by a hook, or raced by another project's commit, fetched again
and re-applied; a refusal that lasts changes nothing; and the token, sent over HTTP to a
git server that asks for it, on no command line and in no message."""

from __future__ import annotations

import base64
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest

from release import proc
from release.credentials import Secret
from release.destinations.index import IndexFile, render_index, root_page
from release.errors import PublishError
from release.remote.gitindex import GitIndexTarget, push_pages
from release.remote.gitpages import PackagePages
from tests.integration.gitremote import BRANCH, GIT, OTHERS, clean_env, git, seeded, tree_of

PROJECT = "sgl-deep-gemm"


def commit_files(remote: Path, files: Mapping[str, bytes], message: str, work: Path) -> str:
    """Another project's commit of `files` on the branch, as its own scripts push one."""
    if not work.exists():
        git("clone", "--quiet", "--branch", BRANCH, str(remote), str(work))
    git("pull", "--quiet", "--ff-only", cwd=work)
    for path, data in files.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_bytes(data)
    git("add", "--all", cwd=work)
    git("commit", "--quiet", "-m", message, cwd=work)
    git("push", "--quiet", "origin", BRANCH, cwd=work)
    return git("rev-parse", "HEAD", cwd=work)


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    """A bare repository whose gh-pages branch holds another project's pages."""
    return seeded(tmp_path / "whl.git", tmp_path / "seed")


def rendered(version: str = "0.1.4") -> dict[str, bytes]:
    files = [
        IndexFile(
            filename=f"sgl_deep_gemm-{version}+{label}-py3-none-manylinux2014_x86_64.whl",
            url=f"https://github.com/sgl-project/whl/releases/download/v{version}/"
            f"sgl_deep_gemm-{version}+{label}-py3-none-manylinux2014_x86_64.whl",
            sha256=label[-1] * 64,
        )
        for label in ("cu129", "cu130")
    ]
    return render_index(files)


def roots(label: str, names: Sequence[str]) -> Mapping[str, bytes]:
    html, json = root_page(f"Simple index ({label})", names)
    return {"index.html": html, "index.json": json}


class Recording(proc.Runner):
    """The real runner, recording each command and its environment, and running
    `before_push` (once) just before the first push: a commit of another project that lands
    between the fetch and the push."""

    def __init__(self, before_push: Callable[[], object] | None = None) -> None:
        self.calls: list[list[str]] = []
        self.environments: list[dict[str, str]] = []
        self.before_push = before_push

    def __call__(self, cmd: Sequence[str], **kwargs: Any) -> proc.Completed:
        self.calls.append(list(cmd))
        self.environments.append(dict(kwargs["env"]))
        if "push" in cmd and self.before_push is not None:
            hook, self.before_push = self.before_push, None
            hook()
        return proc.run(cmd, **kwargs)


def publish(
    remote: Path | str,
    runner: proc.Runner = proc.run,
    *,
    token: str | None = None,
    version: str = "0.1.4",
    environ: Mapping[str, str] | None = None,
) -> Any:
    target = GitIndexTarget(
        url=remote if isinstance(remote, str) else f"file://{remote}",
        branch=BRANCH,
        directory="",
        token=Secret(token) if token else None,
    )
    return push_pages(
        target,
        PackagePages.from_rendered(rendered(version), PROJECT),
        root_pages=roots,
        version=version,
        environ=environ or clean_env(),
        runner=runner,
        sleep=lambda _: None,
    )


def test_one_commit_adds_the_pages_and_other_projects_pages_survive_byte_for_byte(
    remote: Path,
) -> None:
    before = git("rev-parse", BRANCH, cwd=remote)
    outcome = publish(remote)
    assert outcome.changed
    assert outcome.attempts == 1
    assert git("rev-parse", BRANCH, cwd=remote) == outcome.commit
    assert git("rev-parse", f"{BRANCH}^", cwd=remote) == before, "one commit on the old tip"
    assert git("log", "-1", "--format=%s", BRANCH, cwd=remote) == (
        "sgl-deep-gemm 0.1.4: index pages (cu129, cu130)"
    )
    after = tree_of(remote)
    for path, data in OTHERS.items():
        if path != "cu130/index.html":
            assert after[path] == data, path
    page = after[f"cu130/{PROJECT}/index.html"].decode()
    assert "sgl_deep_gemm-0.1.4+cu130-py3-none-manylinux2014_x86_64.whl#sha256=" in page
    # the label's root lists both projects' folders; a new label gets a root of its own
    assert b'href="acme-kernel/"' in after["cu130/index.html"]
    assert b'href="sgl-deep-gemm/"' in after["cu130/index.html"]
    assert b'href="sgl-deep-gemm/"' in after["cu129/index.html"]
    assert set(outcome.paths) == set(after) - set(OTHERS) | {"cu130/index.html"}
    # the same pages again: nothing to commit
    again = publish(remote)
    assert (again.changed, again.commit) == (False, outcome.commit)


def test_a_push_a_hook_refuses_once_is_fetched_again_and_lands(remote: Path) -> None:
    hook = remote / "hooks" / "pre-receive"
    marker = remote / "refused-once"
    hook.write_text(
        f'#!/bin/sh\nif [ ! -e "{marker}" ]; then\n  touch "{marker}"\n'
        '  echo "index busy: try again" >&2\n  exit 1\nfi\n'
    )
    hook.chmod(0o755)
    outcome = publish(remote)
    assert marker.exists()
    assert (outcome.changed, outcome.attempts) == (True, 2)
    assert git("rev-parse", BRANCH, cwd=remote) == outcome.commit


def test_a_commit_of_another_project_between_fetch_and_push_is_kept(
    remote: Path, tmp_path: Path
) -> None:
    racer = {"cu130/zeta-ops/index.html": b"<a href='z.whl'>z.whl</a>\n"}
    raced: list[str] = []
    runner = Recording(
        lambda: raced.append(commit_files(remote, racer, "zeta-ops 2.0", tmp_path / "racer"))
    )
    outcome = publish(remote, runner)
    assert outcome.attempts == 2
    assert len([c for c in runner.calls if "push" in c]) == 2
    assert git("rev-parse", f"{BRANCH}^", cwd=remote) == raced[0], "re-applied on the racer's"
    after = tree_of(remote)
    assert after["cu130/zeta-ops/index.html"] == racer["cu130/zeta-ops/index.html"]
    assert f"cu130/{PROJECT}/index.html" in after
    # the root, rewritten after the race, lists the racer's folder too
    for name in (b"acme-kernel", b"zeta-ops", b"sgl-deep-gemm"):
        assert b'href="' + name + b'/"' in after["cu130/index.html"]


def test_a_refusal_that_lasts_changes_nothing_and_says_so_in_one_line(remote: Path) -> None:
    hook = remote / "hooks" / "pre-receive"
    hook.write_text('#!/bin/sh\necho "protected branch: pushes need a review" >&2\nexit 1\n')
    hook.chmod(0o755)
    before = tree_of(remote)
    tip = git("rev-parse", BRANCH, cwd=remote)
    token = "ghp_" + "n0tInAnyMessage" * 3
    runner = Recording()
    with pytest.raises(PublishError) as caught:
        publish(f"file://{remote}", runner, token=token)
    message = str(caught.value)
    assert "\n" not in message
    assert message == (
        f"git index file://{remote} ({BRANCH}): the push was refused 4 times and the branch "
        "is as it was: [remote rejected] (pre-receive hook declined): protected branch: "
        "pushes need a review"
    )
    assert token not in message
    assert len([c for c in runner.calls if "push" in c]) == 4
    assert git("rev-parse", BRANCH, cwd=remote) == tip
    assert tree_of(remote) == before
    assert git("for-each-ref", "--format=%(refname)", cwd=remote) == f"refs/heads/{BRANCH}"


def test_a_branch_that_does_not_exist_yet_is_made_by_the_first_commit(tmp_path: Path) -> None:
    bare = tmp_path / "new.git"
    git("init", "--quiet", "--bare", str(bare))
    outcome = publish(bare)
    assert outcome.changed
    assert git("rev-list", "--count", BRANCH, cwd=bare) == "1"
    assert sorted(tree_of(bare)) == [
        "cu129/index.html", "cu129/index.json",
        f"cu129/{PROJECT}/index.html", f"cu129/{PROJECT}/index.json",
        "cu130/index.html", "cu130/index.json",
        f"cu130/{PROJECT}/index.html", f"cu130/{PROJECT}/index.json",
    ]  # fmt: skip


def test_a_remote_git_cannot_reach_fails_in_one_line_that_says_why(tmp_path: Path) -> None:
    with pytest.raises(PublishError) as caught:
        publish(tmp_path / "missing.git")
    assert str(caught.value).startswith(
        f"git index file://{tmp_path}/missing.git ({BRANCH}): reading the branch failed"
    )
    assert "\n" not in str(caught.value)
    # the cause, not git's advice after it
    assert "does not appear to be a git repository" in str(caught.value)
    assert "correct access rights" not in str(caught.value)


# --- Over HTTP, with the token the server asks for. ---


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def git_http_app(root: Path, token: str, seen: list[str]) -> Callable[..., Iterable[bytes]]:
    """git's smart HTTP protocol (git http-backend, as CGI) for the repositories under
    `root`, for a request whose Authorization header carries `token` as GitHub takes it."""
    expected = "basic " + base64.b64encode(f"x-access-token:{token}".encode()).decode()

    def app(environ: dict[str, Any], start: Callable[..., Any]) -> Iterable[bytes]:
        seen.append(environ.get("HTTP_AUTHORIZATION", ""))
        if environ.get("HTTP_AUTHORIZATION", "").lower() != expected.lower():
            start("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="git"')])
            return [b"no\n"]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        cgi = {
            "PATH": "/usr/bin:/bin",
            "GIT_PROJECT_ROOT": str(root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REMOTE_USER": "x-access-token",
            "REQUEST_METHOD": environ["REQUEST_METHOD"],
            "PATH_INFO": environ["PATH_INFO"],
            "QUERY_STRING": environ.get("QUERY_STRING", ""),
            "CONTENT_TYPE": environ.get("CONTENT_TYPE", ""),
            "CONTENT_LENGTH": str(len(body)),
            "HTTP_CONTENT_ENCODING": environ.get("HTTP_CONTENT_ENCODING", ""),
            "GIT_PROTOCOL": environ.get("HTTP_GIT_PROTOCOL", ""),
        }
        done = subprocess.run(
            [GIT, "http-backend"], input=body, env=cgi, capture_output=True, check=True
        )
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        headers = [tuple(line.split(": ", 1)) for line in head.decode().split("\r\n") if line]
        status = next((v for k, v in headers if k.lower() == "status"), "200 OK")
        start(status, [(k, v) for k, v in headers if k.lower() != "status"])
        return [payload]

    return app


@pytest.fixture
def git_server(remote: Path) -> Iterator[tuple[str, str, list[str]]]:
    """The remote over HTTP on 127.0.0.1: its URL, the token it takes, the headers seen."""
    token = "ghp_" + "HttpT0ken" * 4
    seen: list[str] = []
    server = make_server(
        "127.0.0.1", 0, git_http_app(remote.parent, token, seen), handler_class=_Quiet
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/{remote.name}", token, seen
    finally:
        server.shutdown()
        server.server_close()


def test_the_token_goes_as_a_header_on_no_command_line(
    git_server: tuple[str, str, list[str]], remote: Path
) -> None:
    url, token, seen = git_server
    runner = Recording()
    environ = {**clean_env(), "GH_PAT_FOR_WHL_RELEASE": token}
    outcome = publish(url, runner, token=token, environ=environ)
    assert outcome.changed
    assert git("rev-parse", BRANCH, cwd=remote) == outcome.commit
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    assert seen
    assert all(header == f"basic {basic}" for header in seen), "on every request"
    for call, env in zip(runner.calls, runner.environments, strict=True):
        assert not any(token in word for word in call), call
        assert "GH_PAT_FOR_WHL_RELEASE" not in env
    with pytest.raises(PublishError) as caught:
        publish(url, token="ghp_" + "wrongT0ken" * 3, environ=environ, version="0.1.5")
    message = str(caught.value)
    assert message.startswith(f"git index {url} ({BRANCH}): reading the branch failed")
    assert "wrongT0ken" not in message
    assert git("rev-parse", BRANCH, cwd=remote) == outcome.commit


def test_a_remote_that_redirects_to_another_host_gets_no_token_there(
    git_server: tuple[str, str, list[str]], remote: Path
) -> None:
    url, token, seen = git_server
    elsewhere = url.replace("127.0.0.1", "localhost")  # another origin, the same server
    asked: list[str] = []

    def redirect(environ: dict[str, Any], start: Callable[..., Any]) -> Iterable[bytes]:
        asked.append(environ.get("HTTP_AUTHORIZATION", ""))
        query = environ.get("QUERY_STRING", "")
        start(
            "302 Found",
            [
                (
                    "Location",
                    elsewhere + environ["PATH_INFO"][len("/x") :] + (f"?{query}" if query else ""),
                )
            ],
        )
        return [b""]

    server = make_server("127.0.0.1", 0, redirect, handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    before = git("rev-parse", BRANCH, cwd=remote)
    try:
        with pytest.raises(PublishError) as caught:
            publish(f"http://127.0.0.1:{server.server_port}/x", token=token)
    finally:
        server.shutdown()
        server.server_close()
    assert asked, "the remote was asked"
    assert seen == [], "the host it redirects to was never asked, with or without the token"
    assert "returned error: 302" in str(caught.value)
    assert caught.value.hint is not None
    assert "redirects" in caught.value.hint
    assert git("rev-parse", BRANCH, cwd=remote) == before


def test_a_symlink_where_a_label_goes_is_refused_and_the_branch_is_as_it_was(
    remote: Path, tmp_path: Path
) -> None:
    """An alias a maintainer keeps (cu129 -> cu130) stood where this project's cu129/ goes:
    `git update-index --replace` replaced it, exit 0."""
    work = tmp_path / "maintainer"
    git("clone", "--quiet", "--branch", BRANCH, str(remote), str(work))
    (work / "cu129").symlink_to("cu130")
    git("add", "--all", cwd=work)
    git("commit", "--quiet", "-m", "alias", cwd=work)
    git("push", "--quiet", "origin", BRANCH, cwd=work)
    tip = git("rev-parse", BRANCH, cwd=remote)
    with pytest.raises(PublishError) as caught:
        publish(remote)
    assert "nothing was pushed: cu129 is a symlink on the branch" in str(caught.value)
    assert git("rev-parse", BRANCH, cwd=remote) == tip


def test_a_remote_that_prints_megabytes_is_quoted_in_a_short_excerpt(remote: Path) -> None:
    hook = remote / "hooks" / "pre-receive"
    hook.write_text('#!/bin/sh\nhead -c 3000000 /dev/zero | tr "\\0" "A" >&2\necho >&2\nexit 1\n')
    hook.chmod(0o755)
    with pytest.raises(PublishError) as caught:
        publish(f"file://{remote}", Recording())
    message = str(caught.value)
    assert "\n" not in message
    assert len(message) < 2000, len(message)
    assert "A" * 300 + "... (" in message


def _entries(remote: Path) -> dict[bytes, bytes]:
    """Every file of the branch as git stores it: path bytes -> blob id."""
    done = subprocess.run(
        [GIT, "ls-tree", "-r", "-z", BRANCH], cwd=remote, capture_output=True, check=True,
        env=clean_env(),
    )  # fmt: skip
    heads = (record.partition(b"\t") for record in done.stdout.split(b"\0") if record)
    return {path: head.split()[2] for head, _, path in heads}


def test_another_projects_file_named_in_no_utf8_survives_and_blocks_nothing(
    remote: Path, tmp_path: Path
) -> None:
    """One file of another project named in latin-1 blocked every publish to the shared
    index (before any upload); it is left byte for byte now."""
    raw = b"cu130/acme-kernel/notes-\xff.html"
    commit_files(
        remote, {raw.decode("utf-8", "surrogateescape"): b"acme\n"}, "acme", tmp_path / "w"
    )
    before = _entries(remote)
    outcome = publish(remote)
    assert outcome.changed
    after = _entries(remote)
    assert after[raw] == before[raw]
    assert b"cu130/sgl-deep-gemm/index.html" in after
    root = subprocess.run(
        [GIT, "cat-file", "blob", f"{BRANCH}:cu130/index.html"], cwd=remote, capture_output=True,
        check=True, env=clean_env(),
    ).stdout  # fmt: skip
    assert b'href="acme-kernel/"' in root
