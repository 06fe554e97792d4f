"""The torch releases of a cell's torch index, each with the CUDA it is built for, and the
torch a stable-ABI cell builds against by default: the oldest it admits on the cell's CUDA
major, which is the release TORCH_TARGET_VERSION names raised to the first torch on the
index built for that major (PyPI's torch 2.10.0 is built for CUDA 12.8, 2.11.0 is the first
on CUDA 13).

Which CUDA a torch release is built for is read, never looked up in a table of our own: from
the local label of its file where it has one (PyTorch's own index: `2.10.0+cu129`), else
from the `Requires-Dist` of its METADATA (`nvidia-cuda-runtime-cu12==12.8.90`,
`cuda-toolkit[...]==13.0.2`, `nvidia-cuda-runtime==13.0.96`, or at least the `-cuNN` of its
other nvidia-* requirements). METADATA comes from the PEP 658 file beside the wheel where
the index announces one (`core-metadata` / `data-dist-info-metadata`, its sha256 checked),
else from the wheel itself through HTTP range requests (release.remote.lazywheel: the zip's
central directory and the one member, a MB or two of a wheel of hundreds).

The pure core decides; `read_index_torches` is the edge that asks the index.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from packaging.metadata import Metadata
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from release.errors import ToolchainError
from release.remote import httpclient as http
from release.remote.lazywheel import LazyWheelError, remote_wheel_metadata
from release.remote.retry import RetryPolicy
from release.remote.simple_index import (
    ACCEPT,
    ListedFile,
    parse_project_page,
    project_page_url,
)

PYPI_SIMPLE = "https://pypi.org/simple/"
# the index page (PyPI's torch page is about 300 KB) and one small file per release
INDEX_POLICY = RetryPolicy(attempts=3, initial_delay=1.0, total=120.0, request_timeout=30.0)

_LABEL = re.compile(r"cu(\d+)(\d)")
_CU_SUFFIX = re.compile(r"-cu(\d+)$")


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


def _linux(arch: str, python: str | None) -> dict[str, str]:
    """The marker environment of the cells' platform: Linux on `arch`, with their Python."""
    env = {
        "platform_system": "Linux",
        "sys_platform": "linux",
        "os_name": "posix",
        "platform_machine": arch,
        "extra": "",
    }
    if python is not None:
        env |= {"python_version": python, "python_full_version": f"{python}.0"}
    return env


def _exact(requirement: Requirement) -> Version | None:
    pins = [s for s in requirement.specifier if s.operator == "==" and "*" not in s.version]
    return Version(pins[0].version) if pins else None


def cuda_of_requirements(
    requirements: Iterable[Requirement], arch: str, python: str | None = None
) -> BuiltFor:
    """The CUDA a torch wheel's `Requires-Dist` (those that apply on Linux `arch`) says it
    is built for: the CUDA runtime's pin (`nvidia-cuda-runtime-cu12==12.8.90`,
    `nvidia-cuda-runtime==13.0.96`) or the toolkit's (`cuda-toolkit[...]==13.0.2`), else the
    `-cuNN` of its other nvidia-* requirements; no CUDA where it names none of them."""
    env = _linux(arch, python)
    applying = [r for r in requirements if r.marker is None or r.marker.evaluate(env)]
    for requirement in applying:
        name = canonicalize_name(requirement.name)
        pinned = _exact(requirement)
        if pinned is None or not (
            name in ("nvidia-cuda-runtime", "cuda-toolkit")
            or name.startswith("nvidia-cuda-runtime-cu")
        ):
            continue
        major, minor = (*pinned.release, 0)[:2]
        evidence = f"{requirement.name}{requirement.specifier}"
        return BuiltFor(major=major, version=f"{major}.{minor}", evidence=evidence)
    for requirement in applying:
        name = canonicalize_name(requirement.name)
        suffix = _CU_SUFFIX.search(name)
        if name.startswith("nvidia-") and suffix is not None:
            major = int(suffix.group(1))
            evidence = f"{requirement.name}{requirement.specifier}"
            return BuiltFor(major=major, version=str(major), evidence=evidence)
    return BuiltFor(major=None, version="", evidence="no CUDA runtime among its requirements")


