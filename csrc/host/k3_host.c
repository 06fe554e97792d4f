/* k3 host library: driver-API loader and launcher for the k3 kernels. See k3_host.h.
 *
 * Only libc and libdl symbols that glibc 2.28 already had are used; libcuda
 * is opened with dlopen, so the library builds and cross-compiles without CUDA.
 */
#define _GNU_SOURCE
#include "k3_host.h"

#include "../kernels/k3_params.h" /* k3_mla_params, k3_swiglu_params: shared with the kernels */

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the slice of the driver API we use (ABI-stable since CUDA 12.0) ---------------- */

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st* CUcontext;
typedef struct CUlib_st* CUlibrary;
typedef struct CUkern_st* CUkernel;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;
typedef int CUstreamCaptureStatus;
typedef unsigned long long CUdeviceptr;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_NO_BINARY_FOR_GPU 209
#define CUDA_ERROR_INVALID_PTX 218
#define CUDA_ERROR_UNSUPPORTED_PTX_VERSION 222
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_POINTER_ATTRIBUTE_IS_MANAGED 8
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9

typedef struct {
    CUresult (*cuInit)(unsigned int);
    CUresult (*cuDriverGetVersion)(int*);
    CUresult (*cuGetErrorName)(CUresult, const char**);
    CUresult (*cuGetErrorString)(CUresult, const char**);
    CUresult (*cuDeviceGetCount)(int*);
    CUresult (*cuDeviceGet)(CUdevice*, int);
    CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
    CUresult (*cuDeviceGetName)(char*, int, CUdevice);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
    CUresult (*cuCtxPushCurrent)(CUcontext);
    CUresult (*cuCtxPopCurrent)(CUcontext*);
    CUresult (*cuCtxGetCurrent)(CUcontext*);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuPointerGetAttribute)(void*, int, CUdeviceptr);
    CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
    CUresult (*cuMemFree)(CUdeviceptr);
    CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
    CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);
    CUresult (*cuStreamSynchronize)(CUstream);
    CUresult (*cuStreamIsCapturing)(CUstream, CUstreamCaptureStatus*);
    CUresult (*cuLibraryLoadData)(CUlibrary*, const void*, void*, void**, unsigned int, void*,
                                  void**, unsigned int);
    CUresult (*cuLibraryGetKernel)(CUkernel*, CUlibrary, const char*);
    CUresult (*cuKernelGetFunction)(CUfunction*, CUkernel);
    CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int*, CUfunction, int, size_t);
    CUresult (*cuLaunchKernel)(CUfunction, unsigned int, unsigned int, unsigned int,
                               unsigned int, unsigned int, unsigned int, unsigned int,
                               CUstream, void**, void**);
} k3_driver;

/* ---- state -------------------------------------------------------------------------- */

#define K3_MAX_LIBRARIES 16
#define K3_MAX_DEVICES 64

/* Every entry point of a kernel library has a number; the launch path finds its CUkernel
 * by that number, without building or comparing names. */
enum {
    K3_KERNEL_ARCH_PROBE = 0,
    K3_KERNEL_SWIGLU = 1,                    /* + dtype (f32, f16, bf16) */
    K3_KERNEL_MLA = K3_KERNEL_SWIGLU + 3,    /* + k3_mla_kernel_index() */
    K3_KERNEL_COUNT = K3_KERNEL_MLA + 3 * 2 * 3 * 2
};

/* Written once under k3_init_lock, then read without a lock (acquire/release). */
static pthread_mutex_t k3_init_lock = PTHREAD_MUTEX_INITIALIZER;
static int k3_initialized;
static k3_driver k3_drv;
static int k3_init_status = K3_ERR_DRIVER_UNAVAILABLE;
static char k3_init_message[256];
static int k3_device_total;

/* Grow under k3_lock; every slot is written once, then read without a lock. */
static pthread_mutex_t k3_lock = PTHREAD_MUTEX_INITIALIZER;
static CUlibrary k3_libraries[K3_MAX_LIBRARIES];
static int k3_library_count;
static CUkernel k3_kernels[K3_MAX_LIBRARIES][K3_KERNEL_COUNT];
static CUcontext k3_contexts[K3_MAX_DEVICES];
/* The CUfunction of each kernel in each device's primary context (which the library
 * retains, so it stays valid), for the first K3_FUNCTION_DEVICES devices. */
#define K3_FUNCTION_DEVICES 8
static CUfunction k3_functions[K3_FUNCTION_DEVICES][K3_MAX_LIBRARIES][K3_KERNEL_COUNT];

static _Thread_local char k3_message[512];

static int k3_fail(int status, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k3_message, sizeof k3_message, fmt, ap);
    va_end(ap);
    return status;
}

