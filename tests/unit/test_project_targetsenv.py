"""release.project.targetsenv: the variable a setup.py makes its -gencode flags from
(flash-attention's FLASH_ATTN_CUDA_ARCHS), read where its literal default is an SM list."""

from __future__ import annotations

from release.project.setuppy import read_setup_py
from release.project.targetsenv import targets_variable
from release.targets import GpuTarget

FLASH = """\
import os


def cuda_archs():
    return os.getenv("FLASH_ATTN_CUDA_ARCHS", "80;90;100;110;120").split(";")


def add_cuda_gencodes(cc_flag, archs):
    if "80" in archs:
        cc_flag += ["-gencode", "arch=compute_80,code=sm_80"]
    newest = max(archs, key=int)
    cc_flag += ["-gencode", f"arch=compute_{newest},code=compute_{newest}"]
"""


def test_the_variable_its_default_sms_and_the_ptx_its_flags_add() -> None:
    found = targets_variable(read_setup_py(FLASH))
    assert found is not None
    assert (found.name, found.default, str(found.place)) == (
        "FLASH_ATTN_CUDA_ARCHS",
        "80;90;100;110;120",
        "setup.py:5",
    )
    assert found.sms == tuple(GpuTarget(n) for n in (80, 90, 100, 110, 120))
    assert found.ptx == GpuTarget(120)
    no_ptx = FLASH.replace("code=compute_{newest}", "code=sm_{newest}")
    without = targets_variable(read_setup_py(no_ptx))
    assert without is not None
    assert without.ptx is None


def test_no_variable_where_the_default_is_no_sm_list_or_the_flags_are_torchs() -> None:
    for text in (
        FLASH.replace('"80;90;100;110;120"', '"native"'),
        FLASH.replace("FLASH_ATTN_CUDA_ARCHS", "FLASH_ATTN_THREADS"),  # not an arch list
        FLASH.replace("FLASH_ATTN_CUDA_ARCHS", "TORCH_CUDA_ARCH_LIST"),  # torch's own
        FLASH.split("\n\n\ndef add_cuda_gencodes", maxsplit=1)[0],  # no -gencode flags at all
    ):
        assert targets_variable(read_setup_py(text)) is None, text


def test_no_variable_an_environment_cannot_hold_or_a_build_never_gets() -> None:
    """targets-env could not name it: init would write a matrix.yaml that does not load."""
    for name in ("my arch", "X_ARCH${{ github.token }}", "A=ARCH", "9_ARCHS", "ARCH_TOKEN"):
        text = FLASH.replace("FLASH_ATTN_CUDA_ARCHS", name)
        assert targets_variable(read_setup_py(text)) is None, name
