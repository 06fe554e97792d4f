"""One `release publish`: plan every destination (read-only), then apply, then the index.

Order matters and is the whole point of this module:
1. read the manifest(s) in `--dist` and check the wheels beside them are the built bytes;
2. plan EVERY destination with read-only requests and show the plan;
3. stop, having uploaded nothing, if any file anywhere is a CONFLICT or refused;
4. apply destination by destination; write `<dist>/published.json` after each;
5. regenerate the index from the full set of wheels on the GitHub releases (never append).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from release.dist import load_dist
from release.errors import ConfigError, ConflictError, PublishError
from release.fsutil import sha256_file, write_atomic
from release.manifest import DestinationRef, Manifest, WheelEntry
from release.publish.base import Action, FileDecision, Publisher, PublishPlan, plan_for
from release.publish.github import GithubPublisher
from release.publish.index import IndexFile, commit_pages, render_index, write_index
from release.publish.pypi import PypiPublisher, mask, read_wheel, secret_values

log = logging.getLogger("release.publish")

RECORD_NAME = "published.json"
RECORD_SCHEMA = 1


@dataclass(frozen=True, kw_only=True)
class PublishSettings:
    dist: Path
    dry_run: bool = False
    replace: bool = False
    only: tuple[str, ...] = ()
    repository_url: str | None = None
    index_dir: Path | None = None
    index_base_url: str | None = None
    github_api_url: str | None = None
    pages_repo: Path | None = None
    pages_branch: str | None = None
    pages_remote: str | None = None


@dataclass(frozen=True, kw_only=True)
class DestinationPlan:
    destination: DestinationRef
    plan: PublishPlan


@dataclass(frozen=True, kw_only=True)
class IndexOutcome:
    label: str
    url: str | None  # where pip finds it: <index base>/<label>/
    directory: Path
    files: tuple[IndexFile, ...]


@dataclass(frozen=True, kw_only=True)
class PublishOutcome:
    manifest: Manifest
    plans: tuple[DestinationPlan, ...]
    applied: tuple[FileDecision, ...] = ()
    indexes: tuple[IndexOutcome, ...] = ()
    record: Path | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def blocked(self) -> bool:
        return any(p.plan.blocked for p in self.plans)


PublisherFactory = Callable[[DestinationRef], Publisher]


# --- Reading the release artifact. ---


def local_problem(entry: WheelEntry, wheel: Path) -> str | None:
    """Why the file in dist is not the one the manifest records, if it is not."""
    if not wheel.is_file():
        return f"{wheel} is missing (the manifest lists it)"
    size = wheel.stat().st_size
    if size != entry.size:
        return f"{wheel.name} is {size} bytes, the manifest says {entry.size}"
    digest = sha256_file(wheel)
    if digest != entry.sha256:
        return f"{wheel.name} has sha256 {digest[:12]}..., the manifest says {entry.sha256[:12]}..."
    return None


def select(manifest: Manifest, only: Sequence[str]) -> dict[str, list[WheelEntry]]:
    """The manifest's wheels by destination name, filtered by `--only` (a kind or a name)."""
    groups: dict[str, list[WheelEntry]] = {}
    for entry in sorted(manifest.wheels, key=lambda w: w.filename):
        groups.setdefault(entry.destination.name, []).append(entry)
    if not only:
        return groups
    known = set(groups) | {e[0].destination.kind for e in groups.values()}
    unknown = [o for o in only if o not in known]
    if unknown:
        raise ConfigError(
            [f"--only {o}: no destination or kind of that name" for o in unknown],
            hint=f"the manifest has: {', '.join(sorted(known))}",
        )
    return {
        name: entries
        for name, entries in groups.items()
        if name in only or entries[0].destination.kind in only
    }


# --- Planning. ---


