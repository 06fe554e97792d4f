"""The PyPI publisher: refusal checks read from the wheel, existence by sha256, twine uploads.

PyPI takes the default variant only, and the release's sdist (`sdist_companions`) beside
it, uploaded after its wheels. Everything PyPI would reject is refused before any
upload (`pypi_refusals`, pure, over the wheel's facts, plus `twine check`).
Whether a file already exists is decided by the sha256 the index lists (PEP 691 JSON,
falling back to PEP 503 HTML as pypiserver serves it), never by `twine upload
--skip-existing`, which counts "already exists" with other bytes as success. Uploads go
through twine's Python API one file at a time (its answer's status code, not its printed
text, says what happened), each with its PEP 740 attestation where
`<wheel>.publish.attestation` lies beside it (release.provenance.attestation); each upload
is re-checked against the index, and a 400/409 "already exists" counts as success only
when the index then shows the same sha256.

PyPI cannot hold a file without publishing it: this publisher does not stage, and
`release publish` uploads here only after every staging destination holds its files.

twine is imported where it checks or uploads a file (and docutils, through its check,
only there), so that a plan or a dry run loads neither.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from packaging.utils import canonicalize_name

from release.credentials import IndexCredentials, mask
from release.destinations.decide import (
    Action,
    Companion,
    CompanionDecision,
    FileDecision,
    PublishPlan,
    RemoteFile,
)
from release.destinations.reach import IndexLogin, Reach
from release.errors import ConflictError, PublishError
from release.inspection.wheel import heaviest
from release.provenance.attestation import attestation_refusal, attestations_for
from release.records.manifest import DestinationRef, Manifest, WheelEntry
from release.records.published import SDIST_PURPOSE
from release.records.sdistfile import SDIST_SUFFIX, project_of
from release.remote.httpclient import (
    Client,
    fetch,
)
from release.remote.retry import RetryPolicy
from release.remote.simple_index import ACCEPT, ListedFile, parse_project_page, project_page_url
from release.wheelfile import NotAWheel, WheelFacts, WheelName, read_wheel

log = logging.getLogger("release.destinations.pypi_publisher")

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


def pypi_refusals(
    filename: str, facts: WheelFacts, *, max_file_size: int, weighs_most: str = ""
) -> list[str]:
    """Every reason PyPI would reject this file at upload (`weighs_most`: the targets whose
    device code weighs most, for a file over the limit). Pure."""
    try:
        wheel = WheelName.parse(filename)
    except NotAWheel as error:
        return [f"not a valid wheel filename ({error.detail})"]
    name, version, tags = wheel.project, wheel.version, wheel.tags
    reasons = []
    if version.local is not None:
        reasons.append(f"local version {version} (PyPI accepts no local versions)")
    bad = sorted({t.platform for t in tags if not platform_allowed(t.platform)})
    if bad:
        reasons.append(f"platform tag {', '.join(bad)} is not on PyPI's allow-list")
    if facts.size > max_file_size:
        weighs = f"; heaviest device code: {weighs_most}" if weighs_most else ""
        reasons.append(
            f"{facts.size / 2**20:.1f} MiB is over the {max_file_size / 2**20:.0f} MiB file "
            f"limit (raise `max-file-size-mib` if PyPI raised the project's limit{weighs})"
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


# --- Uploading with twine's API. ---


@dataclass(frozen=True, kw_only=True)
class UploadAnswer:
    """What the index answered one upload: its HTTP status, or why there was none."""

    status: int | None
    reason: str = ""
    error: str | None = None


Uploader = Callable[[Path, str, IndexCredentials], UploadAnswer]
"""(wheel, repository URL, credentials) -> the index's answer."""

# (connect, each read) seconds of an upload's requests: twine sends with none, so an index
# that takes the body and never answers held `release publish` until the job's own limit.
# An index hashes and stores a large file before it answers (PyPI: seconds to a minute).
UPLOAD_TIMEOUT = (10.0, 300.0)


