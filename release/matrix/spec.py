"""The document matrix.yaml is: these frozen dataclasses are its specification.

release.yamlspec reads their type hints to load a document (with file:line:col errors)
and to generate the JSON Schema, so the loader and the schema cannot disagree. The rules
across keys (which SM a CUDA version builds, one filename per release, ...) are
release.matrix.load's and release.matrix.cells'.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from packaging.version import Version

from release.backends import BuildSpec
from release.errors import shown
from release.matrix.compilecache import CompileCacheSpec
from release.targets import Arch, GpuTarget
from release.yamlspec import optional

# git-index: a directory of a git repository that lists a github destination's wheels
DestinationKind = Literal["pypi", "github", "s3", "git-index"]
Fallout = Literal["archive", "delete"]  # what happens to a nightly commit past `keep`
# nvcc's --compress-mode (CUDA 12.8 on): how the fatbin's device code is compressed
CompressMode = Literal["default", "size", "speed", "balance", "none"]
# which torch a stable-ABI torch cell may build against: the oldest its wheel admits, or a
# newer one on purpose
TorchBuildChoice = Literal["oldest", "newer"]
# what device code a cell's wheel carries: fatbins (cubins and PTX in its shared objects or
# as files), or none at all (a JIT-first project compiles its kernels at run time)
DeviceCode = Literal["fatbin", "none"]
RELEASE_VERSION = r"[0-9]+(\.[0-9]+)*"
PYTHON_VERSION = r"3\.(?:0|[1-9][0-9]?)"  # 3.12, never 3.012 or 3.09


@dataclass(frozen=True)
class PtxSpec:
    """A PTX target (an SM number) or `none` for no PTX."""

    target: GpuTarget | None

    @classmethod
    def from_yaml(cls, value: object) -> PtxSpec:
        if value is False or (isinstance(value, str) and value.strip().lower() == "none"):
            return cls(None)
        return cls(GpuTarget.from_yaml(value))

    @classmethod
    def yaml_schema(cls) -> dict[str, Any]:
        return {"anyOf": [GpuTarget.yaml_schema(), {"const": "none"}, {"const": False}]}


def _string(value: object, expected: str, remedy: str) -> str:
    """`value` where YAML read a string; else `expected EXPECTED, got VALUE (REMEDY)`, for
    the scalars written as strings (unquoted, YAML reads 2_28 or 2.30 as a number)."""
    if not isinstance(value, str):
        raise ValueError(f"expected {expected}, got {shown(value)} ({remedy})")
    return value


@dataclass(frozen=True)
class ManylinuxSpec:
    """A manylinux glibc level: `2_28` (or `manylinux_2_28`)."""

    major: int
    minor: int

    @classmethod
    def from_yaml(cls, value: object) -> ManylinuxSpec:
        text = _string(
            value, 'a quoted string like "2_28"', "YAML reads 2_28 unquoted as the number 228"
        )
        match = re.fullmatch(r"(?:manylinux_)?([0-9]+)_([0-9]+)", text)
        if match is None:
            raise ValueError(f'{shown(text)} is not a manylinux level (write it like "2_28")')
        major, minor = match.groups()
        if major.lstrip("0") != "2" or len(minor.lstrip("0")) > 2:
            # every glibc is 2.x, and a minor of three digits is centuries away
            raise ValueError(
                f"{shown(text)} names no glibc (a manylinux level is 2_N, N under 100: "
                'write it like "2_28")'
            )
        return cls(int(major), int(minor))

    @classmethod
    def yaml_schema(cls) -> dict[str, Any]:
        return {"type": "string", "pattern": r"^(manylinux_)?[0-9]+_[0-9]+$"}

    def __str__(self) -> str:
        return f"{self.major}_{self.minor}"


@dataclass(frozen=True)
class VersionSpec:
    """A PEP 440 version, written as a string (`2.30.7`)."""

    version: Version

    @classmethod
    def from_yaml(cls, value: object) -> VersionSpec:
        text = _string(value, 'a version string like "2.30.7"', "quote it")
        if not re.fullmatch(RELEASE_VERSION, text):
            raise ValueError(
                f'{shown(text)} is not a valid version (numbers and dots, e.g. "2.30.7")'
            )
        return cls(Version(text))

    @classmethod
    def yaml_schema(cls) -> dict[str, Any]:
        return {"type": "string", "pattern": f"^{RELEASE_VERSION}$"}


@dataclass(frozen=True)
class TorchSpec:
    """The torch a torch cell builds against: one exact version (`"2.11.0"`) or a list of
    them, each a cell of its own."""

    versions: tuple[Version, ...]

    @classmethod
    def from_yaml(cls, value: object) -> TorchSpec:
        items = value if isinstance(value, list) else [value]
        if not items:
            raise ValueError("an empty list: name at least one torch version")
        versions = tuple(VersionSpec.from_yaml(item).version for item in items)
        repeated = [str(v) for i, v in enumerate(versions) if v in versions[:i]]
        if repeated:
            raise ValueError(f"torch {repeated[0]} is listed more than once")
        return cls(versions)

    @classmethod
    def yaml_schema(cls) -> dict[str, Any]:
        one = VersionSpec.yaml_schema()
        return {"anyOf": [one, {"type": "array", "items": one, "minItems": 1}]}


@dataclass(frozen=True)
class PythonSpec:
    """CPython versions (`"3.11"`, or a list of them)."""

    versions: tuple[str, ...]

    @classmethod
    def from_yaml(cls, value: object) -> PythonSpec:
        return cls(_pythons(value))

    @classmethod
    def yaml_schema(cls) -> dict[str, Any]:
        one = {"type": "string", "pattern": f"^{PYTHON_VERSION}$"}
        return {"anyOf": [one, {"type": "array", "items": one, "minItems": 1}]}


@dataclass(frozen=True)
class PythonAxisSpec:
    """A torch cell's Pythons: CPython versions (`"3.11"`, or a list of them), a cp3X-cp3X
    wheel each, or `any`: one py3-none wheel for an extension that uses no Python C-API."""

    versions: tuple[str, ...]  # empty for `any`

    @property
    def any(self) -> bool:
        return not self.versions

    @classmethod
    def from_yaml(cls, value: object) -> PythonAxisSpec:
        if isinstance(value, str) and value.strip() == "any":
            return cls(())
        return cls(_pythons(value))

    @classmethod
    def yaml_schema(cls) -> dict[str, Any]:
        return {"anyOf": [*PythonSpec.yaml_schema()["anyOf"], {"const": "any"}]}


def _pythons(value: object) -> tuple[str, ...]:
    """CPython versions: one quoted `"3.11"` or a list of them, none repeated."""
    items = value if isinstance(value, list) else [value]
    if not items:
        raise ValueError("an empty list: name at least one CPython version")
    out: list[str] = []
    for item in items:
        if isinstance(item, str) and re.fullmatch(r"3\.0[0-9]+", item):
            minor = int(item[2:])
            raise ValueError(f'{shown(item)} is Python 3.{minor}: write it "3.{minor}"')
        if not isinstance(item, str) or not re.fullmatch(PYTHON_VERSION, item):
            raise ValueError(
                f'expected a quoted CPython version like "3.11", got {shown(item)} '
                "(YAML reads 3.10 unquoted as the number 3.1)"
            )
        if item in out:
            raise ValueError(f"Python {item} is listed more than once")
        out.append(item)
    return tuple(out)


IMAGE_BY_DIGEST = r"[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}"


@dataclass(frozen=True)
class ImageSpec:
    """A container image pinned by its digest
    (`quay.io/manylinux_cuda/manylinux_2_28_x86_64_cuda12_9@sha256:<64 hex>`, as `docker
    buildx imagetools inspect NAME:TAG` prints it): a tag can move under a release."""

    reference: str

    @classmethod
    def from_yaml(cls, value: object) -> ImageSpec:
        if not isinstance(value, str) or not re.fullmatch(IMAGE_BY_DIGEST, value):
            raise ValueError(
                f"{shown(value)} is not an image pinned by digest: write NAME@sha256:<64 hex> "
                "(docker buildx imagetools inspect NAME:TAG prints it)"
            )
        return cls(value)

    @classmethod
    def yaml_schema(cls) -> dict[str, Any]:
        return {"type": "string", "pattern": f"^{IMAGE_BY_DIGEST}$"}


@dataclass(frozen=True)
class ToolkitImageSpec:
    """The images, by arch, that carry a CUDA toolkit PyPI has no nvcc for."""

    x86_64: ImageSpec | None = field(
        default=None, metadata={"doc": "the x86_64 image", "key": "x86_64"}
    )
    aarch64: ImageSpec | None = optional("the aarch64 image")


@dataclass(frozen=True)
class WheelSettings:
    """Settings shared by the wheels of every CUDA version unless a version overrides them."""

    arches: list[Arch] | None = optional("CPU architectures")
    sms: list[GpuTarget] | None = optional("GPU targets with a cubin each: 75, 80, 90a, 100f")
    ptx: PtxSpec | None = optional("PTX target for GPUs newer than the SMs, or none")
    manylinux: ManylinuxSpec | None = optional('manylinux glibc level, e.g. "2_28"')
    nccl: VersionSpec | None = optional("NCCL version pinned for this CUDA major")
    torch: TorchSpec | None = optional(
        "torch backend: the exact torch version(s) to build against, a cell each"
    )
    python: PythonAxisSpec | None = optional(
        'torch backend: CPython versions, a cp3X-cp3X cell each ("3.11"), or any: one '
        "py3-none wheel for an extension that uses no Python C-API"
    )
    abi3: PythonSpec | None = optional(
        'torch backend: the py_limited_api floor ("3.10"): one cp310-abi3 wheel per cell '
        "instead of one per Python"
    )
    torch_build: TorchBuildChoice | None = optional(
        "torch backend, a libtorch stable-ABI build: oldest (default): `torch` must be the "
        "oldest torch its wheel admits on the cell's CUDA major; newer: `torch` names a newer "
        "one on purpose"
    )
    device_code: DeviceCode | None = optional(
        "the device code the wheels carry: fatbin (cubins for sms, PTX for ptx; the "
        "default) or none (a JIT-first project that compiles its kernels at run time: no "
        "sms and no ptx, and the inspection proves the wheel holds no device code)"
    )
    compress_mode: CompressMode | None = optional(
        "nvcc's --compress-mode for the fatbins (CUDA 12.8 and later): size for the "
        "smallest wheel, speed for the fastest load, none for no compression; "
        "default: each backend's own"
    )


@dataclass(frozen=True)
class CopySpec:
    """One copy of a CUDA version's wheels: where it goes and its local label there."""

    name: str = field(metadata={"doc": "a name under destinations"})
    local_label: str | None = optional(
        "PEP 440 local version label of the wheels of this copy, e.g. cu130 (none for PyPI)"
    )