def plan_destination(
    publisher: Publisher, entries: Sequence[WheelEntry], dist: Path, *, replace: bool
) -> PublishPlan:
    """The destination's plan, with files that are not what was built refused up front."""
    kind = entries[0].destination.kind
    # PyPI never takes other bytes under a used filename: --replace cannot apply there.
    plan = plan_for(publisher, entries, dist, replace=replace and kind != "pypi")
    decisions = []
    for decision in plan.decisions:
        problem = local_problem(decision.entry, dist / decision.entry.filename)
        decisions.append(
            decision if problem is None else replace_decision(decision, Action.REFUSED, problem)
        )
    return PublishPlan(decisions=tuple(decisions))


def replace_decision(decision: FileDecision, action: Action, reason: str) -> FileDecision:
    return replace(decision, action=action, reason=reason)


def build_plans(
    manifest: Manifest, settings: PublishSettings, factory: PublisherFactory
) -> tuple[tuple[DestinationPlan, ...], dict[str, Publisher]]:
    plans = []
    publishers: dict[str, Publisher] = {}
    for name, entries in select(manifest, settings.only).items():
        destination = entries[0].destination
        publisher = factory(destination)
        publishers[name] = publisher
        plan = plan_destination(publisher, entries, settings.dist, replace=settings.replace)
        plans.append(DestinationPlan(destination=destination, plan=plan))
    return tuple(plans), publishers


def blocked_error(plans: Sequence[DestinationPlan]) -> PublishError:
    conflicts = [d for p in plans for d in p.plan.with_action(Action.CONFLICT)]
    refused = [d for p in plans for d in p.plan.with_action(Action.REFUSED)]
    parts = []
    if conflicts:
        parts.append(f"{len(conflicts)} CONFLICT")
    if refused:
        parts.append(f"{len(refused)} refused")
    message = f"{' and '.join(parts)}: nothing was uploaded"
    if conflicts:
        return ConflictError(
            message,
            hint="a destination holds other bytes under the same filename; bump the version, "
            "or pass --replace to overwrite GitHub assets (PyPI never allows it)",
        )
    return PublishError(message, hint="fix the refused files (reasons above) and rebuild")


# --- The index of the GitHub-hosted variants. ---


def _github_get(client: httpx.Client, url: str, token: str | None) -> httpx.Response:
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return client.get(url, headers=headers)


def release_wheels(
    destination: DestinationRef,
    *,
    api_url: str,
    token: str | None,
    client: httpx.Client,
    project: str,
    known: Mapping[str, IndexFile],
) -> list[IndexFile]:
    """Every wheel with a local label on every published release of the repository: the
    full set the index is regenerated from. `known` supplies what the manifest knows (its
    Requires-Python) about files built in this run."""
    url: str | None = f"{api_url.rstrip('/')}/repos/{destination.repository}/releases?per_page=100"
    secrets = (token,) if token else ()
    releases: list[dict[str, Any]] = []
    while url:
        response = _github_get(client, url, token)
        if response.status_code != 200:
            raise PublishError(
                f"cannot list the releases of {destination.repository}: HTTP "
                f"{response.status_code} {mask(response.text[:200], secrets)}",
                hint="check GITHUB_TOKEN and --github-api-url",
            )
        releases.extend(response.json())
        url = response.links.get("next", {}).get("url")
    files: dict[str, IndexFile] = {}
    for release in releases:
        if release.get("draft"):
            continue
        assets = {a["name"]: a for a in release.get("assets", []) if a.get("state") == "uploaded"}
        for name, asset in sorted(assets.items()):
            try:
                dist_name, version, _, _ = parse_wheel_filename(name)
            except InvalidWheelFilename:
                continue
            if canonicalize_name(dist_name) != canonicalize_name(project) or not version.local:
                continue
            digest = asset.get("digest") or ""
            sha256 = digest.removeprefix("sha256:") if digest.startswith("sha256:") else None
            if sha256 is None:
                sha256 = _download_sha256(client, asset["browser_download_url"])
            sidecar = assets.get(f"{name}.metadata")
            metadata_digest = (sidecar or {}).get("digest") or ""
            previous = known.get(name)
            files[name] = IndexFile(
                filename=name,
                url=asset["browser_download_url"],
                sha256=sha256,
                size=asset.get("size"),
                requires_python=previous.requires_python if previous else None,
                metadata_sha256=metadata_digest.removeprefix("sha256:") or None,
            )
    return list(files.values())


