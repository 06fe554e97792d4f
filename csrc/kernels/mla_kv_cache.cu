// MLA key concat into a paged KV cache: for each token t with slot_mapping[t] >= 0,
//   cache[slot / block_size, slot % block_size, :rank + rope_dim] = [kv_c[t], rope(k_pe[t])]
// with the cache in the input dtype or float8 e4m3fn holding x / scale (saturated).
//
// Grid-stride over tokens, one warp per token (two at a time in the common shape; the
// bf16 -> FP8 kernels run on a grid sized to the GPU and pipeline successive pairs). The
// latent part moves in 16-byte vectors when the host found every pointer and stride
// aligned (params.vec), else element-wise.
#include "k3_common.cuh"

// Kernel parameters, passed by value. csrc/host/k3_host.c declares the same struct.
struct k3_mla_params {
    const void* kv_c;
    const void* k_pe;
    const k3_i64* positions;
    const void* cos_sin;
    const k3_i64* slots;
    void* cache;
    const float* scale_ptr;  // device pointer to the scale, or null: use `scale`
    k3_i64 num_tokens;
    k3_i64 kv_c_stride;  // elements between tokens
    k3_i64 k_pe_stride;
    k3_i64 cos_sin_stride;  // elements between positions
    k3_i64 block_stride;  // cache elements between blocks
    k3_i64 entry_stride;  // cache elements between slots of a block
    k3_i64 block_size;
    k3_i64 num_slots;  // num_blocks * block_size
    k3_i64 max_pos;
    float scale;
    int rank;
    int rope_dim;
    int cos_sin_f32;  // cos/sin cache is fp32 (else the input dtype)
    int vec;  // kv_c rows and cache entries take 16-byte vectors
    int pe_vec;  // k_pe and the cache's rope part take 2-element accesses
    int block_shift;  // log2(block_size) when it is a power of two, else -1
    int reserved;
};
static_assert(sizeof(k3_mla_params) == 160, "k3_mla_params layout changed");

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
    __device__ __forceinline__ float operator()(float x) const {
        const float q0 = __fmul_rn(x, r);
        const float q1 = __fmaf_rn(__fmaf_rn(-s, q0, x), r, q0);
        const float q2 = __fmaf_rn(__fmaf_rn(-s, q1, x), r, q1);
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

// Whether e4m3(x * RN(1/s)) == e4m3(RN(x / s)) for every bf16 x, decided by the warp.
//
// x * r and RN(x / s) differ by at most 2 ulp. The e4m3 result (saturating, subnormals
// included) only changes at a midpoint between two e4m3 values or at 2^-10, and every
// such point is an fp32 number whose low 19 mantissa bits are zero. So the two agree
// unless one of those points lies between the fp32 values. With s = sm * 2^e
// (sm in [1, 2)) and x = xm * 2^k, both quotients are the ones of xm / sm scaled by
// 2^(k - e) (exact for normal results; outside that range both become 0 or +-448), so
// checking the 128 bf16 significands xm once against sm decides it for every bf16 x.
// 1/s must be normal for RN(1/s) = RN(1/sm) * 2^-e: scales outside [2^-64, 2^64), and
// zero, negative or NaN ones, keep the division.
template <typename InT, typename CacheT>
__device__ __forceinline__ bool k3_quant_mul_exact(const k3_quant<CacheT>&, int) {
    return false;
}
template <>
__device__ __forceinline__ bool k3_quant_mul_exact<k3_bf16, k3_fp8>(const k3_quant<k3_fp8>& q,
                                                                     int lane) {
    const k3_u32 sb = __float_as_uint(q.s);
    bool ok = sb >= 0x1f800000u && sb < 0x5f800000u;  // 2^-64 <= s < 2^64, sign clear
    const float sm = __uint_as_float((sb & 0x007fffffu) | 0x3f800000u);
    const float rm = __frcp_rn(sm);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float xm = __uint_as_float(0x3f800000u | (static_cast<k3_u32>(lane + 32 * i) << 16));
        const k3_u32 a = __float_as_uint(__fdiv_rn(xm, sm));
        const k3_u32 b = __float_as_uint(__fmul_rn(xm, rm));
        const k3_u32 lo = a < b ? a : b;
        const k3_u32 hi = a < b ? b : a;
        ok = ok && (a == b || (hi & 0xfff80000u) < lo);
    }
    return __all_sync(0xffffffffu, ok);
}

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
// warp handles its tokens once (the host launches one warp per two tokens), so the
// second latency cannot overlap the next tokens' loads. A warp instead asks L2 for the
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

