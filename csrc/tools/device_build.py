"""Device-code build: one fatbin per csrc/kernels/<stem>.cu, with nvcc or NVRTC + nvFatbin.

Standard library only, so it runs under whatever Python drives the wheel build.

Every (kernel, target) pair is compiled on its own (a cubin per SM, PTX for the PTX
target) and stored in a content-addressed cache; the fatbin is assembled from the cached
parts (with `fatbinary` or nvFatbin) and cached as well. A cache key covers the kernel
source and every header it includes from the kernels directory, the compiler's exact
identity, the target and the flags, so two builds that agree on those share the work.

Inputs are the RELEASE_* variables described in csrc/BUILDING.md; `config_from_env`
reads them from a mapping the caller passes in.

    python tools/device_build.py --kernels kernels --out build/device
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import ctypes
import dataclasses
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

CACHE_FORMAT = 1
DEFAULT_SMS = ("75", "80", "86", "89", "90", "100")
_ARCH_RE = re.compile(r"^(?:sm_|compute_)?([1-9][0-9]{1,2})([af]?)$")
_INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)
_LOG_TAIL_LINES = 6
COMPRESS_MODES = ("default", "size", "speed", "balance", "none")
DEFAULT_COMPRESS_MODE = "size"


class DeviceBuildError(Exception):
    """The device build cannot go on; the message is one line and says why."""


@dataclasses.dataclass(frozen=True)
class Target:
    """One compilation target: a cubin for `sm_<arch>` or PTX for `compute_<arch>`."""

    kind: str  # "sm" or "compute"
    arch: str  # "80", "90a", "100f"

    @property
    def name(self) -> str:
        return f"{self.kind}_{self.arch}"

    @property
    def suffix(self) -> str:
        return ".cubin" if self.kind == "sm" else ".ptx"


@dataclasses.dataclass(frozen=True)
class DeviceConfig:
    compiler: str
    cuda_home: Path | None
    nvrtc_lib: Path | None
    nvfatbin_lib: Path | None
    include_dirs: tuple[Path, ...]
    cuda_version: str | None
    sms: tuple[str, ...]
    ptx: str | None
    cache_dir: Path
    log_path: Path | None
    jobs: int
    compress_mode: str = DEFAULT_COMPRESS_MODE
    launcher: tuple[str, ...] = ()  # what each nvcc compile runs through (sccache); not NVRTC

    @property
    def targets(self) -> tuple[Target, ...]:
        cubins = tuple(Target("sm", sm) for sm in self.sms)
        return cubins + ((Target("compute", self.ptx),) if self.ptx else ())


@dataclasses.dataclass(frozen=True)
class DeviceResult:
    compiler: str
    compiler_version: str
    cuda_version: str
    sms: tuple[str, ...]
    ptx: str | None
    fatbins: tuple[Path, ...]
    compiled: int
    cached: int


@dataclasses.dataclass(frozen=True)
class LogRecord:
    kernel: str
    target: str
    action: str  # compile, cached, or discarded (a damaged cache entry, rebuilt)
    seconds: float
    compiler: str
    detail: str = ""


# ---------------------------------------------------------------- pure core


def parse_arch(text: str, *, variable: str) -> str:
    m = _ARCH_RE.match(text.strip())
    if not m:
        raise DeviceBuildError(
            f"{variable}: {text.strip()!r} is not an SM number such as 80, 90a or 100f"
        )
    return m.group(1) + m.group(2)


def parse_sms(text: str | None) -> tuple[str, ...]:
    if text is None:
        return DEFAULT_SMS
    items = [t for t in re.split(r"[;,\s]+", text) if t]
    sms = tuple(parse_arch(t, variable="RELEASE_SMS") for t in items)
    if len(set(sms)) != len(sms):
        raise DeviceBuildError(f"RELEASE_SMS lists an SM twice: {text!r}")
    return sms


def default_ptx(sms: Sequence[str]) -> str | None:
    """PTX for the highest SM, without an `a`/`f` suffix (that PTX would not run forward)."""
    if not sms:
        return None
    return str(max(int(s.rstrip("af")) for s in sms))


def parse_ptx(text: str | None, sms: Sequence[str]) -> str | None:
    if text is None:
        return default_ptx(sms)
    if not text.strip():
        return None
    return parse_arch(text, variable="RELEASE_PTX")


def major_minor(version: str) -> str:
    parts = version.split(".")
    return ".".join(parts[:2])


def parse_nvcc_version(output: str) -> str:
    """`Cuda compilation tools, release 13.0, V13.0.88` -> `13.0.88`."""
    m = re.search(r"\bV(\d+\.\d+\.\d+)", output)
    if not m:
        raise DeviceBuildError(f"cannot read a version from nvcc --version: {tail(output)}")
    return m.group(1)


def tail(text: str, lines: int = _LOG_TAIL_LINES) -> str:
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(kept[-lines:]) or "(no output)"


def included_headers(source: Path, kernels_dir: Path) -> tuple[Path, ...]:
    """Every header `source` includes with quotes, recursively, found in the kernels dir.

    A quoted include is looked up next to the including file, then in `kernels_dir`.
    Headers outside the kernels directory (the CUDA headers) belong to the toolchain
    and are covered by its identity.
    """
    root = kernels_dir.resolve()
    seen: dict[Path, None] = {}
    stack = [source.resolve()]
    while stack:
        current = stack.pop()
        text = current.read_text(encoding="utf-8", errors="replace")
        for name in _INCLUDE_RE.findall(text):
            for base in (current.parent, root):
                candidate = (base / name).resolve()
                if candidate.is_file() and candidate.is_relative_to(root):
                    if candidate not in seen and candidate != source.resolve():
                        seen[candidate] = None
                        stack.append(candidate)
                    break
    return tuple(sorted(seen))


def sources_digest(source: Path, kernels_dir: Path) -> str:
    root = kernels_dir.resolve()
    h = hashlib.sha256()
    for path in (source.resolve(), *included_headers(source, kernels_dir)):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(b"\0")
        h.update(hashlib.sha256(path.read_bytes()).hexdigest().encode())
        h.update(b"\n")
    return h.hexdigest()


def cache_key(**parts: object) -> str:
    blob = json.dumps({"format": CACHE_FORMAT, **parts}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def config_from_env(env: Mapping[str, str], *, default_cache: Path) -> DeviceConfig:
    compiler = (env.get("RELEASE_DEVICE_COMPILER") or "nvcc").strip()
    if compiler not in ("nvcc", "nvrtc"):
        raise DeviceBuildError(
            f"RELEASE_DEVICE_COMPILER is {compiler!r}; expected 'nvcc' or 'nvrtc'"
        )
    sms = parse_sms(env.get("RELEASE_SMS"))
    ptx = parse_ptx(env.get("RELEASE_PTX"), sms)
    if not sms and not ptx:
        raise DeviceBuildError("RELEASE_SMS and RELEASE_PTX are both empty: nothing to build")
    jobs_text = env.get("RELEASE_JOBS") or "2"
    if not jobs_text.isdigit() or int(jobs_text) < 1:
        raise DeviceBuildError(f"RELEASE_JOBS is {jobs_text!r}; expected a positive integer")
    cuda_home = env.get("RELEASE_CUDA_HOME") or env.get("CUDA_HOME") or "/usr/local/cuda"
    cuda_version = (env.get("RELEASE_CUDA_VERSION") or "").strip() or None
    if cuda_version is not None and not re.match(r"^\d+\.\d+$", cuda_version):
        raise DeviceBuildError(
            f"RELEASE_CUDA_VERSION is {cuda_version!r}; expected major.minor such as 12.9"
        )
    include_text = env.get("RELEASE_CUDA_INCLUDE") or ""
    includes = tuple(Path(p) for p in include_text.split(os.pathsep) if p)
    log = env.get("RELEASE_DEVICE_LOG")
    compress_mode = (env.get("RELEASE_COMPRESS_MODE") or DEFAULT_COMPRESS_MODE).strip()
    if compress_mode not in COMPRESS_MODES:
        raise DeviceBuildError(
            f"RELEASE_COMPRESS_MODE is {compress_mode!r}; "
            f"expected one of {', '.join(COMPRESS_MODES)}"
        )
    return DeviceConfig(
        compiler=compiler,
        cuda_home=Path(cuda_home) if compiler == "nvcc" else None,
        nvrtc_lib=_opt_path(env.get("RELEASE_NVRTC_LIB")),
        nvfatbin_lib=_opt_path(env.get("RELEASE_NVFATBIN_LIB")),
        include_dirs=includes,
        cuda_version=cuda_version,
        sms=sms,
        ptx=ptx,
        cache_dir=Path(env.get("RELEASE_DEVICE_CACHE") or default_cache),
        log_path=Path(log) if log else None,
        jobs=int(jobs_text),
        compress_mode=compress_mode,
        launcher=tuple(shlex.split(env.get("RELEASE_COMPILE_LAUNCHER") or "")),
    )


def _opt_path(text: str | None) -> Path | None:
    return Path(text) if text else None


# ---------------------------------------------------------------- compilers


class Compiler:
    """A device compiler: compiles one target of one kernel, assembles a fatbin."""

    kind = ""
    version = ""  # exact, e.g. 13.0.88 or 12.9.86
    identity = ""  # everything the output depends on besides sources, target, flags

    def flags(self, target: Target) -> list[str]:
        raise NotImplementedError

    def compile(self, source: Path, kernels_dir: Path, target: Target) -> bytes:
        raise NotImplementedError

    def assembler_identity(self) -> str:
        raise NotImplementedError

    def assemble(self, stem: str, parts: Sequence[tuple[Target, bytes]]) -> bytes:
        raise NotImplementedError


class Nvcc(Compiler):
    kind = "nvcc"

    def __init__(
        self,
        cuda_home: Path,
        compress_mode: str = DEFAULT_COMPRESS_MODE,
        launcher: Sequence[str] = (),
    ) -> None:
        self.launcher = list(launcher)  # changes no byte: not part of any cache key
        self.nvcc = cuda_home / "bin" / "nvcc"
        self.fatbinary = cuda_home / "bin" / "fatbinary"
        for tool in (self.nvcc, self.fatbinary):
            if not os.access(tool, os.X_OK):
                raise DeviceBuildError(
                    f"{tool} not found; set RELEASE_CUDA_HOME (or CUDA_HOME) to a CUDA toolkit"
                )
        out = _run([str(self.nvcc), "--version"], what="nvcc --version")
        self.version = parse_nvcc_version(out)
        build = re.search(r"^Build (.+)$", out, re.MULTILINE)
        self.identity = f"nvcc {self.version} {build.group(1) if build else ''}".strip()
        helptext = _run([str(self.fatbinary), "--help"], what="fatbinary --help")
        self.fatbin_flags = ["-64"]
        if "--compress-all" in helptext:
            self.fatbin_flags.append("--compress-all")
        if "--compress-mode" in helptext:
            self.fatbin_flags.append(f"--compress-mode={compress_mode}")
        elif compress_mode != DEFAULT_COMPRESS_MODE:
            raise DeviceBuildError(
                f"RELEASE_COMPRESS_MODE is {compress_mode!r}, but {self.fatbinary} has no "
                "--compress-mode (CUDA 12.8 and later have it)"
            )

    def flags(self, target: Target) -> list[str]:
        mode = "--cubin" if target.kind == "sm" else "--ptx"
        code = f"sm_{target.arch}" if target.kind == "sm" else f"compute_{target.arch}"
        return [mode, "-O3", "--std=c++17", "-gencode", f"arch=compute_{target.arch},code={code}"]

    def compile(self, source: Path, kernels_dir: Path, target: Target) -> bytes:
        with tempfile.TemporaryDirectory(prefix="k3-nvcc-") as tmp:
            out = Path(tmp) / f"{source.stem}{target.suffix}"
            cmd = [
                *self.launcher,
                str(self.nvcc),
                *self.flags(target),
                f"-I{kernels_dir}",
                "-o",
                str(out),
                str(source),
            ]
            _run(cmd, what=f"nvcc {source.name} ({target.name})")
            return out.read_bytes()

    def assembler_identity(self) -> str:
        return f"fatbinary {self.identity} {' '.join(self.fatbin_flags)}"

    def assemble(self, stem: str, parts: Sequence[tuple[Target, bytes]]) -> bytes:
        with tempfile.TemporaryDirectory(prefix="k3-fatbin-") as tmp:
            cmd = [
                str(self.fatbinary),
                f"--create={tmp}/{stem}.fatbin",
                *self.fatbin_flags,
                f"--ident={stem}",
            ]
            for i, (target, data) in enumerate(parts):
                path = Path(tmp) / f"{i}{target.suffix}"
                path.write_bytes(data)
                kind = "elf" if target.kind == "sm" else "ptx"
                cmd.append(f"--image3=kind={kind},sm={target.arch},file={path}")
            _run(cmd, what=f"fatbinary {stem}")
            return (Path(tmp) / f"{stem}.fatbin").read_bytes()


class Nvrtc(Compiler):
    kind = "nvrtc"

    def __init__(
        self,
        nvrtc_lib: Path,
        nvfatbin_lib: Path,
        include_dirs: Sequence[Path],
        compress_mode: str = DEFAULT_COMPRESS_MODE,
    ) -> None:
        self.rtc = _load(nvrtc_lib, "RELEASE_NVRTC_LIB")
        self.fat = _load(nvfatbin_lib, "RELEASE_NVFATBIN_LIB")
        for d in include_dirs:
            if not (d / "cuda_fp16.h").is_file():
                raise DeviceBuildError(
                    f"RELEASE_CUDA_INCLUDE entry {d} has no cuda_fp16.h; point it at the "
                    "include dir of nvidia-cuda-runtime-cu12 (or a toolkit)"
                )
        if not include_dirs:
            raise DeviceBuildError(
                "RELEASE_CUDA_INCLUDE is not set; NVRTC needs the dir holding cuda_fp16.h"
            )
        self.include_dirs = tuple(include_dirs)
        self._setup_prototypes()
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._rtc_check(self.rtc.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "version")
        self.api_version = f"{major.value}.{minor.value}"
        fmaj, fmin = ctypes.c_uint(), ctypes.c_uint()
        self._fat_check(
            self.fat.nvFatbinVersion(ctypes.byref(fmaj), ctypes.byref(fmin)), "nvFatbinVersion"
        )
        self.fatbin_version = f"{fmaj.value}.{fmin.value}"
        self.version = library_version(nvrtc_lib) or self.api_version
        fatbin_exact = library_version(nvfatbin_lib) or self.fatbin_version
        if not library_version(nvrtc_lib):
            # Only major.minor is known: the library's bytes stand in for the patch level.
            self.version_key = f"{self.api_version} {file_sha256(Path(nvrtc_lib))}"
        else:
            self.version_key = self.version
        self.identity = f"nvrtc {self.version_key} headers {headers_digest(self.include_dirs)}"
        self._fatbin_identity = f"nvfatbin {fatbin_exact}"
        self.fatbin_options = self._pick_fatbin_options(compress_mode)

    def _setup_prototypes(self) -> None:
        c = ctypes
        self.rtc.nvrtcGetErrorString.restype = c.c_char_p
        self.rtc.nvrtcGetErrorString.argtypes = [c.c_int]
        self.rtc.nvrtcCreateProgram.argtypes = [
            c.POINTER(c.c_void_p),
            c.c_char_p,
            c.c_char_p,
            c.c_int,
            c.POINTER(c.c_char_p),
            c.POINTER(c.c_char_p),
        ]
        self.rtc.nvrtcCompileProgram.argtypes = [c.c_void_p, c.c_int, c.POINTER(c.c_char_p)]
        for name in ("nvrtcGetProgramLogSize", "nvrtcGetCUBINSize", "nvrtcGetPTXSize"):
            getattr(self.rtc, name).argtypes = [c.c_void_p, c.POINTER(c.c_size_t)]
        for name in ("nvrtcGetProgramLog", "nvrtcGetCUBIN", "nvrtcGetPTX"):
            getattr(self.rtc, name).argtypes = [c.c_void_p, c.c_char_p]
        self.rtc.nvrtcDestroyProgram.argtypes = [c.POINTER(c.c_void_p)]
        self.fat.nvFatbinGetErrorString.restype = c.c_char_p
        self.fat.nvFatbinGetErrorString.argtypes = [c.c_int]
        self.fat.nvFatbinCreate.argtypes = [
            c.POINTER(c.c_void_p),
            c.POINTER(c.c_char_p),
            c.c_size_t,
        ]
        self.fat.nvFatbinAddCubin.argtypes = [
            c.c_void_p,
            c.c_void_p,
            c.c_size_t,
            c.c_char_p,
            c.c_char_p,
        ]
        self.fat.nvFatbinAddPTX.argtypes = [
            c.c_void_p,
            c.c_char_p,
            c.c_size_t,
            c.c_char_p,
            c.c_char_p,
            c.c_char_p,
        ]
        self.fat.nvFatbinSize.argtypes = [c.c_void_p, c.POINTER(c.c_size_t)]
        self.fat.nvFatbinGet.argtypes = [c.c_void_p, c.c_void_p]
        self.fat.nvFatbinDestroy.argtypes = [c.POINTER(c.c_void_p)]

    def _rtc_check(self, code: int, what: str, log: str = "") -> None:
        if code != 0:
            err = self.rtc.nvrtcGetErrorString(code).decode(errors="replace")
            detail = f": {tail(log)}" if log else ""
            raise DeviceBuildError(f"NVRTC {what} failed: {err}{detail}")

    def _fat_check(self, code: int, what: str) -> None:
        if code != 0:
            err = self.fat.nvFatbinGetErrorString(code).decode(errors="replace")
            raise DeviceBuildError(f"nvFatbin {what} failed: {err}")

    def _pick_fatbin_options(self, compress_mode: str) -> list[str]:
        """The strongest compression this nvFatbin accepts (it rejects unknown options); a
        compress mode other than the default must be accepted as it is."""
        chosen = f"-compress-mode={compress_mode}"
        candidates = [["-64", "-compress-all", chosen], ["-64", chosen]]
        if compress_mode == DEFAULT_COMPRESS_MODE:
            candidates += [["-64", "-compress=true"], ["-64"]]
        for options in candidates:
            handle = ctypes.c_void_p()
            argv = (ctypes.c_char_p * len(options))(*(o.encode() for o in options))
            if self.fat.nvFatbinCreate(ctypes.byref(handle), argv, len(options)) == 0:
                self.fat.nvFatbinDestroy(ctypes.byref(handle))
                return options
        raise DeviceBuildError(
            "nvFatbin accepts none of the option sets tried "
            f"({' | '.join(map(' '.join, candidates))})"
        )

    def flags(self, target: Target) -> list[str]:
        return [f"--gpu-architecture={target.name}", "--std=c++17", "-default-device"]

    def compile(self, source: Path, kernels_dir: Path, target: Target) -> bytes:
        c = ctypes
        options = [*self.flags(target), f"-I{kernels_dir}", *(f"-I{d}" for d in self.include_dirs)]
        argv = (c.c_char_p * len(options))(*(o.encode() for o in options))
        prog = c.c_void_p()
        self._rtc_check(
            self.rtc.nvrtcCreateProgram(
                c.byref(prog), source.read_bytes(), source.name.encode(), 0, None, None
            ),
            f"create ({source.name})",
        )
        try:
            code = self.rtc.nvrtcCompileProgram(prog, len(options), argv)
            size = c.c_size_t()
            self.rtc.nvrtcGetProgramLogSize(prog, c.byref(size))
            buf = c.create_string_buffer(size.value)
            self.rtc.nvrtcGetProgramLog(prog, buf)
            log = buf.value.decode(errors="replace")
            self._rtc_check(code, f"compile of {source.name} ({target.name})", log or "(no log)")
            get_size, get = (
                (self.rtc.nvrtcGetCUBINSize, self.rtc.nvrtcGetCUBIN)
                if target.kind == "sm"
                else (self.rtc.nvrtcGetPTXSize, self.rtc.nvrtcGetPTX)
            )
            self._rtc_check(get_size(prog, c.byref(size)), "output size")
            out = c.create_string_buffer(size.value)
            self._rtc_check(get(prog, out), "output")
            return out.raw
        finally:
            self.rtc.nvrtcDestroyProgram(c.byref(prog))

    def assembler_identity(self) -> str:
        return f"{self._fatbin_identity} {' '.join(self.fatbin_options)}"

    def assemble(self, stem: str, parts: Sequence[tuple[Target, bytes]]) -> bytes:
        c = ctypes
        handle = c.c_void_p()
        opts = self.fatbin_options
        argv = (c.c_char_p * len(opts))(*(o.encode() for o in opts))
        self._fat_check(self.fat.nvFatbinCreate(c.byref(handle), argv, len(opts)), "create")
        try:
            for target, data in parts:
                arch, ident = target.arch.encode(), f"{stem}.{target.name}".encode()
                if target.kind == "sm":
                    self._fat_check(
                        self.fat.nvFatbinAddCubin(handle, data, len(data), arch, ident),
                        f"add cubin {target.name}",
                    )
                else:
                    self._fat_check(
                        self.fat.nvFatbinAddPTX(handle, data, len(data), arch, ident, b""),
                        f"add PTX {target.name}",
                    )
            size = c.c_size_t()
            self._fat_check(self.fat.nvFatbinSize(handle, c.byref(size)), "size")
            buf = c.create_string_buffer(size.value)
            self._fat_check(self.fat.nvFatbinGet(handle, buf), "get")
            return buf.raw
        finally:
            self.fat.nvFatbinDestroy(c.byref(handle))


def _load(path: Path | None, variable: str) -> ctypes.CDLL:
    if path is None:
        raise DeviceBuildError(f"{variable} is not set; the nvrtc device compiler needs it")
    try:
        return ctypes.CDLL(str(path))
    except OSError as exc:
        raise DeviceBuildError(f"{variable}: cannot load {path}: {exc}") from None


def library_version(lib: Path) -> str | None:
    """The exact version of a CUDA library: from the wheel that installed it, or its name.

    PyPI wheels record their files in `<name>-<version>.dist-info/RECORD`; toolkit
    installs name the real file `libnvrtc.so.12.9.86`.
    """
    real = Path(os.path.realpath(lib))
    for base in list(real.parents)[:5]:
        for info in sorted(base.glob("*.dist-info")):
            record = info / "RECORD"
            if not record.is_file():
                continue
            rel = os.path.relpath(real, base).replace(os.sep, "/")
            if any(line.split(",", 1)[0] == rel for line in record.read_text().splitlines()):
                return info.name[: -len(".dist-info")].rsplit("-", 1)[1]
    m = re.search(r"\.so\.(\d+\.\d+\.\d+)$", real.name)
    return m.group(1) if m else None


def headers_digest(include_dirs: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for d in include_dirs:
        for path in sorted(p for p in Path(d).iterdir() if p.is_file()):
            h.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def make_compiler(config: DeviceConfig) -> Compiler:
    compiler: Compiler
    if config.compiler == "nvcc":
        compiler = Nvcc(
            config.cuda_home or Path("/usr/local/cuda"), config.compress_mode, config.launcher
        )
        reported = major_minor(compiler.version)
    else:
        nvrtc = Nvrtc(
            config.nvrtc_lib,  # type: ignore[arg-type]
            config.nvfatbin_lib,  # type: ignore[arg-type]
            config.include_dirs,
            config.compress_mode,
        )
        if config.cuda_version and nvrtc.fatbin_version != config.cuda_version:
            raise DeviceBuildError(
                f"RELEASE_CUDA_VERSION is {config.cuda_version} but nvFatbin at "
                f"{config.nvfatbin_lib} reports {nvrtc.fatbin_version}"
            )
        compiler = nvrtc
        reported = nvrtc.api_version
    if config.cuda_version and reported != config.cuda_version:
        where = config.cuda_home if config.compiler == "nvcc" else config.nvrtc_lib
        raise DeviceBuildError(
            f"RELEASE_CUDA_VERSION is {config.cuda_version} but {config.compiler} at {where} "
            f"reports {compiler.version}"
        )
    return compiler


# ---------------------------------------------------------------- cache and log


class Cache:
    """Entries named by their key, each stored beside the sha256 of its bytes and checked
    on every read. An entry that is missing its digest or does not match it (a flipped
    byte, a truncated file, a build killed between the two writes) is removed and reported
    through `on_damage`; the caller rebuilds it. Writes go to a temp file that is renamed
    into place, the data before its digest."""

    def __init__(self, root: Path, on_damage: Callable[[Path, str], None]) -> None:
        self.root = root
        self.on_damage = on_damage

    def path(self, key: str, suffix: str) -> Path:
        return self.root / key[:2] / f"{key}{suffix}"

    def get(self, key: str, suffix: str) -> bytes | None:
        path = self.path(key, suffix)
        digest_path = path.with_name(path.name + ".sha256")
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._discard(path, f"unreadable ({exc.strerror or exc})")
            return None
        try:
            recorded = digest_path.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            self._discard(path, "its sha256 was never written")
            return None
        if hashlib.sha256(data).hexdigest() != recorded:
            self._discard(path, f"its bytes do not match their sha256 ({len(data)} bytes)")
            return None
        return data

    def _discard(self, path: Path, reason: str) -> None:
        for stale in (path, path.with_name(path.name + ".sha256")):
            with contextlib.suppress(OSError):
                stale.unlink()
        self.on_damage(path, reason)

    def put(self, key: str, suffix: str, data: bytes) -> None:
        final = self.path(key, suffix)
        write_atomic(final, data)
        digest = hashlib.sha256(data).hexdigest().encode()
        write_atomic(final.with_name(final.name + ".sha256"), digest)


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o644)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class Log:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.records: list[LogRecord] = []

    def add(self, record: LogRecord) -> None:
        with self.lock:
            self.records.append(record)
            if self.path is not None:
                line = json.dumps(dataclasses.asdict(record)) + "\n"
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # One write() of one line on an O_APPEND file: concurrent builds interleave
                # whole lines.
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    os.write(fd, line.encode())
                finally:
                    os.close(fd)


# ---------------------------------------------------------------- the build


def kernel_sources(kernels_dir: Path) -> tuple[Path, ...]:
    sources = tuple(sorted(kernels_dir.glob("*.cu")))
    if not sources:
        raise DeviceBuildError(f"no kernels: {kernels_dir} has no *.cu files")
    return sources


_Part = tuple[Path, Target]
"""One (kernel source, target) of a build."""


@dataclasses.dataclass(frozen=True)
class _Keys:
    """The cache keys of a build: one per part, one per kernel's fatbin (keyed by its parts
    and the assembler)."""

    parts: dict[_Part, str]
    fatbins: dict[Path, str]


@dataclasses.dataclass(frozen=True)
class _Build:
    """One device build: its kernels, targets, compiler, cache and log."""

    kernels_dir: Path
    sources: tuple[Path, ...]
    targets: tuple[Target, ...]
    compiler: Compiler
    cache: Cache
    log: Log

    def keys(self, entry_names: dict[Path, tuple[str, str]]) -> _Keys:
        """Every part's and fatbin's cache key; `entry_names` learns the (kernel, target) of
        each entry's path, for the report of a damaged one."""
        compiler, cache = self.compiler, self.cache
        part_keys: dict[_Part, str] = {}
        fatbin_keys: dict[Path, str] = {}
        for src in self.sources:
            digest = sources_digest(src, self.kernels_dir)
            for t in self.targets:
                part_keys[src, t] = cache_key(
                    sources=digest,
                    compiler=compiler.identity,
                    target=t.name,
                    flags=compiler.flags(t),
                )
                entry_names[cache.path(part_keys[src, t], t.suffix)] = (src.stem, t.name)
            fatbin_keys[src] = cache_key(
                parts=[part_keys[src, t] for t in self.targets],
                assembler=compiler.assembler_identity(),
            )
            entry_names[cache.path(fatbin_keys[src], ".fatbin")] = (src.stem, "fatbin")
        return _Keys(part_keys, fatbin_keys)

    def read_cache(self, keys: _Keys) -> tuple[dict[Path, bytes], dict[_Part, bytes], list[_Part]]:
        """What the cache holds: the fatbins, the parts of the kernels without one, and the
        parts left to compile; each part found (in a fatbin or alone) is logged as cached."""
        fatbin_data: dict[Path, bytes] = {}
        part_data: dict[_Part, bytes] = {}
        todo: list[_Part] = []
        for src in self.sources:
            cached_fatbin = self.cache.get(keys.fatbins[src], ".fatbin")
            if cached_fatbin is not None:
                fatbin_data[src] = cached_fatbin
            for t in self.targets:
                part = (
                    None
                    if cached_fatbin is not None
                    else self.cache.get(keys.parts[src, t], t.suffix)
                )
                if cached_fatbin is not None or part is not None:
                    if part is not None:
                        part_data[src, t] = part
                    self.log.add(LogRecord(src.stem, t.name, "cached", 0.0, self.compiler.identity))
                else:
                    todo.append((src, t))
        return fatbin_data, part_data, todo

    def compile_parts(
        self, keys: _Keys, todo: Sequence[_Part], *, jobs: int, into: dict[_Part, bytes]
    ) -> None:
        """Compile the parts of `todo`, `jobs` at a time, into the cache and `into`; the first
        failure cancels what has not started and is raised. A kernel's cubin and PTX of one
        arch are compiled one after the other: nvcc runs the same cicc for both, so behind
        a compile launcher (sccache) the second always finds the first's."""
        lock = threading.Lock()

        def compile_group(items: Sequence[_Part]) -> None:
            for src, t in items:
                start = time.monotonic()
                data = self.compiler.compile(src, self.kernels_dir, t)
                self.cache.put(keys.parts[src, t], t.suffix, data)
                with lock:
                    into[src, t] = data
                seconds = round(time.monotonic() - start, 3)
                record = LogRecord(src.stem, t.name, "compile", seconds, self.compiler.identity)
                self.log.add(record)

        groups: dict[tuple[Path, str], list[_Part]] = {}
        for src, t in todo:
            groups.setdefault((src, t.arch), []).append((src, t))
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(compile_group, items) for items in groups.values()]
            try:
                for fut in concurrent.futures.as_completed(futures):
                    fut.result()
            except BaseException:
                for fut in futures:
                    fut.cancel()
                raise

    def write_fatbins(
        self,
        keys: _Keys,
        out_dir: Path,
        fatbin_data: Mapping[Path, bytes],
        part_data: Mapping[_Part, bytes],
    ) -> list[Path]:
        """Write `out_dir/<stem>.fatbin` for every kernel: its cached fatbin, else one
        assembled from its parts (and cached)."""
        out_dir.mkdir(parents=True, exist_ok=True)
        fatbins = []
        for src in self.sources:
            data = fatbin_data.get(src)
            if data is None:
                parts = [(t, part_data[src, t]) for t in self.targets]
                data = self.compiler.assemble(src.stem, parts)
                self.cache.put(keys.fatbins[src], ".fatbin", data)
            dest = out_dir / f"{src.stem}.fatbin"
            write_atomic(dest, data)
            fatbins.append(dest)
        return fatbins


