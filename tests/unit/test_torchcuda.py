"""release.inspection.torchcuda: which CUDA a torch release is built for, read from PyPI's own
METADATA of torch 2.10.0 and 2.11.0 (tests/data/torch_index), from its requirements or from a
PyTorch index's local label; the releases of an index page, one file of the arch each, read
once a run; and what the inspection's `torch` rule (release.inspection.cudalibs) then says of
a wheel whose own Requires-Dist: torch admits a torch of another CUDA major than it links.
The index is served from memory through the `get` a reader is given (no sockets here; the
stand-in index of tests/integration/test_torch_builds.py serves it over HTTP)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from release.errors import ToolchainError
from release.inspection.cudalibs import torch_problems
from release.inspection.elffacts import ElfFacts
from release.inspection.torchcuda import (
    BuiltFor,
    IndexTorches,
    TorchBuild,
    TorchIndex,
    TorchIndexes,
    cuda_of_label,
    cuda_of_metadata,
    cuda_of_requirements,
)
from release.remote.httpclient import Download
from release.remote.simple_index import SIMPLE_JSON

DATA = Path(__file__).resolve().parents[1] / "data" / "torch_index"
INDEX = "https://pypi.example/simple/"

TORCH_2_10 = b"""Metadata-Version: 2.1
Name: torch
Version: 2.10.0
Requires-Dist: filelock
Requires-Dist: nvidia-cuda-runtime-cu12==12.8.90; platform_system == "Linux"
Requires-Dist: opt-einsum>=3.3; extra == "opt-einsum"
"""
TORCH_2_11 = b"""Metadata-Version: 2.1
Name: torch
Version: 2.11.0
Requires-Dist: cuda-toolkit[cublas,cudart,nvrtc]==13.0.2; platform_system == "Linux"
"""
TORCH_CPU = b"Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0+cpu\nRequires-Dist: sympy\n"


# - which CUDA a release is built for


def test_the_cuda_runtime_a_torch_wheel_requires() -> None:
    assert cuda_of_metadata(TORCH_2_10, "x86_64").major == 12
    assert cuda_of_metadata(TORCH_2_11, "aarch64").major == 13
    assert cuda_of_metadata(TORCH_CPU, "x86_64").major is None
    windows_only = (
        b'Name: torch\nRequires-Dist: nvidia-cuda-runtime==13.0.96; sys_platform == "win32"\n'
    )
    assert cuda_of_metadata(windows_only, "x86_64").major is None
    unparsed = (
        b"Name: torch\nRequires-Dist: not a requirement ===\nRequires-Dist: cuda-toolkit==13.0.2\n"
    )
    assert cuda_of_metadata(unparsed, None).major == 13


def test_pypis_torch_2_10_is_built_for_cuda_12_8_and_2_11_for_cuda_13() -> None:
    old = cuda_of_metadata((DATA / "torch-2.10.0.METADATA").read_bytes(), "x86_64", "3.11")
    new = cuda_of_metadata((DATA / "torch-2.11.0.METADATA").read_bytes(), "x86_64", "3.11")
    assert (old.major, old.version) == (12, "12.8")
    assert old.evidence == "nvidia-cuda-runtime-cu12==12.8.90"
    assert (new.major, new.version, new.evidence) == (13, "13.0", "cuda-toolkit==13.0.2")
    assert str(old) == "CUDA 12.8"


def test_requirements_that_do_not_apply_on_the_arch_say_nothing() -> None:
    """torch 2.10.0's CUDA wheels hold their nvidia-* requirements to x86_64: read for
    aarch64 they name no CUDA."""
    metadata = (DATA / "torch-2.10.0.METADATA").read_bytes()
    assert cuda_of_metadata(metadata, "aarch64").major is None


@pytest.mark.parametrize(
    ("requirements", "major", "version"),
    [
        (["nvidia-cuda-runtime==13.0.96; platform_system == 'Linux'"], 13, "13.0"),
        (["nvidia-cuda-runtime==13.*"], 13, "13"),
        (["filelock", "nvidia-cudnn-cu13==9.19.0.56"], 13, "13"),
        (["filelock", "sympy>=1.13.3"], None, ""),
        (["nvidia-cuda-runtime-cu12==12.8.90; extra == 'cuda'"], None, ""),
    ],
    ids=[
        "runtime-without-suffix",
        "runtime-major-only",
        "only-another-nvidia-cu13",
        "cpu",
        "under-an-extra",
    ],
)
def test_the_cuda_of_requirements(requirements: list[str], major: int | None, version: str) -> None:
    found = cuda_of_requirements([Requirement(r) for r in requirements], "x86_64")
    assert (found.major, found.version) == (major, version)


@pytest.mark.parametrize(
    ("label", "major", "version"),
    [("cu129", 12, "12.9"), ("cu130", 13, "13.0"), ("cu118", 11, "11.8"), ("cpu", None, "")],
)
def test_a_local_label_says_the_cuda(label: str, major: int | None, version: str) -> None:
    found = cuda_of_label(label)
    assert found is not None
    assert (found.major, found.version, found.evidence) == (major, version, f"its label +{label}")


def test_no_label_or_another_says_nothing() -> None:
    assert cuda_of_label(None) is None
    assert cuda_of_label("local1") is None


# - an index's page, read once


@dataclass
class Served:
    """An index in memory, answering GETs as release.remote.httpclient.fetch does; it
    records each URL asked for."""

    files: dict[str, tuple[bytes, str]] = field(default_factory=dict)  # url: (body, type)
    asked: list[str] = field(default_factory=list)

    def __call__(
        self,
        url: str,
        *,
        keep: bool = False,
        accept: str | None = None,
        byte_range: tuple[int, int] | None = None,
    ) -> Download:
        self.asked.append(url)
        if url not in self.files:
            return Download(status=404, url=url)
        body, content_type = self.files[url]
        return Download(
            status=200, url=url, body=body, content_type=content_type, size=len(body),
            sha256=hashlib.sha256(body).hexdigest(),
        )  # fmt: skip


def torch_page(
    wheels: dict[str, bytes | None], *, yanked: tuple[str, ...] = (), lying: bool = False
) -> Served:
    """A PEP 691 torch page of `wheels` (name: its METADATA, announced as PEP 658 core
    metadata; None: none announced), with the metadata files beside them."""
    served = Served()
    listed = []
    for name, metadata in wheels.items():
        url = f"{INDEX}files/{name}"
        entry: dict[str, object] = {"filename": name, "url": url, "hashes": {"sha256": "0" * 64},
                                    "yanked": name in yanked}  # fmt: skip
        if metadata is not None:
            digest = hashlib.sha256(b"other" if lying else metadata).hexdigest()
            entry["core-metadata"] = {"sha256": digest}
            served.files[url + ".metadata"] = (metadata, "text/plain")
        listed.append(entry)
    page = {"meta": {"api-version": "1.1"}, "name": "torch", "files": listed}
    served.files[f"{INDEX}torch/"] = (json.dumps(page).encode(), SIMPLE_JSON)
    return served


def test_one_linux_wheel_of_the_arch_per_admitted_release() -> None:
    served = torch_page(
        {
            "torch-2.10.0-cp312-cp312-manylinux_2_28_x86_64.whl": TORCH_2_10,
            "torch-2.10.0-cp312-cp312-manylinux_2_28_aarch64.whl": TORCH_2_10,
            "torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl": None,
            "torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl": TORCH_2_11,
            "torch-2.11.0-cp312-cp312-win_amd64.whl": TORCH_2_11,
            "torch-2.12.0rc1-cp312-cp312-manylinux_2_28_x86_64.whl": TORCH_2_11,
            "torch-2.9.0-cp312-cp312-manylinux_2_28_x86_64.whl": TORCH_2_10,
            "torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl": TORCH_2_11,
            "torch-2.11.0.tar.gz": None,
        },
        yanked=("torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl",),
    )
    index = TorchIndex(INDEX, served)
    torches = index.releases("x86_64", SpecifierSet(">=2.10"))
    assert [(str(b.version), b.built_for.major) for b in torches.builds] == [
        ("2.10.0", 12),
        ("2.11.0", 13),
    ]
    assert torches.builds[1].pythons == ("3.11", "3.12")
    # the file whose metadata the index serves stands for 2.11.0, not the cp311 one
    assert f"{INDEX}files/torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl.metadata" in (
        served.asked
    )
    arm = index.releases("aarch64", SpecifierSet(">=2.10"))
    assert [str(b.version) for b in arm.builds] == ["2.10.0"]
    pre = index.releases("x86_64", SpecifierSet(">=2.12.0rc1"))
    assert [str(b.version) for b in pre.builds] == ["2.12.0rc1"]


def test_an_index_is_read_once_however_many_ask() -> None:
    served = torch_page(
        {
            "torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl": TORCH_2_10,
            "torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl": TORCH_2_11,
        }
    )
    indexes = TorchIndexes(served)
    assert indexes.of(INDEX) is indexes.of(INDEX)
    index = indexes.of(INDEX)
    first = index.releases("x86_64", SpecifierSet(">=2.10"), python="3.11")
    again = index.releases("x86_64", SpecifierSet(">=2.10"), python="3.11")
    answer = index.cuda_of(Requirement("torch>=2.10"), "x86_64")
    assert first == again
    assert answer.cuda == {Version("2.10.0"): 12, Version("2.11.0"): 13}
    assert served.asked.count(f"{INDEX}torch/") == 1
    assert len(served.asked) == 3, served.asked  # the page, and one metadata file a release


def test_an_unreadable_index_is_a_toolchain_error_and_the_torch_rule_says_why() -> None:
    index = TorchIndex(INDEX, Served())
    with pytest.raises(ToolchainError) as raised:
        index.releases("x86_64", SpecifierSet(">=2.10"))
    assert raised.value.message == f"cannot read the torch releases of {INDEX} (it has no torch)"
    answer = index.cuda_of(Requirement("torch>=2.10"), "x86_64")
    assert answer.error == raised.value.message
    assert answer.cuda == {}


def test_metadata_that_does_not_match_its_announced_sha256_is_refused() -> None:
    served = torch_page({"torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl": TORCH_2_10},
                        lying=True)  # fmt: skip
    with pytest.raises(ToolchainError) as raised:
        TorchIndex(INDEX, served).releases("x86_64", SpecifierSet(">=2.10"))
    assert raised.value.message == (
        f"{INDEX}files/torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl.metadata does not "
        "match the sha256 the index gives for it"
    )


@pytest.mark.parametrize(
    ("metadata", "problem"),
    [
        (b"Name: torch\n" + b"Requires-Dist: x\n" * 10_001, "has more than 10000 header lines"),
        (b"Name: torch\n" + b"Requires-Dist: x\r" * 10_001, "has more than 10000 header lines"),
        (b"Name: torch\n\n" + b"x" * 8 * 2**20, "is over 8 MiB"),
    ],
)
def test_metadata_past_a_wheels_bounds_is_refused_unparsed(metadata: bytes, problem: str) -> None:
    # 4 million Requires-Dist lines in a 64 MiB metadata file took 2 GB to parse
    name = "torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    with pytest.raises(ToolchainError) as raised:
        TorchIndex(INDEX, torch_page({name: metadata})).releases("x86_64", SpecifierSet(">=2.10"))
    assert raised.value.message == f"the METADATA of {INDEX}files/{name} {problem}"


def test_credentials_in_the_index_url_are_never_shown() -> None:
    index = TorchIndex("https://user:s3cret@pypi.example/simple/", Served())
    assert index.shown == INDEX
    assert "s3cret" not in index.cuda_of(Requirement("torch>=2.10"), None).index


# - the torch rule on a wheel's requirement, against the index's releases

TORCHES = IndexTorches(
    index_url=INDEX,
    arch="x86_64",
    builds=tuple(
        TorchBuild(
            version=Version(version),
            built_for=BuiltFor(major=major, version=cuda, evidence="test"),
            pythons=("3.11",),
        )
        for version, major, cuda in (("2.10.0", 12, "12.8"), ("2.11.0", 13, "13.0"))
    ),
)


def linked(cudart: int = 13) -> list[ElfFacts]:
    """A stable-ABI extension's shared object as the torch rule reads it."""
    needed = ("libc10.so", "libtorch_cpu.so", f"libcudart.so.{cudart}")
    return [ElfFacts(member="k3_torch_ops/_C.abi3.so", machine="EM_X86_64", needed=needed)]


