"""The program every CUDA compile of a torch or CMake cell goes through
(`python -m release.toolchain.nvccwrap`):

- `nvcc REAL ARGS...` is a torch cell's CUDA_HOME/bin/nvcc (release.toolchain.torchenv
  writes the shell script that runs it). nvcc names a file's internal-linkage entities
  (kernels in anonymous namespaces, which torch's headers have) after the hash of the
  source's absolute path and a per-process random number, and leaves its pid-named
  temporary files in symbol names: the same sources would give other bytes in another
  checkout or another run. So the one .cu file of a compile gets its path relative to
  RELEASE_NVCC_SOURCE_ROOT as that name and as the random seed, and the temporary files
  stay beside the object. REAL then runs through RELEASE_COMPILE_LAUNCHER (sccache) where
  one is named (sccache names its own temporary files: --objdir-as-tempdir is for nvcc
  alone).
- `launch COMMAND...` is a CMake cell's CMAKE_CUDA_COMPILER_LAUNCHER: COMMAND (sccache and
  nvcc, or nvcc) runs with the same names as a torch cell's where it runs nvcc itself
  (another checkout built other bytes: the anonymous namespaces of the CMake fixture's
  kernels were named after their absolute paths).

Before either runs, a compile of one of the project's .cu files whose arch flags ask for
other device code than the cell's (RELEASE_CELL_TARGETS, CMake's spelling) stops: the
first such compile records itself at RELEASE_ARCH_STOP (the build watches for it and ends
the whole build), prints one line and exits EXIT_STOPPED; any compile after it exits so
too without compiling.

A CMake cell's CMAKE_CUDA_COMPILER is a script of the cell's (RELEASE_NVCC_SCRIPT) that
runs `launch REAL ARGS...`: a compile launcher of the project's own and a custom command
that runs ${CMAKE_CUDA_COMPILER} go through the wrapper too. Where the wrapper launches a
line that names the script, it runs REAL (RELEASE_NVCC_REAL) in its place: a compile
cache then sees nvcc itself, and no compile goes through the wrapper twice.

Where the build names RELEASE_COMPILE_RECORDS, the step runs as a child and, once it
succeeds and has written its output, the device code the output holds that none of its
inputs holds is recorded there, where every piece its inputs hold is recorded already
(release.backends.compiled); else which input brought an unrecorded piece is noted. A
compile records what it made, a device link what it linked from recorded objects, and a
link of a prebuilt object nothing: the build then holds its wheel's device code to the
records. The pure parts are `rewritten`, `output_of`, `step_of`, `swapped` and
release.backends.archflags.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from release import proc
from release.backends.archflags import (
    EXIT_STOPPED,
    NOT_A_COMPILE,
    Stop,
    from_cmake,
    stop_line,
    stop_of,
)
from release.backends.compiled import ORIGINS, Piece, pieces, recorded_digests, step_record

_PLAIN_NAME = re.compile(r"[A-Za-z0-9._/+-]+")

# ---------------------------------------------------------------- pure core


def source_name(source: str, *, root: str, cwd: str) -> str:
    """The name a compile's source gets: its path inside `root`, else its file name."""
    absolute = source if source.startswith("/") else f"{cwd}/{source}"
    if absolute.startswith(f"{root}/"):
        return absolute[len(root) + 1 :]
    return absolute.rsplit("/", 1)[-1]


def rewritten(
    real: str, args: Sequence[str], *, root: str | None, cwd: str, launcher: str | None
) -> list[str]:
    """The command a compile runs: REAL with names that depend on the sources only
    (`source_naming`), through `launcher` where one is named."""
    head = [launcher, real] if launcher else [real]
    return [*head, *args, *source_naming(args, root=root, cwd=cwd, launched=bool(launcher))]


def source_naming(args: Sequence[str], *, root: str | None, cwd: str, launched: bool) -> list[str]:
    """What nvcc's arguments `args` get so that the compile's names depend on the sources
    only: the one .cu file's path inside `root` as the name of its internal-linkage
    entities and as the random seed, and (where no launcher names the temporary files)
    the temporary files beside the object. Nothing for a line without exactly one .cu
    file, or outside a build that names the sources' `root`."""
    sources = [arg for arg in args if arg.endswith(".cu")]
    if not root or len(sources) != 1:
        return []
    name = source_name(sources[0], root=root, cwd=cwd)
    if _PLAIN_NAME.fullmatch(name) is None:
        return []
    named = ["-frandom-seed=" + name, "-Xcudafe", "--orig_src_path_name=" + name]
    if not launched and "-o" in args:
        named.append("--objdir-as-tempdir")
    return named


def checked(command: Sequence[str], env: Mapping[str, str], cwd: str) -> Stop | None:
    """The stop a compile line makes in the build `env` describes (None: it runs)."""
    targets = env.get("RELEASE_CELL_TARGETS")
    if not targets:
        return None
    cuda = env.get("RELEASE_CELL_CUDA", "13.0")
    return stop_of(
        command,
        cell=from_cmake(targets),
        root=env.get("RELEASE_NVCC_SOURCE_ROOT") or None,
        cwd=cwd,
        cuda_major=int(cuda.split(".")[0]),
    )