def build_device(
    kernels_dir: Path,
    out_dir: Path,
    config: DeviceConfig,
    *,
    compiler_factory: Callable[[DeviceConfig], Compiler] = make_compiler,
) -> DeviceResult:
    """Write `out_dir/<stem>.fatbin` for every kernel; compile only what the cache lacks."""
    sources = kernel_sources(kernels_dir)
    compiler = compiler_factory(config)
    log = Log(config.log_path)
    entry_names: dict[Path, tuple[str, str]] = {}

    def damaged(path: Path, reason: str) -> None:
        kernel, target = entry_names.get(path, ("?", path.name))
        message = f"warning: device cache entry {path} was damaged: {reason}; rebuilding it"
        print(message, file=sys.stderr)
        log.add(LogRecord(kernel, target, "discarded", 0.0, compiler.identity, reason))

    cache = Cache(config.cache_dir, damaged)
    build = _Build(kernels_dir, sources, config.targets, compiler, cache, log)
    keys = build.keys(entry_names)
    fatbin_data, part_data, todo = build.read_cache(keys)
    build.compile_parts(keys, todo, jobs=config.jobs, into=part_data)
    fatbins = build.write_fatbins(keys, out_dir, fatbin_data, part_data)
    compiled = sum(1 for r in log.records if r.action == "compile")
    cached = sum(1 for r in log.records if r.action == "cached")
    return DeviceResult(
        compiler=compiler.kind,
        compiler_version=compiler.version,
        cuda_version=config.cuda_version or major_minor(compiler.version),
        sms=config.sms,
        ptx=config.ptx,
        fatbins=tuple(fatbins),
        compiled=compiled,
        cached=cached,
    )


def _run(cmd: Sequence[str], *, what: str) -> str:
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, check=False)
    except OSError as exc:
        raise DeviceBuildError(f"{what}: cannot run {cmd[0]}: {exc}") from None
    if proc.returncode != 0:
        raise DeviceBuildError(
            f"{what} failed (exit {proc.returncode}): {tail(proc.stderr + proc.stdout)}"
        )
    return proc.stdout


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=Path, required=True, help="dir of <stem>.cu files")
    parser.add_argument("--out", type=Path, required=True, help="dir for <stem>.fatbin files")
    args = parser.parse_args(argv)
    try:
        config = config_from_env(os.environ, default_cache=args.out / ".device-cache")
        result = build_device(args.kernels, args.out, config)
    except DeviceBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(
        f"{result.compiler} {result.compiler_version}: {len(result.fatbins)} fatbins, "
        f"{result.compiled} compiled, {result.cached} cached"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
