"""The shared, thread-safe state of the stand-in GitHub and the rules GitHub applies to it.

Operations raise :class:`ApiError` with GitHub's status and JSON body; the HTTP layer in
``server.py`` only turns requests into calls and results into responses.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from .records import Asset, JsonObject, Release, Repo, User, github_asset_name

DOCS = "https://docs.github.com/rest"
RELEASE_DOCS = "https://docs.github.com/rest/releases/releases"
ASSET_DOCS = "https://docs.github.com/rest/releases/assets"
ATTESTATION_DOCS = "https://docs.github.com/rest/repos/attestations"


class ApiError(Exception):
    """A GitHub error answer: ``status`` and the JSON ``body``."""

    def __init__(self, status: int, body: JsonObject, headers: Mapping[str, str] | None = None):
        super().__init__(f"{status} {body.get('message')}")
        self.status = status
        self.body = body
        self.headers = dict(headers or {})


def not_found(doc: str) -> ApiError:
    return ApiError(404, {"message": "Not Found", "documentation_url": doc, "status": "404"})


def bad_credentials() -> ApiError:
    return ApiError(401, {"message": "Bad credentials", "documentation_url": DOCS, "status": "401"})


def requires_authentication(doc: str) -> ApiError:
    return ApiError(
        401, {"message": "Requires authentication", "documentation_url": doc, "status": "401"}
    )


def release_exists(doc: str) -> ApiError:
    return ApiError(
        422,
        {
            "message": "Validation Failed",
            "errors": [{"resource": "Release", "code": "already_exists", "field": "tag_name"}],
            "documentation_url": doc,
            "status": "422",
        },
    )


def asset_exists(request_id: str) -> ApiError:
    return ApiError(
        422,
        {
            "message": "Validation Failed",
            "request_id": request_id,
            "documentation_url": f"{ASSET_DOCS}#upload-a-release-asset",
            "errors": [{"resource": "ReleaseAsset", "code": "already_exists", "field": "name"}],
        },
    )


def immutable_refusal(message: str, request_id: str = "") -> ApiError:
    """GitHub's 422 to a change of a published immutable release's assets. The upload's
    body is the one GitHub sends ("Cannot upload assets to an immutable release."); the
    delete and rename bodies follow it (not observed)."""
    body: JsonObject = {"message": message, "documentation_url": DOCS}
    if request_id:
        body["request_id"] = request_id
    return ApiError(422, body)


def frozen_release(field: str, message: str, doc: str) -> ApiError:
    """GitHub's 422 to an edit of an immutable release beyond its title and notes."""
    return ApiError(
        422,
        {
            "message": "Validation Failed",
            "errors": [
                {"resource": "Release", "code": "custom", "field": field, "message": message}
            ],
            "documentation_url": doc,
            "status": "422",
        },
    )


def _now() -> datetime:
    return datetime.now(timezone.utc)


