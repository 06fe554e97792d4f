"""The ABI check of a torch extension wheel: every symbol its shared objects leave undefined
must be found when the wheel is loaded beside the torch it was built against.

"undefined symbol" at import time is the first failure of a torch extension built against
another torch than the one it loads in. A symbol counts as resolved when

- it carries a version requirement of the C or C++ runtime (GLIBC_*, GLIBCXX_*, CXXABI_*,
  GCC_*): auditwheel holds those to the manylinux policy;
- it is a CPython C-API symbol (`Py*`, `_Py*`): the interpreter that loads the extension
  defines it;
- another shared object of the same wheel defines it;
- or torch's libraries (and the CUDA libraries its wheels bring) export it, or those of the
  wheel's other runtime dependencies installed beside that torch (libtvm_ffi.so of
  apache-tvm-ffi), which the caller adds to the exports and names; or, for a symbol that
  asks no version (`dlopen` of an object linked against a libdl.so stub), the C and C++
  runtime itself (`runtime_exports`), as the dynamic loader takes it from there.

A wheel built for libtorch's stable ABI must in addition take only C symbols from torch: a
C++-mangled torch symbol (`c10::`, `at::`, `torch::`) ties it to the C++ ABI of the one
torch it was compiled with. std:: symbols are not torch's even where torch exports them:
libc10.so defines basic_stringstream's constructor and such as weak symbols, and a stable
build that links libc10 takes them from there, unversioned.

Pure: `read_shared_object`, `shared_objects`, `is_torch_cxx_symbol`, `symbol_problems`,
`abi_problems`, `defined_dynamic_symbols`. Edge:
`torch_exports` reads the libraries of an installed torch (and keeps what it read),
`runtime_exports` those of this machine's C and C++ runtime, and `demangled` calls
libstdc++'s demangler.
"""

from __future__ import annotations

import ctypes
import functools
import io
import re
import struct
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection, GNUVerSymSection
from elftools.elf.sections import SymbolTableSection

from release.elfread import ELF_READ_ERRORS, needed_names
from release.inspection.devicecode import is_shared_object

RUNTIME_VERSION_PREFIXES = ("GLIBC_", "GLIBCXX_", "CXXABI_", "GCC_")
PYTHON_PREFIXES = ("Py", "_Py")
# The C and C++ runtime's libraries of auditwheel's policy (every manylinux tag allows them)
RUNTIME_LIBRARIES = (
    "libc.so.6",
    "libm.so.6",
    "libdl.so.2",
    "libpthread.so.0",
    "librt.so.1",
    "libstdc++.so.6",
    "libgcc_s.so.1",
)
LISTED_PER_OBJECT = 5

# A mangled name in namespace std (the `St` prefix or one of the standard substitutions
# Sa Sb Ss Si So Sd), __cxxabiv1 or __gnu_cxx, possibly nested (N), cv/ref-qualified, or
# a typeinfo/vtable/guard of one; and the global operators new and delete.
_STANDARD_LIBRARY = re.compile(
    r"_Z(?:T[ISVHW]|GV)?(?:N[rVKRO]*)?(?:S[tabsiod]|10__cxxabiv1|9__gnu_cxx)|_Z(?:nw|na|dl|da)"
)
_TORCH_NAMESPACE = re.compile(r"\b(?:c10|at|torch|caffe2)::")


@dataclass(frozen=True, kw_only=True)
class UndefinedSymbol:
    name: str
    version: str | None  # the version it requires (GLIBC_2.17, libcudart.so.13), if any


@dataclass(frozen=True, kw_only=True)
class SharedObject:
    """What one shared object of a wheel needs and offers at load time."""

    name: str  # its path inside the wheel
    needed: tuple[str, ...]  # DT_NEEDED, in order
    undefined: tuple[UndefinedSymbol, ...]  # non-weak undefined dynamic symbols
    defined: frozenset[str]  # its defined (global or weak) dynamic symbols
    unreadable: str | None = None  # why it could not be read as ELF


def read_shared_object(name: str, data: bytes) -> SharedObject:
    """The dynamic symbols and DT_NEEDED of the ELF file `data` (named `name` in messages)."""
    try:
        elf = ELFFile(io.BytesIO(data))
        dynsym = elf.get_section_by_name(".dynsym")
        symbols = list(dynsym.iter_symbols()) if isinstance(dynsym, SymbolTableSection) else []
        versions = _needed_versions(elf)
        versym = elf.get_section_by_name(".gnu.version")
        needed = needed_names(elf)
    except ELF_READ_ERRORS as error:
        return SharedObject(
            name=name, needed=(), undefined=(), defined=frozenset(), unreadable=str(error)
        )
    undefined: list[UndefinedSymbol] = []
    defined: set[str] = set()
    for index, symbol in enumerate(symbols):
        bind = symbol["st_info"]["bind"]
        if not symbol.name or bind == "STB_LOCAL":
            continue
        if symbol["st_shndx"] != "SHN_UNDEF":
            defined.add(symbol.name)
        elif bind != "STB_WEAK":
            version = None
            if isinstance(versym, GNUVerSymSection):
                ndx = versym.get_symbol(index).entry["ndx"]
                version = versions.get(ndx & 0x7FFF) if isinstance(ndx, int) else None
            undefined.append(UndefinedSymbol(name=symbol.name, version=version))
    return SharedObject(
        name=name, needed=needed, undefined=tuple(undefined), defined=frozenset(defined)
    )


