"""The pure part of the GitHub publisher: parsing, URLs, names, the retry classifier,
refusals and the token's secrecy. No sockets: GitHub's JSON comes from the stand-in's
pure renderers, responses are built in memory."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest
from githubkit import Response
from githubkit.exception import RequestError, RequestFailed
from hypothesis import given
from hypothesis import strategies as st

from release.credentials import Secret
from release.destinations.decide import Action, FileDecision, PublishPlan
from release.destinations.github_publisher import GithubPublisher
from release.errors import ConflictError, PublishError
from release.records.dist import wheel_problem
from release.records.manifest import DestinationRef, WheelEntry
from release.remote.github import SECONDARY_LIMIT_WAIT, GithubClient, classify
from release.remote.github_model import (
    RequestStats,
    asset_name_problem,
    choose_release,
    download_url,
    next_link_problem,
    parse_asset,
    parse_release,
    sha256_of_digest,
    upload_endpoint,
    web_base,
    web_base_of_release,
    web_base_of_repository,
)
from tests.github_standin.records import (
    Asset,
    Links,
    Release,
    Repo,
    User,
    asset_json,
    github_asset_name,
    release_json,
)

WHEEL = "k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_x86_64.whl"
NOW = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)
LINKS = Links(
    api="https://api.github.com", web="https://github.com", uploads="https://uploads.github.com"
)
USER = User(login="release-bot", id=1001)
REPO = Repo(
    id=7,
    owner=User(login="k3-org", id=1),
    name="k3-kernels",
    private=False,
    default_branch="main",
    created_at=NOW,
)
TOKEN = "ghp_" + "a1" * 18


def a_release(*, release_id: int = 11, draft: bool = True, tag: str = "v0.1.0") -> Release:
    return Release(
        id=release_id,
        repo_id=REPO.id,
        tag_name=tag,
        target_commitish="main",
        name=tag,
        body=None,
        draft=draft,
        prerelease=False,
        author=USER,
        created_at=NOW,
        published_at=None if draft else NOW,
        updated_at=NOW,
        untagged="untagged-0123456789abcdef0123",
    )


def an_asset(data: bytes, *, state: str = "uploaded", name: str = WHEEL) -> Asset:
    return Asset(
        id=21,
        release_id=11,
        name=name,
        label=None,
        state=state,
        content_type="application/octet-stream",
        data=data,
        uploader=USER,
        download_count=0,
        created_at=NOW,
        updated_at=NOW,
    )


def failed(
    status: int,
    body: object = None,
    headers: dict[str, str] | None = None,
) -> RequestFailed:
    request = httpx.Request("GET", "https://api.github.com/repos/k3-org/k3-kernels/releases")
    raw = httpx.Response(
        status,
        json=body if body is not None else {"message": "x"},
        headers=headers,
        request=request,
    )
    return RequestFailed(Response(raw, Any))


def entry(
    tmp_path: Path,
    *,
    name: str = WHEEL,
    data: bytes = b"wheel bytes",
    max_file_size: int = 10**9,
    repository: str = "k3-org/k3-kernels",
    write: bool = True,
) -> WheelEntry:
    if write:
        (tmp_path / name).write_bytes(data)
    return WheelEntry(
        cell="12.9-x86_64",
        cuda="12.9",
        arch="x86_64",
        filename=name,
        version="0.1.0+cu129",
        local_label="cu129",
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        sms=("90",),
        ptx=None,
        toolchain={},
        destination=DestinationRef(
            name="github-cu129",
            kind="github",
            index_url=None,
            max_file_size=max_file_size,
            repository=repository,
            tag="v0.1.0",
            api_url="https://api.github.com",
        ),
    )


def publisher(api_url: str = "https://api.github.com") -> GithubPublisher:
    client = GithubClient(api_url=api_url, token=Secret(TOKEN))
    return GithubPublisher(repository="k3-org/k3-kernels", tag="v0.1.0", client=client)


# -- parsing ------------------------------------------------------------------------------


def test_a_release_parses_from_githubs_json() -> None:
    data = release_json(a_release(), REPO, [an_asset(b"x", state="starter")], LINKS)
    release = parse_release(data)
    assert release.id == 11
    assert release.tag == "v0.1.0"
    assert release.draft
    assert not release.immutable
    assert release.upload_url == (
        "https://uploads.github.com/repos/k3-org/k3-kernels/releases/11/assets{?name,label}"
    )
    assert release.html_url.endswith("/releases/tag/untagged-0123456789abcdef0123")


def test_an_uploaded_asset_carries_its_sha256_from_the_digest() -> None:
    asset = parse_asset(asset_json(an_asset(b"abc"), REPO, a_release(draft=False), LINKS))
    assert asset.state == "uploaded"
    assert asset.size == 3
    assert asset.sha256 == hashlib.sha256(b"abc").hexdigest()
    assert asset.browser_download_url == (
        f"https://github.com/k3-org/k3-kernels/releases/download/v0.1.0/{WHEEL}"
    )


def test_a_leftover_asset_parses_although_githubkits_model_refuses_its_state() -> None:
    asset = parse_asset(asset_json(an_asset(b"", state="starter"), REPO, a_release(), LINKS))
    assert (asset.state, asset.size, asset.sha256) == ("starter", 0, None)


@pytest.mark.parametrize("bad", [[], {"id": "11"}, {"id": True, "name": "a"}])
def test_malformed_answers_are_publish_errors(bad: object) -> None:
    with pytest.raises(PublishError):
        parse_asset(bad)
    with pytest.raises(PublishError):
        parse_release(bad)


@pytest.mark.parametrize(
    ("digest", "sha256"),
    [
        ("sha256:" + "ab" * 32, "ab" * 32),
        ("sha256:" + "AB" * 32, "ab" * 32),
        ("sha512:" + "ab" * 64, None),
        ("sha256:xyz", None),
        (None, None),
        (12, None),
    ],
)
def test_only_a_sha256_digest_counts(digest: object, sha256: str | None) -> None:
    assert sha256_of_digest(digest) == sha256


# -- URLs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "endpoint"),
    [
        (
            "https://uploads.github.com/repos/o/r/releases/1/assets{?name,label}",
            "https://uploads.github.com/repos/o/r/releases/1/assets",
        ),
        (
            "https://ghe.example.com/api/uploads/repos/o/r/releases/1/assets{?name,label}",
            "https://ghe.example.com/api/uploads/repos/o/r/releases/1/assets",
        ),
        (
            "https://uploads.github.com/repos/o/r/releases/1/assets",
            "https://uploads.github.com/repos/o/r/releases/1/assets",
        ),
    ],
)
def test_the_upload_endpoint_drops_the_template(template: str, endpoint: str) -> None:
    assert upload_endpoint(template) == endpoint


@pytest.mark.parametrize(
    ("api", "web"),
    [
        ("https://api.github.com", "https://github.com"),
        ("https://api.github.com/", "https://github.com"),
        ("https://ghe.example.com/api/v3", "https://ghe.example.com"),
        ("https://ghe.example.com/api/v3/", "https://ghe.example.com"),
        ("http://127.0.0.1:4567", "http://127.0.0.1:4567"),
    ],
)
def test_the_web_origin_comes_from_the_api_base(api: str, web: str) -> None:
    assert web_base(api) == web


def test_the_web_origin_of_a_release_page() -> None:
    html = "https://ghe.example.com/k3-org/k3-kernels/releases/tag/untagged-0123"
    assert web_base_of_release(html, "k3-org/k3-kernels") == "https://ghe.example.com"
    assert web_base_of_release(html, "k3-org/other") is None


def test_the_web_origin_of_a_repository_page() -> None:
    page = "https://ghe.example.com/k3-org/k3-kernels"
    assert web_base_of_repository(page, "k3-org/k3-kernels") == "https://ghe.example.com"
    assert web_base_of_repository(page, "k3-org/other") is None


def test_a_tag_with_a_slash_and_a_plus_is_quoted_as_github_does() -> None:
    url = download_url(
        "https://ghe.example.com", "k3-org/k3-kernels", "release/v0.1.0+cu129", WHEEL
    )
    assert url == (
        "https://ghe.example.com/k3-org/k3-kernels/releases/download/"
        f"release/v0.1.0%2Bcu129/{WHEEL}"
    )


NEXT = 'rel="next"'


PAGE_2 = "/repositories/7/releases?page=2"


@pytest.mark.parametrize(
    ("api", "link"),
    [
        ("https://api.github.com", f"<https://api.github.com{PAGE_2}>; {NEXT}"),
        ("https://API.github.com/", f"<https://api.github.com{PAGE_2}>; {NEXT}"),
        ("https://ghe.example.com/api/v3", f"<https://ghe.example.com/api/v3{PAGE_2}>; {NEXT}"),
        ("https://api.github.com", f"<{PAGE_2}>; {NEXT}"),  # relative: under the API base
        ("https://api.github.com", '<https://evil.example/x>; rel="prev"'),  # no next page
        ("https://api.github.com", None),
    ],
)
def test_a_next_page_under_the_api_is_followed(api: str, link: str | None) -> None:
    assert next_link_problem(link, api) is None


@pytest.mark.parametrize(
    "target",
    [
        "https://evil.example/repositories/7/releases?page=2",  # another host
        "http://api.github.com/repositories/7/releases?page=2",  # http: another origin
        "https://api.github.com:8443/repositories/7/releases",  # another port
        "https://api.github.com.evil.example/repositories/7/releases",
        "https://ghe.example.com/other/api/v3/repositories/7/releases",  # off the API's path
        "https://ghe.example.com/api/v3x/repositories/7/releases",
        "ftp://ghe.example.com/api/v3/repositories/7/releases",
    ],
)
def test_a_next_page_off_the_api_is_not_followed_with_the_token(target: str) -> None:
    api = "https://ghe.example.com/api/v3" if "ghe" in target else "https://api.github.com"
    problem = next_link_problem(f'<{api}/repositories/7/releases?page=1>; rel="prev", '
                                f'<{target}>; {NEXT}', api)  # fmt: skip
    assert problem == f'the list\'s `Link: rel="next"` leads off {api}, to {target}'


def test_a_next_page_with_credentials_in_it_is_named_without_them() -> None:
    problem = next_link_problem(
        '<https://u:pw@evil.example/x>; rel="next"', "https://api.github.com"
    )
    assert problem is not None
    assert "pw" not in problem


def test_download_urls_keep_the_plus_of_a_local_version() -> None:
    url = download_url("https://github.com", "k3-org/k3-kernels", "v0.1.0", WHEEL)
    assert url == f"https://github.com/k3-org/k3-kernels/releases/download/v0.1.0/{WHEEL}"


def test_final_url_before_any_request_derives_from_the_api_base(tmp_path: Path) -> None:
    wheel = entry(tmp_path)
    assert publisher().final_url(wheel.filename) == (
        f"https://github.com/k3-org/k3-kernels/releases/download/v0.1.0/{WHEEL}"
    )
    assert (
        publisher("https://ghe.example.com/api/v3")
        .final_url(wheel.filename)
        .startswith("https://ghe.example.com/k3-org/k3-kernels/releases/download/v0.1.0/")
    )


# -- names GitHub would rename ---------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        WHEEL,
        "k3_kernels-0.1.0-py3-none-manylinux_2_28_aarch64.whl",
        "a-1.0+cu13.0.whl",
    ],
)
def test_wheel_names_are_kept(name: str) -> None:
    assert asset_name_problem(name) is None
    assert github_asset_name(name) == name


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("my file.whl", "' '"),
        ("k3~1.whl", "'~'"),
        ("a(1).whl", "'(' ')'"),
        ("a@b.whl", "'@'"),
        ("café.whl", "'é'"),
        (".whl", "leading and trailing"),
        ("a.whl.", "leading and trailing"),
        ("a..whl", "runs of periods"),
        ("", "empty"),
    ],
)
def test_names_github_would_rename_are_refused(name: str, says: str) -> None:
    problem = asset_name_problem(name)
    assert problem is not None
    assert says in problem


@given(st.text(alphabet=st.sampled_from("aZ09._+-._+- ~(@é"), max_size=12))
def test_an_accepted_name_is_stored_unchanged_by_the_stand_in(name: str) -> None:
    if asset_name_problem(name) is None:
        assert github_asset_name(name) == name


# -- choosing the release of a tag ----------------------------------------------------------


def test_the_published_release_wins_over_drafts_and_else_the_oldest_draft() -> None:
    def info(release_id: int, draft: bool, tag: str = "v0.1.0") -> Any:
        return parse_release(
            release_json(a_release(release_id=release_id, draft=draft, tag=tag), REPO, [], LINKS)
        )

    newest_first = [info(30, True), info(20, False), info(10, True), info(5, False, "v0.0.9")]
    assert choose_release(newest_first, "v0.1.0") == newest_first[1]
    drafts = [info(30, True), info(10, True)]
    assert choose_release(drafts, "v0.1.0") == drafts[1]
    assert choose_release(newest_first, "v9") is None


# -- the retry classifier -----------------------------------------------------------------


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_server_errors_are_transient(status: int) -> None:
    verdict = classify(failed(status), now=0.0)
    assert verdict is not None
    assert verdict.after is None
    assert str(status) in verdict.reason


def test_retry_after_is_the_wait() -> None:
    verdict = classify(failed(429, headers={"retry-after": "7"}), now=0.0)
    assert verdict is not None
    assert verdict.after == 7.0


def test_a_primary_limit_waits_until_its_reset() -> None:
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1300"}
    verdict = classify(failed(403, {"message": "API rate limit exceeded"}, headers), now=1000.0)
    assert verdict is not None
    assert verdict.after == 301.0
    assert "resets in 301 s" in verdict.reason


@pytest.mark.parametrize(
    ("status", "headers"),
    [
        (403, {"x-ratelimit-remaining": "4999"}),
        (429, {}),
    ],
)
def test_a_secondary_limit_without_retry_after_waits_at_least_a_minute(
    status: int,
    headers: dict[str, str],
) -> None:
    body = {"message": "You have exceeded a secondary rate limit. Please wait a few minutes."}
    verdict = classify(failed(status, body, headers), now=0.0)
    assert verdict is not None
    assert verdict.after is None
    assert verdict.at_least == SECONDARY_LIMIT_WAIT == 60.0


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (401, "Bad credentials"),
        (403, "Resource not accessible by personal access token"),
        (404, "Not Found"),
        (422, "Validation Failed"),
    ],
)
def test_refusals_are_not_retried(status: int, message: str) -> None:
    assert classify(failed(status, {"message": message}), now=0.0) is None


def test_broken_connections_are_transient_and_bad_urls_are_not() -> None:
    request = httpx.Request("POST", "https://uploads.github.com/x")
    reset = classify(
        RequestError(httpx.ReadError("Connection reset by peer", request=request)), now=0.0
    )
    assert reset is not None
    assert "ReadError" in reset.reason
    assert classify(RequestError(httpx.UnsupportedProtocol("ftp")), now=0.0) is None
    assert classify(ValueError("a bug"), now=0.0) is None


# -- refusals, secrecy, stats -----------------------------------------------------------------


def test_a_wheel_that_fits_is_not_refused(tmp_path: Path) -> None:
    assert publisher().refusal(entry(tmp_path), tmp_path / WHEEL) is None


def test_refusals(tmp_path: Path) -> None:
    # A wheel that is missing or not the built one is refused before the publisher is
    # asked: plan_for checks it against the manifest (dist.wheel_problem) for every
    # destination alike.
    missing = entry(tmp_path, write=False)
    assert "is missing (the manifest lists it)" in (wheel_problem(missing, tmp_path / WHEEL) or "")

    changed = entry(tmp_path, data=b"12345")
    (tmp_path / WHEEL).write_bytes(b"123")
    assert "3 bytes, the manifest says 5" in (wheel_problem(changed, tmp_path / WHEEL) or "")

    big = entry(tmp_path, data=b"x" * 100, max_file_size=99)
    assert "over the 99-byte limit" in (publisher().refusal(big, tmp_path / WHEEL) or "")
    weighed = replace(big, device_bytes=(("sm_90", 3 << 20), ("sm_100", 4 << 20)))
    refused = publisher().refusal(weighed, tmp_path / WHEEL) or ""
    assert refused.endswith("(heaviest device code: sm_100 4.0 MiB, sm_90 3.0 MiB)")

    spaced = entry(tmp_path, name="k3 kernels.whl")
    assert "rename" in (publisher().refusal(spaced, tmp_path / "k3 kernels.whl") or "")

    elsewhere = entry(tmp_path, repository="k3-org/other")
    assert "not the GitHub release" in (publisher().refusal(elsewhere, tmp_path / WHEEL) or "")


def test_the_token_is_not_in_repr_or_str() -> None:
    shown = publisher()
    texts = [repr(shown), str(shown), repr(vars(shown)), str(vars(shown))]
    assert all(TOKEN not in text for text in texts)
    assert "k3-org/k3-kernels" in repr(shown)


def test_a_repository_must_be_owner_slash_name() -> None:
    for bad in ("k3-kernels", "k3-org/", "/k3", "a/b/c"):
        with pytest.raises(PublishError, match="owner/name"):
            GithubPublisher(repository=bad, tag="v1", client=publisher().client)


def test_writes_are_requests_other_than_get_and_head() -> None:
    stats = RequestStats(
        by_method={"GET": 9, "HEAD": 1, "POST": 2, "PATCH": 1, "DELETE": 1}, bytes_uploaded=10
    )
    assert stats.writes == 4
    assert publisher().stats == RequestStats(by_method={}, bytes_uploaded=0)


def test_a_blocked_plan_is_refused_before_any_request(tmp_path: Path) -> None:
    wheel = entry(tmp_path)
    url = publisher().final_url(wheel.filename)
    conflict = PublishPlan(
        decisions=(
            FileDecision(entry=wheel, action=Action.CONFLICT, reason="other bytes", url=url),
        )
    )
    refused = PublishPlan(
        decisions=(FileDecision(entry=wheel, action=Action.REFUSED, reason="big", url=url),)
    )
    with pytest.raises(ConflictError, match=WHEEL.replace("+", r"\+")):
        publisher().apply(conflict, tmp_path)
    with pytest.raises(PublishError) as failure:
        publisher().apply(refused, tmp_path)
    assert not isinstance(failure.value, ConflictError)
