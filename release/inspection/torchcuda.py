"""Which CUDA each torch release of an index is built for, as the index says, never from a
table of ours: PyPI's torch 2.10.0 is built for CUDA 12.8 and 2.11.0 is its first on CUDA 13;
PyTorch's own indexes and a mirror each say their own.

- The local label of its file, where it has one (PyTorch's own index: `2.10.0+cu129`).
- Else the `Requires-Dist` of its METADATA that apply on Linux: the CUDA runtime's or the
  toolkit's (`nvidia-cuda-runtime-cu12==12.8.90`, `cuda-toolkit[...]==13.0.2`,
  `nvidia-cuda-runtime==13.*`), else the `-cuNN` of its other nvidia-* requirements; none of
  them: a CPU build.

METADATA comes from the PEP 658 file beside the wheel where the index announces one (its
sha256 checked), else out of the wheel itself with HTTP range requests
(release.remote.lazywheel: a MB or two of a wheel of hundreds, never the whole wheel).

Pure: `cuda_of_label`, `cuda_of_requirements`, `cuda_of_metadata`, `IndexTorches`. Edge:
`TorchIndex` reads one index through the `get` it is given (the caller's HTTP client): its
torch page once, each release's METADATA once, however many ask in a run (thread-safe).
`releases` is what the build's torch choice, the wheel's requirement and the GPU gate read;
`cuda_of` is the `TorchCuda` of the inspection's `torch` rule (release.inspection.cudalibs)
for the build, `release verify` and `release audit`. `TorchIndexes` holds a run's readers,
one an index.
"""

from __future__ import annotations

import email.parser
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from release import pep508
from release.defaults import PYPI_SIMPLE
from release.errors import ToolchainError
from release.inspection.cudalibs import TorchCudaAnswer
from release.inspection.symbols import tag_arch
from release.remote import httpclient as http
from release.remote.lazywheel import LazyWheelError, remote_wheel_metadata
from release.remote.retry import RetryPolicy
from release.remote.simple_index import (
    ACCEPT,
    ListedFile,
    parse_project_page,
    project_page_url,
)
from release.wheelfile import (
    MAX_HEADERS_FILE,
    NotAWheel,
    WheelName,
    header_lines_problem,
)

# the index page (PyPI's torch page is about 300 KB) and one small file per release
INDEX_POLICY = RetryPolicy(attempts=3, initial_delay=1.0, total=120.0, request_timeout=30.0)

_RUNTIMES = frozenset({"nvidia-cuda-runtime", "cuda-toolkit"})  # and nvidia-cuda-runtime-cuNN
_LABEL = re.compile(r"cu([0-9]{1,3})([0-9])")
_CU_SUFFIX = re.compile(r"-cu([0-9]{1,4})$")


