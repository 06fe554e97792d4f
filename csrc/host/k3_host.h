/* k3 host library: loads the k3 kernel fatbins through the CUDA driver API and launches
 * them. C ABI, no link-time CUDA dependency (libcuda.so.1 is opened at first use).
 *
 * Every function returns a K3_* status code; on failure k3_last_error() returns a
 * one-line message for the calling thread. Functions are thread-safe.
 */
#ifndef K3_HOST_H
#define K3_HOST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define K3_ABI_VERSION 2

enum k3_status {
    K3_OK = 0,
    K3_ERR_INVALID_ARGUMENT = 1, /* a shape, stride, dtype or option the kernels reject */
    K3_ERR_DRIVER_UNAVAILABLE = 2, /* libcuda.so.1 missing, too old, or cuInit failed */
    K3_ERR_NO_KERNEL_IMAGE = 3, /* the fatbin has no code this GPU (or driver) can run */
    K3_ERR_CUDA = 4 /* any other driver error, with its name in the message */
};

enum k3_dtype {
    K3_DTYPE_F32 = 0,
    K3_DTYPE_F16 = 1,
    K3_DTYPE_BF16 = 2,
    K3_DTYPE_FP8_E4M3 = 3 /* float8 e4m3fn in uint8 storage; cache only */
};

enum k3_rope { K3_ROPE_NONE = 0, K3_ROPE_NEOX = 1, K3_ROPE_GPTJ = 2 };

/* Each launch takes one argument block (a single pointer is also the cheapest call from
 * ctypes). It starts with where the kernel runs: `handle` from k3_load_library, the CUDA
 * device ordinal, and a CUstream of that device's primary context, or NULL for its
 * default stream.
 *
 * All strides are in elements; the innermost dimension of every array is contiguous. */
typedef struct k3_mla_args {
    int32_t handle;
    int32_t device;
    void* stream;
    const void* kv_c;             /* [num_tokens, rank], row stride kv_c_stride */
    const void* k_pe;             /* [num_tokens, rope_dim], row stride k_pe_stride */
    const int64_t* positions;     /* [num_tokens]; may be NULL when rope == K3_ROPE_NONE */
    const void* cos_sin;          /* [max_pos, rope_dim] (cos | sin); NULL with K3_ROPE_NONE */
    const int64_t* slot_mapping;  /* [num_tokens]; -1 marks padding */
    void* kv_cache;               /* [num_blocks, block_size, entry_size] */
    const float* scale_ptr;       /* device fp32 scale for an FP8 cache, or NULL: use scale */
    int64_t num_tokens;
    int64_t rank;
    int64_t rope_dim;
    int64_t kv_c_stride;
    int64_t k_pe_stride;
    int64_t cos_sin_stride;
    int64_t max_pos;
    int64_t num_blocks;
    int64_t block_size;
    int64_t entry_size;           /* >= rank + rope_dim; columns past that are untouched */
    int64_t block_stride;
    int64_t entry_stride;
    int32_t in_dtype;             /* F32, F16 or BF16: kv_c and k_pe */
    int32_t cache_dtype;          /* in_dtype or FP8_E4M3 */
    int32_t cos_sin_dtype;        /* F32 or in_dtype */
    int32_t rope;                 /* enum k3_rope */
    float scale;                  /* FP8 only: the cache holds x / scale */
    int32_t reserved;
} k3_mla_args;

typedef struct k3_swiglu_args {
    int32_t handle;
    int32_t device;
    void* stream;
    const void* x;                /* [rows, 2 * d]: gate | up, row stride x_stride */
    void* out;                    /* [rows, d], row stride out_stride */
    int64_t rows;
    int64_t d;
    int64_t x_stride;
    int64_t out_stride;
    int32_t dtype;                /* F32, F16 or BF16 */
    int32_t has_clamp;
    float clamp;                  /* > 0 when has_clamp */
    int32_t reserved;
} k3_swiglu_args;

int k3_abi_version(void);
const char* k3_last_error(void);

int k3_driver_version(int* version);
int k3_device_count(int* count);
int k3_device_info(int device, int* major, int* minor, char* name, int name_len);

/* memory_type: 1 host, 2 device, 4 unified (as CUmemorytype); is_managed: 0/1. */
int k3_pointer_info(const void* ptr, int* device, int* memory_type, int* is_managed);

/* Loads one fatbin (the bytes are copied); *handle names it in later calls. */
int k3_load_library(const void* image, size_t size, int* handle);

/* Runs the library's k3_arch_probe kernel on `device`: the __CUDA_ARCH__ it was built for. */
int k3_arch_probe(int handle, int device, int* arch);

int k3_mla_key_concat_kv_cache(const k3_mla_args* args);
int k3_swiglu(const k3_swiglu_args* args);

/* Validates the token indices of an MLA call before it is launched: copies slot_mapping
 * (and positions, with rope) to the host on args->stream, waits for that stream, and
 * fails with K3_ERR_INVALID_ARGUMENT naming the first token whose slot is neither -1 nor
 * inside the cache, or which has a slot and a position outside cos_sin. Launches nothing;
 * refuses a stream that is capturing a CUDA graph (it has to synchronize). */
int k3_mla_check_indices(const k3_mla_args* args);

#ifdef __cplusplus
}
#endif

#endif /* K3_HOST_H */