static int k3_cuda_fail(CUresult rc, const char* what) {
    const char* name = "CUDA_ERROR_UNKNOWN";
    const char* text = "unknown error";
    if (k3_drv.cuGetErrorName != NULL) {
        k3_drv.cuGetErrorName(rc, &name);
        k3_drv.cuGetErrorString(rc, &text);
    }
    if (rc == CUDA_ERROR_NO_BINARY_FOR_GPU || rc == CUDA_ERROR_INVALID_PTX ||
        rc == CUDA_ERROR_UNSUPPORTED_PTX_VERSION) {
        return k3_fail(K3_ERR_NO_KERNEL_IMAGE,
                       "%s: %s (%s): the kernel fatbin has no code this GPU and driver can run",
                       what, name, text);
    }
    return k3_fail(K3_ERR_CUDA, "%s: %s (%s)", what, name, text);
}

/* Returns the status of `call` from the calling function, unless it is K3_OK. */
#define K3_TRY(call)                                                                        \
    do {                                                                                    \
        const int k3_status_ = (call);                                                      \
        if (k3_status_ != K3_OK) {                                                          \
            return k3_status_;                                                              \
        }                                                                                   \
    } while (0)

#define K3_SYM(field, symbol)                                                               \
    do {                                                                                    \
        *(void**)(&k3_drv.field) = dlsym(handle, symbol);                                   \
        if (k3_drv.field == NULL) {                                                         \
            snprintf(k3_init_message, sizeof k3_init_message,                               \
                     "libcuda.so.1 has no %s: the NVIDIA driver is older than CUDA 12.0",  \
                     symbol);                                                               \
            return;                                                                         \
        }                                                                                   \
    } while (0)

