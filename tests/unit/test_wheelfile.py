"""release.wheelfile: the one RECORD hash, pinned to known digests; what a name or a file
from outside that is not a wheel is refused with; a wheel given a build tag."""

from __future__ import annotations

import hashlib
import io
import struct
import zipfile
import zlib
from pathlib import Path

import pytest
from packaging.tags import Tag
from packaging.utils import parse_wheel_filename
from packaging.version import Version

from release.wheelfile import (
    NotAWheel,
    WheelName,
    identity_problems,
    is_wheel_name,
    readable_wheel,
    record_hash,
    record_problems,
    tag_problems,
    version_or_none,
    wheel_facts,
)
from release.wheelrewrite import with_build_tag
from release.ziparchive import zip_problem
from tests.integration import wheels as integration_wheels


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
    # a build tag numbers the rebuilds of one version: the next version's wheel has none
    assert name.with_build((2, "")).unversioned == name.unversioned == (
        "k3_kernels", "py3", "none", "manylinux_2_28_x86_64"
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
        # packaging takes any tag text; a name goes into commands ({wheel}), paths, pages
        (
            "k3-0.1.0-py3-none-x$(touch${IFS}pwned).whl",
            "not a valid wheel filename (a character no wheel name has: '$')",
        ),
        (
            "k3-0.1.0-py3-none-any;id.whl",
            "not a valid wheel filename (a character no wheel name has: ';')",
        ),
        (
            "k3-0.1.0-py3-none-a`id`.whl",
            "not a valid wheel filename (a character no wheel name has: '`')",
        ),
        (
            "k3-0.1.0-py3-none-\u00e9.whl",
            "not a valid wheel filename (a character no wheel name has: '\u00e9')",
        ),
    ],
)
def test_a_name_that_is_not_a_wheels_says_why(filename: str, why: str) -> None:
    with pytest.raises(NotAWheel) as caught:
        WheelName.parse(filename)
    assert str(caught.value) == why
    assert not is_wheel_name(filename)


def test_a_name_of_more_tags_than_any_wheels_is_refused_before_they_are_multiplied_out() -> None:
    # packaging makes a Tag of each python x abi x platform: 250 of each (4 KB of name)
    # took gigabytes; the name is refused first
    def named(*counts: int) -> str:
        parts = (".".join(f"{p}{n}" for n in range(c)) for p, c in zip("pax", counts, strict=True))
        return "k3-0.1.0-" + "-".join(parts) + ".whl"

    past = named(11, 10, 10)
    for filename in (past, named(250, 250, 250)):  # 1,100 tags; 15.6 million
        with pytest.raises(
            NotAWheel, match=r"^not a valid wheel filename \(\d+ tags, more than 1000\)$"
        ):
            WheelName.parse(filename)
    assert len(WheelName.parse(named(10, 10, 10)).tags) == 1000


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


@pytest.mark.parametrize("method", [zipfile.ZIP_LZMA, zipfile.ZIP_BZIP2])
def test_a_member_whose_compressed_stream_does_not_decode_is_damage(method: int) -> None:
    # an LZMA member's properties that do not decode raised LZMAError, a traceback in audit
    packed = bytearray(zip_bytes({"k3_kernels/lib.so": bytes(range(256)) * 64}, method))
    start = packed.index(b"k3_kernels/lib.so") + len("k3_kernels/lib.so")
    packed[start : start + 9] = b"\x00\x00\x00\x00garba"
    assert str(zip_problem(bytes(packed))).startswith("a damaged zip archive (")


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


# -- a rebuilt wheel as the next build of its name ------------------------------------------


