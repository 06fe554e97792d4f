"""The stand-in GitHub, driven over HTTP by githubkit and httpx as the publisher will."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from githubkit import GitHub, TokenAuthStrategy
from githubkit.exception import (
    PrimaryRateLimitExceeded,
    RateLimitExceeded,
    RequestError,
    RequestFailed,
    SecondaryRateLimitExceeded,
)
from githubkit.retry import RetryServerError
from githubkit_schemas.v2022_11_28.models import (
    FullRepository,
    FullRepositoryPropPermissions,
    Release,
    ReleaseAsset,
)
from pydantic import ValidationError

from release.remote.httpclient import tls_context
from tests.github_standin import (
    DEFAULT_REPO,
    Fault,
    GitHubStandIn,
    github_asset_name,
    primary_rate_limit,
    rate_limit_429_retry_after,
    secondary_403_message,
    secondary_403_retry_after,
    secondary_429_bare,
    server_errors,
)
from tests.local_http import LOCAL

OWNER, NAME = DEFAULT_REPO.split("/")
API_VERSION: Final = "2022-11-28"


def client(
    standin: GitHubStandIn, *, auto_retry: Any = False, base_url: str = ""
) -> GitHub[TokenAuthStrategy]:
    return GitHub(
        standin.token,
        base_url=base_url or standin.api_url,
        auto_retry=auto_retry,
        ssl_verify=tls_context(),  # loaded once a process
    )


def create_release(standin: GitHubStandIn, tag: str = "v1.0.0", *, draft: bool = True) -> Release:
    gh = client(standin)
    rest = gh.rest(API_VERSION)
    created = rest.repos.create_release(OWNER, NAME, tag_name=tag, name=tag, draft=draft)
    assert created.status_code == 201
    return created.parsed_data


def upload(
    standin: GitHubStandIn,
    release: Release,
    name: str,
    data: bytes,
    *,
    token: str | None = None,
    content_type: str = "application/octet-stream",
) -> httpx.Response:
    url = release.upload_url.split("{", 1)[0]
    headers = {"Authorization": f"Bearer {token or standin.token}", "Content-Type": content_type}
    return LOCAL.post(url, params={"name": name}, content=data, headers=headers)


def auth(standin: GitHubStandIn) -> dict[str, str]:
    return {"Authorization": f"token {standin.token}"}


# -- repository, credentials, headers ------------------------------------------------------


def test_repository_is_a_valid_full_repository(github_standin: GitHubStandIn) -> None:
    gh = client(github_standin)
    response = gh.rest(API_VERSION).repos.get(OWNER, NAME)
    repo = FullRepository.model_validate(response.json())
    assert repo.full_name == DEFAULT_REPO
    assert repo.url == f"{github_standin.api_url}/repos/{DEFAULT_REPO}"
    assert isinstance(repo.permissions, FullRepositoryPropPermissions)
    assert repo.permissions.push


def test_unknown_token_is_401_bad_credentials(github_standin: GitHubStandIn) -> None:
    response = LOCAL.get(
        f"{github_standin.api_url}/repos/{DEFAULT_REPO}",
        headers={"Authorization": "Bearer ghp_not_a_token"},
    )
    assert response.status_code == 401
    assert response.json() == {
        "message": "Bad credentials",
        "documentation_url": "https://docs.github.com/rest",
        "status": "401",
    }


@pytest.mark.parametrize("scheme", ["Bearer", "token"])
def test_both_authorization_schemes_are_accepted(
    github_standin: GitHubStandIn, scheme: str
) -> None:
    create_release(github_standin)
    response = LOCAL.get(
        f"{github_standin.api_url}/repos/{DEFAULT_REPO}/releases",
        headers={"Authorization": f"{scheme} {github_standin.token}"},
    )
    assert response.status_code == 200
    assert len(response.json()) == 1


def test_every_api_answer_carries_rate_limit_headers(github_standin: GitHubStandIn) -> None:
    first = LOCAL.get(
        f"{github_standin.api_url}/repos/{DEFAULT_REPO}", headers=auth(github_standin)
    )
    missing = LOCAL.get(
        f"{github_standin.api_url}/repos/{DEFAULT_REPO}/releases/tags/nope",
        headers=auth(github_standin),
    )
    anonymous = LOCAL.get(f"{github_standin.api_url}/repos/{DEFAULT_REPO}")
    for response in (first, missing, anonymous):
        for header in ("limit", "remaining", "reset", "used", "resource"):
            assert f"x-ratelimit-{header}" in response.headers
    assert missing.status_code == 404
    assert first.headers["x-ratelimit-limit"] == "5000"
    assert anonymous.headers["x-ratelimit-limit"] == "60"
    assert int(missing.headers["x-ratelimit-used"]) == int(first.headers["x-ratelimit-used"]) + 1


def test_anonymous_callers_run_out_after_their_hourly_limit() -> None:
    with GitHubStandIn(anonymous_rate_limit=2) as standin:
        standin.add_repo(DEFAULT_REPO)
        url = f"{standin.api_url}/repos/{DEFAULT_REPO}"
        statuses = [LOCAL.get(url).status_code for _ in range(3)]
        refused = LOCAL.get(url)
        authenticated = LOCAL.get(url, headers=auth(standin))
    assert statuses == [200, 200, 403]
    assert refused.headers["x-ratelimit-remaining"] == "0"
    assert "API rate limit exceeded" in refused.json()["message"]
    assert authenticated.status_code == 200


def test_etag_revalidation_answers_304(github_standin: GitHubStandIn) -> None:
    url = f"{github_standin.api_url}/repos/{DEFAULT_REPO}/releases"
    first = LOCAL.get(url, headers=auth(github_standin))
    again = LOCAL.get(url, headers={**auth(github_standin), "If-None-Match": first.headers["etag"]})
    create_release(github_standin)
    changed = LOCAL.get(
        url, headers={**auth(github_standin), "If-None-Match": first.headers["etag"]}
    )
    assert again.status_code == 304
    assert changed.status_code == 200
    assert len(changed.json()) == 1


def test_request_log_masks_the_token(github_standin: GitHubStandIn) -> None:
    release = create_release(github_standin)
    upload(github_standin, release, "a.whl", b"abc")
    log = github_standin.request_log
    assert [(e.method, e.origin, e.status) for e in log] == [
        ("POST", "api", 201),
        ("POST", "uploads", 201),
    ]
    assert log[1].body_length == 3
    assert all(github_standin.token not in value for e in log for _, value in e.headers)
    assert log[0].header("authorization") == "token ***"


# -- releases --------------------------------------------------------------------------


def test_draft_is_404_by_tag_and_listed_only_with_a_token(github_standin: GitHubStandIn) -> None:
    draft = create_release(github_standin, "v1.0.0")
    gh = client(github_standin)
    rest = gh.rest(API_VERSION)
    with pytest.raises(RequestFailed) as by_tag:
        rest.repos.get_release_by_tag(OWNER, NAME, "v1.0.0")
    listed = rest.repos.list_releases(OWNER, NAME).parsed_data
    anonymous_gh = GitHub(base_url=github_standin.api_url, ssl_verify=tls_context())
    anonymous = anonymous_gh.rest(API_VERSION)
    anonymous_list = anonymous.repos.list_releases(OWNER, NAME).parsed_data
    with pytest.raises(RequestFailed) as anonymous_get:
        anonymous.repos.get_release(OWNER, NAME, draft.id)
    reader_gh = GitHub(
        github_standin.add_token("reader", push=False),
        base_url=github_standin.api_url,
        ssl_verify=tls_context(),
    )
    reader = reader_gh.rest(API_VERSION)

    assert by_tag.value.response.status_code == 404
    assert by_tag.value.response.json()["message"] == "Not Found"
    assert [r.id for r in listed] == [draft.id]
    assert anonymous_list == []
    assert anonymous_get.value.response.status_code == 404
    assert reader.repos.list_releases(OWNER, NAME).parsed_data == []
    assert rest.repos.get_release(OWNER, NAME, draft.id).parsed_data.draft


def test_published_release_is_found_by_tag(github_standin: GitHubStandIn) -> None:
    published = create_release(github_standin, "v2.0.0", draft=False)
    response = LOCAL.get(f"{github_standin.api_url}/repos/{DEFAULT_REPO}/releases/tags/v2.0.0")
    found = Release.model_validate(response.json())
    assert found.id == published.id
    assert found.published_at is not None
    assert found.tarball_url is not None


def test_duplicate_published_tag_is_422_with_githubs_body(github_standin: GitHubStandIn) -> None:
    create_release(github_standin, "v1.0.0", draft=False)
    response = LOCAL.post(
        f"{github_standin.api_url}/repos/{DEFAULT_REPO}/releases",
        json={"tag_name": "v1.0.0", "draft": True},
        headers=auth(github_standin),
    )
    assert response.status_code == 422
    assert response.json() == {
        "message": "Validation Failed",
        "errors": [{"resource": "Release", "code": "already_exists", "field": "tag_name"}],
        "documentation_url": "https://docs.github.com/rest/releases/releases#create-a-release",
        "status": "422",
    }


def test_drafts_may_share_a_tag_but_only_one_can_be_published(
    github_standin: GitHubStandIn,
) -> None:
    first = create_release(github_standin, "v1.0.0")
    second = create_release(github_standin, "v1.0.0")
    gh = client(github_standin)
    rest = gh.rest(API_VERSION)
    rest.repos.update_release(OWNER, NAME, first.id, draft=False)
    with pytest.raises(RequestFailed) as refused:
        rest.repos.update_release(OWNER, NAME, second.id, draft=False)
    assert refused.value.response.status_code == 422
    assert refused.value.response.json()["errors"][0]["code"] == "already_exists"


def test_publishing_changes_the_urls(github_standin: GitHubStandIn) -> None:
    draft = create_release(github_standin)
    asset = ReleaseAsset.model_validate(upload(github_standin, draft, "k.whl", b"wheel").json())
    assert "/releases/tag/untagged-" in draft.html_url
    assert "/releases/download/untagged-" in asset.browser_download_url
    assert draft.published_at is None

    gh = client(github_standin)
    rest = gh.rest(API_VERSION)
    published = rest.repos.update_release(OWNER, NAME, draft.id, draft=False).parsed_data
    new_url = published.assets[0].browser_download_url
    assert published.html_url == f"{github_standin.web_url}/{DEFAULT_REPO}/releases/tag/v1.0.0"
    assert new_url == f"{github_standin.web_url}/{DEFAULT_REPO}/releases/download/v1.0.0/k.whl"
    assert published.published_at is not None
    assert published.url == draft.url
    assert LOCAL.get(asset.browser_download_url, headers=auth(github_standin)).status_code == 404
    assert LOCAL.get(new_url, follow_redirects=True).content == b"wheel"


def test_delete_release_removes_its_assets(github_standin: GitHubStandIn) -> None:
    release = create_release(github_standin)
    upload(github_standin, release, "a.whl", b"a")
    deleted = LOCAL.delete(release.url, headers=auth(github_standin))
    assert deleted.status_code == 204
    assert github_standin.releases(DEFAULT_REPO) == ()
    assert github_standin.assets(release.id) == ()


def test_writes_need_push_access(github_standin: GitHubStandIn) -> None:
    url = f"{github_standin.api_url}/repos/{DEFAULT_REPO}/releases"
    anonymous = LOCAL.post(url, json={"tag_name": "v1"})
    reader = LOCAL.post(
        url,
        json={"tag_name": "v1"},
        headers={"Authorization": f"token {github_standin.add_token('reader', push=False)}"},
    )
    assert anonymous.status_code == 401
    assert anonymous.json()["message"] == "Requires authentication"
    assert reader.status_code == 403
    assert github_standin.releases(DEFAULT_REPO) == ()


# -- uploads ---------------------------------------------------------------------------


def test_upload_to_the_api_origin_is_404(github_standin: GitHubStandIn) -> None:
    release = create_release(github_standin)
    gh = client(github_standin)
    rest = gh.rest(API_VERSION)
    with pytest.raises(RequestFailed) as refused:
        rest.repos.upload_release_asset(OWNER, NAME, release.id, name="a.whl", data=b"x")
    assert refused.value.response.status_code == 404
    assert github_standin.assets(release.id) == ()


def test_upload_stores_bytes_verbatim_with_digest(github_standin: GitHubStandIn) -> None:
    release = create_release(github_standin)
    data = bytes(range(256)) * 1000
    response = upload(
        github_standin, release, "k3-1.0.0-py3-none-any.whl", data, content_type="application/zip"
    )
    asset = ReleaseAsset.model_validate(response.json())
    assert response.status_code == 201
    assert asset.state == "uploaded"
    assert asset.digest == "sha256:" + hashlib.sha256(data).hexdigest()
    assert asset.size == len(data)
    assert asset.content_type == "application/zip"
    assert asset.uploader is not None
    assert asset.uploader.login == "release-bot"
    assert github_standin.assets(release.id)[0].data == data
    listed = LOCAL.get(release.assets_url, headers=auth(github_standin)).json()
    assert [ReleaseAsset.model_validate(a).id for a in listed] == [asset.id]


def test_upload_through_githubkit_arequest(github_standin: GitHubStandIn) -> None:
    release = create_release(github_standin)

    async def send() -> int:
        async with client(github_standin) as gh:
            response = await gh.arequest(
                "POST",
                release.upload_url.split("{", 1)[0],
                params={"name": "b.whl"},
                content=b"async bytes",
                headers={"Content-Type": "application/octet-stream"},
            )
            status: int = response.raw_response.status_code
            return status

    assert asyncio.run(send()) == 201
    assert github_standin.assets(release.id)[0].data == b"async bytes"


def test_duplicate_asset_name_is_422_with_githubs_body(github_standin: GitHubStandIn) -> None:
    release = create_release(github_standin)
    upload(github_standin, release, "a.whl", b"first")
    response = upload(github_standin, release, "a.whl", b"second")
    body = response.json()
    assert response.status_code == 422
    assert isinstance(body.pop("request_id"), str)
    assert body == {
        "message": "Validation Failed",
        "documentation_url": "https://docs.github.com/rest/releases/assets#upload-a-release-asset",
        "errors": [{"resource": "ReleaseAsset", "code": "already_exists", "field": "name"}],
    }
    assert [a.data for a in github_standin.assets(release.id)] == [b"first"]


def test_upload_needs_content_type_and_content_length(github_standin: GitHubStandIn) -> None:
    release = create_release(github_standin)
    url = release.upload_url.split("{", 1)[0]
    no_type = LOCAL.post(url, params={"name": "a.whl"}, content=b"x", headers=auth(github_standin))

    def chunks() -> Any:
        yield b"chunked"

    no_length = LOCAL.post(
        url,
        params={"name": "b.whl"},
        content=chunks(),
        headers={**auth(github_standin), "Content-Type": "application/zip"},
    )
    assert no_type.status_code == 400
    assert no_type.json()["message"] == "Invalid Content-Type: ''"
    assert no_length.status_code == 400
    assert no_length.json()["message"].startswith("Bad Content-Length")
    assert github_standin.assets(release.id) == ()


@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        (
            "k3_kernels-1.0.0+cu129-py3-none-manylinux_2_28_x86_64.whl",
            "k3_kernels-1.0.0+cu129-py3-none-manylinux_2_28_x86_64.whl",
        ),
        ("my file.whl", "my.file.whl"),
        ("fake.      file.txt", "fake.file.txt"),
        (
            "app.prod-v1.3.0-(15-5)-6064eac-release.apk",
            "app.prod-v1.3.0-.15-5.-6064eac-release.apk",
        ),
        ("tobwen-1.1.0-1~buster_amd64.deb", "tobwen-1.1.0-1.buster_amd64.deb"),
        ("erick%%%%%!!!zhao.txt", "erick.zhao.txt"),
        (".config", "default.config"),
        ("trailing.", "trailing"),
    ],
)
def test_odd_asset_names_are_renamed_like_github(
    github_standin: GitHubStandIn, raw: str, stored: str
) -> None:
    release = create_release(github_standin)
    response = upload(github_standin, release, raw, b"x")
    assert github_asset_name(raw) == stored
    assert response.json()["name"] == stored
    assert response.json()["browser_download_url"].endswith("/" + stored)


def test_a_raw_plus_in_the_query_arrives_as_a_space(github_standin: GitHubStandIn) -> None:
    release = create_release(github_standin)
    url = release.upload_url.split("{", 1)[0] + "?name=k3-1.0+cu129.whl"
    response = LOCAL.post(
        url, content=b"x", headers={**auth(github_standin), "Content-Type": "application/zip"}
    )
    assert response.json()["name"] == "k3-1.0.cu129.whl"


def test_asset_rename_and_delete(github_standin: GitHubStandIn) -> None:
    release = create_release(github_standin)
    asset = ReleaseAsset.model_validate(upload(github_standin, release, "a.whl", b"a").json())
    renamed = LOCAL.patch(
        asset.url, json={"name": "b c.whl", "label": "B"}, headers=auth(github_standin)
    )
    deleted = LOCAL.delete(asset.url, headers=auth(github_standin))
    gone = LOCAL.get(asset.url, headers=auth(github_standin))
    assert ReleaseAsset.model_validate(renamed.json()).name == "b.c.whl"
    assert renamed.json()["label"] == "B"
    assert deleted.status_code == 204
    assert gone.status_code == 404


# -- pagination ------------------------------------------------------------------------


def test_pagination_links_are_absolute_and_complete(github_standin: GitHubStandIn) -> None:
    release = create_release(github_standin)
    for number in range(250):
        github_standin.add_asset(release.id, f"w{number:03d}.whl", b"%d" % number)
    url: str | None = f"{release.assets_url}?per_page=100"
    pages: list[list[int]] = []
    links: list[dict[str, str]] = []
    with httpx.Client(headers=auth(github_standin)) as http:
        while url:
            response = http.get(url)
            pages.append([ReleaseAsset.model_validate(a).id for a in response.json()])
            links.append({str(rel): str(link["url"]) for rel, link in response.links.items()})
            url = response.links.get("next", {}).get("url")
        default_page = http.get(release.assets_url).json()
        capped = http.get(release.assets_url, params={"per_page": 500}).json()

    assert [len(p) for p in pages] == [100, 100, 50]
    assert [i for p in pages for i in p] == [a.id for a in github_standin.assets(release.id)]
    assert set(links[0]) == {"next", "last"}
    assert set(links[1]) == {"prev", "next", "last", "first"}
    assert set(links[2]) == {"prev", "first"}
    for page_links in links:
        for link in page_links.values():
            assert link.startswith(f"{github_standin.api_url}/repositories/")
            assert parse_qs(urlsplit(link).query)["per_page"] == ["100"]
    assert parse_qs(urlsplit(links[0]["last"]).query)["page"] == ["3"]
    assert len(default_page) == 30
    assert len(capped) == 100


def test_release_list_paginates_newest_first(github_standin: GitHubStandIn) -> None:
    ids = [create_release(github_standin, f"v{n}", draft=False).id for n in range(5)]
    response = LOCAL.get(
        f"{github_standin.api_url}/repos/{DEFAULT_REPO}/releases", params={"per_page": 2, "page": 3}
    )
    assert [Release.model_validate(r).id for r in response.json()] == [ids[0]]
    assert set(response.links) == {"prev", "first"}


# -- downloads -------------------------------------------------------------------------


def test_download_redirect_is_signed_and_refuses_authorization(
    github_standin: GitHubStandIn,
) -> None:
    release = create_release(github_standin, draft=False)
    asset = ReleaseAsset.model_validate(upload(github_standin, release, "a.whl", b"abc").json())
    redirect = LOCAL.get(asset.browser_download_url)
    location = redirect.headers["location"]
    query = parse_qs(urlsplit(location).query)
    with_auth = LOCAL.get(location, headers=auth(github_standin))
    forged = LOCAL.get(location.replace(f"sig={query['sig'][0]}", "sig=" + "0" * 64))
    fetched = LOCAL.get(location)
    followed = LOCAL.get(
        asset.browser_download_url, follow_redirects=True, headers=auth(github_standin)
    )

    assert redirect.status_code == 302
    assert location.startswith(github_standin.storage_url + "/")
    assert {"exp", "sig"} <= set(query)
    assert with_auth.status_code == 400
    assert forged.status_code == 403
    assert fetched.status_code == 200
    assert fetched.content == b"abc"
    assert fetched.headers["content-length"] == "3"
    assert followed.content == b"abc"
    assert github_standin.assets(release.id)[0].download_count == 2


def test_asset_api_with_octet_stream_redirects_to_storage(github_standin: GitHubStandIn) -> None:
    release = create_release(github_standin)
    asset = ReleaseAsset.model_validate(upload(github_standin, release, "a.whl", b"abc").json())
    headers = {**auth(github_standin), "Accept": "application/octet-stream"}
    redirect = LOCAL.get(asset.url, headers=headers)
    followed = LOCAL.get(asset.url, headers=headers, follow_redirects=True)
    anonymous = LOCAL.get(asset.url, headers={"Accept": "application/octet-stream"})
    assert redirect.status_code == 302
    assert redirect.headers["location"].startswith(github_standin.storage_url)
    assert followed.content == b"abc"
    assert anonymous.status_code == 404


def test_draft_download_url_is_404_anonymously(github_standin: GitHubStandIn) -> None:
    release = create_release(github_standin)
    asset = ReleaseAsset.model_validate(upload(github_standin, release, "a.whl", b"abc").json())
    assert LOCAL.get(asset.browser_download_url).status_code == 404
    assert LOCAL.head(asset.browser_download_url).status_code == 404
    with_token = LOCAL.get(
        asset.browser_download_url, headers=auth(github_standin), follow_redirects=True
    )
    assert with_token.content == b"abc"


# -- GitHub Enterprise base URL ----------------------------------------------------------


def test_enterprise_base_url_serves_uploads_under_api_uploads(
    github_standin: GitHubStandIn,
) -> None:
    gh = client(github_standin, base_url=github_standin.ghe_api_url)
    rest = gh.rest(API_VERSION)
    release = rest.repos.create_release(OWNER, NAME, tag_name="v1", draft=True).parsed_data
    response = upload(github_standin, release, "a.whl", b"abc")
    asset = ReleaseAsset.model_validate(response.json())
    assert release.url.startswith(f"{github_standin.api_url}/api/v3/repos/")
    assert release.upload_url.startswith(f"{github_standin.api_url}/api/uploads/repos/")
    assert response.status_code == 201
    assert asset.url.startswith(f"{github_standin.api_url}/api/v3/")
    assert (
        LOCAL.get(
            asset.browser_download_url, headers=auth(github_standin), follow_redirects=True
        ).content
        == b"abc"
    )


# -- rate limits -----------------------------------------------------------------------


def test_primary_rate_limit_is_recognised_and_retried(github_standin: GitHubStandIn) -> None:
    fault = github_standin.faults.add(primary_rate_limit(path=r"/releases$"))
    raw = LOCAL.get(f"{github_standin.api_url}/repos/{DEFAULT_REPO}/releases")
    github_standin.faults.add(fault)
    gh = client(github_standin)
    with pytest.raises(PrimaryRateLimitExceeded):
        gh.rest(API_VERSION).repos.list_releases(OWNER, NAME)
    github_standin.faults.add(fault)
    retrying = client(github_standin, auto_retry=True)
    assert retrying.rest(API_VERSION).repos.list_releases(OWNER, NAME).status_code == 200
    assert raw.status_code == 403
    assert raw.headers["x-ratelimit-remaining"] == "0"
    assert int(raw.headers["x-ratelimit-reset"]) > 0
    assert raw.json()["message"].startswith("API rate limit exceeded")


@pytest.mark.parametrize(
    ("make_fault", "status", "retry_after", "recognised"),
    [
        (rate_limit_429_retry_after, 429, True, True),
        (secondary_403_retry_after, 403, True, True),
        (secondary_403_message, 403, False, False),
        (secondary_429_bare, 429, False, False),
    ],
)
def test_secondary_rate_limit_forms(
    github_standin: GitHubStandIn, make_fault: Any, status: int, retry_after: bool, recognised: bool
) -> None:
    fault = github_standin.faults.add(make_fault(path=r"/releases$"))
    raw = LOCAL.get(f"{github_standin.api_url}/repos/{DEFAULT_REPO}/releases")
    github_standin.faults.add(fault)
    gh = client(github_standin)
    with pytest.raises(RequestFailed) as failure:
        gh.rest(API_VERSION).repos.list_releases(OWNER, NAME)

    assert raw.status_code == status
    assert ("retry-after" in raw.headers) is retry_after
    assert "secondary rate limit" in raw.json()["message"]
    assert isinstance(failure.value, SecondaryRateLimitExceeded) is recognised
    assert isinstance(failure.value, RateLimitExceeded) is recognised
    if make_fault is secondary_429_bare:
        assert not any(h.startswith("x-ratelimit") for h in raw.headers)
    else:
        assert raw.headers["x-ratelimit-remaining"] != "0"
    assert LOCAL.get(f"{github_standin.api_url}/repos/{DEFAULT_REPO}/releases").status_code == 200


# -- faults ----------------------------------------------------------------------------


def test_store_then_502_leaves_the_asset_in_place(github_standin: GitHubStandIn) -> None:
    release = create_release(github_standin)
    github_standin.faults.add(
        Fault(method="POST", path=r"/assets$", origin="uploads", action="store_then", status=502)
    )
    failed = upload(github_standin, release, "a.whl", b"payload")
    rerun = upload(github_standin, release, "a.whl", b"payload")
    assert failed.status_code == 502
    assert [(a.name, a.state, a.data) for a in github_standin.assets(release.id)] == [
        ("a.whl", "uploaded", b"payload")
    ]
    assert rerun.status_code == 422


def test_reset_drops_the_connection_mid_upload(github_standin: GitHubStandIn) -> None:
    release = create_release(github_standin)
    data = b"w" * 4_000_000
    github_standin.faults.add(
        Fault(method="POST", path=r"/assets$", origin="uploads", action="reset")
    )
    with pytest.raises(httpx.TransportError):
        upload(github_standin, release, "a.whl", data)
    entry = github_standin.request_log[-1]
    assert entry.status is None
    assert 0 < entry.body_length < len(data)
    assert github_standin.assets(release.id) == ()
    assert upload(github_standin, release, "a.whl", data).status_code == 201


def test_reset_through_githubkit_is_a_request_error(github_standin: GitHubStandIn) -> None:
    release = create_release(github_standin)
    github_standin.faults.add(Fault(origin="uploads", action="reset", read_bytes=10))
    with pytest.raises(RequestError):
        client(github_standin).request(
            "POST",
            release.upload_url.split("{", 1)[0],
            params={"name": "a.whl"},
            content=b"x" * 100_000,
            headers={"Content-Type": "application/octet-stream"},
        )


def test_failed_upload_can_leave_a_starter_asset(github_standin: GitHubStandIn) -> None:
    release = create_release(github_standin)
    github_standin.faults.add(
        Fault(
            origin="uploads",
            action="status",
            status=502,
            body={"message": "Bad Gateway"},
            leave_state="starter",
        )
    )
    failed = upload(github_standin, release, "a.whl", b"abc")
    listed = LOCAL.get(release.assets_url, headers=auth(github_standin)).json()
    blocked = upload(github_standin, release, "a.whl", b"abc")
    assert failed.status_code == 502
    assert [(a["name"], a["state"], a["size"], a["digest"]) for a in listed] == [
        ("a.whl", "starter", 0, None)
    ]
    with pytest.raises(ValidationError):
        ReleaseAsset.model_validate(listed[0])
    assert blocked.status_code == 422
    LOCAL.delete(listed[0]["url"], headers=auth(github_standin))
    assert upload(github_standin, release, "a.whl", b"abc").status_code == 201


def test_server_error_storm_longer_than_the_retries_fails_then_recovers(
    github_standin: GitHubStandIn,
) -> None:
    storm = github_standin.faults.add(server_errors(path=r"/releases$", count=2))
    retrying = client(github_standin, auto_retry=RetryServerError(max_retry=1))
    with pytest.raises(RequestFailed) as failure:
        retrying.rest(API_VERSION).repos.list_releases(OWNER, NAME)
    assert failure.value.response.status_code == 502
    assert github_standin.faults.remaining(storm) == 0
    assert retrying.rest(API_VERSION).repos.list_releases(OWNER, NAME).status_code == 200


def test_faults_match_method_path_and_origin_and_count(github_standin: GitHubStandIn) -> None:
    release = create_release(github_standin)
    fault = github_standin.faults.add(Fault(method="POST", origin="uploads", status=503, count=2))
    listing = LOCAL.get(f"{github_standin.api_url}/repos/{DEFAULT_REPO}/releases")
    statuses = [upload(github_standin, release, f"{n}.whl", b"x").status_code for n in range(3)]
    assert listing.status_code == 200
    assert statuses == [503, 503, 201]
    assert github_standin.faults.fired == (fault, fault)
    assert github_standin.faults.pending == ()


def test_existing_asset_with_other_bytes_is_visible_by_digest(
    github_standin: GitHubStandIn,
) -> None:
    release = create_release(github_standin)
    github_standin.add_asset(release.id, "a.whl", b"other bytes")
    listed = LOCAL.get(release.assets_url, headers=auth(github_standin)).json()
    assert listed[0]["digest"] == "sha256:" + hashlib.sha256(b"other bytes").hexdigest()
    assert upload(github_standin, release, "a.whl", b"mine").status_code == 422
    assert github_standin.assets(release.id)[0].data == b"other bytes"


def test_the_fixture_gives_fresh_state(github_standin: GitHubStandIn) -> None:
    assert github_standin.releases(DEFAULT_REPO) == ()
    assert github_standin.request_log == ()
    assert github_standin.faults.pending == ()


# -- artifact attestations -----------------------------------------------------------------


def test_attestations_are_served_for_a_registered_digest_and_404_otherwise(
    github_standin: GitHubStandIn,
) -> None:
    recorded = Path(__file__).parent.parent / "data" / "provenance"
    bundle = json.loads(
        (recorded / "github_provenance_demo-0.0.12-py3-none-any.whl.sigstore.json").read_text()
    )
    (digest,) = github_standin.add_attestation(DEFAULT_REPO, bundle)
    assert digest == "sha256:ae57936def59bc4c75edd3a837d89bcefc6d3a5e31d55a6fa7a71624f92c3c3b"
    gh = client(github_standin)
    rest = gh.rest(API_VERSION)
    found = rest.repos.list_attestations(OWNER, NAME, digest)
    assert found.status_code == 200
    (item,) = found.json()["attestations"]
    assert item["bundle"] == bundle
    assert isinstance(item["repository_id"], int)
    parsed = found.parsed_data.attestations
    assert isinstance(parsed, list)
    assert parsed[0].repository_id == item["repository_id"]
    with pytest.raises(RequestFailed) as missing:
        rest.repos.list_attestations(OWNER, NAME, "sha256:" + "0" * 64)
    assert missing.value.response.status_code == 404
    assert "attestations" in missing.value.response.json()["documentation_url"]
