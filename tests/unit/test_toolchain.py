"""Toolchain resolution: pins per CUDA version, CUDA_HOME, version checks, build env."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from release.backends import CUDA_LIBRARY_NAMES
from release.commands.doctor import doctor_rows
from release.errors import ToolchainError
from release.inspection.fatbin import parse_cuobjdump_listing
from release.proc import Completed, Runner
from release.toolchain import (
    KNOWN_CUDA,
    PinSet,
    Toolchain,
    ToolchainPlan,
    check_cuda_version,
    parse_release_version,
    provision,
    resolve,
    toolchain_spec,
)
from release.toolchain.pins import CUDA_LIBRARY_PINS

CACHE = Path("/cache")


def test_cuda_13_uses_pinned_pypi_nvcc_with_its_companions() -> None:
    plan = resolve("13.0", "x86_64", cuda_home=None, cache_dir=CACHE, host_arch="x86_64")
    assert plan.device_compiler == "nvcc"
    assert plan.device is not None
    assert set(plan.device.requirements) == {
        "nvidia-cuda-nvcc==13.0.88",
        "nvidia-cuda-crt==13.0.88",
        "nvidia-nvvm==13.0.88",
        "nvidia-cuda-runtime==13.0.96",
        "nvidia-cuda-cccl==13.0.85",
    }
    assert plan.install_dir(plan.device).parent == CACHE


def test_cuda_12_9_uses_nvrtc_and_nvfatbin_because_pypi_has_no_12_9_nvcc() -> None:
    plan = resolve("12.9", "aarch64", cuda_home=None, cache_dir=CACHE, host_arch="x86_64")
    assert plan.device_compiler == "nvrtc"
    assert plan.device is not None
    assert "nvidia-cuda-nvrtc-cu12==12.9.86" in plan.device.requirements
    assert "nvidia-nvfatbin-cu12==12.9.82" in plan.device.requirements
    assert plan.host_cc is not None
    assert plan.host_cc.requirements == ("ziglang==0.17.1",)


def test_unknown_cuda_version_names_the_known_ones() -> None:
    with pytest.raises(ToolchainError) as info:
        resolve("12.4", "x86_64", cuda_home=None, cache_dir=CACHE, host_arch="x86_64")
    for known in KNOWN_CUDA:
        assert known in info.value.message
    assert info.value.hint is not None
    assert "--cuda-home" in info.value.hint


@pytest.mark.parametrize("bad", ["13", "13.0.88", "cu130", ""])
def test_malformed_cuda_version_is_an_error(bad: str) -> None:
    with pytest.raises(ToolchainError, match=r"MAJOR\.MINOR"):
        resolve(bad, "x86_64", cuda_home=None, cache_dir=CACHE, host_arch="x86_64")


def test_unsupported_arch_is_an_error() -> None:
    with pytest.raises(ToolchainError, match="ppc64le"):
        resolve("13.0", "ppc64le", cuda_home=None, cache_dir=CACHE, host_arch="x86_64")


def test_cuda_home_wins_over_pypi_and_builds_with_its_nvcc() -> None:
    home = Path("/opt/cuda-12.9")
    plan = resolve("12.9", "x86_64", cuda_home=home, cache_dir=CACHE, host_arch="x86_64")
    assert plan.device is None
    assert plan.cuda_home == home
    assert plan.device_compiler == "nvcc"
    # A system toolkit may be a version the PyPI table does not know.
    assert resolve("12.8", "x86_64", cuda_home=home, cache_dir=CACHE, host_arch="x86_64").cuda


def test_cache_key_follows_exact_pins_and_host_platform() -> None:
    x86 = toolchain_spec("13.0", "x86_64")
    arm = toolchain_spec("13.0", "aarch64")
    assert x86.key == toolchain_spec("13.0", "x86_64").key
    assert x86.key != arm.key
    assert x86.key != toolchain_spec("12.9", "x86_64").key
    bumped = PinSet(x86.packages.label, (*x86.packages.pins[1:],), x86.packages.host_platform)
    assert bumped.key != x86.key
    assert x86.packages.dirname.startswith("cuda-13.0-nvcc-")


def test_the_device_cache_dir_is_shared_by_both_target_arches() -> None:
    a = resolve("12.9", "x86_64", cuda_home=None, cache_dir=CACHE, host_arch="x86_64")
    b = resolve("12.9", "aarch64", cuda_home=None, cache_dir=CACHE, host_arch="x86_64")
    assert a.device == b.device


def _toolchain(plan_arch: str, cuda: str = "12.9") -> Toolchain:
    plan = resolve(cuda, plan_arch, cuda_home=None, cache_dir=CACHE, host_arch="x86_64")
    zig = CACHE / "zig-x" / "ziglang" / "zig"
    return Toolchain(
        plan=plan,
        device_version="12.9.86",
        cuda_home=None,
        nvrtc_lib=CACHE / "nvrtc" / "libnvrtc.so.12",
        nvfatbin_lib=CACHE / "nvfatbin" / "libnvfatbin.so.12",
        include_dirs=(CACHE / "rt" / "include", CACHE / "other include"),
        cc=(str(zig), "cc", "-target", f"{plan_arch}-linux-gnu.2.28"),
        cc_version="0.17.1",
        cuobjdump=CACHE / "cuobjdump",
        inspector_version="13.2.86",
    )


def test_build_env_for_aarch64_cross_compiles_with_zig_against_glibc_2_28() -> None:
    env = _toolchain("aarch64").build_env()
    cc = shlex.split(env["RELEASE_CC"])
    assert cc[1:] == ["cc", "-target", "aarch64-linux-gnu.2.28"]
    assert cc[0].endswith("/ziglang/zig")
    assert env["RELEASE_TARGET_ARCH"] == "aarch64"
    assert env["RELEASE_DEVICE_COMPILER"] == "nvrtc"
    assert env["RELEASE_CUDA_VERSION"] == "12.9"
    assert env["RELEASE_NVRTC_LIB"].endswith("libnvrtc.so.12")
    assert env["RELEASE_CUDA_INCLUDE"].split(":") == ["/cache/rt/include", "/cache/other include"]
    assert "RELEASE_CUDA_HOME" not in env


def test_version_mismatch_with_a_system_toolkit_is_an_error_not_a_substitute() -> None:
    plan = resolve(
        "12.9", "x86_64", cuda_home=Path("/usr/local/cuda"), cache_dir=CACHE, host_arch="x86_64"
    )
    with pytest.raises(ToolchainError, match=r"CUDA 12\.9 cell: nvcc .* reports CUDA 13\.0\.88"):
        check_cuda_version(plan, "nvcc", Path("/usr/local/cuda/bin/nvcc"), "13.0.88")
    check_cuda_version(plan, "nvcc", Path("/usr/local/cuda/bin/nvcc"), "12.9.86")


class FakeOutside(Runner):
    """pip and the tools as seen from outside: pip 'installs' the files tools live in."""

    def __init__(self, versions: Mapping[str, str], pip: str = "26.3") -> None:
        self.versions = versions
        self.pip = pip
        self.pip_installs: list[tuple[str, ...]] = []

    def __call__(self, cmd: Sequence[str], *, env: Mapping[str, str], **options: Any) -> Completed:
        if cmd[1:4] == ["-m", "pip", "--version"]:
            banner = f"pip {self.pip} from /venv/lib/python3.11/site-packages/pip (python 3.11)\n"
            return Completed(returncode=0, output=banner, seconds=0.0)
        if cmd[1:4] == ["-m", "pip", "install"]:
            target = Path(cmd[cmd.index("--target") + 1])
            reqs = tuple(c for c in cmd if "==" in c)
            self.pip_installs.append(reqs)
            if any("cuobjdump" in r for r in reqs):
                tool = target / "nvidia" / "cu13" / "bin" / "cuobjdump"
                tool.parent.mkdir(parents=True)
                tool.write_text("")
            return Completed(returncode=0, output="", seconds=0.0)
        name = Path(cmd[0]).name
        if name in self.versions:
            banner = f"Cuda compilation tools, release x, V{self.versions[name]}\n"
            return Completed(returncode=0, output=banner, seconds=0.0)
        return Completed(returncode=0, output="cc (fake) 1.0\n", seconds=0.0)


def system_toolkit_plan(tmp_path: Path, cuda: str) -> ToolchainPlan:
    """The plan for `cuda` with a (fake) system toolkit under tmp_path as CUDA_HOME."""
    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "nvcc").write_text("")
    return resolve(
        cuda,
        "x86_64",
        cuda_home=home,
        cache_dir=tmp_path / "cache",
        host_arch="x86_64",
        system_cc=["cc"],
    )


def test_provision_refuses_a_system_toolkit_of_another_cuda_version(tmp_path: Path) -> None:
    plan = system_toolkit_plan(tmp_path, "12.9")
    outside = FakeOutside({"nvcc": "13.0.88", "cuobjdump": "13.2.86"})
    with pytest.raises(ToolchainError, match=r"reports CUDA 13\.0\.88") as info:
        provision(plan, outside, python="python", env={})
    assert info.value.hint is not None
    assert "CUDA 12.9 toolkit" in info.value.hint


def test_provision_stops_at_an_old_pip_before_installing_anything(tmp_path: Path) -> None:
    plan = system_toolkit_plan(tmp_path, "13.0")
    outside = FakeOutside({"nvcc": "13.0.88", "cuobjdump": "13.2.86"}, pip="23.2.1")
    with pytest.raises(ToolchainError, match=r"has pip 23\.2\.1, older than 24\.1") as info:
        provision(plan, outside, python="python", env={})
    assert info.value.hint == (
        "python -m pip install --upgrade 'pip>=24.1' "
        "(installing cuda-wheel-release with pip brings it)"
    )
    assert outside.pip_installs == []


def test_provision_installs_each_pinned_set_once(tmp_path: Path) -> None:
    plan = system_toolkit_plan(tmp_path, "13.0")
    outside = FakeOutside({"nvcc": "13.0.88", "cuobjdump": "13.2.86"})
    first = provision(plan, outside, python="python", env={})
    second = provision(plan, outside, python="python", env={})
    assert first.device_version == "13.0.88"
    assert first.inspector_version == "13.2.86"
    assert len(first.installed) == 1
    assert second.installed == ()
    assert outside.pip_installs == [("nvidia-cuda-cuobjdump==13.2.86",)]
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.startswith(".")]


def test_cuobjdump_listing_parses_sms_with_suffixes_and_ptx() -> None:
    out = (
        "ELF file    1: swiglu.1.sm_75.cubin\n"
        "ELF file    2: swiglu.2.sm_100.cubin\n"
        "ELF file    3: swiglu.3.sm_90a.cubin\n"
        "ELF file    4: swiglu.4.sm_80.cubin\n"
        "PTX file    1: swiglu.1.sm_100.ptx\n"
    )
    targets = parse_cuobjdump_listing(out)
    assert targets.sms == ("75", "80", "90a", "100")
    assert targets.ptx == ("100",)
    assert parse_cuobjdump_listing("").sms == ()


def test_release_version_is_read_from_nvcc_banner() -> None:
    banner = "Cuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler.1_0"
    assert parse_release_version(banner) == "13.0.88"
    with pytest.raises(ToolchainError, match="cannot read"):
        parse_release_version("command not found")


def test_doctor_rows_say_what_is_used_and_from_where() -> None:
    pypi = resolve("12.9", "aarch64", cuda_home=None, cache_dir=CACHE, host_arch="x86_64")
    system = resolve(
        "13.0", "x86_64", cuda_home=Path("/usr/local/cuda"), cache_dir=CACHE, host_arch="x86_64"
    )
    assert pypi.device is not None
    present = frozenset({pypi.install_dir(pypi.device), Path("/usr/local/cuda")})
    rows = doctor_rows([pypi, system], present=present)
    assert rows[0].cells()[:3] == ("12.9", "aarch64", "nvrtc 12.9.86")
    assert "nvidia-cuda-nvrtc-cu12==12.9.86" in rows[0].device.source
    assert rows[0].device.source.startswith("PyPI")
    assert "(cached:" in rows[0].device.source
    assert "not yet installed" in rows[0].host_cc.source
    assert rows[0].host_cc.name == "zig 0.17.1 cc -target aarch64-linux-gnu.2.28"
    assert rows[1].device.source == "system toolkit /usr/local/cuda"
    # a CUDA_HOME with no bin/nvcc (a file, a typo) is said before a build stops on it
    (missing,) = doctor_rows([system], present=frozenset())
    assert missing.device.source == (
        "system toolkit /usr/local/cuda: no bin/nvcc there, a build stops"
    )
    with_probe = doctor_rows([pypi], toolchains={("12.9", "aarch64"): _toolchain("aarch64")})
    assert with_probe[0].inspector.name == "cuobjdump 13.2.86"


# ---------------------------------------------------------------- CUDA libraries (issue 51)


def test_every_known_cuda_version_pins_every_cuda_library_the_matrix_may_name() -> None:
    assert set(CUDA_LIBRARY_PINS) == set(KNOWN_CUDA)
    for cuda, libraries in CUDA_LIBRARY_PINS.items():
        assert set(libraries) == set(CUDA_LIBRARY_NAMES), cuda
        suffix = "-cu12" if cuda.startswith("12.") else ""
        for name, pins in libraries.items():
            assert pins, (cuda, name)
            assert all(p.name.startswith("nvidia-") and p.name.endswith(suffix) for p in pins)


def test_the_runtime_of_the_libraries_is_the_one_of_the_device_compiler() -> None:
    """One CUDA release: the library wheels' runtime and NVRTC are the device pins'."""
    for cuda, known in KNOWN_CUDA.items():
        device = {p.name: p.version for p in known.pins}
        libraries = {p.name: p.version for ps in CUDA_LIBRARY_PINS[cuda].values() for p in ps}
        shared = set(device) & set(libraries)
        assert shared, cuda
        assert {n: libraries[n] for n in shared} == {n: device[n] for n in shared}


def test_a_cell_that_builds_in_a_cuda_home_gets_its_libraries_and_the_runtime() -> None:
    plan = resolve(
        "13.0", "x86_64", cuda_home=None, cache_dir=CACHE, host_arch="x86_64",
        cuda_libraries=("nvrtc", "cublasLt", "cublas"), builds_in_cuda_home=True,
    )  # fmt: skip
    assert plan.libraries is not None
    assert plan.library_names == ("nvrtc", "cublasLt", "cublas")
    assert set(plan.libraries.requirements) == {
        "nvidia-cublas==13.1.0.3",
        "nvidia-cuda-nvrtc==13.0.88",
        "nvidia-cuda-runtime==13.0.96",
        "nvidia-cuda-crt==13.0.88",
        "nvidia-cuda-cccl==13.0.85",
    }
    assert plan.libraries in plan.pinsets  # provisioned with the rest
    assert plan.device_compiler == "nvcc"


def test_a_library_brings_the_wheels_it_links_against() -> None:
    plan = resolve(
        "12.9", "x86_64", cuda_home=None, cache_dir=CACHE, host_arch="x86_64",
        cuda_libraries=("cusolver",), builds_in_cuda_home=True,
    )  # fmt: skip
    assert plan.libraries is not None
    assert {
        "nvidia-cusolver-cu12==11.7.5.82",
        "nvidia-cublas-cu12==12.9.1.4",
        "nvidia-cusparse-cu12==12.5.10.65",
        "nvidia-nvjitlink-cu12==12.9.86",
    } <= set(plan.libraries.requirements)


def test_cuda_12_9_without_nvcc_gets_a_cuda_home_of_the_runtime_alone() -> None:
    plan = resolve(
        "12.9", "x86_64", cuda_home=None, cache_dir=CACHE, host_arch="x86_64",
        builds_in_cuda_home=True,
    )  # fmt: skip
    assert plan.device_compiler == "nvrtc"
    assert plan.libraries is not None
    assert plan.library_names == ()
    assert set(plan.libraries.requirements) == {
        "nvidia-cuda-runtime-cu12==12.9.79",
        "nvidia-cuda-nvcc-cu12==12.9.86",  # the crt/ headers, and ptxas: no nvcc
        "nvidia-cuda-cccl-cu12==12.9.27",
    }


def test_no_library_set_where_the_toolkit_is_the_cuda_home() -> None:
    plain = resolve("13.0", "x86_64", cuda_home=None, cache_dir=CACHE, host_arch="x86_64")
    assert plain.libraries is None
    csrc = resolve(
        "12.9", "x86_64", cuda_home=None, cache_dir=CACHE, host_arch="x86_64",
        cuda_libraries=("nvrtc",), builds_in_cuda_home=False,
    )  # fmt: skip
    assert csrc.libraries is None
    system = resolve(
        "12.9", "x86_64", cuda_home=Path("/opt/cuda-12.9"), cache_dir=CACHE,
        host_arch="x86_64", cuda_libraries=("nvrtc",), builds_in_cuda_home=True,
    )  # fmt: skip
    assert system.libraries is None


def test_the_libraries_are_part_of_the_toolchains_identity_only_where_named() -> None:
    plain = _toolchain("x86_64")
    assert "cuda_libraries" not in plain.identity
    plan = resolve(
        "12.9", "x86_64", cuda_home=None, cache_dir=CACHE, host_arch="x86_64",
        cuda_libraries=("nvrtc",), builds_in_cuda_home=True,
    )  # fmt: skip
    named = replace(plain, plan=plan)
    assert "nvidia-cuda-nvrtc-cu12==12.9.86" in named.identity["cuda_libraries"]


def test_a_toolchain_directory_without_its_marker_is_installed_again(tmp_path: Path) -> None:
    """A copy of a toolchain without its `.complete` (`cp -r dir/*`) made every build fail
    with "<a temporary directory>: Directory not empty", a path that no longer exists."""
    plan = system_toolkit_plan(tmp_path, "13.0")
    assert plan.inspector is not None
    copied = plan.install_dir(plan.inspector)
    (copied / "nvidia").mkdir(parents=True)
    (copied / "nvidia" / "stale").write_text("")
    outside = FakeOutside({"nvcc": "13.0.88", "cuobjdump": "13.2.86"})
    done = provision(plan, outside, python="python", env={})
    assert done.installed == (copied.name,)
    assert not (copied / "nvidia" / "stale").exists()
    assert (copied / ".complete").is_file()


def test_a_cuobjdump_that_reports_no_version_is_named(tmp_path: Path) -> None:
    plan = system_toolkit_plan(tmp_path, "13.0")
    outside = FakeOutside({"nvcc": "13.0.88"})  # the provisioned cuobjdump prints no banner
    with pytest.raises(ToolchainError) as info:
        provision(plan, outside, python="python", env={})
    assert info.value.message.startswith(str(tmp_path / "cache"))
    assert "/bin/cuobjdump --version: cannot read a CUDA version from" in info.value.message
    assert info.value.hint is not None
    assert "delete that toolchain's directory" in info.value.hint


def test_a_pypi_nvcc_missing_a_program_it_runs_is_incomplete(tmp_path: Path) -> None:
    """With ptxas gone from the provisioned toolkit, nvcc ran the first ptxas on PATH."""
    plan = resolve(
        "13.0", "x86_64", cuda_home=None, cache_dir=tmp_path / "cache", host_arch="x86_64",
        system_cc=["cc"],
    )  # fmt: skip
    assert plan.device is not None
    home = plan.install_dir(plan.device) / "nvidia" / "cu13"
    for program in ("bin/nvcc", "bin/fatbinary", "bin/nvlink", "bin/cudafe++", "nvvm/bin/cicc"):
        (home / program).parent.mkdir(parents=True, exist_ok=True)
        (home / program).write_text("")
    for pinset in plan.pinsets:
        plan.install_dir(pinset).mkdir(parents=True, exist_ok=True)
        (plan.install_dir(pinset) / ".complete").write_text("[]\n")
    outside = FakeOutside({"nvcc": "13.0.88", "cuobjdump": "13.0.85"})
    with pytest.raises(ToolchainError) as info:
        provision(plan, outside, python="python", env={})
    assert info.value.message == f"{home / 'bin' / 'ptxas'} not found"
