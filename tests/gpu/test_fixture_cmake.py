"""The cmake fixture's wheel (tests/fixtures/cmake_kernels, built by `release`'s cmake
backend) on a GPU: the driver picks the cubin built for this GPU, SwiGLU matches PyTorch,
and float -> bfloat16 rounding gives PyTorch's bits on both paths, the hardware one and
the integer one SM75 takes (run here on any GPU).

Needs torch with a CUDA GPU and an importable fixture_kernels (the wheel installed, or
unpacked on PYTHONPATH); skipped otherwise. FIXTURE_EXPECT_ARCH overrides the expected
__CUDA_ARCH__ of the loaded code (900 on an H200 for the fixture's sm_90 cubin).
"""

from __future__ import annotations

import os
import struct
from typing import Any

import pytest

torch = pytest.importorskip("torch")
fxk = pytest.importorskip("fixture_kernels")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to torch"),
]


def expected_arch() -> int:
    """FIXTURE_EXPECT_ARCH, else what the driver must pick from the build's cubins and PTX."""
    if os.environ.get("FIXTURE_EXPECT_ARCH"):
        return int(os.environ["FIXTURE_EXPECT_ARCH"])
    major, minor = (int(v) for v in torch.cuda.get_device_capability())
    cubins: list[int] = []
    ptx: list[int] = []
    for entry in fxk.build_info()["architectures"].split(","):
        number, _, kind = entry.partition("-")
        (ptx if kind == "virtual" else cubins).append(int(number.rstrip("af")))
    same_major = [s for s in cubins if s // 10 == major and s % 10 <= minor]
    if same_major:
        return max(same_major) * 10
    assert ptx, "the build has no code for this GPU"
    return max(p for p in ptx if p <= major * 10 + minor) * 10


def test_the_driver_loads_the_code_built_for_this_gpu() -> None:
    assert fxk.loaded_arch() == expected_arch()


def swiglu_reference(x: Any) -> Any:
    d = x.shape[1] // 2
    gate, up = x[:, :d].float(), x[:, d:].float()
    return (torch.nn.functional.silu(gate) * up).to(torch.bfloat16)


@pytest.mark.parametrize(
    ("tokens", "d"),
    [(37, 4096), (19, 1001), (70_000, 24), (8192, 2100)],  # the last: more than one grid
    ids=["aligned", "odd-d", "many-tokens", "grid-stride"],
)
def test_swiglu_matches_pytorch(tokens: int, d: int) -> None:
    torch.manual_seed(tokens + d)
    x = (torch.randn(tokens, 2 * d, device="cuda") * 4).to(torch.bfloat16)
    got = fxk.swiglu_bf16(x)
    torch.cuda.synchronize()
    torch.testing.assert_close(got.float(), swiglu_reference(x).float(), rtol=2.0**-7, atol=1e-6)


def special_floats() -> Any:
    """Zeros, infinities, the largest float, values that round up to infinity, subnormals,
    exact ties at even and odd bfloat16 values, and NaN."""
    bits = [
        0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7F7FFFFF, 0xFF7FFFFF,
        0x7F7F8000, 0x7F7F7FFF, 0x00000001, 0x807FFFFF, 0x00008000, 0x00018000,
        0x3F808000, 0x3F818000, 0x3F808001, 0x3F817FFF, 0x7FC00000, 0x7F800001,
    ]  # fmt: skip
    values = [struct.unpack("<f", struct.pack("<I", b))[0] for b in bits]
    return torch.tensor(values, dtype=torch.float32)


def float_inputs() -> Any:
    torch.manual_seed(1234)
    scales = torch.tensor([1e-40, 1e-20, 1.0, 1e20, 3e38])
    random = torch.randn(5, 200_000) * scales[:, None]
    raw = torch.randint(0, 2**31 - 1, (300_000,), dtype=torch.int32).view(torch.float32)
    return torch.cat([special_floats(), random.flatten(), raw]).cuda()


@pytest.mark.parametrize("software", [False, True], ids=["hardware-path", "sm75-integer-path"])
def test_float_to_bfloat16_gives_pytorchs_bits(software: bool) -> None:
    x = float_inputs()
    got = fxk.to_bf16(x, software=software)
    expected = x.to(torch.bfloat16)
    torch.cuda.synchronize()
    nan = expected.isnan()
    assert torch.equal(got.isnan(), nan)
    assert torch.equal(got[~nan].view(torch.int16), expected[~nan].view(torch.int16))


def test_wrong_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="bfloat16"):
        fxk.swiglu_bf16(torch.zeros(2, 4, device="cuda"))
    with pytest.raises(ValueError, match="float32"):
        fxk.to_bf16(torch.zeros(4, device="cuda", dtype=torch.bfloat16))
