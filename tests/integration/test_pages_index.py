"""The index `release publish` writes to --index-dir (and commits to --pages-branch), against
the stand-in GitHub and real git: a directory that is not release's to replace whole, and a
branch, repository or remote the commit cannot use, are refused before anything is uploaded,
a dry run included; a failure after the release went public says so and how to finish."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from release.destinations.reach import Reach
from release.errors import ConfigError, FileError, PublishError, ReleaseError
from release.publish.run import PublishSettings, publish
from tests.github_standin import DEFAULT_REPO, GitHubStandIn
from tests.integration.gitremote import GIT
from tests.integration.wheels import Release, github_destination, make_release

ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "release",
    "GIT_AUTHOR_EMAIL": "release@example.org",
    "GIT_COMMITTER_NAME": "release",
    "GIT_COMMITTER_EMAIL": "release@example.org",
}


def release_in(tmp_path: Path, gh: GitHubStandIn) -> Release:
    return make_release(tmp_path / "dist", pypi=None, github=github_destination(gh.api_url))


def git(*args: str) -> str:
    done = subprocess.run([GIT, *args], env=ENV, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def refused_before_upload(
    gh: GitHubStandIn, release: Release, error: type[ReleaseError], **settings: object
) -> ReleaseError:
    """The error of a dry run and of a publish with `settings`, checked to be the same and
    to leave GitHub without a release."""
    reach = Reach({**ENV, "GITHUB_TOKEN": gh.token}, command="release publish")
    said = []
    for dry_run in (True, False):
        with pytest.raises(error) as raised:
            publish(PublishSettings(dist=release.dist, dry_run=dry_run, **settings), reach)  # type: ignore[arg-type]
        said.append(raised.value)
    assert said[0].message == said[1].message
    assert gh.releases(DEFAULT_REPO) == ()
    return said[1]


def test_an_index_dir_release_did_not_write_is_refused_before_any_upload(
    github_standin: GitHubStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = release_in(tmp_path, github_standin)
    work = tmp_path / "work"
    (work / "userdocs").mkdir(parents=True)
    (work / "userdocs" / "precious.md").write_text("mine")
    (work / "linked").symlink_to(work / "userdocs")
    (work / "site" / "cu129").mkdir(parents=True)
    (work / "site" / "cu129" / "notes.txt").write_text("mine")
    (work / "handwritten" / "blog").mkdir(parents=True)
    (work / "handwritten" / "index.html").write_text("<h1>My project</h1>")
    (work / "handwritten" / "blog" / "index.html").write_text("<p>news</p>")
    monkeypatch.chdir(work)
    before = {root: files_under(root) for root in (release.dist, work)}
    cases = {
        release.dist: f"--index-dir {release.dist}: is the dist directory",
        tmp_path: f"--index-dir {tmp_path}: holds the dist directory",
        work: f"--index-dir {work}: is the working directory",
        Path("."): "--index-dir .: is the working directory",
        work / "linked": f"--index-dir {work / 'linked'}: {work / 'linked'} is a symbolic link",
        work / "site": f"--index-dir {work / 'site'}: {work / 'site/cu129/notes.txt'} is no file",
        work / "handwritten": f"--index-dir {work / 'handwritten'}: {work / 'handwritten'}/",
    }
    for index_dir, message in cases.items():
        error = refused_before_upload(github_standin, release, ConfigError, index_dir=index_dir)
        assert error.message.startswith(message), error.message
        assert "release replaces the index directory whole" in (error.hint or "")
    assert {root: files_under(root) for root in before} == before


def test_an_index_dir_holding_an_index_release_wrote_is_replaced(
    github_standin: GitHubStandIn, tmp_path: Path
) -> None:
    release = release_in(tmp_path, github_standin)
    site = tmp_path / "site"
    (site / "cu129" / "old-project").mkdir(parents=True)
    (site / "cu129" / "old-project" / "index.html").write_text(
        '<meta name="pypi:repository-version" content="1.0">'
    )
    (site / "nccl").mkdir()
    (site / "nccl" / "cu12.txt").write_text("old")
    reach = Reach({"GITHUB_TOKEN": github_standin.token}, command="release publish")
    publish(PublishSettings(dist=release.dist, index_dir=site), reach)
    assert files_under(site) == [
        "cu129", "cu129/index.html", "cu129/index.json", "cu129/k3-kernels",
        "cu129/k3-kernels/index.html", "cu129/k3-kernels/index.json",
    ]  # fmt: skip


@pytest.fixture
def pages_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    git("init", "-q", "-b", "main", str(repo))
    git("-C", str(repo), "commit", "-q", "--allow-empty", "-m", "code")
    return repo


@pytest.mark.parametrize("branch", ["a..b", "refs/heads/../../x", "HEAD", "-x", "a b"])
def test_a_pages_branch_git_cannot_name_is_refused_before_any_upload(
    github_standin: GitHubStandIn, tmp_path: Path, pages_repo: Path, branch: str
) -> None:
    release = release_in(tmp_path, github_standin)
    error = refused_before_upload(
        github_standin, release, ConfigError,
        index_dir=tmp_path / "site", pages_branch=branch, pages_repo=pages_repo,
    )  # fmt: skip
    assert error.message.startswith("--pages-branch "), error.message
    assert git("-C", str(pages_repo), "for-each-ref", "--format=%(refname)") == "refs/heads/main"


def test_a_pages_repo_that_is_no_git_repository_is_refused_before_any_upload(
    github_standin: GitHubStandIn, tmp_path: Path
) -> None:
    release = release_in(tmp_path, github_standin)
    plain = tmp_path / "plain"
    plain.mkdir()
    error = refused_before_upload(
        github_standin, release, ConfigError,
        index_dir=tmp_path / "site", pages_branch="gh-pages", pages_repo=plain,
    )  # fmt: skip
    assert error.message == f"--pages-repo {plain}: not a git repository"


def test_a_pages_remote_git_cannot_reach_is_refused_before_any_upload(
    github_standin: GitHubStandIn, tmp_path: Path, pages_repo: Path
) -> None:
    release = release_in(tmp_path, github_standin)
    error = refused_before_upload(
        github_standin, release, PublishError,
        index_dir=tmp_path / "site", pages_branch="gh-pages", pages_repo=pages_repo,
        pages_remote=str(tmp_path / "no-such-remote.git"),
    )  # fmt: skip
    assert error.message.startswith("--pages-remote "), error.message
    # git's cause, not the advice it ends every such failure with
    assert "does not appear to be a git repository" in error.message, error.message
    assert "and the repository exists" not in error.message
    assert "nothing was uploaded" in (error.hint or "")


def test_an_index_that_cannot_be_written_after_the_release_is_public_says_so(
    github_standin: GitHubStandIn, tmp_path: Path
) -> None:
    """A disk that refuses the index (read-only, full: here, a file where a parent folder
    goes) after the release went public: it named a temporary directory, and not what was
    public nor that a re-run completes it."""
    release = release_in(tmp_path, github_standin)
    (tmp_path / "taken").write_text("a file")
    site = tmp_path / "taken" / "site"
    reach = Reach({**ENV, "GITHUB_TOKEN": github_standin.token}, command="release publish")
    with pytest.raises(FileError) as raised:
        publish(PublishSettings(dist=release.dist, index_dir=site), reach)
    assert raised.value.message.startswith(f"cannot write the index to {site}: ")
    (published,) = github_standin.releases(DEFAULT_REPO)
    assert not published.draft
    hint = raised.value.hint or ""
    assert "--index-dir" in hint
    assert "k3-kernels 0.1.0 is already public on github" in hint, hint
    publish(PublishSettings(dist=release.dist, index_dir=tmp_path / "site"), reach)
    assert (tmp_path / "site" / "cu129" / "k3-kernels" / "index.html").is_file()


def test_a_push_refused_after_the_release_is_public_says_so_and_a_rerun_completes(
    github_standin: GitHubStandIn, tmp_path: Path, pages_repo: Path
) -> None:
    release = release_in(tmp_path, github_standin)
    remote = tmp_path / "pages.git"
    git("init", "-q", "--bare", str(remote))
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'protected branch' >&2\nexit 1\n")
    hook.chmod(0o755)
    settings = PublishSettings(
        dist=release.dist, index_dir=tmp_path / "site", pages_branch="gh-pages",
        pages_repo=pages_repo, pages_remote=str(remote),
    )  # fmt: skip
    reach = Reach({**ENV, "GITHUB_TOKEN": github_standin.token}, command="release publish")
    with pytest.raises(PublishError) as raised:
        publish(settings, reach)
    (published,) = github_standin.releases(DEFAULT_REPO)
    assert not published.draft
    hint = raised.value.hint or ""
    assert "k3-kernels 0.1.0 is already public on github" in hint, hint
    assert "run release publish again" in hint
    hook.unlink()
    publish(settings, reach)
    assert git("-C", str(remote), "ls-tree", "-r", "--name-only", "gh-pages").splitlines()


def test_the_pages_commit_runs_no_filter_of_the_repository(
    github_standin: GitHubStandIn, tmp_path: Path, pages_repo: Path
) -> None:
    release = release_in(tmp_path, github_standin)
    ran = tmp_path / "filter-ran"
    git("-C", str(pages_repo), "config", "filter.evil.clean", f"touch {ran}; cat")
    (pages_repo / ".git" / "info" / "attributes").write_text("* filter=evil\n")
    reach = Reach({**ENV, "GITHUB_TOKEN": github_standin.token}, command="release publish")
    settings = PublishSettings(
        dist=release.dist, index_dir=tmp_path / "site", pages_branch="gh-pages",
        pages_repo=pages_repo,
    )  # fmt: skip
    publish(settings, reach)
    assert not ran.exists()
    listed = git("-C", str(pages_repo), "ls-tree", "-r", "--name-only", "gh-pages")
    assert "cu129/k3-kernels/index.html" in listed.splitlines()
