"""Where a cell builds in GitHub Actions: the runner and, where one is needed, the container
(`release matrix --format github` gives both per cell; the reusable workflow reads them).

- x86_64 cells build on a hosted x86_64 runner;
- aarch64 cells on a hosted arm runner, in the manylinux container of the cell's level
  (nvcc drives the build machine's host compiler and does not cross-compile; the
  container's old glibc keeps the wheel installable where its manylinux level says);
- cells of an nvcc-driven backend (cmake, torch) of a CUDA version PyPI has no nvcc for
  (12.9) on the runner of their arch, in an image that carries that toolkit, by digest;
  unless they compile no device code (`device-code: none`): their CUDA_HOME of headers and
  libraries comes from PyPI like the rest of the toolchain.
"""

from __future__ import annotations

from dataclasses import dataclass

from release.backends.registry import backend_for
from release.errors import ToolchainError
from release.matrix import Cell
from release.toolchain.pins import (
    CUDA_TOOLKIT_IMAGES,
    HOSTED_RUNNERS,
    KNOWN_CUDA,
    MANYLINUX_IMAGE,
)


@dataclass(frozen=True, kw_only=True)
class Placement:
    runs_on: str
    container: str  # "" runs on the runner itself
    cuda_home: str  # the container's toolkit ("" where the toolchain comes from PyPI)


def needs_toolkit_image(cell: Cell) -> bool:
    """The cell's backend drives nvcc, it compiles device code, and PyPI has no nvcc for
    its CUDA version."""
    known = KNOWN_CUDA.get(str(cell.cuda))
    return (
        backend_for(cell.build.backend).needs_nvcc
        and not cell.host_only
        and (known is None or known.compiler != "nvcc")
    )


def placement(cell: Cell) -> Placement:
    runner = HOSTED_RUNNERS[cell.arch]
    if needs_toolkit_image(cell):
        toolkit = CUDA_TOOLKIT_IMAGES.get((str(cell.cuda), cell.arch, cell.manylinux))
        cuda_home = toolkit.cuda_home if toolkit is not None else f"/usr/local/cuda-{cell.cuda}"
        if cell.toolkit_image is not None:  # the matrix's own pin, over the tool's
            return Placement(runs_on=runner, container=cell.toolkit_image, cuda_home=cuda_home)
        if toolkit is None or toolkit.reference is None:
            named = f"{toolkit.name}:{toolkit.tag}" if toolkit is not None else "NAME:TAG"
            raise ToolchainError(
                f"{cell.id}: a {cell.build.backend} cell of CUDA {cell.cuda} builds in a "
                f"container image that carries the CUDA {cell.cuda} toolkit, and this "
                "version of the tool pins none by digest",
                hint=f'set cuda["{cell.cuda}"].toolkit-image.{cell.arch} in matrix.yaml to '
                f"the image by digest (`docker buildx imagetools inspect {named}` prints it; "
                f"its toolkit in {cuda_home}), or build the cell where a CUDA {cell.cuda} "
                "toolkit is installed (release build --cuda-home)",
            )
        return Placement(runs_on=runner, container=toolkit.reference, cuda_home=cuda_home)
    if cell.arch == "aarch64":
        image = MANYLINUX_IMAGE.format(level=cell.manylinux, arch=cell.arch)
        return Placement(runs_on=runner, container=image, cuda_home="")
    return Placement(runs_on=runner, container="", cuda_home="")