static void k3_init_once(void) {
    void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        snprintf(k3_init_message, sizeof k3_init_message,
                 "cannot load libcuda.so.1 (is the NVIDIA driver installed?): %s", dlerror());
        return;
    }
    K3_SYM(cuInit, "cuInit");
    K3_SYM(cuDriverGetVersion, "cuDriverGetVersion");
    K3_SYM(cuGetErrorName, "cuGetErrorName");
    K3_SYM(cuGetErrorString, "cuGetErrorString");
    K3_SYM(cuDeviceGetCount, "cuDeviceGetCount");
    K3_SYM(cuDeviceGet, "cuDeviceGet");
    K3_SYM(cuDeviceGetAttribute, "cuDeviceGetAttribute");
    K3_SYM(cuDeviceGetName, "cuDeviceGetName");
    K3_SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    K3_SYM(cuCtxPushCurrent, "cuCtxPushCurrent_v2");
    K3_SYM(cuCtxPopCurrent, "cuCtxPopCurrent_v2");
    K3_SYM(cuCtxGetCurrent, "cuCtxGetCurrent");
    K3_SYM(cuCtxSynchronize, "cuCtxSynchronize");
    K3_SYM(cuPointerGetAttribute, "cuPointerGetAttribute");
    K3_SYM(cuMemAlloc, "cuMemAlloc_v2");
    K3_SYM(cuMemFree, "cuMemFree_v2");
    K3_SYM(cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    K3_SYM(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    K3_SYM(cuStreamSynchronize, "cuStreamSynchronize");
    K3_SYM(cuStreamIsCapturing, "cuStreamIsCapturing");
    K3_SYM(cuLibraryLoadData, "cuLibraryLoadData");
    K3_SYM(cuLibraryGetKernel, "cuLibraryGetKernel");
    K3_SYM(cuKernelGetFunction, "cuKernelGetFunction");
    K3_SYM(cuOccupancyMaxActiveBlocksPerMultiprocessor,
           "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    K3_SYM(cuLaunchKernel, "cuLaunchKernel");
    CUresult rc = k3_drv.cuInit(0);
    if (rc != CUDA_SUCCESS) {
        const char* name = "?";
        k3_drv.cuGetErrorName(rc, &name);
        snprintf(k3_init_message, sizeof k3_init_message,
                 "cuInit failed: %s (no usable NVIDIA GPU?)", name);
        return;
    }
    rc = k3_drv.cuDeviceGetCount(&k3_device_total);
    if (rc != CUDA_SUCCESS) {
        snprintf(k3_init_message, sizeof k3_init_message, "cuDeviceGetCount failed (%d)", rc);
        return;
    }
    k3_init_status = K3_OK;
}

static int k3_init(void) {
    /* A mutex rather than pthread_once: glibc before 2.34 keeps pthread_once in
     * libpthread, which the library does not link. Once initialized, no lock. */
    if (!__atomic_load_n(&k3_initialized, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&k3_init_lock);
        if (!k3_initialized) {
            k3_init_once();
            __atomic_store_n(&k3_initialized, 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&k3_init_lock);
    }
    if (k3_init_status != K3_OK) {
        return k3_fail(k3_init_status, "%s", k3_init_message);
    }
    return K3_OK;
}

/* Makes the device's primary context current unless it already is (the usual case on a
 * thread that has used the GPU through torch or cupy); *pushed tells k3_leave whether
 * there is anything to undo. */
static int k3_enter(int device, int* pushed) {
    *pushed = 0;
    if (device < 0 || device >= k3_device_total || device >= K3_MAX_DEVICES) {
        return k3_fail(K3_ERR_INVALID_ARGUMENT, "CUDA device %d does not exist (%d visible)",
                       device, k3_device_total);
    }
    CUcontext ctx = __atomic_load_n(&k3_contexts[device], __ATOMIC_ACQUIRE);
    CUresult rc = CUDA_SUCCESS;
    if (ctx == NULL) {
        pthread_mutex_lock(&k3_lock);
        ctx = k3_contexts[device];
        if (ctx == NULL) {
            CUdevice dev;
            rc = k3_drv.cuDeviceGet(&dev, device);
            if (rc == CUDA_SUCCESS) {
                rc = k3_drv.cuDevicePrimaryCtxRetain(&ctx, dev);
            }
            if (rc == CUDA_SUCCESS) {
                __atomic_store_n(&k3_contexts[device], ctx, __ATOMIC_RELEASE);
            }
        }
        pthread_mutex_unlock(&k3_lock);
        if (rc != CUDA_SUCCESS) {
            return k3_cuda_fail(rc, "cuDevicePrimaryCtxRetain");
        }
    }
    CUcontext current = NULL;
    if (k3_drv.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == ctx) {
        return K3_OK;
    }
    rc = k3_drv.cuCtxPushCurrent(ctx);
    if (rc != CUDA_SUCCESS) {
        return k3_cuda_fail(rc, "cuCtxPushCurrent");
    }
    *pushed = 1;
    return K3_OK;
}

static void k3_leave(int pushed) {
    if (pushed) {
        CUcontext ignored;
        k3_drv.cuCtxPopCurrent(&ignored);
    }
}

/* The driver is loaded and `handle` names a loaded library: what every launch needs first. */
static int k3_library_ready(int handle) {
    K3_TRY(k3_init());
    if (handle < 0 || handle >= __atomic_load_n(&k3_library_count, __ATOMIC_ACQUIRE)) {
        return k3_fail(K3_ERR_INVALID_ARGUMENT, "no kernel library with handle %d", handle);
    }
    return K3_OK;
}

static const char* k3_dtype_name(int32_t dtype) {
    switch (dtype) {
    case K3_DTYPE_F32: return "f32";
    case K3_DTYPE_F16: return "f16";
    case K3_DTYPE_BF16: return "bf16";
    case K3_DTYPE_FP8_E4M3: return "fp8";
    default: return NULL;
    }
}

/* The MLA entry point for an input dtype, an FP8 cache or not, a rope, and the common
 * shape (rank 512 + rope dim 64) or any: its number after K3_KERNEL_MLA. */
static int k3_mla_kernel_index(int32_t in_dtype, int fp8, int32_t rope, int common) {
    return ((in_dtype * 2 + fp8) * 3 + rope) * 2 + common;
}

/* The name of kernel number `id`, as the kernel sources spell it. */
static void k3_kernel_name(int id, char* name, size_t size) {
    static const char* const ropes[] = {"none", "neox", "gptj"};
    if (id == K3_KERNEL_ARCH_PROBE) {
        snprintf(name, size, "k3_arch_probe");
    } else if (id < K3_KERNEL_MLA) {
        snprintf(name, size, "k3_swiglu_%s", k3_dtype_name(id - K3_KERNEL_SWIGLU));
    } else {
        const int i = id - K3_KERNEL_MLA;
        const int common = i % 2;
        const int rope = i / 2 % 3;
        const int fp8 = i / 6 % 2;
        const int in_dtype = i / 12;
        snprintf(name, size, "k3_mla_kv_cache_%s_%s_%s%s", k3_dtype_name(in_dtype),
                 k3_dtype_name(fp8 ? K3_DTYPE_FP8_E4M3 : in_dtype), ropes[rope],
                 common ? "_512_64" : "");
    }
}

/* A driver call about kernel number `id` failed: the error, named after the kernel. */
static int k3_kernel_fail(CUresult rc, int id) {
    char name[64];
    k3_kernel_name(id, name, sizeof name);
    return k3_cuda_fail(rc, name);
}

/* With the device's primary context current: the function of kernel `id` in library
 * `handle`. */
static int k3_function(int device, int handle, int id, CUfunction* fn) {
    CUfunction* known = device < K3_FUNCTION_DEVICES ? &k3_functions[device][handle][id] : NULL;
    if (known != NULL) {
        *fn = __atomic_load_n(known, __ATOMIC_ACQUIRE);
        if (*fn != NULL) {
            return K3_OK;
        }
    }
    char name[64];
    CUkernel kernel = __atomic_load_n(&k3_kernels[handle][id], __ATOMIC_ACQUIRE);
    CUresult rc = CUDA_SUCCESS;
    if (kernel == NULL) {
        k3_kernel_name(id, name, sizeof name);
        pthread_mutex_lock(&k3_lock);
        kernel = k3_kernels[handle][id];
        if (kernel == NULL) {
            rc = k3_drv.cuLibraryGetKernel(&kernel, k3_libraries[handle], name);
            if (rc == CUDA_SUCCESS) {
                __atomic_store_n(&k3_kernels[handle][id], kernel, __ATOMIC_RELEASE);
            }
        }
        pthread_mutex_unlock(&k3_lock);
        if (rc != CUDA_SUCCESS) {
            return k3_cuda_fail(rc, name);
        }
    }
    rc = k3_drv.cuKernelGetFunction(fn, kernel);
    if (rc != CUDA_SUCCESS) {
        return k3_kernel_fail(rc, id);
    }
    if (known != NULL) {
        __atomic_store_n(known, *fn, __ATOMIC_RELEASE);
    }
    return K3_OK;
}

/* With the device's primary context current: launches `fn` (kernel number `id`) on a
 * gx x gy grid of `block` threads, with one parameter block. */
static int k3_launch_function(CUfunction fn, int id, unsigned gx, unsigned gy, unsigned block,
                              void* params, void* stream) {
    void* kernel_params[1] = {params};
    CUresult rc = k3_drv.cuLaunchKernel(fn, gx, gy, 1, block, 1, 1, 0, (CUstream)stream,
                                        kernel_params, NULL);
    return rc == CUDA_SUCCESS ? K3_OK : k3_kernel_fail(rc, id);
}

static int k3_launch(int handle, int device, int id, unsigned gx, unsigned gy, unsigned block,
                     void* params, void* stream) {
    int pushed;
    K3_TRY(k3_enter(device, &pushed));
    CUfunction fn = NULL;
    int status = k3_function(device, handle, id, &fn);
    if (status == K3_OK) {
        status = k3_launch_function(fn, id, gx, gy, block, params, stream);
    }
    k3_leave(pushed);
    return status;
}

/* ---- public API ---------------------------------------------------------------------- */

int k3_abi_version(void) { return K3_ABI_VERSION; }

const char* k3_last_error(void) { return k3_message; }

int k3_driver_version(int* version) {
    K3_TRY(k3_init());
    CUresult rc = k3_drv.cuDriverGetVersion(version);
    return rc == CUDA_SUCCESS ? K3_OK : k3_cuda_fail(rc, "cuDriverGetVersion");
}

int k3_device_count(int* count) {
    K3_TRY(k3_init());
    CUresult rc = k3_drv.cuDeviceGetCount(count);
    return rc == CUDA_SUCCESS ? K3_OK : k3_cuda_fail(rc, "cuDeviceGetCount");
}

int k3_device_info(int device, int* major, int* minor, char* name, int name_len) {
    K3_TRY(k3_init());
    int count = 0;
    CUresult rc = k3_drv.cuDeviceGetCount(&count);
    if (rc != CUDA_SUCCESS) {
        return k3_cuda_fail(rc, "cuDeviceGetCount");
    }
    if (device < 0 || device >= count) {
        return k3_fail(K3_ERR_INVALID_ARGUMENT, "CUDA device %d does not exist (%d visible)",
                       device, count);
    }
    CUdevice dev;
    rc = k3_drv.cuDeviceGet(&dev, device);
    if (rc == CUDA_SUCCESS) {
        rc = k3_drv.cuDeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    }
    if (rc == CUDA_SUCCESS) {
        rc = k3_drv.cuDeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    }
    if (rc == CUDA_SUCCESS && name != NULL && name_len > 0) {
        rc = k3_drv.cuDeviceGetName(name, name_len, dev);
    }
    return rc == CUDA_SUCCESS ? K3_OK : k3_cuda_fail(rc, "device query");
}

int k3_pointer_info(const void* ptr, int* device, int* memory_type, int* is_managed) {
    K3_TRY(k3_init());
    if (ptr == NULL) {
        return k3_fail(K3_ERR_INVALID_ARGUMENT, "null data pointer");
    }
    unsigned int type = 0;
    int ordinal = -1;
    unsigned int managed = 0;
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)ptr;
    CUresult rc = k3_drv.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
    if (rc == CUDA_ERROR_INVALID_VALUE) {
        return k3_fail(K3_ERR_INVALID_ARGUMENT,
                       "pointer %p is not memory known to CUDA (a CPU array?)", ptr);
    }
    if (rc == CUDA_SUCCESS) {
        rc = k3_drv.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p);
    }
    if (rc == CUDA_SUCCESS) {
        rc = k3_drv.cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p);
    }
    if (rc != CUDA_SUCCESS) {
        return k3_cuda_fail(rc, "cuPointerGetAttribute");
    }
    *device = ordinal;
    *memory_type = (int)type;
    *is_managed = managed ? 1 : 0;
    return K3_OK;
}

