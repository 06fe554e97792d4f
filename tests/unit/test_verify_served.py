"""verify's second look, its pure part: every variant and arch the matrix names has its wheel
in the release (the rest runs against real servers: tests/integration/test_verify_served.py)."""

from __future__ import annotations

from pathlib import Path

from release.matrix import load_matrix
from release.records.published import Published, PublishedFile
from release.verify.served import missing_variants

MATRIX = load_matrix(
    Path(__file__).parent.parent / "data" / "matrix" / "good" / "shipped-shape.yaml"
)


def wheel(label: str | None, arch: str, to: str = "github") -> PublishedFile:
    """A published wheel: the default variant on PyPI, a labelled one at `to`."""
    version = f"0.1.0+{label}" if label else "0.1.0"
    name = f"k3_kernels-{version}-py3-none-manylinux_2_28_{arch}.whl"
    kind, destination = ("pypi", "pypi") if label is None else ("github", to)
    return PublishedFile(
        filename=name, sha256="0" * 64, size=1, kind=kind, destination=destination, arch=arch,
        local_label=label, url=f"http://files.test/{name}", index_url=None,
    )  # fmt: skip


def test_a_variant_the_matrix_names_and_the_release_lacks() -> None:
    files = (wheel(None, "x86_64"), wheel(None, "aarch64"), wheel("cu129", "x86_64"))
    release = Published(project="k3-kernels", version="0.1.0", files=files)
    (missing,) = missing_variants(release, MATRIX)
    assert (missing.check, missing.ok) == ("missing-variant", False)
    assert missing.subject == "k3-kernels 0.1.0 +cu129 aarch64"
    assert missing.detail == (
        "shipped-shape.yaml names +cu129 for aarch64; the release has no such wheel, so no "
        "index lists one"
    )
    whole = Published(
        project="k3-kernels", version="0.1.0", files=(*files, wheel("cu129", "aarch64"))
    )
    assert missing_variants(whole, MATRIX) == []
    assert missing_variants(release, None) == []


def test_a_destination_the_release_sent_nothing_to_holds_it_to_nothing() -> None:
    """`publish --only github`: PyPI's default variant is not this record's to check; one
    arch of what went to GitHub missing still is."""
    github_only = Published(
        project="k3-kernels", version="0.1.0", files=(wheel("cu129", "x86_64"),)
    )
    assert [c.subject for c in missing_variants(github_only, MATRIX)] == [
        "k3-kernels 0.1.0 +cu129 aarch64"
    ]


def test_each_copy_of_a_cell_is_a_variant_the_release_must_have() -> None:
    """sgl-project's layout: CUDA 13.0 plain and +cu130 (one build, two places), 12.9
    +cu129: a release without the +cu130 copies misses them."""
    sgl = load_matrix(Path(__file__).parent.parent / "data" / "matrix" / "good" / "sgl-layout.yaml")
    plain_and_cu129 = tuple(
        wheel(label, arch, "whl") for label in (None, "cu129") for arch in ARCHES
    )
    release = Published(project="k3-kernels", version="0.1.0", files=plain_and_cu129)
    assert [c.subject for c in missing_variants(release, sgl)] == [
        "k3-kernels 0.1.0 +cu130 aarch64", "k3-kernels 0.1.0 +cu130 x86_64",
    ]  # fmt: skip
    whole = (*plain_and_cu129, *(wheel("cu130", arch, "whl") for arch in ARCHES))
    assert (
        missing_variants(Published(project="k3-kernels", version="0.1.0", files=whole), sgl) == []
    )


ARCHES = ("x86_64", "aarch64")
