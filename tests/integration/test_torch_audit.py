"""torch-abi-audit run on stable-ABI wheels (release.inspection.torchaudit) over shared
objects made by the system's g++: one that calls only the C shim of its target, one that
calls a shim newer than its target, one that takes a c10 C++ symbol; a Python without
torch-abi-audit answers None (torchabi's own check then stands in); then (slow) the torch
fixture's real stable and regular wheels (tests/full/shared_builds.py)."""

from __future__ import annotations

import importlib.util
import io
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from release.inspection.torchaudit import torch_abi_auditor

pytestmark = [
    pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++"),
    pytest.mark.skipif(
        importlib.util.find_spec("torch_abi_audit") is None,
        reason="torch-abi-audit is not installed (Python 3.10)",
    ),
]

# torch_call_dispatcher came with torch 2.10, aoti_torch_cpu_nonzero_static with 2.11
# (torch-abi-audit's data/shim_function_versions.json)
SHIM_2_10 = """
extern "C" int torch_call_dispatcher(const char *, const char *, void *, unsigned long);
int call() { return torch_call_dispatcher("k3::op", "", nullptr, 0); }
"""
SHIM_2_11 = """
extern "C" int aoti_torch_cpu_nonzero_static(void *, long, long, void **);
int call() { return aoti_torch_cpu_nonzero_static(nullptr, 0, 0, nullptr); }
"""
TORCH_CXX = """
namespace c10 { int answer(int x); }
extern "C" int torch_call_dispatcher(const char *, const char *, void *, unsigned long);
int call(int x) { return c10::answer(x) + torch_call_dispatcher("", "", nullptr, 0); }
"""
TARGET = Version("2.10")


def wheel_of(directory: Path, source: str) -> bytes:
    """`source` built into a shared object, inside a wheel as k3/_C.abi3.so."""
    (directory / "ext.cpp").write_text(source)
    library = directory / "ext.so"
    compiler = shutil.which("g++") or "g++"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O1", str(directory / "ext.cpp"), "-o", str(library)],
        check=True, capture_output=True,
    )  # fmt: skip
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("k3/_C.abi3.so", library.read_bytes())
        archive.writestr("k3/__init__.py", "")
        archive.writestr("k3-0.1.0.dist-info/METADATA", "Name: k3\nVersion: 0.1.0\n")
    return buffer.getvalue()


def audit(data: bytes, target: Version = TARGET) -> list[str] | None:
    return torch_abi_auditor(sys.executable, dict(os.environ))(data, target)


def test_a_build_calling_only_shims_of_its_target_passes(tmp_path: Path) -> None:
    assert audit(wheel_of(tmp_path, SHIM_2_10)) == []


def test_a_shim_newer_than_the_target_fails_naming_it(tmp_path: Path) -> None:
    data = wheel_of(tmp_path, SHIM_2_11)
    (problem,) = audit(data) or ["passed"]
    assert problem.startswith(
        "k3/_C.abi3.so: calls shims of torch 2.11.0 (aoti_torch_cpu_nonzero_static), newer "
        "than its TORCH_TARGET_VERSION 2.10"
    ), problem
    assert audit(data, Version("2.11")) == []


def test_a_torch_cxx_symbol_fails_a_stable_build(tmp_path: Path) -> None:
    assert audit(wheel_of(tmp_path, TORCH_CXX)) == [
        "k3/_C.abi3.so: c10::answer(int) is torch's unstable C++ API: a stable-ABI build may "
        "use only the C shim and torch::stable (it binds the wheel to one torch)"
    ]


def test_a_python_without_torch_abi_audit_answers_none(tmp_path: Path) -> None:
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    auditor = torch_abi_auditor(str(venv / "bin" / "python"), dict(os.environ))
    assert auditor(wheel_of(tmp_path, TORCH_CXX), TARGET) is None