def cuda_of_metadata(metadata: bytes, arch: str, python: str | None = None) -> BuiltFor:
    """`cuda_of_requirements` of a METADATA file. Raises ValueError where it is not one."""
    parsed = Metadata.from_email(metadata, validate=False)
    return cuda_of_requirements(parsed.requires_dist or (), arch, python)


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
    arch: str
    builds: tuple[TorchBuild, ...]

    def admitted_by(self, specifier: SpecifierSet, python: str | None = None) -> list[TorchBuild]:
        """The final releases `specifier` admits (with a wheel for `python`), oldest first."""
        return [
            b
            for b in self.builds
            if specifier.contains(b.version, prereleases=False)
            and (python is None or python in b.pythons)
        ]


@dataclass(frozen=True, kw_only=True)
class OldestTorch:
    """The torch a stable-ABI cell builds against by default, and why."""

    version: Version
    target: Version  # TORCH_TARGET_VERSION's release
    cuda_major: int
    index_url: str
    passed: tuple[TorchBuild, ...]  # from the target on, built for another CUDA (or none)

    @property
    def reason(self) -> str:
        """`the oldest torch >= 2.10 (TORCH_TARGET_VERSION) built for CUDA 13 on <index>`,
        with the releases it passed over."""
        text = (
            f"the oldest torch >= {self.target} (TORCH_TARGET_VERSION) built for CUDA "
            f"{self.cuda_major} on {self.index_url}"
        )
        if self.passed:
            text += f" ({'; '.join(map(str, self.passed))})"
        return text

    def said(self) -> str:
        """What the dry run and init say: `torch 2.11.0: <reason>`."""
        return f"torch {self.version}: {self.reason}"


class NoTorchForCuda(ValueError):
    """No release on the index from the target on is built for the cell's CUDA major."""


def oldest_admitted(
    torches: IndexTorches, target: Version, cuda_major: int, python: str | None = None
) -> OldestTorch:
    """The oldest release from `target` on built for CUDA `cuda_major` (with a wheel for
    `python`, where one is named: a wheel's requirement does not depend on the Python it
    was built with, so the build and init name none); NoTorchForCuda, naming what the
    index has, where there is none."""
    passed: list[TorchBuild] = []
    for build in torches.admitted_by(SpecifierSet(f">={target}"), python):
        if build.built_for.major == cuda_major:
            return OldestTorch(
                version=build.version,
                target=target,
                cuda_major=cuda_major,
                index_url=torches.index_url,
                passed=tuple(passed),
            )
        passed.append(build)
    has = "; ".join(map(str, passed)) or "no final release"
    wheel = f" with a cp{python.replace('.', '')} wheel" if python else ""
    raise NoTorchForCuda(
        f"{torches.index_url} has no torch >= {target} built for CUDA {cuda_major}{wheel} "
        f"for {torches.arch} ({has})"
    )


def build_torch_problem(oldest: OldestTorch, built: Version, newer_on_purpose: bool) -> str | None:
    """Why a stable-ABI wheel must not be built against `built` (None: it may): a torch
    older than the oldest it admits, or a newer one that matrix.yaml does not say is on
    purpose (headers of a newer torch compiled for an older target need not behave like
    the older torch beside which the wheel then loads)."""
    if built == oldest.version or (built > oldest.version and newer_on_purpose):
        return None
    if built < oldest.version:
        return (
            f"a stable-ABI build against torch {built}, but {oldest.said()}: "
            f'name torch {oldest.version} (torch: "{oldest.version}")'
        )
    return (
        f"a stable-ABI build against torch {built}, newer than the oldest torch it admits, "
        f"{oldest.said()}: the headers of a newer torch compiled for an older target need "
        f"not behave like that torch, beside which the wheel will load. Build against it "
        f'(torch: "{oldest.version}"), or say the newer one is on purpose (torch-build: newer)'
    )


def other_cuda_admitted(
    requirement: Requirement, torches: IndexTorches, cuda_major: int
) -> list[TorchBuild]:
    """The releases on the index that `requirement` admits and that are built for another
    CUDA major (or none): a wheel of CUDA `cuda_major` would be installed beside one and
    fail to load."""
    return [
        build
        for build in torches.admitted_by(requirement.specifier)
        if build.built_for.major != cuda_major
    ]


# ---------------------------------------------------------------- the index's files


@dataclass(frozen=True, kw_only=True)
class _Release:
    version: Version
    # (build tag, file, local label, interpreter), in the order pip prefers the last
    files: tuple[tuple[tuple[int, str] | tuple[()], ListedFile, str | None, str], ...]


