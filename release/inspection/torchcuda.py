"""Which CUDA major each torch release a requirement admits is built for, as a torch index
says: the PEP 658 metadata of one Linux wheel of each release names its CUDA runtime
(`nvidia-cuda-runtime-cu12==12.8.90` up to torch 2.10 on PyPI; `cuda-toolkit[...]==13.0.2`
or `nvidia-cuda-runtime==13.*` from torch 2.11); none is a CPU build. Read from the index's
metadata, never from a table: PyPI, PyTorch's own indexes and a mirror each say their own.

Pure: `release_cuda`, `admitted`. Edge: `torch_cuda_lookup` asks an index through the
`get` it is given (the caller's HTTP client), once per page and per release in a run.
"""

from __future__ import annotations

import email.parser
import re
import threading
from collections.abc import Callable, Sequence
from urllib.parse import urljoin

from packaging.markers import UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from release.inspection.cudalibs import TorchCuda, TorchCudaAnswer
from release.inspection.symbols import tag_arch
from release.remote.httpclient import Download
from release.remote.simple_index import ACCEPT, ListedFile, parse_project_page

PYPI_SIMPLE = "https://pypi.org/simple/"
_RUNTIMES = {"nvidia-cuda-runtime", "cuda-toolkit", "nvidia-cuda-runtime-cu11",
             "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu13"}  # fmt: skip

_SUFFIXED = re.compile(r".*-cu(?P<major>\d+)")

Get = Callable[..., Download]  # (url, *, keep, accept) -> what the GET gave


def release_cuda(metadata: bytes, arch: str | None) -> int | None:
    """The CUDA major a torch wheel's METADATA requires a runtime of (on Linux `arch`), or
    None where it requires none (a CPU build)."""
    headers = email.parser.BytesParser().parsebytes(metadata, headersonly=True)
    environment = {"extra": "", "sys_platform": "linux", "platform_system": "Linux"}
    if arch:
        environment["platform_machine"] = arch
    for line in headers.get_all("Requires-Dist") or []:
        try:
            requirement = Requirement(str(line))
        except InvalidRequirement:
            continue
        name = canonicalize_name(requirement.name)
        if name not in _RUNTIMES:
            continue
        try:
            if requirement.marker is not None and not requirement.marker.evaluate(environment):
                continue
        except UndefinedEnvironmentName:
            pass
        suffixed = _SUFFIXED.fullmatch(name)
        if suffixed is not None:
            return int(suffixed["major"])
        for spec in requirement.specifier:
            head = spec.version.split(".", 1)[0]
            if spec.operator in ("==", "~=", ">=", "===") and head.isdigit():
                return int(head)
    return None


def admitted(
    files: Sequence[ListedFile], requirement: Requirement, arch: str | None
) -> dict[Version, ListedFile]:
    """One Linux wheel (of `arch`, where given) per torch release `requirement` admits,
    preferring one whose PEP 658 metadata the index serves."""
    chosen: dict[Version, ListedFile] = {}
    pre = bool(requirement.specifier.prereleases)  # only where the requirement names one
    for listed in files:
        if listed.yanked:
            continue
        try:
            _, version, _, tags = parse_wheel_filename(listed.name)
        except InvalidWheelFilename:
            continue
        arches = {tag_arch(t.platform) for t in tags}
        if arch is not None and arch not in arches:
            continue
        if not any(a is not None for a in arches):
            continue
        if not requirement.specifier.contains(version, prereleases=pre):
            continue
        held = chosen.get(version)
        if held is None or (held.metadata_sha256 is None and listed.metadata_sha256):
            chosen[version] = listed
    return chosen


def torch_cuda_lookup(get: Get, index_url: str = PYPI_SIMPLE) -> TorchCuda:
    """A `TorchCuda` that reads `index_url`'s torch page once and each admitted release's
    metadata once (thread-safe)."""
    page_url = urljoin(index_url if index_url.endswith("/") else index_url + "/", "torch/")
    lock = threading.Lock()
    pages: dict[str, Sequence[ListedFile] | str] = {}
    cuda: dict[tuple[str, str | None], int | str | None] = {}

    def page() -> Sequence[ListedFile] | str:
        with lock:
            if page_url not in pages:
                got = get(page_url, keep=True, accept=ACCEPT)
                if not got.ok or got.body is None:
                    pages[page_url] = f"{page_url}: {got.error or f'HTTP {got.status}'}"
                else:
                    try:
                        listed = parse_project_page(got.body, got.content_type, page_url)
                        pages[page_url] = tuple(listed.values())
                    except ValueError as error:
                        pages[page_url] = f"{page_url}: not a project page ({error})"
            return pages[page_url]

    def one(listed: ListedFile, arch: str | None) -> int | str | None:
        key = (listed.url, arch)
        with lock:
            if key in cuda:
                return cuda[key]
        if listed.metadata_sha256 is None:
            found: int | str | None = f"{listed.name}: the index serves no PEP 658 metadata"
        else:
            got = get(listed.url + ".metadata", keep=True)
            if not got.ok or got.body is None:
                found = f"{listed.url}.metadata: {got.error or f'HTTP {got.status}'}"
            else:
                found = release_cuda(got.body, arch)
        with lock:
            cuda[key] = found
        return found

    def lookup(requirement: Requirement, arch: str | None) -> TorchCudaAnswer:
        files = page()
        if isinstance(files, str):
            return TorchCudaAnswer(index=index_url, cuda={}, error=files)
        majors: dict[Version, int | None] = {}
        for version, listed in sorted(admitted(files, requirement, arch).items()):
            found = one(listed, arch)
            if isinstance(found, str):
                return TorchCudaAnswer(index=index_url, cuda=majors, error=found)
            majors[version] = found
        return TorchCudaAnswer(index=index_url, cuda=majors)

    return lookup
