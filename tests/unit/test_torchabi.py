"""The ABI check of torch extension wheels: what a shared object leaves undefined, and which
of those torch, the C/C++ runtime, Python or the wheel itself resolves."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from release.inspection.torchabi import (
    LISTED_PER_OBJECT,
    SharedObject,
    UndefinedSymbol,
    abi_problems,
    demangled,
    is_torch_cxx_symbol,
    read_shared_object,
    runtime_exports,
    shared_objects,
    symbol_problems,
)

ELF = Path(__file__).resolve().parents[1] / "data" / "elf"
LABEL = "2.14.1+cu130"


def wheel(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        archive.writestr("pkg-0.1.0.dist-info/METADATA", b"Name: pkg\nVersion: 0.1.0\n")
    return buffer.getvalue()


def obj(
    name: str, *undefined: tuple[str, str | None], defined: tuple[str, ...] = ()
) -> SharedObject:
    return SharedObject(
        name=name,
        needed=(),
        undefined=tuple(UndefinedSymbol(name=n, version=v) for n, v in undefined),
        defined=frozenset(defined),
    )


def keep(name: str) -> str:
    return name


def problems(
    *objects: SharedObject, exports: frozenset[str] = frozenset(), stable: bool = False
) -> list[str]:
    return symbol_problems(objects, exports, stable=stable, torch_label=LABEL, demangle=keep)


def test_a_versioned_libc_symbol_and_the_needed_library_are_read() -> None:
    found = read_shared_object("pkg/x.so", (ELF / "x86_64-glibc2.34.so").read_bytes())
    assert found.unreadable is None
    assert found.needed == ("libc.so.6",)
    assert found.undefined == (UndefinedSymbol(name="close_range", version="GLIBC_2.34"),)
    assert "k3_close" in found.defined


def test_weak_undefined_symbols_are_not_needed_and_plain_ones_have_no_version() -> None:
    found = read_shared_object("pkg/y.so", (ELF / "x86_64-needs-cudart.so").read_bytes())
    assert found.needed == ("libcudart.so.12",)
    # __gmon_start__, __cxa_finalize and the _ITM_ symbols are weak
    assert found.undefined == (UndefinedSymbol(name="f", version=None),)
    assert found.defined == frozenset({"g"})


def test_a_wheel_passes_when_torch_exports_what_its_object_needs() -> None:
    data = wheel({"pkg/_C.so": (ELF / "x86_64-needs-cudart.so").read_bytes(), "pkg/a.py": b""})
    assert [o.name for o in shared_objects(data)] == ["pkg/_C.so"]
    assert abi_problems(data, frozenset({"f", "g"}), stable=True, torch_label=LABEL) == []
    assert abi_problems(data, frozenset({"g"}), stable=False, torch_label=LABEL) == [
        "pkg/_C.so: undefined symbol f: not exported by torch 2.14.1+cu130's libraries"
    ]


def test_runtime_versions_resolve_whatever_torch_exports() -> None:
    data = wheel({"pkg/lib/libk.so.1": (ELF / "x86_64-glibc2.34.so").read_bytes()})
    assert abi_problems(data, frozenset(), stable=True, torch_label=LABEL) == []


def test_an_unversioned_symbol_of_the_c_runtime_resolves_beside_the_runtime() -> None:
    # sgl-deep-gemm 0.1.5.post1's _C.so asks dlopen and dlsym with no version
    ext = obj("pkg/_C.so", ("dlopen", None), ("dlsym", None), ("k_missing", None))
    runtime = runtime_exports()
    assert {"dlopen", "dlsym", "memcpy", "__cxa_throw", "_Unwind_Resume"} <= runtime
    assert problems(ext, exports=runtime) == [
        "pkg/_C.so: undefined symbol k_missing: not exported by torch 2.14.1+cu130's libraries"
    ]


def test_no_runtime_exports_where_the_process_maps_no_c_library(tmp_path: Path) -> None:
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r-xp 00000000 08:01 1 /opt/lib/libfoo.so\n", encoding="utf-8")
    assert runtime_exports(maps) == frozenset()
    assert runtime_exports(tmp_path / "absent") == frozenset()


def test_a_member_named_like_a_library_that_is_not_elf_is_a_problem() -> None:
    data = wheel({"pkg/_C.so": b"INPUT(-lfoo)\n"})
    (problem,) = abi_problems(data, frozenset(), stable=False, torch_label=LABEL)
    assert problem.startswith("pkg/_C.so: not a readable ELF file")


def test_each_way_a_symbol_is_resolved() -> None:
    ext = obj(
        "pkg/_C.so",
        ("memcpy", "GLIBC_2.14"),
        ("_ZNSt8ios_base4InitC1Ev", "GLIBCXX_3.4"),
        ("__cxa_throw", "CXXABI_1.3"),
        ("_Unwind_Resume", "GCC_3.0"),
        ("PyLong_FromLong", None),
        ("_Py_Dealloc", None),
        ("helper", None),
        ("aoti_torch_get_dim", None),
    )
    helper = obj("pkg/libhelper.so", defined=("helper",))
    assert problems(ext, helper, exports=frozenset({"aoti_torch_get_dim"}), stable=True) == []


def test_a_version_of_another_library_does_not_resolve_a_symbol() -> None:
    ext = obj("pkg/_C.so", ("cudaGetLastError", "libcudart.so.13"))
    assert problems(ext) == [
        "pkg/_C.so: undefined symbol cudaGetLastError: not exported by torch "
        "2.14.1+cu130's libraries"
    ]
    assert problems(ext, exports=frozenset({"cudaGetLastError"})) == []


def test_a_symbol_the_object_defines_itself_does_not_resolve_its_own_reference() -> None:
    ext = obj("pkg/_C.so", ("helper", None), defined=("helper",))
    assert len(problems(ext)) == 1


def test_a_stable_build_may_not_take_cxx_symbols_from_torch() -> None:
    cxx = "_ZN3c1010TensorType3getEv"
    ext = obj("pkg/_C.so", (cxx, None), ("torch_library_impl", None))
    exports = frozenset({cxx, "torch_library_impl"})
    assert problems(ext, exports=exports, stable=False) == []
    (problem,) = problems(ext, exports=exports, stable=True)
    assert problem.startswith(f"pkg/_C.so: undefined symbol {cxx}: a C++ symbol of torch")
    assert "stable-ABI" in problem


def test_std_instantiations_torch_reexports_are_not_torch_cxx_symbols() -> None:
    std = "_ZNSt7__cxx1118basic_stringstreamIcSt11char_traitsIcESaIcEEC1Ev"
    ext = obj(
        "pkg/_C.so",
        (std, None),
        ("_ZNKRSt7__cxx1115basic_stringbufIcSt11char_traitsIcESaIcEE3strEv", None),
    )
    exports = frozenset(u.name for u in ext.undefined)
    assert problems(ext, exports=exports, stable=True) == []


def test_which_mangled_names_are_torch_cxx_symbols() -> None:
    torch_vector = (
        "_ZNSt6vectorIN3c106IValueESaIS1_EE17_M_realloc_insertIJS1_EEEv"
        "N9__gnu_cxx17__normal_iteratorIPS1_S3_EEDpOT_"
    )
    assert is_torch_cxx_symbol("_ZN2at4_ops10empty_like4callERKNS_6TensorE", keep)
    assert is_torch_cxx_symbol("_ZTVN3c105ErrorE", keep)
    assert is_torch_cxx_symbol("_ZN5torch7LibraryD1Ev", keep)
    assert not is_torch_cxx_symbol("aoti_torch_get_dim", keep)
    assert not is_torch_cxx_symbol("_ZNSo6sentryC1ERSo", keep)
    assert not is_torch_cxx_symbol("_ZSt4cerr", keep)
    assert not is_torch_cxx_symbol("_ZTIN10__cxxabiv115__forced_unwindE", keep)
    assert not is_torch_cxx_symbol("_Znwm", keep)
    # a std:: template over torch's types depends on their layout: it counts
    assert not is_torch_cxx_symbol(torch_vector, keep)
    assert is_torch_cxx_symbol(torch_vector, lambda _: "std::vector<c10::IValue>::f()")
    assert is_torch_cxx_symbol(torch_vector, demangled)


def test_the_listing_stops_after_five_symbols_per_object() -> None:
    names = [f"missing_{i:02}" for i in range(LISTED_PER_OBJECT + 3)]
    ext = obj("pkg/_C.so", *((n, None) for n in reversed(names)))
    other = obj("pkg/_D.so", ("only_one", None))
    found = problems(ext, other)
    assert found[:LISTED_PER_OBJECT] == [
        f"pkg/_C.so: undefined symbol {n}: not exported by torch 2.14.1+cu130's libraries"
        for n in names[:LISTED_PER_OBJECT]
    ]
    assert found[LISTED_PER_OBJECT] == (
        "pkg/_C.so: and 3 more undefined symbols not exported by torch 2.14.1+cu130's libraries"
    )
    assert found[LISTED_PER_OBJECT + 1 :] == [
        "pkg/_D.so: undefined symbol only_one: not exported by torch 2.14.1+cu130's libraries"
    ]


def test_a_problem_names_the_demangled_symbol_and_the_mangled_one() -> None:
    ext = obj("pkg/_C.so", ("_ZN3c104cuda12device_countEv", None))
    (problem,) = symbol_problems(
        [ext], frozenset(), stable=False, torch_label="2.11.0", demangle=demangled
    )
    assert problem == (
        "pkg/_C.so: undefined symbol c10::cuda::device_count() (_ZN3c104cuda12device_countEv): "
        "not exported by torch 2.11.0's libraries"
    )


def test_demangling() -> None:
    assert demangled("_ZN3c1010TensorType3getEv") == "c10::TensorType::get()"
    assert demangled("_ZTVN3c105ErrorE") == "vtable for c10::Error"
    assert demangled("aoti_torch_get_dim") == "aoti_torch_get_dim"
    assert demangled("_Z_not_a_name") == "_Z_not_a_name"