int k3_load_library(const void* image, size_t size, int* handle) {
    K3_TRY(k3_init());
    if (image == NULL || size < 16) {
        return k3_fail(K3_ERR_INVALID_ARGUMENT, "empty kernel image");
    }
    /* The driver may read the image lazily, when a context first needs it. */
    void* copy = malloc(size);
    if (copy == NULL) {
        return k3_fail(K3_ERR_CUDA, "out of host memory for a %zu-byte kernel image", size);
    }
    memcpy(copy, image, size);
    pthread_mutex_lock(&k3_lock);
    if (k3_library_count >= K3_MAX_LIBRARIES) {
        pthread_mutex_unlock(&k3_lock);
        free(copy);
        return k3_fail(K3_ERR_INVALID_ARGUMENT, "too many kernel libraries loaded");
    }
    CUlibrary lib = NULL;
    CUresult rc = k3_drv.cuLibraryLoadData(&lib, copy, NULL, NULL, 0, NULL, NULL, 0);
    if (rc == CUDA_SUCCESS) {
        k3_libraries[k3_library_count] = lib;
        *handle = k3_library_count;
        __atomic_store_n(&k3_library_count, k3_library_count + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&k3_lock);
    if (rc != CUDA_SUCCESS) {
        free(copy);
        return k3_cuda_fail(rc, "cuLibraryLoadData");
    }
    return K3_OK;
}

int k3_arch_probe(int handle, int device, int* arch) {
    int pushed = 0;
    int status = k3_library_ready(handle);
    if (status == K3_OK) {
        status = k3_enter(device, &pushed);
    }
    if (status != K3_OK) {
        return status;
    }
    CUfunction fn = NULL;
    CUdeviceptr buf = 0;
    status = k3_function(device, handle, K3_KERNEL_ARCH_PROBE, &fn);
    if (status == K3_OK) {
        CUresult rc = k3_drv.cuMemAlloc(&buf, sizeof(int));
        if (rc != CUDA_SUCCESS) {
            buf = 0;
            status = k3_cuda_fail(rc, "cuMemAlloc");
        }
    }
    if (status == K3_OK) {
        status = k3_launch_function(fn, K3_KERNEL_ARCH_PROBE, 1, 1, 1, &buf, NULL);
    }
    if (status == K3_OK) {
        int value = 0;
        CUresult rc = k3_drv.cuCtxSynchronize();
        if (rc == CUDA_SUCCESS) {
            rc = k3_drv.cuMemcpyDtoH(&value, buf, sizeof value);
        }
        if (rc != CUDA_SUCCESS) {
            status = k3_cuda_fail(rc, "k3_arch_probe");
        } else {
            *arch = value;
        }
    }
    if (buf != 0) {
        k3_drv.cuMemFree(buf);
    }
    k3_leave(pushed);
    return status;
}

static int64_t k3_dtype_size(int32_t dtype) {
    return dtype == K3_DTYPE_F32 ? 4 : dtype == K3_DTYPE_FP8_E4M3 ? 1 : 2;
}

static int k3_aligned(const void* p, int64_t bytes) {
    return ((uintptr_t)p % (uintptr_t)bytes) == 0;
}

/* Whether rows of `size`-byte elements, the first at `p` and each `stride` elements after
 * the one before, all start on a `bytes` boundary (so `bytes`-wide accesses fit them). */
static int k3_rows_aligned(const void* p, int64_t stride, int64_t size, int64_t bytes) {
    return k3_aligned(p, bytes) && (stride * size) % bytes == 0;
}

static float k3_f32_from_bits(uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static uint32_t k3_f32_bits(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
}

/* Whether e4m3(x * RN(1/s)) == e4m3(RN(x / s)) for every bf16 x (bit 0 of the result)
 * and for every fp16 x (bit 1): k3_mul_check in kernels/mla_kv_cache.cu, which gives the
 * reasoning, made here for a scale passed by value. The bf16 significands are every 8th
 * of the 1024 fp16 ones. C's float division and multiplication are IEEE binary32,
 * rounded to nearest, on x86_64 and aarch64. */
static unsigned k3_fp8_mul_exact_verdict(float s) {
    const uint32_t sb = k3_f32_bits(s);
    if (sb < 0x1f800000u || sb >= 0x5f800000u) { /* 2^-64 <= s < 2^64, sign clear */
        return 0;
    }
    const float sm = k3_f32_from_bits((sb & 0x007fffffu) | 0x3f800000u);
    const float rm = 1.0f / sm;
    unsigned verdict = 3;
    for (uint32_t i = 0; i < 1024; ++i) {
        const float xm = k3_f32_from_bits(0x3f800000u | (i << 13));
        const uint32_t q = k3_f32_bits(xm / sm);
        const uint32_t m = k3_f32_bits(xm * rm);
        const uint32_t lo = q < m ? q : m;
        const uint32_t hi = q < m ? m : q;
        if (q != m && (hi & 0xfff80000u) >= lo) {
            verdict &= i % 8 == 0 ? 0u : ~2u;
        }
    }
    return verdict;
}

/* The verdict for a scale, remembered: a serving engine passes the same few scales on
 * every call, and the check costs 1024 divisions. A direct-mapped table of 16 entries,
 * each one 64-bit word (scale bits << 32 | 4 | verdict) read and written atomically. */
static uint64_t k3_mul_exact_seen[16];

static int k3_fp8_mul_exact(float s, int32_t in_dtype) {
    const uint32_t sb = k3_f32_bits(s);
    uint64_t* entry = &k3_mul_exact_seen[(sb * 2654435761u) >> 28];
    uint64_t known = __atomic_load_n(entry, __ATOMIC_RELAXED);
    if ((known >> 32) != sb || !(known & 4)) {
        known = ((uint64_t)sb << 32) | 4 | k3_fp8_mul_exact_verdict(s);
        __atomic_store_n(entry, known, __ATOMIC_RELAXED);
    }
    return in_dtype == K3_DTYPE_BF16 ? (int)(known & 1) : (int)(known >> 1 & 1);
}

#define K3_REQUIRE(cond, ...)                                                               \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            return k3_fail(K3_ERR_INVALID_ARGUMENT, __VA_ARGS__);                           \
        }                                                                                   \
    } while (0)

