"""Records of the stand-in GitHub and their JSON shapes (REST API version 2022-11-28).

Everything here is pure: frozen records in, JSON-ready dicts out. The URLs inside the
JSON depend on how the caller reached the server (github.com style or GitHub
Enterprise style under ``/api/v3``), so every renderer takes a :class:`Links`.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

JsonObject = dict[str, Any]

# Characters GitHub keeps in an uploaded asset's name. The rest is inferred from what
# users observed (the docs only say "special characters are renamed"):
# spaces, parentheses, "~", ":", "%", "!" become "." and a run of them becomes one ".";
# a leading "." turns ".config" into "default.config"; trailing periods are dropped;
# "+" survives when it arrives percent-encoded (a raw "+" in the query is a space).
_DISALLOWED_RUN = re.compile(r"[^A-Za-z0-9._+@-]+")
_DOTS = re.compile(r"\.{2,}")


def github_asset_name(raw: str) -> str:
    """The name GitHub stores for an asset uploaded as ``raw``."""
    decomposed = unicodedata.normalize("NFKD", raw)
    ascii_only = "".join(c for c in decomposed if not unicodedata.combining(c))
    name = _DOTS.sub(".", _DISALLOWED_RUN.sub(".", ascii_only))
    if name.startswith("."):
        name = "default" + name
    name = name.rstrip(".")
    return name or "default"


def iso(moment: datetime) -> str:
    """GitHub's timestamp format: UTC, second precision, ``Z`` suffix."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, kw_only=True)
class User:
    login: str
    id: int
    push: bool = True


@dataclass(frozen=True, kw_only=True)
class Repo:
    id: int
    owner: User
    name: str
    private: bool
    default_branch: str
    created_at: datetime
    immutable_releases: bool = False  # the repository setting: a release freezes when published

    @property
    def full_name(self) -> str:
        return f"{self.owner.login}/{self.name}"


@dataclass(frozen=True, kw_only=True)
class Release:
    """One release. ``untagged`` is the ``untagged-<hex>`` name a draft's URLs use."""

    id: int
    repo_id: int
    tag_name: str
    target_commitish: str
    name: str | None
    body: str | None
    draft: bool
    prerelease: bool
    author: User
    created_at: datetime
    published_at: datetime | None
    updated_at: datetime
    untagged: str
    immutable: bool = False  # published on a repository with immutable releases on

    @property
    def url_tag(self) -> str:
        return self.untagged if self.draft else self.tag_name


@dataclass(frozen=True, kw_only=True)
class Asset:
    """One release asset. ``state`` is "uploaded" for a complete upload; a failed one
    can leave "starter" or "new" (outside githubkit's ``Literal["uploaded", "open"]``)."""

    id: int
    release_id: int
    name: str
    label: str | None
    state: str
    content_type: str
    data: bytes
    uploader: User
    download_count: int
    created_at: datetime
    updated_at: datetime
    # What GitHub recorded at upload, where storage has since changed the bytes under it.
    recorded: bytes | None = None

    @property
    def size(self) -> int:
        return len(self.data if self.recorded is None else self.recorded)

    @property
    def digest(self) -> str | None:
        if self.state != "uploaded":
            return None
        return sha256_digest(self.data if self.recorded is None else self.recorded)


@dataclass(frozen=True, kw_only=True)
class Links:
    """Bases of the URLs put into JSON: the REST API, the web ("github.com") and uploads."""

    api: str
    web: str
    uploads: str


def node_id(prefix: str, number: int) -> str:
    return f"{prefix}_kwDO{number:010d}"


def user_json(user: User, links: Links) -> JsonObject:
    api_user = f"{links.api}/users/{user.login}"
    return {
        "login": user.login,
        "id": user.id,
        "node_id": node_id("U", user.id),
        "avatar_url": f"{links.web}/avatars/u/{user.id}?v=4",
        "gravatar_id": "",
        "url": api_user,
        "html_url": f"{links.web}/{user.login}",
        "followers_url": f"{api_user}/followers",
        "following_url": f"{api_user}/following{{/other_user}}",
        "gists_url": f"{api_user}/gists{{/gist_id}}",
        "starred_url": f"{api_user}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{api_user}/subscriptions",
        "organizations_url": f"{api_user}/orgs",
        "repos_url": f"{api_user}/repos",
        "events_url": f"{api_user}/events{{/privacy}}",
        "received_events_url": f"{api_user}/received_events",
        "type": "User",
        "user_view_type": "public",
        "site_admin": False,
    }


def quote_tag(tag: str) -> str:
    return quote(tag, safe="/")


def asset_json(asset: Asset, repo: Repo, release: Release, links: Links) -> JsonObject:
    return {
        "url": f"{links.api}/repos/{repo.full_name}/releases/assets/{asset.id}",
        "id": asset.id,
        "node_id": node_id("RA", asset.id),
        "name": asset.name,
        "label": asset.label,
        "uploader": user_json(asset.uploader, links),
        "content_type": asset.content_type,
        "state": asset.state,
        "size": asset.size,
        "digest": asset.digest,
        "download_count": asset.download_count,
        "created_at": iso(asset.created_at),
        "updated_at": iso(asset.updated_at),
        "browser_download_url": (
            f"{links.web}/{repo.full_name}/releases/download/"
            f"{quote_tag(release.url_tag)}/{quote(asset.name, safe='+@')}"
        ),
    }


