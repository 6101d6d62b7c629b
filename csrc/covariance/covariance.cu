/* CUDA kernels of covariance: one thread per item, one launch per pass, on
 * the stream given (no host sync). */
#include <cuda_runtime.h>

#include "covariance/covariance_math.h"

#define NUREC_GENERIC_FILE "covariance/covariance_cuda_generic.cuh"
#include "math/generic.h"

typedef void (*covariance_kernel)(nurec_covariance_params);

/* Launches the float32 or float64 kernel of a pass over p's items. */
static int covariance_launch(const nurec_covariance_params* p, void* stream, covariance_kernel f32,
                             covariance_kernel f64) {
    if (p->dtype != NUREC_F32 && p->dtype != NUREC_F64) return NUREC_ERR_DTYPE;
    if (p->num_items <= 0) return NUREC_OK;
    const int64_t blocks = (p->num_items + 255) / 256;
    if (blocks > 2147483647) return NUREC_ERR_CUDA;
    (p->dtype == NUREC_F64 ? f64 : f32)<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(*p);
    return cudaGetLastError() == cudaSuccess ? NUREC_OK : NUREC_ERR_CUDA;
}

extern "C" int nurec_covariance_forward_cuda(const nurec_covariance_params* p, void* stream) {
    return covariance_launch(p, stream, covariance_forward_kernel_f32, covariance_forward_kernel_f64);
}

extern "C" int nurec_covariance_backward_cuda(const nurec_covariance_params* p, void* stream) {
    return covariance_launch(p, stream, covariance_backward_kernel_f32, covariance_backward_kernel_f64);
}