static int k3_check_mla(const k3_mla_args* a) {
    K3_REQUIRE(a->in_dtype == K3_DTYPE_F32 || a->in_dtype == K3_DTYPE_F16 ||
                   a->in_dtype == K3_DTYPE_BF16,
               "kv_c/k_pe dtype code %d is not fp32, fp16 or bf16", (int)a->in_dtype);
    K3_REQUIRE(a->cache_dtype == a->in_dtype || a->cache_dtype == K3_DTYPE_FP8_E4M3,
               "kv_cache dtype must be the input dtype (%s) or fp8, got code %d",
               k3_dtype_name(a->in_dtype), (int)a->cache_dtype);
    K3_REQUIRE(a->rope == K3_ROPE_NONE || a->rope == K3_ROPE_NEOX || a->rope == K3_ROPE_GPTJ,
               "rope code %d is not none, neox or gptj", (int)a->rope);
    K3_REQUIRE(a->num_tokens >= 0, "num_tokens is negative");
    K3_REQUIRE(a->rank >= 1 && a->rank <= (1 << 20), "latent rank %lld is out of range",
               (long long)a->rank);
    K3_REQUIRE(a->rope_dim >= 0 && a->rope_dim <= (1 << 20), "rope dim %lld is out of range",
               (long long)a->rope_dim);
    K3_REQUIRE(a->entry_size >= a->rank + a->rope_dim,
               "kv_cache entries hold %lld values, fewer than rank + rope dim = %lld",
               (long long)a->entry_size, (long long)(a->rank + a->rope_dim));
    K3_REQUIRE(a->num_blocks >= 1 && a->block_size >= 1, "kv_cache has no slots");
    K3_REQUIRE(a->num_blocks <= INT64_MAX / a->block_size, "kv_cache is too large");
    K3_REQUIRE(a->entry_stride >= a->entry_size || a->block_size == 1,
               "kv_cache entries overlap (entry stride %lld < entry size %lld)",
               (long long)a->entry_stride, (long long)a->entry_size);
    K3_REQUIRE(a->block_stride >= a->block_size * a->entry_stride || a->num_blocks == 1,
               "kv_cache blocks overlap (block stride %lld)", (long long)a->block_stride);
    if (a->num_tokens == 0) {
        return K3_OK;
    }
    K3_REQUIRE(a->kv_c != NULL && a->k_pe != NULL && a->slot_mapping != NULL &&
                   a->kv_cache != NULL,
               "a null data pointer");
    K3_REQUIRE(a->kv_c_stride >= a->rank || a->num_tokens == 1, "kv_c rows overlap");
    K3_REQUIRE(a->k_pe_stride >= a->rope_dim || a->num_tokens == 1, "k_pe rows overlap");
    if (a->rope != K3_ROPE_NONE) {
        K3_REQUIRE(a->rope_dim % 2 == 0, "rope dim %lld must be even to rotate pairs",
                   (long long)a->rope_dim);
        K3_REQUIRE(a->cos_sin_dtype == K3_DTYPE_F32 || a->cos_sin_dtype == a->in_dtype,
                   "cos_sin_cache dtype must be fp32 or the input dtype (%s)",
                   k3_dtype_name(a->in_dtype));
        K3_REQUIRE(a->positions != NULL && a->cos_sin != NULL,
                   "rope needs positions and cos_sin_cache");
        K3_REQUIRE(a->max_pos >= 1, "cos_sin_cache has no positions");
        K3_REQUIRE(a->cos_sin_stride >= a->rope_dim || a->max_pos == 1,
                   "cos_sin_cache rows overlap");
    }
    if (a->cache_dtype == K3_DTYPE_FP8_E4M3 && a->scale_ptr == NULL) {
        K3_REQUIRE(isfinite(a->scale) && a->scale > 0.0f,
                   "kv_scale must be a positive finite number, got %g", (double)a->scale);
    }
    return K3_OK;
}

