"""`release audit --cuobjdump PATH` lists the device code of every wheel with PyPI's cuobjdump
(provisioned into the test cache, as `release build` provisions it) and finds a wheel
without the SMs another arch's wheel of the same version holds (sglang#29317: an aarch64
cu130 wheel without sm121 code). Real device code: tests/data/elf-device, made by nvcc."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from release import proc
from release.toolchain import resolve
from release.toolchain.provision import install_pinset
from tests.integration.indexes import ELF, audited, link_to, static_server, write_page
from tests.integration.wheels import make_wheel

pytestmark = pytest.mark.slow

DEVICE = ELF.parent / "elf-device"


@pytest.fixture(scope="module")
def cuobjdump(release_cache: Path) -> Path:
    """PyPI's cuobjdump of the 13.0 x86_64 toolchain, alone (no compiler installed)."""
    plan = resolve("13.0", "x86_64", cuda_home=None, cache_dir=release_cache)
    where = plan.install_dir(plan.inspector)
    install_pinset(plan.inspector, where, proc.run, python=sys.executable, env=dict(os.environ))
    (found,) = where.glob("nvidia/*/bin/cuobjdump")
    return found


def test_a_wheel_without_code_another_arch_holds_is_found(cuobjdump: Path, tmp_path: Path) -> None:
    prebuilt = {"k3_kernels/device/kernels.fatbin": (DEVICE / "prebuilt.fatbin").read_bytes()}
    x86 = make_wheel(
        tmp_path / "files", platform="manylinux_2_28_x86_64",
        members={**prebuilt, "k3_kernels/_C.so": (DEVICE / "x86_64-nv_fatbin.so").read_bytes()},
    )  # fmt: skip
    arm = make_wheel(tmp_path / "files", platform="manylinux_2_28_aarch64", members=prebuilt)
    page = tmp_path / "k3-kernels"
    write_page(page, [link_to(x86, page), link_to(arm, page)])
    with static_server(tmp_path) as url:
        done = audited(f"{url}k3-kernels/", "--cuobjdump", str(cuobjdump))
        unlisted = audited(f"{url}k3-kernels/")
    assert done.returncode == 7, done.stderr
    document = json.loads(done.stdout)
    assert [(f["rule"], f["file"], f["detail"]) for f in document["findings"]] == [
        ("device-code", arm.name, "no sm_75, sm_90a, sm_100f, compute_100 code, which the "
         "x86_64 wheel of k3-kernels 0.1.0 holds")
    ]  # fmt: skip
    rows = {row["rule"]: row for row in document["rules"]}
    assert rows["device-code"]["files_checked"] == 2
    assert unlisted.returncode == 0  # without cuobjdump, device code is not listed ...
    rows = {row["rule"]: row for row in json.loads(unlisted.stdout)["rules"]}
    assert rows["device-code"]["files_checked"] == 0  # ... and the summary says so
