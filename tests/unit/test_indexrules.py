"""An index's pages checked whole: duplicates, hashes, missing arches and variants, and links
to files a release lacks."""

from __future__ import annotations

from dataclasses import replace

from release.inspection.findings import Finding
from release.inspection.indexrules import (
    duplicates,
    hash_mismatch,
    listed_wheel,
    missing_arches,
    size_mismatch,
    stray_links,
    unindexed_variants,
)
from release.remote.simple_index import ListedFile

PAGE = "http://index.test/cu129/k3-kernels/"


def listed(name: str, sha256: str | None = "a" * 64) -> ListedFile:
    return ListedFile(
        name=name,
        url=f"http://files.test/{name}",
        sha256=sha256,
        size=None,
        hash_name="sha256" if sha256 else None,
        requires_python=None,
        metadata_sha256=None,
    )


def wheel(version: str, arch: str) -> str:
    return f"k3_kernels-{version}-py3-none-manylinux_2_28_{arch}.whl"


def test_a_filename_listed_twice_with_other_hashes_as_sgl_project_whl_had() -> None:
    name = wheel("0.1.0+cu129", "x86_64")
    files = [listed(name, "a" * 64), listed(name, "b" * 64), listed(name, "a" * 64)]
    files.append(listed(wheel("0.1.0+cu129", "aarch64")))
    assert duplicates(PAGE, files) == [
        Finding(
            rule="duplicate",
            file=name,
            url=PAGE,
            detail=f"listed 3 times with 2 different hashes ({'a' * 12}, {'b' * 12})",
        )
    ]
    same = duplicates(PAGE, [listed(name), listed(name)])
    assert [f.detail for f in same] == ["listed twice, with the same sha256"]


def test_a_listed_hash_that_is_not_the_served_bytes() -> None:
    link = listed(wheel("0.1.0", "x86_64"), "a" * 64)
    assert hash_mismatch(PAGE, link, {"sha256": "a" * 64}) is None
    assert hash_mismatch(PAGE, listed(link.name, None), {"sha256": "b" * 64}) is None  # none
    found = hash_mismatch(PAGE, link, {"sha256": "b" * 64})
    assert found is not None
    assert (found.rule, found.url) == ("hash", link.url)
    assert found.detail == f"{PAGE} says sha256 {'a' * 12}..., the bytes served are {'b' * 12}..."


def test_a_listed_md5_is_held_to_the_md5_of_the_bytes_served() -> None:
    link = replace(listed(wheel("0.1.0", "x86_64"), None), hash_name="md5", digest="c" * 32)
    assert hash_mismatch(PAGE, link, {"sha256": "b" * 64, "md5": "c" * 32}) is None
    assert hash_mismatch(PAGE, link, {"sha256": "b" * 64}) is None  # md5 not read
    found = hash_mismatch(PAGE, link, {"sha256": "b" * 64, "md5": "d" * 32})
    assert found is not None
    assert found.detail == f"{PAGE} says md5 {'c' * 12}..., the bytes served are {'d' * 12}..."


def test_a_listed_size_that_is_not_the_served_bytes() -> None:
    link = replace(listed(wheel("0.1.0", "x86_64")), size=4096)
    assert size_mismatch(PAGE, link, 4096) is None
    assert size_mismatch(PAGE, listed(link.name), 10) is None  # no size listed
    found = size_mismatch(PAGE, link, 10)
    assert found is not None
    assert (found.rule, found.detail) == (
        "hash",
        f"{PAGE} says 4096 bytes, the bytes served are 10",
    )


def wheels_of(*names: str) -> list[object]:
    found = [listed_wheel(name, PAGE) for name in names]
    assert all(found)
    return found  # type: ignore[return-value]


def test_a_partial_upload_lacks_an_arch_its_neighbours_have() -> None:
    wheels = wheels_of(
        wheel("0.1.0", "x86_64"), wheel("0.1.0", "aarch64"),
        wheel("0.2.0", "x86_64"),
        wheel("0.3.0", "x86_64"), wheel("0.3.0", "aarch64"),
    )  # fmt: skip
    found = missing_arches("k3-kernels", wheels)  # type: ignore[arg-type]
    assert [(f.file, f.detail) for f in found] == [
        ("k3-kernels 0.2.0", "no aarch64 wheel, and 0.1.0 and 0.3.0 have one (a partial upload?)")
    ]


