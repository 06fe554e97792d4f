// MLA key concat into a paged KV cache: for each token t with slot_mapping[t] >= 0,
//   cache[slot / block_size, slot % block_size, :rank + rope_dim] = [kv_c[t], rope(k_pe[t])]
// with the cache in the input dtype or float8 e4m3fn holding x / scale (saturated).
//
// Grid-stride over tokens, one warp per token. The latent part moves in 16-byte vectors
// when the host found every pointer and stride aligned (params.vec), else element-wise.
#include "k3_common.cuh"
#include "k3_params.h"  // k3_mla_params, shared with the host library

enum { K3_ROPE_NONE = 0, K3_ROPE_NEOX = 1, K3_ROPE_GPTJ = 2 };

// Identity for a cache in the input dtype.
template <typename CacheT> struct k3_quant {
    __device__ __forceinline__ explicit k3_quant(const k3_mla_params&) {}
    __device__ __forceinline__ float operator()(float x) const { return x; }
};

// FP8: x / scale, correctly rounded like an IEEE division (vLLM divides). With
// r = RN(1/scale), q0 = RN(x * r) is within 1.5 ulp; one correction step
// q + RN(x - scale * q) * r makes it faithful, and by Markstein's theorem a second one
// makes it correctly rounded. FMAs only: no division and no MUFU op per element.
// Only quotients beyond fp32 range are left as q0: they saturate in FP8 either way.
template <> struct k3_quant<k3_fp8> {
    float s;
    float r;
    __device__ __forceinline__ explicit k3_quant(const k3_mla_params& p) {
        s = p.scale_ptr != nullptr ? *p.scale_ptr : p.scale;
        r = __frcp_rn(s);
    }
    // RN(x / s) for finite x / s, given r = RN(1/s); the second correction is the only
    // step the sign and range handling below needs to skip.
    __device__ __forceinline__ static float divide(float x, float s, float r, float& q0) {
        q0 = __fmul_rn(x, r);
        const float q1 = __fmaf_rn(__fmaf_rn(-s, q0, x), r, q0);
        return __fmaf_rn(__fmaf_rn(-s, q1, x), r, q1);
    }
    __device__ __forceinline__ float operator()(float x) const {
        float q0;
        const float q2 = divide(x, s, r, q0);
        // Keeps the sign of zero (and of a quotient below fp32's range), passes inf/NaN.
        return fabsf(q0) < __int_as_float(0x7f800000) ? copysignf(q2, q0) : q0;
    }
};

// x * RN(1/scale): one multiply. For a cache in the input dtype it is never used.
template <typename CacheT> struct k3_quant_mul {
    __device__ __forceinline__ explicit k3_quant_mul(const k3_quant<CacheT>&) {}
    __device__ __forceinline__ float operator()(float x) const { return x; }
};
template <> struct k3_quant_mul<k3_fp8> {
    float r;
    __device__ __forceinline__ explicit k3_quant_mul(const k3_quant<k3_fp8>& q) : r(q.r) {}
    __device__ __forceinline__ float operator()(float x) const { return __fmul_rn(x, r); }
};

