"""The CUDA_HOME a cmake or torch cell builds with where its plan has CUDA libraries: the
toolkit's nvcc tree (bin, nvvm, include, lib), then the headers and libraries of the wheels
of the libraries the cell names (build.cuda-libraries) and of the runtime, each library
with its unversioned link name (`libnvrtc.so` -> `libnvrtc.so.13`, what `-lnvrtc` looks
for), and `lib64` beside `lib` (nvcc's profile, torch and most setup.py files look there).
Where PyPI has no nvcc for the CUDA version (12.x) and the cell compiles no device code, it
holds the libraries alone and a `bin/nvcc` that says in one line why it cannot compile.

The driver API's libcuda (build.cuda-libraries: `cuda`) comes with the NVIDIA driver, in
no wheel: the CUDA_HOME gets a link stub of it, as a CUDA toolkit has one,
`lib/stubs/libcuda.so` (soname libcuda.so.1), an empty function for each entry point its
CUDA headers declare, compiled by the toolchain's C compiler. A link finds it where it
looks for a toolkit's (CMake's CUDA::cuda_driver; LIBRARY_PATH, as CUDA's devel images
set it); no byte of it reaches a wheel, which records only that it needs libcuda.so.1.

Made once per (toolkit, libraries) in the toolchain cache, of symlinks (and that stub):
nvcc reached through its link takes the CUDA_HOME for its own tree, so its include path and
`lib64` are these too. The pure core names the links and the stub's symbols; the edge makes
them.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from release.backends import DRIVER_LIBRARY, DRIVER_STUB
from release.errors import ToolchainError

LAYOUT = 2  # bumped whenever `assemble` makes a different tree

# What bin/nvcc of a CUDA_HOME without nvcc says (release.building.diagnose reads it back
# from a build's log): the cause, the remedy, and exit status 1.
NO_NVCC_LINE = (
    "release: no nvcc: PyPI has no nvcc for CUDA {cuda}, and this cell declares "
    "device-code: none (its wheel carries no device code), so its CUDA_HOME holds the CUDA "
    "{cuda} headers and libraries alone; a build that compiles a .cu file needs nvcc: build "
    "this cell with a CUDA {cuda} toolkit (release build --cuda-home), or compile no .cu "
    "file for it"
)
# Asked its version (CMake's FindCUDAToolkit asks every nvcc it finds, in a project that
# compiles no CUDA too, and reads stdout only), it answers on stdout: on stderr, the line
# would reach the log of every such build and read as its cause where it fails otherwise.
NO_NVCC = """\
#!/bin/sh
# nvcc of a CUDA_HOME without one (written by cuda-wheel-release)
if [ "$#" -eq 1 ] && [ "$1" = "--version" ]; then
  echo {line}
  exit 1