def release_json(release: Release, repo: Repo, assets: list[Asset], links: Links) -> JsonObject:
    api_repo = f"{links.api}/repos/{repo.full_name}"
    api_release = f"{api_repo}/releases/{release.id}"
    tag = quote_tag(release.tag_name)
    return {
        "url": api_release,
        "assets_url": f"{api_release}/assets",
        "upload_url": (
            f"{links.uploads}/repos/{repo.full_name}/releases/{release.id}/assets{{?name,label}}"
        ),
        "html_url": f"{links.web}/{repo.full_name}/releases/tag/{quote_tag(release.url_tag)}",
        "id": release.id,
        "author": user_json(release.author, links),
        "node_id": node_id("RE", release.id),
        "tag_name": release.tag_name,
        "target_commitish": release.target_commitish,
        "name": release.name,
        "draft": release.draft,
        "immutable": release.immutable,
        "prerelease": release.prerelease,
        "created_at": iso(release.created_at),
        "updated_at": iso(release.updated_at),
        "published_at": iso(release.published_at) if release.published_at else None,
        "assets": [asset_json(a, repo, release, links) for a in assets],
        "tarball_url": None if release.draft else f"{api_repo}/tarball/{tag}",
        "zipball_url": None if release.draft else f"{api_repo}/zipball/{tag}",
        "body": release.body,
    }


_REPO_URL_TEMPLATES = {
    "archive_url": "/{archive_format}{/ref}",
    "assignees_url": "/assignees{/user}",
    "blobs_url": "/git/blobs{/sha}",
    "branches_url": "/branches{/branch}",
    "collaborators_url": "/collaborators{/collaborator}",
    "comments_url": "/comments{/number}",
    "commits_url": "/commits{/sha}",
    "compare_url": "/compare/{base}...{head}",
    "contents_url": "/contents/{+path}",
    "contributors_url": "/contributors",
    "deployments_url": "/deployments",
    "downloads_url": "/downloads",
    "events_url": "/events",
    "forks_url": "/forks",
    "git_commits_url": "/git/commits{/sha}",
    "git_refs_url": "/git/refs{/sha}",
    "git_tags_url": "/git/tags{/sha}",
    "hooks_url": "/hooks",
    "issue_comment_url": "/issues/comments{/number}",
    "issue_events_url": "/issues/events{/number}",
    "issues_url": "/issues{/number}",
    "keys_url": "/keys{/key_id}",
    "labels_url": "/labels{/name}",
    "languages_url": "/languages",
    "merges_url": "/merges",
    "milestones_url": "/milestones{/number}",
    "notifications_url": "/notifications{?since,all,participating}",
    "pulls_url": "/pulls{/number}",
    "releases_url": "/releases{/id}",
    "stargazers_url": "/stargazers",
    "statuses_url": "/statuses/{sha}",
    "subscribers_url": "/subscribers",
    "subscription_url": "/subscription",
    "tags_url": "/tags",
    "teams_url": "/teams",
    "trees_url": "/git/trees{/sha}",
}


def repo_json(repo: Repo, links: Links, viewer: User | None) -> JsonObject:
    """The full repository object of ``GET /repos/{owner}/{repo}``."""
    api_repo = f"{links.api}/repos/{repo.full_name}"
    html = f"{links.web}/{repo.full_name}"
    host = links.web.split("://", 1)[-1]
    stamp = iso(repo.created_at)
    data: JsonObject = {
        "id": repo.id,
        "node_id": node_id("R", repo.id),
        "name": repo.name,
        "full_name": repo.full_name,
        "private": repo.private,
        "owner": user_json(repo.owner, links),
        "html_url": html,
        "description": None,
        "fork": False,
        "url": api_repo,
        **{key: api_repo + suffix for key, suffix in _REPO_URL_TEMPLATES.items()},
        "created_at": stamp,
        "updated_at": stamp,
        "pushed_at": stamp,
        "git_url": f"git://{host}/{repo.full_name}.git",
        "ssh_url": f"git@{host.split(':', 1)[0]}:{repo.full_name}.git",
        "clone_url": f"{html}.git",
        "svn_url": html,
        "homepage": None,
        "size": 0,
        "stargazers_count": 0,
        "watchers_count": 0,
        "language": "Python",
        "has_issues": True,
        "has_projects": True,
        "has_downloads": True,
        "has_wiki": True,
        "has_pages": False,
        "has_discussions": False,
        "forks_count": 0,
        "mirror_url": None,
        "archived": False,
        "disabled": False,
        "open_issues_count": 0,
        "license": None,
        "allow_forking": True,
        "is_template": False,
        "web_commit_signoff_required": False,
        "topics": [],
        "visibility": "private" if repo.private else "public",
        "forks": 0,
        "open_issues": 0,
        "watchers": 0,
        "default_branch": repo.default_branch,
        "network_count": 0,
        "subscribers_count": 0,
    }
    if viewer is not None:
        data["permissions"] = {
            "admin": False,
            "maintain": False,
            "push": viewer.push,
            "triage": viewer.push,
            "pull": True,
        }
    return data
