"""auditwheel's verdict with the libraries of a wheel's runtime dependencies left out, on
real files: extensions made by g++ that link stand-ins for torch's libraries and a library
of no one's, and (slow) the session's regular wheel of the torch fixture, built against
torch 2.14.1, with what the torch environment's installed distributions provide
(tests/full/shared_builds.py)."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from release.inspection.verdict import manylinux_verdict
from release.wheelfile import record_hash

# what torch's distribution would provide of the stand-ins
TORCH_PROVIDED = frozenset({"libtorch_cpu.so", "libc10.so"})

EXTENSION = """
#include <cstdlib>
extern "C" int torch_answer(int);
extern "C" int c10_answer(int);
extern "C" int planted(int);
extern "C" void *PyInit__C(void) { return 0; }
int call(int x) { return torch_answer(x) + c10_answer(x) + PLANTED + !std::getenv("X"); }
"""


def shared_object(output: Path, source: str, *flags: str) -> Path:
    path = output.with_suffix(".cpp")
    path.write_text(source)
    compiler = shutil.which("g++")
    assert compiler is not None
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O1", str(path), "-o", str(output), *flags],
        check=True,
        capture_output=True,
    )
    return output


def wheel(directory: Path, extension: Path) -> Path:
    """A wheel of the one extension; auditwheel finds its ELF files through RECORD."""
    path = directory / "ext-0.1.0-cp310-abi3-linux_x86_64.whl"
    info = "ext-0.1.0.dist-info"
    members = {
        "ext/_C.abi3.so": extension.read_bytes(),
        f"{info}/METADATA": b"Metadata-Version: 2.1\nName: ext\nVersion: 0.1.0\n",
        f"{info}/WHEEL": (
            b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp310-abi3-linux_x86_64\n"
        ),
    }
    record = "".join(f"{n},{record_hash(d)},{len(d)}\n" for n, d in members.items())
    members[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("g++") is None:
        pytest.skip("needs g++")
    root = tmp_path_factory.mktemp("torchlibs")
    shared_object(root / "libtorch_cpu.so", 'extern "C" int torch_answer(int x) { return x; }')
    shared_object(root / "libc10.so", 'extern "C" int c10_answer(int x) { return x; }')
    shared_object(root / "libplanted.so", 'extern "C" int planted(int x) { return x; }')
    return root


def extension(libraries: Path, name: str, *, planted: bool) -> Path:
    links = ["-ltorch_cpu", "-lc10", *(["-lplanted"] if planted else [])]
    source = EXTENSION.replace("PLANTED", "planted(x)" if planted else "0")
    directory = libraries / name
    directory.mkdir()
    built = shared_object(
        directory / "_C.abi3.so", source, f"-L{libraries}", f"-Wl,-rpath,{libraries}", *links
    )
    return wheel(directory, built)


def test_an_extension_of_torchs_libraries_alone_is_manylinux(libraries: Path) -> None:
    path = extension(libraries, "clean", planted=False)
    verdict = manylinux_verdict(path, manylinux="2_28", arch="x86_64", provided=TORCH_PROVIDED)
    assert verdict.platform_tag.startswith("manylinux_")
    assert verdict.external_libraries == ()
    without = manylinux_verdict(path, manylinux="2_28", arch="x86_64")
    assert without.platform_tag == "linux_x86_64"
    assert without.external_libraries == ("libc10.so", "libtorch_cpu.so")


def test_a_library_that_is_not_torchs_is_still_refused(libraries: Path) -> None:
    path = extension(libraries, "planted", planted=True)
    verdict = manylinux_verdict(path, manylinux="2_28", arch="x86_64", provided=TORCH_PROVIDED)
    assert verdict.platform_tag == "linux_x86_64"
    assert verdict.external_libraries == ("libplanted.so",)
    (problem,) = verdict.problems
    assert problem.startswith("ext/_C.abi3.so needs libplanted.so, which nothing provides")


def test_a_wheel_rewritten_at_the_same_path_is_read_again(libraries: Path) -> None:
    path = extension(libraries, "again", planted=False)
    assert (
        manylinux_verdict(
            path, manylinux="2_28", arch="x86_64", provided=TORCH_PROVIDED
        ).external_libraries
        == ()
    )
    planted = extension(libraries, "again-planted", planted=True)
    shutil.copyfile(planted, path)
    found = manylinux_verdict(path, manylinux="2_28", arch="x86_64", provided=TORCH_PROVIDED)
    assert found.external_libraries == ("libplanted.so",)


def test_a_wheel_auditwheel_cannot_read_is_one_problem(tmp_path: Path) -> None:
    source = tmp_path / "_C.abi3.so"
    source.write_bytes(b"not ELF")
    verdict = manylinux_verdict(
        wheel(tmp_path, source), manylinux="2_28", arch="x86_64", provided=TORCH_PROVIDED
    )
    assert verdict.platform_tag == ""
    (problem,) = verdict.problems
    assert problem.startswith("auditwheel: This does not look like a platform wheel")
