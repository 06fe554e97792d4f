"""The wheel of the fixture of DeepGEMM's shape (tests/fixtures/jit_gemm, sgl-k3-jit, built by
`release build` in a torch cell of device-code: none and python: any) on a GPU: it holds no
device code, and its host library _C, loaded with tvm_ffi beside torch, compiles the kernel
header it ships with NVRTC at the first call, for the GPU it runs on, and launches it on
torch's current stream: `k3_jit.scale(x, alpha)` gives torch's `alpha * x`.

Needs torch with a CUDA GPU, apache-tvm-ffi and k3_jit: installed, or the wheel that
K3_JIT_GEMM_WHEEL names, unpacked here on sys.path:

    K3_JIT_GEMM_WHEEL=dist/sgl_k3_jit-0.1.0-py3-none-manylinux_2_34_x86_64.whl \\
        python -m pytest -s -v tests/gpu/test_fixture_jit_gemm.py

Skipped without torch, tvm_ffi, the wheel or a GPU. What it ran beside (torch, NVRTC, the
GPU) is printed (-s).
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import pytest


def _unpacked(wheel: str) -> None:
    path = Path(wheel)
    if not path.is_file():
        raise FileNotFoundError(f"K3_JIT_GEMM_WHEEL={wheel}: no such wheel")
    target = tempfile.mkdtemp(prefix="k3-jit-gemm-")
    with zipfile.ZipFile(path) as archive:
        archive.extractall(target)
    sys.path.insert(0, target)


if os.environ.get("K3_JIT_GEMM_WHEEL"):
    _unpacked(os.environ["K3_JIT_GEMM_WHEEL"])

torch = pytest.importorskip("torch")
pytest.importorskip("tvm_ffi")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to torch"),
]


@pytest.fixture(scope="module")
def k3() -> Any:
    """k3_jit, imported only where there is a GPU (its import loads _C beside torch)."""
    return pytest.importorskip("k3_jit")


def test_the_wheel_allows_the_torch_it_loads_beside(k3: Any) -> None:
    requires = importlib.metadata.requires("sgl-k3-jit") or []
    (pin,) = [r for r in requires if r.split(";")[0].strip().startswith("torch")]
    major, minor = k3.nvrtc_version()
    print(
        f"\nsgl-k3-jit {k3.__version__} requires {pin}; loaded beside torch {torch.__version__} "
        f"(CUDA {torch.version.cuda}), NVRTC {major}.{minor}, on {torch.cuda.get_device_name()}"
    )
    packaging = pytest.importorskip("packaging.requirements")
    assert packaging.Requirement(pin).specifier.contains(torch.__version__.split("+")[0])
    assert "apache-tvm-ffi==0.1.9" in requires


def test_it_holds_no_device_code_and_ships_the_kernel_header(k3: Any) -> None:
    package = Path(k3.__file__).parent
    assert b".nv_fatbin" not in (package / "_C.so").read_bytes()
    assert not [p for p in package.rglob("*") if p.suffix in (".cubin", ".ptx", ".fatbin")]
    header = package / "include" / "k3_jit" / "scale.cuh"
    assert "k3_scale_f32" in header.read_text()


def test_its_nvrtc_is_the_cuda_torch_runs_with(k3: Any) -> None:
    major, _ = k3.nvrtc_version()
    assert str(major) == str(torch.version.cuda).split(".")[0]


def cases() -> list[Any]:
    return [
        pytest.param(1000, 2.5, id="small"),
        pytest.param(1, -1.0, id="one"),
        pytest.param(4097 * 31, 0.125, id="many-blocks"),
        pytest.param(0, 3.0, id="empty"),
    ]


@pytest.mark.parametrize(("n", "alpha"), cases())
def test_the_jit_compiled_kernel_matches_torch(k3: Any, n: int, alpha: float) -> None:
    generator = torch.Generator().manual_seed(n)
    x = torch.randn(n, generator=generator, dtype=torch.float32).cuda()
    out = k3.scale(x, alpha)
    torch.cuda.synchronize()
    assert out.device == x.device
    assert (out.shape, out.dtype) == (x.shape, torch.float32)
    torch.testing.assert_close(out.cpu(), (alpha * x).cpu())


def test_it_runs_on_torchs_current_stream(k3: Any) -> None:
    x = torch.arange(1 << 20, dtype=torch.float32, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        out = k3.scale(x, -2.0)
        total = out.sum()  # on the same stream: ordered after the kernel
    stream.synchronize()
    assert total.item() == pytest.approx(-2.0 * (1 << 20) * ((1 << 20) - 1) / 2, rel=1e-5)


def test_a_tensor_it_does_not_take_is_refused(k3: Any) -> None:
    with pytest.raises(TypeError, match="takes float32 tensors"):
        k3.scale(torch.ones(4, device="cuda", dtype=torch.float64), 1.0)
    with pytest.raises(ValueError, match="takes CUDA tensors"):
        k3.scale(torch.ones(4, dtype=torch.float32), 1.0)
