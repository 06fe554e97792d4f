"""The local label given by rewriting a wheel: every place that names the version, nothing
else, the same bytes every time."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.version import Version

from release.building.pipeline import platlib
from release.building.relabel import (
    RelabelError,
    as_platlib,
    copies_of,
    labelled_version,
    relabel,
    rewrite_version,
)
from release.inspection.wheel import check_record
from release.matrix import load_matrix
from release.wheelfile import wheel_facts
from tests.integration import wheels as integration_wheels

SGL = Path(__file__).parent.parent / "data" / "matrix" / "good" / "sgl-layout.yaml"
NAME = "fixture_cmake_kernels-0.2.0-py3-none-linux_x86_64.whl"
INFO = "fixture_cmake_kernels-0.2.0.dist-info"
DATE = (2023, 11, 14, 22, 13, 20)
METADATA = (
    b"Metadata-Version: 2.4\nName: fixture-cmake-kernels\nVersion: 0.2.0\n"
    b"Summary: Version: 9.9 in a summary is not the version\n\nVersion: 0.2.0 in the body\n"
)
WHEEL = b"Wheel-Version: 1.0\nGenerator: scikit-build-core 1.1.2\nRoot-Is-Purelib: false\n"
WHEEL += b"Tag: py3-none-linux_x86_64\n"


def digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(
    *,
    info: str = INFO,
    metadata: bytes = METADATA,
    data_dir: bool = False,
    extra: dict[str, bytes] | None = None,
    record_ending: str = "\n",
    wheel: bytes = WHEEL,
    library: bool = True,
) -> bytes:
    """A wheel as scikit-build-core lays it out: package, then .dist-info, RECORD last."""
    files: dict[str, tuple[bytes, int]] = {
        "fixture_kernels/__init__.py": (b"from x import y\n", 0o644),
        **({"fixture_kernels/libfxk.so": (b"\x7fELF" + bytes(64), 0o755)} if library else {}),
    }
    if data_dir:
        files["fixture_cmake_kernels-0.2.0.data/scripts/fxk-info"] = (b"#!python\n", 0o755)
    files[f"{info}/METADATA"] = (metadata, 0o644)
    files[f"{info}/WHEEL"] = (wheel, 0o644)
    for name, content in (extra or {}).items():
        files[name] = (content, 0o644)
    rows = [f"{name},{digest(content)},{len(content)}" for name, (content, _) in files.items()]
    rows.append(f"{info}/RECORD,,")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, (content, mode) in files.items():
            member = zipfile.ZipInfo(name, date_time=DATE)
            member.external_attr = (0o100000 | mode) << 16
            member.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(member, content)
        record = zipfile.ZipInfo(f"{info}/RECORD", date_time=DATE)
        record.external_attr = 0o100644 << 16
        archive.writestr(record, record_ending.join(rows) + record_ending)
    return buffer.getvalue()


def members(data: bytes) -> list[zipfile.ZipInfo]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return archive.infolist()


def read(data: bytes, name: str) -> bytes:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return archive.read(name)


def test_label_renames_the_dist_info_and_sets_metadata_record_and_filename() -> None:
    result = relabel(NAME, make_wheel(), "cu129")
    assert result.filename == "fixture_cmake_kernels-0.2.0+cu129-py3-none-linux_x86_64.whl"
    assert (result.old_version, result.new_version) == ("0.2.0", "0.2.0+cu129")
    facts = wheel_facts(result.data)
    assert facts.dist_info == "fixture_cmake_kernels-0.2.0+cu129.dist-info"
    assert facts.metadata_version == "0.2.0+cu129"
    assert facts.metadata_problems == ()
    assert facts.wheel_tags == ("py3-none-linux_x86_64",)
    metadata = read(result.data, f"{facts.dist_info}/METADATA")
    assert b"Summary: Version: 9.9 in a summary" in metadata, "only the header changes"
    assert metadata.endswith(b"Version: 0.2.0 in the body\n"), "the body is not a header"
    with zipfile.ZipFile(io.BytesIO(result.data)) as archive:
        assert check_record(archive, facts.dist_info) == []


def test_members_keep_order_dates_modes_and_compression() -> None:
    before = members(make_wheel(data_dir=True))
    after = members(relabel(NAME, make_wheel(data_dir=True), "cu129").data)
    assert [m.filename for m in after] == [
        "fixture_kernels/__init__.py",
        "fixture_kernels/libfxk.so",
        "fixture_cmake_kernels-0.2.0+cu129.data/scripts/fxk-info",
        "fixture_cmake_kernels-0.2.0+cu129.dist-info/METADATA",
        "fixture_cmake_kernels-0.2.0+cu129.dist-info/WHEEL",
        "fixture_cmake_kernels-0.2.0+cu129.dist-info/RECORD",
    ]
    for old, new in zip(before, after, strict=True):
        assert (new.date_time, new.external_attr, new.compress_type) == (
            old.date_time,
            old.external_attr,
            old.compress_type,
        )
    wheel = make_wheel(data_dir=True)
    unchanged = ("fixture_kernels/libfxk.so", "fixture_cmake_kernels-0.2.0.dist-info/WHEEL")
    result = relabel(NAME, wheel, "cu129")
    assert read(result.data, "fixture_kernels/libfxk.so") == read(wheel, unchanged[0])
    assert read(result.data, "fixture_cmake_kernels-0.2.0+cu129.dist-info/WHEEL") == WHEEL


def test_the_same_wheel_gives_the_same_bytes() -> None:
    wheel = make_wheel(data_dir=True)
    assert relabel(NAME, wheel, "cu129").data == relabel(NAME, wheel, "cu129").data


def test_record_rows_that_do_not_change_keep_their_text_and_line_ending() -> None:
    result = relabel(NAME, make_wheel(record_ending="\r\n"), "cu130")
    record = read(result.data, "fixture_cmake_kernels-0.2.0+cu130.dist-info/RECORD").decode()
    lines = record.split("\r\n")
    assert lines[0] == f"fixture_kernels/__init__.py,{digest(b'from x import y' + bytes([10]))},16"
    assert lines[-2] == "fixture_cmake_kernels-0.2.0+cu130.dist-info/RECORD,,"
    rows = {row[0]: row for row in csv.reader(io.StringIO(record)) if row}
    new_metadata = read(result.data, "fixture_cmake_kernels-0.2.0+cu130.dist-info/METADATA")
    assert rows["fixture_cmake_kernels-0.2.0+cu130.dist-info/METADATA"][1:] == [
        digest(new_metadata),
        str(len(new_metadata)),
    ]


def test_a_labelled_wheel_can_be_relabelled_or_made_public() -> None:
    labelled = relabel(NAME, make_wheel(), "cu129")
    again = relabel(labelled.filename, labelled.data, "cu130")
    assert again.filename.startswith("fixture_cmake_kernels-0.2.0+cu130-")
    public = relabel(labelled.filename, labelled.data, None)
    assert public.filename == NAME
    assert wheel_facts(public.data).metadata_version == "0.2.0"


def test_labelled_version() -> None:
    assert str(labelled_version(Version("1.2.3+cu128"), "cu129")) == "1.2.3+cu129"
    assert str(labelled_version(Version("1.2.3.post1"), None)) == "1.2.3.post1"


@pytest.mark.parametrize(
    ("wheel", "name", "label", "message"),
    [
        (b"not a zip", NAME, "cu129", "not a zip archive"),
        (make_wheel(), "nonsense.whl", "cu129", "nonsense.whl"),
        (make_wheel(), NAME, "cu_129!", "not a valid local version label"),
        (
            make_wheel(metadata=METADATA.replace(b"Version: 0.2.0\n", b"Version: 0.3.0\n")),
            NAME,
            "cu129",
            "METADATA's Version is not the filename's 0.2.0",
        ),
        (
            make_wheel(extra={f"{INFO}/RECORD.jws": b"{}"}),
            NAME,
            "cu129",
            "is signed",
        ),
        (
            make_wheel(extra={"other-1.0.dist-info/METADATA": b"Name: other\n"}),
            NAME,
            "cu129",
            "2 .dist-info folders",
        ),
        (
            make_wheel(info="fixture_cmake_kernels-0.1.0.dist-info"),
            NAME,
            "cu129",
            "does not have the filename's version",
        ),
        (make_wheel(), NAME.replace("-py3", "-1-py3"), "cu129", "build tag"),
        (
            make_wheel(metadata=METADATA.replace(b"Version: 0.2.0\n", b"Version: zero.two\n")),
            NAME,
            "cu129",
            "METADATA's Version is not the filename's 0.2.0",
        ),
        (
            make_wheel(metadata=METADATA.replace(b"Version: 0.2.0\n", b"Version: \xff\xfe\n")),
            NAME,
            "cu129",
            "METADATA's Version is not the filename's 0.2.0",
        ),
        (
            make_wheel(info="fixture_cmake_kernels-two.dist-info"),
            NAME,
            "cu129",
            "does not have the filename's version",
        ),
    ],
)
def test_wheels_that_cannot_be_relabelled(
    wheel: bytes, name: str, label: str, message: str
) -> None:
    with pytest.raises(RelabelError, match=message):
        relabel(name, wheel, label)


@settings(max_examples=60)
@given(label=st.from_regex(r"[a-z][a-z0-9]{0,6}(\.[a-z0-9]{1,4}){0,2}", fullmatch=True))
def test_any_label_gives_a_wheel_whose_metadata_agrees_with_its_name(label: str) -> None:
    result = relabel(NAME, make_wheel(data_dir=True), label)
    facts = wheel_facts(result.data)
    version = result.filename.split("-")[1]
    # the matrix accepts labels only as PEP 440 writes them; others come out normalized
    assert facts.metadata_version == version == str(Version(f"0.2.0+{label}"))
    assert facts.dist_info == f"fixture_cmake_kernels-{version}.dist-info"
    with zipfile.ZipFile(io.BytesIO(result.data)) as archive:
        assert check_record(archive, facts.dist_info) == []


def test_a_nightly_gets_its_dev_version_by_rewriting() -> None:
    result = rewrite_version(NAME, make_wheel(), Version("0.2.0.dev1733212345+cu129"))
    assert result.filename == NAME.replace("0.2.0", "0.2.0.dev1733212345+cu129")
    facts = wheel_facts(result.data)
    assert facts.metadata_version == "0.2.0.dev1733212345+cu129"
    again = rewrite_version(NAME, make_wheel(), Version("0.2.0.dev1733212345+cu129"))
    assert again.data == result.data


@pytest.mark.parametrize("target", ["0.2.1.dev5", "0.2.0.post1.dev5", "0.2.0rc1.dev5", "0.3"])
def test_the_release_part_is_never_rewritten(target: str) -> None:
    with pytest.raises(RelabelError, match="never the release"):
        rewrite_version(NAME, make_wheel(), Version(target))


PURE = WHEEL.replace(b"Root-Is-Purelib: false", b"Root-Is-Purelib: true").replace(
    b"py3-none-linux_x86_64", b"py3-none-any"
)


def test_a_pure_wheel_holding_a_shared_object_becomes_a_platform_wheel(tmp_path: Path) -> None:
    """DeepGEMM's staged pyproject: its prebuilt _C.so is package data of a pure wheel."""
    pure = make_wheel(wheel=PURE)
    data = as_platlib(pure)
    assert read(data, f"{INFO}/WHEEL") == PURE.replace(b"Purelib: true", b"Purelib: false")
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert check_record(archive, INFO) == []
    assert [read(data, m.filename) for m in members(data)][:3] == [
        read(pure, m.filename) for m in members(pure)
    ][:3]
    assert as_platlib(data) == data
    path = tmp_path / "fixture_cmake_kernels-0.2.0-py3-none-any.whl"
    path.write_bytes(pure)
    assert platlib(path).read_bytes() == data
    no_library = make_wheel(wheel=PURE, library=False)
    path.write_bytes(no_library)
    assert platlib(path).read_bytes() == no_library, "a pure wheel without one stays pure"