// The common shape (16-byte vectors, rank <= 32 lanes * 16 bytes, rope_dim <= 64):
// a warp takes TPW tokens at a time and issues every load of all of them (slots,
// positions, the whole latent rows, k_pe) before it waits on any; only cos/sin waits
// for the positions. Then it converts and stores.
template <typename InT, typename CacheT, int ROPE>
__device__ __forceinline__ void k3_mla_fast(const k3_mla_params& p) {
    enum { TPW = 2, N = k3_lanes<InT>::N, VPL = sizeof(InT) };  // VPL * N * 32 = 512
    const int lane = threadIdx.x & 31;
    const k3_i64 warps = (static_cast<k3_i64>(gridDim.x) * blockDim.x) >> 5;
    const k3_quant<CacheT> quant(p);
    const int nvec = p.rank / N;
    const int half = p.rope_dim >> 1;

    for (k3_i64 t0 = ((static_cast<k3_i64>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5) * TPW;
         t0 < p.num_tokens; t0 += warps * TPW) {
        k3_i64 slot[TPW];
        k3_i64 pos[TPW];
        k3_vec16 v[TPW][VPL];
        float x1[TPW];
        float x2[TPW];
#pragma unroll
        for (int u = 0; u < TPW; ++u) {
            const k3_i64 t = t0 + u;
            const bool live = t < p.num_tokens;
            slot[u] = live ? p.slots[t] : -1;
            pos[u] = (ROPE != K3_ROPE_NONE && live) ? p.positions[t] : 0;
            const InT* src = static_cast<const InT*>(p.kv_c) + t * p.kv_c_stride;
#pragma unroll
            for (int k = 0; k < VPL; ++k) {
                const int i = lane + 32 * k;
                if (live && i < nvec) {
                    v[u][k] = *reinterpret_cast<const k3_vec16*>(src + i * N);
                }
            }
            const InT* pe = static_cast<const InT*>(p.k_pe) + t * p.k_pe_stride;
            x1[u] = 0.0f;
            x2[u] = 0.0f;
            if (live && lane < half) {
                if (ROPE == K3_ROPE_GPTJ && p.pe_vec) {
                    k3_load_pair(pe + 2 * lane, x1[u], x2[u]);
                } else if (ROPE == K3_ROPE_GPTJ) {
                    x1[u] = k3_to_f32(pe[2 * lane]);
                    x2[u] = k3_to_f32(pe[2 * lane + 1]);
                } else {  // neox pairs (j, j + half); no rope: the same two elements, copied
                    x1[u] = k3_to_f32(pe[lane]);
                    x2[u] = k3_to_f32(pe[lane + half]);
                }
            }
        }
        k3_prefetch_positions<ROPE>(p, t0, lane);
        if (ROPE != K3_ROPE_NONE) {
#pragma unroll
            for (int u = 0; u < TPW; ++u) {
                // Tokens past the end or with a position outside the table are not written.
                if (slot[u] >= 0 && slot[u] < p.num_slots && pos[u] >= 0 && pos[u] < p.max_pos &&
                    lane < half) {
                    const k3_i64 row = pos[u] * p.cos_sin_stride;
                    const float c = k3_cos_sin<InT>(p, row + lane);
                    const float s = k3_cos_sin<InT>(p, row + half + lane);
                    k3_rotate(x1[u], x2[u], c, s, x1[u], x2[u]);
                }
            }
        }
#pragma unroll
        for (int u = 0; u < TPW; ++u) {
            if (slot[u] < 0 || slot[u] >= p.num_slots) {
                continue;  // -1 is padding; anything past the cache is never written
            }
            if (ROPE != K3_ROPE_NONE && (pos[u] < 0 || pos[u] >= p.max_pos)) {
                continue;
            }
            CacheT* dst = k3_entry<CacheT>(p, slot[u]);
#pragma unroll
            for (int k = 0; k < VPL; ++k) {
                const int i = lane + 32 * k;
                if (i < nvec) {
                    float f[N];
                    k3_unpack(v[u][k], f, InT());
#pragma unroll
                    for (int e = 0; e < N; ++e) f[e] = quant(f[e]);
                    k3_store_vec(dst + i * N, f);
                }
            }
            if (lane < half) {
                CacheT* dpe = dst + p.rank;
                if (ROPE == K3_ROPE_GPTJ && p.pe_vec) {
                    k3_store_pair(dpe + 2 * lane, quant(x1[u]), quant(x2[u]));
                } else if (ROPE == K3_ROPE_GPTJ) {
                    k3_store(dpe + 2 * lane, quant(x1[u]));
                    k3_store(dpe + 2 * lane + 1, quant(x2[u]));
                } else {
                    k3_store(dpe + lane, quant(x1[u]));
                    k3_store(dpe + lane + half, quant(x2[u]));
                }
            }
        }
    }
}

// The store half of k3_mla_fast_mul: convert TPW tokens and write them. `quant` converts
// input values, `exact` the rotated rope values (any fp32, not input values).
template <typename InT, typename CacheT, int ROPE, int TPW, int VPL, typename Quant>
__device__ __forceinline__ void k3_mla_fast_store(const k3_mla_params& p, const Quant& quant,
                                                  const k3_quant<CacheT>& exact, int lane,
                                                  const k3_i64 (&slot)[TPW],
                                                  const k3_i64 (&pos)[TPW],
                                                  const k3_vec16 (&v)[TPW][VPL],
                                                  const float (&x1)[TPW], const float (&x2)[TPW]) {
    enum { N = k3_lanes<InT>::N };
    const int nvec = p.rank / N;
    const int half = p.rope_dim >> 1;
#pragma unroll
    for (int u = 0; u < TPW; ++u) {
        if (slot[u] < 0 || slot[u] >= p.num_slots) {
            continue;  // -1 is padding; anything past the cache is never written
        }
        if (ROPE != K3_ROPE_NONE && (pos[u] < 0 || pos[u] >= p.max_pos)) {
            continue;
        }
        CacheT* dst = k3_entry<CacheT>(p, slot[u]);
#pragma unroll
        for (int k = 0; k < VPL; ++k) {
            const int i = lane + 32 * k;
            if (i < nvec) {
                float f[N];
                k3_unpack(v[u][k], f, InT());
#pragma unroll
                for (int e = 0; e < N; ++e) f[e] = quant(f[e]);
                k3_store_vec(dst + i * N, f);
            }
        }
        if (lane < half) {
            CacheT* dpe = dst + p.rank;
            const float o1 = ROPE == K3_ROPE_NONE ? quant(x1[u]) : exact(x1[u]);
            const float o2 = ROPE == K3_ROPE_NONE ? quant(x2[u]) : exact(x2[u]);
            if (ROPE == K3_ROPE_GPTJ && p.pe_vec) {
                k3_store_pair(dpe + 2 * lane, o1, o2);
            } else if (ROPE == K3_ROPE_GPTJ) {
                k3_store(dpe + 2 * lane, o1);
                k3_store(dpe + 2 * lane + 1, o2);
            } else {
                k3_store(dpe + lane, o1);
                k3_store(dpe + lane + half, o2);
            }
        }
    }
}

// Slots and positions of the TPW tokens from t0 (-1 / 0 past the end: nothing loaded).
template <int ROPE, int TPW>
__device__ __forceinline__ void k3_mla_load_meta(const k3_mla_params& p, k3_i64 t0,
                                                 k3_i64 (&slot)[TPW], k3_i64 (&pos)[TPW]) {
#pragma unroll
    for (int u = 0; u < TPW; ++u) {
        const k3_i64 t = t0 + u;
        const bool live = t < p.num_tokens;
        slot[u] = live ? p.slots[t] : -1;
        pos[u] = (ROPE != K3_ROPE_NONE && live) ? p.positions[t] : 0;
    }
}

// The latent rows and the k_pe pairs of the TPW tokens from t0.
template <typename InT, int ROPE, int TPW, int VPL>
__device__ __forceinline__ void k3_mla_load_data(const k3_mla_params& p, k3_i64 t0, int lane,
                                                 k3_vec16 (&v)[TPW][VPL], float (&x1)[TPW],
                                                 float (&x2)[TPW]) {
    enum { N = k3_lanes<InT>::N };
    const int nvec = p.rank / N;
    const int half = p.rope_dim >> 1;
#pragma unroll
    for (int u = 0; u < TPW; ++u) {
        const k3_i64 t = t0 + u;
        const bool live = t < p.num_tokens;
        const InT* src = static_cast<const InT*>(p.kv_c) + t * p.kv_c_stride;
#pragma unroll
        for (int k = 0; k < VPL; ++k) {
            const int i = lane + 32 * k;
            if (live && i < nvec) {
                v[u][k] = *reinterpret_cast<const k3_vec16*>(src + i * N);
            }
        }
        const InT* pe = static_cast<const InT*>(p.k_pe) + t * p.k_pe_stride;
        x1[u] = 0.0f;
        x2[u] = 0.0f;
        if (live && lane < half) {
            if (ROPE == K3_ROPE_GPTJ && p.pe_vec) {
                k3_load_pair(pe + 2 * lane, x1[u], x2[u]);
            } else if (ROPE == K3_ROPE_GPTJ) {
                x1[u] = k3_to_f32(pe[2 * lane]);
                x2[u] = k3_to_f32(pe[2 * lane + 1]);
            } else {  // neox pairs (j, j + half); no rope: the same two elements, copied
                x1[u] = k3_to_f32(pe[lane]);
                x2[u] = k3_to_f32(pe[lane + half]);
            }
        }
    }
}

// k3_mla_fast for a bf16 input and an FP8 cache, software-pipelined. The host launches
// a grid sized to the GPU for it, so each warp strides over many token pairs: while it
// rotates, converts and stores one pair, every load of the next pair (slots, positions,
// latent rows, k_pe) is already in flight, and the cos/sin rows (which wait on the
// positions) are read for a pair whose loads were issued an iteration earlier. The latent part (and an unrotated k_pe) is converted with one
// multiply per value when k3_quant_mul_exact proved that exact for this scale, else
// with the division.
template <typename InT, typename CacheT, int ROPE>
__device__ __forceinline__ void k3_mla_fast_mul(const k3_mla_params& p) {
    enum { TPW = 2, VPL = sizeof(InT) };  // VPL * N * 32 = 512
    const int lane = threadIdx.x & 31;
    const k3_i64 step = ((static_cast<k3_i64>(gridDim.x) * blockDim.x) >> 5) * TPW;
    const k3_quant<CacheT> quant(p);
    const int half = p.rope_dim >> 1;

    k3_i64 t0 = ((static_cast<k3_i64>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5) * TPW;
    if (t0 >= p.num_tokens) {
        return;
    }
    k3_i64 slot[TPW];
    k3_i64 pos[TPW];
    k3_vec16 v[TPW][VPL];
    float x1[TPW];
    float x2[TPW];
    k3_mla_load_meta<ROPE, TPW>(p, t0, slot, pos);
    k3_mla_load_data<InT, ROPE, TPW, VPL>(p, t0, lane, v, x1, x2);
    // Warp-uniform; decided while the first loads are in flight (it needs none of them).
    const bool mul_exact = k3_quant_mul_exact<InT, CacheT>(quant, lane);

    for (;;) {
        const k3_i64 t1 = t0 + step;
        k3_vec16 v_n[TPW][VPL];
        float x1_n[TPW];
        float x2_n[TPW];
        k3_i64 slot_n[TPW];
        k3_i64 pos_n[TPW];
        k3_mla_load_meta<ROPE, TPW>(p, t1, slot_n, pos_n);
        k3_mla_load_data<InT, ROPE, TPW, VPL>(p, t1, lane, v_n, x1_n, x2_n);
        if (ROPE != K3_ROPE_NONE) {
#pragma unroll
            for (int u = 0; u < TPW; ++u) {
                // Tokens past the end or with a position outside the table are not written.
                if (slot[u] >= 0 && slot[u] < p.num_slots && pos[u] >= 0 && pos[u] < p.max_pos &&
                    lane < half) {
                    const k3_i64 row = pos[u] * p.cos_sin_stride;
                    const float c = k3_cos_sin<InT>(p, row + lane);
                    const float s = k3_cos_sin<InT>(p, row + half + lane);
                    k3_rotate(x1[u], x2[u], c, s, x1[u], x2[u]);
                }
            }
        }
        if (mul_exact) {
            k3_mla_fast_store<InT, CacheT, ROPE, TPW, VPL>(p, k3_quant_mul<CacheT>(quant), quant,
                                                          lane, slot, pos, v, x1, x2);
        } else {
            k3_mla_fast_store<InT, CacheT, ROPE, TPW, VPL>(p, quant, quant, lane, slot, pos, v, x1,
                                                          x2);
        }
        if (t1 >= p.num_tokens) {
            break;
        }
        t0 = t1;
#pragma unroll
        for (int u = 0; u < TPW; ++u) {
            slot[u] = slot_n[u];
            pos[u] = pos_n[u];
            x1[u] = x1_n[u];
            x2[u] = x2_n[u];
#pragma unroll
            for (int k = 0; k < VPL; ++k) v[u][k] = v_n[u][k];
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
            const int nvec = p.rank / n;
            int i = lane;
            for (; i + 32 < nvec; i += 64) {  // two loads in flight before the stores
                float a[n];
                float b[n];
                k3_load_vec(src + i * n, a);
                k3_load_vec(src + (i + 32) * n, b);
#pragma unroll
                for (int k = 0; k < n; ++k) {
                    a[k] = quant(a[k]);
                    b[k] = quant(b[k]);
                }
                k3_store_vec(dst + i * n, a);
                k3_store_vec(dst + (i + 32) * n, b);
            }
            if (i < nvec) {
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

template <typename InT, typename CacheT> struct k3_is_bf16_fp8 { enum { value = 0 }; };
template <> struct k3_is_bf16_fp8<k3_bf16, k3_fp8> { enum { value = 1 }; };

template <typename InT, typename CacheT, int ROPE>
__device__ __forceinline__ void k3_mla_body(const k3_mla_params& p) {
    // Uniform over the grid: the host guarantees rope_dim is even when ROPE != NONE.
    const bool fast = p.vec && p.rank <= 512 && p.rope_dim <= 64 &&
                      (ROPE != K3_ROPE_NONE || (p.rope_dim & 1) == 0);
    if (fast && k3_is_bf16_fp8<InT, CacheT>::value) {
        k3_mla_fast_mul<InT, CacheT, ROPE>(p);
    } else if (fast) {
        k3_mla_fast<InT, CacheT, ROPE>(p);
    } else {
        k3_mla_general<InT, CacheT, ROPE>(p);
    }
}

// Blocks of 256 threads; the pipelined bf16 -> FP8 kernels are held to 80 registers so
// that three blocks fit on an SM (the host sizes their grid to what is resident).
#define K3_MLA(IN, InT, OUT, CacheT, RNAME, ROPE, BOUNDS)                                    \
    extern "C" __global__ void BOUNDS k3_mla_kv_cache_##IN##_##OUT##_##RNAME(               \
        const k3_mla_params p) {                                                            \
        k3_mla_body<InT, CacheT, ROPE>(p);                                                  \
    }

#define K3_MLA_ROPES_B(IN, InT, OUT, CacheT, BOUNDS)                                         \
    K3_MLA(IN, InT, OUT, CacheT, none, K3_ROPE_NONE, BOUNDS)                                \
    K3_MLA(IN, InT, OUT, CacheT, neox, K3_ROPE_NEOX, BOUNDS)                                \
    K3_MLA(IN, InT, OUT, CacheT, gptj, K3_ROPE_GPTJ, BOUNDS)

#define K3_MLA_ROPES(IN, InT, OUT, CacheT)                                                   \
    K3_MLA_ROPES_B(IN, InT, OUT, CacheT, __launch_bounds__(256))

K3_MLA_ROPES(f32, float, f32, float)
K3_MLA_ROPES(f32, float, fp8, k3_fp8)
K3_MLA_ROPES(f16, k3_f16, f16, k3_f16)
K3_MLA_ROPES(f16, k3_f16, fp8, k3_fp8)
K3_MLA_ROPES(bf16, k3_bf16, bf16, k3_bf16)
K3_MLA_ROPES_B(bf16, k3_bf16, fp8, k3_fp8, __launch_bounds__(256, 3))
