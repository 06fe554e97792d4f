/* The kernels' parameter blocks, passed by value to each launch. One definition for the
 * device code (the kernel sources, compiled by nvcc or NVRTC) and the host library
 * (host/k3_host.c, compiled as C), so the two cannot drift apart.
 *
 * Self-contained on purpose: NVRTC has no system headers, so the device side spells the
 * fixed-width types with built-in ones (long long and int are 64 and 32 bits on every
 * CUDA target); the host side takes them from <stdint.h>.
 */
#ifndef K3_PARAMS_H
#define K3_PARAMS_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
typedef long long k3_param_i64;
typedef int k3_param_i32;
#define K3_PARAMS_ASSERT(cond, what) static_assert(cond, what)
#else
#include <stdint.h>
typedef int64_t k3_param_i64;
typedef int32_t k3_param_i32;
#define K3_PARAMS_ASSERT(cond, what) _Static_assert(cond, what)
#endif

/* mla_kv_cache.cu. All strides are in elements. */
typedef struct k3_mla_params {
    const void* kv_c;
    const void* k_pe;
    const k3_param_i64* positions;
    const void* cos_sin;
    const k3_param_i64* slots;
    void* cache;
    const float* scale_ptr;       /* device pointer to the FP8 scale, or null: use `scale` */
    k3_param_i64 num_tokens;
    k3_param_i64 kv_c_stride;     /* elements between tokens */
    k3_param_i64 k_pe_stride;
    k3_param_i64 cos_sin_stride;  /* elements between positions */
    k3_param_i64 block_stride;    /* cache elements between blocks */
    k3_param_i64 entry_stride;    /* cache elements between slots of a block */
    k3_param_i64 block_size;
    k3_param_i64 num_slots;       /* num_blocks * block_size */
    k3_param_i64 max_pos;
    float scale;
    k3_param_i32 rank;
    k3_param_i32 rope_dim;
    k3_param_i32 cos_sin_f32;     /* the cos/sin cache is fp32 (else the input dtype) */
    k3_param_i32 vec;             /* kv_c rows and cache entries take 16-byte vectors */
    k3_param_i32 pe_vec;          /* k_pe and the cache's rope part take 2-element accesses */
    k3_param_i32 block_shift;     /* log2(block_size) when it is a power of two, else -1 */
    k3_param_i32 mul_exact;       /* the host's k3_mul_check verdict for `scale` (scale_ptr null) */
} k3_mla_params;
K3_PARAMS_ASSERT(sizeof(k3_mla_params) == 160, "k3_mla_params: unexpected padding");

/* swiglu.cu. Strides are in elements. */
typedef struct k3_swiglu_params {
    const void* x;
    void* out;
    k3_param_i64 rows;
    k3_param_i64 d;
    k3_param_i64 x_stride;        /* elements between rows of x */
    k3_param_i64 out_stride;
    float clamp;
    k3_param_i32 has_clamp;
    k3_param_i32 vec;             /* x and out rows take 16-byte vectors */
    k3_param_i32 reserved;
} k3_swiglu_params;
K3_PARAMS_ASSERT(sizeof(k3_swiglu_params) == 64, "k3_swiglu_params: unexpected padding");

#endif /* K3_PARAMS_H */