@dataclass(frozen=True)
class CudaSpec(WheelSettings):
    """The wheels of one CUDA version."""

    destination: str | list[str | CopySpec] = field(
        default="",
        metadata={
            "doc": "a name under destinations, or a list of copies of one build, each a name "
            "or {name, local-label}: the wheel is built for the first and relabelled for "
            "each other"
        },
    )
    local_label: str | None = optional(
        "PEP 440 local version label, e.g. cu129 (with a list of copies: each copy's own)"
    )
    build: BuildSpec | None = optional("this CUDA version's build, over the release's")
    torch_index: str | None = optional(
        "the index this CUDA version's torch comes from "
        "(https://download.pytorch.org/whl/cu129); default: pip's index"
    )
    toolkit_image: ToolkitImageSpec | None = optional(
        "cmake and torch cells of a CUDA version PyPI has no nvcc for (12.9): the container "
        "image carrying that toolkit the reusable workflow builds them in, by arch and "
        "pinned by digest; default: the tool's own pins"
    )


@dataclass(frozen=True)
class DestinationSpec:
    """Where a variant's wheels are published."""

    kind: DestinationKind
    repository_url: str | None = optional("pypi: upload URL")
    index_url: str | None = optional("the simple index pip installs from")
    repository: str | None = optional("github, git-index: owner/name")
    tag: str | None = optional("github: tag template, v{version}")
    api_url: str | None = optional("github: REST API base URL (GitHub Enterprise)")
    token_secret: str | None = optional(
        "github, git-index: the repository secret, and the environment variable the tool "
        "reads, holding the token that writes there (default: GITHUB_TOKEN, the job's own)"
    )
    index: str | None = optional(
        "github: the git-index destination that lists its wheels (default: the index on "
        "GitHub Pages at index-url)"
    )
    url: str | None = optional(
        "git-index: the git repository's URL, for one not on github.com (instead of repository)"
    )
    branch: str | None = optional("git-index: the branch the index is committed to (gh-pages)")
    directory: str | None = optional(
        "git-index: the directory of the repository the index is in, one folder per local "
        'label under it (default ".": the root)'
    )
    max_file_size_mib: int | None = optional("largest file the destination accepts, MiB")
    max_project_size_gib: int | None = optional(
        "the most a project may hold there, GiB (pypi default 10; github: no limit)"
    )
    max_growth_percent: int | None = optional(
        "`release plan` fails when a wheel grew more than this since the previous release"
    )
    bucket: str | None = optional("s3: the bucket")
    prefix: str | None = optional("s3: the key prefix of this project's wheels (k3-kernels/)")
    endpoint: str | None = optional(
        "s3: the S3 API's URL, for storage other than AWS (Cloudflare R2, MinIO)"
    )
    region: str | None = optional("s3: the region (default: auto)")


