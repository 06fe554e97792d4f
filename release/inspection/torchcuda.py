"""A torch wheel's own `Requires-Dist: torch` against the torch releases of its index: a
requirement that admits a torch built for another CUDA major than the wheel's lets pip
install the two together, and the import then fails (PyPI's torch 2.10.0 is built for CUDA
12.8; a CUDA 13 wheel that requires `torch>=2.10` resolves beside it and needs
`libcudart.so.13`).

The wheel's CUDA major is what its shared objects need (`libcudart.so.13`), else its cell's.
Pure: the wheel's bytes and the index's releases (release.toolchain.torchbuilds) in,
problems out.
"""

from __future__ import annotations

import re

from packaging.metadata import Metadata
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from release.inspection.torchabi import shared_objects
from release.targets import CudaVersion
from release.toolchain.torchbuilds import IndexTorches, other_cuda_admitted
from release.wheelfile import wheel_facts

_CUDART = re.compile(r"libcudart\.so\.(\d+)")


def torch_requirements(metadata: bytes) -> list[Requirement]:
    """The `Requires-Dist: torch` of a METADATA file that apply outside every extra (none
    where the file does not parse)."""
    try:
        requires = Metadata.from_email(metadata, validate=False).requires_dist or []
    except ValueError:
        return []
    return [
        r
        for r in requires
        if canonicalize_name(r.name) == "torch"
        and (r.marker is None or "extra" not in str(r.marker))
    ]


def needed_cuda(wheel_data: bytes) -> str | None:
    """The libcudart.so.N the wheel's shared objects need (the first), if any."""
    for shared in shared_objects(wheel_data):
        for needed in shared.needed:
            if _CUDART.fullmatch(needed):
                return needed
    return None


def other_cuda_problems(wheel_data: bytes, torches: IndexTorches, cuda: CudaVersion) -> list[str]:
    """Each `Requires-Dist: torch` of the wheel that admits a torch of the index built for
    another CUDA major than the wheel's, naming the release and its CUDA:
    `torch>=2.10 admits torch 2.10.0, built for CUDA 12.8; this wheel needs
    libcudart.so.13`."""
    metadata = wheel_facts(wheel_data).metadata or b""
    cudart = needed_cuda(wheel_data)
    match = _CUDART.fullmatch(cudart) if cudart is not None else None
    major = int(match.group(1)) if match is not None else cuda.major
    needs = f"needs {cudart}" if cudart is not None else f"is built for CUDA {cuda}"
    problems = []
    for requirement in torch_requirements(metadata):
        others = other_cuda_admitted(requirement, torches, major)
        if others:
            problems.append(
                f"{requirement} admits {'; '.join(map(str, others))} on {torches.index_url}: "
                f"this wheel {needs}, so pip would install a torch it cannot load beside"
            )
    return problems
