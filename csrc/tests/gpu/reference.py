"""PyTorch references written from the kernels' definitions, and the comparisons.

Tolerances, and why:

* Copies (kv_c into the cache, k_pe without RoPE) are exact: a same-dtype copy moves
  bits; fp16/bf16 -> fp32 -> fp16/bf16 is lossless.
* RoPE is compared exactly (0 ulp). The definition is evaluated in fp32 with one IEEE
  rounding per operation: (x1*cos) - (x2*sin) and (x2*cos) + (x1*sin). The kernel spells
  every product and sum with __fmul_rn/__fadd_rn/__fsub_rn, which the compiler may not
  contract into an FMA; eager PyTorch runs each operation as its own kernel with the
  same rounding. The final fp32 -> fp16/bf16 conversion is round-to-nearest-even in both.
* FP8 is compared exactly (0 ulp): x / scale is an IEEE division in both (the reference
  divides by a tensor, because PyTorch computes x / python_float as x * (1 / scale),
  which can differ in the last bit), then saturation to +-448 and round-to-nearest-even
  (torch's float8_e4m3fn conversion; the kernel's own integer code on SM < 89, the
  cvt.rn.satfinite instruction on SM >= 89). NaN is compared as "is NaN".
* SwiGLU is compared to within one unit in the last place of the output dtype (fp32:
  rtol 1e-5): expf is not correctly rounded on the GPU (CUDA documents <= 2 ulp), so the
  fp32 silu may differ from PyTorch's in the last bits, and a result near a rounding
  boundary of fp16/bf16 may round the other way.
"""

from __future__ import annotations

from typing import Any

SENTINEL_BYTE = 0xFF  # NaN in fp32, fp16, bf16 and e4m3fn alike


def float_dtype(torch: Any, name: str) -> Any:
    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[name]


def mla_reference(
    torch: Any,
    *,
    kv_c: Any,
    k_pe: Any,
    positions: Any,
    cos_sin: Any,
    slots: Any,
    cache_before: Any,
    rope: str | None,
    fp8_scale: float | None,
) -> Any:
    """The cache after the kernel, computed from the definition."""
    t = kv_c.shape[0]
    rank = kv_c.shape[1]
    pe = k_pe.reshape(t, -1).float()
    rope_dim = pe.shape[1]
    if rope is not None:
        half = rope_dim // 2
        cs = cos_sin.float()[positions]
        cos, sin = cs[:, :half], cs[:, half:]
        if rope == "neox":
            x1, x2 = pe[:, :half], pe[:, half:]
        else:
            x1, x2 = pe[:, 0::2], pe[:, 1::2]
        o1 = x1 * cos - x2 * sin
        o2 = x2 * cos + x1 * sin
        if rope == "neox":
            pe = torch.cat([o1, o2], dim=1)
        else:
            pe = torch.stack([o1, o2], dim=2).reshape(t, rope_dim)
    row = torch.cat([kv_c.float(), pe], dim=1)
    before = cache_before
    if fp8_scale is not None:
        q = row / torch.full_like(row, fp8_scale)
        values = q.clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(torch.uint8)
        before = cache_before.view(torch.uint8)  # index_put works on bytes for any build
    else:
        values = row.to(cache_before.dtype)
    expected = before.clone()
    block_size = cache_before.shape[1]
    valid = slots >= 0
    s = slots[valid]
    expected[s // block_size, s % block_size, : rank + rope_dim] = values[valid]
    return expected.view(cache_before.dtype)


def swiglu_reference(torch: Any, x: Any, clamp: float | None) -> Any:
    d = x.shape[1] // 2
    g = x[:, :d].float()
    u = x[:, d:].float()
    if clamp is not None:
        g = g.clamp(max=clamp)
        u = u.clamp(-clamp, clamp)
    return (g / (1.0 + torch.exp(-g)) * u).to(x.dtype)


def same_bytes(torch: Any, got: Any, expected: Any) -> bool:
    a = got.contiguous().view(torch.uint8)
    b = expected.contiguous().view(torch.uint8)
    return bool(torch.equal(a, b))


def describe_mismatch(torch: Any, got: Any, expected: Any) -> str:
    """Where two caches [blocks, block_size, entry] differ, for the assertion message."""
    a = got.contiguous().view(torch.uint8).reshape(got.shape[0], got.shape[1], -1)
    b = expected.contiguous().view(torch.uint8).reshape(got.shape[0], got.shape[1], -1)
    bad = (a != b).any(dim=2).nonzero().tolist()
    sample = ", ".join(f"[{i},{j}]" for i, j in bad[:8])
    return f"{len(bad)} cache entries differ, e.g. {sample}"
