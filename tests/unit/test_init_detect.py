"""release.init.detect, .torchaxes and .decide: what `release init` takes from a project's
files, with the place it read each value at, what it says needs a change, and what it could
not decide."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version

from release.errors import ConfigError
from release.init.decide import decide
from release.init.detect import (
    TorchLookup,
    backend_of,
    parse_cmake_architectures,
    parse_torch_arch_list,
    targets_of,
)
from release.init.native import native_of
from release.init.torchaxes import Switches, force_build, force_cuda, torch_pin
from release.init.torchindex import TorchRelease
from release.project import ProjectFiles, Reading, read_project_files, reading
from release.project.layout import Layout
from release.project.localversion import local_version
from release.project.native import NativeBuild, native_of_setup_py
from release.project.setuppy import read_setup_py
from release.targets import GpuTarget

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


def line_of(path: Path, text: str) -> int:
    """The number of the one line of `path` that holds `text` outside a comment or a
    docstring line (the fixture's own lines move when it grows)."""
    (number,) = [
        n
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if text in line and not line.lstrip().startswith(("#", "`"))
    ]
    return number


TORCH = TorchLookup(
    index_url="http://index.example/simple/",
    releases={
        Version("2.9.0"): TorchRelease(version=Version("2.9.0"), pythons=("3.9", "3.10")),
        Version("2.11.0"): TorchRelease(
            version=Version("2.11.0"), pythons=("3.10", "3.11", "3.12", "3.13")
        ),
    },
)


def read_texts(**texts: str) -> Reading:
    names = {
        k.replace("_", ".").replace("CMakeLists.txt", "CMakeLists.txt"): v for k, v in texts.items()
    }
    return reading(ProjectFiles(directory=Path("/p"), texts=dict(names)))


def read_fixture(name: str) -> Reading:
    return reading(read_project_files(FIXTURES / name if name != "csrc" else ROOT / "csrc"))


def targets(targets_: tuple[GpuTarget, ...]) -> list[str]:
    return [str(t) for t in targets_]


def test_the_backend_and_the_line_it_was_read_at() -> None:
    assert backend_of(read_fixture("csrc")) == (
        "release",
        "pyproject.toml:5: the in-tree backend k3_build_backend reads RELEASE_SMS "
        "(csrc/BUILDING.md's contract)",
    )
    uses = line_of(FIXTURES / "torch_ops" / "setup.py", "cpp_extension.CUDAExtension")
    assert backend_of(read_fixture("torch_ops")) == (
        "torch",
        f"setup.py:{uses}: uses torch's CUDAExtension",
    )
    assert backend_of(read_fixture("extension_template")) == (
        "torch",
        "setup.py:24: uses torch's CUDAExtension",
    )
    assert backend_of(read_fixture("cmake_kernels")) == (
        "cmake",
        "pyproject.toml:3: builds with scikit-build-core",
    )
    cmake_only = read_texts(**{"CMakeLists_txt": "project(k LANGUAGES CXX CUDA)\n"})
    assert backend_of(cmake_only) == ("cmake", "CMakeLists.txt:1: CMakeLists.txt enables CUDA")
    with pytest.raises(ConfigError, match="no build system release knows"):
        backend_of(read_texts(setup_py="from setuptools import setup\nsetup(name='x')\n"))


def test_torch_and_cmake_architecture_lists() -> None:
    assert parse_torch_arch_list("7.5;8.0 9.0a;10.0+PTX") == (
        (GpuTarget(75), GpuTarget(80), GpuTarget(90, "a"), GpuTarget(100)),
        GpuTarget(100),
    )
    assert parse_torch_arch_list("Ampere;9.0") is None
    assert parse_cmake_architectures(("75-real", "80", "90a-real", "100-virtual")) == (
        (GpuTarget(75), GpuTarget(80), GpuTarget(90, "a")),
        GpuTarget(100),
    )
    assert parse_cmake_architectures(("native",)) is None
    assert parse_cmake_architectures(("${ARCHS}",)) is None


def test_the_projects_own_sms_less_those_cuda_13_cannot_build() -> None:
    read = read_texts(
        setup_py="import os\nfrom torch.utils.cpp_extension import CUDAExtension\n"
        'os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "7.0;8.0;9.0+PTX")\n'
    )
    found = targets_of(read, "torch")
    assert (targets(found.sms), str(found.ptx)) == (["80", "90"], "90")
    assert found.found[0].source == "setup.py:3: TORCH_CUDA_ARCH_LIST 7.0;8.0;9.0+PTX"
    (left_out,) = found.undecided
    assert left_out.place == "setup.py:3"
    assert "left out: CUDA 13.0 dropped sm_70" in left_out.text
    assert found.changes == ()


def test_a_default_from_the_builds_own_value_and_a_branch_that_fails() -> None:
    # DeepEP's setup.py: a "not implemented" branch first, the list its build takes after
    read = read_texts(
        setup_py="import os\nfrom torch.utils.cpp_extension import CUDAExtension\n"
        'if int(os.getenv("DISABLE_SM90_FEATURES", 0)):\n'
        '    os.environ["TORCH_CUDA_ARCH_LIST"] = os.getenv("TORCH_CUDA_ARCH_LIST", "8.0")\n'
        '    assert False, "Not implemented"\n'
        "else:\n"
        '    os.environ["TORCH_CUDA_ARCH_LIST"] = os.getenv("TORCH_CUDA_ARCH_LIST", "9.0")\n'
    )
    found = targets_of(read, "torch")
    assert targets(found.sms) == ["90"]
    assert found.found[0].source == "setup.py:7: TORCH_CUDA_ARCH_LIST 9.0"
    assert found.changes == ()


def test_what_keeps_the_matrixs_sms_from_the_build_needs_a_change() -> None:
    torch = targets_of(
        read_texts(
            setup_py="import os\n"
            'os.environ["TORCH_CUDA_ARCH_LIST"] = "8.0"\n'
            'flags = ["-gencode=arch=compute_90,code=sm_90"]\n'
        ),
        "torch",
    )
    assert [c.place for c in torch.changes] == ["setup.py:2", "setup.py:3"]
    assert "never reach the build" in torch.changes[0].text
    assert "hard-codes nvcc's -gencode flags" in torch.changes[1].text
    assert targets(torch.sms) == ["90"]  # what the flags build today
    cmake = targets_of(
        read_texts(
            **{
                "CMakeLists_txt": "project(k LANGUAGES CUDA)\n"
                'if(NOT CMAKE_CUDA_ARCHITECTURES)\n  set(CMAKE_CUDA_ARCHITECTURES "80-real;'
                '90a-real;100-virtual")\nendif()\nset(CMAKE_CUDA_ARCHITECTURES 89)\n'
            }
        ),
        "cmake",
    )
    assert [c.place for c in cmake.changes] == ["CMakeLists.txt:5"]
    assert cmake.changes[0].fix.startswith("guard it: if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)")
    assert (targets(cmake.sms), str(cmake.ptx)) == (["80", "90a"], "100")


def test_flags_a_setup_py_makes_from_the_list_it_reads_are_a_check_not_a_change() -> None:
    """SageAttention's shape: its -gencode flags follow the cell's TORCH_CUDA_ARCH_LIST
    through its own mapping (9.0 -> sm_90a), which init cannot evaluate."""
    text = (
        "import os\n"
        'archs = os.getenv("TORCH_CUDA_ARCH_LIST", "").split(";")\n'
        "flags = []\n"
        "for a in archs:\n"
        '    num = a.replace(".", "") + ("a" if a == "9.0" else "")\n'
        '    flags += ["-gencode", f"arch=compute_{num},code=sm_{num}"]\n'
    )
    read = targets_of(read_texts(setup_py=text), "torch")
    assert read.changes == ()
    (check,) = read.undecided
    assert check.place == "setup.py:6"
    assert "from the TORCH_CUDA_ARCH_LIST each cell passes" in check.text
    assert "(setup.py:2)" in check.text
    assert (targets(read.sms), str(read.ptx)) == (["75", "80", "86", "89", "90", "100"], "100")
    # the same flags beside a list it never reads are the project's own: a change
    unread = targets_of(
        read_texts(setup_py=text.replace("TORCH_CUDA_ARCH_LIST", "MY_LIST")), "torch"
    )
    assert [c.place for c in unread.changes] == ["setup.py:6"]
    assert "hard-codes nvcc's -gencode flags" in unread.changes[0].text
    # and one literal flag among computed ones is a list of the project's own
    mixed = targets_of(
        read_texts(setup_py=text + 'more = ["-gencode=arch=compute_80,code=sm_80"]\n'), "torch"
    )
    assert "hard-codes nvcc's -gencode flags" in mixed.changes[0].text


def test_a_force_cuda_switch_goes_to_build_env_and_a_gate_without_one_needs_a_change() -> None:
    switches = force_cuda(read_fixture("torch_ops").setup_py)
    env, found, changes = switches.env, switches.found, switches.changes
    assert env == (("FORCE_CUDA", "1"),)
    gate = line_of(FIXTURES / "torch_ops" / "setup.py", "torch.cuda.is_available()")
    assert found[0].source.startswith(
        f"setup.py:{gate}: CUDA is built when torch.cuda.is_available()"
    )
    assert changes == ()
    switches = force_cuda(read_fixture("extension_template").setup_py)
    env, found, changes = switches.env, switches.found, switches.changes
    assert (env, found) == ((), ())
    (change,) = changes
    assert change.place == "setup.py:23"
    assert "builds CUDA only when torch.cuda.is_available()" in change.text
    assert 'build.env FORCE_CUDA: "1"' in change.fix


def test_the_torch_template_is_one_abi3_wheel_from_its_bdist_wheel_floor() -> None:
    decision = decide(
        read_fixture("extension_template"),
        backend_of(read_fixture("extension_template")),
        TORCH,
    )
    found = {f.key: f for f in decision.found}
    assert (decision.abi3, decision.python) == ("3.9", ())
    assert found["abi3"].source == "setup.py:49: bdist_wheel's py_limited_api cp39"
    assert decision.torch == Version("2.11.0")  # the build requirement is a bare `torch`
    assert found["torch"].source == (
        "the newest torch on http://index.example/simple/ that torch (pyproject.toml:4) allows"
    )
    assert found["name"].source == "setup.py:43 (library_name, setup.py:11)"
    (computed,) = [n for n in decision.undecided if "py_limited_api is computed" in n.text]
    assert computed.place == "setup.py:37"
    assert [c.place for c in decision.changes] == ["setup.py:23"]


def test_the_python_axis_and_the_torch_pin_of_other_shapes() -> None:
    pyproject = (
        '[build-system]\nrequires = ["setuptools", "torch>=2.10"]\n'
        '[project]\nname = "k"\nversion = "1"\nrequires-python = ">=3.11"\n'
    )
    cpython = 'from torch.utils.cpp_extension import CUDAExtension\nCUDAExtension("k._C", [])\n'
    read = read_texts(pyproject_toml=pyproject, setup_py=cpython)
    decision = decide(read, backend_of(read), TORCH)
    assert (decision.abi3, decision.python, decision.torch) == (
        None,
        ("3.11", "3.12", "3.13"),
        Version("2.11.0"),
    )
    no_tag = read_texts(
        pyproject_toml=pyproject, setup_py=cpython.replace("[])", "[], py_limited_api=True)")
    )
    decision = decide(no_tag, backend_of(no_tag), TORCH)
    assert decision.abi3 is None
    assert any("nothing sets bdist_wheel's py_limited_api" in n.text for n in decision.undecided)
    offline = decide(
        read, backend_of(read), TorchLookup(index_url="x", releases=None, failure="--offline")
    )
    assert offline.torch is None
    (todo,) = [n for n in offline.undecided if "no exact torch" in n.text]
    assert (todo.place, todo.text) == ("pyproject.toml:2", "no exact torch pinned: --offline")
    too_new = read_texts(pyproject_toml=pyproject.replace(">=2.10", ">=3"), setup_py=cpython)
    decision = decide(too_new, backend_of(too_new), TORCH)
    assert decision.torch is None
    assert any(
        "no torch on http://index.example/simple/ fits" in n.text for n in decision.undecided
    )


@pytest.mark.parametrize(
    ("texts", "said"),
    [
        ({"pyproject_toml": "x = [\n"}, "/p/pyproject.toml: not TOML"),
        (
            {"pyproject_toml": '[project]\nname = "ok"\nversion = "not a version"\n'},
            "/p/pyproject.toml:3: version 'not a version' is not PEP 440",
        ),
        ({"setup_py": "from setuptools import setup\nsetup(\n"}, "/p/setup.py:2: not Python"),
        ({"setup_py": "x = 1\0\n"}, "/p/setup.py: not Python"),
    ],
)
def test_a_project_file_the_loader_would_refuse_is_an_error_at_its_line_not_no_backend(
    texts: dict[str, str], said: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        backend_of(read_texts(**texts))
    assert said in str(raised.value.args[0])
    assert "no build system release knows" not in str(raised.value.args[0])


DOWNLOADING = """\
import os
import urllib.request
from setuptools.command.bdist_wheel import bdist_wheel as _bdist_wheel
FORCE = os.environ.get("MY_OPS_FORCE_BUILD", "0") in ("1", "true")


class Cached(_bdist_wheel):
    def run(self):
        if not FORCE:
            urllib.request.urlretrieve(URL, "x.whl")
            return
        super().run()
"""


def test_a_bdist_wheel_that_downloads_is_found_with_the_variable_that_forces_the_build() -> None:
    switches = force_build(read_setup_py(DOWNLOADING))
    env, found, changes = switches.env, switches.found, switches.changes
    assert env == (("MY_OPS_FORCE_BUILD", "1"),)
    (finding,) = found
    assert finding.source.startswith(
        "setup.py:10: Cached.run() downloads a prebuilt wheel unless MY_OPS_FORCE_BUILD=1 "
        "(setup.py:4)"
    )
    assert changes == ()


def test_a_download_nothing_can_skip_needs_a_change_and_other_classes_are_not_downloads() -> None:
    unforced = DOWNLOADING.replace("if not FORCE:", "if True:")
    switches = force_build(read_setup_py(unforced))
    (change,) = switches.changes
    assert (switches.env, switches.found) == ((), ())
    assert change.place == "setup.py:10"
    assert "no environment variable skips the download" in change.text
    with_requests = DOWNLOADING.replace("urllib.request.urlretrieve(", "requests.get(")
    assert force_build(read_setup_py(with_requests)).env == (("MY_OPS_FORCE_BUILD", "1"),)
    not_a_wheel_command = DOWNLOADING.replace("class Cached(_bdist_wheel)", "class Cached(Base)")
    assert force_build(read_setup_py(not_a_wheel_command)) == Switches()
    no_download = DOWNLOADING.replace("urllib.request.urlretrieve(URL, ", "print(")
    assert force_build(read_setup_py(no_download)) == Switches()


def test_a_docstring_or_a_path_holding_gencode_leaves_a_literal_arch_list_in_charge() -> None:
    read = read_texts(
        setup_py='"""Builds with -gencode arch=compute_70,code=sm_70 in older releases."""\n'
        "import os, tempfile\n"
        'os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "8.0;9.0+PTX")\n'
        'BUILD = tempfile.mkdtemp(prefix="-gencode-")\n'
    )
    found = targets_of(read, "torch")
    assert (targets(found.sms), str(found.ptx)) == (["80", "90"], "90")
    assert found.found[0].source == "setup.py:3: TORCH_CUDA_ARCH_LIST 8.0;9.0+PTX"
    assert found.changes == ()


# - a JIT-first project, its C++ standard, an IDE-only CMakeLists.txt (issue 51) -

HOST_ONLY = """\
import os
from setuptools import setup
FLAGS = ['-std=c++17']
LDFLAGS = ['-lcudart', '-lnvrtc', '-ltorch', '-lc10']
SOURCES = [os.path.join(os.path.dirname(__file__), 'csrc', 'api.cpp')]
setup(name='jit', version='1.0', package_data={'jit': ['include/**/*']})
"""
IDE_CMAKE = "# for CLion's indexing only\nproject(jit LANGUAGES CXX CUDA)\n"


def layout_of(units: dict[str, str], setup_py: str = HOST_ONLY) -> Layout:
    """What init reads of the repository besides its build files: `setup_py`'s native code,
    the texts of the units there are, and the CUDA headers it ships (none)."""
    return Layout(native=native_of_setup_py(setup_py), units=tuple(units.items()))


def test_an_ide_only_cmakelists_is_not_the_build_where_setup_py_links_torch() -> None:
    read = read_texts(setup_py=HOST_ONLY, CMakeLists_txt=IDE_CMAKE)
    assert backend_of(read, layout_of({})) == (
        "torch",
        "setup.py:4: links libtorch (-ltorch): its cells build beside an exact torch "
        "(CMakeLists.txt:1 is for an IDE only: for CLion's indexing only)",
    )
    nothing = read_texts(setup_py="from setuptools import setup\nsetup(name='x')\n",
                         CMakeLists_txt=IDE_CMAKE)  # fmt: skip
    with pytest.raises(ConfigError, match="no build system release knows"):
        backend_of(nothing, Layout(native=NativeBuild()))
    # FlashInfer's shape: a backend of the project's own that reads none of release's inputs
    own = read_texts(
        pyproject_toml='[build-system]\nrequires = ["setuptools"]\n'
        'build-backend = "build_backend"\nbackend-path = ["."]\n'
        '[project]\nname = "fi"\nversion = "1"\n'
    )
    with pytest.raises(ConfigError) as raised:
        backend_of(own, Layout(native=NativeBuild()))
    assert list(raised.value.problems) == [
        "/p/pyproject.toml:3: the build backend 'build_backend' is the project's own "
        "(backend-path), and it reads no RELEASE_SMS: release cannot hand it a cell's GPU "
        "targets (no setup.py with torch's CUDAExtension, no scikit-build-core or "
        "CMakeLists.txt with CUDA either)"
    ]
    assert "RELEASE_SMS and RELEASE_PTX" in (raised.value.hint or "")
    # without a PEP 517 entry point the CMakeLists.txt is all there is
    alone = read_texts(CMakeLists_txt=IDE_CMAKE)
    assert backend_of(alone)[0] == "cmake"


def test_host_only_units_that_link_nvrtc_have_no_device_code_and_no_python_api() -> None:
    read = read_texts(setup_py=HOST_ONLY)
    native = native_of(read, layout_of({"csrc/api.cpp": "#include <nvrtc.h>\n"}), "torch")
    assert (native.device_code, native.python_any, native.cuda_libraries) == (
        "none",
        True,
        ("cudart", "nvrtc"),
    )
    bound = native_of(read, layout_of({"csrc/api.cpp": "PYBIND11_MODULE(_C, m) {}\n"}), "torch")
    assert (bound.device_code, bound.python_any) == ("none", False)
    unread = native_of(read, layout_of({}), "torch")  # the unit is not there: no guess
    assert unread.python_any is False
    device = HOST_ONLY.replace("'api.cpp')", "'api.cpp'), 'csrc/kernel.cu'")
    with_cu = native_of(read, layout_of({"csrc/api.cpp": ""}, setup_py=device), "torch")
    assert (with_cu.device_code, with_cu.python_any) == (None, False)
    neither = HOST_ONLY.replace("'-lnvrtc', ", "")
    plain = native_of(read, layout_of({"csrc/api.cpp": ""}, setup_py=neither), "torch")
    assert plain.device_code is None  # no NVRTC, no CUDA headers: nothing says JIT


TAGGED_NONE = """\
import os
from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel as _bdist_wheel
from torch.utils.cpp_extension import BuildExtension, CUDAExtension


class bdist_wheel_abi_none(_bdist_wheel):
    def get_tag(self):
        python_tag, abi_tag, plat_tag = super().get_tag()
        return "py39", "none", plat_tag


setup(name="ops", version="1.0", ext_modules=[CUDAExtension("ops._C", ["ops.cu"])],
      cmdclass={"bdist_wheel": bdist_wheel_abi_none, "build_ext": BuildExtension})
"""


def test_a_bdist_wheel_that_tags_no_python_abi_makes_one_wheel_for_every_python() -> None:
    """xformers' shape: CUDA sources (no host-only reading applies), and its own get_tag()
    returning the `none` ABI: python: any, said from that line."""
    read = read_texts(setup_py=TAGGED_NONE)
    layout = layout_of({}, setup_py=TAGGED_NONE)
    native = native_of(read, layout, "torch")
    assert (native.device_code, native.python_any) == (None, True)
    (said,) = [f for f in native.found if f.key == "python"]
    line = TAGGED_NONE.splitlines().index('        return "py39", "none", plat_tag') + 1
    assert said.source.startswith(
        f"setup.py:{line}: bdist_wheel_abi_none.get_tag() tags the wheel py39-none: one wheel"
    )
    # a get_tag() that keeps the ABI on one road is no declaration
    either = TAGGED_NONE.replace(
        "        return",
        "        if os.environ.get('X'):\n            return python_tag, abi_tag, plat_tag\n"
        "        return",
    )
    assert native_of(read_texts(setup_py=either), layout, "torch").python_any is False
    # the cmake backend's wheel is tagged by its own backend: not read there
    assert native_of(read, layout, "cmake").python_any is False


def test_a_build_that_links_the_driver_declares_its_link_stub() -> None:
    """SageAttention's sm90 extension links -lcuda, a CMake project CUDA::cuda_driver: no
    PyPI wheel carries libcuda.so, so init writes `cuda` into build.cuda-libraries (the
    CUDA_HOME's link stub) and says that the wheel then imports only where a driver is."""
    linking = HOST_ONLY.replace("'-lc10']", "'-lc10', '-lcuda']")
    native = native_of(read_texts(setup_py=linking), layout_of({}, setup_py=linking), "torch")
    assert native.changes == ()
    assert native.cuda_libraries == ("cudart", "nvrtc", "cuda")
    (said,) = [f for f in native.found if f.key == "build.cuda-libraries"]
    assert said.source.startswith("setup.py:4: -lcudart, -lnvrtc, -lcuda: the toolchain's")
    assert "imports only where a driver is installed" in said.source
    cmake = "project(k LANGUAGES CXX CUDA)\nadd_library(k SHARED k.cu)\n" + (
        "target_link_libraries(k PRIVATE CUDA::cudart CUDA::cuda_driver CUDA::cuda_driver)\n"
    )
    native = native_of(read_texts(CMakeLists_txt=cmake), Layout(native=NativeBuild()), "cmake")
    assert native.cuda_libraries == ("cudart", "cuda")
    (said,) = [f for f in native.found if f.key == "build.cuda-libraries"]
    assert said.source.startswith("CMakeLists.txt:3: CUDA::cudart, CUDA::cuda_driver: ")
    sgl_kernel = cmake.replace(
        "CUDA::cudart CUDA::cuda_driver CUDA::cuda_driver", "c10 cuda cublas"
    )
    native = native_of(read_texts(CMakeLists_txt=sgl_kernel), Layout(native=NativeBuild()), "cmake")
    assert native.cuda_libraries == ("cuda", "cublas")
    (said,) = [f for f in native.found if f.key == "build.cuda-libraries"]
    assert said.source.startswith("CMakeLists.txt:3: cuda, cublas: ")
    plain = native_of(read_texts(setup_py=HOST_ONLY), layout_of({}), "torch")
    assert "cuda" not in plain.cuda_libraries
    assert plain.changes == ()


def test_a_version_labelled_whatever_the_environment_says_needs_a_change() -> None:
    labelled = HOST_ONLY.replace(
        "setup(name='jit', version='1.0',",
        "try:\n    rev = '+' + git_hash()\nexcept Exception:\n    rev = '+local'\n"
        "setup(name='jit', version='1.0' + rev,",
    )
    layout = replace(layout_of({}), local_version=local_version(labelled))
    (change,) = native_of(read_texts(setup_py=labelled), layout, "torch").changes
    line = labelled.splitlines().index("    rev = '+' + git_hash()") + 1
    assert change.place == f"setup.py:{line}"
    assert change.text.startswith("setup()'s version always gets a local label, and no variable")
    assert "FLASH_ATTN_LOCAL_VERSION" in change.fix
    plain = native_of(read_texts(setup_py=HOST_ONLY), layout_of({}), "torch")
    assert plain.changes == ()


def test_the_torch_pin_compiles_the_projects_cxx_standard() -> None:
    lookup = TorchLookup(
        index_url="http://index.example/simple/",
        releases={
            Version(v): TorchRelease(version=Version(v), pythons=("3.11",))
            for v in ("2.13.0", "2.13.1", "2.14.0", "2.15.0")
        },
    )
    cxx17 = native_of_setup_py(HOST_ONLY).standard
    pin = torch_pin(None, lookup, cxx17)
    assert pin.version == Version("2.13.1")
    assert pin.found is not None
    assert pin.found.source == (
        "the newest torch on http://index.example/simple/ that no build requirement and the "
        "project's C++17 (setup.py:3: -std=c++17; torch 2.14 and later need C++20) allows"
    )
    cxx20 = native_of_setup_py("F = ['-std=c++20']\n").standard
    assert torch_pin(None, lookup, cxx20).version == Version("2.15.0")
    assert torch_pin(None, lookup).version == Version("2.15.0")


def test_scikit_build_told_not_to_run_cmake_builds_nothing_and_needs_a_change() -> None:
    """bitsandbytes' shape: its CI compiles the library first, and the wheel build only
    packages it (`wheel.cmake = false`)."""
    cmake = "cmake_minimum_required(VERSION 3.22)\nproject(k LANGUAGES CXX CUDA)\n"
    for table in (
        '[tool.scikit-build]\ncmake.build-type = "Release"\nwheel.cmake = false\n',
        "[tool.scikit-build.wheel]\ncmake = false\n",
    ):
        pyproject = (
            '[build-system]\nrequires = ["scikit-build-core"]\n'
            'build-backend = "scikit_build_core.build"\n\n'
            '[project]\nname = "k"\nversion = "1.0"\n\n' + table
        )
        read = read_texts(pyproject_toml=pyproject, CMakeLists_txt=cmake)
        decision = decide(read, backend_of(read), None)
        line = pyproject.splitlines().index(next(s for s in table.splitlines() if "false" in s)) + 1
        skipped = [c for c in decision.changes if "wheel.cmake = false" in c.text]
        assert [c.place for c in skipped] == [f"pyproject.toml:{line}"]
        assert "build.prepare" in skipped[0].fix
    running = read_texts(
        pyproject_toml='[build-system]\nrequires = ["scikit-build-core"]\n'
        'build-backend = "scikit_build_core.build"\n[tool.scikit-build]\nwheel.cmake = true\n',
        CMakeLists_txt=cmake,
    )
    assert not [c for c in decide(running, backend_of(running), None).changes if "wheel" in c.text]
