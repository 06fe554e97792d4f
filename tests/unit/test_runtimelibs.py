"""Which shared libraries a wheel's runtime dependencies provide
(release/inspection/runtimelibs.py), read from a site-packages directory laid out as pip
lays one out (dist-info folders with METADATA and RECORD), shaped after torch 2.14.1+cu130's
own requirements: `cuda-toolkit[cudart,nvrtc]` under a marker, extras that reach only what
they name, a distribution installed beside them that nothing requires."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from release.inspection.runtimelibs import (
    installed_distributions,
    library_dirs,
    marker_environment,
    provided_by,
    reached,
    wheel_requirements,
)

# name, version, Requires-Dist lines, files
DISTRIBUTIONS: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    (
        "torch",
        "2.14.1",
        (
            'cuda-toolkit[cudart,nvrtc]==13.0.3; platform_system == "Linux"',
            'optree>=0.13.0; extra == "optree"',
            'nvidia-arm-only; platform_machine == "aarch64"',
        ),
        (
            "torch/__init__.py",
            "torch/lib/libtorch.so",
            "torch/lib/libc10.so",
            "torch/lib/libgomp.so.1",
        ),
    ),
    (
        "cuda-toolkit",
        "13.0.3",
        (
            'nvidia-cuda-runtime==13.0.96; extra == "cudart"',
            'nvidia-cuda-nvrtc==13.0.88; extra == "nvrtc"',
            'nvidia-cublas==13.1.0.3; extra == "cublas"',
        ),
        ("cuda_toolkit/__init__.py",),
    ),
    ("nvidia-cuda-runtime", "13.0.96", (), ("nvidia/cu13/lib/libcudart.so.13",)),
    (
        "nvidia-cuda-nvrtc",
        "13.0.88",
        (),
        ("nvidia/cu13/lib/libnvrtc.so.13", "nvidia/cu13/lib/libnvrtc-builtins.so.13.0"),
    ),
    ("nvidia-cublas", "13.1.0.3", (), ("nvidia/cu13/lib/libcublas.so.13",)),
    ("optree", "0.17.0", (), ("optree/_C.cpython-311-x86_64-linux-gnu.so",)),
    ("nvidia-arm-only", "1.0", (), ("nvidia_arm/libarm.so",)),
    ("apache-tvm-ffi", "0.1.9", (), ("tvm_ffi/__init__.py", "tvm_ffi/lib/libtvm_ffi.so")),
    ("unrelated", "1.0", (), ("unrelated/libnobody.so.1",)),
)
X86_64 = marker_environment("3.11", "x86_64")


@pytest.fixture
def site(tmp_path: Path) -> Path:
    for name, version, requires, files in DISTRIBUTIONS:
        info = tmp_path / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        lines = [f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"]
        lines += [f"Requires-Dist: {r}\n" for r in requires]
        (info / "METADATA").write_text("".join(lines))
        record = [f"{f},," for f in files] + [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
        (info / "RECORD").write_text("\n".join(record) + "\n")
        for file in files:  # importlib_metadata lists only the files that are there
            (tmp_path / file).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / file).write_bytes(b"")
    return tmp_path


def test_the_libraries_of_what_the_requirements_reach_are_provided(site: Path) -> None:
    installed = installed_distributions(site)
    provided = provided_by(["torch==2.14.*", "apache-tvm-ffi==0.1.9"], installed, X86_64)
    assert provided == {
        "libc10.so": "torch",
        "libgomp.so.1": "torch",
        "libtorch.so": "torch",
        "libtvm_ffi.so": "apache-tvm-ffi",
        "libcudart.so.13": "nvidia-cuda-runtime",
        "libnvrtc-builtins.so.13.0": "nvidia-cuda-nvrtc",
        "libnvrtc.so.13": "nvidia-cuda-nvrtc",
    }
    assert [d.name for d in reached(["torch", "apache-tvm-ffi"], installed, X86_64)] == [
        "torch",
        "apache-tvm-ffi",
        "cuda-toolkit",
        "nvidia-cuda-runtime",
        "nvidia-cuda-nvrtc",
    ]


def test_where_the_libraries_of_what_the_requirements_reach_lie(site: Path) -> None:
    installed = installed_distributions(site)
    assert library_dirs(["apache-tvm-ffi==0.1.9", "torch"], installed, X86_64) == {
        "apache-tvm-ffi": (site / "tvm_ffi" / "lib",),
        "torch": (site / "torch" / "lib",),
        "nvidia-cuda-runtime": (site / "nvidia" / "cu13" / "lib",),
        "nvidia-cuda-nvrtc": (site / "nvidia" / "cu13" / "lib",),
    }
    # cuda-toolkit, reached, holds no library
    assert library_dirs(["unrelated"], installed, X86_64) == {"unrelated": (site / "unrelated",)}


def test_markers_are_the_cells_and_extras_reach_only_what_they_name(site: Path) -> None:
    installed = installed_distributions(site)
    on_arm = provided_by(["torch"], installed, marker_environment("3.11", "aarch64"))
    assert on_arm["libarm.so"] == "nvidia-arm-only"
    with_extra = provided_by(["torch[optree]"], installed, X86_64)
    assert with_extra["_C.cpython-311-x86_64-linux-gnu.so"] == "optree"
    assert "libcublas.so.13" not in with_extra
    assert (
        provided_by(['torch; python_version < "3.10"', "nothing-installed"], installed, X86_64)
        == {}
    )


def test_a_wheels_requirements_come_from_its_metadata() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(
            "sgl_deep_gemm-0.1.5.dist-info/METADATA",
            "Metadata-Version: 2.4\nName: sgl-deep-gemm\nVersion: 0.1.5\n"
            "Requires-Dist: apache-tvm-ffi==0.1.9\nRequires-Dist: torch==2.14.*\n"
            'Requires-Dist: pytest; extra == "dev"\n',
        )
    assert wheel_requirements(buffer.getvalue()) == (
        "apache-tvm-ffi==0.1.9",
        "torch==2.14.*",
        'pytest; extra == "dev"',
    )
