"""torch's own axes of a CUDA version of matrix.yaml: its torch versions times its Pythons (or
one abi3 floor), the rules on them, and the `{torch}` of its local label. release.matrix.cells
asks for them while it expands a version into cells.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from packaging.version import Version

from release.backends import backend_for
from release.backends.recipe import BackendName
from release.credentials import has_credentials, url_shape_problem
from release.errors import shown
from release.matrix.copies import CopyEntry
from release.matrix.destination import Destination
from release.matrix.spec import CudaSpec, PythonAxisSpec, PythonSpec, TorchSpec
from release.yamlspec import DocumentLoader, join_path


class TorchSettings(Protocol):
    """The settings of a CUDA version that its torch axes read, each with its key path."""

    @property
    def key(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def torch(self) -> TorchSpec | None: ...
    @property
    def torch_path(self) -> str: ...
    @property
    def python(self) -> PythonAxisSpec | None: ...
    @property
    def python_path(self) -> str: ...
    @property
    def abi3(self) -> PythonSpec | None: ...
    @property
    def abi3_path(self) -> str: ...
    @property
    def torch_build(self) -> str | None: ...
    @property
    def torch_build_path(self) -> str: ...


@dataclass(frozen=True, kw_only=True)
class TorchAxis:
    """One point of a torch cell's own axes: its torch, its Python or abi3 floor (neither:
    `python: any`, a py3-none wheel)."""

    torch: Version | None = None
    python: str | None = None
    abi3: str | None = None


TORCH_PLACEHOLDER = "{torch}"


def torch_label(label: str | None, torch: Version | None) -> str | None:
    """The local label with `{torch}` put in (`cu129torch{torch}` -> `cu129torch2.11`)."""
    if label is None or torch is None:
        return label
    return label.replace(TORCH_PLACEHOLDER, f"{torch.major}.{torch.minor}")


def torch_axes(
    settings: TorchSettings,
    entry: CudaSpec,
    backend: BackendName,
    copies: Sequence[tuple[CopyEntry, Destination | None]],
    loader: DocumentLoader,
) -> list[TorchAxis] | None:
    """The torch x Python points of a CUDA version (one empty point for other backends), or
    None (reported) where its torch settings are wrong. `copies` are where its wheels go
    (with the destination of each that is defined), whose labels the torch versions need."""
    given = [
        (name, path)
        for name, value, path in (
            ("torch", settings.torch, settings.torch_path),
            ("python", settings.python, settings.python_path),
            ("abi3", settings.abi3, settings.abi3_path),
            ("torch-build", settings.torch_build, settings.torch_build_path),
            ("torch-index", entry.torch_index, join_path(settings.path, "torch-index")),
        )
        if value is not None
    ]
    if not backend_for(backend).torch_axes:
        for name, path in given:
            loader.problem(
                path,
                f"{name!r} is for the torch backend; CUDA {settings.key} builds with {backend}",
            )
        return [TorchAxis()] if not given else None
    return _torch_points(settings, entry, copies, loader)


def _torch_points(
    settings: TorchSettings,
    entry: CudaSpec,
    copies: Sequence[tuple[CopyEntry, Destination | None]],
    loader: DocumentLoader,
) -> list[TorchAxis] | None:
    ok = True
    if settings.torch is None:
        loader.problem(
            settings.path,
            f"CUDA {settings.key} builds with the torch backend but names no torch: set "
            '`torch: "X.Y.Z"` here or under defaults (the exact torch its wheels load beside; '
            "never whatever the index serves)",
        )
        ok = False
    if settings.python is None and settings.abi3 is None:
        loader.problem(
            settings.path,
            f"CUDA {settings.key}'s torch cells need `python:` (a cp3X-cp3X wheel per CPython, "
            'e.g. ["3.11", "3.12"], or `any`: one py3-none wheel for an extension that uses '
            "no Python C-API) or `abi3:` (one cp3X-abi3 wheel for a py_limited_api "
            'extension, e.g. "3.10")',
        )
        ok = False
    if settings.python is not None and settings.python.any and settings.abi3 is not None:
        loader.problem(
            settings.python_path,
            "python: any builds one py3-none wheel, abi3 one cp3X-abi3 wheel: keep the one "
            "the extension is (any: it uses no Python C-API; abi3: the limited API)",
        )
        ok = False
    if settings.abi3 is not None and len(settings.abi3.versions) != 1:
        loader.problem(settings.abi3_path, 'abi3 is one floor version, e.g. "3.10"')
        ok = False
    if (
        settings.abi3 is not None
        and settings.python is not None
        and len(settings.python.versions) > 1
    ):
        loader.problem(
            settings.python_path,
            "an abi3 wheel serves every CPython from its floor on: name one Python to build "
            "it with, or drop abi3 for a wheel per Python",
        )
        ok = False
    if entry.torch_index is not None and (problem := url_shape_problem(entry.torch_index)):
        loader.problem(
            join_path(settings.path, "torch-index"),
            f"{shown(entry.torch_index)} {problem} (the URL of a package index)",
        )
        ok = False
    elif entry.torch_index is not None and has_credentials(entry.torch_index):
        loader.problem(
            join_path(settings.path, "torch-index"),
            f"{shown(entry.torch_index)} holds credentials, which matrix.yaml (committed) and "
            "every build log would hold too: name an index that needs none",
        )
        ok = False
    versions = settings.torch.versions if settings.torch is not None else ()
    if not _torch_label_ok(settings, copies, versions, loader) or not ok:
        return None
    abi3 = settings.abi3.versions[0] if settings.abi3 is not None else None
    # `python: any` is one point without a Python: the py3-none wheel
    pythons: tuple[str | None, ...] = (
        settings.python.versions
        if settings.python is not None and settings.python.versions
        else (None,)
    )
    return [TorchAxis(torch=t, python=p, abi3=abi3) for t in versions for p in pythons]


def _torch_label_ok(
    settings: TorchSettings,
    copies: Sequence[tuple[CopyEntry, Destination | None]],
    versions: Sequence[Version],
    loader: DocumentLoader,
) -> bool:
    """Several torch versions of one CUDA version need `{torch}` in the label of each of
    its copies, and never go to PyPI (one torch per release there)."""
    if len(versions) < 2:
        return True
    refused = [
        problem
        for _, destination in copies
        if destination is not None
        and (problem := destination.torch_problem(len(versions), settings.key)) is not None
    ]
    if refused:
        loader.problem(settings.torch_path, refused[0])
        return False
    ok = True
    for copy, _ in copies:
        if TORCH_PLACEHOLDER in (copy.local_label or ""):
            continue
        loader.problem(
            copy.label_path if copy.local_label else settings.torch_path,
            f"CUDA {settings.key} builds torch {', '.join(map(str, versions))}, whose wheels "
            f"would share one filename: put {{torch}} in its local-label "
            f"(cu{settings.key.replace('.', '')}torch{{torch}} -> 0.1.0+cu"
            f"{settings.key.replace('.', '')}torch{versions[0].major}.{versions[0].minor})",
        )
        ok = False
    return ok
