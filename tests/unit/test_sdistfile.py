"""What the release's sdist must be (release.records.sdistfile, issue 49: F6, F8): a gzip'd
tar of files and directories under one base directory, its PKG-INFO naming the release. Each
way out is a problem line naming the file; any bytes give problems, never an exception."""

from __future__ import annotations

import gzip
import io
import tarfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

from release.building.sdist import normalised
from release.records.sdistfile import SHOWN_PROBLEMS, sdist_archive_problems

NAME = "k3_kernels-0.1.0.tar.gz"
BASE = "k3_kernels-0.1.0"
PKG_INFO = b"Metadata-Version: 2.4\nName: k3-kernels\nVersion: 0.1.0\n"
EPOCH = 1_700_000_000


def sdist(members: list[tuple[str, bytes]], *, link: str | None = None) -> bytes:
    """A .tar.gz holding `members` (name, data) as they are named, and a symlink `link` to
    /etc where given."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if link is not None:
            info = tarfile.TarInfo(link)
            info.type, info.linkname = tarfile.SYMTYPE, "/etc"
            tar.addfile(info)
    return raw.getvalue()


GOOD = [(f"{BASE}/PKG-INFO", PKG_INFO), (f"{BASE}/src/k3.py", b"x = 1\n")]


def problems(data: bytes) -> list[str]:
    return sdist_archive_problems(data, NAME, "k3-kernels", "0.1.0")


def test_the_releases_sdist_as_build_writes_it_has_no_problem() -> None:
    assert problems(normalised(sdist(GOOD), EPOCH)) == []


@pytest.mark.parametrize(
    "data",
    [b"k3 kernels\n", gzip.compress(b"not a tar"), sdist(GOOD)[:40], b""],
    ids=["plain", "gzip-not-tar", "cut-short", "empty"],
)
def test_what_is_not_a_gzipped_tar_is_named(data: bytes) -> None:
    (problem,) = problems(data)
    assert problem.startswith(f"{NAME}: not a gzip'd tar archive (")


def test_a_tar_that_is_not_gzipped_is_refused() -> None:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo(f"{BASE}/PKG-INFO")
        info.size = len(PKG_INFO)
        tar.addfile(info, io.BytesIO(PKG_INFO))
    (problem,) = problems(raw.getvalue())
    assert problem.startswith(f"{NAME}: not a gzip'd tar archive (")


@pytest.mark.parametrize(
    ("member", "shown"),
    [
        (f"{BASE}/../../x", f"'{BASE}/../../x' is outside {BASE}/"),
        ("/etc/cron.d/x", f"'/etc/cron.d/x' is outside {BASE}/"),
        ("other-0.1.0/x.py", f"'other-0.1.0/x.py' is outside {BASE}/"),
        (f"{BASE}/a/../../{BASE}/b", f"'{BASE}/a/../../{BASE}/b' is outside {BASE}/"),
    ],
    ids=["traversal", "absolute", "other-base", "round-trip"],
)
def test_a_member_outside_the_base_directory_is_named(member: str, shown: str) -> None:
    assert problems(sdist([*GOOD, (member, b"x")])) == [f"{NAME}: member {shown}"]


def test_a_link_is_refused() -> None:
    assert problems(sdist(GOOD, link=f"{BASE}/etc")) == [
        f"{NAME}: member '{BASE}/etc' is a link or a device, not a file or a directory"
    ]


def test_another_projects_pkg_info_is_named() -> None:
    other = b"Metadata-Version: 2.4\nName: requests\nVersion: 9.9\n"
    assert problems(sdist([(f"{BASE}/PKG-INFO", other)])) == [
        f"{NAME}: PKG-INFO Name is 'requests', the release's is k3-kernels",
        f"{NAME}: PKG-INFO Version is '9.9', the release is 0.1.0",
    ]


def test_a_second_pkg_info_is_refused() -> None:
    other = b"Metadata-Version: 2.4\nName: requests\nVersion: 0.1.0\n"
    assert problems(sdist([*GOOD, (f"{BASE}/PKG-INFO", other)])) == [
        f"{NAME}: member '{BASE}/PKG-INFO' is there 2 times"
    ]


def test_no_pkg_info_in_the_base_directory_is_named() -> None:
    assert problems(sdist([("PKG-INFO", PKG_INFO)])) == [
        f"{NAME}: member 'PKG-INFO' is outside {BASE}/",
        f"{NAME}: no {BASE}/PKG-INFO (PEP 625: one top directory {BASE}/)",
    ]


def test_many_problems_are_cut_to_a_few() -> None:
    many = [(f"/x{i}", b"") for i in range(100)]
    assert len(problems(sdist(many))) == SHOWN_PROBLEMS


@given(st.binary(max_size=2000))
def test_any_bytes_give_problems_not_an_exception(data: bytes) -> None:
    for problem in problems(data):
        assert problem.startswith(f"{NAME}: ")
        assert "\n" not in problem


@given(st.lists(st.text(min_size=1, max_size=40), max_size=5))
def test_any_member_names_give_problems_not_an_exception(names: list[str]) -> None:
    members = [(name, b"x") for name in names if "\0" not in name]
    try:
        data = sdist([*GOOD, *members])
    except (ValueError, UnicodeError):  # tarfile cannot write every name
        return
    for problem in problems(data):
        assert problem.startswith(f"{NAME}: ")


def test_pkg_info_without_metadata_version_is_named() -> None:
    bare = b"Name: k3-kernels\nVersion: 0.1.0\n"  # twine raises on it
    assert problems(sdist([(f"{BASE}/PKG-INFO", bare)])) == [
        f"{NAME}: PKG-INFO has no Metadata-Version"
    ]


@pytest.mark.parametrize(
    "name",
    [
        f"{BASE}/src/ok.py\nsetup.py",  # a listing shows two members
        f"{BASE}/src/\x1b[2Kk3.py",  # an escape that erases the terminal's line
        f"{BASE}/src/k3\u202eyp.exe",  # right-to-left override: shown as k3exe.py
        f"{BASE}/src/" + b"k3\xff.py".decode("utf-8", "surrogateescape"),  # not UTF-8
    ],
    ids=["newline", "escape", "bidi-override", "not-utf8"],
)
def test_a_member_named_unprintably_is_refused(name: str) -> None:
    (problem,) = problems(sdist([*GOOD, (name, b"x")]))
    assert problem == (
        f"{NAME}: member {name[:120]!r}: its name holds a control or format character or a "
        "byte that is not UTF-8, which a listing shows as something else or not at all"
    )
    assert problems(sdist([*GOOD, (f"{BASE}/src/k3 kernel é.py", b"x")])) == []