def test_each_other_copy_of_a_cell_is_its_wheel_relabelled(tmp_path: Path) -> None:
    """sgl-project's CUDA 13.0: built once, plain for PyPI; its copy for the GitHub release
    is that wheel as +cu130, every member but the version's the same bytes."""
    cell = load_matrix(SGL).cells[0]
    built = integration_wheels.make_wheel(tmp_path, version=str(cell.version))
    assert built.name == cell.wheel_filename
    ((copy, result),) = copies_of(cell, built.name, built.read_bytes())
    assert (copy.id, copy.destination.name, copy.local_label) == (cell.id, "whl", "cu130")
    assert result.filename == copy.wheel_filename
    assert result.filename == "k3_kernels-0.1.0+cu130-py3-none-manylinux_2_28_x86_64.whl"
    facts = wheel_facts(result.data)
    assert (facts.dist_info, facts.metadata_version) == (
        "k3_kernels-0.1.0+cu130.dist-info",
        "0.1.0+cu130",
    )
    built_sha256 = hashlib.sha256(built.read_bytes()).hexdigest()
    assert result.sha256 == hashlib.sha256(result.data).hexdigest() != built_sha256
    assert read(result.data, "k3_kernels/__init__.py") == read(
        built.read_bytes(), "k3_kernels/__init__.py"
    )
    with zipfile.ZipFile(io.BytesIO(result.data)) as archive:
        assert check_record(archive, "k3_kernels-0.1.0+cu130.dist-info") == []
    cu129 = load_matrix(SGL).cells[2]
    assert copies_of(cu129, cu129.wheel_filename, b"not read: no other copy") == []
