"""A torch cell's build environment: a venv of the cell's CPython holding exactly the pinned
torch (never whatever the index serves) and the project's other build requirements (its
own and the matrix's build.requires), and a CUDA_HOME assembled from the toolchain's (PyPI's
nvcc, or the CUDA_HOME of the cell's CUDA libraries: release.toolchain.cudahome) and the
CUDA library headers and link names that torch's own nvidia-* wheels bring. Made once per
(torch, CUDA, arch, Python, index, requirements) in the toolchain cache, checked when read
back, one CUDA_HOME per toolchain; held in use while a process builds with it
(release.toolchain.envcache), which keeps it from being pruned.

The pure core names the environment and judges what torch reports; the edge installs and
probes it through a `proc.Runner`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shlex
import shutil
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from packaging.version import Version

from release import proc
from release.backends.base import EnvironmentPaths, EnvironmentSpec
from release.backends.torch_extension import CXX_WRAPPER_PATH, TorchEnvSpec
from release.errors import ToolchainError
from release.fsutil import json_document, read_document
from release.resources import script
from release.toolchain import envcache
from release.toolchain.provision import Progress, check_pip_install, pip_config, pip_progress

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover
    pass  # type: ignore[import-not-found, unused-ignore]

MARKER = ".complete"

# What the venv's torch says of itself, as JSON on one line.
# Bumped whenever assemble_cuda_home makes a different CUDA_HOME: each layout (and each
# toolchain) gets a CUDA_HOME of its own in the environment (`cuda_home_dir`), made again
# without its venv.
CUDA_HOME_LAYOUT = 6

# nvcc as a torch cell's build runs it: release.toolchain.nvccwrap (names that depend on
# the sources only, the compile cache, the cell's targets held to every compile) under the
# tool's own Python, which the build names; nvcc itself where none is named.
NVCC_WRAPPER = """\
#!/bin/sh
# nvcc of a torch cell's build (written by cuda-wheel-release): release.toolchain.nvccwrap
# under the Python the build names in RELEASE_NVCC_PYTHON, else nvcc itself
real=%(real)s
if [ -z "${RELEASE_NVCC_PYTHON:-}" ]; then
  exec "$real" "$@"
fi
exec "$RELEASE_NVCC_PYTHON" -I -m release.toolchain.nvccwrap nvcc "$real" "$@"
"""

# The host C++ compiler through the compile cache: torch's cpp_extension runs $CXX, and
# accepts a wrapper whose path names g++. Every compile through it gets the cell's prefix
# maps (RELEASE_CXX_FLAGS), also one whose build system reads no CPPFLAGS (torch's and
# tvm_ffi's JIT builders, run by a prepare step).
CXX_WRAPPER = """\
#!/bin/sh
# c++ through the compile cache, with the cell's flags (written by cuda-wheel-release)
set -f
exec "${RELEASE_COMPILE_LAUNCHER:?}" c++ ${RELEASE_CXX_FLAGS-} "$@"
"""

# What to do where a torch's own requirements exclude one of the build's (pip's install
# refused the pair, or release.building.torchcell saw it from the torch's METADATA first)
REQUIREMENTS_HINT = (
    "pin a torch whose own requirements admit the build's (matrix.yaml's torch: `release "
    "init` picks one), or change the build requirement"
)

# ---------------------------------------------------------------- pure core


@dataclass(frozen=True, kw_only=True)
class TorchEnv:
    """A provisioned torch environment."""

    root: Path
    python: Path
    torch_version: str  # as torch says it: `2.14.1+cu130`
    torch_cuda: str  # `13.0`
    lib_dirs: tuple[Path, ...]  # torch/lib and the nvidia-* lib folders beside it
    cuda_home: Path
    limited_api: str | None = None  # torch's Py_LIMITED_API, `0x030A0000`
    python_include: Path | None = None  # the interpreter's headers, outside the venv
    site_packages: Path | None = None  # where torch lies

    @property
    def name(self) -> str:
        """What it holds, in a message: `torch 2.14.1+cu130`."""
        return f"torch {self.torch_version}"

    @property
    def identity(self) -> str:
        return f"torch {self.torch_version} (CUDA {self.torch_cuda}) in {self.root.name}"

    @property
    def key_identity(self) -> str:
        """What a wheel built in it depends on, without a path: the cache directory's name
        is the hash of torch, CUDA, arch, Python, index and requirements."""
        return f"torch {self.torch_version} {self.root.name} cuda-home {CUDA_HOME_LAYOUT}"

    def paths(self) -> EnvironmentPaths:
        """What the torch backend's inputs see of it."""
        return EnvironmentPaths(
            cuda_home=self.cuda_home, cache_dir=self.root.parent, python_include=self.python_include
        )

    def cache_identity(self) -> dict[str, str]:
        """What it adds to the wheel cache key of a cell built in it."""
        return {"torch": self.key_identity}

    def summary(self) -> dict[str, str]:
        """What it adds to (and changes in) a built cell's toolchain summary (manifest.json)."""
        return {
            "torch": self.torch_version,
            "host_cc": "the build machine's c++ (torch's cpp_extension runs it)",
        }


