"""The torch a torch extension wheel needs: the requirement a build implies, the stable-ABI
target its build log shows, and METADATA rewritten to say so, the same bytes every time."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import zipfile

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from release.building.torchpin import (
    TorchPinError,
    pinned,
    stable_target_version,
    torch_requirement,
)
from release.inspection.wheel import check_record

NAME = "k3_torch_ops-0.1.0-cp310-abi3-linux_x86_64.whl"
INFO = "k3_torch_ops-0.1.0.dist-info"
DATE = (2026, 12, 1, 11, 27, 0)
REGULAR = Requirement("torch==2.14.*")
STABLE = Requirement("torch>=2.10")
BUILT = Version("2.14.1+cu130")


def digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def metadata(*requires: str, body: str = "One custom torch op.\n") -> bytes:
    head = "Metadata-Version: 2.4\nName: k3-torch-ops\nVersion: 0.1.0\nRequires-Python: >=3.10\n"
    head += "".join(f"Requires-Dist: {r}\n" for r in requires)
    return (head + "Dynamic: requires-dist\n\n" + body).encode()


def make_wheel(meta: bytes) -> bytes:
    """A wheel as setuptools lays out a torch extension: package, then .dist-info."""
    files: dict[str, tuple[bytes, int, int]] = {
        "k3_torch_ops/_C.abi3.so": (b"\x7fELF" + bytes(60), 0o755, zipfile.ZIP_DEFLATED),
        "k3_torch_ops/__init__.py": (b"import torch\n", 0o644, zipfile.ZIP_DEFLATED),
        f"{INFO}/METADATA": (meta, 0o644, zipfile.ZIP_STORED),
        f"{INFO}/WHEEL": (b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n", 0o644, 8),
    }
    rows = [f"{name},{digest(content)},{len(content)}" for name, (content, _, _) in files.items()]
    files[f"{INFO}/RECORD"] = (("\n".join([*rows, f"{INFO}/RECORD,,"]) + "\n").encode(), 0o644, 8)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, (content, mode, compression) in files.items():
            member = zipfile.ZipInfo(name, date_time=DATE)
            member.external_attr = (0o100000 | mode) << 16
            member.compress_type = compression
            archive.writestr(member, content)
    return buffer.getvalue()


def read(data: bytes, name: str) -> bytes:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return archive.read(name)


def requires(data: bytes) -> list[str]:
    lines = read(data, f"{INFO}/METADATA").decode().splitlines()
    return [line for line in lines if line.startswith("Requires-Dist:")]


def test_a_regular_build_needs_its_torch_release() -> None:
    assert str(torch_requirement(BUILT, None)) == "torch==2.14.*"
    assert str(torch_requirement(Version("2.9.0"), None)) == "torch==2.9.*"


def test_a_stable_build_needs_its_target_or_newer() -> None:
    assert str(torch_requirement(BUILT, Version("2.10"))) == "torch>=2.10"
    assert str(torch_requirement(BUILT, Version("2.10.0"))) == "torch>=2.10"
    assert str(torch_requirement(BUILT, Version("2.11.2"))) == "torch>=2.11.2"


COMPILE = (
    "[1/2] c++ -MMD -MF ops.o.d -O3 -Wall -fPIC -I/venv/torch/include -c csrc/stable/ops.cpp "
    "-o ops.o -O3 {define} -DTORCH_API_INCLUDE_EXTENSION_H -DPy_LIMITED_API=0x030a0000\n"
    "[2/2] /cuda/bin/nvcc -I/venv/torch/include -c csrc/stable/ops_cuda.cu -o ops_cuda.o "
    "-O3 {define} -DUSE_CUDA -gencode=arch=compute_90,code=sm_90\n"
)


def test_the_target_version_is_read_from_the_compile_lines() -> None:
    log = COMPILE.format(define="-DTORCH_TARGET_VERSION=0x020a000000000000")
    assert stable_target_version(log) == Version("2.10")
    # major in the top byte, minor in the next, patch in the third; a suffix or a space
    decimal = str((2 << 56) | (11 << 48) | (3 << 40))
    assert stable_target_version(f"-D TORCH_TARGET_VERSION={decimal} x") == Version("2.11.3")
    log = COMPILE.format(define="-DTORCH_TARGET_VERSION=0x020C000000000000ULL")
    assert stable_target_version(log) == Version("2.12")


def test_a_regular_build_log_has_no_target_version() -> None:
    assert stable_target_version(COMPILE.format(define="-DTORCH_EXTENSION_NAME=_C")) is None
    assert stable_target_version("") is None


def test_two_target_versions_in_one_log_are_refused() -> None:
    log = COMPILE.format(define="-DTORCH_TARGET_VERSION=0x020a000000000000")
    log += COMPILE.format(define="-DTORCH_TARGET_VERSION=0x020b000000000000")
    with pytest.raises(ValueError, match="TORCH_TARGET_VERSION") as refused:
        stable_target_version(log)
    assert "0x020a000000000000 (2.10)" in str(refused.value)
    assert "0x020b000000000000 (2.11)" in str(refused.value)


def test_a_missing_requirement_is_added_after_the_others() -> None:
    wheel = make_wheel(metadata("numpy>=1.26", "packaging"))
    result = pinned(NAME, wheel, REGULAR, built_with=BUILT)
    assert requires(result) == [
        "Requires-Dist: numpy>=1.26",
        "Requires-Dist: packaging",
        "Requires-Dist: torch==2.14.*",
    ]
    assert read(result, f"{INFO}/METADATA").endswith(b"\n\nOne custom torch op.\n")


def test_a_metadata_without_any_requirement_gets_it_in_its_header() -> None:
    result = pinned(NAME, make_wheel(metadata(body="Requires-Dist: not a header\n")), STABLE)
    assert requires(result) == ["Requires-Dist: torch>=2.10", "Requires-Dist: not a header"]
    text = read(result, f"{INFO}/METADATA").decode()
    assert text.index("Requires-Dist: torch>=2.10") < text.index("\n\n")


@pytest.mark.parametrize(
    ("project", "pin", "result"),
    [
        ("torch", REGULAR, "torch==2.14.*"),
        ("torch>=2.10", REGULAR, "torch==2.14.*"),
        ("torch>=2.0,<3", REGULAR, "torch==2.14.*"),
        ("torch", STABLE, "torch>=2.10"),
        ("torch>=2.8", STABLE, "torch>=2.10"),
        ("torch>=2.8,<3", STABLE, "torch<3,>=2.10"),  # the project's upper bound stays
        ("Torch>=2.1,!=2.14.0", REGULAR, "Torch!=2.14.0,==2.14.*"),
        (
            'torch[opt-einsum]>=2.1; platform_system == "Linux"',
            REGULAR,
            'torch[opt-einsum]==2.14.*; platform_system == "Linux"',
        ),
    ],
)
def test_a_wider_requirement_is_narrowed_to_the_pin(
    project: str, pin: Requirement, result: str
) -> None:
    wheel = make_wheel(metadata("numpy", project))
    assert requires(pinned(NAME, wheel, pin, built_with=BUILT)) == [
        "Requires-Dist: numpy",
        f"Requires-Dist: {result}",
    ]


@pytest.mark.parametrize(
    ("project", "pin"),
    [
        ("torch==2.14.*", REGULAR),
        ("torch==2.14.1", REGULAR),
        ("torch~=2.14.1", REGULAR),
        ("torch>=2.14,<2.15", REGULAR),
        ("torch>=2.10", STABLE),
        ("torch>=2.12,<3", STABLE),
        ("torch==2.14.*", STABLE),
    ],
)
def test_a_requirement_as_narrow_as_the_pin_is_kept(project: str, pin: Requirement) -> None:
    wheel = make_wheel(metadata(project))
    assert pinned(NAME, wheel, pin, built_with=BUILT) == wheel


@pytest.mark.parametrize(
    ("project", "pin"),
    [
        ("torch==2.13.*", REGULAR),
        ("torch<2.14", REGULAR),
        ("torch>=2.15", REGULAR),
        ("torch==2.9.*", STABLE),
    ],
)
def test_a_requirement_the_build_contradicts_is_refused(project: str, pin: Requirement) -> None:
    with pytest.raises(TorchPinError) as refused:
        pinned(NAME, make_wheel(metadata(project)), pin)
    assert isinstance(refused.value, ValueError)
    assert NAME in str(refused.value)
    assert project in str(refused.value)
    assert str(pin) in str(refused.value)


def test_a_requirement_that_leaves_out_the_torch_built_against_is_refused() -> None:
    # a stable wheel of target 2.10 would load in 2.13, but it was built with 2.14.1
    with pytest.raises(TorchPinError, match=r"torch==2\.13\.\*.*2\.14\.1\+cu130"):
        pinned(NAME, make_wheel(metadata("torch==2.13.*")), STABLE, built_with=BUILT)
    with pytest.raises(TorchPinError, match=r"leaves out torch 2\.14\.1"):
        pinned(NAME, make_wheel(metadata("torch==2.14.0")), REGULAR, built_with=BUILT)


def test_a_requirement_of_an_extra_is_left_alone() -> None:
    wheel = make_wheel(metadata('torch==2.9.*; extra == "old"', "numpy"))
    assert requires(pinned(NAME, wheel, REGULAR, built_with=BUILT)) == [
        'Requires-Dist: torch==2.9.*; extra == "old"',
        "Requires-Dist: numpy",
        "Requires-Dist: torch==2.14.*",
    ]


def test_the_same_wheel_gives_the_same_bytes() -> None:
    wheel = make_wheel(metadata("torch>=2.10"))
    first = pinned(NAME, wheel, REGULAR, built_with=BUILT)
    assert first != wheel
    assert pinned(NAME, wheel, REGULAR, built_with=BUILT) == first
    assert pinned(NAME, first, REGULAR, built_with=BUILT) == first, "pinning twice is once"


def test_record_holds_the_new_metadata_and_nothing_else_changes() -> None:
    wheel = make_wheel(metadata("torch"))
    result = pinned(NAME, wheel, REGULAR)
    new_metadata = read(result, f"{INFO}/METADATA")
    rows = {
        row[0]: row[1:] for row in csv.reader(io.StringIO(read(result, f"{INFO}/RECORD").decode()))
    }
    assert rows[f"{INFO}/METADATA"] == [digest(new_metadata), str(len(new_metadata))]
    old_rows = {
        row[0]: row[1:] for row in csv.reader(io.StringIO(read(wheel, f"{INFO}/RECORD").decode()))
    }
    assert {k: v for k, v in rows.items() if k != f"{INFO}/METADATA"} == {
        k: v for k, v in old_rows.items() if k != f"{INFO}/METADATA"
    }
    with zipfile.ZipFile(io.BytesIO(result)) as archive:
        assert check_record(archive, INFO) == []
        after = archive.infolist()
    with zipfile.ZipFile(io.BytesIO(wheel)) as archive:
        before = archive.infolist()
        for info in before:
            if not info.filename.endswith(("METADATA", "RECORD")):
                assert read(result, info.filename) == archive.read(info)
    assert [(i.filename, i.date_time, i.external_attr, i.compress_type) for i in after] == [
        (i.filename, i.date_time, i.external_attr, i.compress_type) for i in before
    ]


def test_a_wheel_that_cannot_be_read_is_refused() -> None:
    with pytest.raises(TorchPinError, match="not a zip archive"):
        pinned(NAME, b"not a zip", REGULAR)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(f"{INFO}/METADATA", metadata())
    with pytest.raises(TorchPinError, match=r"has no .*RECORD"):
        pinned(NAME, buffer.getvalue(), REGULAR)