def test_the_cuda_of_each_release_a_requirement_admits() -> None:
    assert TORCHES.cuda_of(Requirement("torch>=2.10")).cuda == {
        Version("2.10.0"): 12,
        Version("2.11.0"): 13,
    }
    assert TORCHES.cuda_of(Requirement("torch>=2.11")).cuda == {Version("2.11.0"): 13}


def test_a_requirement_admitting_a_torch_of_another_cuda_is_refused_naming_it() -> None:
    problems, unchecked = torch_problems(
        linked(), ["torch>=2.10"], label=None, arch="x86_64", torch_cuda=TORCHES.cuda_of
    )
    assert [detail for _, detail in problems] == [
        f"requires torch>=2.10, which admits torch 2.10.0 (CUDA 12) on {INDEX}; "
        "k3_torch_ops/_C.abi3.so needs libcudart.so.13"
    ]
    assert unchecked is None


def test_a_requirement_from_the_first_torch_of_its_cuda_passes() -> None:
    problems, _ = torch_problems(
        linked(), ["torch>=2.11"], label=None, arch="x86_64", torch_cuda=TORCHES.cuda_of
    )
    assert problems == []


def test_the_linked_libcudart_decides_over_the_cell() -> None:
    """A CUDA 12 build (libcudart.so.12) may admit 2.10.0 and not 2.11.0."""
    problems, _ = torch_problems(
        linked(cudart=12), ["torch>=2.10"], label=None, arch="x86_64",
        torch_cuda=TORCHES.cuda_of,
    )  # fmt: skip
    assert [detail for _, detail in problems] == [
        f"requires torch>=2.10, which admits torch 2.11.0 (CUDA 13) on {INDEX}; "
        "k3_torch_ops/_C.abi3.so needs libcudart.so.12"
    ]
