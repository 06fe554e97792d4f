// MLA key concat into a paged KV cache: for each token t with slot_mapping[t] >= 0,
//   cache[slot / block_size, slot % block_size, :rank + rope_dim] = [kv_c[t], rope(k_pe[t])]
// with the cache in the input dtype or float8 e4m3fn holding x / scale (saturated).
//
// One warp per token, grid-stride over tokens. The latent part moves in 16-byte vectors
// when the host found every pointer and stride aligned (params.vec), else element-wise.
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
    int vec;
    int reserved;
};
static_assert(sizeof(k3_mla_params) == 152, "k3_mla_params layout changed");

enum { K3_ROPE_NONE = 0, K3_ROPE_NEOX = 1, K3_ROPE_GPTJ = 2 };

template <typename InT, typename CacheT> struct k3_quant {
    __device__ __forceinline__ static float apply(float x, float) { return x; }
};
template <typename InT> struct k3_quant<InT, k3_fp8> {
    // True IEEE division, as vLLM and the PyTorch reference compute x / scale.
    __device__ __forceinline__ static float apply(float x, float scale) { return __fdiv_rn(x, scale); }
};

template <typename InT>
__device__ __forceinline__ float k3_cos_sin(const k3_mla_params& p, k3_i64 i) {
    if (p.cos_sin_f32) {
        return static_cast<const float*>(p.cos_sin)[i];
    }
    return k3_to_f32(static_cast<const InT*>(p.cos_sin)[i]);
}

template <typename InT, typename CacheT, int ROPE>
__device__ __forceinline__ void k3_mla_body(const k3_mla_params& p) {
    const int lane = threadIdx.x & 31;
    const k3_i64 warps = (static_cast<k3_i64>(gridDim.x) * blockDim.x) >> 5;
    const InT* __restrict__ kv_c = static_cast<const InT*>(p.kv_c);
    const InT* __restrict__ k_pe = static_cast<const InT*>(p.k_pe);
    CacheT* __restrict__ cache = static_cast<CacheT*>(p.cache);
    float scale = 1.0f;
    if (sizeof(CacheT) == 1) {
        scale = p.scale_ptr != nullptr ? *p.scale_ptr : p.scale;
    }
    typedef k3_quant<InT, CacheT> Q;
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
        CacheT* __restrict__ dst =
            cache + (slot / p.block_size) * p.block_stride + (slot % p.block_size) * p.entry_stride;
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
                    a[k] = Q::apply(a[k], scale);
                    b[k] = Q::apply(b[k], scale);
                }
                k3_store_vec(dst + i * n, a);
                k3_store_vec(dst + (i + 32) * n, b);
            }
            if (i < nvec) {
                float a[n];
                k3_load_vec(src + i * n, a);
#pragma unroll
                for (int k = 0; k < n; ++k) a[k] = Q::apply(a[k], scale);
                k3_store_vec(dst + i * n, a);
            }
        } else {
            for (int i = lane; i < p.rank; i += 32) {
                k3_store(dst + i, Q::apply(k3_to_f32(src[i]), scale));
            }
        }

        const InT* __restrict__ pe = k_pe + t * p.k_pe_stride;
        CacheT* __restrict__ dpe = dst + p.rank;
        if (ROPE == K3_ROPE_NONE) {
            for (int j = lane; j < p.rope_dim; j += 32) {
                k3_store(dpe + j, Q::apply(k3_to_f32(pe[j]), scale));
            }
        } else {
            const int half = p.rope_dim >> 1;
            const k3_i64 row = pos * p.cos_sin_stride;
            for (int j = lane; j < half; j += 32) {
                const int i1 = ROPE == K3_ROPE_GPTJ ? 2 * j : j;
                const int i2 = ROPE == K3_ROPE_GPTJ ? 2 * j + 1 : j + half;
                const float x1 = k3_to_f32(pe[i1]);
                const float x2 = k3_to_f32(pe[i2]);
                const float c = k3_cos_sin<InT>(p, row + j);
                const float s = k3_cos_sin<InT>(p, row + half + j);
                // Separately rounded products, never contracted into an FMA: the result
                // is the exactly-rounded evaluation of the definition.
                const float o1 = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
                const float o2 = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
                k3_store(dpe + i1, Q::apply(o1, scale));
                k3_store(dpe + i2, Q::apply(o2, scale));
            }
        }
    }
}

#define K3_MLA(IN, InT, OUT, CacheT, RNAME, ROPE)                                            \
    extern "C" __global__ void __launch_bounds__(256)                                       \
        k3_mla_kv_cache_##IN##_##OUT##_##RNAME(const k3_mla_params p) {                     \
        k3_mla_body<InT, CacheT, ROPE>(p);                                                  \
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
