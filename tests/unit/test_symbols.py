"""Runtime symbol versions against a wheel's manylinux tag, by auditwheel's policy data: real
ELF files (tests/data/elf) and the versions a g++ 12 library asks."""

from __future__ import annotations

from pathlib import Path

from release.inspection.elffacts import ElfFacts, elf_facts
from release.inspection.symbols import known_policy, manylinux_tags, symbol_problems, tag_arch

ELF = Path(__file__).parent.parent / "data" / "elf"


def facts(name: str) -> ElfFacts:
    with (ELF / name).open("rb") as stream:
        return elf_facts(f"pkg/{name}", stream)


def test_glibc_2_34_is_beyond_manylinux_2_31_as_vllm_shipped_it() -> None:
    found = symbol_problems([facts("x86_64-glibc2.34.so")], ["manylinux_2_31_x86_64"])
    assert found == [
        (
            "pkg/x86_64-glibc2.34.so",
            "pkg/x86_64-glibc2.34.so needs GLIBC_2.34; manylinux_2_31_x86_64 allows at most "
            "GLIBC_2.31",
        )
    ]
    assert symbol_problems([facts("x86_64-glibc2.34.so")], ["manylinux_2_34_x86_64"]) == []


def test_glibcxx_beyond_manylinux2014_is_named_with_the_newest_the_policy_allows() -> None:
    library = ElfFacts(
        member="deep_gemm/_C.so",
        machine="EM_X86_64",
        symbol_versions=(
            ("libstdc++.so.6", "GLIBCXX_3.4"),
            ("libstdc++.so.6", "GLIBCXX_3.4.21"),
            ("libstdc++.so.6", "CXXABI_1.3.9"),
        ),
    )
    tags = ["manylinux2014_x86_64", "manylinux_2_17_x86_64"]  # one policy under two names
    assert symbol_problems([library], tags) == [
        (
            "deep_gemm/_C.so",
            "deep_gemm/_C.so needs CXXABI_1.3.9; manylinux2014_x86_64 allows at most CXXABI_1.3.7",
        ),
        (
            "deep_gemm/_C.so",
            "deep_gemm/_C.so needs GLIBCXX_3.4.21; manylinux2014_x86_64 allows at most "
            "GLIBCXX_3.4.19",
        ),
    ]


def test_a_librarys_own_versions_are_not_the_runtimes() -> None:
    library = ElfFacts(
        member="a.so",
        machine="EM_X86_64",
        symbol_versions=(("libcudart.so.13", "libcudart.so.13"),),
    )
    assert symbol_problems([library], ["manylinux_2_28_x86_64"]) == []


def test_only_manylinux_tags_that_auditwheel_knows_are_judged() -> None:
    library = facts("x86_64-glibc2.34.so")
    assert symbol_problems([library], ["linux_x86_64", "manylinux_2_99_x86_64"]) == []
    assert not known_policy(["linux_x86_64", "manylinux_2_99_x86_64", "any"])
    assert known_policy(["manylinux_2_28_aarch64"])
    assert manylinux_tags(["any", "manylinux1_x86_64", "linux_x86_64"]) == ("manylinux1_x86_64",)


def test_the_arch_of_a_platform_tag() -> None:
    assert tag_arch("manylinux_2_28_x86_64") == "x86_64"
    assert tag_arch("manylinux2014_aarch64") == "aarch64"
    assert tag_arch("linux_aarch64") == "aarch64"
    assert tag_arch("any") is None
    assert tag_arch("macosx_11_0_arm64") is None
