"""The PyPI publisher: refusal checks read from the wheel, existence by sha256, twine uploads.

PyPI takes the default variant only. Everything PyPI would reject is refused before any
upload (`pypi_refusals`, pure, over `WheelFacts` read from the zip, plus `twine check
--strict`). Whether a file already exists is decided by the sha256 the index lists (PEP 691
JSON, falling back to PEP 503 HTML as pypiserver serves it), never by `twine upload
--skip-existing`, which counts "already exists" with other bytes as success. Uploads go
through `python -m twine upload`, one file at a time, with credentials in the environment
(never argv); each upload is re-checked against the index, and a 400/409 "already exists"
counts as success only when the index then shows the same sha256.
"""

from __future__ import annotations

import email.parser
import logging
import re
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

import httpx
from packaging.metadata import ExceptionGroup as MetadataErrors
from packaging.metadata import InvalidMetadata, Metadata
from packaging.utils import (
    InvalidWheelFilename,
    canonicalize_name,
    parse_wheel_filename,
)

from release.errors import ConflictError, PublishError
from release.manifest import DestinationRef, WheelEntry
from release.publish.base import Action, FileDecision, PublishPlan, RemoteFile
from release.publish.index import ACCEPT, ListedFile, parse_project_page, project_page_url

log = logging.getLogger("release.publish.pypi")

SECRET_VARIABLES = (
    "TWINE_PASSWORD",
    "TWINE_API_KEY",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
)
TOKEN_USERNAME = "__token__"  # noqa: S105  # PyPI's fixed username for API tokens

# PyPI's platform tag allow-list (warehouse/forklift/legacy.py), as of 2026-11.
_ALLOWED_PLATFORMS = frozenset(
    {
        "any",
        "win32",
        "win_amd64",
        "win_arm64",
        "win_ia64",
        "manylinux1_x86_64",
        "manylinux1_i686",
        "manylinux2010_x86_64",
        "manylinux2010_i686",
        "manylinux2014_x86_64",
        "manylinux2014_i686",
        "manylinux2014_aarch64",
        "manylinux2014_armv7l",
        "manylinux2014_ppc64",
        "manylinux2014_ppc64le",
        "manylinux2014_s390x",
        "linux_armv6l",
        "linux_armv7l",
    }
)
_MANYLINUX_ARCHES = frozenset(
    {"x86_64", "i686", "aarch64", "armv7l", "ppc64", "ppc64le", "s390x", "riscv64"}
)
_PLATFORM_PATTERNS = (
    re.compile(
        r"macosx_\d+_\d+_(arm64|x86_64|i386|ppc|ppc64|intel|fat|fat3|fat64|universal|universal2)"
    ),
    re.compile(r"(many|musl)linux_\d+_\d+_(?P<arch>[a-z0-9_]+)"),
    re.compile(r"ios_\d+_\d+_(arm64|x86_64)_(iphoneos|iphonesimulator)"),
    re.compile(r"android_\d+_(armeabi_v7a|arm64_v8a|x86|x86_64)"),
)


def platform_allowed(platform: str) -> bool:
    """Whether PyPI accepts a wheel with this platform tag."""
    if platform in _ALLOWED_PLATFORMS:
        return True
    for pattern in _PLATFORM_PATTERNS:
        match = pattern.fullmatch(platform)
        if match:
            arch = match.groupdict().get("arch")
            return arch is None or arch in _MANYLINUX_ARCHES
    return False


# --- Reading the wheel. ---


@dataclass(frozen=True, kw_only=True)
class WheelFacts:
    """What PyPI looks at in a wheel, read from the file on disk."""

    size: int
    unreadable: str | None = None  # why the file could not be read as a zip
    metadata_name: str | None = None
    metadata_version: str | None = None
    has_metadata: bool = False
    has_record: bool = False
    has_wheel_file: bool = False
    metadata_problems: tuple[str, ...] = ()
    requires_python: str | None = None
    metadata: bytes | None = None  # the METADATA file's bytes (PEP 658 sidecar)


