/* CUDA kernels of collect_gaussian_parameters. Forward: one launch, one
 * thread per Gaussian. Backward: a memset of the pose gradient and one
 * launch; the pose-gradient reduction over a track's Gaussians is done in
 * registers (warp shuffles) and shared memory first, so a block issues a
 * handful of global atomics instead of one per Gaussian. */
#include <cuda_runtime.h>

#include "collect/collect_math.h"

#define NUREC_COLLECT_THREADS 256
#define NUREC_GENERIC_FILE "collect/collect_cuda_generic.cuh"
#include "math/generic.h"

static int launch_status(void) {
    return cudaGetLastError() == cudaSuccess ? NUREC_OK : NUREC_ERR_CUDA;
}

static unsigned num_blocks(int64_t n) {
    return (unsigned)((n + NUREC_COLLECT_THREADS - 1) / NUREC_COLLECT_THREADS);
}

extern "C" int nurec_collect_forward_cuda(const nurec_collect_params* p, void* stream) {
    if (p->num_gaussians == 0) return NUREC_OK;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned b = num_blocks(p->num_gaussians);
    if (p->dtype == NUREC_F32) collect_forward_kernel_f32<<<b, NUREC_COLLECT_THREADS, 0, s>>>(*p);
    else if (p->dtype == NUREC_F64) collect_forward_kernel_f64<<<b, NUREC_COLLECT_THREADS, 0, s>>>(*p);
    else return NUREC_ERR_DTYPE;
    return launch_status();
}

extern "C" int nurec_collect_backward_cuda(const nurec_collect_params* p, void* stream) {
    cudaStream_t s = (cudaStream_t)stream;
    size_t elem = p->dtype == NUREC_F64 ? sizeof(double) : sizeof(float);
    if (p->num_tracks > 0 &&
        cudaMemsetAsync(p->grad_track_poses, 0, elem * 7 * (size_t)p->num_tracks, s) != cudaSuccess)
        return NUREC_ERR_CUDA;
    if (p->num_gaussians == 0) return NUREC_OK;
    unsigned b = num_blocks(p->num_gaussians);
    if (p->dtype == NUREC_F32) collect_backward_kernel_f32<<<b, NUREC_COLLECT_THREADS, 0, s>>>(*p);
    else if (p->dtype == NUREC_F64) collect_backward_kernel_f64<<<b, NUREC_COLLECT_THREADS, 0, s>>>(*p);
    else return NUREC_ERR_DTYPE;
    return launch_status();
}