def _download_sha256(client: httpx.Client, url: str) -> str:
    digest = hashlib.sha256()
    with client.stream("GET", url, follow_redirects=True) as response:
        if response.status_code != 200:
            raise PublishError(f"{url}: HTTP {response.status_code} while hashing it for the index")
        for chunk in response.iter_bytes():
            digest.update(chunk)
    return digest.hexdigest()


def index_base(destination: DestinationRef, settings: PublishSettings) -> str | None:
    base = settings.index_base_url or destination.index_url
    return None if base is None else base.rstrip("/") + "/"


# --- The publish record. ---


def record_entry(decision: FileDecision, index_url: str | None) -> dict[str, Any]:
    entry = decision.entry
    return {
        "filename": entry.filename,
        "cell": entry.cell,
        "arch": entry.arch,
        "local_label": entry.local_label,
        "sha256": entry.sha256,
        "size": entry.size,
        "destination": entry.destination.name,
        "kind": entry.destination.kind,
        "url": decision.url,
        "index_url": index_url,
    }


def write_record(
    path: Path, manifest: Manifest, files: Sequence[dict[str, Any]], secrets: Sequence[str]
) -> None:
    """`published.json`: merged with an earlier record (another `--only` run), by filename."""
    previous: dict[str, Any] = {}
    if path.exists():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        if (
            isinstance(data, dict)
            and (data.get("project"), data.get("version")) == (manifest.project, manifest.version)
            and isinstance(data.get("files"), list)
        ):
            previous = {
                f["filename"]: f
                for f in data["files"]
                if isinstance(f, dict) and isinstance(f.get("filename"), str)
            }
    previous.update({f["filename"]: f for f in files})
    record = {
        "schema": RECORD_SCHEMA,
        "project": manifest.project,
        "version": manifest.version,
        "files": [previous[name] for name in sorted(previous)],
    }
    text = mask(json.dumps(record, indent=2) + "\n", secrets)
    write_atomic(path, text.encode())


def index_url_for(
    entry: WheelEntry, settings: PublishSettings, pypi_index: str | None
) -> str | None:
    if entry.destination.kind == "pypi":
        return pypi_index
    base = index_base(entry.destination, settings)
    if base is None or entry.local_label is None:
        return None
    return f"{base}{entry.local_label}/"


# --- The whole command. ---


def default_factory(
    settings: PublishSettings, environ: Mapping[str, str], client: httpx.Client
) -> PublisherFactory:
    def make(destination: DestinationRef) -> Publisher:
        if destination.kind == "pypi":
            return PypiPublisher(
                destination,
                environ=environ,
                repository_url=settings.repository_url,
                client=client,
            )
        token = environ.get("GITHUB_TOKEN") or environ.get("GH_TOKEN")
        if not token:
            raise PublishError(
                f"{destination.name}: no GITHUB_TOKEN in the environment",
                hint="export GITHUB_TOKEN (a workflow job: permissions: contents: write)",
            )
        return GithubPublisher(
            repository=destination.repository or "",
            tag=destination.tag or "",
            api_url=settings.github_api_url or destination.api_url or "https://api.github.com",
            token=token,
            name=destination.name,
        )

    return make


