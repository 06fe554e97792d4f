"""The project's source distribution: built once per release by the build of the default
variant's first cell (`release build --sdist`), through the project's own PEP 517 backend
(`python -m build --sdist`), then written again with fixed metadata so that the same commit
gives the same bytes: members sorted by name, dated SOURCE_DATE_EPOCH (none later), owned by
0:0 with no names, modes 0644 or 0755, and a gzip header without a time or a file name.
Backends differ in what they fix (setuptools keeps the files' own times, a tarfile-written
gzip header has the time of the build); the members' names and contents are the backend's.
Before it is written it is checked as plan, publish and verify check it
(release.records.sdistfile), and no member may have come through a symlink out of the
project (`linked_out`): a backend follows links, and would ship what they point to.
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path, PurePosixPath

from release import proc
from release.building.pipeline import build_command
from release.building.settings import BuildSettings
from release.credentials import without_credentials
from release.errors import BuildError
from release.fsutil import sha256_file, write_atomic
from release.matrix import Cell
from release.records.manifest import (
    DestinationRef,
    Manifest,
    SdistEntry,
    sdist_cell_of,
    sdist_filename,
)
from release.records.sdistfile import SDIST_SUFFIX, sdist_archive_problems
from release.toolchain.projectmeta import hook_environment

# ---------------------------------------------------------------- pure core


def _mode(info: tarfile.TarInfo) -> int:
    return 0o755 if info.isdir() or info.mode & 0o111 else 0o644


def normalised(raw: bytes, epoch: int) -> bytes:
    """The sdist `raw` with the fixed metadata of the module doc; its files' bytes as they
    were. Links and devices are refused: an sdist holds files and directories."""
    members: list[tuple[tarfile.TarInfo, bytes | None]] = []
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:gz") as source:
        for info in source.getmembers():
            if not (info.isfile() or info.isdir()):
                raise ValueError(f"{info.name}: not a file or a directory")
            data = source.extractfile(info).read() if info.isfile() else None  # type: ignore[union-attr]
            members.append((info, data))
    tar_bytes = io.BytesIO()
    with tarfile.open(fileobj=tar_bytes, mode="w", format=tarfile.PAX_FORMAT) as target:
        for info, data in sorted(members, key=lambda m: m[0].name):
            clean = tarfile.TarInfo(info.name)
            clean.type, clean.mode = info.type, _mode(info)
            clean.mtime = min(int(info.mtime), epoch)
            clean.uid = clean.gid = 0
            clean.uname = clean.gname = ""
            clean.size = len(data) if data is not None else 0
            target.addfile(clean, io.BytesIO(data) if data is not None else None)
    packed = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=packed, mtime=0, compresslevel=9) as gz:
        gz.write(tar_bytes.getvalue())
    return packed.getvalue()


def linked_out(raw: bytes, project: Path) -> str | None:
    """Which member of the sdist `raw` (checked by `sdist_archive_problems`) the build took from
    outside `project` through a symlink in it (a linked directory's files, or a linked
    file), naming the link; None where none was. A member the build made (PKG-INFO) is not
    in the tree, and a link that stays inside the project is followed as any backend does."""
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:gz") as tar:
        names = tar.getnames()
    root = project.resolve()
    outside: dict[Path, bool] = {}
    for name in names:
        here = project
        for part in PurePosixPath(name).parts[1:]:
            here = here / part
            if here not in outside:
                outside[here] = here.is_symlink() and not _inside(here, root)
            if outside[here]:
                return f"{name} is {here} -> {os.readlink(here)}, a symlink out of {project}"
    return None


def _inside(link: Path, root: Path) -> bool:
    try:
        return link.resolve().is_relative_to(root)
    except (OSError, RuntimeError):  # a loop: nothing was read through it
        return True


# ---------------------------------------------------------------- edge: the build


def sdist_environment(base: Mapping[str, str], python: str, epoch: int) -> dict[str, str]:
    """A build's environment (pipeline.cell_environment) without a toolchain: an sdist
    compiles nothing."""
    env = {k: v for k, v in without_credentials(base).items() if not k.startswith("RELEASE_")}
    env["PATH"] = f"{Path(python).parent}:{env.get('PATH', '')}".rstrip(":")
    env["SOURCE_DATE_EPOCH"] = str(epoch)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def build_sdist(settings: BuildSettings, cell: Cell, log: Path) -> SdistEntry:
    """Build the sdist into settings.out and return its manifest entry. A torch cell's runs
    in that cell's torch environment without isolation, as its wheel does: a setup.py that
    imports torch needs it for an sdist too. It gets what the cell's build sets that a
    setup.py reads (`hook_environment`: TORCH_CUDA_ARCH_LIST, CUDA_HOME, build.env): a setup.py
    lists its CUDA sources only when its force-CUDA switch is on, and an sdist made without it
    would lack them."""
    project = settings.matrix.project
    version = str(project.version)
    filename = sdist_filename(project.name, version)
    environment = settings.environments.get(cell.id)
    python = str(environment.python) if environment is not None else settings.python
    env = sdist_environment(settings.environ, python, settings.epoch)
    env.update(hook_environment(cell, environment.cuda_home if environment is not None else None))
    with tempfile.TemporaryDirectory(prefix="release-sdist-") as tmp:
        command = build_command(python, project.path, Path(tmp), isolated=environment is None)
        command[command.index("--wheel")] = "--sdist"
        built = proc.run(command, env=env, log=log)
        if not built.ok:
            again = proc.reproduce_command(command, env, None, parent=settings.environ)
            raise BuildError(
                proc.failure("the sdist's PEP 517 build", built) + f" (log: {log})",
                hint=f"reproduce: {again}",
            )
        found = sorted(Path(tmp).glob("*.tar.gz"))
        names = [p.name for p in found]
        if names != [filename]:
            raise BuildError(
                f"the sdist's build wrote {names or 'nothing'}, expected {filename} (PEP 625)",
                hint="give the project's backend a PEP 625 sdist name (setuptools 69.3+)",
            )
        raw = found[0].read_bytes()
    problems = sdist_archive_problems(raw, filename, project.name, version)
    if problems:
        top = filename.removesuffix(SDIST_SUFFIX)
        raise BuildError(
            "; ".join(problems),
            hint=f"the project's backend wrote it so; an sdist PyPI and pip take holds only "
            f"files and directories under one top directory {top}/, each once and named "
            "printably, with a PKG-INFO naming the release (docs/building.md)",
        )
    link = linked_out(raw, project.path)
    if link is not None:
        raise BuildError(
            f"{filename}: {link}",
            hint="an sdist holds the project's own files: copy what the link points to into "
            "the project, or leave it out of the sdist",
        )
    try:
        data = normalised(raw, settings.epoch)
    except (ValueError, tarfile.TarError, OSError, EOFError) as error:
        raise BuildError(f"{filename}: {error}", hint="an sdist holds files only") from None
    path = settings.out / filename
    write_atomic(path, data)
    return SdistEntry(
        filename=filename,
        version=version,
        size=len(data),
        sha256=sha256_file(path),
        destination=DestinationRef.of(cell),
    )


def from_the_sdist(
    settings: BuildSettings, reference: Manifest, beside: Path, into: Path
) -> tuple[BuildSettings, str | None]:
    """For `release build --compare`: where the reference recorded an sdist, it lies beside
    the reference manifest and its cell is among those rebuilt, the settings whose project
    is that sdist unpacked into `into` (every selected cell rebuilds from it), and the
    sdist's name; else `settings` as they are and None. So the reproduce job proves both
    that the build is reproducible and that the sdist holds everything a wheel is built
    from; a member that differs is named as for any rebuild."""
    sdist = reference.sdist
    path = beside / sdist.filename if sdist is not None else None
    if sdist is None or path is None or not path.is_file():
        return settings, None
    cell = sdist_cell_of(settings.matrix.cells)
    if cell is None or cell not in settings.cells:
        return settings, None
    if sha256_file(path) != sdist.sha256:
        raise BuildError(
            f"{path}: not the sdist the reference manifest records (sha256)",
            hint="download the build job's artifact again",
        )
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            tar.extractall(into, filter="data")
    except (tarfile.TarError, OSError, EOFError) as error:
        raise BuildError(f"{path}: cannot be unpacked: {error}") from None
    project = replace(settings.matrix.project, path=into / sdist.filename.removesuffix(".tar.gz"))
    matrix = replace(
        settings.matrix,
        project=project,
        cells=tuple(replace(c, project=project) for c in settings.matrix.cells),
    )
    cells = tuple(replace(c, project=project) for c in settings.cells)
    return replace(settings, matrix=matrix, cells=cells), sdist.filename
