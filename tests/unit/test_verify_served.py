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


def wheel(label: str | None, arch: str) -> PublishedFile:
    version = f"0.1.0+{label}" if label else "0.1.0"
    name = f"k3_kernels-{version}-py3-none-manylinux_2_28_{arch}.whl"
    return PublishedFile(
        filename=name, sha256="0" * 64, size=1, kind="github", destination="github", arch=arch,
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
