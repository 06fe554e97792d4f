"""release.downstream.requirement_files: the pin files of each variant, and the install
commands `release pins` prints for them."""

from __future__ import annotations

from release.downstream.requirement_files import install_lines, pin_files
from release.records.published import Published, PublishedFile

SHA = "c" * 64


def wheel(label: str | None, arch: str, index_url: str | None) -> PublishedFile:
    version = f"0.1.0+{label}" if label else "0.1.0"
    filename = f"k3_kernels-{version}-py3-none-manylinux_2_28_{arch}.whl"
    return PublishedFile(
        filename=filename, sha256=SHA, size=1, kind="github" if label else "pypi",
        destination="d", arch=arch, local_label=label,
        url=f"https://files.example/{filename}", index_url=index_url,
    )  # fmt: skip


def test_a_variant_no_index_lists_is_installed_from_its_url_pins_not_an_index_of_none() -> None:
    published = Published(
        project="k3-kernels",
        version="0.1.0",
        files=(
            wheel(None, "x86_64", "https://pypi.org/simple/"),
            wheel("cu129", "x86_64", "https://k3.example/cu129/"),
            wheel("cu130", "x86_64", None),
            wheel("cu130", "aarch64", None),
        ),
    )
    lines = install_lines(published)
    assert not [line for line in lines if "None" in line]
    assert "pip install -r cu130-urls.txt" in lines
    assert "uv pip install -r cu130-urls.txt" in lines
    assert (
        "pip install k3-kernels==0.1.0+cu129 --index-url https://k3.example/cu129/ "
        "--extra-index-url https://pypi.org/simple/"
    ) in lines
    urls = {f.name: f.text for f in pin_files(published)}["cu130-urls.txt"]
    assert urls.count("#sha256=") == 2  # the file those lines name pins both platforms