// Whether e4m3(x * RN(1/s)) == e4m3(RN(x / s)) for every bf16 (or every fp16) x.
// k3_host.c makes the same check for a scale passed by value; k3_mla_mul_exact makes it
// here for a scale in device memory.
//
// x * r and RN(x / s) differ by at most 2 ulp. The e4m3 result (saturating, subnormals
// included) only changes at a midpoint between two e4m3 values or at 2^-10, and every
// such point is an fp32 number whose low 19 mantissa bits are zero. So the two agree
// unless one of those points lies between the fp32 values. With s = sm * 2^e
// (sm in [1, 2)) and x = xm * 2^k, both quotients are the ones of xm / sm scaled by
// 2^(k - e) (exact for normal results; outside that range both become 0 or +-448), so
// checking every significand xm once against sm decides it for every x: 128 of them
// for bf16 (7 fraction bits), 1024 for fp16 (10 fraction bits; an fp16 subnormal is an
// fp32 normal with at most 10 fraction bits, so the same 1024 cover it). The bf16
// significands are every 8th of the fp16 ones. RN(xm / sm) is k3_quant's division: xm
// and sm are normal, so it is correctly rounded. 1/s must be normal for
// RN(1/s) = RN(1/sm) * 2^-e: scales outside [2^-64, 2^64), and zero, negative or NaN
// ones, keep the division.
template <typename InT, typename CacheT> struct k3_mul_check {
    enum { enabled = 0 };
    __device__ __forceinline__ static bool local(const k3_quant<CacheT>&, k3_u32, k3_u32) {
        return false;
    }
};
template <int FRACTION_BITS> struct k3_mul_check_fp8 {
    enum { enabled = 1 };
    // This thread's share of the check: significands first, first + stride, ...
    __device__ __forceinline__ static bool local(const k3_quant<k3_fp8>& q, k3_u32 first,
                                                 k3_u32 stride) {
        const k3_u32 sb = __float_as_uint(q.s);
        bool ok = sb >= 0x1f800000u && sb < 0x5f800000u;  // 2^-64 <= s < 2^64, sign clear
        const float sm = __uint_as_float((sb & 0x007fffffu) | 0x3f800000u);
        const float rm = __frcp_rn(sm);
        for (k3_u32 i = first; i < (1u << FRACTION_BITS); i += stride) {
            const float xm = __uint_as_float(0x3f800000u | (i << (23 - FRACTION_BITS)));
            float q0;
            const k3_u32 a = __float_as_uint(k3_quant<k3_fp8>::divide(xm, sm, rm, q0));
            const k3_u32 b = __float_as_uint(__fmul_rn(xm, rm));
            const k3_u32 lo = a < b ? a : b;
            const k3_u32 hi = a < b ? b : a;
            ok = ok && (a == b || (hi & 0xfff80000u) < lo);
        }
        return ok;
    }
};
template <> struct k3_mul_check<k3_bf16, k3_fp8> : k3_mul_check_fp8<7> {};
template <> struct k3_mul_check<k3_f16, k3_fp8> : k3_mul_check_fp8<10> {};

template <typename InT>
__device__ __forceinline__ float k3_cos_sin(const k3_mla_params& p, k3_i64 i) {
    if (p.cos_sin_f32) {
        return static_cast<const float*>(p.cos_sin)[i];
    }
    return k3_to_f32(static_cast<const InT*>(p.cos_sin)[i]);
}

template <typename CacheT>
__device__ __forceinline__ CacheT* k3_entry(const k3_mla_params& p, k3_i64 slot) {
    k3_i64 block;
    k3_i64 offset;
    if (p.block_shift >= 0) {
        block = slot >> p.block_shift;
        offset = slot & (p.block_size - 1);
    } else {
        block = slot / p.block_size;
        offset = slot - block * p.block_size;
    }
    return static_cast<CacheT*>(p.cache) + block * p.block_stride + offset * p.entry_stride;
}

// Two rope outputs from one pair: separately rounded products, never contracted into
// an FMA, so the result is the exactly-rounded evaluation of the definition.
__device__ __forceinline__ void k3_rotate(float x1, float x2, float c, float s, float& o1,
                                          float& o2) {
    o1 = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
    o2 = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
}

struct alignas(8) k3_f32x2 { float x, y; };

__device__ __forceinline__ void k3_store_pair(float* p, float a, float b) {
    k3_f32x2 v;
    v.x = a;
    v.y = b;
    *reinterpret_cast<k3_f32x2*>(p) = v;
}
template <typename T>
__device__ __forceinline__ void k3_store_pair(T* p, float a, float b) {
    *reinterpret_cast<k3_u32*>(p) = k3_pack2(a, b, T());
}
__device__ __forceinline__ void k3_store_pair(k3_fp8* p, float a, float b) {
    *reinterpret_cast<k3_u16*>(p) = static_cast<k3_u16>(k3_pack2(a, b, k3_fp8()));
}

__device__ __forceinline__ void k3_load_pair(const float* p, float& a, float& b) {
    const k3_f32x2 v = *reinterpret_cast<const k3_f32x2*>(p);
    a = v.x;
    b = v.y;
}
template <typename T>
__device__ __forceinline__ void k3_load_pair(const T* p, float& a, float& b) {
    const k3_u32 w = *reinterpret_cast<const k3_u32*>(p);
    a = k3_lo_f32(w, T());
    b = k3_hi_f32(w, T());
}

