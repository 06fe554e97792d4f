"""Which CUDA a torch release is built for, from its wheel's METADATA as an index serves it;
the releases a requirement admits, from its project page."""

from __future__ import annotations

from packaging.requirements import Requirement
from packaging.version import Version

from release.inspection.torchcuda import admitted, release_cuda
from release.remote.simple_index import ListedFile

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


def test_the_cuda_runtime_a_torch_wheel_requires() -> None:
    assert release_cuda(TORCH_2_10, "x86_64") == 12
    assert release_cuda(TORCH_2_11, "aarch64") == 13
    assert release_cuda(TORCH_CPU, "x86_64") is None
    windows_only = (
        b'Name: torch\nRequires-Dist: nvidia-cuda-runtime==13.0.96; sys_platform == "win32"\n'
    )
    assert release_cuda(windows_only, "x86_64") is None


def listed(name: str, *, metadata: bool = True, yanked: bool = False) -> ListedFile:
    return ListedFile(
        name=name,
        url=f"http://torch.test/files/{name}",
        sha256="0" * 64,
        size=None,
        hash_name="sha256",
        requires_python=None,
        metadata_sha256="1" * 64 if metadata else None,
        yanked=yanked,
    )


def test_one_linux_wheel_of_the_arch_per_admitted_release() -> None:
    files = [
        listed("torch-2.10.0-cp312-cp312-manylinux_2_28_x86_64.whl"),
        listed("torch-2.10.0-cp312-cp312-manylinux_2_28_aarch64.whl"),
        listed("torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl", metadata=False),
        listed("torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl"),
        listed("torch-2.11.0-cp312-cp312-win_amd64.whl"),
        listed("torch-2.12.0rc1-cp312-cp312-manylinux_2_28_x86_64.whl"),
        listed("torch-2.9.0-cp312-cp312-manylinux_2_28_x86_64.whl"),
        listed("torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl", yanked=True),
        listed("torch-2.11.0.tar.gz"),
    ]
    chosen = admitted(files, Requirement("torch>=2.10"), "x86_64")
    assert sorted(chosen) == [Version("2.10.0"), Version("2.11.0")]
    assert chosen[Version("2.11.0")].name == "torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    arm = admitted(files, Requirement("torch>=2.10"), "aarch64")
    assert sorted(arm) == [Version("2.10.0")]
