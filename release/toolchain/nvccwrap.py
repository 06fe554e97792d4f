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
  nvcc, or nvcc) runs as it is.

Before either runs, a compile of one of the project's .cu files whose arch flags ask for
other device code than the cell's (RELEASE_CELL_TARGETS, CMake's spelling) stops: the
first such compile records itself at RELEASE_ARCH_STOP (the build watches for it and ends
the whole build), prints one line and exits EXIT_STOPPED; any compile after it exits so
too without compiling.

Where the build names RELEASE_COMPILE_RECORDS, the compile runs as a child and, once it
succeeds, the fatbins of the object it wrote are recorded there
(release.backends.compiled): the build then holds its wheel's device code to them. The
pure parts are `rewritten`, `output_of` and release.backends.archflags.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from release import proc
from release.backends.archflags import EXIT_STOPPED, Stop, from_cmake, stop_line, stop_of
from release.backends.compiled import digests

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
    """The command a compile runs: REAL with names that depend on the sources only, through
    `launcher` where one is named. A line without exactly one .cu file, or outside a build
    that names the sources' `root`, runs as it is."""
    head = [launcher, real] if launcher else [real]
    sources = [arg for arg in args if arg.endswith(".cu")]
    if not root or len(sources) != 1:
        return [*head, *args]
    name = source_name(sources[0], root=root, cwd=cwd)
    if _PLAIN_NAME.fullmatch(name) is None:
        return [*head, *args]
    named = ["-frandom-seed=" + name, "-Xcudafe", "--orig_src_path_name=" + name]
    if launcher is None and "-o" in args:
        named.append("--objdir-as-tempdir")
    return [*head, *args, *named]


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


# ---------------------------------------------------------------- edge


def record_fatbins(output: Path, records: Path) -> None:
    """One empty file per fatbin of the object at `output`, named by its sha256, in
    `records` (nothing where the compile wrote no ELF file with device code)."""
    try:
        found = digests(output.read_bytes())
    except OSError:
        return
    if not found:
        return
    records.mkdir(parents=True, exist_ok=True)
    for digest in found:
        (records / digest).touch()


def _run_and_record(command: Sequence[str], records: Path, cwd: str) -> int:
    """Run the compile as a child; once it succeeds, record what it wrote."""
    sys.stdout.flush()
    code = proc.passthrough(command)
    output = output_of(command)
    if code == 0 and output is not None:
        record_fatbins(Path(cwd, output), records)  # an absolute `output` stays as it is
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
        command = list(argv[1:])
        code = _stopped(command, env, cwd)
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
        return _run_and_record(command, Path(records), cwd)
    sys.stdout.flush()
    os.execvp(command[0], command)  # noqa: S606  # a compiler wrapper: the compile is the point
    return 0  # not reached: execvp replaces this process or raises


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], os.environ))
