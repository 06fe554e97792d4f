"""A torch environment's CUDA_HOME (release.toolchain.torchenv): one for each toolchain it
is made from, so a build with another CUDA_HOME (other CUDA libraries, or none of nvcc)
never changes the one a build uses; over a CUDA_HOME without nvcc, its nvcc is that one's.
Made of symlinks in a temporary directory; nothing runs. And the PEP 517 frontend it gets
(release.toolchain.buildenv)."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

from release.toolchain.buildenv import frontend_requirement
from release.toolchain.torchenv import MARKER, assemble_cuda_home, cuda_home_dir


def test_each_toolchain_gets_a_cuda_home_of_its_own_in_the_environment() -> None:
    root = Path("/cache/torch-2.11.0-cu129-py3.11-abc")
    one = cuda_home_dir(root, Path("/cache/cuda-home-12.9-aaaa"))
    other = cuda_home_dir(root, Path("/cache/cuda-home-12.9-bbbb"))
    assert one != other
    assert one == cuda_home_dir(root, Path("/cache/cuda-home-12.9-aaaa"))
    assert one.parent.parent.parent == root
    assert one.name == "cuda-home"


def test_over_a_cuda_home_without_nvcc_the_environments_nvcc_is_its(tmp_path: Path) -> None:
    toolkit = tmp_path / "cuda-home-12.9-x"
    (toolkit / "bin").mkdir(parents=True)
    (toolkit / "bin" / "nvcc").write_text("#!/bin/sh\necho 'release: no nvcc: ...' >&2\nexit 1\n")
    (toolkit / "include").mkdir()
    (toolkit / "include" / "nvrtc.h").write_text("// nvrtc\n")
    (toolkit / "lib").mkdir()
    (toolkit / "lib" / "libnvrtc.so.12").write_bytes(b"nvrtc")
    (toolkit / "lib" / "libnvrtc.so").symlink_to("libnvrtc.so.12")
    site = tmp_path / "site"
    (site / "nvidia" / "cusparse" / "include").mkdir(parents=True)
    (site / "nvidia" / "cusparse" / "include" / "cusparse.h").write_text("// torch's\n")
    home = assemble_cuda_home(cuda_home_dir(tmp_path, toolkit), toolkit, site, "12.9")
    assert str(toolkit / "bin" / "nvcc") in (home / "bin" / "nvcc").read_text()
    assert (home / "include" / "nvrtc.h").read_text() == "// nvrtc\n"
    assert (home / "include" / "cusparse.h").read_text() == "// torch's\n"
    assert (home / "lib64" / "libnvrtc.so").read_bytes() == b"nvrtc"
    assert (home / MARKER).is_file()


def test_the_frontend_is_the_tools_own_build_unless_a_build_requirement_excludes_its_needs() -> (
    None
):
    own = f"build=={metadata.version('build')}"
    assert frontend_requirement() == own
    assert frontend_requirement(["setuptools>=64", "packaging>=24", "not a requirement (("]) == own
    needed = next(
        Requirement(r) for r in metadata.requires("build") or () if r.startswith("packaging")
    )
    lower = min(Version(s.version) for s in needed.specifier if s.operator in (">=", ">"))
    # SageAttention's packaging<24 beside build 1.6.1's packaging>=24.0: pip picks a build
    assert frontend_requirement(["setuptools", f"packaging<{lower}"]) == "build"
