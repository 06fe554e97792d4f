"""In-tree PEP 517 backend for k3-kernels (standard library only; tomli below Python 3.11).

Why not scikit-build-core: the wheel is `py3-none-linux_<arch>` for a target arch that
may differ from the build host's (aarch64 built on x86_64), and the version carries a
local label chosen per build (`0.1.0+cu129`). Both are one line here; there is no CMake
project to drive (device code goes through tools/device_build.py, the host library is a
single compiler call).

Build inputs are the RELEASE_* environment variables (csrc/BUILDING.md); a PEP 517
config setting of the same name (`-C RELEASE_SMS=80;90`) overrides the environment.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib
import io
import json
import os
import platform
import re
import shlex
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import device_build

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "k3_kernels"
HOST_LIB = "libk3_host.so"
ARCHES = {"x86_64": 62, "aarch64": 183}  # ELF e_machine
_LABEL_RE = re.compile(r"^[a-z0-9]+(?:\.[a-z0-9]+)*$")
_VERSION_RE = re.compile(r"^\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?$")
_SDIST_PARTS = (
    "pyproject.toml",
    "README.md",
    "BUILDING.md",
    "LICENSE",
    "tools",
    "kernels",
    "host",
    "src",
)


class BackendError(Exception):
    pass


# ---------------------------------------------------------------- metadata


def _load_pyproject() -> dict[str, Any]:
    toml = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
    with open(ROOT / "pyproject.toml", "rb") as f:
        data: dict[str, Any] = toml.load(f)
    return data


def _settings(config_settings: Mapping[str, Any] | None) -> dict[str, str]:
    env = dict(os.environ)
    for key, value in (config_settings or {}).items():
        if key.startswith("RELEASE_"):
            env[key] = value if isinstance(value, str) else ";".join(value)
    return env


def _version(project: Mapping[str, Any], env: Mapping[str, str]) -> str:
    version = str(project["version"])
    if not _VERSION_RE.match(version):
        raise BackendError(f"pyproject.toml: version {version!r} is not a normalized version")
    label = (env.get("RELEASE_LOCAL_LABEL") or "").strip()
    if not label:
        return version
    if not _LABEL_RE.match(label):
        raise BackendError(
            f"RELEASE_LOCAL_LABEL is {label!r}; expected lower-case letters, digits and dots"
        )
    return f"{version}+{label}"


def _dist_name(project: Mapping[str, Any]) -> str:
    return re.sub(r"[-_.]+", "_", str(project["name"])).lower()


def metadata_text(project: Mapping[str, Any], version: str) -> str:
    if project.get("dynamic"):
        raise BackendError("pyproject.toml: dynamic metadata is not supported by this backend")
    license_expr = project.get("license")
    lines = [
        f"Metadata-Version: {'2.4' if isinstance(license_expr, str) else '2.1'}",
        f"Name: {project['name']}",
        f"Version: {version}",
    ]
    if project.get("description"):
        lines.append(f"Summary: {project['description']}")
    if isinstance(license_expr, str):
        lines.append(f"License-Expression: {license_expr}")
    for name in license_files(project):
        lines.append(f"License-File: {name}")
    for classifier in project.get("classifiers", []):
        lines.append(f"Classifier: {classifier}")
    for label, url in project.get("urls", {}).items():
        lines.append(f"Project-URL: {label}, {url}")
    if project.get("requires-python"):
        lines.append(f"Requires-Python: {project['requires-python']}")
    for req in project.get("dependencies", []):
        lines.append(f"Requires-Dist: {req}")
    for extra, reqs in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        for req in reqs:
            marker = f'extra == "{extra}"'
            if ";" in req:
                spec, cond = (part.strip() for part in req.split(";", 1))
                lines.append(f"Requires-Dist: {spec}; ({cond}) and {marker}")
            else:
                lines.append(f"Requires-Dist: {req}; {marker}")
    body = ""
    readme = project.get("readme")
    if isinstance(readme, str) and (ROOT / readme).is_file():
        ctype = "text/markdown" if readme.endswith(".md") else "text/plain"
        lines.append(f"Description-Content-Type: {ctype}")
        body = (ROOT / readme).read_text(encoding="utf-8")
    return "\n".join(lines) + "\n\n" + body


def license_files(project: Mapping[str, Any]) -> list[str]:
    """The files `license-files` names (PEP 639), relative to the project, sorted."""
    found: set[str] = set()
    for pattern in project.get("license-files", []):
        matches = [p for p in ROOT.glob(pattern) if p.is_file()]
        if not matches:
            raise BackendError(f"pyproject.toml: license-files {pattern!r} matches no file")
        found.update(p.relative_to(ROOT).as_posix() for p in matches)
    return sorted(found)


def target_arch(env: Mapping[str, str]) -> str:
    arch = (env.get("RELEASE_TARGET_ARCH") or "").strip() or host_arch()
    if arch not in ARCHES:
        raise BackendError(f"RELEASE_TARGET_ARCH is {arch!r}; expected x86_64 or aarch64")
    return arch


def host_arch() -> str:
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def wheel_tag(arch: str) -> str:
    return f"py3-none-linux_{arch}"


# ---------------------------------------------------------------- host library


def elf_machine(path: Path) -> int:
    with open(path, "rb") as f:
        header = f.read(20)
    if header[:4] != b"\x7fELF":
        raise BackendError(f"{path.name} is not an ELF file")
    endian = "<" if header[5] == 1 else ">"
    machine: int = struct.unpack(f"{endian}H", header[18:20])[0]
    return machine


def build_host_library(host_dir: Path, out: Path, env: Mapping[str, str], arch: str) -> None:
    sources = sorted(host_dir.glob("*.c"))
    if not sources:
        raise BackendError(f"no host sources: {host_dir} has no *.c files")
    cc = shlex.split(env.get("RELEASE_CC") or "cc")
    if not env.get("RELEASE_CC") and arch != host_arch():
        raise BackendError(
            f"RELEASE_TARGET_ARCH is {arch} on a {host_arch()} host; set RELEASE_CC to a "
            f"cross compiler, e.g. 'zig cc -target {arch}-linux-gnu.2.28'"
        )
    # No debug info, and no build path in what is left (assert messages, __FILE__): the
    # library's bytes depend on the sources and the compiler only.
    cmd = [
        *cc,
        "-O2",
        "-g0",
        f"-ffile-prefix-map={host_dir}=host",
        "-fPIC",
        "-shared",
        f"-I{host_dir}",
        *map(str, sources),
        "-o",
        str(out),
        "-ldl",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BackendError(
            f"host library build failed (exit {proc.returncode}, {shlex.join(cc)}): "
            f"{device_build.tail(proc.stderr + proc.stdout)}"
        )
    got = elf_machine(out)
    if got != ARCHES[arch]:
        names = {v: k for k, v in ARCHES.items()}
        raise BackendError(
            f"RELEASE_CC built a {names.get(got, f'e_machine {got}')} library but "
            f"RELEASE_TARGET_ARCH is {arch}"
        )


# ---------------------------------------------------------------- archives


def _epoch(env: Mapping[str, str]) -> int:
    text = env.get("SOURCE_DATE_EPOCH", "")
    return max(int(text), 315532800) if text.isdigit() else 315532800  # 1980-01-01


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def write_wheel(
    path: Path, files: Sequence[tuple[str, bytes, int]], dist_info: str, epoch: int
) -> None:
    """Write a wheel: `files` are (archive name, bytes, mode). Members are sorted by name,
    the .dist-info last and its RECORD at the very end; every member has the `epoch`
    date and its given mode, so the bytes depend on the files alone."""
    stamp = time.gmtime(epoch)[:6]
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    tmp = path.with_name(f".{path.name}.tmp")
    ordered = sorted(files, key=lambda f: (f[0].startswith(f"{dist_info}/"), f[0]))
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data, mode in ordered:
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
            writer.writerow([name, _record_hash(data), len(data)])
        writer.writerow([f"{dist_info}/RECORD", "", ""])
        info = zipfile.ZipInfo(f"{dist_info}/RECORD", date_time=stamp)
        info.external_attr = (0o100000 | 0o644) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        zf.writestr(info, record.getvalue())
    os.replace(tmp, path)


def _package_files(src_pkg: Path) -> list[tuple[str, bytes, int]]:
    if not (src_pkg / "__init__.py").is_file():
        raise BackendError(f"{src_pkg} is not a Python package (no __init__.py)")
    out = []
    for path in sorted(src_pkg.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            rel = path.relative_to(src_pkg.parent).as_posix()
            out.append((rel, path.read_bytes(), 0o644))
    return out


def _default_device_cache() -> Path:
    base = ROOT / "build"
    try:
        base.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=base, delete=True)  # noqa: SIM115
        probe.close()
        return base / "device-cache"
    except OSError:
        return Path(tempfile.gettempdir()) / "k3-kernels-device-cache"


def _build(wheel_directory: str, settings: Mapping[str, str]) -> str:
    project = _load_pyproject()["project"]
    version = _version(project, settings)
    arch = target_arch(settings)
    name = _dist_name(project)
    dist_info = f"{name}-{version}.dist-info"
    tag = wheel_tag(arch)
    config = device_build.config_from_env(settings, default_cache=_default_device_cache())

    with tempfile.TemporaryDirectory(prefix="k3-wheel-") as tmp:
        device_out = Path(tmp) / "device"
        result = device_build.build_device(ROOT / "kernels", device_out, config)
        lib = Path(tmp) / HOST_LIB
        build_host_library(ROOT / "host", lib, settings, arch)

        files = _package_files(ROOT / "src" / PACKAGE)
        files.append((f"{PACKAGE}/{HOST_LIB}", lib.read_bytes(), 0o755))
        for fatbin in result.fatbins:
            files.append((f"{PACKAGE}/device/{fatbin.name}", fatbin.read_bytes(), 0o644))
        label = (settings.get("RELEASE_LOCAL_LABEL") or "").strip() or None
        info = {
            "cuda_version": result.cuda_version,
            "device_compiler": result.compiler,
            "device_compiler_version": result.compiler_version,
            "sms": list(result.sms),
            "ptx": result.ptx,
            "target_arch": arch,
            "local_label": label,
        }
        files.append(
            (f"{PACKAGE}/_build_info.json", (json.dumps(info, indent=2) + "\n").encode(), 0o644)
        )
        files.append((f"{dist_info}/METADATA", metadata_text(project, version).encode(), 0o644))
        for license_file in license_files(project):
            data = (ROOT / license_file).read_bytes()
            files.append((f"{dist_info}/licenses/{license_file}", data, 0o644))
        wheel_meta = (
            f"Wheel-Version: 1.0\nGenerator: k3_build_backend\nRoot-Is-Purelib: false\nTag: {tag}\n"
        )
        files.append((f"{dist_info}/WHEEL", wheel_meta.encode(), 0o644))
        filename = f"{name}-{version}-{tag}.whl"
        Path(wheel_directory).mkdir(parents=True, exist_ok=True)
        write_wheel(Path(wheel_directory) / filename, files, dist_info, _epoch(settings))
    return filename


def _fail(exc: Exception) -> SystemExit:
    # The frontend prints the backend's stderr: one line, no traceback.
    print(f"error: {exc}", file=sys.stderr)
    return SystemExit(1)


# ---------------------------------------------------------------- PEP 517 hooks


def get_requires_for_build_wheel(config_settings: Mapping[str, Any] | None = None) -> list[str]:
    return [] if sys.version_info >= (3, 11) else ["tomli>=1.1"]


get_requires_for_build_sdist = get_requires_for_build_wheel


def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: Mapping[str, Any] | None = None
) -> str:
    try:
        settings = _settings(config_settings)
        project = _load_pyproject()["project"]
        version = _version(project, settings)
        tag = wheel_tag(target_arch(settings))
    except BackendError as exc:
        raise _fail(exc) from None
    dist_info = f"{_dist_name(project)}-{version}.dist-info"
    out = Path(metadata_directory) / dist_info
    out.mkdir(parents=True, exist_ok=True)
    (out / "METADATA").write_text(metadata_text(project, version), encoding="utf-8")
    for name in license_files(project):
        (out / "licenses" / name).parent.mkdir(parents=True, exist_ok=True)
        (out / "licenses" / name).write_bytes((ROOT / name).read_bytes())
    (out / "WHEEL").write_text(
        f"Wheel-Version: 1.0\nGenerator: k3_build_backend\nRoot-Is-Purelib: false\nTag: {tag}\n",
        encoding="utf-8",
    )
    return dist_info


def build_wheel(
    wheel_directory: str,
    config_settings: Mapping[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    try:
        return _build(wheel_directory, _settings(config_settings))
    except (BackendError, device_build.DeviceBuildError) as exc:
        raise _fail(exc) from None


def build_sdist(sdist_directory: str, config_settings: Mapping[str, Any] | None = None) -> str:
    settings = _settings(config_settings)
    try:
        project = _load_pyproject()["project"]
        version = _version(project, settings)
    except BackendError as exc:
        raise _fail(exc) from None
    base = f"{_dist_name(project)}-{version}"
    epoch = _epoch(settings)
    out = Path(sdist_directory) / f"{base}.tar.gz"
    Path(sdist_directory).mkdir(parents=True, exist_ok=True)

    def add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
        info = tarfile.TarInfo(f"{base}/{name}")
        info.size, info.mtime, info.mode = len(data), epoch, mode
        tar.addfile(info, io.BytesIO(data))

    paths: list[Path] = []
    for part in _SDIST_PARTS:
        p = ROOT / part
        if p.is_file():
            paths.append(p)
        elif p.is_dir():
            paths.extend(q for q in p.rglob("*") if q.is_file() and "__pycache__" not in q.parts)
    tmp = out.with_name(f".{out.name}.tmp")
    with tarfile.open(tmp, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        add(tar, "PKG-INFO", metadata_text(project, version).encode())
        for p in sorted(paths):
            add(tar, p.relative_to(ROOT).as_posix(), p.read_bytes())
    os.replace(tmp, out)
    return out.name