def _needed_versions(elf: ELFFile) -> dict[int, str]:
    """The version names of .gnu.version_r by the index .gnu.version gives a symbol."""
    section = elf.get_section_by_name(".gnu.version_r")
    if not isinstance(section, GNUVerNeedSection):
        return {}
    return {
        int(aux.entry["vna_other"]): str(aux.name)
        for _, auxiliaries in section.iter_versions()
        for aux in auxiliaries
    }


def shared_objects(wheel_data: bytes) -> tuple[SharedObject, ...]:
    """Every shared object (`*.so`, `*.so.*`) of the wheel `wheel_data`, in archive order."""
    with zipfile.ZipFile(io.BytesIO(wheel_data)) as archive:
        return tuple(
            read_shared_object(info.filename, archive.read(info))
            for info in archive.infolist()
            if not info.is_dir() and is_shared_object(info.filename)
        )


def is_torch_cxx_symbol(name: str, demangle: Callable[[str], str]) -> bool:
    """A C++-mangled symbol of torch's own C++ API. torch's libc10 and libtorch also export
    std:: template instantiations (basic_stringstream's constructor), which a stable-ABI
    build may link: those count only when their template arguments are torch's types."""
    if not name.startswith("_Z"):
        return False
    if _STANDARD_LIBRARY.match(name) is None:
        return True
    return _TORCH_NAMESPACE.search(demangle(name)) is not None


def _resolved_elsewhere(symbol: UndefinedSymbol, in_wheel: frozenset[str]) -> bool:
    if symbol.version is not None and symbol.version.startswith(RUNTIME_VERSION_PREFIXES):
        return True
    return symbol.name.startswith(PYTHON_PREFIXES) or symbol.name in in_wheel


def symbol_problems(
    objects: Sequence[SharedObject],
    exports: frozenset[str],
    *,
    stable: bool,
    torch_label: str,
    demangle: Callable[[str], str],
    beside: Sequence[str] = (),
) -> list[str]:
    """The problems of `objects` (one wheel's shared objects) loaded beside torch's
    `exports`, one line each, at most LISTED_PER_OBJECT symbols per object and kind.
    `beside`: the other distributions whose libraries `exports` holds too, named in the
    messages."""
    problems: list[str] = []
    for member in objects:
        if member.unreadable is not None:
            problems.append(f"{member.name}: not a readable ELF file ({member.unreadable})")
            continue
        in_wheel = frozenset().union(*(o.defined for o in objects if o is not member))
        missing: list[str] = []
        cxx: list[str] = []
        for symbol in sorted(member.undefined, key=lambda s: s.name):
            if _resolved_elsewhere(symbol, in_wheel):
                continue
            if symbol.name not in exports:
                missing.append(symbol.name)
            elif stable and is_torch_cxx_symbol(symbol.name, demangle):
                cxx.append(symbol.name)
        exported = f"not exported by torch {torch_label}'s libraries" + (
            f" nor by those of {', '.join(beside)}" if beside else ""
        )
        problems += _listed(
            member.name, missing, exported, f"more undefined symbols {exported}", demangle
        )
        problems += _listed(
            member.name,
            cxx,
            f"a C++ symbol of torch {torch_label}, which binds the wheel to that torch's C++ "
            "ABI: a stable-ABI build may take only C symbols from torch",
            f"more C++ symbols of torch {torch_label} in a stable-ABI build",
            demangle,
        )
    return problems


def _listed(
    member: str, names: list[str], why: str, more: str, demangle: Callable[[str], str]
) -> list[str]:
    lines = []
    for name in names[:LISTED_PER_OBJECT]:
        readable = demangle(name)
        shown = name if readable == name else f"{readable} ({name})"
        lines.append(f"{member}: undefined symbol {shown}: {why}")
    if len(names) > LISTED_PER_OBJECT:
        lines.append(f"{member}: and {len(names) - LISTED_PER_OBJECT} {more}")
    return lines


