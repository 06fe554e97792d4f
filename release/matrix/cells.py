"""A CUDA version of matrix.yaml and the cells it expands to: its settings (its own, else the
defaults'), the rules on them, its destinations (release.matrix.copies), and one cell per CPU
architecture that the exclusions leave and its backend can build, built for its first copy.
release.matrix.load runs these for each version.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from release.backends import BuildRecipe, targets_problem
from release.errors import shown
from release.matrix.copies import CopyEntry, check_copies, copy_entries
from release.matrix.destination import Destination, IndexDestination
from release.matrix.model import Cell, Copy, Project
from release.matrix.rules import check_label, check_targets, cuda_build
from release.matrix.spec import (
    CudaSpec,
    DeviceCode,
    ExcludeSpec,
    ManylinuxSpec,
    MatrixSpec,
    PtxSpec,
    PythonAxisSpec,
    PythonSpec,
    TorchSpec,
    VersionSpec,
    WheelSettings,
)
from release.matrix.torchaxes import TORCH_PLACEHOLDER, TorchAxis, torch_axes, torch_label
from release.targets import Arch, CudaVersion, GpuTarget
from release.yamlspec import DocumentLoader, did_you_mean, join_path

T = TypeVar("T")

_MIN_MANYLINUX = (2, 17)


def _repeated(items: Sequence[T]) -> list[T]:
    """The items that occur more than once, each once, in order of first repetition."""
    seen: set[T] = set()
    out: dict[T, None] = {}
    for item in items:
        if item in seen:
            out[item] = None
        seen.add(item)
    return list(out)


def _setting(
    name: str, entry: CudaSpec, defaults: WheelSettings, cuda_path: str
) -> tuple[Any, str]:
    """A setting's value for a CUDA entry and the key path it came from."""
    value = getattr(entry, name)
    key = name.replace("_", "-")
    if value is not None:
        return value, join_path(cuda_path, key)
    return getattr(defaults, name), join_path("defaults", key)


@dataclass(frozen=True, kw_only=True)
class _Settings:
    """One CUDA version's wheel settings (its own, else the defaults'), each with the key path
    it came from."""

    key: str
    path: str
    arches: list[Arch]
    arches_path: str
    sms: list[GpuTarget]
    sms_path: str
    ptx: PtxSpec | None
    ptx_path: str
    manylinux: ManylinuxSpec
    manylinux_path: str
    nccl: VersionSpec | None
    torch: TorchSpec | None
    torch_path: str
    python: PythonAxisSpec | None
    python_path: str
    abi3: PythonSpec | None
    abi3_path: str
    torch_build: str | None
    torch_build_path: str
    compress_mode: str | None
    compress_mode_path: str
    device_code: DeviceCode


def _settings(
    key: str, entry: CudaSpec, defaults: WheelSettings, loader: DocumentLoader
) -> _Settings | None:
    """A CUDA version's settings, or None (reported) where a required one is set nowhere."""
    cuda_path = join_path("cuda", key)
    arches, arches_path = _setting("arches", entry, defaults, cuda_path)
    sms, sms_path = _setting("sms", entry, defaults, cuda_path)
    ptx_spec, ptx_path = _setting("ptx", entry, defaults, cuda_path)
    manylinux, manylinux_path = _setting("manylinux", entry, defaults, cuda_path)
    nccl, _ = _setting("nccl", entry, defaults, cuda_path)
    torch, torch_path = _setting("torch", entry, defaults, cuda_path)
    python, python_path = _setting("python", entry, defaults, cuda_path)
    abi3, abi3_path = _setting("abi3", entry, defaults, cuda_path)
    torch_build, torch_build_path = _setting("torch_build", entry, defaults, cuda_path)
    compress_mode, compress_mode_path = _setting("compress_mode", entry, defaults, cuda_path)
    device_code, device_code_path = _setting("device_code", entry, defaults, cuda_path)
    if device_code == "none":
        given = [
            ("sms", sms, sms_path),
            ("ptx", ptx_spec, ptx_path),
            ("compress-mode", compress_mode, compress_mode_path),
        ]
        _device_code_problems(key, device_code_path, given, loader)
        sms, ptx_spec, compress_mode = [], None, None
    for name, value in (("arches", arches), ("sms", sms), ("manylinux", manylinux)):
        if value is None:
            loader.problem(
                join_path(cuda_path, name),
                f"no {name!r} for CUDA {key} (set it here or under defaults, or declare "
                "device-code: none for a wheel without device code)"
                if name == "sms"
                else f"no {name!r} for CUDA {key} (set it here or under defaults)",
            )
    if arches is None or sms is None or manylinux is None:
        return None
    return _Settings(
        key=key,
        path=cuda_path,
        arches=arches,
        arches_path=arches_path,
        sms=sms,
        sms_path=sms_path,
        ptx=ptx_spec,
        ptx_path=ptx_path,
        manylinux=manylinux,
        manylinux_path=manylinux_path,
        nccl=nccl,
        torch=torch,
        torch_path=torch_path,
        python=python,
        python_path=python_path,
        abi3=abi3,
        abi3_path=abi3_path,
        torch_build=torch_build,
        torch_build_path=torch_build_path,
        compress_mode=compress_mode,
        compress_mode_path=compress_mode_path,
        device_code=device_code or "fatbin",
    )