def torch_problem(spec: TorchEnvSpec, reported: Mapping[str, object]) -> str | None:
    """Why the installed torch is not the cell's: another release, a CPU-only build, or a
    build for another CUDA major (checked before anything is compiled)."""
    try:
        version = Version(str(reported.get("version")))
    except ValueError:  # InvalidVersion, or a number of more digits than int() reads
        return f"torch reports an unreadable version {reported.get('version')!r}"
    if Version(version.public) != spec.torch:
        return f"the index gave torch {version}, not the pinned {spec.torch}"
    cuda = reported.get("cuda")
    if not isinstance(cuda, str) or not cuda:
        return (
            f"torch {version} is a CPU-only build: its wheels have no CUDA; name the index of "
            f"its CUDA {spec.cuda} builds under torch-index"
        )
    if cuda.split(".")[0] != spec.cuda.split(".")[0]:
        major = spec.cuda.split(".")[0]
        return (
            f"torch {version} is built for CUDA {cuda}, the cell is CUDA {spec.cuda}: name the "
            f"index of its cu{spec.cuda.replace('.', '')} builds under torch-index (e.g. "
            f"https://download.pytorch.org/whl/cu{spec.cuda.replace('.', '')}), one for "
            f"CUDA {major}"
        )
    return None


def torch_pin(spec: TorchEnvSpec) -> str:
    """The requirement that installs the cell's torch. From PyPI (no torch-index named, or
    PyPI's own), whose files carry no local label, it is `===`: the exact version string, so
    that a `2.13.0+cpu` from pip's other sources (a find-links folder, an extra index of
    PyTorch's CPU builds), which `==2.13.0` admits and pip ranks above `2.13.0`, cannot stand
    in for it. A named index's builds carry their label (`2.9.1+cu129`): `==` there."""
    if spec.index_url is None or _is_pypi(spec.index_url):
        release = (*spec.torch.release, 0, 0)[: max(3, len(spec.torch.release))]
        return f"torch==={'.'.join(map(str, release))}"  # as torch spells it: 2.13 is 2.13.0
    return f"torch=={spec.torch}"