def output_of(args: Sequence[str]) -> str | None:
    """The file an nvcc line writes (`-o X`, `--output-file X`, or either `=X`), if any."""
    for index, arg in enumerate(args):
        if arg in ("-o", "--output-file") and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(("-o=", "--output-file=")):
            return arg.split("=", 1)[1]
    return None


WRITES_NOTHING = NOT_A_COMPILE | {"-dryrun"}  # nvcc takes long options with one dash too


@dataclass(frozen=True, kw_only=True)
class Step:
    """What an nvcc line writes and reads: its output, the files it names (sources,
    objects, static libraries, fatbins, cubins: any of them may be an input), and the
    libraries it links by name (`-lNAME`) with the directories it names for them."""

    output: str
    named: tuple[str, ...]
    libraries: tuple[str, ...] = ()
    library_dirs: tuple[str, ...] = ()


def _option_values(args: Sequence[str], short: str, long: str) -> list[str]:
    """The values of an option given as `-xV`, `-x V`, `--long V` or `--long=V`."""
    values = []
    for index, arg in enumerate(args):
        following = args[index + 1] if index + 1 < len(args) else None
        if arg in (short, long) and following is not None:
            values.append(following)
        elif arg.startswith(f"{long}="):
            values.append(arg.split("=", 1)[1])
        elif arg.startswith(short) and len(arg) > len(short) and not arg.startswith("--"):
            values.append(arg[len(short) :])
    return values


def step_of(args: Sequence[str]) -> Step | None:
    """The step the nvcc arguments `args` describe (None: one that writes no output, a
    dry run or a preprocessing, or one whose output it does not name)."""
    output = output_of(args)
    if output is None or any(arg in WRITES_NOTHING for arg in args):
        return None
    values = {"-o", "--output-file", "-l", "--library", "-L", "--library-path"}
    named = [
        arg
        for previous, arg in zip(["", *args], args, strict=False)
        if previous not in values and not arg.startswith("-") and arg != output
    ]
    return Step(
        output=output,
        named=tuple(dict.fromkeys(named)),
        libraries=tuple(_option_values(args, "-l", "--library")),
        library_dirs=tuple(_option_values(args, "-L", "--library-path")),
    )


def compiler_index(command: Sequence[str], real: str | None) -> int:
    """Where the compiler sits in a launched line: REAL, else the first word named nvcc
    (0 where neither is in it)."""
    for index, word in enumerate(command):
        if word == real or word.rsplit("/", 1)[-1] == "nvcc":
            return index
    return 0


def swapped(command: Sequence[str], *, script: str | None, real: str | None) -> list[str]:
    """The launched line with the cell's compiler script replaced by the nvcc it runs."""
    if not script or not real:
        return list(command)
    return [real if word == script else word for word in command]


def origin_name(path: str, *, root: str | None, cwd: str) -> str:
    """How a message names an input: its path inside the project where it lies there,
    else its absolute path."""
    absolute = path if path.startswith("/") else f"{cwd}/{path}"
    if root and absolute.startswith(f"{root}/"):
        return absolute[len(root) + 1 :]
    return absolute


# ---------------------------------------------------------------- edge


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_ino, status.st_mtime_ns, status.st_size


def _held(path: Path, *, shared: bool = False) -> tuple[Piece, ...] | None:
    """The device code of the file at `path`; None where it cannot be read as such."""
    try:
        return pieces(path.read_bytes(), shared=shared)
    except OSError:
        return None


def _library_files(step: Step, cwd: str) -> list[Path]:
    """The static libraries the step's `-lNAME`s name in its own `-L` directories (a
    shared library there is linked, not copied; a name found in none is the toolkit's
    or the system's)."""
    found = []
    for name in step.libraries:
        for directory in step.library_dirs:
            shared, static = (
                Path(cwd, directory, f"lib{name}.so"),
                Path(cwd, directory, f"lib{name}.a"),
            )
            if shared.is_file():
                break
            if static.is_file():
                found.append(static)
                break
    return found


def record_step(step: Step, records: Path, cwd: str, root: str | None) -> None:
    """Record the device code the step's output holds that it made (see the module's
    docstring); note, per unrecorded digest, which of its inputs brought it."""
    output = _held(Path(cwd, step.output), shared=True)  # an absolute path stays as it is
    if not output:
        return
    inputs: dict[str, tuple[Piece, ...]] = {}
    for path in [*(Path(cwd, name) for name in step.named), *_library_files(step, cwd)]:
        if not path.is_file():
            continue
        held = _held(path)
        if held is None:
            return  # an input it cannot read: nothing of the output is vouched for
        inputs[str(path)] = held
    recorded = recorded_digests(records)
    decided = step_record(output, inputs.values(), recorded)
    records.mkdir(parents=True, exist_ok=True)
    for digest in decided.made:
        (records / digest).touch()
    if decided.foreign:
        _note_origins(decided.foreign, inputs, records / ORIGINS, step, cwd=cwd, root=root)