// The rope kernels' critical path is positions (DRAM) -> cos/sin (L2) -> stores: each
// warp handles one token (the host launches a warp per token), so the second latency
// cannot overlap the next token's loads. A warp instead asks L2 for the
// positions of the tokens K3_POS_AHEAD later, which a warp of a later block then finds
// in L2 rather than in DRAM. A hint only: nothing depends on it for correctness.
#ifndef K3_POS_AHEAD
#define K3_POS_AHEAD 4096
#endif
template <int ROPE>
__device__ __forceinline__ void k3_prefetch_positions(const k3_mla_params& p, k3_i64 t0, int lane) {
    if (ROPE != K3_ROPE_NONE && K3_POS_AHEAD > 0 && lane == 0 && (t0 & 15) == 0 &&
        t0 + K3_POS_AHEAD < p.num_tokens) {
        asm volatile("prefetch.global.L2 [%0];" ::"l"(p.positions + t0 + K3_POS_AHEAD));
    }
}

// The common shape's extents: from the parameters (RANK = 0), or fixed at compile time
// for the 512 + 64 of DeepSeek-style MLA, which saves the per-lane bounds arithmetic.
template <typename InT, int RANK, int ROPE_DIM> struct k3_mla_shape {
    enum { N = k3_lanes<InT>::N, VPL = sizeof(InT) };  // VPL vectors per lane cover 512 values
    int rank;
    int nvec;
    int half;
    __device__ __forceinline__ explicit k3_mla_shape(const k3_mla_params& p)
        : rank(RANK ? RANK : p.rank), nvec((RANK ? RANK : p.rank) / N),
          half((ROPE_DIM ? ROPE_DIM : p.rope_dim) >> 1) {}
};

// One token's loads: the latent row (16-byte vectors) and this lane's k_pe pair.
struct k3_mla_row {
    k3_i64 slot;
    k3_i64 pos;
    k3_vec16 v[4];
    float x1;
    float x2;
};

template <typename InT, int ROPE, typename Shape>
__device__ __forceinline__ void k3_mla_load(const k3_mla_params& p, const Shape& sh, k3_i64 t,
                                            int lane, k3_mla_row& r) {
    const InT* src = static_cast<const InT*>(p.kv_c) + t * p.kv_c_stride;
#pragma unroll
    for (int k = 0; k < Shape::VPL; ++k) {
        const int i = lane + 32 * k;
        if (i < sh.nvec) {
            r.v[k] = *reinterpret_cast<const k3_vec16*>(src + i * Shape::N);
        }
    }
    const InT* pe = static_cast<const InT*>(p.k_pe) + t * p.k_pe_stride;
    r.x1 = 0.0f;
    r.x2 = 0.0f;
    if (lane < sh.half) {
        if (ROPE == K3_ROPE_GPTJ && p.pe_vec) {
            k3_load_pair(pe + 2 * lane, r.x1, r.x2);
        } else if (ROPE == K3_ROPE_GPTJ) {
            r.x1 = k3_to_f32(pe[2 * lane]);
            r.x2 = k3_to_f32(pe[2 * lane + 1]);
        } else {  // neox pairs (j, j + half); no rope: the same two elements, copied
            r.x1 = k3_to_f32(pe[lane]);
            r.x2 = k3_to_f32(pe[lane + sh.half]);
        }
    }
    r.slot = p.slots[t];
    r.pos = ROPE != K3_ROPE_NONE ? p.positions[t] : 0;
}

// One token's stores. `quant` converts input values, `exact` the rotated rope values
// (any fp32, not input values).
template <typename InT, typename CacheT, int ROPE, typename Shape, typename Quant>
__device__ __forceinline__ void k3_mla_store(const k3_mla_params& p, const Shape& sh,
                                             const Quant& quant, const k3_quant<CacheT>& exact,
                                             int lane, const k3_mla_row& r) {
    CacheT* dst = k3_entry<CacheT>(p, r.slot);
#pragma unroll
    for (int k = 0; k < Shape::VPL; ++k) {
        const int i = lane + 32 * k;
        if (i < sh.nvec) {
            float f[Shape::N];
            k3_unpack(r.v[k], f, InT());
#pragma unroll
            for (int e = 0; e < Shape::N; ++e) f[e] = quant(f[e]);
            k3_store_vec(dst + i * Shape::N, f);
        }
    }
    if (lane < sh.half) {
        CacheT* dpe = dst + sh.rank;
        const float o1 = ROPE == K3_ROPE_NONE ? quant(r.x1) : exact(r.x1);
        const float o2 = ROPE == K3_ROPE_NONE ? quant(r.x2) : exact(r.x2);
        if (ROPE == K3_ROPE_GPTJ && p.pe_vec) {
            k3_store_pair(dpe + 2 * lane, o1, o2);
        } else if (ROPE == K3_ROPE_GPTJ) {
            k3_store(dpe + 2 * lane, o1);
            k3_store(dpe + 2 * lane + 1, o2);
        } else {
            k3_store(dpe + lane, o1);
            k3_store(dpe + lane + sh.half, o2);
        }
    }
}

