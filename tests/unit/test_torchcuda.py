"""release.inspection.torchcuda: a wheel whose own Requires-Dist: torch admits a torch of the
index built for another CUDA major than the libcudart its shared object needs is refused,
naming the release and its CUDA. The shared object is tests/data/elf's real one linked
against libcudart.so.12, its DT_NEEDED made to name libcudart.so.13 for the CUDA 13 case."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from packaging.version import Version

from release.inspection.torchcuda import other_cuda_problems, torch_requirements
from release.targets import CudaVersion
from release.toolchain.torchbuilds import BuiltFor, IndexTorches, TorchBuild

ELF = Path(__file__).resolve().parents[1] / "data" / "elf" / "x86_64-needs-cudart.so"
INDEX = "https://pypi.example/simple/"
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


def wheel(requires: str, *, cudart: int = 13) -> bytes:
    library = ELF.read_bytes().replace(b"libcudart.so.12", f"libcudart.so.{cudart}".encode())
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("k3_torch_ops/_C.abi3.so", library)
        archive.writestr(
            "k3_torch_ops-0.1.0.dist-info/METADATA",
            f"Metadata-Version: 2.4\nName: k3-torch-ops\nVersion: 0.1.0\n{requires}\n",
        )
        archive.writestr("k3_torch_ops-0.1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
        archive.writestr("k3_torch_ops-0.1.0.dist-info/RECORD", "")
    return buffer.getvalue()


def test_a_requirement_admitting_a_torch_of_another_cuda_is_refused_naming_it() -> None:
    problems = other_cuda_problems(wheel("Requires-Dist: torch>=2.10"), TORCHES, CudaVersion(13, 0))
    assert problems == [
        f"torch>=2.10 admits torch 2.10.0, built for CUDA 12.8 on {INDEX}: this wheel needs "
        "libcudart.so.13, so pip would install a torch it cannot load beside"
    ]


def test_a_requirement_from_the_first_torch_of_its_cuda_passes() -> None:
    data = wheel("Requires-Dist: torch>=2.11")
    assert other_cuda_problems(data, TORCHES, CudaVersion(13, 0)) == []


def test_the_needed_libcudart_decides_over_the_cell() -> None:
    """A CUDA 12 build (libcudart.so.12) may admit 2.10.0 and not 2.11.0."""
    data = wheel("Requires-Dist: torch>=2.10", cudart=12)
    assert other_cuda_problems(data, TORCHES, CudaVersion(13, 0)) == [
        f"torch>=2.10 admits torch 2.11.0, built for CUDA 13.0 on {INDEX}: this wheel needs "
        "libcudart.so.12, so pip would install a torch it cannot load beside"
    ]


def test_only_requirements_outside_extras_count() -> None:
    metadata = (
        b"Metadata-Version: 2.4\nName: x\nVersion: 1\nRequires-Dist: torch>=2.11\n"
        b'Requires-Dist: torch>=2.0; extra == "old"\nRequires-Dist: numpy\n'
    )
    assert [str(r) for r in torch_requirements(metadata)] == ["torch>=2.11"]