@dataclass(frozen=True)
class NightlySpec:
    """Per-commit builds between releases, under a dev version, on an s3 destination."""

    destination: str = field(default="", metadata={"doc": "the name of an s3 destination"})
    keep: int | None = optional("how many commits stay installable (default 60)")
    keep_list: list[str] | None = optional(
        "nightly versions that are never pruned (0.1.1.dev1733212345)"
    )
    keep_list_object: str | None = optional(
        "a key under the destination's prefix whose lines name more versions never pruned "
        "(keep-list.txt): users add a pin there"
    )
    fallout: Fallout | None = optional(
        "a commit past `keep`: archive (its wheels go under archive-prefix) or delete "
        "(default archive)"
    )
    archive_prefix: str | None = optional(
        "where archived wheels go, under the destination's prefix (default archive/)"
    )


@dataclass(frozen=True)
class ExcludeSpec:
    """Drops the matching cells, or with `sm` only that SM from them."""

    cuda: str | None = None
    arch: Arch | None = None
    sm: GpuTarget | None = None


@dataclass(frozen=True)
class GpuRunnerSpec:
    """A CI runner with a GPU: its labels (`runs-on`) and the SMs its GPUs have."""

    labels: list[str] = field(metadata={"doc": "the runner's labels, as `runs-on` takes them"})
    sms: list[GpuTarget] = field(metadata={"doc": "the SMs of its GPUs, e.g. [90]"})
    arch: Arch = field(default="x86_64", metadata={"doc": "its CPU architecture"})


