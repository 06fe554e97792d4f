/* lines as CUDA 13.0's cuda.h writes them (tests/unit/test_cudahome.py) */
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
    #define __CUDA_API_PTDS(api) api ## _ptds
    #define __CUDA_API_PTSZ(api) api ## _ptsz
#else
    #define __CUDA_API_PTDS(api) api
    #define __CUDA_API_PTSZ(api) api
#endif
#define cuMemAlloc                          cuMemAlloc_v2
#define cuMemcpyHtoD                        __CUDA_API_PTDS(cuMemcpyHtoD_v2)
#define cuMemPrefetchBatchAsync             __CUDA_API_PTSZ(cuMemPrefetchBatchAsync)
CUresult CUDAAPI cuInit(unsigned int Flags);
CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytesize);
CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap *tensorMap, CUtensorMapDataType t,
    cuuint32_t rank);
 * to attempt to enable/disable the profiling via ::cuProfilerStart or
#define CUDAAPI