// Whether the latent values take the one-multiply conversion: the host's verdict for a
// scale passed by value, else the block checks the scale in device memory together,
// before any load (so the check's registers are free again when the loads need theirs).
// Every thread of the block calls this, once.
template <typename InT, typename CacheT>
__device__ __forceinline__ bool k3_mla_mul_exact(const k3_mla_params& p,
                                                 const k3_quant<CacheT>& quant) {
    typedef k3_mul_check<InT, CacheT> Check;
    if (!Check::enabled) {
        return false;
    }
    if (p.scale_ptr == nullptr) {
        return p.mul_exact != 0;
    }
    return __syncthreads_and(Check::local(quant, threadIdx.x, blockDim.x)) != 0;
}

// The common shape (16-byte vectors, rank <= 32 lanes * 16 bytes, rope_dim <= 64): one
// warp per token, every load of it (the whole latent row, k_pe, slot, position) issued
// before it waits on any; only cos/sin waits for the position. Then it converts and
// stores. The latent part (and an unrotated k_pe) is converted with one multiply per
// value where k3_mul_check proved that exact for this scale, else with the division.
template <typename InT, typename CacheT, int ROPE, int RANK, int ROPE_DIM>
__device__ __forceinline__ void k3_mla_fast(const k3_mla_params& p) {
    typedef k3_mla_shape<InT, RANK, ROPE_DIM> Shape;
    const Shape sh(p);
    const int lane = threadIdx.x & 31;
    const k3_i64 warps = (static_cast<k3_i64>(gridDim.x) * blockDim.x) >> 5;
    const k3_quant<CacheT> quant(p);
    const bool mul_exact = k3_mla_mul_exact<InT, CacheT>(p, quant);

    for (k3_i64 t = (static_cast<k3_i64>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
         t < p.num_tokens; t += warps) {
        k3_mla_row r;
        k3_mla_load<InT, ROPE>(p, sh, t, lane, r);
        k3_prefetch_positions<ROPE>(p, t, lane);
        if (r.slot < 0 || r.slot >= p.num_slots) {
            continue;  // -1 is padding; anything past the cache is never written
        }
        if (ROPE != K3_ROPE_NONE) {
            if (r.pos < 0 || r.pos >= p.max_pos) {
                continue;  // never read outside the cos/sin cache
            }
            if (lane < sh.half) {
                const k3_i64 row = r.pos * p.cos_sin_stride;
                const float c = k3_cos_sin<InT>(p, row + lane);
                const float s = k3_cos_sin<InT>(p, row + sh.half + lane);
                k3_rotate(r.x1, r.x2, c, s, r.x1, r.x2);
            }
        }
        if (mul_exact) {
            k3_mla_store<InT, CacheT, ROPE>(p, sh, k3_quant_mul<CacheT>(quant), quant, lane, r);
        } else {
            k3_mla_store<InT, CacheT, ROPE>(p, sh, quant, quant, lane, r);
        }
    }
}

// Any shape: one token per warp, element-wise where vectors do not fit.
template <typename InT, typename CacheT, int ROPE>
__device__ __forceinline__ void k3_mla_general(const k3_mla_params& p) {
    const int lane = threadIdx.x & 31;
    const k3_i64 warps = (static_cast<k3_i64>(gridDim.x) * blockDim.x) >> 5;
    const InT* __restrict__ kv_c = static_cast<const InT*>(p.kv_c);
    const InT* __restrict__ k_pe = static_cast<const InT*>(p.k_pe);
    const k3_quant<CacheT> quant(p);
    const int n = k3_lanes<InT>::N;

    for (k3_i64 t = (static_cast<k3_i64>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
         t < p.num_tokens; t += warps) {
        const k3_i64 slot = p.slots[t];
        if (slot < 0 || slot >= p.num_slots) {
            continue;  // -1 is padding; anything past the cache is never written
        }
        k3_i64 pos = 0;
        if (ROPE != K3_ROPE_NONE) {
            pos = p.positions[t];
            if (pos < 0 || pos >= p.max_pos) {
                continue;  // never read outside the cos/sin cache
            }
        }
        CacheT* __restrict__ dst = k3_entry<CacheT>(p, slot);
        const InT* __restrict__ src = kv_c + t * p.kv_c_stride;

        if (p.vec) {
            for (int i = lane; i < p.rank / n; i += 32) {
                float a[n];
                k3_load_vec(src + i * n, a);
#pragma unroll
                for (int k = 0; k < n; ++k) a[k] = quant(a[k]);
                k3_store_vec(dst + i * n, a);
            }
        } else {
            for (int i = lane; i < p.rank; i += 32) {
                k3_store(dst + i, quant(k3_to_f32(src[i])));
            }
        }

        const InT* __restrict__ pe = k_pe + t * p.k_pe_stride;
        CacheT* __restrict__ dpe = dst + p.rank;
        if (ROPE == K3_ROPE_NONE) {
            for (int j = lane; j < p.rope_dim; j += 32) {
                k3_store(dpe + j, quant(k3_to_f32(pe[j])));
            }
        } else {
            const int half = p.rope_dim >> 1;
            const k3_i64 row = pos * p.cos_sin_stride;
            for (int j = lane; j < half; j += 32) {
                const int i1 = ROPE == K3_ROPE_GPTJ ? 2 * j : j;
                const int i2 = ROPE == K3_ROPE_GPTJ ? 2 * j + 1 : j + half;
                float o1;
                float o2;
                k3_rotate(k3_to_f32(pe[i1]), k3_to_f32(pe[i2]), k3_cos_sin<InT>(p, row + j),
                          k3_cos_sin<InT>(p, row + half + j), o1, o2);
                k3_store(dpe + i1, quant(o1));
                k3_store(dpe + i2, quant(o2));
            }
        }
    }
}

template <typename InT, typename CacheT, int ROPE>
__device__ __forceinline__ void k3_mla_body(const k3_mla_params& p) {
    // Uniform over the grid: the host guarantees rope_dim is even when ROPE != NONE.
    const bool fast = p.vec && p.rank <= 512 && p.rope_dim <= 64 &&
                      (ROPE != K3_ROPE_NONE || (p.rope_dim & 1) == 0);
    if (fast) {
        k3_mla_fast<InT, CacheT, ROPE, 0, 0>(p);
    } else {
        k3_mla_general<InT, CacheT, ROPE>(p);
    }
}

// Blocks of 256 threads. Two entry points each: any shape, and rank 512 + rope 64 with
// 16-byte vectors (params.vec), which the host launches when it applies. Without the
// general path beside it, the latter needs fewer registers: more warps fit on an SM.
#define K3_MLA(IN, InT, OUT, CacheT, RNAME, ROPE)                                            \
    extern "C" __global__ void __launch_bounds__(256) k3_mla_kv_cache_##IN##_##OUT##_##RNAME( \
        const k3_mla_params p) {                                                            \
        k3_mla_body<InT, CacheT, ROPE>(p);                                                  \
    }                                                                                       \
    extern "C" __global__ void __launch_bounds__(256)                                       \
        k3_mla_kv_cache_##IN##_##OUT##_##RNAME##_512_64(const k3_mla_params p) {            \
        k3_mla_fast<InT, CacheT, ROPE, 512, 64>(p);                                         \
    }

#define K3_MLA_ROPES(IN, InT, OUT, CacheT)                                                   \
    K3_MLA(IN, InT, OUT, CacheT, none, K3_ROPE_NONE)                                        \
    K3_MLA(IN, InT, OUT, CacheT, neox, K3_ROPE_NEOX)                                        \
    K3_MLA(IN, InT, OUT, CacheT, gptj, K3_ROPE_GPTJ)

K3_MLA_ROPES(f32, float, f32, float)
K3_MLA_ROPES(f32, float, fp8, k3_fp8)
K3_MLA_ROPES(f16, k3_f16, f16, k3_f16)
K3_MLA_ROPES(f16, k3_f16, fp8, k3_fp8)
K3_MLA_ROPES(bf16, k3_bf16, bf16, k3_bf16)
K3_MLA_ROPES(bf16, k3_bf16, fp8, k3_fp8)
