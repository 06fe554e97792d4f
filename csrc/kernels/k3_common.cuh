// Shared device code for the k3 kernels: storage types, conversions, 16-byte vectors.
//
// No includes on purpose: the sources compile with nvcc and with NVRTC without any
// header search path. Every conversion has a software form that is correct on every
// SM (SM75 has no bf16 or fp8 conversion instructions); the native instruction is used
// only where the PTX ISA guarantees it (cvt.*.bf16* from sm_80, cvt.*.e4m3x2 from sm_89).
#pragma once

typedef unsigned char k3_u8;
typedef unsigned short k3_u16;
typedef unsigned int k3_u32;
typedef long long k3_i64;
typedef unsigned long long k3_u64;

// 16-bit and 8-bit storage types; arithmetic is always done in fp32.
struct k3_f16 { k3_u16 bits; };
struct k3_bf16 { k3_u16 bits; };
struct k3_fp8 { k3_u8 bits; };  // float8 e4m3fn (vLLM's FP8 KV cache)

struct alignas(16) k3_vec16 { k3_u32 w[4]; };
struct alignas(8) k3_vec8 { k3_u32 w[2]; };

// Lets a test prove which code ran: the PTX-only compute_75 build JIT-compiled on a
// newer GPU still reports 750 here.
extern "C" __global__ void k3_arch_probe(int* out) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        *out = __CUDA_ARCH__;
    }
}

// ---- to fp32 -----------------------------------------------------------------------

__device__ __forceinline__ float k3_to_f32(float x) { return x; }

__device__ __forceinline__ float k3_to_f32(k3_bf16 x) {
    return __uint_as_float(static_cast<k3_u32>(x.bits) << 16);  // exact on every SM
}

__device__ __forceinline__ float k3_to_f32(k3_f16 x) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));  // PTX ISA 1.0, every SM
    return f;
}

__device__ __forceinline__ float k3_lo_f32(k3_u32 w, k3_bf16) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float k3_hi_f32(k3_u32 w, k3_bf16) { return __uint_as_float(w & 0xffff0000u); }
__device__ __forceinline__ float k3_lo_f32(k3_u32 w, k3_f16) {
    k3_f16 h = {static_cast<k3_u16>(w & 0xffffu)};
    return k3_to_f32(h);
}
__device__ __forceinline__ float k3_hi_f32(k3_u32 w, k3_f16) {
    k3_f16 h = {static_cast<k3_u16>(w >> 16)};
    return k3_to_f32(h);
}

// ---- from fp32, round to nearest even ------------------------------------------------

__device__ __forceinline__ k3_u16 k3_bf16_bits_soft(float f) {
    k3_u32 u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return static_cast<k3_u16>((u >> 16) | 0x0040u);  // quiet NaN, sign kept
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<k3_u16>(u >> 16);
}

__device__ __forceinline__ k3_u16 k3_f16_bits(float f) {
    k3_u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));  // PTX ISA 1.0, every SM
    return h;
}

// e4m3fn: bias 7, no infinities, 0x7f/0xff are NaN, largest finite 448 (0x7e).
// Saturating: |x| >= 448 (and +-inf) become +-448, NaN stays NaN.
__device__ __forceinline__ k3_u8 k3_e4m3_bits_soft(float f) {
    const k3_u32 u = __float_as_uint(f);
    const k3_u32 sign = (u >> 24) & 0x80u;
    const k3_u32 a = u & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return static_cast<k3_u8>(sign | 0x7fu);
    }
    if (a >= 0x43e00000u) {  // 448.0f
        return static_cast<k3_u8>(sign | 0x7eu);
    }
    if (a >= 0x3c800000u) {  // 2^-6, the smallest normal: drop 20 mantissa bits (RNE), rebias
        k3_u32 r = a + 0x7ffffu + ((a >> 20) & 1u);
        r -= 0x3c000000u;  // (127 - 7) << 23
        return static_cast<k3_u8>(sign | (r >> 20));
    }
    // Subnormal range: multiples of 2^-9. Scaling by 2^9 is exact; rounding to the
    // nearest even integer gives the code (8 is the smallest normal, also correct).
    const int m = __float2int_rn(__uint_as_float(a) * 512.0f);
    return static_cast<k3_u8>(sign | static_cast<k3_u32>(m));
}