def read_wheel(path: Path) -> WheelFacts:
    try:
        size = path.stat().st_size
    except OSError as error:
        return WheelFacts(size=0, unreadable=f"cannot read {path.name}: {error.strerror}")
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            tops = {n.split("/", 1)[0] for n in names}
            dist_infos = {top for top in tops if top.endswith(".dist-info")}
            if len(dist_infos) != 1:
                return WheelFacts(
                    size=size, unreadable=f"has {len(dist_infos)} .dist-info directories, not 1"
                )
            dist_info = dist_infos.pop()
            present = set(names)
            has_metadata = f"{dist_info}/METADATA" in present
            metadata = archive.read(f"{dist_info}/METADATA") if has_metadata else None
            facts = WheelFacts(
                size=size,
                has_metadata=has_metadata,
                has_record=f"{dist_info}/RECORD" in present,
                has_wheel_file=f"{dist_info}/WHEEL" in present,
                metadata=metadata,
            )
    except (zipfile.BadZipFile, OSError) as error:
        return WheelFacts(size=size, unreadable=f"not a readable zip file ({error})")
    if metadata is None:
        return facts
    headers = email.parser.BytesParser().parsebytes(metadata, headersonly=True)
    problems: list[str] = []
    try:
        Metadata.from_email(metadata, validate=True)
    except InvalidMetadata as error:
        problems.append(str(error))
    except MetadataErrors as group:
        problems.extend(str(e) for e in group.exceptions)
    return WheelFacts(
        size=facts.size,
        has_metadata=True,
        has_record=facts.has_record,
        has_wheel_file=facts.has_wheel_file,
        metadata=metadata,
        metadata_name=headers.get("Name"),
        metadata_version=headers.get("Version"),
        metadata_problems=tuple(problems),
        requires_python=headers.get("Requires-Python"),
    )


def pypi_refusals(filename: str, facts: WheelFacts, *, max_file_size: int) -> list[str]:
    """Every reason PyPI would reject this file at upload. Pure."""
    try:
        name, version, _, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename as error:
        return [f"not a valid wheel filename ({error})"]
    reasons = []
    if version.local is not None:
        reasons.append(f"local version {version} (PyPI accepts no local versions)")
    bad = sorted({t.platform for t in tags if not platform_allowed(t.platform)})
    if bad:
        reasons.append(f"platform tag {', '.join(bad)} is not on PyPI's allow-list")
    if facts.size > max_file_size:
        reasons.append(
            f"{facts.size / 2**20:.1f} MiB is over the {max_file_size / 2**20:.0f} MiB file "
            "limit (raise `max-file-size-mib` if PyPI raised the project's limit)"
        )
    if facts.unreadable:
        reasons.append(facts.unreadable)
        return reasons
    if not facts.has_metadata:
        reasons.append("no METADATA in the .dist-info")
    if not facts.has_record:
        reasons.append("no RECORD in the .dist-info")
    if not facts.has_wheel_file:
        reasons.append("no WHEEL in the .dist-info")
    if facts.has_metadata:
        if facts.metadata_name is None or canonicalize_name(facts.metadata_name) != name:
            reasons.append(f"METADATA Name {facts.metadata_name!r} does not match the filename")
        if facts.metadata_version != str(version):
            reasons.append(
                f"METADATA Version {facts.metadata_version!r} does not match "
                f"the filename's {version}"
            )
        reasons.extend(f"invalid METADATA: {p}" for p in facts.metadata_problems)
    return reasons


# --- Processes and secrets. ---


