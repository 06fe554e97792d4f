"""The fixtures of DeepGEMM's shape through `release build`, end to end (issue 51's proof).

- tests/fixtures/jit_gemm, in a git checkout of its own, with the matrix.yaml `release init`
  writes for it (tests/integration/test_init_staged.py: the sgl_k3_jit subdirectory,
  build.prepare with the staging script and its version file, build.requires
  apache-tvm-ffi==0.1.9, build.cuda-libraries, the local-version switch off, device-code:
  none, python: any) and torch 2.14.1, the full tier's torch; the release workflow has
  written 0.2.0 into the version file. One `release build --cuda 13.0 --arch x86_64`,
  shared by the tests below: one py3-none wheel of sgl-k3-jit whose host-only _C.so needs
  libtorch and libc10 from torch, libtvm_ffi from apache-tvm-ffi and libnvrtc and
  libcudart from nvidia-* wheels, each provided by a distribution its Requires-Dist
  reaches (none grafted), that passes the ABI check beside torch 2.14.1 and
  apache-tvm-ffi, ships its kernel header, and leaves the checkout as it was.
- tests/fixtures/jit_host, the same shape without torch, for CUDA 12.9 (no nvcc on PyPI):
  a CMake cell of device-code: none built with the -cu12 wheels' headers and libraries,
  whose _C.so needs libnvrtc.so.12 and libcudart.so.12, which its requirements
  nvidia-cuda-nvrtc-cu12 and nvidia-cuda-runtime-cu12 provide; loaded beside them, it
  compiles its kernel with NVRTC 12.9 (no GPU needed for that). Its _driver links the
  NVIDIA driver's libcuda through the CUDA_HOME's link stub (build.cuda-libraries: cuda).

Slow: a real torch environment (torch 2.14.1 and apache-tvm-ffi: a torch environment of
its own, its build requirements differ from the torch fixture's), real compiles, and the
12.9 wheel's requirements installed from PyPI into the cache's scratch site (kept between
runs with RELEASE_TEST_CACHE).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from release.building.runtimedeps import scratch_key
from release.inspection.devicecode import host_only_problems
from release.inspection.runtimelibs import (
    installed_distributions,
    marker_environment,
    provided_by,
    wheel_requirements,
)
from release.inspection.torchabi import abi_problems, shared_objects, torch_exports
from release.inspection.verdict import manylinux_verdict
from release.matrix import Cell, load_matrix
from release.toolchain import host_machine
from release.toolchain.buildenv import cell_targets, environment_of
from tests.full.shared_builds import TORCH, TORCH_CLI, TORCH_EPOCH, linked_cache

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GIT = shutil.which("git") or "git"
VERSION = "0.2.0"  # as the release workflow writes it from the tag
GEMM_WHEEL = f"sgl_k3_jit-{VERSION}-py3-none-manylinux_2_34_x86_64.whl"
HOST_WHEEL = "k3_jit_host-0.1.0-py3-none-manylinux_2_34_x86_64.whl"
STANDARD_LIBRARIES = {"libstdc++.so.6", "libgcc_s.so.1", "libc.so.6"}

# what `release init` writes for tests/fixtures/jit_gemm, its torch the full tier's
GEMM_MATRIX = f"""\
project: sgl_k3_jit
build:
  backend: torch
  prepare:
    command: bash build_sgl_k3_jit.sh
    version-file: sgl_k3_jit/VERSION
    output: build
  requires: ["apache-tvm-ffi==0.1.9"]
  cuda-libraries: [cudart, nvrtc]
  env:
    K3_USE_LOCAL_VERSION: "0"
defaults:
  arches: [x86_64]
  device-code: none
  manylinux: "2_34"
  python: any
cuda:
  "13.0":
    destination: pypi
    torch: "{TORCH}"
destinations:
  pypi:
    kind: pypi
"""


def git(where: Path, *args: str) -> str:
    return subprocess.run(
        [GIT, "-C", str(where), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip


@dataclass(frozen=True)
class Built:
    """One fixture's checkout after `release build --json` of one cell."""

    checkout: Path
    cache: Path
    done: subprocess.CompletedProcess[str]
    status_before: str
    seconds: float

    @property
    def built_cell(self) -> dict[str, str]:
        """The one cell of the --json document."""
        (cell,) = json.loads(self.done.stdout)["cells"]
        assert isinstance(cell, dict)
        return cell

    @property
    def cell(self) -> Cell:
        (cell,) = load_matrix(self.checkout / "matrix.yaml").cells
        return cell

    def wheel(self, name: str) -> Path:
        return self.checkout / "dist" / name


