"""Why a PEP 517 build failed, in one line with its remedy, read from the build's log (the
log itself stays where it is): the compile that found no nvcc in a CUDA_HOME without one, a
module the build imports and its environment lacks (`No module named 'tvm_ffi'`: add it to
build.requires), libraries the linker cannot find (`cannot find -lnvrtc`: name them in
build.cuda-libraries), a C++ standard older than the headers require (torch 2.14 and later
require C++20), a header the compiler cannot find (a CUDA library's: build.cuda-libraries),
else the first compiler or CMake error, else the last Python exception. Pure: lines in, a
line out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from release.backends import CUDA_LIBRARY_NAMES, DRIVER_LIBRARY
from release.toolchain.cudahome import NO_NVCC_LINE

MAX_FOUND = 240  # characters of a log line a message quotes

_NO_NVCC = re.compile("^" + re.escape(NO_NVCC_LINE.split("{cuda}")[0]))
_NO_MODULE = re.compile(r"\bModuleNotFoundError: No module named '(?P<module>[^']+)'")
_NO_LIBRARY = re.compile(r"\bcannot find -l(?P<name>[A-Za-z0-9_.+-]+)")
_STANDARD = re.compile(
    r"(?P<standard>C\+\+[0-9]+) or later compatible compiler is required(?: to use "
    r"(?P<what>[A-Za-z]+))?"
)
_NO_HEADER = re.compile(
    r"^(?P<where>\S+?):[0-9]+(?::[0-9]+)?: fatal error: (?P<header>[^:\s]+): No such file"
)
_GCC_ERROR = re.compile(r"^(?P<where>[^\s:]+):(?P<line>[0-9]+)(?::[0-9]+)?: (?:fatal )?error: ")
_NVCC_ERROR = re.compile(r"^(?P<where>\S+)\((?P<line>[0-9]+)\): (?:catastrophic )?error: ")
_CMAKE_ERROR = re.compile(r"^CMake Error(?: at (?P<where>\S+ \(\w+\)))?:")
_PYTHON_ERROR = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception)): (?P<text>.+)$")
_HEADER_DIRS = {"thrust": "cccl", "cub": "cccl", "cuda": "cccl", "nv": "cccl"}

# the CUDA libraries a wheel of PyPI's provides (the driver's libcuda is in none)
LINKED = tuple(n for n in CUDA_LIBRARY_NAMES if n != DRIVER_LIBRARY)


def _cut(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_FOUND else text[: MAX_FOUND - 3] + "..."


def header_library(header: str) -> str | None:
    """The CUDA library (as build.cuda-libraries names it) whose wheel holds `header`:
    `nvrtc.h` nvrtc, `cublasLt.h` cublasLt, `cusolverDn.h` cusolver, `cuda_runtime.h`
    cudart, `thrust/sort.h` cccl; None for any other header."""
    first, _, rest = header.partition("/")
    if rest:
        return _HEADER_DIRS.get(first)
    stem = header.rsplit(".", 1)[0].lower()
    # the driver's cuda.h comes with the runtime's wheels: cudart, below
    named = [n for n in LINKED if stem.startswith(n.lower())]
    if named:
        return max(named, key=len)
    return "cudart" if stem.startswith("cuda") else None


def _no_module(lines: Sequence[str]) -> str | None:
    for line in lines:
        match = _NO_MODULE.search(line)
        if match is None:
            continue
        module = match["module"]
        top = module.split(".")[0]
        if top == "torch":
            remedy = (
                "a project that builds against torch is a torch cell (build.backend: torch), "
                "which builds in the pinned torch's environment"
            )
        else:
            remedy = (
                f"the build imports {module} and its build environment lacks it: add the "
                f"distribution that provides {top} to build.requires in matrix.yaml"
            )
        return f"No module named '{module}' ({remedy})"
    return None


def _no_library(lines: Sequence[str]) -> str | None:
    names = list(dict.fromkeys(m["name"] for line in lines if (m := _NO_LIBRARY.search(line))))
    if not names:
        return None
    cuda = [n for n in names if n in LINKED]
    other = [n for n in names if n not in CUDA_LIBRARY_NAMES]
    remedies = []
    if DRIVER_LIBRARY in names:
        remedies.append(
            "libcuda.so is the NVIDIA driver's and no PyPI wheel carries it: add cuda to "
            "build.cuda-libraries in matrix.yaml for a link stub of it (the wheel then imports "
            "only where a driver is installed), or load the driver at run time instead, with "
            'dlopen("libcuda.so.1") or cudaGetDriverEntryPoint'
        )
    if cuda:
        remedies.append(
            f"the CUDA_HOME of the build has no link name for {', '.join(cuda)}: add "
            f"{', '.join(cuda)} to build.cuda-libraries in matrix.yaml"
        )
    if other:
        remedies.append(
            f"lib{other[0]}.so is in none of the linker's directories: it comes with neither "
            "the toolchain nor the build environment"
        )
    found = ", ".join(f"-l{n}" for n in names)
    return f"the linker cannot find {found} ({'; '.join(remedies)})"


def _standard(lines: Sequence[str]) -> str | None:
    for line in lines:
        match = _STANDARD.search(line)
        if match is None:
            continue
        standard, what = match["standard"], match["what"]
        said = f"{standard} or later compatible compiler is required" + (
            f" to use {what}" if what else ""
        )
        if what in ("PyTorch", "ATen"):
            remedy = (
                "torch 2.14 and later require C++20 and the project compiles as an older "
                "standard: pin a torch release before 2.14 in matrix.yaml's torch, or compile "
                f"the project as {standard}: -std={standard.lower()}"
            )
        else:
            remedy = f"compile the project as {standard}: -std={standard.lower()}"
        return f"{said} ({remedy})"
    return None


def _no_header(lines: Sequence[str]) -> str | None:
    for line in lines:
        match = _NO_HEADER.match(line.strip())
        if match is None:
            continue
        header = match["header"]
        library = header_library(header)
        if library is not None:
            remedy = (
                f"{header} comes with CUDA's {library} wheels: add {library} to "
                "build.cuda-libraries in matrix.yaml"
            )
        else:
            remedy = f"no directory of the compiler's include path holds {header}"
        return f"{_cut(match['where'])}: {header}: No such file or directory ({remedy})"
    return None


def _first_error(lines: Sequence[str]) -> str | None:
    """The first compiler error (gcc, clang, nvcc) or CMake error, as the log says it."""
    for index, line in enumerate(lines):
        text = line.strip()
        if _GCC_ERROR.match(text) or _NVCC_ERROR.match(text):
            return f"the first compiler error: {_cut(text)}"
        cmake = _CMAKE_ERROR.match(text)
        if cmake is not None:
            following = next((n.strip() for n in lines[index + 1 :] if n.strip()), "")
            where = f" at {cmake['where']}" if cmake["where"] else ""
            return f"CMake Error{where}: {_cut(following)}"
    return None


def _last_exception(lines: Sequence[str]) -> str | None:
    """The last Python exception the log shows (`AssertionError: Cannot find CUDA_HOME`)."""
    for line in reversed(lines):
        match = _PYTHON_ERROR.match(line.strip())
        if match is not None:
            return f"the build raised {_cut(line)}"
    return None


def failure_cause(lines: Sequence[str]) -> str | None:
    """Why the build whose log is `lines` failed, in one line with the remedy; None where
    the log shows none of the module doc's causes."""
    for line in lines:
        if _NO_NVCC.match(line.strip()):
            return line.strip().removeprefix("release: ")
    for reader in (_no_module, _no_library, _standard, _no_header, _first_error, _last_exception):
        found = reader(lines)
        if found is not None:
            return found
    return None