def twine_upload(
    wheel: Path,
    repository_url: str,
    creds: IndexCredentials,
    *,
    timeout: tuple[float, float] = UPLOAD_TIMEOUT,
) -> UploadAnswer:
    """One upload through twine's Repository (which also retries 5xx itself), with the
    wheel's PEP 740 attestation when one lies beside it (checked by `refusal` before any
    upload), each of its requests within `timeout`. twine's own lines go to stderr, so that
    stdout stays a command's report."""
    from twine.package import PackageFile
    from twine.settings import Settings

    password = creds.password.reveal() if creds.password else None
    with contextlib.redirect_stdout(sys.stderr):
        settings = Settings(
            repository_url=repository_url,
            username=creds.username,
            password=password,
            non_interactive=True,
            disable_progress_bar=not sys.stderr.isatty(),
            config_file=os.devnull,
        )
        repository = settings.create_repository()
        for adapter in repository.session.adapters.values():
            adapter.send = functools.partial(_send_within, adapter.send, timeout)  # type: ignore[method-assign]
        try:
            package = PackageFile.from_filename(str(wheel), comment=None)
            attestations = attestations_for(wheel)
            if attestations:
                log.info("%s: with its PEP 740 attestation", wheel.name)
                package.add_attestations(attestations)
            response = repository.upload(package)
        except Exception as error:  # requests' and twine's, as one answer
            return UploadAnswer(status=None, error=f"{type(error).__name__}: {error}")
        finally:
            repository.close()
    return UploadAnswer(status=response.status_code, reason=str(response.reason or ""))


def _send_within(
    send: Callable[..., Any], bound: tuple[float, float], request: Any, **options: Any
) -> Any:
    """A requests adapter's `send`, its timeout `bound` where the caller gave none."""
    if options.get("timeout") is None:
        options["timeout"] = bound
    return send(request, **options)


def twine_check(wheel: Path) -> str | None:
    """Why `twine check` fails the file (its long description would not render on PyPI,
    which refuses such an upload), or None. Not --strict: PyPI takes a file without a
    long description or its content type, as PyTorch's extension template makes them.
    twine reports through its logger; those records are the reason. A file whose metadata
    twine cannot read at all (an sdist's PKG-INFO it refuses) is a reason too, never a
    traceback."""
    from twine.commands.check import check
    from twine.exceptions import InvalidDistribution

    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    handler = Collect(level=logging.WARNING)
    logger = logging.getLogger("twine.commands.check")
    logger.addHandler(handler)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            failed = check([str(wheel)], strict=False)
    except InvalidDistribution as error:
        return str(error).splitlines()[0] if str(error) else "twine cannot read it"
    finally:
        logger.removeHandler(handler)
    if not failed:
        return None
    lines = [line.strip() for record in records for line in record.splitlines() if line.strip()]
    return " | ".join(lines[:3]) or "failed"


# --- The publisher. ---


