"""A release's prepare step (matrix.yaml's `build.prepare`): a command each cell runs
before its PEP 517 build, such as a script that stages the published distribution from a
subdirectory (sgl-project's build_sgl_deep_gemm.sh stages build/ from sgl_deep_gemm/).

What it guarantees, cell by cell:

- the command runs from matrix.yaml's directory (the repository root), without a shell,
  in the cell's build environment: the variables the PEP 517 build gets, its Python first
  on PATH (a torch cell's torch venv), CUDA_HOME where the backend sets one, and
  RELEASE_PREPARE=1 (a script that also builds or installs on its own skips that under
  release, which builds the staged directory itself);
- the step is over when the command's process exits: what it left running in its process
  group (a background job that holds its output) is ended then; a command that runs past
  build.prepare.timeout (default DEFAULT_TIMEOUT seconds) is stopped and fails the cell;
- where it fails, the cell's one line says why, read from its log as a PEP 517 build's is
  (release.building.diagnose: a staging script that compiles the host library meets the
  same missing module, library or C++ standard);
- before anything is emptied or written, the output and the version file are refused
  where a symbolic link leads to them, where they overlap what release writes itself,
  and, in a git checkout, an output that holds tracked files (`_check_places`);
- before it, the declared output is emptied (nothing of an earlier run reaches the
  wheel) and the cell's version is written into the version file;
- what the command writes into release's own output (dist/: a file under the cell's wheel
  name would pass for the build's) is removed and fails the cell; release writes its
  wheels there while no command runs (`writing_dist`);
- after the command, neither the output nor the version file is reached through a symbolic
  link it made (the build would build, and release write, outside the checkout);
- after the cell's build, failed or not, the version file gets its own bytes back (it is
  removed where it did not exist) and the output is removed, never through a symbolic
  link (a link there is removed itself): the checkout is left as it was found;
- what `git status` lists outside the declared output, the version file and release's own
  outputs (dist/ with the cell's log, the caches) is the same after the command as before
  it (the files it lists hashed too): a command that writes elsewhere fails the cell,
  naming the paths. Paths the repository's .gitignore ignores
  are the project's own build products and are not checked; outside a git checkout
  nothing is;
- the staged pyproject.toml names the matrix's project: the wheel built is the release's;
- cells with a prepare step run it and their build one at a time (they share the output).

The same commit gives the same bytes: the wheel cache's key covers every file under
matrix.yaml's directory (`step_sources`: not only the project's), the command and the
version, and the output starts empty.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import stat
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from packaging.utils import canonicalize_name

from release import proc
from release.building.cache import project_files
from release.building.diagnose import failure_cause
from release.building.settings import CellFailure
from release.fsutil import linked_part, remove_unfollowed
from release.matrix import Cell, Matrix
from release.project import read_pyproject

_ONE_AT_A_TIME = threading.Lock()  # cells with a prepare step share its output
PREPARING = "RELEASE_PREPARE"  # set for the command: it runs as release's prepare step
DEFAULT_TIMEOUT = 3600  # seconds the command may run, where build.prepare.timeout says none


@dataclass(frozen=True, kw_only=True)
class PrepareStep:
    root: Path  # matrix.yaml's directory: where the command runs
    command: str
    version_file: Path | None
    output: Path | None
    project: Path  # the project's directory: built where there is no output
    name: str  # the project's name, which the staged pyproject.toml must have
    own: tuple[Path, ...] = ()  # where release itself writes (dist/, its logs, the caches)
    dist: Path | None = None  # release's output (--out), which the command must not write
    timeout: int = DEFAULT_TIMEOUT  # seconds: build.prepare.timeout

    @property
    def words(self) -> list[str]:
        return shlex.split(self.command)

    @property
    def build_dir(self) -> Path:
        """What the PEP 517 build builds after the command."""
        return self.output or self.project

    def describe(self, version: str) -> str:
        """The step as a dry run says it."""
        wrote = (
            f", after writing {version} into {self._shown(self.version_file)}"
            if self.version_file is not None
            else ""
        )
        staged = f"; it stages {self._shown(self.output)}/, which" if self.output else "; then"
        return (
            f"runs `{self.command}` in {self.root} with the cell's build environment{wrote}"
            f"{staged} the PEP 517 build builds"
        )

    def _shown(self, path: Path | None) -> str:
        return path.relative_to(self.root).as_posix() if path is not None else ""


def step_of(
    matrix: Matrix, cell: Cell, *, own: Iterable[Path | None] = (), dist: Path | None = None
) -> PrepareStep | None:
    """The cell's prepare step, or None where the release has none; `own`: the directories
    release itself writes during it (the cell's log in dist/), which the checkout's check
    leaves out; `dist`: release's output, where what the command writes is removed."""
    spec = cell.build.prepare
    if spec is None:
        return None
    root = matrix.path.parent.resolve()
    return PrepareStep(
        root=root,
        command=spec.command,
        version_file=root / spec.version_file if spec.version_file else None,
        output=root / spec.output if spec.output else None,
        project=matrix.project.path,
        name=matrix.project.name,
        own=tuple(p.resolve() for p in own if p is not None),
        dist=dist.resolve() if dist is not None else None,
        timeout=spec.timeout or DEFAULT_TIMEOUT,
    )


def sources_dir(matrix: Matrix, cell: Cell) -> Path:
    """The directory whose files the cell compiles: the project's, or, where a prepare
    step stages it, matrix.yaml's, where that step runs (and the files it compiles lie)."""
    if cell.build.prepare is not None:
        return matrix.path.parent.resolve()
    return cell.project.path


def step_sources(step: PrepareStep) -> Iterator[tuple[str, Path]]:
    """What a wheel built through the step depends on in the checkout, as (relative path,
    path): every source file under matrix.yaml's directory (`project_files`: a staging
    script reaches past the project), without the declared output and the version file
    (the cell's version is written there)."""
    skipped = {p for p in (step.output, step.version_file) if p is not None}
    for name, path in project_files(step.root):
        if path in skipped or skipped.intersection(path.parents):
            continue
        yield name, path


def build_sources(matrix: Matrix) -> Iterable[tuple[str, Path]]:
    """The sources the wheel cache keys the matrix's wheels by: the step's where the
    release has one, else the project's."""
    step = step_of(matrix, matrix.cells[0]) if matrix.cells else None
    return step_sources(step) if step is not None else project_files(matrix.project.path)


def reproduce_line(
    step: PrepareStep | None,
    version: str,
    build: Sequence[str],
    env: Mapping[str, str],
    *,
    parent: Mapping[str, str],
) -> str:
    """The shell line that re-runs the PEP 517 build `build`, after the step where the
    release has one (the version written first)."""
    built = proc.reproduce_command(build, env, None, parent=parent)
    if step is None:
        return built
    wrote = (
        f"printf '%s\\n' {shlex.quote(version)} > {shlex.quote(str(step.version_file))} && "
        if step.version_file is not None
        else ""
    )
    command = proc.reproduce_command(step.words, {**env, PREPARING: "1"}, step.root, parent=parent)
    return f"{wrote}{command} && {built}"


# ---------------------------------------------------------------- edge


def maybe_prepared(
    step: PrepareStep | None, version: str, *, env: Mapping[str, str], log: Path
) -> AbstractContextManager[Path | None]:
    """`prepared` where the cell has a step; else nothing happens."""
    if step is None:
        return nullcontext()
    return prepared(step, version, env=env, log=log)


@contextmanager
def prepared(
    step: PrepareStep, version: str, *, env: Mapping[str, str], log: Path
) -> Iterator[Path]:
    """Run the step for a cell of `version` (see the module doc) and give the directory its
    PEP 517 build builds; on leaving, put the checkout back. Raises CellFailure."""
    with _ONE_AT_A_TIME:
        _check_places(step, env)
        saved = _saved(step.version_file)
        try:
            before = _status(step, env)
            if step.output is not None:
                _remove(step.root, step.output)
            if step.version_file is not None:
                step.version_file.parent.mkdir(parents=True, exist_ok=True)
                _write_unfollowed(step.version_file, (version + "\n").encode())
            in_dist = _dist_entries(step.dist)
            links_before = _links_in(step.dist)
            done = proc.run(
                step.words, env={**env, PREPARING: "1"}, log=log, cwd=step.root,
                timeout=step.timeout, until_exit=True,
            )  # fmt: skip
            planted = _remove_planted(step.dist, in_dist)
            planted += _remove_new_links(step.dist, links_before)
            _check_unlinked(step)
            if planted:
                shown = _listed([_relative(step, p) for p in planted], 5)
                raise CellFailure(
                    f"the prepare step `{step.command}` wrote into release's own output "
                    f"(--out): {shown} (removed: stage only into build.prepare's output)"
                )
            if done.timed_out:
                raise CellFailure(
                    f"the prepare step `{step.command}` did not end within "
                    f"build.prepare.timeout ({step.timeout} s) and was stopped: raise the "
                    "timeout, or find what it waits for in its log",
                    proc.tail(done.output),
                )
            if not done.ok:
                cause = failure_cause(done.output.splitlines())
                raise CellFailure(
                    f"the prepare step `{step.command}` failed (exit {done.returncode})"
                    + (f": {cause}" if cause else ""),
                    proc.tail(done.output),
                )
            _held_to_outputs(step, before, _status(step, env))
            _check_staged(step)
            yield step.build_dir
        finally:
            _restore(step.root, step.version_file, saved)
            if step.output is not None:
                _remove(step.root, step.output)


def writing_dist(step: PrepareStep | None) -> AbstractContextManager[object]:
    """Held while release writes a wheel into dist/ beside the cells of a release with a
    prepare step: no command runs meanwhile, so what appears in dist/ during one is its."""
    return _ONE_AT_A_TIME if step is not None else nullcontext()


Entries = dict[str, tuple[int, ...]]  # path under dist/ -> what says it is the same entry


def _dist_entries(dist: Path | None) -> Entries:
    """Each entry of dist/ (itself as `.`), without release's scratch: the hidden
    staging directories and temporary files at its top, and the cells' logs/."""
    if dist is None or not os.path.lexists(dist):
        return {}
    found = {".": _identity(dist)}
    if dist.is_symlink() or not dist.is_dir():
        return found
    for top, dirs, files in os.walk(dist):
        where = Path(top)
        if where == dist:
            dirs[:] = [d for d in dirs if not d.startswith(".") and d != "logs"]
        for name in (*dirs, *files):
            if where == dist and name.startswith("."):
                continue
            found[(where / name).relative_to(dist).as_posix()] = _identity(where / name)
    return found


def _links_in(dist: Path | None) -> set[Path]:
    """Every symbolic link under dist/, release's own scratch included (the cells' staging
    folders, logs/): one the command makes there would have release build or log through
    it, outside the checkout."""
    if dist is None or not dist.is_dir() or dist.is_symlink():
        return set()
    found: set[Path] = set()
    for top, dirs, files in os.walk(dist):
        paths = (Path(top) / name for name in (*dirs, *files))
        found.update(path for path in paths if path.is_symlink())
    return found


def _remove_new_links(dist: Path | None, before: set[Path]) -> list[Path]:
    """Remove the links the command made under dist/ (`_links_in`); what was removed."""
    made = sorted(_links_in(dist) - before)
    for link in made:
        link.unlink(missing_ok=True)
    return made


def _identity(path: Path) -> tuple[int, ...]:
    status = path.lstat()
    if stat.S_ISDIR(status.st_mode):  # its time changes as release adds its logs/
        return (status.st_mode, status.st_ino)
    return (status.st_mode, status.st_ino, status.st_size, status.st_mtime_ns)


def _remove_planted(dist: Path | None, before: Entries) -> list[Path]:
    """Remove what appeared or changed in dist/ since `before` (a wheel under the cell's
    own name would be taken for the build's), never through a link; what was removed."""
    if dist is None:
        return []
    after = _dist_entries(dist)
    removed: list[Path] = []
    for name in sorted(p for p, same in after.items() if before.get(p) != same):
        target = dist / name
        if any(gone == target or gone in target.parents for gone in removed):
            continue
        if name == "." and not target.is_symlink() and target.is_dir():
            continue  # dist/ made anew: its entries are listed after it
        remove_unfollowed(target)
        removed.append(target)
    return removed


def _check_places(step: PrepareStep, env: Mapping[str, str]) -> None:
    """Refuse, before anything is emptied or written, an output or version file that the
    step would reach through a symbolic link (out of the checkout: release deleted a
    directory outside it), that holds or lies in what release writes itself (dist/, the
    caches), or an output that holds files git tracks (the sources, which release would
    delete before the command)."""
    for key, path in (("output", step.output), ("version-file", step.version_file)):
        if path is None:
            continue
        if link := linked_part(step.root, path):
            raise CellFailure(
                f"build.prepare.{key} {_relative(step, path)} is reached through the symbolic "
                f"link {_relative(step, link)}, and release writes there: name a path of the "
                "checkout itself"
            )
        for own in step.own:
            # the output holds it (emptied with it), or lies in it (dist/x: a directory of
            # the checkout release writes; a cache above the checkout holds everything)
            inside_own = own in path.parents and step.root in own.parents
            if own == path or path in own.parents or inside_own:
                raise CellFailure(
                    f"build.prepare.{key} {_relative(step, path)} overlaps {own}, where "
                    "release writes itself: name another path"
                )
    version_file = step.version_file
    if version_file is not None and version_file.exists() and not version_file.is_file():
        raise CellFailure(
            f"build.prepare.version-file {_relative(step, version_file)} is not a regular "
            "file: name the file the command reads the version from"
        )
    if step.output is not None and step.output.exists():
        tracked = proc.run(
            ["git", "ls-files", "-z", "--", str(step.output)],
            env=env,
            cwd=step.root,
            separate_stderr=True,
        )
        files = [f for f in tracked.output.split("\0") if f] if tracked.ok else []
        if files:
            raise CellFailure(
                f"build.prepare.output {_relative(step, step.output)} holds files git tracks "
                f"({_listed(files, 3)}), and release empties it before the command: name the "
                "directory the command stages into"
            )


def _listed(paths: Sequence[str], most: int) -> str:
    """`a, b and 3 more`: the first `most` of `paths`, and how many more there are."""
    return ", ".join(paths[:most]) + (f" and {len(paths) - most} more" if paths[most:] else "")


def _relative(step: PrepareStep, path: Path) -> str:
    return path.relative_to(step.root).as_posix() if path.is_relative_to(step.root) else str(path)


def _saved(path: Path | None) -> bytes | None:
    if path is None:
        return None
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _restore(root: Path, path: Path | None, saved: bytes | None) -> None:
    """Put the version file's own bytes back (or remove it), never through a symbolic
    link the command made: the link goes, and a regular file takes its place."""
    if path is None:
        return
    if (link := linked_part(root, path)) is not None:
        link.unlink()
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    if saved is None:
        path.unlink(missing_ok=True)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_unfollowed(path, saved)


def _write_unfollowed(path: Path, data: bytes) -> None:
    """Write `data` as a new regular file at `path`: what is there goes first, so that
    neither a symbolic link nor a hard link to a file outside the checkout (an inode the
    command shares with it) is written through."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _remove(root: Path, path: Path) -> None:
    """Remove the output, never through a symbolic link: where the command made a part of
    its path one, the link itself goes (rmtree through it deleted a directory outside the
    checkout)."""
    if (link := linked_part(root, path)) is not None:
        link.unlink()
    else:
        remove_unfollowed(path)


def _check_unlinked(step: PrepareStep) -> None:
    """Fail the cell where the command made the output or the version file, or a directory
    above it, a symbolic link: the build would build, and release write, outside the
    checkout."""
    for key, path in (("output", step.output), ("version-file", step.version_file)):
        if path is not None and (link := linked_part(step.root, path)) is not None:
            raise CellFailure(
                f"the prepare step `{step.command}` made {_relative(step, link)} a symbolic "
                f"link, through which build.prepare.{key} {_relative(step, path)} is reached: "
                "release neither builds nor writes through a link (stage into a directory of "
                "the checkout itself)"
            )


Status = dict[str, str]  # path (relative to the checkout's top) -> its entry and digest


def _status(step: PrepareStep, env: Mapping[str, str]) -> tuple[Path, Status] | None:
    """What `git status` lists of the checkout the step runs in, with each listed file's
    digest; None outside a git checkout (or without git)."""
    top = proc.run(
        ["git", "rev-parse", "--show-toplevel"], env=env, cwd=step.root, separate_stderr=True
    )
    if not top.ok or not top.output.strip():
        return None
    toplevel = Path(top.output.strip().splitlines()[-1])
    listed = proc.run(
        ["git", "status", "--porcelain=v1", "-z", "--untracked-files=all"],
        env=env,
        cwd=step.root,
        separate_stderr=True,
    )
    if not listed.ok:
        return None
    if (too_long := proc.too_long("git status", listed)) is not None:
        raise CellFailure(
            f"the prepare step's checkout cannot be compared before and after: {too_long} "
            "(let .gitignore name what is built or downloaded there)"
        )
    return toplevel, dict(_entries(toplevel, listed.output))


def _entries(toplevel: Path, output: str) -> Iterable[tuple[str, str]]:
    fields = iter(output.split("\0"))
    for field in fields:
        if len(field) < 4:
            continue
        code, path = field[:2], field[3:]
        if "R" in code or "C" in code:
            next(fields, None)  # the source of a rename or a copy
        file = toplevel / path
        digest = hashlib.sha256(file.read_bytes()).hexdigest() if file.is_file() else "-"
        yield path, f"{code} {digest}"


def _held_to_outputs(
    step: PrepareStep, before: tuple[Path, Status] | None, after: tuple[Path, Status] | None
) -> None:
    """Fail the cell where the command changed the checkout outside its declared output."""
    if before is None or after is None:
        return
    toplevel, old = before
    new = after[1]
    declared = [p for p in (step.output, step.version_file, *step.own) if p is not None]

    def is_declared(path: str) -> bool:
        file = toplevel / path
        return any(p == file or p in file.parents for p in declared)

    changed = [
        path
        for path in sorted(set(old) | set(new))
        if old.get(path) != new.get(path) and not is_declared(path) and not _is_bytecode(path)
    ]
    if changed:
        raise CellFailure(
            f"the prepare step `{step.command}` changed the checkout outside its declared "
            f"output: {_listed(changed, 5)} (write only under build.prepare's output, or let "
            ".gitignore name what the command builds)"
        )


def _is_bytecode(path: str) -> bool:
    """A cache Python writes of any module it imports (`__pycache__/x.cpython-311.pyc`,
    unless PYTHONDONTWRITEBYTECODE says not to): the interpreter's, never the command's."""
    parts = PurePosixPath(path).parts
    return "__pycache__" in parts[:-1] and parts[-1].endswith(".pyc")


def _check_staged(step: PrepareStep) -> None:
    """The output the command staged is a project, and where its pyproject.toml names one,
    the release's."""
    if step.output is None:
        return
    pyproject = step.output / "pyproject.toml"
    if not pyproject.is_file() and not (step.output / "setup.py").is_file():
        raise CellFailure(
            f"the prepare step `{step.command}` staged no pyproject.toml (nor setup.py) in "
            f"{step.output}: build.prepare's output is the directory it stages the "
            "distribution in"
        )
    try:
        said = read_pyproject(pyproject.read_text(encoding="utf-8")).name
    except (OSError, UnicodeDecodeError):
        said = None
    staged = said.value if said is not None else None
    if staged is not None and canonicalize_name(staged) != canonicalize_name(step.name):
        raise CellFailure(
            f"{pyproject}: the staged distribution is {staged}, the release's "
            f"project is {step.name} (stage the pyproject.toml of `project:`)"
        )
