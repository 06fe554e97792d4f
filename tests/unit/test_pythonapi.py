"""A py3-none wheel uses no Python C-API (release/inspection/pythonapi.py), on real ELF
files (tests/data/elf): a library that calls the C-API fails, naming its symbols; a host
library passes; and the inspection holds every py3-none cell's wheel to it, an abi3 one's
not."""

from __future__ import annotations

import io
import zipfile
from dataclasses import replace
from pathlib import Path

from release.inspection.fatbin import FatbinContents
from release.inspection.pythonapi import python_api_problems
from release.inspection.wheel import inspect_wheel
from release.matrix import load_matrix
from release.wheelfile import record_hash

DATA = Path(__file__).resolve().parents[1] / "data"
PYTHON_API_SO = DATA / "elf" / "x86_64-python-api.so"
HOST_SO = DATA / "elf" / "x86_64-glibc2.28.so"
PYINIT_SO = DATA / "elf" / "x86_64-pyinit.so"
CELL = load_matrix(DATA / "matrix" / "build" / "torch-jit.yaml").cells[0]


def wheel(library: Path, tags: str = "py3-none") -> tuple[str, bytes]:
    """A wheel of the cell's project whose one shared object is `library`."""
    info = "k3_kernels-0.1.0.dist-info"
    files = {
        "k3_kernels/_C.so": library.read_bytes(),
        f"{info}/METADATA": b"Metadata-Version: 2.1\nName: k3-kernels\nVersion: 0.1.0\n",
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"
        f"Tag: {tags}-{CELL.platform_tag}\n".encode(),
    }
    record = "".join(f"{n},{record_hash(d)},{len(d)}\n" for n, d in files.items())
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return f"k3_kernels-0.1.0-{tags}-{CELL.platform_tag}.whl", buffer.getvalue()


def test_a_library_calling_the_python_c_api_is_named_with_its_symbols() -> None:
    _, data = wheel(PYTHON_API_SO)
    remedy = (
        "a py3-none wheel loads in every CPython and may use none of it (an include of "
        "Python.h, pybind11 or torch/python.h brings its symbols, used or not: drop it, or "
        "build one wheel per Python, python: [...], or keep to the limited API, abi3:)"
    )
    assert python_api_problems(data) == [
        f"k3_kernels/_C.so uses 2 symbols of the Python C-API (PyLong_FromLong, _Py_Dealloc): "
        f"{remedy}",
    ]
    assert python_api_problems(wheel(HOST_SO)[1]) == []


def test_a_library_exporting_an_extension_modules_entry_point_is_named() -> None:
    # PyInit__C uses no symbol of Python's, yet `import` takes the library for a module
    assert python_api_problems(wheel(PYINIT_SO)[1]) == [
        "k3_kernels/_C.so exports PyInit__C, a CPython extension module's entry point, which "
        "binds it to the CPython it was built for, in a py3-none wheel (python: any): build "
        "one wheel per Python (python: [...]), keep to the limited API (abi3:), or export no "
        "PyInit_ function"
    ]


def no_lister(name: str, path: Path) -> FatbinContents:
    raise AssertionError(f"{name}: a wheel without device code lists nothing")


def test_the_inspection_holds_a_py3_none_cell_to_no_python_c_api() -> None:
    name, data = wheel(PYTHON_API_SO)
    problems = inspect_wheel(name, data, CELL, list_fatbin=no_lister).problems
    assert [p.split(": a py3-none")[0] for p in problems] == [
        "k3_kernels/_C.so uses 2 symbols of the Python C-API (PyLong_FromLong, _Py_Dealloc)"
    ]
    name, data = wheel(HOST_SO)
    assert inspect_wheel(name, data, CELL, list_fatbin=no_lister).problems == ()
    abi3 = replace(CELL, abi3="3.10")
    name, data = wheel(PYTHON_API_SO, tags="cp310-abi3")
    assert inspect_wheel(name, data, abi3, list_fatbin=no_lister).problems == ()
