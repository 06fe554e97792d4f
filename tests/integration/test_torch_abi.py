"""The ABI check of torch extension wheels on shared objects made by the system's g++ and
gcc: a stand-in for torch's library (libfaketorch.so) and extensions that use it well, use
a symbol it lacks, or use its C++ symbols in a stable-ABI build; then (slow) on the
session's real wheels of the torch fixture against the libraries of the torch 2.14.1 they
were built beside (tests/full/shared_builds.py)."""

from __future__ import annotations

import io
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from release.inspection.torchabi import abi_problems, torch_exports
from release.toolchain.torchenv import TorchEnv

pytestmark = pytest.mark.skipif(
    shutil.which("g++") is None or shutil.which("gcc") is None, reason="needs g++ and gcc"
)

LABEL = "0.0.1"

FAKE_TORCH = """
namespace c10 { int answer(int x) { return x + 1; } }
extern "C" int torch_c_answer(int x) { return x + 2; }
"""
USES_TORCH_CXX = """
namespace c10 { int answer(int x); }
int call(int x) { return c10::answer(x); }
"""
USES_MISSING = """
namespace c10 { int answer(int x); int gone(int x); }
int call(int x) { return c10::answer(x) + c10::gone(x); }
"""
USES_TORCH_C = """
extern "C" int torch_c_answer(int x);
int call(int x) { return torch_c_answer(x); }
"""
USES_RUNTIME = """
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
extern "C" void *PyLong_FromLong(long);
extern "C" void _Py_Dealloc(void *);
std::string describe(double x) {
    if (x < 0) throw std::runtime_error("negative");
    std::printf("%f\\n", std::cos(x));
    void *object = PyLong_FromLong(static_cast<long>(x));
    _Py_Dealloc(object);
    return std::to_string(x);
}
"""
USES_WEAK = """
extern "C" int maybe_there(int) __attribute__((weak));
int call(int x) { return maybe_there ? maybe_there(x) : 0; }
"""
HELPER = "int helper(int x) { return 2 * x; }\n"
USES_HELPER = "int helper(int x);\nint call(int x) { return helper(x); }\n"
C_ONLY = """
#include <math.h>
double tan_of(double x) { return tan(x); }
"""


def compiled(directory: Path, name: str, source: str, *, links: tuple[str, ...] = ()) -> Path:
    """`source` built into directory/name as a shared object (C++ unless it ends in .c)."""
    suffix = ".c" if name.endswith(".c.so") else ".cpp"
    path = directory / (name.removesuffix(".c.so") + suffix)
    path.write_text(source)
    output = directory / name.replace(".c.so", ".so")
    compiler = "gcc" if suffix == ".c" else "g++"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O1", str(path), "-o", str(output), *links],
        check=True,
        capture_output=True,
    )
    return output


def wheel(members: dict[str, Path]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, path in members.items():
            archive.writestr(name, path.read_bytes())
        archive.writestr("ext-0.1.0.dist-info/METADATA", b"Name: ext\nVersion: 0.1.0\n")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("torchabi")
    torch_lib = root / "torch" / "lib"
    torch_lib.mkdir(parents=True)
    compiled(torch_lib, "libfaketorch.so", FAKE_TORCH)
    (torch_lib / "README").write_text("not a library\n")
    links = (f"-L{torch_lib}", "-lfaketorch")
    compiled(root, "cxx.so", USES_TORCH_CXX, links=links)
    compiled(root, "missing.so", USES_MISSING, links=links)
    compiled(root, "c_only.so", USES_TORCH_C, links=links)
    compiled(root, "runtime.so", USES_RUNTIME, links=("-lm",))
    compiled(root, "tan.c.so", C_ONLY, links=("-lm",))
    compiled(root, "weak.so", USES_WEAK)
    compiled(root, "libhelper.so", HELPER)
    compiled(root, "helped.so", USES_HELPER, links=(f"-L{root}", "-lhelper"))
    return root


def exports_of(lab: Path) -> frozenset[str]:
    return torch_exports([lab / "torch" / "lib"])


def test_torch_exports_reads_the_libraries_of_the_directory(lab: Path) -> None:
    exports = exports_of(lab)
    assert {"_ZN3c106answerEi", "torch_c_answer"} <= exports
    assert "_ZN3c104goneEi" not in exports
    assert exports_of(lab) is exports  # kept while the files do not change


def test_an_extension_using_what_torch_exports_passes(lab: Path) -> None:
    data = wheel({"ext/_C.so": lab / "cxx.so"})
    assert abi_problems(data, exports_of(lab), stable=False, torch_label=LABEL) == []


def test_a_symbol_torch_does_not_export_is_named_demangled(lab: Path) -> None:
    data = wheel({"ext/_C.so": lab / "missing.so"})
    assert abi_problems(data, exports_of(lab), stable=False, torch_label=LABEL) == [
        "ext/_C.so: undefined symbol c10::gone(int) (_ZN3c104goneEi): "
        "not exported by torch 0.0.1's libraries"
    ]


def test_only_c_symbols_of_torch_pass_a_stable_build(lab: Path) -> None:
    exports = exports_of(lab)
    c_only = wheel({"ext/_C.so": lab / "c_only.so"})
    assert abi_problems(c_only, exports, stable=True, torch_label=LABEL) == []
    cxx = wheel({"ext/_C.so": lab / "cxx.so"})
    (problem,) = abi_problems(cxx, exports, stable=True, torch_label=LABEL)
    assert problem.startswith("ext/_C.so: undefined symbol c10::answer(int) (_ZN3c106answerEi):")
    assert "stable-ABI" in problem


def test_runtime_python_weak_and_in_wheel_symbols_pass(lab: Path) -> None:
    data = wheel(
        {
            "ext/_runtime.so": lab / "runtime.so",
            "ext/_tan.so": lab / "tan.so",
            "ext/_weak.so": lab / "weak.so",
            "ext/_helped.so": lab / "helped.so",
            "ext/lib/libhelper.so": lab / "libhelper.so",
        }
    )
    assert abi_problems(data, exports_of(lab), stable=True, torch_label=LABEL) == []


def test_a_library_missing_from_the_wheel_leaves_its_symbols_unresolved(lab: Path) -> None:
    data = wheel({"ext/_helped.so": lab / "helped.so"})
    (problem,) = abi_problems(data, exports_of(lab), stable=False, torch_label=LABEL)
    assert "undefined symbol helper(int) (_Z6helperi)" in problem


def real_exports(torch_environment: TorchEnv, *, with_cuda: bool = True) -> frozenset[str]:
    """What torch's libraries export (and, `with_cuda`, the CUDA libraries torch brings),
    in the session's torch environment."""
    site = torch_environment.site_packages
    assert site is not None
    cuda = sorted(site.glob("nvidia/*/lib")) if with_cuda else []
    return torch_exports([site / "torch" / "lib", *cuda])