class PypiPublisher:
    """A PyPI-compatible destination (PyPI, TestPyPI, pypiserver) behind the publisher seam."""

    stages = False
    frozen: str | None = None  # PyPI takes new files; replace never applies (run.py)
    taken: str | None = None  # a project's name is its own there

    def __init__(
        self,
        destination: DestinationRef,
        *,
        reach: Reach,
        index_url: str | None = None,
        http: Client | None = None,
        uploader: Uploader = twine_upload,
        twine_checks: bool = True,
        sleep: Callable[[float], None] = time.sleep,
        propagation_attempts: int = 6,
        on_upload: Callable[[str, int], None] | None = None,
    ) -> None:
        self.on_upload = on_upload
        self.name = destination.name
        self.destination = destination
        self.repository_url = reach.upload_url(destination.repository_url)
        if index_url:
            self.index_url = index_url
        elif reach.repository_url:
            self.index_url = default_index_url(reach.repository_url)
        else:
            self.index_url = destination.index_url or default_index_url(self.repository_url)
        self.creds = reach.index_credentials(self.repository_url)
        self.secrets = reach.secrets
        self.http = http or reach.http(reach.origin_auth(indexes=[self.login]))
        self.uploader = uploader
        self.twine_checks = twine_checks
        self.sleep = sleep
        self.propagation_attempts = propagation_attempts
        self._facts: dict[Path, WheelFacts] = {}
        self._listed: dict[str, dict[str, ListedFile]] = {}  # what `existing` read, by project

    @property
    def login(self) -> IndexLogin:
        """Its upload URL, whose credentials also read its index's origin."""
        return self.repository_url, [self.index_url]

    # - read-only -

    def listed(self, project: str) -> dict[str, ListedFile]:
        """The project page of the index: every file it lists, by filename."""
        url = project_page_url(self.index_url, project)
        got = fetch(
            self.http,
            url,
            keep=True,
            accept=ACCEPT,
            policy=RetryPolicy(attempts=4, initial_delay=0.5, total=120.0),
            sleep=self.sleep,
            secrets=self.secrets,
        )
        if got.status == 404:
            return {}
        if got.ok and got.body is not None:
            try:
                return parse_project_page(got.body, got.content_type, url)
            except ValueError as error:
                raise PublishError(f"{url}: unreadable index page: {error}") from None
        last = got.error or f"HTTP {got.status}"
        refused = got.status in (401, 403)
        raise PublishError(
            f"cannot read the index {mask(url, self.secrets)}: {mask(last, self.secrets)}",
            hint="the index refused the credentials: check TWINE_API_KEY / TWINE_PASSWORD"
            if refused
            else "check --repository-url and that the index is reachable",
        )

    def existing(self, files: Mapping[str, int], *, rehash: bool = False) -> dict[str, RemoteFile]:
        out: dict[str, RemoteFile] = {}
        projects = {project_of(name) for name in files if name.endswith(_DISTRIBUTIONS)}
        for project in sorted(projects):
            self._listed[project] = self.listed(project)
            out.update(
                {
                    name: RemoteFile(name=name, size=f.size, sha256=f.sha256, url=f.url)
                    for name, f in self._listed[project].items()
                    if name in files
                }
            )
        return out

    def held_files(self) -> Collection[str]:
        """Every file the project pages list (a page lists each spelling of the name)."""
        return [name for page in self._listed.values() for name in page]

    def held_bytes(self, excluding: Collection[str]) -> int | None:
        """The sizes the project pages list (PEP 691/700 JSON gives them; an HTML page
        does not: then None)."""
        others = [
            f.size
            for page in self._listed.values()
            for f in page.values()
            if f.name not in excluding
        ]
        if any(size is None for size in others):
            return None
        return sum(size or 0 for size in others)

    def facts(self, wheel: Path) -> WheelFacts:
        if wheel not in self._facts:
            self._facts[wheel] = read_wheel(wheel)
        return self._facts[wheel]

    def refusal(self, entry: WheelEntry, wheel: Path) -> str | None:
        reasons = pypi_refusals(
            entry.filename,
            self.facts(wheel),
            max_file_size=self.destination.max_file_size,
            weighs_most=heaviest(entry.device_bytes),
        )
        attestation = attestation_refusal(wheel, entry.sha256)
        if attestation is not None:
            reasons.append(attestation)
        if not reasons and self.twine_checks:
            problem = twine_check(wheel)
            if problem is not None:
                reasons.append(f"twine check: {problem}")
        return "; ".join(reasons) or None

    def final_url(self, name: str) -> str:
        host = urlsplit(self.index_url).hostname
        project = project_of(name)
        python_tag = "source" if name.endswith(SDIST_SUFFIX) else WheelName.parse(name).python
        if host in ("pypi.org", "test.pypi.org"):
            files = "files" if host == "pypi.org" else "test-files"
            # PyPI's stable redirecting URL for a file (its real URL has a content hash)
            return (
                f"https://{files}.pythonhosted.org/packages/{python_tag}/"
                f"{project[0]}/{project}/{name}"
            )
        base = self.index_url.rstrip("/").removesuffix("/simple")
        return f"{base}/packages/{name}"

    # - writing -

    def credentials(self) -> IndexCredentials:
        if self.creds is None:
            raise PublishError(
                f"no credentials for {self.repository_url}",
                hint="set TWINE_API_KEY (or TWINE_USERNAME and TWINE_PASSWORD), or use "
                "trusted publishing in GitHub Actions (permissions: id-token: write)",
            )
        return self.creds

    def stage(self, plan: PublishPlan, dist: Path) -> list[str]:
        return []  # PyPI holds nothing unpublished

    def apply(self, plan: PublishPlan, dist: Path) -> tuple[FileDecision, ...]:
        return self.commit(plan, dist)

    def commit(self, plan: PublishPlan, dist: Path) -> tuple[FileDecision, ...]:
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
        self._upload_sdists(plan.companions, dist)
        return tuple(done)

    def _upload_sdists(self, decisions: Collection[CompanionDecision], dist: Path) -> None:
        """The sdist, after the wheels (the one companion PyPI takes; see `sdist_companions`)."""
        bad = [d for d in decisions if d.action not in (Action.UPLOAD, Action.SKIP)]
        if bad:
            raise ConflictError(
                f"{bad[0].companion.filename}: {bad[0].action.value} on {self.name}: "
                f"{bad[0].reason}",
                hint="PyPI never accepts other bytes under a published filename; bump the version",
            )
        for decision in decisions:
            if decision.action is Action.UPLOAD:
                sdist = decision.companion
                self._sent(sdist.filename, sdist.size, sdist.sha256, dist, self.credentials())

    def _upload(self, decision: FileDecision, wheel: Path, creds: IndexCredentials) -> FileDecision:
        entry = decision.entry
        url, reason = self._sent(entry.filename, entry.size, entry.sha256, wheel.parent, creds)
        return FileDecision(entry=entry, action=Action.UPLOAD, reason=reason, url=url)

    def _sent(
        self, filename: str, size: int, sha256: str, dist: Path, creds: IndexCredentials
    ) -> tuple[str, str]:
        """Upload dist/filename and confirm it on the index: (its URL there, how it went)."""
        answer = self.uploader(dist / filename, self.repository_url, creds)
        # PyPI answers 400 "File already exists", pypiserver 409: the file may be there;
        # the index decides.
        exists_answer = answer.status in (400, 409)
        if answer.status != 200 and not exists_answer:
            what = answer.error or f"HTTP {answer.status} {answer.reason}".strip()
            raise PublishError(
                f"{filename}: upload to {self.name} failed: {mask(what, self.secrets)}",
                hint=_upload_hint(answer),
            )
        try:
            remote = self._settled(filename, size)
        except PublishError as error:
            raise PublishError(
                f"{filename}: sent, but cannot confirm it on {self.name}: {error.message}",
                hint="re-run `release publish`: what is there with the same sha256 is skipped",
            ) from None
        if remote is not None and remote.sha256 == sha256:
            reason = "uploaded" if not exists_answer else "already there with the same sha256"
            if self.on_upload is not None:
                self.on_upload(filename, size)
            return remote.url, reason
        if remote is not None and remote.sha256 is not None:
            raise ConflictError(
                f"{filename}: {self.name} now holds sha256 {remote.sha256[:12]}..., "
                f"built {sha256[:12]}...",
                hint="someone else uploaded this filename; bump the version",
            )
        raise PublishError(
            f"{filename}: twine reported {'success' if not exists_answer else 'exists'} "
            f"but {self.index_url} does not list it with sha256 {sha256[:12]}...",
            hint="re-run `release publish` once the index has caught up",
        )

    def _settled(self, filename: str, size: int) -> RemoteFile | None:
        """The file as the index lists it after an upload, waiting (bounded) for it to appear."""
        remote: RemoteFile | None = None
        for attempt in range(self.propagation_attempts):
            remote = self.existing({filename: size}).get(filename)
            if remote is not None and remote.sha256 is not None:
                return remote
            if attempt + 1 < self.propagation_attempts:
                self.sleep(min(0.25 * 2**attempt, 4.0))
        return remote