def _note_origins(
    foreign: Sequence[str],
    inputs: Mapping[str, Sequence[Piece]],
    origins: Path,
    step: Step,
    *,
    cwd: str,
    root: str | None,
) -> None:
    """One note per digest in `origins`: which input brought it, and what the step wrote.
    Each appears whole (written aside, then moved in place)."""
    origins.mkdir(parents=True, exist_ok=True)
    wrote = origin_name(step.output, root=root, cwd=cwd)
    for digest in foreign:
        path = next(p for p, held in inputs.items() if any(x.digest == digest for x in held))
        note = (
            f"{origin_name(path, root=root, cwd=cwd)}, an input of the nvcc step that wrote {wrote}"
        )
        handle, aside = tempfile.mkstemp(dir=origins, prefix=".note-")
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(note + "\n")
        os.replace(aside, origins / digest)


def _run_and_record(
    command: Sequence[str], args: Sequence[str], records: Path, cwd: str, root: str | None
) -> int:
    """Run the step as a child; once it succeeds having written its output, record what
    it made (`args`: the nvcc arguments of `command`)."""
    step = step_of(args)
    before = _stamp(Path(cwd, step.output)) if step is not None else None
    sys.stdout.flush()
    code = proc.passthrough(command)
    if code == 0 and step is not None:
        after = _stamp(Path(cwd, step.output))
        if after is not None and after != before:
            record_step(step, records, cwd, root)
    return code


def _working_directory(env: Mapping[str, str]) -> str:
    """The directory as the shell names it (PWD, where it is this one), as nvcc's old
    shell wrapper did; else the real path."""
    here = os.getcwd()
    logical = env.get("PWD")
    try:
        if logical and os.path.samefile(logical, here):
            return logical
    except OSError:
        pass
    return here


def record(stop: Stop, path: Path) -> bool:
    """Write the stop at `path` unless a compile before this one did (True: this one is
    the first). The record appears whole: written aside, then linked into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, aside = tempfile.mkstemp(dir=path.parent, prefix=".stop-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(stop.to_json() + "\n")
        os.link(aside, path)
    except FileExistsError:
        return False
    finally:
        os.unlink(aside)
    return True


def _stopped(command: Sequence[str], env: Mapping[str, str], cwd: str) -> int | None:
    """EXIT_STOPPED where this compile must not run (it or one before it asked for other
    targets than the cell's), else None."""
    stop_path = env.get("RELEASE_ARCH_STOP")
    if stop_path and Path(stop_path).exists():
        print(
            f"release: not compiling: the cell's build was stopped ({stop_path})", file=sys.stderr
        )
        return EXIT_STOPPED
    stop = checked(command, env, cwd)
    if stop is None:
        return None
    if stop_path:
        record(stop, Path(stop_path))
    print(stop_line(stop), file=sys.stderr, flush=True)
    return EXIT_STOPPED


def main(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """Run the compile `argv` (`nvcc REAL ARGS...` or `launch COMMAND...`) describes; returns
    only where it does not run (EXIT_STOPPED, or 2 for a command line it cannot read)."""
    if len(argv) < 2 or argv[0] not in ("nvcc", "launch"):
        print("usage: nvccwrap nvcc REAL ARGS... | nvccwrap launch COMMAND...", file=sys.stderr)
        return 2
    cwd = _working_directory(env)
    if argv[0] == "launch":
        real = env.get("RELEASE_NVCC_REAL") or None
        command = swapped(argv[1:], script=env.get("RELEASE_NVCC_SCRIPT"), real=real)
        index = compiler_index(command, real)
        args = command[index + 1 :]
        code = _stopped(command, env, cwd)
        if real is not None and command[index] == real:  # nvcc itself, as a torch cell's
            root = env.get("RELEASE_NVCC_SOURCE_ROOT") or None
            command += source_naming(args, root=root, cwd=cwd, launched=index > 0)
    else:
        real, args = argv[1], list(argv[2:])
        code = _stopped(args, env, cwd)
        command = rewritten(
            real,
            args,
            root=env.get("RELEASE_NVCC_SOURCE_ROOT") or None,
            cwd=cwd,
            launcher=env.get("RELEASE_COMPILE_LAUNCHER") or None,
        )
    if code is not None:
        return code
    records = env.get("RELEASE_COMPILE_RECORDS")
    if records:
        root = env.get("RELEASE_NVCC_SOURCE_ROOT") or None
        return _run_and_record(command, args, Path(records), cwd, root)
    sys.stdout.flush()
    os.execvp(command[0], command)  # noqa: S606  # a compiler wrapper: the compile is the point
    return 0  # not reached: execvp replaces this process or raises


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], os.environ))