fi
echo {line} >&2
exit 1
"""

_VERSIONED = re.compile(r"^lib(?P<name>.+)\.so\.(?P<version>[0-9]+(?:\.[0-9]+)*)$")

DRIVER_SONAME = "libcuda.so.1"
NOT_LINKED = frozenset({"cccl", DRIVER_LIBRARY})  # headers only; the stub
# the headers that declare the driver's entry points (CUDAAPI), where the wheels have them;
# the profiler's only as the pointer type of each (PFN_cuProfilerStart_v4000)
DRIVER_HEADERS = (
    "cuda.h", "cudaProfiler.h", "cudaGL.h", "cudaEGL.h", "cudaVDPAU.h", "cudaProfilerTypedefs.h",
)  # fmt: skip
_DECLARED = re.compile(r"\bCUDAAPI\s+(cu[A-Z]\w*)\s*\(")
_POINTER_TYPE = re.compile(r"\bCUDAAPI\s*\*\s*PFN_(cu[A-Z][A-Za-z0-9]*)_v[0-9]+\)")
# `#define cuMemAlloc cuMemAlloc_v2`, `#define cuMemcpy __CUDA_API_PTDS(cuMemcpy)`: what a
# call compiles to (the _ptds/_ptsz names where the build asks for per-thread streams)
_RENAMED = re.compile(
    r"^[ \t]*#[ \t]*define[ \t]+cu[A-Z]\w*[ \t]+"
    r"(?:__CUDA_API_PT(?P<stream>DS|SZ)[ \t]*\([ \t]*(?P<wrapped>cu[A-Z]\w*)[ \t]*\)"
    r"|(?P<plain>cu[A-Z]\w*))[ \t]*$",
    re.MULTILINE,
)

# ---------------------------------------------------------------- pure core


def home_name(
    cuda: str, toolkit: Path | None, libraries: Path, names: Sequence[str], compiler: str = ""
) -> str:
    """The directory of the CUDA_HOME made of `toolkit` (None: no nvcc) and the library
    wheels installed at `libraries`, for the libraries `names`; `compiler` (its target
    included) made its driver stub, if it has one."""
    fields: dict[str, object] = {
        "toolkit": str(toolkit) if toolkit else None,
        "libraries": str(libraries),
        "names": sorted(names),
        "layout": LAYOUT,
    }
    if compiler:  # only where set: the other CUDA_HOMEs keep their names
        fields["compiler"] = compiler
    blob = json.dumps(fields, sort_keys=True)
    return f"cuda-home-{cuda}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


def link_names(files: Iterable[str], names: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """The unversioned link name of each library in `names` (`libnvrtc.so`) and the file of
    `files` it points at (its shortest versioned name: `libnvrtc.so.13`, never
    `libnvrtc.alt.so.13`), and the names no file of `files` is a versioned library of."""
    versions: dict[str, list[tuple[int, str]]] = {}
    for file in files:
        match = _VERSIONED.match(file)
        if match is not None:
            parts = match["version"].count(".") + 1
            versions.setdefault(match["name"], []).append((parts, file))
    links: dict[str, str] = {}
    missing: list[str] = []
    for name in names:
        found = sorted(versions.get(name, []))
        if found:
            links[f"lib{name}.so"] = found[0][1]
        else:
            missing.append(name)
    return links, missing


def driver_symbols(headers: Iterable[str]) -> list[str]:
    """Every name a call into the driver API compiles to, from the text of its headers: the
    functions declared CUDAAPI (or given a pointer type), and the versioned names their
    macros give them (`cuMemAlloc_v2`, `cuMemcpy_ptds`), sorted."""
    names: set[str] = set()
    for text in headers:
        names.update(_DECLARED.findall(text))
        names.update(_POINTER_TYPE.findall(text))
        for match in _RENAMED.finditer(text):
            if match["plain"] is not None:
                names.add(match["plain"])
            else:
                names.update({match["wrapped"], f"{match['wrapped']}_pt{match['stream'].lower()}"})
    return sorted(names)


def driver_stub_source(symbols: Iterable[str]) -> str:
    """The C source of the link stub: an empty function of each name (never called: a
    wheel linked against it loads the driver's libcuda.so.1)."""
    lines = ["/* libcuda.so.1 for the linker only (written by cuda-wheel-release) */"]
    lines += [f"void {name}(void) {{}}" for name in symbols]
    return "\n".join(lines) + "\n"


def library_trees(libraries: Path) -> list[Path]:
    """The trees (include/ and lib/) the library wheels installed at `libraries` hold:
    CUDA 13's wheels share nvidia/cu13, CUDA 12's have one each (nvidia/cublas, ...)."""
    root = libraries / "nvidia"
    return sorted(p for p in root.glob("*") if p.is_dir()) if root.is_dir() else []


# ---------------------------------------------------------------- edge


def _link_entries(source: Path, dest: Path) -> None:
    """Link every entry of `source` into `dest` that `dest` lacks (the first tree wins)."""
    if not source.is_dir():
        return
    for entry in sorted(source.iterdir()):
        target = dest / entry.name
        if not target.exists() and not target.is_symlink():
            target.symlink_to(entry)


def _driver_stub(home: Path, cuda: str, compile_stub: Callable[[Sequence[str]], object]) -> None:
    """`DRIVER_STUB` in `home`, from the driver headers of its include/."""
    headers = [home / "include" / name for name in DRIVER_HEADERS]
    symbols = driver_symbols(
        h.read_text(encoding="utf-8", errors="replace") for h in headers if h.is_file()
    )
    if not symbols:
        raise ToolchainError(
            f"CUDA {cuda}: no cuda.h that declares the driver API in {home / 'include'}",
            hint="the toolchain cache is incomplete: delete that directory and provision again",
        )
    stub = home / DRIVER_STUB
    if stub.parent.is_symlink():  # a library wheel's own lib/stubs, linked in: ours instead
        stub.parent.unlink()
    stub.parent.mkdir(parents=True, exist_ok=True)
    source = stub.parent / "libcuda.c"
    source.write_text(driver_stub_source(symbols), encoding="utf-8")
    compile_stub(
        ["-shared", "-nostdlib", "-fPIC", f"-Wl,-soname,{DRIVER_SONAME}", "-o", str(stub),
         str(source)]
    )  # fmt: skip
    source.unlink()


def _fill(
    home: Path,
    *,
    cuda: str,
    toolkit: Path | None,
    libraries: Path,
    names: Sequence[str],
    compile_stub: Callable[[Sequence[str]], object] | None,
) -> None:
    (home / "include").mkdir()
    (home / "lib").mkdir()
    (home / "bin").mkdir()
    if toolkit is not None:
        _link_entries(toolkit / "bin", home / "bin")
        if (toolkit / "nvvm").exists():
            (home / "nvvm").symlink_to(toolkit / "nvvm")
    else:
        stub = home / "bin" / "nvcc"
        line = shlex.quote(NO_NVCC_LINE.format(cuda=cuda))
        stub.write_text(NO_NVCC.format(line=line), encoding="utf-8")
        stub.chmod(0o755)
    for tree in ([toolkit] if toolkit is not None else []) + library_trees(libraries):
        _link_entries(tree / "include", home / "include")
        _link_entries(tree / "lib", home / "lib")
    lib = home / "lib"
    links, missing = link_names(
        (p.name for p in lib.iterdir()), [n for n in names if n not in NOT_LINKED]
    )
    if missing:
        raise ToolchainError(
            f"CUDA {cuda}: no shared library of {', '.join(missing)} in {libraries}",
            hint="the toolchain cache is incomplete: delete that directory and provision again",
        )
    for link, target in links.items():
        if not (lib / link).exists():
            (lib / link).symlink_to(target)
    (home / "lib64").symlink_to("lib")
    if DRIVER_LIBRARY in names:
        if compile_stub is None:
            raise ToolchainError(f"CUDA {cuda}: no C compiler to make the driver's link stub")
        _driver_stub(home, cuda, compile_stub)


def assemble(
    cache_dir: Path,
    *,
    cuda: str,
    toolkit: Path | None,
    libraries: Path,
    names: Sequence[str],
    compile_stub: Callable[[Sequence[str]], object] | None = None,
    compiler: str = "",
) -> Path:
    """The CUDA_HOME of the module doc in `cache_dir` (made once: aside, then renamed into
    place, so a concurrent build finds it whole or not at all). `compile_stub` runs the C
    compiler `compiler` names with the arguments it is given, where the names hold the
    driver's `cuda`."""
    home = cache_dir / home_name(
        cuda, toolkit, libraries, names, compiler if DRIVER_LIBRARY in names else ""
    )
    marker = home / ".complete"
    if marker.is_file():
        return home
    cache_dir.mkdir(parents=True, exist_ok=True)
    aside = Path(tempfile.mkdtemp(prefix=f".{home.name}.", dir=cache_dir))
    try:
        _fill(
            aside, cuda=cuda, toolkit=toolkit, libraries=libraries, names=names,
            compile_stub=compile_stub,
        )  # fmt: skip
        (aside / ".complete").write_text(json.dumps(sorted(names)) + "\n", encoding="utf-8")
        try:
            aside.rename(home)
        except OSError:
            if not marker.is_file():
                raise
    finally:
        if aside.exists():
            shutil.rmtree(aside, ignore_errors=True)
    return home
