"""GitHub Releases: one release per tag, assets uploaded to a draft, verified, then published.

The publisher converges: every run finds the release for the tag (drafts included, which
only the release list shows), removes what failed uploads left behind, uploads what is
missing, checks size and sha256 of every asset against what was built, and publishes the
draft only then. A run that stops anywhere can be re-run; it uploads nothing twice.

`stage` does everything but publishing; `commit` publishes. On a release that is already
public, `--replace` never leaves a file's URL without bytes while new bytes upload: the
new asset goes up under a temporary name and is verified in `stage`; `commit` deletes the
old asset and renames the new one straight after (GitHub has no atomic swap; the URL is
without an asset only between those two requests).

Every request goes through release.remote.github's client and its retry policy.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from pathlib import Path

from packaging.utils import canonicalize_name

from release.destinations.decide import (
    Action,
    CompanionDecision,
    FileDecision,
    PublishPlan,
    RemoteFile,
)
from release.errors import ConflictError, PublishError, one_line
from release.fsutil import UnreadableDocument, json_document
from release.inspection.wheel import heaviest
from release.provenance.attestation import attestation_refusal
from release.records.manifest import WheelEntry
from release.records.release_manifest import RELEASE_MANIFEST
from release.records.sdistfile import SDIST_SUFFIX, project_of
from release.remote.github import GITHUB_ASSET_LIMIT, GithubClient
from release.remote.github_model import (
    AssetInfo,
    Reconcile,
    ReleaseInfo,
    RequestStats,
    asset_name_problem,
    download_url,
    json_of,
    message_of,
    parse_asset,
    parse_release,
    web_base,
    web_base_of_release,
)
from release.remote.retry import RetryPolicy
from release.wheelfile import wheel_name_or_none

log = logging.getLogger(__name__)


def staging_name(name: str, sha256: str) -> str:
    """The temporary name new bytes for `name` are uploaded under before the swap."""
    return f"{name}.{sha256[:12]}.part"


MAX_RECORD_BYTES = 1 << 20  # a release-manifest.json read to learn whose release it is


def _project_of(name: str) -> str | None:
    """The project a wheel's or an sdist's file name belongs to, or None for any other
    file (or a name that parses as neither)."""
    if not name.endswith((".whl", SDIST_SUFFIX)):
        return None
    try:
        return project_of(name)
    except ValueError:  # packaging's InvalidSdistFilename, NotAWheel
        return None


class GithubPublisher:
    """The GitHub Releases destination of one repository and tag (see the module doc)."""

    stages = True
    index_url: str | None = None  # the index of GitHub-hosted wheels is the kind's (index)

    def __init__(
        self,
        *,
        repository: str,
        tag: str,
        client: GithubClient,
        name: str = "github",
        target_commitish: str | None = None,
        on_upload: Callable[[str, int], None] | None = None,
    ) -> None:
        """`client` is the command's client of the repository's GitHub
        (release.destinations.reach), shared with the command's other GitHub requests."""
        self.on_upload = on_upload
        owner, _, repo = repository.partition("/")
        if not owner or not repo or "/" in repo:
            raise PublishError(f"GitHub repository {repository!r} is not owner/name")
        self.name = name
        self.repository = repository
        self.tag = tag
        self.api_url = client.api_url
        self.target_commitish = target_commitish
        self.client = client
        self._seen: ReleaseInfo | None = None
        self._held: tuple[str, ...] = ()  # every whole asset of the release, as `existing` read it
        self._foreign: str | None = None  # a file of another project the release holds
        # the wheels asked about that other published releases hold, with their sha256
        self._elsewhere: dict[str, list[tuple[AssetInfo, str | None]]] = {}
        self._other_releases: list[tuple[ReleaseInfo, tuple[AssetInfo, ...]]] | None = None
        self._project = "PROJECT"  # this project's name, as the files asked about say
        self._web: str | None = None  # the web origin GitHub gave the repository's html_url

    def __repr__(self) -> str:
        return (
            f"GithubPublisher(repository={self.repository!r}, tag={self.tag!r}, "
            f"api_url={self.api_url!r})"
        )

    @property
    def policy(self) -> RetryPolicy:
        return self.client.policy

    @property
    def stats(self) -> RequestStats:
        return self.client.stats

    @property
    def where(self) -> str:
        return f"{self.repository}@{self.tag}"

    @property
    def frozen(self) -> str | None:
        seen = self._seen
        if seen is not None and seen.immutable and not seen.draft:
            return f"the release {self.where} is immutable"
        return None

    @property
    def taken(self) -> str | None:
        # a tag two projects of one repository share (sgl-project/whl's v0.1.0): adding to
        # the other's release, or replacing its release-manifest.json, is never this one's
        if self._foreign is None:
            return None
        return (
            f"the release {self.where} is another project's (it holds {self._foreign}): "
            f'give {self.name} a tag of its own (tag: "{self._project}-v{{version}}")'
        )

    # -- Publisher protocol -------------------------------------------------------------

    def existing(self, files: Mapping[str, int], *, rehash: bool = False) -> dict[str, RemoteFile]:
        """The assets of the tag's release named in `files` (name -> the built size)."""
        with self.client.session(self.where):
            release = self.client.find_release(self.repository, self.tag)
            self._seen = release
            self._held = ()
            self._elsewhere = self._held_elsewhere(files)
            if release is None:
                # where the release will be: the host of the repository's web page, which
                # on a GitHub Enterprise Server need not be the API's
                self._web = self.client.repository_web(self.repository)
                return {}
            found: dict[str, RemoteFile] = {}
            ours = {p for name in files if (p := _project_of(name))}
            self._project = min(ours, default="PROJECT")
            assets = self.client.list_assets(self.repository, release)
            self._held = tuple(a.name for a in assets if a.state == "uploaded")
            for asset in assets:
                if self._foreign is None and self._foreign_file(asset, ours):
                    self._foreign = asset.name
                if asset.name not in files:
                    continue
                found[asset.name] = RemoteFile(
                    name=asset.name,
                    size=asset.size,
                    sha256=self._sha256_of(asset, files[asset.name], rehash=rehash),
                    url=asset.browser_download_url,
                    state=asset.state,
                )
            return found

    def _held_elsewhere(
        self, files: Mapping[str, int]
    ) -> dict[str, list[tuple[AssetInfo, str | None]]]:
        """The wheels of `files` that the repository's other published releases hold, each
        with its sha256 (hashed where the size could be the same bytes); the releases are
        listed once a command."""
        wheels = {
            name: (size, parsed)
            for name, size in files.items()
            if (parsed := wheel_name_or_none(name)) is not None
        }
        if not wheels:
            return {}
        if self._other_releases is None:
            self._other_releases = self.client.published_releases(self.repository)
        held: dict[str, list[tuple[AssetInfo, str | None]]] = {}
        for release, assets in self._other_releases:
            for asset in assets:
                # this release's own files are the plan's to weigh (a CONFLICT, which
                # --build-tag publishes as the next build above every one it holds)
                other = wheel_name_or_none(asset.name) if asset.state == "uploaded" else None
                if other is None or release.tag == self.tag:
                    continue
                for name, (size, wheel) in wheels.items():
                    # the same wheel to pip under any spelling, of a build pip ranks level
                    # with ours or above
                    if wheel.is_pip_same(other) and other.build >= wheel.build:
                        sha256 = self._sha256_of(asset, size)
                        held.setdefault(name, []).append((asset, sha256))
        return held

    def _foreign_file(self, asset: AssetInfo, ours: Collection[str]) -> bool:
        """Whether `asset` is another project's: a wheel or sdist of another name, or a
        release-manifest.json naming another project (read: it is small)."""
        if asset.name != RELEASE_MANIFEST or not ours:
            return _project_of(asset.name) not in (None, *ours)
        if asset.state != "uploaded" or asset.size > MAX_RECORD_BYTES:
            return False
        try:
            said = json_document(self.client.download_asset(asset), asset.name)
        except (UnreadableDocument, PublishError):  # not JSON, or unreadable: a file alone
            return False
        project = said.get("project") if isinstance(said, dict) else None
        return isinstance(project, str) and str(canonicalize_name(project)) not in ours

    def held_files(self) -> Collection[str]:
        return self._held

    def held_bytes(self, excluding: Collection[str]) -> int | None:
        """GitHub limits assets, not repositories: a limit set in matrix.yaml counts this
        release's files only."""
        return None

    def refusal(self, entry: WheelEntry, wheel: Path) -> str | None:
        destination = entry.destination
        if destination.kind != "github" or (destination.repository, destination.tag) != (
            self.repository,
            self.tag,
        ):
            return f"belongs to {destination.name}, not the GitHub release {self.where}"
        if self.taken is not None:
            return self.taken
        problem = asset_name_problem(entry.filename) or attestation_refusal(
            wheel, entry.sha256, repository=self.repository
        )
        if problem is not None:
            return problem
        limit = min(destination.max_file_size, GITHUB_ASSET_LIMIT)
        if entry.size > limit:
            weighs = heaviest(entry.device_bytes)
            return f"{entry.size} bytes is over the {limit}-byte limit of {destination.name}" + (
                f" (heaviest device code: {weighs})" if weighs else ""
            )
        # another published release holding other bytes under the name (read by
        # `existing`): the index lists every release's wheels, one file per name, and would
        # have to drop one of the two (the same bytes are listed once)
        for other, sha256 in self._elsewhere.get(entry.filename, ()):
            if sha256 != entry.sha256:
                return one_line(
                    f"{self.repository} already holds other bytes under this name, or one pip "
                    f"takes for it: {other.browser_download_url}, which the index would list "
                    f"beside this one ({self.final_url(entry.filename)}): delete or rename "
                    "that asset, or release a new version"
                )
        return None

    def final_url(self, name: str) -> str:
        web = self._web
        if self._seen is not None:
            web = web_base_of_release(self._seen.html_url, self.repository) or web
        return download_url(web or web_base(self.api_url), self.repository, self.tag, name)

    def apply(self, plan: PublishPlan, dist: Path) -> tuple[FileDecision, ...]:
        """`stage` then `commit`: this destination alone, start to finish."""
        self.stage(plan, dist)
        return self.commit(plan, dist)

    def stage(self, plan: PublishPlan, dist: Path) -> list[str]:
        """The release (a draft if it is new) holds every file of the plan, verified; on a
        public release, replacements wait under temporary names for `commit`."""
        self._refuse_blocked(plan)
        done: list[str] = []
        with self.client.session(self.where, done=done):
            release = self.client.find_release(self.repository, self.tag)
            if release is None:
                release = self._create_draft()
                done.append(f"created the draft release {self.tag}")
            assets = {a.name: a for a in self.client.list_assets(self.repository, release)}
            files = self._files(plan, dist)
            wanted = self._wanted(plan)
            if release.immutable and any(
                a in (Action.UPLOAD, Action.REPLACE) for a in wanted.values()
            ):
                # the plan refuses this; here when the release was published meanwhile
                raise ConflictError(
                    f"the release {self.where} is immutable: files cannot be added or replaced",
                    hint="immutable releases can't change: release a new version",
                )
            for name, action in wanted.items():
                data = files[name]
                current = assets.get(name)
                if action is Action.SKIP and current is not None and current.state == "uploaded":
                    continue
                if current is not None and current.state != "uploaded":
                    self.client.delete_asset(self.repository, current)
                    done.append(f"deleted the leftover ({current.state}) {name}")
                    current = None
                if current is None:
                    assets[name] = self._upload(release, name, data)
                    done.append(f"uploaded {name}")
                    continue
                rehash = action is Action.REPLACE  # the plan found other bytes behind it
                if self._sha256_of(current, len(data), rehash=rehash) == _sha256(data):
                    continue  # a replacement another run finished
                if action is not Action.REPLACE:
                    raise ConflictError(
                        f"{name}: {self.where} holds other bytes under this name "
                        f"(sha256 {(current.sha256 or 'unknown')[:12]}..., built "
                        f"{_sha256(data)[:12]}...)",
                        hint="plan again: --build-tag publishes it as the next build of its "
                        "name, --replace replaces it; or bump the version",
                    )
                if release.draft:  # nobody downloads from a draft: replace in place
                    self.client.delete_asset(self.repository, current)
                    assets[name] = self._upload(release, name, data)
                    done.append(f"replaced {name}")
                else:
                    temporary = staging_name(name, _sha256(data))
                    parked = assets.get(temporary)
                    if parked is None or self._sha256_of(parked, len(data)) != _sha256(data):
                        if parked is not None:
                            self.client.delete_asset(self.repository, parked)
                        assets[temporary] = self._upload(release, temporary, data)
                        done.append(f"uploaded {temporary} to replace {name}")
            self._seen = release
        return done

    def commit(self, plan: PublishPlan, dist: Path) -> tuple[FileDecision, ...]:
        """Swap replacements in, check every file, publish the draft."""
        self._refuse_blocked(plan)
        done: list[str] = []
        with self.client.session(self.where, done=done):
            release = self.client.find_release(self.repository, self.tag)
            if release is None:
                raise PublishError(
                    f"the release {self.where} is gone after staging",
                    hint="re-run `release publish`",
                )
            if release.draft:  # what a failure from here on says was done before it
                done.append("its files uploaded to the draft (not public yet)")
            files = self._files(plan, dist)
            assets = {a.name: a for a in self.client.list_assets(self.repository, release)}
            for name, action in self._wanted(plan).items():
                temporary = assets.get(staging_name(name, _sha256(files[name])))
                if action is Action.REPLACE and temporary is not None:
                    self._swap(assets.get(name), temporary, name)
                    done.append(f"replaced {name}")
            if done:
                assets = {a.name: a for a in self.client.list_assets(self.repository, release)}
            self._check_complete(files, assets)
            if release.draft:
                self._publish(release)
                done.append(f"published {self.tag}")
                release = self.client.get_release(self.repository, release.id)
                assets = {a.name: a for a in self.client.list_assets(self.repository, release)}
            self._seen = release
        return tuple(
            replace(d, url=assets[d.entry.filename].browser_download_url)
            if d.entry.filename in assets
            else d
            for d in plan.decisions
        )

    def companion_urls(self, plan: PublishPlan) -> list[CompanionDecision]:
        """The plan's companions with the URLs they have now (after `commit`)."""
        return [replace(c, url=self.final_url(c.companion.filename)) for c in plan.companions]

    # -- steps of a run -----------------------------------------------------------------

    def _refuse_blocked(self, plan: PublishPlan) -> None:
        if not plan.blocked:
            return
        conflicts = [d.entry.filename for d in plan.with_action(Action.CONFLICT)]
        conflicts += [c.companion.filename for c in plan.companions_with(Action.CONFLICT)]
        refused = [d.entry.filename for d in plan.with_action(Action.REFUSED)]
        error = ConflictError if conflicts else PublishError
        raise error(
            f"refusing to publish to {self.where}: the plan is blocked by "
            + ", ".join(conflicts + refused),
            hint="resolve the conflicts (--build-tag, or --replace) and the refusals, then plan "
            "again",
        )

    @staticmethod
    def _wanted(plan: PublishPlan) -> dict[str, Action]:
        keep = (Action.UPLOAD, Action.SKIP, Action.REPLACE)
        wanted = {d.entry.filename: d.action for d in plan.decisions if d.action in keep}
        wanted.update({c.companion.filename: c.action for c in plan.companions if c.action in keep})
        return wanted

    @staticmethod
    def _files(plan: PublishPlan, dist: Path) -> dict[str, bytes]:
        """The bytes of every file of the plan, checked against what was built."""
        files: dict[str, bytes] = {}
        for decision in plan.decisions:
            entry = decision.entry
            path = dist / entry.filename
            try:
                data = path.read_bytes()
            except OSError as error:
                raise PublishError(f"cannot read {path}: {error.strerror}") from None
            if len(data) != entry.size or _sha256(data) != entry.sha256:
                raise PublishError(
                    f"{path} is not the file in the manifest (size or sha256 differs)",
                    hint="rebuild with `release build`, or restore the dist directory",
                )
            files[entry.filename] = data
        for companion in plan.companions:
            files[companion.companion.filename] = companion.companion.data
        return files

    def _sha256_of(self, asset: AssetInfo, size: int, *, rehash: bool = False) -> str | None:
        """The asset's sha256: its digest, or (where the server reports none, or `rehash`,
        and the size matches, so that the bytes could be the same) its bytes' hash."""
        if asset.state != "uploaded" or asset.size != size:
            return asset.sha256
        if asset.sha256 is not None and not rehash:
            return asset.sha256
        return self.client.asset_sha256(asset, trust_digest=False)

    def _check_complete(self, files: Mapping[str, bytes], assets: Mapping[str, AssetInfo]) -> None:
        bad = []
        for name, data in files.items():
            asset = assets.get(name)
            if asset is None:
                bad.append(f"{name} is missing")
            elif asset.state != "uploaded" or self._sha256_of(asset, len(data)) != _sha256(data):
                bad.append(f"{name} does not match what was built")
        if bad:
            raise PublishError(
                f"{self.where} is incomplete after uploading: " + "; ".join(bad),
                hint="re-run `release publish`; it uploads what is missing",
            )

    def _create_draft(self) -> ReleaseInfo:
        def attempt(retry: int) -> ReleaseInfo:
            if retry:
                found = self.client.find_release(self.repository, self.tag)
                if found is not None:
                    log.info("the release %s exists after all; using it", self.tag)
                    return found
            log.info("creating the draft release %s on %s", self.tag, self.repository)
            response = self.client.create_release(
                self.repository, self.tag, draft=True, target_commitish=self.target_commitish
            )
            if response.status_code == 422:
                if "already_exists" not in message_of(response):
                    raise PublishError(
                        f"GitHub refused to create the release {self.where}: "
                        + self.client.scrub(message_of(response)),
                        hint="check the tag template in matrix.yaml",
                    )
                raise Reconcile("a release with this tag appeared meanwhile")
            return parse_release(json_of(response, what := f"create the release {self.tag}"), what)

        return self.client.retrying(f"create the release {self.tag}", attempt)

    def _publish(self, release: ReleaseInfo) -> ReleaseInfo:
        def attempt(retry: int) -> ReleaseInfo:
            if retry:
                current = self.client.get_release(self.repository, release.id)
                if not current.draft:
                    return current
            log.info("publishing the release %s", self.tag)
            response = self.client.update_release(self.repository, release.id, draft=False)
            if response.status_code == 422:
                raise PublishError(
                    f"GitHub refused to publish {self.where}: "
                    + self.client.scrub(message_of(response)),
                    hint="another published release has this tag; delete one of them",
                )
            return parse_release(json_of(response, what := f"publish the release {self.tag}"), what)

        return self.client.retrying(f"publish the release {self.tag}", attempt)

    def _asset_named(self, release: ReleaseInfo, name: str) -> AssetInfo | None:
        assets = self.client.list_assets(self.repository, release)
        return next((a for a in assets if a.name == name), None)

    def _upload(self, release: ReleaseInfo, name: str, data: bytes) -> AssetInfo:
        digest = _sha256(data)

        def attempt(retry: int) -> AssetInfo:
            if retry:
                current = self._asset_named(release, name)
                if (
                    current is not None
                    and current.state == "uploaded"
                    and self._sha256_of(current, len(data)) == digest
                ):
                    log.info("%s was stored by the failed attempt; not sending it again", name)
                    return current
                if current is not None and current.state == "uploaded":
                    raise ConflictError(
                        f"{name}: another upload to {self.where} stored other bytes under "
                        "this name meanwhile",
                        hint="make sure one publish runs at a time, then re-run",
                    )
                if current is not None:
                    self.client.delete_asset(self.repository, current)
            log.info("uploading %s (%d bytes) to %s", name, len(data), self.tag)
            response = self.client.upload_asset(release, name, data)
            if response.status_code == 422:
                raise Reconcile(f"GitHub already has an asset named {name}")
            asset = parse_asset(json_of(response, what := f"upload {name}"), what)
            if asset.name != name:
                raise PublishError(
                    f"GitHub stored {name} as {asset.shown}",
                    hint="rename the wheel to letters, digits and ._+- only",
                )
            if asset.size != len(data) or asset.sha256 not in (None, digest):
                self.client.delete_asset(self.repository, asset)
                raise Reconcile(
                    f"GitHub stored {asset.size} bytes of {name} with another digest", after=None
                )
            return asset

        stored = self.client.retrying(f"upload {name}", attempt)
        if self.on_upload is not None:
            self.on_upload(name, len(data))
        return stored

    def _swap(self, old: AssetInfo | None, new: AssetInfo, name: str) -> None:
        """Delete `old` and give `new` its name, one request straight after the other."""
        if old is not None:
            self.client.delete_asset(self.repository, old)

        def attempt(retry: int) -> None:
            response = self.client.rename_asset(self.repository, new, name)
            if response.status_code == 422:
                raise Reconcile(f"GitHub still has an asset named {name}")

        self.client.retrying(f"rename {new.name} to {name}", attempt)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