def build(checkout: Path, cache: Path, cuda: str) -> Built:
    """`release build --json` of the checkout's one `cuda` cell, run from the checkout."""
    git(checkout, "init", "-q")
    git(checkout, "add", "-A")
    git(checkout, "commit", "-q", "-m", "c")
    for version_file in checkout.glob("*/VERSION"):
        version_file.write_text(f"{VERSION}\n")
    before = git(checkout, "status", "--porcelain", "--ignored")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", TORCH_CLI, "build", "--json", "--cuda", cuda, "--arch", "x86_64",
         "--cache-dir", str(cache)],
        cwd=checkout, capture_output=True, text=True, check=False, timeout=1500,
        env={**os.environ, "SOURCE_DATE_EPOCH": TORCH_EPOCH},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return Built(checkout, cache, done, before, time.monotonic() - started)


def cache_of(where: Path, release_cache: Path) -> Path:
    """A cache of its own whose toolchains and runtime scratch sites are the session's."""
    cache = linked_cache(where, release_cache)
    (release_cache / "runtime").mkdir(exist_ok=True)
    (cache / "runtime").symlink_to(release_cache / "runtime", target_is_directory=True)
    return cache


@pytest.fixture(scope="module")
def gemm(release_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Built:
    if host_machine() != "x86_64":
        pytest.skip("the fixture's matrix is an x86_64 one")
    root = tmp_path_factory.mktemp("jit-gemm")
    checkout = root / "k3-jit"
    shutil.copytree(FIXTURES / "jit_gemm", checkout)
    (checkout / "matrix.yaml").write_text(GEMM_MATRIX)
    return build(checkout, cache_of(root / "cache", release_cache), "13.0")


@pytest.fixture(scope="module")
def host(release_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Built:
    if host_machine() != "x86_64":
        pytest.skip("the fixture's matrix is an x86_64 one")
    root = tmp_path_factory.mktemp("jit-host")
    checkout = root / "k3-jit-host"
    shutil.copytree(FIXTURES / "jit_host", checkout)
    (checkout / ".gitignore").write_text("dist/\n")
    return build(checkout, cache_of(root / "cache", release_cache), "12.9")


def section_names(data: bytes, member: str) -> set[str]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {s.name for s in ELFFile(io.BytesIO(archive.read(member))).iter_sections()}


def torch_site(built: Built) -> Path:
    """The site-packages of the torch environment the cell built in."""
    spec = environment_of(built.cell)
    assert spec is not None
    (site,) = (built.cache / "toolchains" / spec.dirname / "venv").glob("lib/python*/site-packages")
    return site


# ---------------------------------------------------------------- 13.0, beside torch 2.14.1


def test_one_py3_none_wheel_of_the_published_distribution_at_the_written_version(
    gemm: Built,
) -> None:
    cell = gemm.built_cell
    assert cell["cell"] == f"13.0-x86_64-torch{TORCH}"
    assert cell["wheel"] == GEMM_WHEEL
    assert sorted(p.name for p in (gemm.checkout / "dist").glob("*.whl")) == [GEMM_WHEEL]
    with zipfile.ZipFile(gemm.wheel(GEMM_WHEEL)) as archive:
        wheel = archive.read(f"sgl_k3_jit-{VERSION}.dist-info/WHEEL").decode()
        assert archive.read("k3_jit/VERSION").decode().strip() == VERSION
    assert "Tag: py3-none-manylinux_2_34_x86_64\n" in wheel
    assert "Root-Is-Purelib: false\n" in wheel
    (line,) = [n for n in gemm.done.stderr.splitlines() if n.startswith("ok 13.0-x86_64")]
    size = gemm.wheel(GEMM_WHEEL).stat().st_size / 2**20
    assert line.endswith(f"{GEMM_WHEEL} ({size:.2f} MiB; no device code)")


def test_the_staging_script_s_compile_goes_through_the_cell_s_compile_cache(
    gemm: Built,
) -> None:
    """Its one compile (_C.so, by the prepare step) finds the cell's compile-cache server:
    it is counted, on the matrix's storage. Started after the prepare step, the server was
    not there for it, so sccache's client started one of its own, uncounted and on no
    storage of the matrix's, and left it running after the build."""
    cache = gemm.built_cell["compile_cache"]
    assert isinstance(cache, dict)
    assert cache["hits"] + cache["misses"] == 1, cache
    assert cache["storage"].startswith("local directory")


def test_its_library_holds_no_path_of_this_machine(gemm: Built) -> None:
    """The staging script compiles _C.so with tvm_ffi's own builder, which reads no CPPFLAGS:
    the prefix maps reach it through CUDA_HOME's c++ wrapper, so that the same commit gives
    the same bytes in any checkout and cache."""
    with zipfile.ZipFile(gemm.wheel(GEMM_WHEEL)) as archive:
        library = archive.read("k3_jit/_C.so")
    assert b"csrc/jit_api.cpp" in library  # its __FILE__, as the checkout names it
    for path in {gemm.checkout, gemm.checkout.resolve(), gemm.cache, gemm.cache.resolve(),
                 (gemm.cache / "toolchains").resolve()}:  # fmt: skip
        assert str(path).encode() not in library


def test_its_requirements_pin_torch_and_name_apache_tvm_ffi(gemm: Built) -> None:
    data = gemm.wheel(GEMM_WHEEL).read_bytes()
    assert wheel_requirements(data) == ("apache-tvm-ffi==0.1.9", "torch==2.14.*")


def test_every_library_it_needs_comes_from_a_requirement_and_none_is_grafted(
    gemm: Built,
) -> None:
    data = gemm.wheel(GEMM_WHEEL).read_bytes()
    (library,) = shared_objects(data)
    assert library.name == "k3_jit/_C.so"  # the one shared object: nothing grafted beside it
    outside = set(library.needed) - STANDARD_LIBRARIES
    assert outside == {
        "libtvm_ffi.so", "libcudart.so.13", "libnvrtc.so.13",
        "libtorch.so", "libtorch_cpu.so", "libc10.so", "libc10_cuda.so",
    }  # fmt: skip
    installed = installed_distributions(torch_site(gemm))
    provided = provided_by(
        wheel_requirements(data), installed, marker_environment("3.11", "x86_64")
    )
    assert {name: provided.get(name) for name in outside} == {
        "libtvm_ffi.so": "apache-tvm-ffi",
        "libcudart.so.13": "nvidia-cuda-runtime",
        "libnvrtc.so.13": "nvidia-cuda-nvrtc",
        "libtorch.so": "torch",
        "libtorch_cpu.so": "torch",
        "libc10.so": "torch",
        "libc10_cuda.so": "torch",
    }
    # auditwheel alone holds each of them outside manylinux; what they provide passes
    alone = manylinux_verdict(gemm.wheel(GEMM_WHEEL), manylinux="2_34", arch="x86_64")
    assert set(alone.external_libraries) == outside
    with_them = manylinux_verdict(
        gemm.wheel(GEMM_WHEEL), manylinux="2_34", arch="x86_64", provided=provided.keys()
    )
    assert (with_them.external_libraries, with_them.problems) == ((), ())


def test_no_device_code_anywhere(gemm: Built) -> None:
    data = gemm.wheel(GEMM_WHEEL).read_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = archive.namelist()
    assert not [n for n in names if n.endswith((".cubin", ".ptx", ".fatbin", ".a", ".o"))]
    assert not {".nv_fatbin", ".nvFatBinSegment"} & section_names(data, "k3_jit/_C.so")
    assert host_only_problems(data) == []


def test_the_abi_check_beside_torch_and_apache_tvm_ffi_passes_and_would_refuse(
    gemm: Built,
) -> None:
    data = gemm.wheel(GEMM_WHEEL).read_bytes()
    site = torch_site(gemm)
    torch_libs = torch_exports([site / "torch" / "lib"])
    tvm_ffi = torch_exports([site / "tvm_ffi" / "lib"])
    (library,) = shared_objects(data)
    from_torch = sorted(s.name for s in library.undefined if s.name in torch_libs)
    from_tvm_ffi = sorted(s.name for s in library.undefined if s.name.startswith("TVMFFI"))
    assert from_torch, "the library calls into libtorch and libc10"
    assert from_tvm_ffi, "and into libtvm_ffi"
    assert set(from_tvm_ffi) <= tvm_ffi
    exports = torch_exports(
        [site / "torch" / "lib", site / "tvm_ffi" / "lib", *site.glob("nvidia/*/lib")]
    )
    label = f"{TORCH}+cu130"
    beside = ["apache-tvm-ffi"]
    assert abi_problems(data, exports, stable=False, torch_label=label, beside=beside) == []
    # beside a torch without one of them (0.1.5.post1's materialize_cow_storage beside
    # torch 2.14.1), the same check refuses it, naming it
    missing = exports - {from_torch[0]}
    (problem,) = abi_problems(data, missing, stable=False, torch_label=label, beside=beside)
    assert problem.startswith("k3_jit/_C.so: undefined symbol ")
    assert problem.endswith(
        f"not exported by torch {label}'s libraries nor by those of apache-tvm-ffi"
    )


def test_the_kernel_header_ships_as_package_data(gemm: Built) -> None:
    with zipfile.ZipFile(gemm.wheel(GEMM_WHEEL)) as archive:
        header = archive.read("k3_jit/include/k3_jit/scale.cuh")
        names = archive.namelist()
    assert (
        header
        == (FIXTURES / "jit_gemm" / "k3_jit" / "include" / "k3_jit" / "scale.cuh").read_bytes()
    )
    assert {"k3_jit/__init__.py", "k3_jit/utils.py", "k3_jit/_C.so"} <= set(names)


def test_the_checkout_is_left_as_it_was(gemm: Built) -> None:
    # the version the workflow wrote, no staged build/ and no egg-info: only dist/ is new,
    # and the bytecode Python caches of the setup.py the staging script imports (the
    # interpreter's, as the prepare step's own check takes it)
    assert (gemm.checkout / "sgl_k3_jit" / "VERSION").read_text() == f"{VERSION}\n"
    assert not (gemm.checkout / "build").exists()
    after = git(gemm.checkout, "status", "--porcelain", "--ignored")

    def kept(status: str) -> list[str]:
        return [line for line in status.splitlines() if not line.endswith("__pycache__/")]

    assert [line for line in kept(after) if "dist/" not in line] == kept(gemm.status_before)


# ---------------------------------------------------------------- 12.9, no torch, no nvcc


def test_a_host_only_library_builds_for_12_9_without_nvcc(host: Built) -> None:
    cell = host.built_cell
    assert (cell["cell"], cell["wheel"]) == ("12.9-x86_64", HOST_WHEEL)
    data = host.wheel(HOST_WHEEL).read_bytes()
    assert host_only_problems(data) == []
    assert not {".nv_fatbin", ".nvFatBinSegment"} & section_names(data, "k3_jit_host/_C.so")
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert "k3_jit_host/include/k3_jit_host/scale.cuh" in archive.namelist()
    assert "no nvcc" not in Path(cell["log"]).read_text()
    after = git(host.checkout, "status", "--porcelain", "--ignored")
    assert [line for line in after.splitlines() if "dist/" not in line] == list(
        host.status_before.splitlines()
    )


def test_its_cu12_requirements_provide_the_libraries_it_needs(host: Built) -> None:
    data = host.wheel(HOST_WHEEL).read_bytes()
    requirements = wheel_requirements(data)
    assert requirements == ("nvidia-cuda-nvrtc-cu12==12.9.*", "nvidia-cuda-runtime-cu12==12.9.*")
    library, driver = shared_objects(data)
    assert (library.name, driver.name) == ("k3_jit_host/_C.so", "k3_jit_host/_driver.so")
    outside = set(library.needed) - STANDARD_LIBRARIES
    assert outside == {"libnvrtc.so.12", "libcudart.so.12"}
    # the scratch site the build installed the requirements into, to look them up
    site = (
        host.cache
        / "runtime"
        / scratch_key(requirements, host.cell.platform_tag, cell_targets(host.cell).python or "")
    )
    provided = provided_by(
        requirements, installed_distributions(site), marker_environment("3.11", "x86_64")
    )
    assert {name: provided.get(name) for name in outside} == {
        "libnvrtc.so.12": "nvidia-cuda-nvrtc-cu12",
        "libcudart.so.12": "nvidia-cuda-runtime-cu12",
    }
    alone = manylinux_verdict(host.wheel(HOST_WHEEL), manylinux="2_34", arch="x86_64")
    assert set(alone.external_libraries) == outside | {"libcuda.so.1"}


def test_its_driver_library_linked_the_stub_and_needs_the_drivers_libcuda(host: Built) -> None:
    """_driver links CUDA::cuda_driver: CMake found the CUDA_HOME's link stub (12.9's, made
    from the cu12 runtime wheel's cuda.h: this machine has no other libcuda), the library
    needs libcuda.so.1 alone besides the C++ runtime and takes the versioned names cuda.h's
    macros give its calls; the cell passed with the driver declared."""
    data = host.wheel(HOST_WHEEL).read_bytes()
    (driver,) = [o for o in shared_objects(data) if o.name == "k3_jit_host/_driver.so"]
    assert set(driver.needed) - STANDARD_LIBRARIES == {"libcuda.so.1"}
    assert {"cuInit", "cuDriverGetVersion", "cuMemGetInfo_v2"} <= {s.name for s in driver.undefined}


def test_beside_its_requirements_it_compiles_its_kernel_with_nvrtc_12_9(
    host: Built, tmp_path: Path
) -> None:
    with zipfile.ZipFile(host.wheel(HOST_WHEEL)) as archive:
        archive.extractall(tmp_path / "wheel")
    requirements = wheel_requirements(host.wheel(HOST_WHEEL).read_bytes())
    site = (
        host.cache
        / "runtime"
        / scratch_key(requirements, host.cell.platform_tag, cell_targets(host.cell).python or "")
    )
    probe = (
        "import json, k3_jit_host as k; "
        "print(json.dumps([k.nvrtc_version(), k.cudart_version(), k.ptx(90)]))"
    )
    ran = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "wheel"), str(site)])},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    nvrtc, cudart, ptx = json.loads(ran.stdout)
    assert (nvrtc, cudart) == ([12, 9], 12090)
    assert ".target sm_90" in ptx
    assert ".entry k3_scale_f32(" in ptx