def _device_code_problems(
    key: str,
    device_code_path: str,
    given: Sequence[tuple[str, object, str]],
    loader: DocumentLoader,
) -> None:
    """A CUDA version whose wheels carry no device code takes no GPU targets: each of
    `given` (name, value, key path) that is set is reported where it is set."""
    for name, value, path in given:
        if value is None:
            continue
        inherited = path.startswith("defaults") != device_code_path.startswith("defaults")
        where = f"for CUDA {key}: " if inherited else ""
        if not inherited:
            remedy = f"remove {name}"
        elif path.startswith("defaults"):
            remedy = f"set {name} under the CUDA versions that build device code"
        else:
            remedy = f"remove {name} here, or set device-code: fatbin here"
        loader.problem(
            path,
            f"{where}{name} is for device code, and device-code: none (at "
            f"{device_code_path}) says the wheels carry none ({remedy})",
        )


def cuda_versions(specs: Mapping[str, CudaSpec], loader: DocumentLoader) -> dict[str, CudaVersion]:
    """The CUDA versions of the matrix by their key; a key that is not one in its one
    spelling ("13.0", never "13.00": two keys are never one version) is reported and left
    out."""
    versions: dict[str, CudaVersion] = {}
    for key in specs:
        try:
            versions[key] = CudaVersion.parse(key)
        except ValueError as error:
            loader.problem(join_path("cuda", key), str(error))
    return versions


def check_excludes(
    excludes: Sequence[ExcludeSpec], cuda: Mapping[str, CudaSpec], loader: DocumentLoader
) -> None:
    """Each exclusion on its own: a CUDA version of the matrix, and not empty."""
    for index, exclude in enumerate(excludes):
        if exclude.cuda is not None and exclude.cuda not in cuda:
            hint = did_you_mean(exclude.cuda, list(cuda))
            loader.problem(
                join_path(join_path("exclude", index), "cuda"),
                f"CUDA {exclude.cuda} is not in the matrix{hint}",
            )
        if exclude.cuda is None and exclude.arch is None and exclude.sm is None:
            loader.problem(join_path("exclude", index), "an empty exclusion would drop everything")


def check_unused_excludes(
    excludes: Sequence[ExcludeSpec],
    used: set[int],
    cuda: Mapping[str, CudaSpec],
    loader: DocumentLoader,
) -> None:
    """After every cell: an exclusion of a CUDA version of the matrix that dropped nothing."""
    for index, exclude in enumerate(excludes):
        if index not in used and (exclude.cuda is None or exclude.cuda in cuda):
            loader.problem(join_path("exclude", index), "this exclusion matches no cell")


_COMPRESS_MODE_SINCE = CudaVersion(12, 8)