// Two values packed little-endian: lo in bits 0..15 (or 0..7), hi above.
__device__ __forceinline__ k3_u32 k3_pack2(float lo, float hi, k3_bf16) {
#if __CUDA_ARCH__ >= 800
    k3_u32 r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
#else
    return static_cast<k3_u32>(k3_bf16_bits_soft(lo)) |
           (static_cast<k3_u32>(k3_bf16_bits_soft(hi)) << 16);
#endif
}

__device__ __forceinline__ k3_u32 k3_pack2(float lo, float hi, k3_f16) {
    return static_cast<k3_u32>(k3_f16_bits(lo)) | (static_cast<k3_u32>(k3_f16_bits(hi)) << 16);
}

__device__ __forceinline__ k3_u32 k3_pack2(float lo, float hi, k3_fp8) {
#if __CUDA_ARCH__ >= 890
    k3_u16 r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    return static_cast<k3_u32>(r);
#else
    return static_cast<k3_u32>(k3_e4m3_bits_soft(lo)) |
           (static_cast<k3_u32>(k3_e4m3_bits_soft(hi)) << 8);
#endif
}

// Scalar stores.
__device__ __forceinline__ void k3_store(float* p, float v) { *p = v; }
__device__ __forceinline__ void k3_store(k3_bf16* p, float v) {
    p->bits = static_cast<k3_u16>(k3_pack2(v, 0.0f, k3_bf16()) & 0xffffu);
}
__device__ __forceinline__ void k3_store(k3_f16* p, float v) { p->bits = k3_f16_bits(v); }
__device__ __forceinline__ void k3_store(k3_fp8* p, float v) {
    p->bits = static_cast<k3_u8>(k3_pack2(v, 0.0f, k3_fp8()) & 0xffu);
}

// ---- 16-byte vectors ------------------------------------------------------------------
// A vector is 16 bytes of input: 4 fp32 or 8 fp16/bf16 values. Its output is the same
// count of the output type: 16 bytes, or 4/8 bytes of fp8.

template <typename T> struct k3_lanes { enum { N = 16 / sizeof(T) }; };

__device__ __forceinline__ void k3_unpack(const k3_vec16& v, float (&x)[4], float) {
#pragma unroll
    for (int i = 0; i < 4; ++i) x[i] = __uint_as_float(v.w[i]);
}

template <typename T>
__device__ __forceinline__ void k3_unpack(const k3_vec16& v, float (&x)[8], T tag) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        x[2 * i] = k3_lo_f32(v.w[i], tag);
        x[2 * i + 1] = k3_hi_f32(v.w[i], tag);
    }
}

template <typename InT>
__device__ __forceinline__ void k3_load_vec(const InT* p, float (&x)[k3_lanes<InT>::N]) {
    const k3_vec16 v = *reinterpret_cast<const k3_vec16*>(p);
    k3_unpack(v, x, InT());
}

__device__ __forceinline__ void k3_store_vec(float* p, const float (&x)[4]) {
    k3_vec16 v;
#pragma unroll
    for (int i = 0; i < 4; ++i) v.w[i] = __float_as_uint(x[i]);
    *reinterpret_cast<k3_vec16*>(p) = v;
}

template <typename OutT>  // OutT: k3_bf16 or k3_f16
__device__ __forceinline__ void k3_store_vec(OutT* p, const float (&x)[8]) {
    k3_vec16 v;
#pragma unroll
    for (int i = 0; i < 4; ++i) v.w[i] = k3_pack2(x[2 * i], x[2 * i + 1], OutT());
    *reinterpret_cast<k3_vec16*>(p) = v;
}

__device__ __forceinline__ void k3_store_vec(k3_fp8* p, const float (&x)[8]) {
    k3_vec8 v;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        v.w[i] = k3_pack2(x[4 * i], x[4 * i + 1], k3_fp8()) |
                 (k3_pack2(x[4 * i + 2], x[4 * i + 3], k3_fp8()) << 16);
    }
    *reinterpret_cast<k3_vec8*>(p) = v;
}

__device__ __forceinline__ void k3_store_vec(k3_fp8* p, const float (&x)[4]) {
    *reinterpret_cast<k3_u32*>(p) =
        k3_pack2(x[0], x[1], k3_fp8()) | (k3_pack2(x[2], x[3], k3_fp8()) << 16);
}