_DISTRIBUTIONS = (".whl", SDIST_SUFFIX)


def sdist_companions(manifest: Manifest, destination: str, dist: Path) -> list[Companion]:
    """The release's sdist, for the destination the manifest names for it (the default
    variant's PyPI), as a companion of the release: decided like any file (new, identical
    or CONFLICT by sha256), recorded with its URL and attested like the other companions.
    PyPI takes one sdist a version; no other destination gets it. `load_dist` has checked
    its bytes against the manifest."""
    sdist = manifest.sdist
    if sdist is None or sdist.destination.name != destination:
        return []
    path = dist / sdist.filename
    data = path.read_bytes()
    return [
        Companion(
            filename=sdist.filename, data=data, sha256=sdist.sha256, of="release",
            purpose=SDIST_PURPOSE, refusal=sdist_refusal(path, sdist.sha256, sdist.destination),
        )
    ]  # fmt: skip


def sdist_refusal(path: Path, sha256: str, destination: DestinationRef) -> str | None:
    """What PyPI would reject of the sdist, checked before any upload: its size, a PEP 740
    attestation beside it of other bytes, `twine check`."""
    reasons = []
    size = path.stat().st_size
    if size > destination.max_file_size:
        limit = destination.max_file_size / 2**20
        reasons.append(f"{size / 2**20:.1f} MiB, over {destination.name}'s {limit:.0f} MiB")
    attestation = attestation_refusal(path, sha256)
    if attestation is not None:
        reasons.append(attestation)
    if not reasons:
        problem = twine_check(path)
        if problem is not None:
            reasons.append(f"twine check: {problem}")
    return "; ".join(reasons) or None


def _upload_hint(answer: UploadAnswer) -> str:
    if answer.status in (401, 403):
        return "the index refused the credentials: check TWINE_API_KEY / TWINE_PASSWORD"
    if answer.status is None:
        return "the index is unreachable; re-run `release publish`: finished files are skipped"
    return "re-run `release publish`: files already uploaded are skipped"
