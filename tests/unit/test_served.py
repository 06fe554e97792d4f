"""A wheel inspected from its bytes alone (what verify and audit run): small real wheels
(tests/integration/wheels.py) holding real ELF files (tests/data/elf)."""

from __future__ import annotations

import zipfile
from pathlib import Path

from release.inspection.fatbin import FatbinContents
from release.inspection.served import inspect_served
from tests.integration.wheels import make_wheel

ELF = Path(__file__).parent.parent / "data" / "elf"
URL = "http://files.test/"


def rules(path: Path, **kwargs: object) -> list[tuple[str, str]]:
    served = inspect_served(path.name, path, url=URL + path.name, **kwargs)  # type: ignore[arg-type]
    assert all(f.file == path.name and f.url == URL + path.name for f in served.findings)
    return [(f.rule, f.detail) for f in served.findings]


def test_a_clean_wheel_has_no_finding_and_says_what_ran(tmp_path: Path) -> None:
    library = (ELF / "x86_64-glibc2.28.so").read_bytes()
    wheel = make_wheel(tmp_path, members={"k3_kernels/libk3_host.so": library})
    served = inspect_served(wheel.name, wheel, url=URL)
    assert served.findings == ()
    assert served.checked == {"archive", "filename", "manylinux", "cuda-major", "torch"}
    same = inspect_served(wheel.name, wheel.read_bytes(), url=URL)
    assert same.findings == ()
    assert same.checked == served.checked


def test_a_wheel_needing_glibc_2_34_under_a_manylinux_2_31_tag(tmp_path: Path) -> None:
    library = (ELF / "x86_64-glibc2.34.so").read_bytes()
    wheel = make_wheel(
        tmp_path, platform="manylinux_2_31_x86_64", members={"k3_kernels/_C.so": library}
    )
    assert rules(wheel) == [
        ("manylinux", "k3_kernels/_C.so needs GLIBC_2.34; manylinux_2_31_x86_64 allows at most "
         "GLIBC_2.31")
    ]  # fmt: skip


def test_a_cu130_wheel_needing_libcudart_12(tmp_path: Path) -> None:
    library = (ELF / "x86_64-needs-cudart.so").read_bytes()
    wheel = make_wheel(tmp_path, version="0.1.0+cu130", members={"k3_kernels/_C.so": library})
    assert (
        "cuda-major",
        "k3_kernels/_C.so needs libcudart.so.12; the +cu130 label says CUDA 13",
    ) in rules(wheel)
    labelled_right = make_wheel(
        tmp_path / "ok", version="0.1.0+cu129", members={"k3_kernels/_C.so": library}
    )
    assert [r for r, _ in rules(labelled_right)] == []
    assert [r for r, _ in rules(labelled_right, cell_major=13)] == ["cuda-major"]


def test_filename_and_metadata_versions_that_disagree(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, version="0.1.0", metadata_version="0.1.0.post1")
    assert rules(wheel) == [
        ("filename", "METADATA Version is '0.1.0.post1', the filename says 0.1.0")
    ]


def test_an_aarch64_library_in_an_x86_64_wheel(tmp_path: Path) -> None:
    library = (ELF / "aarch64-glibc2.28.so").read_bytes()
    wheel = make_wheel(tmp_path, members={"k3_kernels/libk3_host.so": library})
    assert rules(wheel) == [
        ("manylinux", "k3_kernels/libk3_host.so is built for EM_AARCH64, the wheel's platform "
         "is x86_64")
    ]  # fmt: skip


def test_what_is_not_a_wheel_or_is_damaged(tmp_path: Path) -> None:
    junk = tmp_path / "k3_kernels-0.1.0-py3-none-any.whl"
    junk.write_bytes(b"<html>not found</html>")
    assert rules(junk) == [("archive", "the file is not a zip archive")]
    misnamed = tmp_path / "k3_kernels.whl"
    misnamed.write_bytes(b"")
    assert [r for r, _ in rules(misnamed)] == ["archive"]
    wheel = make_wheel(tmp_path / "w")
    with zipfile.ZipFile(wheel, "a") as archive:
        archive.writestr("k3_kernels/extra.py", b"not in RECORD")
    assert rules(wheel) == [("archive", "k3_kernels/extra.py is in the wheel but not in RECORD")]


def test_device_code_that_cuobjdump_cannot_read(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, members={"k3_kernels/device/k.fatbin": b"\x50\xed\x55\xba"})

    def unreadable(name: str, path: Path) -> FatbinContents:
        return FatbinContents(sms=(), ptx=(), error="cuobjdump cannot read it: bad header")

    def listed(name: str, path: Path) -> FatbinContents:
        return FatbinContents(sms=("90", "100"), ptx=("100",))

    served = inspect_served(wheel.name, wheel, url=URL, list_fatbin=unreadable, list_elf=unreadable)
    assert [(f.rule, f.detail) for f in served.findings] == [
        ("device-code", "k3_kernels/device/k.fatbin: cuobjdump cannot read it: bad header")
    ]
    ok = inspect_served(wheel.name, wheel, url=URL, list_fatbin=listed, list_elf=listed)
    assert ok.findings == ()
    assert ok.device_listed
    assert (ok.sms, ok.ptx) == (("90", "100"), ("100",))
    assert "device-code" in ok.checked


def test_a_requires_dist_line_pip_refuses(tmp_path: Path) -> None:
    """A number of more digits than int() reads passed packaging's parse and ended the audit
    in a ValueError; a line pip refuses is an archive finding, not a wheel that requires
    nothing."""
    line = "torch>=2." + "9" * 4400
    wheel = make_wheel(tmp_path, requires_dist=[line, "numpy"])
    ((rule, detail),) = rules(wheel)
    assert rule == "archive"
    assert detail.startswith("METADATA's Requires-Dist 'torch>=2.999")
    assert detail.endswith("is not PEP 508: pip refuses the wheel")
    assert rules(make_wheel(tmp_path / "ok", requires_dist=["torch>=2.11", "numpy"])) == []
