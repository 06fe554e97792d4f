"""The torch a libtorch stable-ABI cell builds against by default, and the lower bound of its
wheel's torch requirement: the oldest torch the wheel admits on the cell's CUDA major, which
is the release TORCH_TARGET_VERSION names raised to the first torch on the cell's index built
for that major (PyPI's torch 2.10.0 is built for CUDA 12.8, 2.11.0 is its first on CUDA 13;
which CUDA each is built for is release.inspection.torchcuda's, read from the index). A build
against another torch is refused, unless matrix.yaml says a newer one is on purpose.

Pure: the index's releases in, the choice and its reason out.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from release.inspection.torchcuda import IndexTorches, TorchBuild


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
        f"for {torches.arch or 'Linux'} ({has})"
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
