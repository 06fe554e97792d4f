"""The driver's link stub (build.cuda-libraries: `cuda`): the CUDA_HOME gets
lib/stubs/libcuda.so, compiled by a real C compiler from the CUDA headers it holds; a
library linked `-lcuda` through LIBRARY_PATH (as a torch cell's build gets it) needs
libcuda.so.1, and takes the versioned names cuda.h's macros give its calls; the manylinux
verdict names the remedy where the matrix does not declare the driver, and counts it
provided where it does."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from release.backends import DRIVER_STUB
from release.inspection.verdict import manylinux_verdict
from release.toolchain.cudahome import DRIVER_SONAME, assemble
from tests.integration.wheels import make_wheel

CUDA_H = Path(__file__).resolve().parents[1] / "data" / "driver" / "cuda.h"
# what a call through cuda.h compiles to: cuMemAlloc is cuMemAlloc_v2 there
USER = """\
extern int cuInit(unsigned int);
extern int cuMemAlloc_v2(void *, unsigned long);
int k3_alloc(void *p) { return cuInit(0) || cuMemAlloc_v2(p, 16); }
"""


def dynamic(binary: Path) -> tuple[list[str], str | None, set[str], set[str]]:
    """NEEDED, SONAME, and the defined and undefined dynamic symbols of `binary`."""
    with binary.open("rb") as stream:
        elf = ELFFile(stream)
        section = elf.get_section_by_name(".dynamic")
        assert isinstance(section, DynamicSection)
        tags = list(section.iter_tags())
        # each tag has the attribute of its kind (needed, soname), unknown to the stubs
        needed = [str(t.needed) for t in tags if t.entry.d_tag == "DT_NEEDED"]  # type: ignore[attr-defined]
        soname = next((str(t.soname) for t in tags if t.entry.d_tag == "DT_SONAME"), None)  # type: ignore[attr-defined]
        symbols = elf.get_section_by_name(".dynsym")
        assert isinstance(symbols, SymbolTableSection)
        defined = {s.name for s in symbols.iter_symbols() if s["st_shndx"] != "SHN_UNDEF"}
        undefined = {s.name for s in symbols.iter_symbols() if s["st_shndx"] == "SHN_UNDEF"}
    return needed, soname, defined - {""}, undefined - {""}


def test_a_library_linked_against_the_stub_needs_the_drivers_libcuda(tmp_path: Path) -> None:
    cc = shutil.which("gcc")
    if cc is None or os.uname().machine != "x86_64":
        pytest.skip("needs gcc on x86_64")
    libraries = tmp_path / "libs"
    (libraries / "nvidia" / "cu13" / "include").mkdir(parents=True)
    (libraries / "nvidia" / "cu13" / "lib").mkdir()
    shutil.copy(CUDA_H, libraries / "nvidia" / "cu13" / "include" / "cuda.h")
    (libraries / "nvidia" / "cu13" / "lib" / "libcudart.so.13").write_bytes(b"")

    def compile_stub(arguments: Sequence[str]) -> object:
        return subprocess.run([cc, *arguments], check=True, capture_output=True, timeout=60)

    home = assemble(
        tmp_path / "cache", cuda="13.0", toolkit=None, libraries=libraries,
        names=("cudart", "cuda"), compile_stub=compile_stub, compiler=cc,
    )  # fmt: skip
    stub = home / DRIVER_STUB
    needed, soname, defined, _ = dynamic(stub)
    assert soname == DRIVER_SONAME
    assert needed == []  # it needs nothing, not even a C library
    assert {"cuInit", "cuMemAlloc", "cuMemAlloc_v2", "cuMemcpyHtoD_v2_ptds"} <= defined
    assert not list(stub.parent.glob("*.c")), "only the stub is left in lib/stubs"

    source = tmp_path / "user.c"
    source.write_text(USER, encoding="utf-8")
    library = tmp_path / "_driver.so"
    linked = subprocess.run(
        [cc, "-shared", "-fPIC", "-o", str(library), str(source), "-lcuda"],
        env={**os.environ, "LIBRARY_PATH": str(home / "lib64" / "stubs")},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert linked.returncode == 0, linked.stderr
    needed, _, _, undefined = dynamic(library)
    assert DRIVER_SONAME in needed
    assert {"cuInit", "cuMemAlloc_v2"} <= undefined

    wheel = make_wheel(
        tmp_path / "dist", platform="linux_x86_64",
        members={"k3_kernels/_driver.so": library.read_bytes()},
    )  # fmt: skip
    refused = manylinux_verdict(wheel, manylinux="2_39", arch="x86_64")
    assert refused.external_libraries == (DRIVER_SONAME,)
    assert any("add cuda to build.cuda-libraries" in p for p in refused.problems)
    declared = manylinux_verdict(wheel, manylinux="2_39", arch="x86_64", provided=(DRIVER_SONAME,))
    assert declared.external_libraries == ()