@dataclass(frozen=True)
class GpuGateSpec:
    """GPU tests that must pass on the built wheels before anything is published."""

    runners: list[GpuRunnerSpec] = field(metadata={"doc": "where the GPU tests run"})
    command: str = field(
        metadata={
            "doc": "the test command, from the repository root: {wheel} is the wheel's path "
            "(a torch cell's wheel is installed, beside its torch, in the venv the command "
            "runs in: there it may be left out), {expect_arch} the __CUDA_ARCH__ a PTX-only "
            "build must report (empty otherwise), {torch} a torch cell's torch version"
        }
    )


@dataclass(frozen=True)
class MatrixSpec:
    """The release matrix of a CUDA kernel project."""

    project: str = field(metadata={"doc": "directory of the kernel project (pyproject.toml)"})
    cuda: dict[str, CudaSpec] = field(metadata={"doc": "one entry per CUDA version"})
    destinations: dict[str, DestinationSpec] = field(metadata={"doc": "named publish targets"})
    defaults: WheelSettings | None = None
    exclude: list[ExcludeSpec] | None = None
    build: BuildSpec | None = optional("how the kernel project is built (default: release)")
    gpu_gate: GpuGateSpec | None = optional("GPU tests on GPU runners before publishing")
    compile_cache: CompileCacheSpec | None = optional(
        "where compiles keep their objects (sccache's storage): local, s3, github-actions"
    )
    nightly: NightlySpec | None = optional(
        "the nightly channel: every commit's wheels under a dev version on an s3 destination"
    )