def publish(
    settings: PublishSettings,
    environ: Mapping[str, str],
    *,
    factory: PublisherFactory | None = None,
    client: httpx.Client | None = None,
    show_plan: Callable[[PublishOutcome], None] | None = None,
) -> PublishOutcome:
    """Plan, check, apply, index. Raises ConflictError/PublishError when blocked (after the
    plan was shown) or when a destination fails; a re-run finishes what is missing."""
    manifest = load_dist(settings.dist)
    own_client = client is None
    http = client or httpx.Client(timeout=60.0, follow_redirects=True)
    try:
        make = factory or default_factory(settings, environ, http)
        plans, publishers = build_plans(manifest, settings, make)
        outcome = PublishOutcome(manifest=manifest, plans=plans)
        if show_plan is not None:
            show_plan(outcome)
        if outcome.blocked:
            raise blocked_error(plans)
        if settings.dry_run:
            return outcome
        return _apply(outcome, settings, environ, publishers, http)
    finally:
        if own_client:
            http.close()


def _apply(
    outcome: PublishOutcome,
    settings: PublishSettings,
    environ: Mapping[str, str],
    publishers: Mapping[str, Publisher],
    client: httpx.Client,
) -> PublishOutcome:
    secrets = secret_values(environ)
    record_path = settings.dist / RECORD_NAME
    applied: list[FileDecision] = []
    notes: list[str] = []
    for item in outcome.plans:
        publisher = publishers[item.destination.name]
        if isinstance(publisher, PypiPublisher) and item.plan.with_action(Action.UPLOAD):
            notes.append(f"{publisher.name}: credentials from {publisher.credentials().source}")
        done = publisher.apply(item.plan, settings.dist)
        applied.extend(done)
        pypi_index = publisher.index_url if isinstance(publisher, PypiPublisher) else None
        write_record(
            record_path,
            outcome.manifest,
            [record_entry(d, index_url_for(d.entry, settings, pypi_index)) for d in done],
            secrets,
        )
    indexes = _regenerate_indexes(outcome, settings, environ, client, applied)
    return replace(
        outcome, applied=tuple(applied), indexes=indexes, record=record_path, notes=tuple(notes)
    )


def _regenerate_indexes(
    outcome: PublishOutcome,
    settings: PublishSettings,
    environ: Mapping[str, str],
    client: httpx.Client,
    applied: Sequence[FileDecision],
) -> tuple[IndexOutcome, ...]:
    github = [p.destination for p in outcome.plans if p.destination.kind == "github"]
    if not github:
        return ()
    known = {
        d.entry.filename: IndexFile(
            filename=d.entry.filename,
            url=d.url,
            sha256=d.entry.sha256,
            requires_python=read_wheel(settings.dist / d.entry.filename).requires_python,
        )
        for d in applied
    }
    token = environ.get("GITHUB_TOKEN") or environ.get("GH_TOKEN")
    files: dict[str, IndexFile] = {}
    seen: set[tuple[str, str | None]] = set()
    for destination in github:
        key = (destination.repository or "", destination.api_url)
        if key in seen:
            continue
        seen.add(key)
        api_url = settings.github_api_url or destination.api_url or "https://api.github.com"
        for file in release_wheels(
            destination,
            api_url=api_url,
            token=token,
            client=client,
            project=outcome.manifest.project,
            known=known,
        ):
            files[file.filename] = file
    try:
        tree = render_index(list(files.values()))
    except ValueError as error:
        raise PublishError(f"cannot build the index: {error}") from None
    directory = settings.index_dir or settings.dist / "index"
    write_index(tree, directory)
    if settings.pages_branch:
        commit_pages(
            directory,
            repo=settings.pages_repo or Path.cwd(),
            branch=settings.pages_branch,
            message=f"index for {outcome.manifest.project} {outcome.manifest.version}",
            environ=environ,
            push_remote=settings.pages_remote,
        )
    base = index_base(github[0], settings)
    labels = sorted({f.label or "" for f in files.values()})
    return tuple(
        IndexOutcome(
            label=label,
            url=f"{base}{label}/" if base else None,
            directory=directory / label,
            files=tuple(sorted((f for f in files.values() if f.label == label), key=_name)),
        )
        for label in labels
    )


def _name(file: IndexFile) -> str:
    return file.filename
