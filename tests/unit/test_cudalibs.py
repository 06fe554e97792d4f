"""The CUDA a wheel's shared objects link, against its label, each other and its torch."""

from __future__ import annotations

from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

from release.inspection.cudalibs import (
    TorchCudaAnswer,
    cuda_needs,
    cuda_problems,
    label_cuda_major,
    links_torch,
    torch_problems,
    torch_requirements,
)
from release.inspection.elffacts import ElfFacts, read_member

ELF = Path(__file__).parent.parent / "data" / "elf"


def lib(member: str, *needed: str) -> ElfFacts:
    return ElfFacts(member=member, machine="EM_X86_64", needed=needed)


def test_the_cuda_libraries_whose_soname_is_the_toolkits_major() -> None:
    real = read_member("k/_C.so", (ELF / "x86_64-needs-cudart.so").read_bytes())
    assert cuda_needs([real]) == {"k/_C.so": {"libcudart.so.12": 12}}
    mixed = lib("k/x.so", "libcublasLt.so.13", "libnvrtc.so.12", "libcufft.so.11", "libc.so.6")
    assert cuda_needs([mixed]) == {"k/x.so": {"libcublasLt.so.13": 13, "libnvrtc.so.12": 12}}


def test_a_local_label_names_a_cuda_major() -> None:
    assert label_cuda_major("cu129") == 12
    assert label_cuda_major("cu130") == 13
    assert label_cuda_major("cu130.torch211") == 13
    assert label_cuda_major("cpu") is None
    assert label_cuda_major(None) is None


def test_a_cu129_wheel_needing_libcudart_13_is_found() -> None:
    needs = {"k/_C.so": {"libcudart.so.13": 13}}
    assert cuda_problems(needs, label="cu129") == [
        ("k/_C.so", "k/_C.so needs libcudart.so.13; the +cu129 label says CUDA 12")
    ]
    assert cuda_problems(needs, label="cu130") == []
    assert cuda_problems(needs, label="cu129", cell_major=13) == []  # the build's cell rules
    assert cuda_problems(needs, label=None, cell_major=12) == [
        ("k/_C.so", "k/_C.so needs libcudart.so.13; the cell is CUDA 12")
    ]


def test_an_unlabelled_wheel_linking_two_cuda_majors_is_found() -> None:
    needs = {"k/a.so": {"libcudart.so.12": 12}, "k/b.so": {"libcublas.so.13": 13}}
    assert cuda_problems(needs, label=None) == [
        ("k/a.so", "the wheel links two CUDA majors (k/a.so: libcudart.so.12, k/b.so: "
         "libcublas.so.13)")
    ]  # fmt: skip
    assert cuda_problems({"k/a.so": {"libcudart.so.12": 12}}, label=None) == []


def test_a_wheel_linking_torch_must_require_it() -> None:
    elfs = [lib("k/_C.so", "libc10.so", "libtorch_cpu.so", "libcudart.so.13")]
    assert links_torch(elfs) == {"k/_C.so": "libc10.so"}
    problems, unchecked = torch_problems(
        elfs, ["numpy"], label="cu130", arch="x86_64", torch_cuda=None
    )
    assert problems == [
        ("k/_C.so", "k/_C.so needs libc10.so, and METADATA requires no torch: pip installs it "
         "beside any torch, or none")
    ]  # fmt: skip
    assert unchecked is None


def test_requirements_of_torch_apply_by_their_markers() -> None:
    lines = [
        'torch>=2.10; platform_machine == "x86_64"',
        'torch>=2.11; extra == "aarch64"',
        "torch-audio",
        "not a requirement ===",
    ]
    assert [str(r) for r in torch_requirements(lines, "x86_64")] == [
        'torch>=2.10; platform_machine == "x86_64"'
    ]
    assert torch_requirements(lines, "aarch64") == []


def test_only_requirements_outside_extras_count() -> None:
    lines = ["torch>=2.11", 'torch>=2.0; extra == "old"', "numpy"]
    assert [str(r) for r in torch_requirements(lines, "x86_64")] == ["torch>=2.11"]


def test_a_torch_pinned_to_another_cuda_is_found() -> None:
    elfs = [lib("k/_C.so", "libc10.so", "libcudart.so.13")]
    problems, _ = torch_problems(
        elfs, ["torch==2.9.1+cu128"], label=None, arch="x86_64", torch_cuda=None
    )
    assert problems == [
        ("k/_C.so", "requires torch==2.9.1+cu128, and k/_C.so needs libcudart.so.13")
    ]


def test_a_torch_requirement_admitting_a_torch_of_another_cuda_is_found() -> None:
    elfs = [lib("k/_C.so", "libc10.so", "libcudart.so.13")]
    asked: list[tuple[str, str | None]] = []

    def index(requirement: Requirement, arch: str | None) -> TorchCudaAnswer:
        asked.append((str(requirement), arch))
        cuda = {Version("2.10.0"): 12, Version("2.11.0"): 13, Version("2.12.0"): 13}
        return TorchCudaAnswer(index="http://torch.test/simple/", cuda=cuda)

    problems, unchecked = torch_problems(
        elfs, ["torch>=2.10"], label=None, arch="x86_64", torch_cuda=index
    )
    assert asked == [("torch>=2.10", "x86_64")]
    assert problems == [
        ("k/_C.so", "requires torch>=2.10, which admits torch 2.10.0 (CUDA 12) on "
         "http://torch.test/simple/; k/_C.so needs libcudart.so.13")
    ]  # fmt: skip
    assert unchecked is None
    labelled, _ = torch_problems(elfs, ["torch>=2.10"], label="cu130", arch=None, torch_cuda=index)
    assert labelled == []  # the label's variant index serves its torch: cuda-major's to judge


def test_without_a_torch_index_the_requirements_cuda_is_unchecked_and_says_why() -> None:
    elfs = [lib("k/_C.so", "libc10.so", "libcudart.so.12")]
    problems, unchecked = torch_problems(
        elfs, ["torch>=2.10"], label=None, arch="x86_64", torch_cuda=None
    )
    assert problems == []
    assert unchecked == "the CUDA of torch>=2.10: no torch index to ask"

    def unreachable(requirement: Requirement, arch: str | None) -> TorchCudaAnswer:
        return TorchCudaAnswer(index="http://x/", cuda={}, error="http://x/torch/: HTTP 503")

    _, why = torch_problems(elfs, ["torch>=2.10"], label=None, arch=None, torch_cuda=unreachable)
    assert why == "the CUDA of torch>=2.10: http://x/torch/: HTTP 503"