int k3_mla_key_concat_kv_cache(const k3_mla_args* a) {
    K3_REQUIRE(a != NULL, "null argument block");
    K3_TRY(k3_library_ready(a->handle));
    const int status = k3_check_mla(a);
    if (status != K3_OK || a->num_tokens == 0) {
        return status;
    }
    const int fp8 = a->cache_dtype == K3_DTYPE_FP8_E4M3;
    const int64_t in_size = k3_dtype_size(a->in_dtype);
    const int64_t out_size = k3_dtype_size(a->cache_dtype);
    const int64_t lanes = 16 / in_size;
    const int64_t out_vec = lanes * out_size;
    const int vec = a->rank % lanes == 0 && k3_rows_aligned(a->kv_c, a->kv_c_stride, in_size, 16) &&
                    k3_rows_aligned(a->kv_cache, a->entry_stride, out_size, out_vec) &&
                    (a->block_stride * out_size) % out_vec == 0;
    const int pe_vec = k3_aligned(a->k_pe, 2 * in_size) && a->k_pe_stride % 2 == 0 &&
                       k3_aligned(a->kv_cache, 2 * out_size) && a->entry_stride % 2 == 0 &&
                       a->block_stride % 2 == 0 && a->rank % 2 == 0;
    const int block_shift = (a->block_size & (a->block_size - 1)) == 0 /* a power of two */
                                ? __builtin_ctzll((unsigned long long)a->block_size)
                                : -1;
    const float* scale_ptr = fp8 ? a->scale_ptr : NULL;
    const float scale = fp8 ? a->scale : 1.0f;
    const int mul_exact = fp8 && a->in_dtype != K3_DTYPE_F32 && scale_ptr == NULL &&
                          k3_fp8_mul_exact(scale, a->in_dtype);
    /* Array by array: its pointer, sizes and strides (in elements) and what else the
     * kernel needs to know of it; then the FP8 scale and the vector paths. */
    k3_mla_params p = {
        .kv_c = a->kv_c, .kv_c_stride = a->kv_c_stride, .rank = (int32_t)a->rank,
        .k_pe = a->k_pe, .k_pe_stride = a->k_pe_stride, .rope_dim = (int32_t)a->rope_dim,
        .positions = a->positions, .slots = a->slot_mapping, .num_tokens = a->num_tokens,
        .cos_sin = a->cos_sin, .cos_sin_stride = a->cos_sin_stride, .max_pos = a->max_pos,
        .cos_sin_f32 = a->cos_sin_dtype == K3_DTYPE_F32,
        .cache = a->kv_cache, .block_stride = a->block_stride, .entry_stride = a->entry_stride,
        .block_size = a->block_size, .num_slots = a->num_blocks * a->block_size,
        .block_shift = block_shift,
        .scale_ptr = scale_ptr, .scale = scale, .mul_exact = mul_exact,
        .vec = vec, .pe_vec = pe_vec,
    };

    const int common_shape = vec && a->rank == 512 && a->rope_dim == 64;
    const int id = K3_KERNEL_MLA + k3_mla_kernel_index(a->in_dtype, fp8, a->rope, common_shape);
    const int64_t tokens_per_block = 256 / 32; /* one token per warp */
    int64_t blocks = (a->num_tokens + tokens_per_block - 1) / tokens_per_block;
    if (blocks > (1 << 20)) {
        blocks = 1 << 20; /* the kernel strides over the rest */
    }
    return k3_launch(a->handle, a->device, id, (unsigned)blocks, 1, 256, &p, a->stream);
}