def shown_url(url: str) -> str:
    """`url` without the credentials it may hold."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


# ---------------------------------------------------------------- pure core


@dataclass(frozen=True, kw_only=True)
class BuiltFor:
    """The CUDA a torch release is built for, and what said so."""

    major: int | None  # None: no CUDA at all (a CPU or ROCm build)
    version: str  # "12.8", "13" where only the major is known, "" without CUDA
    evidence: str  # "nvidia-cuda-runtime-cu12==12.8.90", "its label +cu129"

    def __str__(self) -> str:
        return f"CUDA {self.version}" if self.major is not None else "no CUDA"


def cuda_of_label(local: str | None) -> BuiltFor | None:
    """What a local label says (`cu129` -> CUDA 12.9, `cpu` -> none); None where it says
    nothing of CUDA, or there is none."""
    if not local:
        return None
    match = _LABEL.fullmatch(local)
    if match is not None:
        major, minor = int(match.group(1)), int(match.group(2))
        return BuiltFor(major=major, version=f"{major}.{minor}", evidence=f"its label +{local}")
    if local == "cpu" or local.startswith("rocm"):
        return BuiltFor(major=None, version="", evidence=f"its label +{local}")
    return None


def _runtime_cuda(requirement: Requirement) -> BuiltFor | None:
    """The CUDA a requirement of the CUDA runtime or toolkit names: its exact pin's
    major.minor (`==12.8.90`), else the major of `==13.*`, `~=13.0`, `>=13`."""
    evidence = f"{requirement.name}{requirement.specifier}"
    exact = [s for s in requirement.specifier if s.operator == "==" and "*" not in s.version]
    if exact:
        major, minor = (*Version(exact[0].version).release, 0)[:2]
        return BuiltFor(major=major, version=f"{major}.{minor}", evidence=evidence)
    for spec in requirement.specifier:
        head = spec.version.split(".", 1)[0]
        if spec.operator in ("==", "~=", ">=", "===") and _small_number(head):
            return BuiltFor(major=int(head), version=head, evidence=evidence)
    return None


def cuda_of_requirements(
    requirements: Iterable[Requirement], arch: str | None, python: str | None = None
) -> BuiltFor:
    """The CUDA a torch wheel's `Requires-Dist` (those that apply on Linux `arch`, no extra)
    says it is built for: the CUDA runtime's or the toolkit's (`_runtime_cuda`), else the
    `-cuNN` of any nvidia-* requirement (the runtime's own included); no CUDA where it
    names none of them."""
    env = pep508.linux_environment(arch, python)
    applying = [r for r in requirements if pep508.applies(r, env)]
    for requirement in applying:
        name = canonicalize_name(requirement.name)
        if name in _RUNTIMES or name.startswith("nvidia-cuda-runtime-cu"):
            found = _runtime_cuda(requirement)
            if found is not None:
                return found
    for requirement in applying:
        name = canonicalize_name(requirement.name)
        suffix = _CU_SUFFIX.search(name)
        if name.startswith("nvidia-") and suffix is not None:
            major = int(suffix.group(1))
            evidence = f"{requirement.name}{requirement.specifier}"
            return BuiltFor(major=major, version=str(major), evidence=evidence)
    return BuiltFor(major=None, version="", evidence="no CUDA runtime among its requirements")


def requires_dist(metadata: bytes) -> list[Requirement]:
    """A METADATA file's `Requires-Dist` (a line that does not parse is left out)."""
    headers = email.parser.BytesParser().parsebytes(metadata, headersonly=True)
    return pep508.readable(str(line) for line in headers.get_all("Requires-Dist") or [])


def cuda_of_metadata(metadata: bytes, arch: str | None, python: str | None = None) -> BuiltFor:
    """`cuda_of_requirements` of a METADATA file's `Requires-Dist`."""
    return cuda_of_requirements(requires_dist(metadata), arch, python)


def _admits(specifier: SpecifierSet, version: Version) -> bool:
    """Whether `specifier` admits `version`: a pre-release only where it names one."""
    return specifier.contains(version, prereleases=bool(specifier.prereleases))


@dataclass(frozen=True, kw_only=True)
class TorchBuild:
    """One torch release on an index: what it is built for, and the CPythons it has wheels
    for on the cells' arch."""

    version: Version  # the public version: `torch==2.10.0` installs it
    built_for: BuiltFor
    pythons: tuple[str, ...]

    def __str__(self) -> str:
        return f"torch {self.version}, built for {self.built_for}"


@dataclass(frozen=True, kw_only=True)
class IndexTorches:
    """The torch releases an index has for an arch, oldest first, from those asked about."""

    index_url: str  # as shown: without credentials
    arch: str | None  # None: any Linux arch
    builds: tuple[TorchBuild, ...]

    def admitted_by(self, specifier: SpecifierSet, python: str | None = None) -> list[TorchBuild]:
        """The releases `specifier` admits (with a wheel for `python`), oldest first."""
        return [
            b
            for b in self.builds
            if _admits(specifier, b.version) and (python is None or python in b.pythons)
        ]

    def cuda_of(self, requirement: Requirement, arch: str | None = None) -> TorchCudaAnswer:
        """The CUDA major of each release `requirement` admits, as the `torch` rule asks
        (release.inspection.cudalibs.TorchCuda; the arch is these releases' own)."""
        cuda = {b.version: b.built_for.major for b in self.admitted_by(requirement.specifier)}
        return TorchCudaAnswer(index=self.index_url, cuda=cuda)


# ---------------------------------------------------------------- the index's files

# (build tag, file, local label, interpreter) of one wheel of a release
_Wheel = tuple[tuple[int, str] | tuple[()], ListedFile, str | None, str]


@dataclass(frozen=True, kw_only=True)
class _Release:
    version: Version
    files: tuple[_Wheel, ...]  # in the order pip prefers the last


def page_releases(files: Mapping[str, ListedFile], arch: str | None) -> dict[Version, _Release]:
    """The Linux wheels (of `arch`, None: any) of a torch page by public version (yanked
    ones left out)."""
    found: dict[Version, list[_Wheel]] = {}
    for name, listed in files.items():
        if listed.yanked or not name.endswith(".whl"):
            continue
        try:
            wheel = WheelName.parse(name)
        except NotAWheel:
            continue
        version, build = wheel.version, wheel.build
        for tag in wheel.tags:
            linux = tag_arch(tag.platform)
            if linux is not None and (arch is None or linux == arch):
                entry = (build, listed, version.local, tag.interpreter)
                found.setdefault(Version(version.public), []).append(entry)
                break
    return {
        v: _Release(version=v, files=tuple(sorted(f, key=lambda e: (e[0], e[1].name))))
        for v, f in found.items()
    }


def cpythons(release: _Release) -> tuple[str, ...]:
    """The CPythons a release has wheels for ("3.10", ...), oldest first."""
    kept = {
        f"3.{interpreter[3:]}"
        for _, _, _, interpreter in release.files
        if interpreter.startswith("cp3") and _small_number(interpreter[3:])
    }
    return tuple(sorted(kept, key=lambda p: int(p[2:])))


def _representative(release: _Release, python: str | None) -> tuple[ListedFile, str | None]:
    """The file whose metadata stands for the release: of `python`'s wheels where there are
    some (of all otherwise), one whose PEP 658 metadata the index serves where there is one,
    the one pip would pick (the highest build tag)."""
    wanted = f"cp{python.replace('.', '')}" if python else None
    files = [f for f in release.files if f[3] == wanted] or list(release.files)
    files = [f for f in files if f[1].metadata_sha256 is not None] or files
    _, listed, label, _ = files[-1]
    return listed, label


# ---------------------------------------------------------------- edge


class IndexGet(Protocol):
    """A GET through the caller's HTTP client, credentials, retries and deadline
    (release.remote.httpclient.fetch)."""

    def __call__(
        self,
        url: str,
        *,
        keep: bool = False,
        accept: str | None = None,
        byte_range: tuple[int, int] | None = None,
    ) -> http.Download: ...


def fresh_get(policy: RetryPolicy = INDEX_POLICY) -> IndexGet:
    """GETs under `policy`, each through a client of its own, closed after it: for a run
    that holds no client of its own (the build, init, the GPU gate)."""

    def get(
        url: str,
        *,
        keep: bool = False,
        accept: str | None = None,
        byte_range: tuple[int, int] | None = None,
    ) -> http.Download:
        with http.client() as client:
            return http.fetch(
                client, url, keep=keep, accept=accept, policy=policy, byte_range=byte_range
            )

    return get


class TorchIndex:
    """One torch index as a run reads it: its torch page once, and the METADATA of each
    release's file once, however many ask (thread-safe). `index_url` None is PyPI's."""

    def __init__(self, index_url: str | None, get: IndexGet | None = None) -> None:
        self.url = index_url or PYPI_SIMPLE
        self.shown = shown_url(self.url)
        self._get = get or fresh_get()
        self._lock = threading.Lock()
        self._page: Mapping[str, ListedFile] | ToolchainError | None = None
        self._metadata_of: dict[str, bytes | ToolchainError] = {}  # by the wheel's URL

    def releases(
        self, arch: str | None, asked: SpecifierSet, python: str | None = None
    ) -> IndexTorches:
        """The releases `asked` admits that the index has Linux wheels of for `arch` (None:
        any), each with the CUDA it is built for (read from the file of `python`'s wheels,
        where named). Raises ToolchainError where the index cannot be read."""
        builds = []
        for version, release in sorted(page_releases(self._files(), arch).items()):
            if not _admits(asked, version):
                continue
            listed, label = _representative(release, python)
            built_for = cuda_of_label(label) or self._metadata_cuda(listed, arch, python)
            builds.append(
                TorchBuild(version=version, built_for=built_for, pythons=cpythons(release))
            )
        return IndexTorches(index_url=self.shown, arch=arch, builds=tuple(builds))

    def cuda_of(self, requirement: Requirement, arch: str | None) -> TorchCudaAnswer:
        """The `TorchCuda` of the inspection's `torch` rule: the CUDA major of each release
        `requirement` admits, or why the index could not say."""
        try:
            return self.releases(arch, requirement.specifier).cuda_of(requirement)
        except ToolchainError as error:
            return TorchCudaAnswer(index=self.shown, cuda={}, error=error.message)

    def _files(self) -> Mapping[str, ListedFile]:
        with self._lock:
            if self._page is None:
                self._page = self._read_page()
            if isinstance(self._page, ToolchainError):
                raise self._page
            return self._page

    def _read_page(self) -> Mapping[str, ListedFile] | ToolchainError:
        page = project_page_url(self.url, "torch")
        got = self._get(page, keep=True, accept=ACCEPT)
        if not got.ok or got.body is None:
            why = "it has no torch" if got.status == 404 else got.error or f"HTTP {got.status}"
            return ToolchainError(
                f"cannot read the torch releases of {self.shown} ({why})",
                hint="check the torch index, and that this machine reaches it",
            )
        try:
            return parse_project_page(got.body, got.content_type, page)
        except ValueError as error:
            return ToolchainError(f"{shown_url(page)}: not an index page: {error}")

    def requirements(
        self, version: Version, arch: str | None, python: str | None = None
    ) -> tuple[Requirement, ...]:
        """The `Requires-Dist` of torch `version` that apply on Linux `arch` (with `python`
        where named; a marker on an unnamed one counts as applying), no extra, from the
        METADATA of the file pip would install. Raises ToolchainError."""
        release = page_releases(self._files(), arch).get(version)
        if release is None:
            raise ToolchainError(f"{self.shown} has no torch {version} for Linux {arch or ''}")
        listed, _ = _representative(release, python)
        env = pep508.linux_environment(arch, python)
        return tuple(
            r for r in requires_dist(self._cached_metadata(listed)) if pep508.applies(r, env)
        )

    def _metadata_cuda(self, listed: ListedFile, arch: str | None, python: str | None) -> BuiltFor:
        return cuda_of_metadata(self._cached_metadata(listed), arch, python)

    def _cached_metadata(self, listed: ListedFile) -> bytes:
        with self._lock:
            known = self._metadata_of.get(listed.url)
        if known is None:
            try:
                known = self._metadata(listed)
            except ToolchainError as error:
                known = error
            with self._lock:
                self._metadata_of[listed.url] = known
        if isinstance(known, ToolchainError):
            raise known
        return known

    def _metadata(self, listed: ListedFile) -> bytes:
        """The METADATA of a listed wheel, bounded as a wheel's own is (MAX_HEADERS_FILE,
        MAX_HEADER_LINES) before it is parsed. Raises ToolchainError."""
        metadata = self._metadata_file(listed)
        problem = (
            f"is over {MAX_HEADERS_FILE // 2**20} MiB"
            if len(metadata) > MAX_HEADERS_FILE
            else header_lines_problem(metadata)
        )
        if problem is None:
            return metadata
        raise ToolchainError(f"the METADATA of {shown_url(listed.url)} {problem}")

    def _metadata_file(self, listed: ListedFile) -> bytes:
        """The METADATA of a listed wheel: its PEP 658 file where the index announces one,
        else read out of the wheel with range requests. Raises ToolchainError."""
        shown = shown_url(listed.url)
        if listed.metadata_sha256 is not None:
            got = self._get(listed.url + ".metadata", keep=True)
            if not got.ok or got.body is None:
                raise ToolchainError(
                    f"cannot read {shown}.metadata ({got.error or f'HTTP {got.status}'}), "
                    "which the index announces"
                )
            if got.sha256 != listed.metadata_sha256:
                raise ToolchainError(
                    f"{shown}.metadata does not match the sha256 the index gives for it"
                )
            return got.body
        try:
            return remote_wheel_metadata(self._get, listed.url)
        except LazyWheelError as error:
            raise ToolchainError(
                f"cannot read the METADATA of {listed.name} on its index: the index announces "
                f"no PEP 658 metadata file for it, and {error}",
                hint="name the exact torch the cell builds against, from an index that serves "
                "PEP 658 metadata or takes range requests",
            ) from None


class TorchIndexes:
    """A run's `TorchIndex` readers, one an index, made as asked (thread-safe)."""

    def __init__(self, get: IndexGet | None = None) -> None:
        self._get = get or fresh_get()
        self._lock = threading.Lock()
        self._made: dict[str, TorchIndex] = {}

    def of(self, index_url: str | None) -> TorchIndex:
        """The reader of `index_url` (None: PyPI's)."""
        url = index_url or PYPI_SIMPLE
        with self._lock:
            if url not in self._made:
                self._made[url] = TorchIndex(url, self._get)
            return self._made[url]


def _small_number(text: str) -> bool:
    """Whether `text` is a number int() reads as one a CUDA or Python version holds."""
    return text.isascii() and text.isdigit() and len(text) <= 4
