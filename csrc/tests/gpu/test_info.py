"""Which code runs: the arch probe, the fatbin contents against the build info, `info`."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
k3 = pytest.importorskip("k3_kernels")

pytestmark = pytest.mark.gpu


def _sm_number(text: str) -> int:
    return int(str(text).rstrip("af"))


def expected_arch() -> int:
    """K3_EXPECT_ARCH if given; else what the driver must pick for this GPU and build."""
    if os.environ.get("K3_EXPECT_ARCH"):
        return int(os.environ["K3_EXPECT_ARCH"])
    major, minor = torch.cuda.get_device_capability()
    build = k3.build_info()
    cubins = [s for s in map(_sm_number, build["sms"]) if s // 10 == major and s % 10 <= minor]
    if cubins:
        return max(cubins) * 10
    assert build["ptx"] is not None, "this build has no code for the GPU"
    return _sm_number(build["ptx"]) * 10


def test_loaded_code_was_built_for_the_expected_arch() -> None:
    arches = k3.loaded_arches()
    assert set(arches) == {"mla_kv_cache", "swiglu"}
    assert arches == dict.fromkeys(arches, expected_arch()), arches
    assert k3.loaded_arch() == expected_arch()


def test_fatbins_hold_what_the_build_asked_for() -> None:
    build = k3.build_info()
    report = k3.info()
    want_sms = tuple(sorted(_sm_number(s) for s in build["sms"]))
    want_ptx = () if build["ptx"] is None else (_sm_number(build["ptx"]),)
    assert [f.stem for f in report.fatbins] == ["mla_kv_cache", "swiglu"]
    for f in report.fatbins:
        assert (f.sms, f.ptx) == (want_sms, want_ptx), f
    assert report.driver_problem is None
    assert report.gpus[0].covered


def test_info_command() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "k3_kernels", "info"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    major, minor = torch.cuda.get_device_capability()
    assert f"sm_{major}{minor}: covered" in proc.stdout, proc.stdout
    assert f"CUDA {k3.build_info()['cuda_version']}" in proc.stdout
