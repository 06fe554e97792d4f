"""release.wheelfile: the one RECORD hash, pinned to known digests; what a name or a file
from outside that is not a wheel is refused with."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from release.wheelfile import (
    NotAWheel,
    WheelName,
    is_wheel_name,
    readable_wheel,
    record_hash,
    version_or_none,
    zip_problem,
)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"),
        (b"PK", "sha256=_Kt_zCtM_9m7RQA7_C5GigTvb3fKggCnNB8CdjFYTSU"),
        (bytes(range(256)), "sha256=QK_y6dLYki5Hr9RkjmlnSXFYeF-9Hahw5xECZr-USIA"),
    ],
)
def test_the_record_hash_is_sha256_in_urlsafe_base64_without_padding(
    data: bytes, expected: str
) -> None:
    assert record_hash(data) == expected


# -- names and files from outside: NotAWheel says why, in a few words ------------------------

GOOD_NAME = "k3_kernels-0.1.0+cu129-py3-none-manylinux_2_28_x86_64.whl"


def zip_bytes(members: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def a_wheel() -> bytes:
    info = "k3_kernels-0.1.0+cu129.dist-info"
    return zip_bytes(
        {
            "k3_kernels/__init__.py": b"",
            f"{info}/METADATA": b"Metadata-Version: 2.1\nName: k3-kernels\nVersion: 0.1.0+cu129\n",
            f"{info}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n",
            f"{info}/RECORD": b"",
        }
    )


def test_a_wheel_name_gives_its_parts() -> None:
    name = WheelName.parse(GOOD_NAME)
    assert (name.project, str(name.version), name.build) == ("k3-kernels", "0.1.0+cu129", ())
    assert [str(t) for t in name.tags] == ["py3-none-manylinux_2_28_x86_64"]
    assert (name.distribution, name.local_label) == ("k3_kernels", "cu129")


@pytest.mark.parametrize(
    "filename",
    [
        GOOD_NAME,
        "k3_kernels-0.1.0-1-cp312-cp312-manylinux_2_28_aarch64.whl",
        "k3_kernels-0.1.0-py3-none-manylinux_2_28_x86_64.manylinux2014_x86_64.whl",
        "k3_kernels-0.1.1.dev1733212345+cu129-cp310-abi3-manylinux_2_28_x86_64.whl",
    ],
)
def test_a_parsed_name_composes_back_to_itself(filename: str) -> None:
    assert WheelName.parse(filename).filename == filename
    assert is_wheel_name(filename)


def test_a_name_is_composed_from_any_spelling_of_the_project() -> None:
    name = WheelName.compose(
        "K3.Kernels",
        Version("0.1.0+cu129"),
        python="py3",
        abi="none",
        platform="manylinux_2_28_x86_64",
    )
    assert name.filename == GOOD_NAME


def test_relabel_retag_and_a_build_tag_change_one_part_each() -> None:
    name = WheelName.parse(GOOD_NAME)
    assert name.relabelled("cu130").filename == (
        "k3_kernels-0.1.0+cu130-py3-none-manylinux_2_28_x86_64.whl"
    )
    assert name.relabelled(None).filename == "k3_kernels-0.1.0-py3-none-manylinux_2_28_x86_64.whl"
    assert name.retagged("manylinux_2_34_x86_64").platforms == ("manylinux_2_34_x86_64",)
    assert name.with_build((2, "")).filename == (
        "k3_kernels-0.1.0+cu129-2-py3-none-manylinux_2_28_x86_64.whl"
    )
    assert name.with_build((2, "")).unversioned == (
        "k3_kernels", "2", "py3", "none", "manylinux_2_28_x86_64"
    )  # fmt: skip


@pytest.mark.parametrize(
    ("filename", "why"),
    [
        ("hostname", "not a .whl file"),
        ("k3_kernels-0.1.0-py3-none-any.WHL", "not a .whl file"),
        ("k3_kernels-0.1.0-py3-none-any.whl.metadata", "not a .whl file"),
        ("k3_kernels-0.1.x-py3-none-any.whl", "not a valid wheel filename (invalid version)"),
        ("k3_kernels-0.1.0-py3-none.whl", "not a valid wheel filename (wrong number of parts)"),
        ("k3__kernels-0.1.0-py3-none-any.whl", "not a valid wheel filename (invalid project name)"),
        (
            "k3_kernels-0.1.0-x1-py3-none-any.whl",
            "not a valid wheel filename (invalid build number)",
        ),
    ],
)
def test_a_name_that_is_not_a_wheels_says_why(filename: str, why: str) -> None:
    with pytest.raises(NotAWheel) as caught:
        WheelName.parse(filename)
    assert str(caught.value) == why
    assert not is_wheel_name(filename)


def test_a_version_that_is_not_pep_440_is_none() -> None:
    assert version_or_none("0.1.0+cu129") == Version("0.1.0+cu129")
    assert version_or_none("0.1.x") is None
    assert version_or_none("") is None


def test_zip_problems_name_a_non_zip_and_a_damaged_member() -> None:
    good = a_wheel()
    assert zip_problem(good) is None
    assert zip_problem(b"host\n") == "not a zip archive"
    assert zip_problem(good[: len(good) // 2]) == "not a zip archive"  # no central directory
    stored = zip_bytes({"k3_kernels/lib.so": b"A" * 64})
    flipped = stored.replace(b"A" * 64, b"A" * 63 + b"B")  # same size, CRC no longer matches
    assert zip_problem(flipped) == "a damaged zip archive (k3_kernels/lib.so does not read back)"
    deflated = zip_bytes({"k3_kernels/lib.so": bytes(range(256)) * 64}, zipfile.ZIP_DEFLATED)
    start = deflated.index(b"k3_kernels/lib.so") + len("k3_kernels/lib.so")
    broken = deflated[:start] + b"\xff" * 32 + deflated[start + 32 :]
    assert str(zip_problem(broken)).startswith("a damaged zip archive (")


@pytest.mark.parametrize(
    ("name", "content", "why"),
    [
        ("hostname", b"host\n", "not a .whl file"),
        (GOOD_NAME, b"host\n", "not a zip archive"),
        (
            GOOD_NAME,
            zip_bytes({"k3_kernels/__init__.py": b""}),
            "has 0 .dist-info directories, not 1",
        ),
        (
            "k3_kernels-0.1.x-py3-none-any.whl",
            a_wheel(),
            "not a valid wheel filename (invalid version)",
        ),
    ],
)
def test_a_file_that_is_not_a_readable_wheel_says_why(
    tmp_path: Path, name: str, content: bytes, why: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(NotAWheel) as caught:
        readable_wheel(path)
    assert str(caught.value) == why


@pytest.mark.parametrize(
    ("where", "why"), [(".", "not a file"), (GOOD_NAME, "no such file or directory")]
)
def test_a_path_that_is_no_file_says_so(tmp_path: Path, where: str, why: str) -> None:
    with pytest.raises(NotAWheel) as caught:
        readable_wheel(tmp_path / where)
    assert str(caught.value) == why


def test_a_readable_wheel_gives_its_name_and_facts(tmp_path: Path) -> None:
    path = tmp_path / GOOD_NAME
    path.write_bytes(a_wheel())
    name, facts = readable_wheel(path)
    assert str(name.version) == facts.metadata_version == "0.1.0+cu129"