def built_wheel(tmp_path: Path, *, wheel_file: bytes | None = None) -> tuple[str, bytes]:
    """A complete wheel as the integration tests' builder makes it (RECORD with hashes,
    deflated members with fixed dates and modes), its WHEEL file `wheel_file` if given."""
    path = integration_wheels.make_wheel(tmp_path, version="0.1.0+cu129", payload=b"#x\n")
    data = path.read_bytes()
    if wheel_file is None:
        return path.name, data
    info = "k3_kernels-0.1.0+cu129.dist-info"
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = {i.filename: archive.read(i) for i in archive.infolist()}
    members[f"{info}/WHEEL"] = wheel_file
    rows = [
        f"{n},{record_hash(d)},{len(d)}" for n, d in members.items() if not n.endswith("RECORD")
    ]
    members[f"{info}/RECORD"] = ("\n".join([*rows, f"{info}/RECORD,,"]) + "\n").encode()
    return path.name, zip_bytes(members, zipfile.ZIP_DEFLATED)


def test_a_build_tag_changes_the_name_the_wheel_file_and_its_record_row_only(
    tmp_path: Path,
) -> None:
    filename, data = built_wheel(tmp_path)
    name, tagged = with_build_tag(filename, data, 1)
    assert name.filename == "k3_kernels-0.1.0+cu129-1-py3-none-manylinux_2_28_x86_64.whl"
    _, version, build, tags = parse_wheel_filename(name.filename)  # packaging reads it back
    assert (str(version), build) == ("0.1.0+cu129", (1, ""))
    assert tags == WheelName.parse(filename).tags
    info = "k3_kernels-0.1.0+cu129.dist-info"
    with (
        zipfile.ZipFile(io.BytesIO(data)) as before,
        zipfile.ZipFile(io.BytesIO(tagged)) as after,
    ):
        assert after.read(f"{info}/WHEEL") == before.read(f"{info}/WHEEL") + b"Build: 1\n"
        assert record_problems(after, info) == []  # RECORD names WHEEL's new hash and size
        changed = {f"{info}/WHEEL", f"{info}/RECORD"}
        for old, new in zip(before.infolist(), after.infolist(), strict=True):
            assert (new.filename, new.date_time, new.external_attr, new.compress_type) == (
                old.filename, old.date_time, old.external_attr, old.compress_type,
            )  # fmt: skip
            if new.filename not in changed:
                assert after.read(new) == before.read(old)
    facts = wheel_facts(tagged)
    assert identity_problems(name.project, name.version, facts.metadata_name,
                             facts.metadata_version) == []  # fmt: skip
    assert tag_problems(facts.wheel_tags, name.tags) == []


def test_the_same_wheel_and_number_give_the_same_bytes_and_a_new_number_its_line(
    tmp_path: Path,
) -> None:
    filename, data = built_wheel(tmp_path)
    name, tagged = with_build_tag(filename, data, 1)
    assert with_build_tag(filename, data, 1) == (name, tagged)
    second, again = with_build_tag(name.filename, tagged, 2)
    assert second.filename == "k3_kernels-0.1.0+cu129-2-py3-none-manylinux_2_28_x86_64.whl"
    wheel = zipfile.ZipFile(io.BytesIO(again)).read("k3_kernels-0.1.0+cu129.dist-info/WHEEL")
    assert wheel.count(b"Build:") == 1
    assert wheel.endswith(b"Build: 2\n")
    assert hashlib.sha256(again).digest() != hashlib.sha256(tagged).digest()


def test_a_build_line_takes_the_wheel_files_own_line_ending(tmp_path: Path) -> None:
    crlf = (
        b"Wheel-Version: 1.0\r\nRoot-Is-Purelib: false\r\nTag: py3-none-manylinux_2_28_x86_64\r\n"
    )
    filename, data = built_wheel(tmp_path, wheel_file=crlf)
    _, tagged = with_build_tag(filename, data, 3)
    wheel = zipfile.ZipFile(io.BytesIO(tagged)).read("k3_kernels-0.1.0+cu129.dist-info/WHEEL")
    assert wheel == crlf + b"Build: 3\r\n"


