"""The indexes one `release publish` writes: asked first, before the release's first upload,
whether each index that lists a destination (a git index) can take its pages
(`check_indexes`), then regenerated whole from every release its destinations hold
(`regenerate_indexes`): to `--index-dir` (and a Pages branch), or one commit of a git index.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from release.destinations.index import (
    IndexFile,
    foreign_entry,
    one_per_name,
    render_index,
    write_index,
)
from release.destinations.reach import Reach
from release.destinations.registry import kind_of
from release.errors import ConfigError, PublishError, one_line
from release.publish.pages import check_pages, commit_pages
from release.records.manifest import DestinationRef, Manifest
from release.remote.gitindex import InTheWay

if TYPE_CHECKING:
    from release.publish.run import PublishOutcome, PublishSettings


@dataclass(frozen=True, kw_only=True)
class IndexOutcome:
    label: str
    url: str | None  # where pip finds it: <index base>/<label>/
    where: str  # where it was written: its directory, or a git index's remote and folder
    files: tuple[IndexFile, ...]
    commit: str | None = None  # the commit it is in, on a git index


def check_indexes(
    outcome: PublishOutcome, reach: Reach, *, dry_run: bool = False
) -> dict[str, PublishError]:
    """Each index that lists a destination of the plan (a git index), asked before the
    first upload whether its pages can be written there: PublishError where they cannot
    (the release stays unpublished, rather than public without its index). A dry run
    gets back, by index name, the ones it could not reach, to show as not asked; what is
    in the way fails it too."""
    labels: dict[str, set[str]] = {}
    for item in outcome.plans:
        if item.destination.index is not None:
            labels.setdefault(item.destination.index, set()).update(
                d.entry.local_label for d in item.plan.decisions if d.entry.local_label
            )
    manifest = outcome.manifest
    unreached: dict[str, PublishError] = {}
    for index in manifest.indexes:
        if not labels.get(index.name):
            continue
        try:
            kind_of(index.kind).check_index(
                index, sorted(labels[index.name]), reach, project=manifest.project
            )
        except PublishError as error:
            if dry_run and not isinstance(error, InTheWay):
                unreached[index.name] = error
                continue
            unsent = f"nothing of {manifest.project} {manifest.version} was uploaded anywhere"
            hint = f"{error.hint}; {unsent}" if error.hint else unsent
            raise PublishError(error.message, hint=hint) from None
    return unreached


def check_pages_index(
    destinations: Sequence[DestinationRef], settings: PublishSettings, reach: Reach
) -> None:
    """Where `destinations` (those published) put wheels in the index of `--index-dir`,
    asked before anything is uploaded, a dry run included: ConfigError where that directory
    is not one release may replace whole (it is, or holds, the dist directory or the
    working directory; it holds anything an index never holds, or is a symbolic link), or
    where `--pages-branch`, `--pages-repo` or `--pages-remote` would fail."""
    if not any(
        d.index is None and kind_of(d.kind).index_source(d, reach) is not None for d in destinations
    ):
        return
    directory = settings.index_dir or settings.dist / "index"
    option = "--index-dir" if settings.index_dir else "--index-dir (default <dist>/index)"
    problem = _replaced_problem(directory, settings.dist)
    if problem is not None:
        raise ConfigError(
            [one_line(f"{option} {directory}: {problem}")],
            hint="release replaces the index directory whole, deleting what is in it: give a "
            "new or empty directory, or one holding only an index release wrote",
        )
    if settings.pages_branch:
        check_pages(
            settings.pages_repo or Path.cwd(), branch=settings.pages_branch,
            environ=reach.environ, push_remote=settings.pages_remote,
        )  # fmt: skip


def _replaced_problem(directory: Path, dist: Path) -> str | None:
    """Why replacing `directory` whole would delete what is not an index's, or None."""
    if not directory.is_symlink():
        for what, kept in (("the dist directory", dist), ("the working directory", Path.cwd())):
            if kept.resolve().is_relative_to(directory.resolve()):
                is_it = "is" if kept.resolve() == directory.resolve() else "holds"
                return f"{is_it} {what} ({kept})"
    return foreign_entry(directory)


