"""Where a CUDA version's wheels go: its `destination`, one name (with the version's
`local-label`) or a list of copies, each a name or `{name, local-label}`.

The copies of one CUDA version are one build: its first copy's wheel is built, and each
other copy is that wheel relabelled (sgl-project's sgl-deep-gemm: CUDA 13.0 plain on PyPI
and `+cu130` on a GitHub release that a committed index lists). The rules here hold each
copy: a defined destination that takes wheels, no label on PyPI, a label where a git index
lists it (one folder per label), and no two copies of one filename (a label per copy: the
manifest records one file per name).
release.matrix.cells runs them for each CUDA version.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from release.errors import shown
from release.matrix.destination import Destination, IndexDestination
from release.matrix.spec import CopySpec, CudaSpec, DestinationSpec
from release.yamlspec import DocumentLoader, did_you_mean, join_path


@dataclass(frozen=True, kw_only=True)
class CopyEntry:
    """One copy as matrix.yaml writes it, with the key paths its problems are reported at."""

    name: str
    local_label: str | None
    path: str  # the copy's key path: cuda["13.0"].destination[1]
    label_path: str  # its label's: cuda["13.0"].destination[1].local-label


def copy_entries(key: str, entry: CudaSpec, loader: DocumentLoader) -> list[CopyEntry]:
    """The copies a CUDA version names, in order; none (reported) where its `destination`
    is missing, an empty list, or a list beside the version's own `local-label`."""
    cuda_path = join_path("cuda", key)
    path = join_path(cuda_path, "destination")
    label_path = join_path(cuda_path, "local-label")
    given = entry.destination
    if isinstance(given, str):
        if not given:
            loader.problem(path, f"required key 'destination' is missing for {key}")
            return []
        return [
            CopyEntry(name=given, local_label=entry.local_label, path=path, label_path=label_path)
        ]
    if not given:
        loader.problem(path, "an empty list: name at least one destination")
        return []
    if entry.local_label is not None:
        loader.problem(
            label_path,
            "with a list of destinations each copy has its own label: write "
            f"{{name: NAME, local-label: {entry.local_label}}} in the list and remove it here",
        )
        return []
    out = []
    for index, item in enumerate(given):
        item_path = join_path(path, index)
        if isinstance(item, CopySpec):
            out.append(
                CopyEntry(
                    name=item.name,
                    local_label=item.local_label,
                    path=item_path,
                    label_path=join_path(item_path, "local-label"),
                )
            )
        else:
            out.append(CopyEntry(name=item, local_label=None, path=item_path, label_path=item_path))
    return out


def check_copies(
    copies: Sequence[CopyEntry],
    *,
    defined: Mapping[str, DestinationSpec],
    destinations: Mapping[str, Destination],
    indexes: Mapping[str, IndexDestination],
    loader: DocumentLoader,
) -> list[tuple[CopyEntry, Destination]] | None:
    """Each copy with its destination, or None where any copy is wrong (each reported)."""
    out: list[tuple[CopyEntry, Destination]] = []
    ok = True
    seen: dict[tuple[str, str | None], CopyEntry] = {}
    labels: dict[str | None, CopyEntry] = {}
    for copy in copies:
        problem = _copy_problem(copy, defined, destinations, indexes)
        if problem is not None:
            loader.problem(*problem)
            ok = False
            continue
        twin = seen.setdefault((copy.name, copy.local_label), copy)
        if twin is not copy:
            label = f"+{copy.local_label}" if copy.local_label else "without a label"
            loader.problem(
                copy.path,
                f"{copy.name!r} {label} is listed twice: both copies would send the same "
                f"file to it (remove one, or give them different local labels)",
            )
            ok = False
            continue
        same_file = labels.setdefault(copy.local_label, copy)
        if same_file is not copy:
            label = f"+{copy.local_label}" if copy.local_label else "without a label"
            loader.problem(
                copy.label_path if copy.local_label else copy.path,
                f"{copy.name!r} {label} would be the very file of the copy for "
                f"{same_file.name!r}: each copy of one build is its own file, a label per "
                "copy (give this one another local-label)",
            )
            ok = False
            continue
        destination = destinations.get(copy.name)
        if destination is None:  # defined, but its own problems are reported
            ok = False
            continue
        out.append((copy, destination))
    return out if ok else None


def _copy_problem(
    copy: CopyEntry,
    defined: Mapping[str, DestinationSpec],
    destinations: Mapping[str, Destination],
    indexes: Mapping[str, IndexDestination],
) -> tuple[str, str] | None:
    """What is wrong with one copy (its key path and the message), or None: a name not
    defined, or what its destination's kind says of the copy (release.matrix.destination:
    `cuda_problem`)."""
    if copy.name not in defined:
        hint = did_you_mean(copy.name, list(defined))
        known = ", ".join(defined) or "none"
        return copy.path, f"unknown destination {shown(copy.name)}{hint} (defined: {known})"
    target = destinations.get(copy.name) or indexes.get(copy.name)
    refused = target.cuda_problem(copy.local_label) if target is not None else None
    if refused is None:
        return None
    key, why = refused
    return (copy.label_path if key == "local-label" else copy.path), why