def abi_problems(
    wheel_data: bytes,
    exports: frozenset[str],
    *,
    stable: bool,
    torch_label: str,
    beside: Sequence[str] = (),
) -> list[str]:
    """What keeps the wheel `wheel_data` from loading beside the torch whose libraries
    export `exports` (`torch_exports`); `stable` holds it to libtorch's stable ABI too.
    `torch_label` names that torch in the messages ("2.14.1+cu130"); `beside` the other
    distributions whose libraries `exports` holds too ("apache-tvm-ffi")."""
    return symbol_problems(
        shared_objects(wheel_data),
        exports,
        stable=stable,
        torch_label=torch_label,
        demangle=demangled,
        beside=beside,
    )


def torch_exports(
    torch_lib_dirs: Sequence[Path], *, only: frozenset[str] | None = None
) -> frozenset[str]:
    """The defined dynamic symbols of every shared library directly in `torch_lib_dirs`
    (torch/lib and the nvidia/*/lib folders of torch's CUDA wheels), or of those named in
    `only`. Reading them takes seconds (libtorch_cpu.so alone has 75k), so the answer is
    kept for as long as no library's path, size or mtime changes."""
    libraries = sorted(
        {
            path.resolve()
            for directory in torch_lib_dirs
            for path in _listing(directory)
            if (only is None or path.name in only)
            and path.is_file()
            and is_shared_object(path.name)
        }
    )
    key = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in libraries)
    return _exports_of(key)


def runtime_exports(maps: Path = Path("/proc/self/maps")) -> frozenset[str]:
    """The symbols the C and C++ runtime's libraries (RUNTIME_LIBRARIES) define, read from
    the directory that holds the C library this process runs with; none where `maps` names
    no libc.so.6 (not Linux, a static interpreter)."""
    try:
        lines = maps.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return frozenset()
    paths = (line.split(maxsplit=5)[-1] for line in lines if line.count(" ") >= 5)
    libc = next((Path(p) for p in paths if Path(p).name == "libc.so.6"), None)
    if libc is None:
        return frozenset()
    return torch_exports([libc.parent], only=frozenset(RUNTIME_LIBRARIES))


def _listing(directory: Path) -> Iterable[Path]:
    return directory.iterdir() if directory.is_dir() else ()


@functools.lru_cache(maxsize=8)
def _exports_of(libraries: tuple[tuple[str, int, int], ...]) -> frozenset[str]:
    names: set[str] = set()
    for path, _, _ in libraries:
        with open(path, "rb") as stream:
            try:
                names.update(defined_dynamic_symbols(ELFFile(stream)))
            except ELF_READ_ERRORS:
                continue  # a linker script or other non-ELF file named like a library
    return frozenset(names)


def defined_dynamic_symbols(elf: ELFFile) -> Iterator[str]:
    """The names of the global and weak dynamic symbols `elf` defines. The symbol table is
    unpacked in one go: pyelftools' per-symbol objects take seconds for libtorch_cpu.so."""
    dynsym = elf.get_section_by_name(".dynsym")
    if not isinstance(dynsym, SymbolTableSection):
        return
    strings = elf.get_section(dynsym["sh_link"]).data()
    order = "<" if elf.little_endian else ">"
    if elf.elfclass == 64:
        layout, name_at, info_at, shndx_at = order + "IBBHQQ", 0, 1, 3
    else:
        layout, name_at, info_at, shndx_at = order + "IIIBBH", 0, 3, 5
    for entry in struct.iter_unpack(layout, dynsym.data()):
        if entry[shndx_at] == 0 or entry[info_at] >> 4 == 0:  # SHN_UNDEF, STB_LOCAL
            continue
        start = entry[name_at]
        if start:
            yield strings[start : strings.index(b"\0", start)].decode("utf-8", "replace")


@functools.cache
def _demangler() -> tuple[Callable[..., Any], Callable[..., Any]] | None:
    """libstdc++'s `__cxa_demangle` and the C library's `free` for what it returns."""
    try:
        libstdcxx = ctypes.CDLL("libstdc++.so.6")
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    demangle = libstdcxx.__cxa_demangle
    demangle.restype = ctypes.c_void_p
    demangle.argtypes = [
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_int),
    ]
    free = libc.free
    free.argtypes = [ctypes.c_void_p]
    free.restype = None
    return demangle, free


def demangled(name: str) -> str:
    """`name` demangled by libstdc++'s `__cxa_demangle`; `name` itself for a C symbol, a
    name it cannot demangle, or where there is no libstdc++."""
    functions = _demangler() if name.startswith("_Z") else None
    if functions is None:
        return name
    demangle, free = functions
    status = ctypes.c_int(0)
    pointer = demangle(name.encode(), None, None, ctypes.byref(status))
    if not pointer:
        return name
    try:
        text = ctypes.string_at(pointer).decode("utf-8", "replace")
    finally:
        free(pointer)
    return text if status.value == 0 else name