@pytest.mark.parametrize(
    ("members", "why"),
    [
        ({"a.dist-info/WHEEL": b"", "a.dist-info/RECORD": b"", "a.dist-info/RECORD.jws": b"{}"},
         "its RECORD is signed: a new build tag would void the signature"),
        ({"a.dist-info/RECORD": b""}, "has no a.dist-info/WHEEL"),
        ({"x.py": b""}, "has 0 .dist-info directories, not 1"),
    ],
)  # fmt: skip
def test_a_wheel_that_cannot_take_a_build_tag_says_why(members: dict[str, bytes], why: str) -> None:
    with pytest.raises(NotAWheel) as caught:
        with_build_tag(GOOD_NAME, zip_bytes(members), 1)
    assert str(caught.value) == why
    with pytest.raises(NotAWheel, match="not a zip archive"):
        with_build_tag(GOOD_NAME, b"not a zip", 1)


def same_member_zip(names: list[str], data: bytes) -> bytes:
    """A zip whose members each hold `data`, deflated once (zipfile would deflate it again
    for each member: seconds for the hundreds of MiB a bomb needs)."""
    packer = zlib.compressobj(6, zlib.DEFLATED, -15)
    deflated = packer.compress(data) + packer.flush()
    crc, out, directory = zlib.crc32(data), io.BytesIO(), b""
    for name in names:
        offset, encoded = out.tell(), name.encode()
        sizes = struct.pack("<III", crc, len(deflated), len(data))
        out.write(struct.pack("<IHHHHH", 0x04034B50, 20, 0, 8, 0, 0) + sizes)
        out.write(struct.pack("<HH", len(encoded), 0) + encoded + deflated)
        directory += struct.pack("<IHHHHHH", 0x02014B50, 20, 20, 0, 8, 0, 0) + sizes
        directory += struct.pack("<HHHHHII", len(encoded), 0, 0, 0, 0, 0, offset) + encoded
    start = out.tell()
    out.write(directory)
    count = len(names)
    out.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, len(directory), start, 0))
    return out.getvalue()


def test_members_each_under_the_bound_that_inflate_a_thousandfold_together_are_a_bomb() -> None:
    # 200 members of 60 MiB in a 12 MB wheel took minutes to read back, each one under the
    # member's bound (64 MiB)
    zeros = bytes(60 * 2**20)
    bomb = same_member_zip([f"k3/part{n}.so" for n in range(5)], zeros)
    with zipfile.ZipFile(io.BytesIO(bomb)) as archive:  # a zip as zipfile reads one
        assert [i.file_size for i in archive.infolist()] == [len(zeros)] * 5
    problem = zip_problem(bomb)
    assert problem is not None
    assert problem.startswith(f"a zip archive whose members inflate to {5 * len(zeros)} bytes, ")
    assert problem.endswith("times their stored size (a zip bomb)")
    assert zip_problem(same_member_zip(["k3/one.so"], zeros)) is None  # one alone is no bomb


def test_a_zip_that_claims_more_members_than_a_wheel_may_hold_is_refused_unread() -> None:
    # ZIP64's end record, claiming 300,000 entries: zipfile would read them all first
    zip64 = (
        b"PK\x06\x06" + (44).to_bytes(8, "little") + bytes(4) + bytes(8) + bytes(8)
        + (300_000).to_bytes(8, "little") + bytes(16)
    )  # fmt: skip
    locator = b"PK\x06\x07" + bytes(16)
    plain = b"PK\x05\x06" + bytes(4) + b"\xff\xff" + b"\xff\xff" + bytes(10)
    assert zip_problem(zip64 + locator + plain) == (
        "a zip archive of 300000 members, more than the 200000 a wheel may hold"
    )


def test_a_zip_whose_directory_holds_more_members_than_its_end_record_claims_is_refused() -> None:
    # zipfile reads the directory by its size, not the count the end record claims: 3
    # claimed over 1.5 million entries took 835 MB
    entry = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0, 0, 0, 0, 1, *[0] * 6)
    directory = b"".join(entry + bytes([97 + n % 26]) for n in range(200_001))

    def claiming(count: int, size: int) -> bytes:
        return directory + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, size, 0, 0)

    assert zip_problem(claiming(3, len(directory))) == (
        "a zip archive whose central directory holds more than 200000 members "
        "(its end record says 3), more than a wheel may hold"
    )
    assert zip_problem(claiming(3, 65 * 2**20)) == (
        f"a zip archive whose central directory is {65 * 2**20} bytes, "
        "more than the 64 MiB a wheel's may be"
    )
    below = directory[: len(entry + b"a") * 200_000]  # as many as a wheel may hold
    tail = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 3, 3, len(below), 0, 0)
    problem = zip_problem(below + tail)  # read on (each name is there many times)
    assert problem is not None
    assert "central directory" not in problem


