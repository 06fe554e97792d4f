"""A GitHub repository's OWNER/NAME and a REST API base URL, by one rule each: the values
issue 49 found taken (F12 `a` and a trailing newline, F13 `a/..`, F15 `::::`) are refused
by the rule, by the client before any request is built from them, and by matrix.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest

from release.errors import ConfigError
from release.github_names import api_url_problem, repository_problem
from release.matrix import load_matrix
from release.remote.github import GithubClient

PROJECT = Path(__file__).resolve().parents[1] / "data" / "matrix" / "project"

REPOSITORIES = ("o/r", "k3-project/cuda-wheel-release", "a1/x.y_z-2", "O/" + "n" * 100)
NOT_REPOSITORIES = (
    "a", "a\n", "a/b\n", "a/b/", "/b", "a/", "a/..", "a/.", "a/b/c", "-a/b", "a-/b", "a--b/c",
    "a" * 40 + "/b", "a/" + "n" * 101, "a b/c", "a/b c", "ü/b",
)  # fmt: skip
API_URLS = (
    "https://api.github.com",
    "https://ghe.example.com/api/v3/",
    "http://127.0.0.1:8080",
    "http://[::1]:9/api/v3",
)
NOT_API_URLS = (
    "::::", "https://::::", "api.github.com", "ftp://h/", "https://", "https://h:99999",
    "https://h:x", "https://u:p@h", "https://tok@h", "https://h/?token=x", "https://h/#f",
    "https://h/a b", "https://h\n", "https://-h/",
)  # fmt: skip


@pytest.mark.parametrize("text", REPOSITORIES)
def test_a_repository_name_by_github_s_rules_is_taken(text: str) -> None:
    assert repository_problem(text) is None


@pytest.mark.parametrize("text", NOT_REPOSITORIES)
def test_anything_else_is_refused_with_the_rule_it_breaks(text: str) -> None:
    assert repository_problem(text) is not None


@pytest.mark.parametrize("text", API_URLS)
def test_an_api_base_url_is_taken(text: str) -> None:
    assert api_url_problem(text) is None


@pytest.mark.parametrize("text", NOT_API_URLS)
def test_what_is_no_api_base_url_is_refused(text: str) -> None:
    assert api_url_problem(text) is not None


@pytest.mark.parametrize("text", NOT_API_URLS)
def test_the_client_refuses_an_api_url_that_is_not_one(text: str) -> None:
    with pytest.raises(ConfigError) as refused:
        GithubClient(api_url=text, token=None)
    assert refused.value.message.startswith("GitHub API URL ")
    assert "tok@" not in refused.value.message
    assert "u:p@" not in refused.value.message


@pytest.mark.parametrize("text", ["a", "a/..", "a/b\n", "../repos/x"])
def test_the_client_builds_no_request_path_from_a_repository_that_is_not_one(text: str) -> None:
    """F13: `a/..` made the attestations request go to /repos/attestations/...; the unit
    fixture refuses sockets, so a request would fail otherwise than this."""
    client = GithubClient(api_url="https://api.github.com", token=None)
    with pytest.raises(ConfigError) as refused, client.session(f"{text} attestations"):
        client.attestations(text, "0" * 64)
    assert "is not a GitHub repository" in refused.value.message


def matrix_with_api_url(tmp_path: Path, api_url: str) -> Path:
    path = tmp_path / "matrix.yaml"
    path.write_text(
        f"project: {PROJECT}\n"
        "defaults: {arches: [x86_64], sms: [80], manylinux: '2_28'}\n"
        "cuda:\n"
        "  '13.0': {destination: gh}\n"
        "destinations:\n"
        f"  gh: {{kind: github, repository: o/r, api-url: {api_url!r}}}\n",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize("text", ["::::", "https://::::", "https://tok@ghe.example.com/api/v3"])
def test_matrix_yaml_refuses_an_api_url_that_is_not_one(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_matrix(matrix_with_api_url(tmp_path, text))
    (problem,) = refused.value.problems
    assert "destinations.gh.api-url: " in problem
    assert "is not a GitHub API base URL" in problem
    assert "tok@" not in problem


def test_a_name_with_git_s_suffix_is_not_a_repository() -> None:
    # `repository: o/whl.git` made https://github.com/o/whl.git.git
    assert repository_problem("sgl-project/whl.git") == (
        "the name without .git (GitHub names no repository so: write owner/name)"
    )