def _check_wheel_settings(settings: _Settings, cuda: CudaVersion, loader: DocumentLoader) -> None:
    """The manylinux floor, the CPU architectures and the compress mode of a CUDA version."""
    if settings.compress_mode is not None and cuda < _COMPRESS_MODE_SINCE:
        inherited = settings.compress_mode_path.startswith("defaults")
        where = f"for CUDA {cuda}: " if inherited else ""
        remedy = (
            f"set compress-mode under each CUDA version of {_COMPRESS_MODE_SINCE} or later "
            "instead of under defaults"
            if inherited
            else "remove it here"
        )
        loader.problem(
            settings.compress_mode_path,
            f"{where}nvcc has --compress-mode from CUDA {_COMPRESS_MODE_SINCE} on, not in "
            f"CUDA {cuda} ({remedy})",
        )
    manylinux = settings.manylinux
    if (manylinux.major, manylinux.minor) < _MIN_MANYLINUX:
        loader.problem(
            settings.manylinux_path,
            f"manylinux_{manylinux} is older than manylinux_2_17 (raise it)",
        )
    if not settings.arches:
        loader.problem(settings.arches_path, "no CPU architecture: list x86_64 and/or aarch64")
    for arch in _repeated(settings.arches):
        loader.problem(settings.arches_path, f"{arch} is listed more than once")


def _cell_sms(
    key: str,
    arch: str,
    sms: Sequence[GpuTarget],
    excludes: Sequence[ExcludeSpec],
    used: set[int],
) -> tuple[list[GpuTarget], list[GpuTarget]] | None:
    """The SMs of the cell (CUDA `key`, `arch`) after the exclusions and the SMs they
    removed, or None when one drops the whole cell; the exclusions that apply are added
    to `used`."""
    cell_sms = list(dict.fromkeys(sms))
    removed: list[GpuTarget] = []
    dropped = False
    for index, exclude in enumerate(excludes):
        if exclude.cuda not in (None, key) or exclude.arch not in (None, arch):
            continue
        if exclude.sm is None:
            dropped = True
            used.add(index)
        elif exclude.sm in cell_sms:
            cell_sms.remove(exclude.sm)
            removed.append(exclude.sm)
            used.add(index)
    return None if dropped else (cell_sms, removed)


def _arch_cells(
    *,
    project: Project,
    cuda: CudaVersion,
    entry: CudaSpec,
    settings: _Settings,
    recipe: BuildRecipe,
    copies: Sequence[tuple[CopyEntry, Destination]],
    excludes: Sequence[ExcludeSpec],
    used: set[int],
    axes: Sequence[TorchAxis],
    loader: DocumentLoader,
) -> list[Cell]:
    """A CUDA version's cells, one per CPU architecture that the exclusions leave and its
    backend can build, times its torch axes; each built once for its first copy and
    relabelled for the others."""
    cells: list[Cell] = []
    unbuildable_reported = False
    for arch in dict.fromkeys(settings.arches):
        after = _cell_sms(settings.key, arch, settings.sms, excludes, used)
        if after is None:
            continue
        cell_sms, excluded = after
        ptx_spec = settings.ptx
        ptx = ptx_spec.target if ptx_spec is not None else max(cell_sms, default=None)
        if ptx is not None and ptx.suffix:
            ptx = GpuTarget(ptx.number)
        host_only = settings.device_code == "none"
        if not cell_sms and ptx is None and not host_only:
            loader.problem(settings.sms_path, _no_targets(settings.key, arch, excluded))
            continue
        unbuildable = (
            None
            if host_only
            else targets_problem(recipe.backend, sorted(cell_sms), ptx, recipe.targets_env)
        )
        if unbuildable is not None:
            # one report per CUDA version, at the key its targets come from
            if not unbuildable_reported:
                loader.problem(settings.ptx_path, unbuildable)
                unbuildable_reported = True
            continue
        cells += [
            Cell(
                project=project,
                cuda=cuda,
                arch=arch,
                sms=tuple(sorted(cell_sms)),
                ptx=ptx,
                local_label=torch_label(copies[0][0].local_label, axis.torch),
                destination=copies[0][1],
                relabelled=tuple(
                    Copy(destination=d, local_label=torch_label(c.local_label, axis.torch))
                    for c, d in copies[1:]
                ),
                nccl=settings.nccl.version if settings.nccl is not None else None,
                manylinux=str(settings.manylinux),
                build=recipe,
                torch=axis.torch,
                torch_index=entry.torch_index if axis.torch is not None else None,
                python=axis.python,
                abi3=axis.abi3,
                newer_torch=settings.torch_build == "newer" and axis.torch is not None,
                compress_mode=settings.compress_mode,
                device_code=settings.device_code,
                excluded_sms=tuple(sorted(excluded)),
                toolkit_image=_toolkit_image(entry, arch),
            )
            for axis in axes
        ]
    return cells