int k3_mla_check_indices(const k3_mla_args* a) {
    K3_REQUIRE(a != NULL, "null argument block");
    int status = k3_init();
    if (status == K3_OK) {
        status = k3_check_mla(a);
    }
    if (status != K3_OK || a->num_tokens == 0) {
        return status;
    }
    const int rope = a->rope != K3_ROPE_NONE;
    const size_t bytes = (size_t)a->num_tokens * sizeof(int64_t);
    int64_t* slots = malloc(rope ? 2 * bytes : bytes);
    if (slots == NULL) {
        return k3_fail(K3_ERR_CUDA, "out of host memory for %lld slots", (long long)a->num_tokens);
    }
    int64_t* positions = slots + a->num_tokens;
    int pushed;
    status = k3_enter(a->device, &pushed);
    if (status == K3_OK) {
        CUstreamCaptureStatus capture = 0;
        CUresult rc = k3_drv.cuStreamIsCapturing((CUstream)a->stream, &capture);
        if (rc == CUDA_SUCCESS && capture != 0) {
            status = k3_fail(K3_ERR_INVALID_ARGUMENT,
                             "checking slots and positions copies them to the host and waits: "
                             "not possible while the stream captures a CUDA graph");
        } else {
            if (rc == CUDA_SUCCESS) {
                rc = k3_drv.cuMemcpyDtoHAsync(slots, (CUdeviceptr)(uintptr_t)a->slot_mapping,
                                              bytes, (CUstream)a->stream);
            }
            if (rc == CUDA_SUCCESS && rope) {
                rc = k3_drv.cuMemcpyDtoHAsync(positions, (CUdeviceptr)(uintptr_t)a->positions,
                                              bytes, (CUstream)a->stream);
            }
            if (rc == CUDA_SUCCESS) {
                rc = k3_drv.cuStreamSynchronize((CUstream)a->stream);
            }
            if (rc != CUDA_SUCCESS) {
                status = k3_cuda_fail(rc, "copying slot_mapping and positions to the host");
            }
        }
        k3_leave(pushed);
    }
    const int64_t num_slots = a->num_blocks * a->block_size;
    for (int64_t t = 0; status == K3_OK && t < a->num_tokens; ++t) {
        if (slots[t] == -1) {
            continue;
        }
        if (slots[t] < 0 || slots[t] >= num_slots) {
            status = k3_fail(K3_ERR_INVALID_ARGUMENT,
                             "slot_mapping[%lld] is %lld: outside kv_cache (%lld slots; -1 "
                             "marks padding)",
                             (long long)t, (long long)slots[t], (long long)num_slots);
        } else if (rope && (positions[t] < 0 || positions[t] >= a->max_pos)) {
            status = k3_fail(K3_ERR_INVALID_ARGUMENT,
                             "positions[%lld] is %lld: outside cos_sin_cache (%lld positions)",
                             (long long)t, (long long)positions[t], (long long)a->max_pos);
        }
    }
    free(slots);
    return status;
}