@pytest.mark.parametrize("member", ["../../../lib/evil.so", "/lib/evil.so", "a/../../b.py"])
def test_a_member_named_outside_the_archive_is_damage(member: str) -> None:
    data = zip_bytes({"k3/__init__.py": b"", member: b"x"})
    assert zip_problem(data) == f"a zip archive whose member {member!r} lies outside it"


def test_a_dist_info_file_past_its_limit_is_not_read_whole() -> None:
    info = "k3-0.1.0.dist-info"
    bomb = zip_bytes(
        {f"{info}/METADATA": b"Name: k3\n" + bytes(9 * 2**20), f"{info}/WHEEL": b""},
        zipfile.ZIP_DEFLATED,
    )
    assert len(bomb) < 2**20
    facts = wheel_facts(bomb)  # parsed as headers, it would take ten times that in memory
    assert facts.unreadable == f"not a readable zip file ({info}/METADATA is over 8 MiB)"
    with zipfile.ZipFile(io.BytesIO(bomb)) as archive:
        assert record_problems(archive, info) == [f"{info}/RECORD is missing"]


@pytest.mark.parametrize("member", ["METADATA", "WHEEL"])
def test_a_dist_info_file_of_more_header_lines_than_any_real_one_is_not_parsed(
    member: str,
) -> None:
    # 2 million empty headers in 8 MiB took 530 MB to parse, in each of audit's workers
    info = "k3-0.1.0.dist-info"
    many = b"Name: k3\n" + b"X:\n" * 10_001
    members = {f"{info}/METADATA": b"Name: k3\nVersion: 0.1.0\n", f"{info}/WHEEL": b""}
    facts = wheel_facts(zip_bytes({**members, f"{info}/{member}": many}, zipfile.ZIP_DEFLATED))
    assert facts.unreadable == f"its {member} has more than 10000 header lines"
    below = b"Name: k3\nVersion: 0.1.0\n" + b"Classifier: x\n" * 9_000
    assert wheel_facts(zip_bytes({**members, f"{info}/METADATA": below})).unreadable is None


@pytest.mark.parametrize("end", [b"\r", b"\r\n"])
def test_header_lines_are_counted_at_any_line_end_the_parser_splits_at(end: bytes) -> None:
    # a CR alone ends a header line for the email parser: 2.8 million of them in 8 MiB
    # passed a cap that counted LF, and took 500 MB to parse
    info = "k3-0.1.0.dist-info"
    many = end.join([b"Name: k3", b"Version: 0.1.0", *[b"X:"] * 10_001]) + end
    members = {f"{info}/METADATA": many, f"{info}/WHEEL": b""}
    facts = wheel_facts(zip_bytes(members, zipfile.ZIP_DEFLATED))
    assert facts.unreadable == "its METADATA has more than 10000 header lines"
    # an old wheel's README folded into its Description header: one header, however long
    folded = b"Name: k3\nVersion: 0.1.0\nDescription: k3\n" + b"        |a line\n" * 20_000
    assert wheel_facts(zip_bytes({**members, f"{info}/METADATA": folded})).unreadable is None
    crlf = b"Name: k3\r\nVersion: 0.1.0\r\n\r\n" + b"a README line\r\n" * 20_000
    assert wheel_facts(zip_bytes({**members, f"{info}/METADATA": crlf})).unreadable is None


