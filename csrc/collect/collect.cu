/* CUDA kernels of collect_gaussian_parameters. Forward: one launch, a warp
 * per 32 Gaussians (float32, int32 ids, aligned buffers) or a thread per
 * Gaussian (anything else). Backward: a memset of the pose gradient and one
 * launch; the pose-gradient reduction over a track's Gaussians is done in
 * registers (warp shuffles) and shared memory first, so a block issues a
 * handful of global atomics instead of one per Gaussian. */
#include <cuda_runtime.h>

#include "collect/collect_math.h"
#include "math/cuda_pdl.cuh"

#include <stdint.h>

#define NUREC_COLLECT_THREADS 128
#define NUREC_GENERIC_FILE "collect/collect_cuda_generic.cuh"
#include "math/generic.h"

static int launch_status(void) {
    return cudaGetLastError() == cudaSuccess ? NUREC_OK : NUREC_ERR_CUDA;
}

static unsigned num_blocks(int64_t n) {
    return (unsigned)((n + NUREC_COLLECT_THREADS - 1) / NUREC_COLLECT_THREADS);
}

static int aligned16(const void* ptr) { return ((uintptr_t)ptr & 15) == 0; }

/* The warp kernel needs float32, int32 ids and 16-byte aligned buffers
 * (fresh allocations are; views with an offset may not be). */
static int all_aligned16(const void* const* ptrs, unsigned n) {
    for (unsigned k = 0; k < n; ++k)
        if (!aligned16(ptrs[k])) return 0;
    return 1;
}

static int can_vectorize(const nurec_collect_params* p) {
    if (p->dtype != NUREC_F32 || p->ids_are_int64) return 0;
    const void* ptrs[] = {p->means, p->quats, p->log_scales, p->opacity_logits, p->track_ids,
                          p->means_w, p->quats_w, p->scales, p->opacities};
    return all_aligned16(ptrs, sizeof(ptrs) / sizeof(ptrs[0]));
}

extern "C" int nurec_collect_forward_cuda(const nurec_collect_params* p, void* stream) {
    if (p->num_gaussians == 0) return NUREC_OK;
    /* both kernels: NUREC_COLLECT_THREADS Gaussians per block */
    nurec_launch l;
    nurec_launch_init(&l, num_blocks(p->num_gaussians), NUREC_COLLECT_THREADS, (cudaStream_t)stream,
                      p->after_track_poses);
    cudaError_t e;
    if (can_vectorize(p)) e = cudaLaunchKernelEx(&l.config, collect_forward_warp_kernel_f32, *p);
    else if (p->dtype == NUREC_F32) e = cudaLaunchKernelEx(&l.config, collect_forward_kernel_f32, *p);
    else if (p->dtype == NUREC_F64) e = cudaLaunchKernelEx(&l.config, collect_forward_kernel_f64, *p);
    else return NUREC_ERR_DTYPE;
    return e == cudaSuccess ? launch_status() : NUREC_ERR_CUDA;
}

extern "C" int nurec_collect_backward_cuda(const nurec_collect_params* p, void* stream) {
    cudaStream_t s = (cudaStream_t)stream;
    size_t elem = p->dtype == NUREC_F64 ? sizeof(double) : sizeof(float);
    if (p->num_tracks > 0 &&
        cudaMemsetAsync(p->grad_track_poses, 0, elem * 7 * (size_t)p->num_tracks, s) != cudaSuccess)
        return NUREC_ERR_CUDA;
    if (p->num_gaussians == 0) return NUREC_OK;
    /* (A backward staged through shared memory, as the forward once was, measured
       slower on the H200, 40 vs 28 us: benchmarks/RESULTS.md.) */
    unsigned b = num_blocks(p->num_gaussians);
    if (p->dtype == NUREC_F32) collect_backward_kernel_f32<<<b, NUREC_COLLECT_THREADS, 0, s>>>(*p);
    else if (p->dtype == NUREC_F64) collect_backward_kernel_f64<<<b, NUREC_COLLECT_THREADS, 0, s>>>(*p);
    else return NUREC_ERR_DTYPE;
    return launch_status();
}