def _is_pypi(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host in ("pypi.org", "test.pypi.org")


def install_commands(spec: TorchEnvSpec, pip_python: str, target: Path) -> list[list[str]]:
    """pip runs of the tool's own pip into the venv (`--python`): torch alone first, from its
    index where one is named (so that no other index can serve a torch of the same
    version), then everything else with torch held to the installed one."""
    base = [
        pip_python, "-m", "pip", "--python", str(target), "install",
        "--disable-pip-version-check", "--only-binary=torch", "--progress-bar", "raw",
    ]  # fmt: skip
    index = ["--index-url", spec.index_url] if spec.index_url else []
    pin = torch_pin(spec)
    return [
        [*base, *index, pin],
        [*base, pin, *spec.requirements, spec.frontend],
    ]


# ---------------------------------------------------------------- edge


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def find_python(version: str, env: Mapping[str, str]) -> Path:
    """The CPython `version` on this machine's PATH (`python3.12`); missing is an error
    naming it."""
    found = shutil.which(f"python{version}", path=env.get("PATH", os.defpath))
    if found is None:
        raise ToolchainError(
            f"Python {version} is not on this machine (no python{version} on PATH), and a "
            f"cp{version.replace('.', '')} cell builds with it",
            hint=f"install it (`uv python install {version}`, or the distribution's "
            f"python{version}) and put it on PATH, or leave the cell out with --cuda / --arch",
        )
    return Path(found)


def _link_entries(
    source: Path, dest: Path, *, skip: frozenset[str] | set[str] = frozenset()
) -> None:
    """Link every entry of `source` into `dest` that `dest` lacks (but those in `skip`)."""
    if not source.is_dir():
        return
    for entry in sorted(source.iterdir()):
        if entry.name in skip:
            continue
        target = dest / entry.name
        if not target.exists() and not target.is_symlink():
            target.symlink_to(entry)


def cuda_home_dir(root: Path, toolkit: Path) -> Path:
    """The CUDA_HOME of the environment at `root` made from the toolchain's `toolkit`: one
    for each toolkit and layout, so that a build with another one never changes it."""
    key = hashlib.sha256(f"{toolkit}\0{CUDA_HOME_LAYOUT}".encode()).hexdigest()[:16]
    return root / "cuda-homes" / key / "cuda-home"


def assemble_cuda_home(home: Path, toolkit: Path, site: Path, cuda: str) -> Path:
    """CUDA_HOME for torch's cpp_extension at `home`: the toolchain's (PyPI's nvcc: bin,
    nvvm, include and lib; or the CUDA_HOME of the cell's CUDA libraries), the headers and
    libraries of torch's nvidia-* wheels it lacks (ATen includes cublas_v2.h, cusparse.h,
    ...), and the link name libcudart.so (torch links -lcudart). Its marker is written
    last."""
    shutil.rmtree(home, ignore_errors=True)
    (home / "include").mkdir(parents=True)
    (home / "lib").mkdir()
    if (toolkit / "nvvm").exists():
        (home / "nvvm").symlink_to(toolkit / "nvvm")
    (home / "bin").mkdir()
    _link_entries(toolkit / "bin", home / "bin", skip={"nvcc"})
    wrapper = home / "bin" / "nvcc"
    wrapper.write_text(
        NVCC_WRAPPER % {"real": shlex.quote(str(toolkit / "bin" / "nvcc"))}, encoding="utf-8"
    )
    wrapper.chmod(0o755)
    cxx = home / CXX_WRAPPER_PATH
    cxx.parent.mkdir()
    cxx.write_text(CXX_WRAPPER, encoding="utf-8")
    cxx.chmod(0o755)
    major = cuda.split(".", maxsplit=1)[0]
    nvidia = site / "nvidia"
    wheel_dirs = [nvidia / f"cu{major}"] if (nvidia / f"cu{major}").is_dir() else []
    wheel_dirs += sorted(p for p in nvidia.glob("*") if p.is_dir() and p not in wheel_dirs)
    for source in (toolkit, *wheel_dirs):
        _link_entries(source / "include", home / "include")
        _link_entries(source / "lib", home / "lib")
    runtime = sorted((home / "lib").glob("libcudart.so.*"))
    if not (home / "lib" / "libcudart.so").exists() and runtime:
        (home / "lib" / "libcudart.so").symlink_to(runtime[0].name)
    (home / "lib64").symlink_to("lib")  # for torch releases that look in lib64/ only
    (home / MARKER).write_text(f"{CUDA_HOME_LAYOUT}\n", encoding="utf-8")
    return home


def venv_python(root: Path) -> Path:
    return root / "venv" / "bin" / "python"


def provisioned(spec: TorchEnvSpec, cache_dir: Path) -> bool:
    """Whether the environment of `spec` lies whole in `cache_dir` (nothing to install)."""
    return _read_back(cache_dir / spec.dirname, spec) is not None


def _read_back(root: Path, spec: TorchEnvSpec) -> Mapping[str, object] | None:
    """What the marker records, if the venv it describes is still there and is the spec's."""
    try:
        recorded = json_document(read_document(root / MARKER), str(root / MARKER))
    except (OSError, ValueError):
        return None
    if not isinstance(recorded, dict):
        return None
    site = Path(str(recorded.get("site", "")))
    installed = list(site.glob(f"torch-{spec.torch}*.dist-info"))
    if not venv_python(root).exists() or not installed or torch_problem(spec, recorded):
        return None
    return recorded


def _torch_env(root: Path, reported: Mapping[str, object], cuda_home: Path) -> TorchEnv:
    site = Path(str(reported.get("site", "")))
    lib = Path(str(reported.get("lib", "")))
    nvidia_libs = tuple(sorted(site.glob("nvidia/*/lib")))
    limited = reported.get("limited_api")
    include = reported.get("python_include")
    return TorchEnv(
        root=root,
        python=venv_python(root),
        torch_version=str(reported.get("version")),
        torch_cuda=str(reported.get("cuda")),
        lib_dirs=(lib, *nvidia_libs),
        cuda_home=cuda_home,
        limited_api=limited if isinstance(limited, str) else None,
        python_include=Path(include) if isinstance(include, str) else None,
        site_packages=site if site.is_dir() else None,
    )


def provision_torch_env(
    spec: EnvironmentSpec,
    *,
    toolkit: Path,
    cache_dir: Path,
    runner: proc.Runner = proc.run,
    python: str = sys.executable,
    env: Mapping[str, str],
    progress: Progress | None = None,
) -> TorchEnv:
    """The cell's torch environment in `cache_dir` (made once; a damaged one is made again),
    held in use by this process from now on (release.toolchain.envcache). `python` is the
    tool's own (its pip installs into the venv); `toolkit` is the toolchain's CUDA_HOME
    (PyPI's nvcc, or the one of the cell's CUDA libraries)."""
    if not isinstance(spec, TorchEnvSpec):
        raise TypeError(f"no provisioning for a {type(spec).__name__}")
    root = cache_dir / spec.dirname
    envcache.hold(cache_dir, spec.dirname)
    with _locked(cache_dir / f"{spec.dirname}.lock"):
        recorded = _read_back(root, spec)
        if recorded is None:
            _install(spec, root, runner=runner, python=python, env=env, progress=progress)
            recorded = _probe(spec, root, runner=runner, env=env)
        home = cuda_home_dir(root, toolkit)
        if not (home / MARKER).is_file():
            assemble_cuda_home(home, toolkit, Path(str(recorded["site"])), spec.cuda)
        return _torch_env(root, recorded, home)


def _install(
    spec: TorchEnvSpec,
    root: Path,
    *,
    runner: proc.Runner,
    python: str,
    env: Mapping[str, str],
    progress: Progress | None,
) -> None:
    """A fresh venv at `root` with the pinned torch and the other build requirements."""
    interpreter = find_python(spec.python, env)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    made = runner(
        [str(interpreter), "-m", "venv", "--without-pip", str(root / "venv")],
        env=env, separate_stderr=True,
    )  # fmt: skip
    if not made.ok:
        raise ToolchainError(proc.failure(f"making a Python {spec.python} venv", made))
    hint = (
        f"check that {spec.index_url or 'the index'} has torch {spec.torch} for Python "
        f"{spec.python} on {spec.arch}"
    )
    for command in install_commands(spec, python, venv_python(root)):
        tail = command[command.index("raw") + 1 :]
        # what it installs, without the index it names (that is in the hint)
        requirements = [
            arg for i, arg in enumerate(tail)
            if arg != "--index-url" and (i == 0 or tail[i - 1] != "--index-url")
        ]  # fmt: skip
        result = runner(
            command, env=env, separate_stderr=True, on_line=pip_progress(spec.label, progress)
        )
        check_pip_install(
            result, requirements, python=python, hint=hint,
            conflict_hints={
                "torch": f"torch {spec.torch}'s own requirements exclude one of the build's: "
                + REQUIREMENTS_HINT,
                "build": f"{spec.frontend} is the PEP 517 frontend release runs the build with, "
                "beside torch: widen the project's build requirement to admit what it needs",
            },
            config=pip_config(runner, python, env),
        )  # fmt: skip


def _probe(
    spec: TorchEnvSpec, root: Path, *, runner: proc.Runner, env: Mapping[str, str]
) -> Mapping[str, object]:
    """Probe the venv's torch, judge it, and write the marker last."""
    (root / MARKER).unlink(missing_ok=True)
    probed = runner(
        [str(venv_python(root)), str(script("torch_probe.py"))], env=env, separate_stderr=True
    )
    if not probed.ok:
        raise ToolchainError(proc.failure(f"importing torch {spec.torch}", probed))
    reported = json_document(probed.output.strip().splitlines()[-1], "the torch probe")
    problem = torch_problem(spec, reported)
    if problem is not None:
        raise ToolchainError(problem)
    (root / MARKER).write_text(json.dumps(reported, sort_keys=True) + "\n", encoding="utf-8")
    return dict(reported)