def test_the_newest_version_lacking_an_arch_the_previous_had() -> None:
    wheels = wheels_of(
        wheel("0.1.0", "x86_64"), wheel("0.1.0", "aarch64"), wheel("0.2.0", "x86_64")
    )
    found = missing_arches("k3-kernels", wheels)  # type: ignore[arg-type]
    assert [f.detail for f in found] == [
        "no aarch64 wheel, and 0.1.0, the version before, has one (a partial upload?)"
    ]


def test_an_arch_added_later_is_not_missing_from_older_versions() -> None:
    wheels = wheels_of(
        wheel("0.1.0", "x86_64"), wheel("0.2.0", "x86_64"),
        wheel("0.3.0", "x86_64"), wheel("0.3.0", "aarch64"),
    )  # fmt: skip
    assert missing_arches("k3-kernels", wheels) == []  # type: ignore[arg-type]


def test_a_variant_lacking_an_arch_the_other_variant_has() -> None:
    wheels = wheels_of(
        wheel("0.1.0", "x86_64"), wheel("0.1.0", "aarch64"), wheel("0.1.0+cu129", "x86_64")
    )
    found = missing_arches("k3-kernels", wheels)  # type: ignore[arg-type]
    assert [(f.file, f.detail) for f in found] == [
        ("k3-kernels 0.1.0+cu129", "no aarch64 wheel, and 0.1.0 has one (a partial upload?)")
    ]
    # a variant that never ships an arch has chosen not to
    wheels = wheels_of(
        wheel("0.1.0", "x86_64"), wheel("0.1.0", "aarch64"), wheel("0.1.0+cu126", "x86_64"),
        wheel("0.2.0", "x86_64"), wheel("0.2.0", "aarch64"), wheel("0.2.0+cu126", "x86_64"),
    )  # fmt: skip
    assert missing_arches("k3-kernels", wheels) == []  # type: ignore[arg-type]


def test_a_variant_released_but_never_indexed() -> None:
    wheels = wheels_of(
        wheel("0.1.0", "x86_64"), wheel("0.1.0+cu129", "x86_64"),
        wheel("0.2.0", "x86_64"),
        wheel("0.3.0", "x86_64"), wheel("0.3.0+cu129", "x86_64"),
        wheel("0.4.0", "x86_64"),
    )  # fmt: skip
    found = unindexed_variants("k3-kernels", wheels)  # type: ignore[arg-type]
    assert [(f.rule, f.file, f.detail) for f in found] == [
        ("unindexed-variant", "k3-kernels 0.2.0+cu129",
         "0.2.0 has wheels, none of +cu129: listed for versions before and after it "
         "(released, never indexed?)"),
        ("unindexed-variant", "k3-kernels 0.4.0+cu129",
         "0.4.0 has wheels, none of +cu129: listed for 0.3.0+cu129, the version before "
         "(released, never indexed?)"),
    ]  # fmt: skip


def test_a_variant_dropped_long_ago_is_not_unindexed() -> None:
    wheels = wheels_of(
        wheel("0.1.0", "x86_64"), wheel("0.1.0+cu118", "x86_64"),
        wheel("0.2.0", "x86_64"), wheel("0.3.0", "x86_64"),
    )  # fmt: skip
    assert unindexed_variants("k3-kernels", wheels) == []  # type: ignore[arg-type]


def test_a_link_to_a_wheel_of_the_release_that_it_does_not_have() -> None:
    ours = wheel("0.2.0+cu129", "x86_64")
    files = [
        listed(ours),
        listed(wheel("0.2.0+cu129", "aarch64")),
        listed(wheel("0.1.0+cu129", "aarch64")),
    ]
    found = stray_links(PAGE, files, "0.2.0", [ours])
    assert [(f.rule, f.file) for f in found] == [("stray-link", wheel("0.2.0+cu129", "aarch64"))]


def test_a_link_to_another_spelling_of_the_release_s_version_is_a_stray() -> None:
    """pip reads 0.2.0.0 as 0.2.0: a link spelled so was compared as a string, and passed."""
    ours = wheel("0.2.0+cu129", "x86_64")
    spelled = wheel("0.2.0.0+cu129", "x86_64")
    found = stray_links(PAGE, [listed(ours), listed(spelled)], "0.2.0", [ours])
    assert [(f.rule, f.file) for f in found] == [("stray-link", spelled)]