def nccl_tree(manifest: Manifest, dist: Path) -> dict[str, bytes]:
    """The NCCL files of this release, as they sit in the index (`nccl/cu12.txt`)."""
    return {f"nccl/{name}": (dist / name).read_bytes() for name in manifest.nccl_files}


def regenerate_indexes(
    outcome: PublishOutcome, settings: PublishSettings, reach: Reach
) -> tuple[tuple[IndexOutcome, ...], list[str]]:
    """The indexes written, and the assets named like wheels they left out, said why: the
    index lists what each destination's kind says it lists of it (every GitHub release of
    the repository), regenerated whole; nothing is written where no kind lists anything.
    The destinations a git index lists (their `index`) go there, one commit; the others to
    `--index-dir` (and `--pages-branch`)."""
    groups: dict[str | None, dict[str, DestinationRef]] = {}
    for item in outcome.plans:
        source = kind_of(item.destination.kind).index_source(item.destination, reach)
        if source is not None:
            groups.setdefault(item.destination.index, {}).setdefault(source, item.destination)
    indexes: list[IndexOutcome] = []
    left_out: list[str] = []
    refs = {i.name: i for i in outcome.manifest.indexes}
    for listed_by, sources in groups.items():
        held: list[IndexFile] = []
        for destination in sources.values():
            kind = kind_of(destination.kind)
            found, skipped = kind.index_files(destination, reach, outcome.manifest.project)
            held += found
            left_out += skipped
        files = _one_per_name(held)
        first = next(iter(sources.values()))
        base = kind_of(first.kind).index_base(first, reach)
        if listed_by is None:
            where = _write_pages(files, outcome.manifest, settings, reach)
            indexes += _outcomes(files, outcome.manifest, base, where=str(where), local=True)
        else:
            index = refs[listed_by]
            written = kind_of(index.kind).push_index(
                index, _rendered(files), reach,
                project=outcome.manifest.project, version=outcome.manifest.version,
            )  # fmt: skip
            indexes += _outcomes(
                files, outcome.manifest, base, where=written.where, commit=written.commit
            )
    return tuple(indexes), left_out


def _one_per_name(held: Sequence[IndexFile]) -> dict[str, IndexFile]:
    """Every file the destinations hold, one per name, before any page is written: a name
    held twice with other bytes stops the index (exit 5), naming both URLs."""
    try:
        return one_per_name(held)
    except ValueError as error:
        raise PublishError(
            one_line(f"cannot build the index: {error}"),
            hint="pip takes one file per name: delete or rename one of the two assets, then "
            "run release publish again (it uploads nothing twice)",
        ) from None


def _rendered(
    files: Mapping[str, IndexFile], extra: Mapping[str, bytes] | None = None
) -> dict[str, bytes]:
    try:
        return render_index(list(files.values()), extra)
    except ValueError as error:
        raise PublishError(f"cannot build the index: {error}") from None


def _write_pages(
    files: Mapping[str, IndexFile], manifest: Manifest, settings: PublishSettings, reach: Reach
) -> Path:
    """The index of `files` with the NCCL pins, written to `--index-dir` (and committed to
    `--pages-branch`); the directory."""
    tree = _rendered(files, nccl_tree(manifest, settings.dist))
    directory = settings.index_dir or settings.dist / "index"
    write_index(tree, directory)
    if settings.pages_branch:
        commit_pages(
            directory,
            repo=settings.pages_repo or Path.cwd(),
            branch=settings.pages_branch,
            message=f"index for {manifest.project} {manifest.version}",
            environ=reach.environ,
            push_remote=settings.pages_remote,
        )
    return directory


def _outcomes(
    files: Mapping[str, IndexFile],
    manifest: Manifest,
    base: str | None,
    *,
    where: str,
    local: bool = False,
    commit: str | None = None,
) -> list[IndexOutcome]:
    """One outcome per label of `files`, with this project's files under it."""
    labels = sorted({f.label or "" for f in files.values()})
    project = canonicalize_name(manifest.project)
    return [
        IndexOutcome(
            label=label,
            url=f"{base}{label}/" if base else None,
            where=str(Path(where) / label) if local else where.replace("<label>", label),
            files=tuple(
                sorted(
                    (f for f in files.values() if f.label == label and f.project == project),
                    key=lambda f: f.filename,
                )
            ),
            commit=commit,
        )
        for label in labels
    ]