def _no_targets(key: str, arch: str, excluded: Sequence[GpuTarget]) -> str:
    """Why a cell that carries device code has no target, with the way out."""
    if excluded:
        return f"the exclusions leave CUDA {key} {arch} with no SM and no PTX"
    return (
        f"CUDA {key} {arch} has no SM and no PTX: list the SMs to build, or, for wheels "
        "without device code (a JIT-first project that compiles its kernels at run time), "
        "declare device-code: none instead of sms and ptx"
    )


def _toolkit_image(entry: CudaSpec, arch: str) -> str | None:
    """cuda[...].toolkit-image of `arch`, where the matrix names one."""
    images = entry.toolkit_image
    image = None if images is None else images.x86_64 if arch == "x86_64" else images.aarch64
    return image.reference if image is not None else None


def version_cells(
    *,
    spec: MatrixSpec,
    project: Project,
    key: str,
    cuda: CudaVersion,
    destinations: Mapping[str, Destination],
    indexes: Mapping[str, IndexDestination],
    used: set[int],
    loader: DocumentLoader,
) -> list[Cell]:
    """The cells of one CUDA version, after the rules on its settings, targets, build, local
    labels and destinations; none where any of those is wrong."""
    entry = spec.cuda[key]
    settings = _settings(key, entry, spec.defaults or WheelSettings(), loader)
    if settings is None:
        return []
    ok = check_targets(
        cuda=cuda,
        key=key,
        sms=settings.sms,
        sms_path=settings.sms_path,
        ptx_spec=settings.ptx,
        ptx_path=settings.ptx_path,
        loader=loader,
    )
    _check_wheel_settings(settings, cuda, loader)
    recipe = cuda_build(spec.build, entry.build, settings.path, loader)
    entries = copy_entries(key, entry, loader)
    named = [(c, destinations.get(c.name)) for c in entries]
    axes = torch_axes(settings, entry, recipe.backend, named, loader)
    # every copy's label is checked, each problem reported
    labels = [
        check_label(_label_to_check(c.local_label, axes), c.label_path, loader) for c in entries
    ]
    labels_ok = all(labels)
    copies = check_copies(
        entries,
        defined=spec.destinations,
        destinations=destinations,
        indexes=indexes,
        loader=loader,
    )
    if not ok or not labels_ok or not copies or axes is None:
        return []
    cells = _arch_cells(
        project=project,
        cuda=cuda,
        entry=entry,
        settings=settings,
        recipe=recipe,
        copies=copies,
        excludes=spec.exclude or [],
        used=used,
        axes=axes,
        loader=loader,
    )
    _check_filename_lengths(cells, copies, key, loader)
    return cells


NAME_MAX = 255  # the bytes of one file's name on Linux's filesystems


def _check_filename_lengths(
    cells: Sequence[Cell], copies: Sequence[tuple[CopyEntry, Destination]], key: str,
    loader: DocumentLoader,
) -> None:  # fmt: skip
    """A wheel filename no filesystem can hold (past NAME_MAX bytes), at what made it long:
    a copy's local label, else the project's name or version. Once per copy."""
    reported: set[str] = set()
    for cell in cells:
        for (entry, _), copy in zip(copies, cell.copies, strict=True):
            filename = cell.as_copy(copy).wheel_filename
            if len(filename.encode()) <= NAME_MAX:
                continue
            parts = [
                ("its local-label", entry.label_path, copy.local_label or ""),
                ("the project's name", "project", cell.project.name),
                ("the project's version", join_path("cuda", key), str(cell.project.version)),
            ]
            what, path, text = max(parts, key=lambda part: len(part[2].encode()))
            if path in reported:
                continue
            reported.add(path)
            loader.problem(
                path,
                f"the wheel {shown(filename)} would be {len(filename.encode())} bytes, past the "
                f"{NAME_MAX} of a file's name, for {what} of {len(text)} characters: shorten it",
            )


def _label_to_check(label: str | None, axes: Sequence[TorchAxis] | None) -> str | None:
    """A copy's label as a wheel carries it: with its first torch put in (or a stand-in
    where the torch settings are wrong, which are reported already)."""
    if axes and axes[0].torch is not None:
        return torch_label(label, axes[0].torch)
    if axes is None and label is not None:
        return label.replace(TORCH_PLACEHOLDER, "0.0")
    return label
