"""release.init.torchindex: the torch `release init` pins, from an index's torch page."""

from __future__ import annotations

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from release.init.torchindex import newest_allowed, torch_releases
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
