"""release.project.pyproject: pyproject.toml's build requirements and [project], setup.cfg's
metadata, each with its line."""

from __future__ import annotations

import pytest

from release.project import read_pyproject, read_setup_cfg
from release.project.archchanges import gencode_change
from release.project.places import Place
from release.project.setuppy import Gencode

PYPROJECT = """\
[build-system]
requires = [
    "setuptools>=77",
    "torch>=2.10,<3",
]
build-backend = "setuptools.build_meta"

[project]
name = "k3-ops"
dynamic = ["version"]
requires-python = ">=3.10"
classifiers = [
    "Programming Language :: Python :: 3.12",
    "Programming Language :: Python :: 3.10",
    "Programming Language :: C++",
]

[tool.setuptools.dynamic]
version = {attr = "k3_ops.__version__"}
"""


def test_build_requirements_with_the_line_of_each_entry() -> None:
    read = read_pyproject(PYPROJECT)
    assert read.problem is None
    torch = read.requirement("torch")
    assert torch is not None
    assert (str(torch.requirement.specifier), str(torch.place)) == ("<3,>=2.10", "pyproject.toml:4")
    assert read.requirement("scikit_build_core") is None
    assert read.build_backend is not None
    assert (read.build_backend.value, str(read.build_backend.place)) == (
        "setuptools.build_meta",
        "pyproject.toml:6",
    )


def test_project_name_a_dynamic_version_requires_python_and_classifiers() -> None:
    read = read_pyproject(PYPROJECT)
    assert read.has_project
    assert read.name is not None
    assert (read.name.value, read.name.place.line) == ("k3-ops", 9)
    assert read.version is not None
    assert (read.version.expression, read.version.place.line) == ("dynamic", 10)
    assert read.requires_python is not None
    assert read.requires_python.value == ">=3.10"
    assert read.pythons == ("3.10", "3.12")
    assert read.version_attr is not None
    assert (read.version_attr.value, read.version_attr.place.line) == ("k3_ops.__version__", 19)


def test_a_scikit_build_core_project_and_a_broken_file() -> None:
    read = read_pyproject(
        '[build-system]\nrequires = ["scikit-build-core>=0.10"]\n'
        'build-backend = "scikit_build_core.build"\n'
        '[project]\nname = "x"\nversion = "1.2"\n'
    )
    found = read.requirement("scikit-build-core")
    assert found is not None
    assert found.place.line == 2
    assert read.version is not None
    assert read.version.value == "1.2"
    broken = read_pyproject("[project\nname = 1\n")
    assert broken.problem is not None
    assert broken.problem.startswith("pyproject.toml: not TOML")


def test_setup_cfg_metadata_and_bdist_wheel() -> None:
    read = read_setup_cfg(
        "[metadata]\nname = k3-ops\nversion = attr: k3_ops.__version__\n\n"
        "[options]\npython_requires = >=3.9\n\n[bdist_wheel]\npy_limited_api = cp39\n"
    )
    assert read.name is not None
    assert (read.name.value, read.name.place.line) == ("k3-ops", 2)
    assert read.version is not None
    assert (read.version.value, read.version.expression) == (None, "attr: k3_ops.__version__")
    assert read.python_requires is not None
    assert read.python_requires.value == ">=3.9"
    assert read.limited_api_floor is not None
    assert (read.limited_api_floor.value, read.limited_api_floor.place.line) == ("cp39", 9)
    assert read_setup_cfg("not an ini [file").problem is not None


def test_a_name_or_version_that_is_not_a_string_is_a_problem_at_its_line() -> None:
    read = read_pyproject('[project]\nname = 3\nversion = "1"\n')
    assert read.problem == "pyproject.toml:2: [project] name must be a string, not int 3"
    read = read_pyproject('[project]\nname = "x"\nversion = 1.5\n')
    assert read.problem == "pyproject.toml:3: [project] version must be a string, not float 1.5"


STAGED = """\
[project]
name = "sgl-deep-gemm"
dynamic = ["version"]
dependencies = [
    "apache-tvm-ffi==0.1.9",
]

[tool.setuptools.dynamic]
version = {file = "deep_gemm/VERSION"}

[tool.setuptools.package-data]
deep_gemm = [
    "VERSION",
    "include/deep_gemm/**/*",
]
"""


def test_a_staged_pyproject_says_its_version_file_package_data_and_dependencies() -> None:
    read = read_pyproject(STAGED)
    assert read.version_from is not None
    assert (str(read.version_from.place), read.version_from.value) == (
        "pyproject.toml:9",
        "deep_gemm/VERSION",
    )
    assert [(str(d.place), d.value) for d in read.package_data] == [
        ("pyproject.toml:12", "deep_gemm/VERSION"),
        ("pyproject.toml:12", "deep_gemm/include/deep_gemm/**/*"),
    ]
    assert [(str(d.place), d.value) for d in read.dependencies] == [
        ("pyproject.toml:5", "apache-tvm-ffi==0.1.9")
    ]


@pytest.mark.timeout(20)  # quadratic: each key searched the whole file again
def test_the_keys_of_a_table_are_placed_in_one_pass() -> None:
    """P6-I8: each entry of [tool.setuptools.package-data] was looked for from the file's
    first line: 20,000 packages read 400 million lines."""
    table = "".join(f'"pkg{n}" = ["*.cuh"]\n' for n in range(20_000))
    text = f'[project]\nname = "k"\n[tool.setuptools.package-data]\n{table}[tool.junk]\nx = 1\n'
    data = read_pyproject(text).package_data
    assert len(data) == 20_000
    assert (str(data[0].place), data[0].value) == ("pyproject.toml:4", "pkg0/*.cuh")
    assert str(data[-1].place) == "pyproject.toml:20003"


def test_a_flag_hard_coded_at_many_lines_says_the_first_few_and_how_many_more() -> None:
    """P6-I7: every line was named: 800,000 of them in one message and in matrix.yaml."""
    flags = [
        Gencode(place=Place(file="setup.py", line=n), text="-gencode", cubins=("80",), ptx=())
        for n in range(10, 1010)
    ]
    change = gencode_change(flags, ("TORCH_CUDA_ARCH_LIST", "beside"))
    assert "(lines 10, 11, 12, 13, 14 and 995 more)" in change.text
    assert "(line 10)" in gencode_change(flags[:1], ("TORCH_CUDA_ARCH_LIST", "beside")).text