def test_the_header_line_caps_count_the_last_line_and_folded_lines() -> None:
    """10,001 header lines before the blank line passed (the last line's end is the blank
    line's, and was not counted); 2.8 million folded lines were not counted at all and
    took 340 MB a wheel to parse."""
    info = "k3-0.1.0.dist-info"

    def unreadable(metadata: bytes) -> str | None:
        members = {f"{info}/METADATA": metadata, f"{info}/WHEEL": b""}
        return wheel_facts(zip_bytes(members, zipfile.ZIP_DEFLATED)).unreadable

    head = [b"Name: k3", b"Version: 0.1.0"]
    assert unreadable(b"\n".join([*head, *[b"X:"] * 9_998]) + b"\n\nbody") is None
    assert unreadable(b"\n".join([*head, *[b"X:"] * 9_999]) + b"\n\nbody") == (
        "its METADATA has more than 10000 header lines"
    )
    readme = b"\n".join([*head, b"Description: k3", *[b"\t|a README line"] * 100_000])
    assert unreadable(readme + b"\n\nbody") is None
    assert unreadable(readme + b"\n more\n\nbody") == (
        "its METADATA has more than 100000 lines folded into its headers"
    )


def test_a_metadata_value_that_is_not_text_is_read_as_text() -> None:
    info = "k3-0.1.0.dist-info"
    facts = wheel_facts(zip_bytes({f"{info}/METADATA": b"Name: k3\nVersion: \xff\xfe\n"}))
    assert facts.metadata_version == "\ufffd\ufffd"


@pytest.mark.parametrize("row", [b"a\n", b"k3/absent.py,sha256=x,1\n"])
def test_a_record_of_more_rows_than_a_wheel_has_members_is_not_read_on(row: bytes) -> None:
    # 64 MiB of one-field rows (each a problem held) took 3.8 GB, 7 million rows listing
    # absent files 2.5 GB
    info = "k3-0.1.0.dist-info"
    many = zip_bytes({f"{info}/RECORD": row * 200_001}, zipfile.ZIP_DEFLATED)
    with zipfile.ZipFile(io.BytesIO(many)) as archive:
        assert record_problems(archive, info) == [f"{info}/RECORD has more than 200000 rows"]
    below = zip_bytes({f"{info}/RECORD": b"a\n" * 30}, zipfile.ZIP_DEFLATED)
    with zipfile.ZipFile(io.BytesIO(below)) as archive:
        found = record_problems(archive, info)
    assert found[0] == "RECORD row ['a'] does not have 3 fields"
    assert found[-1] == "and 11 more RECORD problems"  # RECORD itself is not listed


def test_wheel_tags_that_differ_are_shown_cut_short() -> None:
    """A WHEEL whose one Tag line held 11 MB was printed whole, in the finding, the error
    line and the table."""
    long = "py3-none-" + "x" * 1_000_000
    (problem,) = tag_problems([long], frozenset({Tag("py3", "none", "any")}))
    assert len(problem) < 500
    assert problem.endswith("differ from the filename's ['py3-none-any']")


@pytest.mark.parametrize("record", [b"," * 2**20 + b"\n", b'"\n",' * 5_000 + b"\n"])
def test_a_record_row_longer_than_any_real_one_is_not_split(record: bytes) -> None:
    # one line of 67 million commas, under 64 MiB, took 866 MB split into empty fields; a
    # row of quoted line breaks, each line short, is as long
    info = "k3-0.1.0.dist-info"
    with zipfile.ZipFile(io.BytesIO(zip_bytes({f"{info}/RECORD": record}, 8))) as archive:
        assert record_problems(archive, info) == [
            f"{info}/RECORD is not CSV (a row of more than 16384 characters)"
        ]
    path = f"k3/{'d' * 250}/" * 16 + "x.py"  # a path of 4 KiB is a row
    row = f"{path},sha256=x,1\n".encode()
    with zipfile.ZipFile(io.BytesIO(zip_bytes({f"{info}/RECORD": row}))) as archive:
        found = record_problems(archive, info)
    assert f"RECORD lists {path}, which is not in the wheel" in found