class State:
    """Repositories, tokens, releases and assets of one stand-in."""

    def __init__(self, clock: Callable[[], datetime] = _now) -> None:
        self.lock = threading.RLock()
        self._clock = clock
        self._next_id = {"user": 1000, "repo": 700000000, "release": 180000000, "asset": 250000000}
        self._users: dict[str, User] = {}
        self._tokens: dict[str, User] = {}
        self._repos: dict[str, Repo] = {}
        self._releases: dict[int, Release] = {}
        self._assets: dict[int, Asset] = {}
        self._immutable_tags: set[tuple[int, str]] = set()  # (repo id, tag): never reusable
        # (repository, "sha256:<hex>") -> the Sigstore bundles registered for that digest
        self._attestations: dict[tuple[str, str], list[JsonObject]] = {}

    def _new_id(self, kind: str) -> int:
        self._next_id[kind] += 1
        return self._next_id[kind]

    def now(self) -> datetime:
        return self._clock().replace(microsecond=0)

    # -- identities and repositories ------------------------------------------------

    def user(self, login: str, *, push: bool = True) -> User:
        with self.lock:
            key = f"{login.lower()}:{push}"
            if key not in self._users:
                self._users[key] = User(login=login, id=self._new_id("user"), push=push)
            return self._users[key]

    def add_token(self, login: str, *, push: bool = True) -> str:
        token = "ghp_" + secrets.token_hex(18)
        with self.lock:
            self._tokens[token] = self.user(login, push=push)
        return token

    def viewer(self, token: str | None) -> User | None:
        """The user behind ``token``; ``None`` for an anonymous caller."""
        if token is None:
            return None
        with self.lock:
            user = self._tokens.get(token)
        if user is None:
            raise bad_credentials()
        return user

    def add_repo(
        self,
        full_name: str,
        *,
        private: bool = False,
        default_branch: str = "main",
        immutable_releases: bool = False,
    ) -> Repo:
        owner, sep, name = full_name.partition("/")
        if not sep or not owner or not name or "/" in name:
            raise ValueError(f"repository must be 'owner/name', got {full_name!r}")
        with self.lock:
            repo = Repo(
                id=self._new_id("repo"),
                owner=self.user(owner),
                name=name,
                private=private,
                default_branch=default_branch,
                created_at=self.now(),
                immutable_releases=immutable_releases,
            )
            self._repos[full_name.lower()] = repo
            return repo

    def repo(self, owner: str, name: str, viewer: User | None, doc: str) -> Repo:
        with self.lock:
            repo = self._repos.get(f"{owner}/{name}".lower())
        if repo is None or (repo.private and viewer is None):
            raise not_found(doc)
        return repo

    def repo_by_id(self, repo_id: int, viewer: User | None, doc: str) -> Repo:
        with self.lock:
            found = [r for r in self._repos.values() if r.id == repo_id]
        if not found:
            raise not_found(doc)
        return self.repo(found[0].owner.login, found[0].name, viewer, doc)

    # -- releases ---------------------------------------------------------------------

    def releases(self, repo: Repo, viewer: User | None) -> list[Release]:
        """Newest first; drafts only for a caller with push access."""
        with self.lock:
            found = [r for r in self._releases.values() if r.repo_id == repo.id]
        visible = [r for r in found if not r.draft or (viewer is not None and viewer.push)]
        return sorted(visible, key=lambda r: (r.created_at, r.id), reverse=True)

    def release(self, repo: Repo, release_id: int, viewer: User | None, doc: str) -> Release:
        with self.lock:
            release = self._releases.get(release_id)
        if release is None or release.repo_id != repo.id:
            raise not_found(doc)
        if release.draft and (viewer is None or not viewer.push):
            raise not_found(doc)
        return release

    def release_by_tag(self, repo: Repo, tag: str, doc: str) -> Release:
        for release in self.releases(repo, None):
            if release.tag_name == tag:
                return release
        raise not_found(doc)

    def latest_release(self, repo: Repo, doc: str) -> Release:
        published = [r for r in self.releases(repo, None) if not r.prerelease]
        if not published:
            raise not_found(doc)
        return max(published, key=lambda r: (r.published_at or r.created_at, r.id))

    def release_by_url_tag(self, repo: Repo, url_tag: str, viewer: User | None) -> Release:
        """The release a download URL names: a tag, or ``untagged-<hex>`` for a draft."""
        for release in self.releases(repo, viewer):
            if release.url_tag == url_tag:
                return release
        raise not_found(DOCS)

    @staticmethod
    def _need_push(viewer: User | None, doc: str) -> User:
        if viewer is None:
            raise requires_authentication(doc)
        if not viewer.push:
            raise ApiError(
                403,
                {
                    "message": "Resource not accessible by personal access token",
                    "documentation_url": doc,
                    "status": "403",
                },
            )
        return viewer

    def _published_tag_taken(self, repo: Repo, tag: str, other_than: int | None) -> bool:
        return any(
            r.repo_id == repo.id and r.tag_name == tag and not r.draft and r.id != other_than
            for r in self._releases.values()
        )

    def create_release(
        self, repo: Repo, viewer: User | None, payload: Mapping[str, Any]
    ) -> Release:
        doc = f"{RELEASE_DOCS}#create-a-release"
        author = self._need_push(viewer, doc)
        tag = payload.get("tag_name")
        if not isinstance(tag, str) or not tag:
            raise ApiError(
                422,
                {
                    "message": 'Invalid request.\n\n"tag_name" wasn\'t supplied.',
                    "documentation_url": doc,
                    "status": "422",
                },
            )
        draft = bool(payload.get("draft", False))
        with self.lock:
            if self._published_tag_taken(repo, tag, None):
                raise release_exists(doc)
            if (repo.id, tag) in self._immutable_tags:
                raise frozen_release("tag_name", "tag_name was used by an immutable release", doc)
            now = self.now()
            release = Release(
                id=self._new_id("release"),
                repo_id=repo.id,
                tag_name=tag,
                target_commitish=str(payload.get("target_commitish") or repo.default_branch),
                name=_optional_str(payload.get("name")),
                body=_optional_str(payload.get("body")),
                draft=draft,
                prerelease=bool(payload.get("prerelease", False)),
                author=author,
                created_at=now,
                published_at=None if draft else now,
                updated_at=now,
                untagged="untagged-" + secrets.token_hex(10),
                immutable=not draft and repo.immutable_releases,
            )
            self._releases[release.id] = release
            if release.immutable:
                self._immutable_tags.add((repo.id, tag))
            return release

    def update_release(
        self, repo: Repo, release_id: int, viewer: User | None, payload: Mapping[str, Any]
    ) -> Release:
        doc = f"{RELEASE_DOCS}#update-a-release"
        self._need_push(viewer, doc)
        with self.lock:
            release = self.release(repo, release_id, viewer, doc)
            if release.immutable:
                self._refuse_frozen_edit(release, payload, doc)
            changes: dict[str, Any] = {}
            for key in ("tag_name", "target_commitish"):
                if isinstance(payload.get(key), str) and payload[key]:
                    changes[key] = payload[key]
            for key in ("name", "body"):
                if key in payload:
                    changes[key] = _optional_str(payload[key])
            if "prerelease" in payload:
                changes["prerelease"] = bool(payload["prerelease"])
            draft = bool(payload["draft"]) if "draft" in payload else release.draft
            tag = changes.get("tag_name", release.tag_name)
            if not draft and self._published_tag_taken(repo, tag, release.id):
                raise release_exists(doc)
            now = self.now()
            if draft != release.draft:
                changes["draft"] = draft
                changes["published_at"] = None if draft else now
                changes["immutable"] = not draft and repo.immutable_releases
            updated = replace(release, updated_at=now, **changes)
            self._releases[release.id] = updated
            if updated.immutable:
                self._immutable_tags.add((repo.id, updated.tag_name))
            return updated

    @staticmethod
    def _refuse_frozen_edit(release: Release, payload: Mapping[str, Any], doc: str) -> None:
        """Only the title and the notes of an immutable release can change."""
        current = {
            "tag_name": release.tag_name,
            "target_commitish": release.target_commitish,
            "draft": release.draft,
            "prerelease": release.prerelease,
        }
        for key, value in payload.items():
            if key in current and value != current[key]:
                raise frozen_release(key, f"{key} cannot be changed on an immutable release", doc)

    def delete_release(self, repo: Repo, release_id: int, viewer: User | None) -> None:
        doc = f"{RELEASE_DOCS}#delete-a-release"
        self._need_push(viewer, doc)
        with self.lock:
            release = self.release(repo, release_id, viewer, doc)
            del self._releases[release.id]
            for asset_id in [a.id for a in self._assets.values() if a.release_id == release.id]:
                del self._assets[asset_id]

    # -- assets -----------------------------------------------------------------------

    def assets(self, release_id: int) -> list[Asset]:
        """Every asset of a release, whatever its state, in upload order."""
        with self.lock:
            return sorted(
                (a for a in self._assets.values() if a.release_id == release_id), key=lambda a: a.id
            )

    def asset(
        self, repo: Repo, asset_id: int, viewer: User | None, doc: str
    ) -> tuple[Asset, Release]:
        with self.lock:
            asset = self._assets.get(asset_id)
            if asset is None:
                raise not_found(doc)
            release = self.release(repo, asset.release_id, viewer, doc)
        return asset, release

    def check_upload(
        self, repo: Repo, release_id: int, viewer: User | None, raw_name: str, request_id: str
    ) -> tuple[Release, str]:
        """The release and the stored name of an upload, or GitHub's refusal."""
        doc = f"{ASSET_DOCS}#upload-a-release-asset"
        self._need_push(viewer, doc)
        with self.lock:
            release = self.release(repo, release_id, viewer, doc)
            if release.immutable:
                raise immutable_refusal("Cannot upload assets to an immutable release.", request_id)
            name = github_asset_name(raw_name)
            if any(a.name == name for a in self.assets(release.id)):
                raise asset_exists(request_id)
        return release, name

    def store_asset(
        self,
        release: Release,
        *,
        uploader: User,
        name: str,
        label: str | None,
        content_type: str,
        data: bytes,
        state: str = "uploaded",
        request_id: str = "",
    ) -> Asset:
        with self.lock:
            if any(a.name == name for a in self.assets(release.id)):
                raise asset_exists(request_id)
            now = self.now()
            asset = Asset(
                id=self._new_id("asset"),
                release_id=release.id,
                name=name,
                label=label,
                state=state,
                content_type=content_type,
                data=data,
                uploader=uploader,
                download_count=0,
                created_at=now,
                updated_at=now,
            )
            self._assets[asset.id] = asset
            return asset

    def update_asset(
        self, repo: Repo, asset_id: int, viewer: User | None, payload: Mapping[str, Any]
    ) -> tuple[Asset, Release]:
        doc = f"{ASSET_DOCS}#update-a-release-asset"
        self._need_push(viewer, doc)
        with self.lock:
            asset, release = self.asset(repo, asset_id, viewer, doc)
            if release.immutable:
                raise immutable_refusal("Cannot update assets of an immutable release.")
            changes: dict[str, Any] = {}
            if isinstance(payload.get("name"), str) and payload["name"]:
                name = github_asset_name(payload["name"])
                if any(a.name == name and a.id != asset.id for a in self.assets(release.id)):
                    raise ApiError(
                        422,
                        {
                            "message": "Validation Failed",
                            "errors": [
                                {
                                    "resource": "ReleaseAsset",
                                    "code": "already_exists",
                                    "field": "name",
                                }
                            ],
                            "documentation_url": doc,
                            "status": "422",
                        },
                    )
                changes["name"] = name
            if "label" in payload:
                changes["label"] = _optional_str(payload["label"])
            updated = replace(asset, updated_at=self.now(), **changes)
            self._assets[asset.id] = updated
            return updated, release

    def delete_asset(self, repo: Repo, asset_id: int, viewer: User | None) -> None:
        doc = f"{ASSET_DOCS}#delete-a-release-asset"
        self._need_push(viewer, doc)
        with self.lock:
            asset, release = self.asset(repo, asset_id, viewer, doc)
            if release.immutable:
                raise immutable_refusal("Cannot delete assets of an immutable release.")
            del self._assets[asset.id]

    def count_download(self, asset_id: int) -> None:
        with self.lock:
            asset = self._assets.get(asset_id)
            if asset is not None:
                self._assets[asset_id] = replace(asset, download_count=asset.download_count + 1)

    def corrupt_storage(self, asset_id: int, data: bytes) -> None:
        """Change an asset's stored bytes while its recorded size and digest stay: what
        the API reports is right, what the download serves is not."""
        with self.lock:
            asset = self._assets[asset_id]
            self._assets[asset_id] = replace(
                asset, data=data, recorded=asset.data if asset.recorded is None else asset.recorded
            )

    def stored_asset(self, asset_id: int) -> Asset | None:
        with self.lock:
            return self._assets.get(asset_id)

    def repo_of_release(self, release: Release) -> Repo:
        with self.lock:
            return next(r for r in self._repos.values() if r.id == release.repo_id)

    def all_releases(self, full_name: str) -> list[Release]:
        """Every release of a repository, drafts included, newest first."""
        with self.lock:
            repo = self._repos.get(full_name.lower())
            if repo is None:
                raise KeyError(f"no repository {full_name!r}; call add_repo first")
        return self.releases(repo, User(login="", id=0, push=True))

    # -- artifact attestations ------------------------------------------------------

    def add_attestation(self, full_name: str, bundle: JsonObject) -> tuple[str, ...]:
        """Register a Sigstore bundle under every sha256 its in-toto statement's subject
        names (as GitHub does on `actions/attest-build-provenance`); the digests."""
        envelope = bundle["dsseEnvelope"]
        statement = json.loads(base64.b64decode(envelope["payload"]))
        digests = tuple(f"sha256:{s['digest']['sha256']}" for s in statement["subject"])
        with self.lock:
            if full_name.lower() not in self._repos:
                raise KeyError(f"no repository {full_name!r}; call add_repo first")
            for digest in digests:
                self._attestations.setdefault((full_name.lower(), digest), []).append(bundle)
        return digests

    def attestations(self, repo: Repo, digest: str) -> list[JsonObject]:
        """GitHub's 404 where the repository holds no attestation for the digest."""
        with self.lock:
            found = list(self._attestations.get((repo.full_name.lower(), digest.lower()), []))
        if not found:
            raise not_found(f"{ATTESTATION_DOCS}#list-attestations")
        return found


def _optional_str(value: object) -> str | None:
    return None if value is None else str(value)
