"""The libraries of an isolated build's runtime dependencies (release/building/runtimedeps.py):
real pip installs the wheel's Requires-Dist, with what those require, into a scratch site
from a local wheelhouse (no index), and the manylinux verdict leaves out what their RECORD
files list; a library nothing provides fails, named; the scratch site is installed once.
Full tier: real pip resolves and installs (docs/testing.md).
The wheel's library is tests/data/elf/x86_64-needs-runtime-libs.so (DeepGEMM's shape: it
needs libtvm_ffi.so, libnvrtc.so.13, libc10.so and libnobody.so.1)."""

from __future__ import annotations

import os
import sys
import zipfile
from pathlib import Path

import pytest

from release.building.runtimedeps import libraries_verdict
from release.building.settings import CellFailure
from release.inspection.verdict import ManylinuxVerdict
from release.matrix import Cell, load_matrix
from release.wheelfile import record_hash

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parents[1]
ELF = TESTS / "data" / "elf"
CELL = next(
    c
    for c in load_matrix(TESTS / "data" / "matrix" / "good" / "host-only.yaml").cells
    if c.arch == "x86_64"
)
# name: (Requires-Dist, the libraries it ships)
STAND_INS = {
    "k3-tvm-ffi": (("k3-nvrtc",), ("k3_tvm_ffi/lib/libtvm_ffi.so",)),
    "k3-nvrtc": ((), ("k3_nvrtc/lib/libnvrtc.so.13", "k3_nvrtc/lib/libnvrtc-builtins.so.13.0")),
    "k3-torch": ((), ("k3_torch/lib/libc10.so",)),
    "k3-nobody": ((), ("k3_nobody/libnobody.so.1",)),
}


def write_wheel(
    path: Path, name: str, files: dict[str, bytes], requires: tuple[str, ...], tag: str
) -> Path:
    dist = name.replace("-", "_")
    info = f"{dist}-1.0.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    members = {
        **files,
        f"{info}/METADATA": metadata.encode(),
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n".encode(),
    }
    record = "".join(f"{n},{record_hash(d)},{len(d)}\n" for n, d in members.items())
    members[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    wheel = path / f"{dist}-1.0-{tag}.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    return wheel


@pytest.fixture
def wheelhouse(tmp_path: Path) -> Path:
    """The stand-ins of the runtime dependencies, as pure-Python-tagged wheels."""
    house = tmp_path / "wheelhouse"
    house.mkdir()
    library = (ELF / "x86_64-glibc2.28.so").read_bytes()
    for name, (requires, files) in STAND_INS.items():
        write_wheel(house, name, dict.fromkeys(files, library), requires, "py3-none-any")
    return house


def checked(
    tmp_path: Path, wheelhouse: Path, requires: tuple[str, ...], cell: Cell = CELL
) -> ManylinuxVerdict:
    """The verdict on the cell's wheel of the library, which requires `requires`."""
    built = tmp_path / "built"
    built.mkdir(exist_ok=True)
    wheel = write_wheel(
        built,
        "k3-kernels",
        {"k3_kernels/_C.so": (ELF / "x86_64-needs-runtime-libs.so").read_bytes()},
        requires,
        f"py3-none-linux_{cell.arch}",
    )
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheelhouse)}
    return libraries_verdict(
        wheel,
        cell,
        environment=None,
        scratch_root=tmp_path / "runtime",
        python=sys.executable,
        env=env,
        log=tmp_path / "build.log",
    )


def test_what_the_requirements_reach_is_provided_and_the_rest_named(
    tmp_path: Path, wheelhouse: Path
) -> None:
    verdict = checked(tmp_path, wheelhouse, ("k3-tvm-ffi", "k3-torch"))
    assert verdict.external_libraries == ("libnobody.so.1",)
    assert verdict.problems == (
        "k3_kernels/_C.so needs libnobody.so.1, which nothing provides: not the wheel, not the "
        "manylinux_2_28_x86_64 policy, not a distribution its Requires-Dist reaches (k3-tvm-ffi, "
        "k3-torch, k3-nvrtc) (add the distribution that ships it to the project's "
        "dependencies, bundle it in the wheel, or link it statically)",
    )
    assert checked(tmp_path, wheelhouse, ("k3-tvm-ffi", "k3-torch", "k3-nobody")).problems == ()
    # one scratch site per set of requirements, each installed once
    sites = sorted(p.name for p in (tmp_path / "runtime").iterdir())
    assert len(sites) == 2
    checked(tmp_path, wheelhouse, ("k3-tvm-ffi", "k3-torch"))
    log = (tmp_path / "build.log").read_text()
    assert log.count("pip install") == 2


def test_a_requirement_pip_cannot_install_fails_the_cell_naming_it(
    tmp_path: Path, wheelhouse: Path
) -> None:
    with pytest.raises(CellFailure) as failed:
        checked(tmp_path, wheelhouse, ("k3-tvm-ffi", "k3-not-anywhere"))
    assert failed.value.error.startswith(
        "the wheel needs libraries from outside it, and pip cannot install its Requires-Dist "
        "to look for them (k3-tvm-ffi, k3-not-anywhere): "
    )
    assert "k3-not-anywhere" in failed.value.error.split(": ", 1)[1]
    assert not any((tmp_path / "runtime").iterdir()), "nothing half-installed is kept"