def secret_values(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The values that must never be printed, logged or put into an exception."""
    return tuple(v for k in SECRET_VARIABLES if len(v := environ.get(k, "")) >= 4)


def mask(text: str, secrets: Sequence[str]) -> str:
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    # credentials written into a URL (https://user:pass@host/) never leave either
    return re.sub(r"(?<=://)[^/@\s:]+:[^/@\s]+@", "***@", text)


@dataclass(frozen=True, kw_only=True)
class ProcessResult:
    returncode: int
    output: str  # stdout and stderr together, secrets already masked


class Runner(Protocol):
    def __call__(
        self, cmd: Sequence[str], *, env: Mapping[str, str], secrets: Sequence[str]
    ) -> ProcessResult: ...


def run_process(
    cmd: Sequence[str], *, env: Mapping[str, str], secrets: Sequence[str]
) -> ProcessResult:
    """Run a command with output captured; log it and return its output with secrets masked."""
    log.info("run: %s", mask(" ".join(cmd), secrets))
    proc = subprocess.run(
        list(cmd),
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        check=False,
    )
    output = mask(proc.stdout or "", secrets)
    log.debug("exit %d: %s", proc.returncode, output)
    return ProcessResult(returncode=proc.returncode, output=output)


def tail(text: str, lines: int = 3) -> str:
    kept = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " | ".join(kept[-lines:]) or "(no output)"


# --- Credentials. ---


@dataclass(frozen=True, kw_only=True)
class Credentials:
    """How twine will authenticate, described without the secret itself."""

    env: Mapping[str, str]  # TWINE_* to pass to twine
    source: str  # for the user: "TWINE_API_KEY", "trusted publishing", ...

    def __repr__(self) -> str:
        return f"Credentials(source={self.source!r})"


def credentials(environ: Mapping[str, str], repository_url: str) -> Credentials | None:
    """Twine's credentials from the environment, or None when there are none."""
    if environ.get("TWINE_API_KEY"):
        return Credentials(
            env={"TWINE_USERNAME": TOKEN_USERNAME, "TWINE_PASSWORD": environ["TWINE_API_KEY"]},
            source="TWINE_API_KEY",
        )
    if environ.get("TWINE_PASSWORD"):
        return Credentials(
            env={
                "TWINE_USERNAME": environ.get("TWINE_USERNAME") or TOKEN_USERNAME,
                "TWINE_PASSWORD": environ["TWINE_PASSWORD"],
            },
            source="TWINE_USERNAME/TWINE_PASSWORD",
        )
    in_actions = environ.get("GITHUB_ACTIONS") == "true"
    host = urlsplit(repository_url).hostname or ""
    if in_actions and environ.get("ACTIONS_ID_TOKEN_REQUEST_URL") and host.endswith("pypi.org"):
        # twine (6.1+) mints a short-lived token from the Actions OIDC token itself
        return Credentials(env={"TWINE_USERNAME": TOKEN_USERNAME}, source="trusted publishing")
    return None


def basic_auth(environ: Mapping[str, str], repository_url: str) -> httpx.BasicAuth | None:
    """HTTP basic auth from the twine credentials, for reading a private index."""
    found = credentials(environ, repository_url)
    if found is None or "TWINE_PASSWORD" not in found.env:
        return None
    return httpx.BasicAuth(found.env["TWINE_USERNAME"], found.env["TWINE_PASSWORD"])


def default_index_url(repository_url: str) -> str:
    """The simple index that lists what `repository_url` accepted."""
    parts = urlsplit(repository_url)
    if parts.hostname == "upload.pypi.org":
        return "https://pypi.org/simple/"
    if parts.hostname == "test.pypi.org":
        return "https://test.pypi.org/simple/"
    path = parts.path.rstrip("/")
    path = path.removesuffix("/legacy")
    return urlunsplit((parts.scheme, parts.netloc, f"{path}/simple/", "", ""))


# --- The publisher. ---


class PypiPublisher:
    """A PyPI-compatible destination (PyPI, TestPyPI, pypiserver) behind the publisher seam."""

    def __init__(
        self,
        destination: DestinationRef,
        *,
        environ: Mapping[str, str],
        repository_url: str | None = None,
        index_url: str | None = None,
        client: httpx.Client | None = None,
        runner: Runner = run_process,
        python: str = sys.executable,
        twine_check: bool = True,
        sleep: Callable[[float], None] = time.sleep,
        propagation_attempts: int = 6,
    ) -> None:
        self.name = destination.name
        self.destination = destination
        self.repository_url = (
            repository_url or destination.repository_url or "https://upload.pypi.org/legacy/"
        )
        if index_url:
            self.index_url = index_url
        elif repository_url:
            self.index_url = default_index_url(repository_url)
        else:
            self.index_url = destination.index_url or default_index_url(self.repository_url)
        self.environ = environ
        self.secrets = secret_values(environ)
        self.client = client or httpx.Client(timeout=30.0, follow_redirects=True)
        self.runner = runner
        self.python = python
        self.twine_check = twine_check
        self.sleep = sleep
        self.propagation_attempts = propagation_attempts
        self._facts: dict[Path, WheelFacts] = {}

    # - read-only -

    def listed(self, project: str) -> dict[str, ListedFile]:
        """The project page of the index: every file it lists, by filename."""
        url = project_page_url(self.index_url, project)
        last = ""
        auth: httpx.BasicAuth | None = None
        for attempt in range(4):
            try:
                response = self.client.get(url, headers={"Accept": ACCEPT}, auth=auth)
            except httpx.HTTPError as error:
                last = f"{type(error).__name__}: {error}"
            else:
                if response.status_code == 401 and auth is None:
                    # a private index (pypiserver -a list): read it with the upload credentials
                    auth = basic_auth(self.environ, self.repository_url)
                    if auth is not None:
                        continue
                if response.status_code == 404:
                    return {}
                if response.status_code == 200:
                    try:
                        return parse_project_page(
                            response.content, response.headers.get("content-type", ""), url
                        )
                    except ValueError as error:
                        raise PublishError(f"{url}: unreadable index page: {error}") from None
                last = f"HTTP {response.status_code}"
                if response.status_code < 500:
                    break
            self.sleep(0.5 * 2**attempt)
        refused = last in ("HTTP 401", "HTTP 403")
        raise PublishError(
            f"cannot read the index {mask(url, self.secrets)}: {mask(last, self.secrets)}",
            hint="the index refused the credentials: check TWINE_API_KEY / TWINE_PASSWORD"
            if refused
            else "check --repository-url and that the index is reachable",
        )

    def existing(self, entries: Sequence[WheelEntry]) -> Mapping[str, RemoteFile]:
        out: dict[str, RemoteFile] = {}
        for project in sorted({canonicalize_name(_project(e)) for e in entries}):
            out.update({name: f.remote for name, f in self.listed(project).items()})
        return out

    def facts(self, wheel: Path) -> WheelFacts:
        if wheel not in self._facts:
            self._facts[wheel] = read_wheel(wheel)
        return self._facts[wheel]

    def refusal(self, entry: WheelEntry, wheel: Path) -> str | None:
        reasons = pypi_refusals(
            entry.filename, self.facts(wheel), max_file_size=self.destination.max_file_size
        )
        if not reasons and self.twine_check:
            check = self.runner(
                [self.python, "-m", "twine", "--no-color", "check", "--strict", str(wheel)],
                env=_plain_env(self.environ),
                secrets=self.secrets,
            )
            if check.returncode != 0:
                reasons.append(f"twine check --strict: {_twine_reason(check.output)}")
        return "; ".join(reasons) or None

    def final_url(self, entry: WheelEntry) -> str:
        host = urlsplit(self.index_url).hostname
        project = canonicalize_name(_project(entry))
        python_tag = entry.filename.rsplit("-", 3)[1]
        if host in ("pypi.org", "test.pypi.org"):
            files = "files" if host == "pypi.org" else "test-files"
            # PyPI's stable redirecting URL for a file (its real URL has a content hash)
            return (
                f"https://{files}.pythonhosted.org/packages/{python_tag}/"
                f"{project[0]}/{project}/{entry.filename}"
            )
        base = self.index_url.rstrip("/").removesuffix("/simple")
        return f"{base}/packages/{entry.filename}"

    # - writing -

    def credentials(self) -> Credentials:
        found = credentials(self.environ, self.repository_url)
        if found is None:
            raise PublishError(
                f"no credentials for {self.repository_url}",
                hint="set TWINE_API_KEY (or TWINE_USERNAME and TWINE_PASSWORD), or use "
                "trusted publishing in GitHub Actions (permissions: id-token: write)",
            )
        return found

    def apply(self, plan: PublishPlan, dist: Path) -> tuple[FileDecision, ...]:
        uploads = plan.with_action(Action.UPLOAD)
        unexpected = plan.with_action(Action.CONFLICT, Action.REFUSED, Action.REPLACE)
        if unexpected:
            first = unexpected[0]
            raise ConflictError(
                f"{first.entry.filename}: {first.action.value} on {self.name}: {first.reason}",
                hint="PyPI never accepts other bytes under a published filename; bump the version",
            )
        creds = self.credentials() if uploads else None
        if creds is not None:
            log.info("%s: authenticating with %s", self.name, creds.source)
        done: list[FileDecision] = []
        for decision in plan.decisions:
            if decision.action is Action.SKIP or creds is None:
                done.append(decision)
                continue
            done.append(self._upload(decision, dist / decision.entry.filename, creds))
        return tuple(done)

    def _upload(self, decision: FileDecision, wheel: Path, creds: Credentials) -> FileDecision:
        entry = decision.entry
        env = {**_plain_env(self.environ), **creds.env}
        cmd = [
            self.python,
            "-m",
            "twine",
            "--no-color",
            "upload",
            "--non-interactive",
            "--disable-progress-bar",
            "--repository-url",
            self.repository_url,
            str(wheel),
        ]
        result = self.runner(cmd, env=env, secrets=self.secrets)
        exists_answer = result.returncode != 0 and _already_exists(result.output)
        if result.returncode != 0 and not exists_answer:
            raise PublishError(
                f"{entry.filename}: upload to {self.name} failed: {_twine_reason(result.output)}",
                hint=_upload_hint(result.output),
            )
        try:
            remote = self._settled(entry)
        except PublishError as error:
            raise PublishError(
                f"{entry.filename}: sent, but cannot confirm it on {self.name}: {error.message}",
                hint="re-run `release publish`: what is there with the same sha256 is skipped",
            ) from None
        if remote is not None and remote.sha256 == entry.sha256:
            reason = "uploaded" if not exists_answer else "already there with the same sha256"
            return FileDecision(entry=entry, action=Action.UPLOAD, reason=reason, url=remote.url)
        if remote is not None and remote.sha256 is not None:
            raise ConflictError(
                f"{entry.filename}: {self.name} now holds sha256 {remote.sha256[:12]}..., "
                f"built {entry.sha256[:12]}...",
                hint="someone else uploaded this filename; bump the version",
            )
        raise PublishError(
            f"{entry.filename}: twine reported {'success' if not exists_answer else 'exists'} "
            f"but {self.index_url} does not list it with sha256 {entry.sha256[:12]}...",
            hint="re-run `release publish` once the index has caught up",
        )

    def _settled(self, entry: WheelEntry) -> RemoteFile | None:
        """The file as the index lists it after an upload, waiting (bounded) for it to appear."""
        remote: RemoteFile | None = None
        for attempt in range(self.propagation_attempts):
            remote = self.existing([entry]).get(entry.filename)
            if remote is not None and remote.sha256 is not None:
                return remote
            if attempt + 1 < self.propagation_attempts:
                self.sleep(min(0.25 * 2**attempt, 4.0))
        return remote


def _project(entry: WheelEntry) -> str:
    return str(parse_wheel_filename(entry.filename)[0])


def _plain_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment for a child process: no secret it does not need."""
    drop = {*SECRET_VARIABLES, "TWINE_USERNAME", "TWINE_REPOSITORY", "TWINE_REPOSITORY_URL"}
    return {k: v for k, v in environ.items() if k not in drop}


def _already_exists(output: str) -> bool:
    """PyPI answers 400 "File already exists", pypiserver 409 (twine shows a bare 400 Bad
    Request for it without --verbose): either may mean the file is there; the index decides."""
    return re.search(r"HTTPError: (400|409)\b", output) is not None


def _twine_reason(output: str) -> str:
    lines = [
        line.strip()
        for line in output.splitlines()
        if line.strip()
        and not line.lstrip().startswith(("Uploading distributions", "Checking ", "INFO"))
    ]
    important = [ln for ln in lines if re.search(r"ERROR|WARNING|HTTPError|\b[45]\d\d\b", ln)]
    return " | ".join((important or lines)[-3:]) or "(no output)"


def _upload_hint(output: str) -> str:
    if re.search(r"\b(401|403)\b", output):
        return "the index refused the credentials: check TWINE_API_KEY / TWINE_PASSWORD"
    if re.search(r"Connection|Max retries|refused|timed out", output, re.IGNORECASE):
        return "the index is unreachable; re-run `release publish`: finished files are skipped"
    return "re-run `release publish`: files already uploaded are skipped"