int k3_swiglu(const k3_swiglu_args* a) {
    K3_REQUIRE(a != NULL, "null argument block");
    K3_TRY(k3_library_ready(a->handle));
    K3_REQUIRE(a->dtype == K3_DTYPE_F32 || a->dtype == K3_DTYPE_F16 || a->dtype == K3_DTYPE_BF16,
               "swiglu dtype code %d is not fp32, fp16 or bf16", (int)a->dtype);
    K3_REQUIRE(a->rows >= 0 && a->d >= 0, "negative size");
    if (a->has_clamp) {
        K3_REQUIRE(isfinite(a->clamp) && a->clamp > 0.0f,
                   "clamp must be a positive finite number, got %g", (double)a->clamp);
    }
    if (a->rows == 0 || a->d == 0) {
        return K3_OK;
    }
    K3_REQUIRE(a->x != NULL && a->out != NULL, "a null data pointer");
    K3_REQUIRE(a->x_stride >= 2 * a->d || a->rows == 1, "x rows overlap");
    K3_REQUIRE(a->out_stride >= a->d || a->rows == 1, "out rows overlap");
    const int64_t size = k3_dtype_size(a->dtype);
    const int64_t lanes = 16 / size;
    const int vec = a->d % lanes == 0 && k3_rows_aligned(a->x, a->x_stride, size, 16) &&
                    k3_rows_aligned(a->out, a->out_stride, size, 16);
    k3_swiglu_params p = { /* `reserved`, not named, is zero */
        .x = a->x, .x_stride = a->x_stride, .rows = a->rows, .d = a->d,
        .out = a->out, .out_stride = a->out_stride,
        .clamp = a->clamp, .has_clamp = a->has_clamp ? 1 : 0,
        .vec = vec,
    };
    const int64_t cols = vec ? a->d / lanes : a->d;
    const int64_t block = 128;
    int64_t gx = (cols + block - 1) / block;
    if (gx > 65535) {
        gx = 65535;
    }
    int64_t gy = a->rows > 65535 ? 65535 : a->rows;
    return k3_launch(a->handle, a->device, K3_KERNEL_SWIGLU + a->dtype, (unsigned)gx,
                     (unsigned)gy, (unsigned)block, &p, a->stream);
}
