"""release.init.torchindex: the torch `release init` pins, from an index's torch page."""

from __future__ import annotations

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from release.init.torchindex import excluded_by, newest_allowed, torch_releases
from release.pep508 import can_meet_both
from release.remote.simple_index import ListedFile


def listed(name: str, *, yanked: bool = False) -> ListedFile:
    return ListedFile(
        name=name,
        url=f"https://files.example/{name}",
        sha256=None,
        size=None,
        hash_name=None,
        requires_python=None,
        metadata_sha256=None,
        yanked=yanked,
    )


PAGE = {
    f.name: f
    for f in (
        listed("torch-2.10.0-cp310-cp310-manylinux_2_28_x86_64.whl"),
        listed("torch-2.10.0-cp312-cp312-manylinux_2_28_x86_64.whl"),
        listed("torch-2.11.0-cp311-cp311-manylinux_2_28_aarch64.whl"),  # another arch only
        listed("torch-2.12.0-cp311-cp311-manylinux_2_28_x86_64.whl", yanked=True),
        listed("torch-2.13.0rc1-cp311-cp311-manylinux_2_28_x86_64.whl"),
        listed("torch-2.9.1+cu129-cp311-cp311-manylinux_2_28_x86_64.whl"),  # PyTorch's index
        listed("torch-2.10.0-cp311-none-macosx_11_0_arm64.whl"),
        listed("torch-2.10.0.tar.gz"),
    )
}


def test_releases_with_a_linux_wheel_of_the_arch_and_their_pythons() -> None:
    releases = torch_releases(PAGE, "x86_64")
    assert sorted(str(v) for v in releases) == ["2.10.0", "2.13.0rc1", "2.9.1"]
    assert releases[Version("2.10.0")].pythons == ("3.10", "3.12")
    assert Version("2.11.0") in torch_releases(PAGE, "aarch64")


def test_the_newest_final_release_the_requirement_allows() -> None:
    releases = torch_releases(PAGE, "x86_64")
    chosen = newest_allowed(releases, SpecifierSet(""))
    assert chosen is not None
    assert str(chosen.version) == "2.10.0"  # not the yanked 2.12.0, not 2.13.0rc1
    older = newest_allowed(releases, SpecifierSet("<2.10"))
    assert older is not None
    assert str(older.version) == "2.9.1"  # `torch==2.9.1` installs 2.9.1+cu129 there
    assert newest_allowed(releases, SpecifierSet(">=2.14")) is None


@pytest.mark.parametrize(
    ("first", "second", "room"),
    [
        (">=77.0.3", ">=62,<75", False),  # torch 2.13.0's setuptools beside SageAttention's
        ("<82", ">=62,<75", True),  # torch 2.11.0's
        ("", ">=62,<75", True),  # unversioned
        ("==2.13.*", ">=2.13.1", True),
        ("==2.13.*", ">=2.14", False),
        ("~=1.4.5", "<1.4.5", False),
        (">75", "<=75", False),
        (">74.5", "<75", True),  # room only just below a bound
        ("!=75", "==75", False),
        (">=1.0", "<1.0", False),
        ("===weird", "<1", True),  # arbitrary equality is not judged
        (">1!2.0", "<1!2.1", True),  # room of an epoch's own
        (">=1!2.0", "<3", False),  # every 1!X is after every 0!Y
    ],
)
def test_whether_some_release_meets_both_specifiers(first: str, second: str, room: bool) -> None:
    assert can_meet_both(SpecifierSet(first), SpecifierSet(second)) is room


def test_a_torch_requirement_that_excludes_a_build_requirement_is_named_with_its_place() -> None:
    torch_requires = [Requirement("filelock"), Requirement("setuptools>=77.0.3")]
    build = [(Requirement("Setuptools<75,>=62"), "pyproject.toml:3"), (Requirement("wheel"), "x")]
    assert excluded_by(torch_requires, build) == (
        "it requires setuptools>=77.0.3, which Setuptools<75,>=62 (pyproject.toml:3) excludes"
    )
    assert excluded_by([Requirement("setuptools<82")], build) is None
    assert excluded_by(torch_requires, []) is None