def _releases(files: Mapping[str, ListedFile], arch: str) -> dict[Version, _Release]:
    """The Linux `arch` wheels of a torch page by public version (yanked ones left out)."""
    found: dict[Version, list[tuple[tuple[int, str] | tuple[()], ListedFile, str | None, str]]]
    found = {}
    for name, listed in files.items():
        if listed.yanked or not name.endswith(".whl"):
            continue
        try:
            _, version, build, tags = parse_wheel_filename(name)
        except InvalidWheelFilename:
            continue
        for tag in tags:
            if "linux" in tag.platform and tag.platform.endswith(arch):
                entry = (build, listed, version.local, tag.interpreter)
                found.setdefault(Version(version.public), []).append(entry)
                break
    return {
        v: _Release(version=v, files=tuple(sorted(f, key=lambda e: (e[0], e[1].name))))
        for v, f in found.items()
    }


def _pythons(release: _Release) -> tuple[str, ...]:
    kept = {
        f"3.{interpreter[3:]}"
        for _, _, _, interpreter in release.files
        if interpreter.startswith("cp3") and interpreter[3:].isdigit()
    }
    return tuple(sorted(kept, key=lambda p: int(p[2:])))


def _representative(release: _Release, python: str | None) -> tuple[ListedFile, str | None]:
    """The file whose metadata stands for the release: the one pip would pick of
    `python`'s wheels where there are some (the highest build tag), of all otherwise."""
    wanted = f"cp{python.replace('.', '')}" if python else None
    files = [f for f in release.files if f[3] == wanted] or list(release.files)
    _, listed, label, _ = files[-1]
    return listed, label


# ---------------------------------------------------------------- edge


def _metadata(client: http.Client, listed: ListedFile) -> bytes:
    """The METADATA of a listed wheel: its PEP 658 file where the index announces one,
    else read out of the wheel with range requests. Raises ToolchainError."""
    shown = shown_url(listed.url)
    if listed.metadata_sha256 is not None:
        got = http.fetch(client, listed.url + ".metadata", keep=True, policy=INDEX_POLICY)
        if not got.ok or got.body is None:
            raise ToolchainError(
                f"cannot read {shown}.metadata ({got.error or f'HTTP {got.status}'}), which "
                "the index announces"
            )
        if got.sha256 != listed.metadata_sha256:
            raise ToolchainError(
                f"{shown}.metadata does not match the sha256 the index gives for it"
            )
        return got.body
    try:
        return remote_wheel_metadata(client, listed.url, policy=INDEX_POLICY)
    except LazyWheelError as error:
        raise ToolchainError(
            f"cannot read the METADATA of {listed.name} on its index: the index announces "
            f"no PEP 658 metadata file for it, and {error}",
            hint="name the exact torch the cell builds against, from an index that serves "
            "PEP 658 metadata or takes range requests",
        ) from None


def read_index_torches(
    index_url: str | None,
    arch: str,
    asked: SpecifierSet,
    *,
    python: str | None = None,
    client: http.Client | None = None,
) -> IndexTorches:
    """The releases `asked` admits (final ones) on the torch page of `index_url` (None:
    PyPI's), each with the CUDA it is built for: one request for the page, and one file's
    metadata per release where its label does not say. Raises ToolchainError where the
    index cannot be read."""
    index = index_url or PYPI_SIMPLE
    shown = shown_url(index)
    page = project_page_url(index, "torch")
    own = client is None
    client = client or http.client()
    try:
        got = http.fetch(client, page, keep=True, accept=ACCEPT, policy=INDEX_POLICY)
        if not got.ok or got.body is None:
            why = "it has no torch" if got.status == 404 else got.error or f"HTTP {got.status}"
            raise ToolchainError(
                f"cannot read the torch releases of {shown} ({why}): a stable-ABI cell's "
                "torch and its wheel's requirement are read there",
                hint="check the cell's torch-index, and that this machine reaches it",
            )
        try:
            files = parse_project_page(got.body, got.content_type, page)
        except ValueError as error:
            raise ToolchainError(f"{shown_url(page)}: not an index page: {error}") from None
        builds = []
        for version, release in sorted(_releases(files, arch).items()):
            if not asked.contains(version, prereleases=False):
                continue
            listed, label = _representative(release, python)
            built_for = cuda_of_label(label)
            if built_for is None:
                try:
                    built_for = cuda_of_metadata(_metadata(client, listed), arch, python)
                except ValueError as error:
                    raise ToolchainError(f"{listed.name}: unreadable METADATA: {error}") from None
            builds.append(
                TorchBuild(version=version, built_for=built_for, pythons=_pythons(release))
            )
    finally:
        if own:
            client.close()
    return IndexTorches(index_url=shown, arch=arch, builds=tuple(builds))
