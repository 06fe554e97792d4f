// SwiGLU: x is [rows, 2d] (gate | up), out[r, i] = silu(g) * u with, when a clamp is
// given, g = min(gate, clamp) and u = clip(up, -clamp, clamp) (the MoE expert epilogue).
//
// Rows are spread over gridDim.y, columns over gridDim.x (grid-stride both ways). The
// columns move in 16-byte vectors when the host found the pointers and strides aligned.
#include "k3_common.cuh"
#include "k3_params.h"  // k3_swiglu_params, shared with the host library

__device__ __forceinline__ float k3_swiglu_one(float gate, float up, const k3_swiglu_params& p) {
    if (p.has_clamp) {
        gate = fminf(gate, p.clamp);
        up = fminf(fmaxf(up, -p.clamp), p.clamp);
    }
    return gate / (1.0f + expf(-gate)) * up;
}

template <typename T>
__device__ __forceinline__ void k3_swiglu_body(const k3_swiglu_params& p) {
    const T* __restrict__ x = static_cast<const T*>(p.x);
    T* __restrict__ out = static_cast<T*>(p.out);
    const k3_i64 col0 = static_cast<k3_i64>(blockIdx.x) * blockDim.x + threadIdx.x;
    const k3_i64 col_step = static_cast<k3_i64>(gridDim.x) * blockDim.x;
    const int n = k3_lanes<T>::N;
    for (k3_i64 r = blockIdx.y; r < p.rows; r += gridDim.y) {
        const T* __restrict__ gate = x + r * p.x_stride;
        const T* __restrict__ up = gate + p.d;
        T* __restrict__ o = out + r * p.out_stride;
        if (p.vec) {
            const k3_i64 nvec = p.d / n;
            for (k3_i64 i = col0; i < nvec; i += col_step) {
                float g[n];
                float u[n];
                k3_load_vec(gate + i * n, g);
                k3_load_vec(up + i * n, u);
#pragma unroll
                for (int k = 0; k < n; ++k) g[k] = k3_swiglu_one(g[k], u[k], p);
                k3_store_vec(o + i * n, g);
            }
        } else {
            for (k3_i64 i = col0; i < p.d; i += col_step) {
                k3_store(o + i, k3_swiglu_one(k3_to_f32(gate[i]), k3_to_f32(up[i]), p));
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) k3_swiglu_f32(const k3_swiglu_params p) {
    k3_swiglu_body<float>(p);
}
extern "C" __global__ void __launch_bounds__(256) k3_swiglu_f16(const k3_swiglu_params p) {
    k3_swiglu_body<k3_f16>(p);
}
extern "C" __global__ void __launch_bounds__(256) k3_swiglu_bf16(const k3_swiglu_params p) {
    k3_swiglu_body<k3_bf16>(p);
}
