/* CUDA kernel of splat_meta: one thread per item, one launch. */
#include <cuda_runtime.h>

#include "splat_meta/splat_meta_math.h"

#define NUREC_GENERIC_FILE "splat_meta/splat_meta_cuda_generic.cuh"
#include "math/generic.h"

extern "C" int nurec_splat_meta_cuda(const nurec_splat_meta_params* p, void* stream) {
    if (p->dtype != NUREC_F32 && p->dtype != NUREC_F64) return NUREC_ERR_DTYPE;
    if (p->num_items <= 0) return NUREC_OK;
    const int64_t blocks = (p->num_items + 255) / 256;
    if (blocks > 2147483647) return NUREC_ERR_CUDA;
    cudaStream_t s = (cudaStream_t)stream;
    if (p->dtype == NUREC_F64) splat_meta_kernel_f64<<<(unsigned)blocks, 256, 0, s>>>(*p);
    else splat_meta_kernel_f32<<<(unsigned)blocks, 256, 0, s>>>(*p);
    return cudaGetLastError() == cudaSuccess ? NUREC_OK : NUREC_ERR_CUDA;
}
