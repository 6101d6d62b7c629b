/* CUDA kernels of interpolate_track_poses: one thread per track, one launch
 * forward; backward is a memset and one launch (atomics, because tracks may
 * share key rows; a track touches at most two rows, so there is no
 * reduction to serialize). */
#include <cuda_runtime.h>

#include "track_poses/track_poses_math.h"

#define NUREC_GENERIC_FILE "track_poses/track_poses_cuda_generic.cuh"
#include "math/generic.h"

static int launch_status(void) {
    return cudaGetLastError() == cudaSuccess ? NUREC_OK : NUREC_ERR_CUDA;
}

static const int kThreads = 128;

extern "C" int nurec_track_poses_forward_cuda(const nurec_track_poses_params* p, void* stream) {
    if (p->num_tracks == 0) return NUREC_OK;
    unsigned blocks = (unsigned)((p->num_tracks + kThreads - 1) / kThreads);
    cudaStream_t s = (cudaStream_t)stream;
    if (p->dtype == NUREC_F32) track_poses_forward_kernel_f32<<<blocks, kThreads, 0, s>>>(*p);
    else if (p->dtype == NUREC_F64) track_poses_forward_kernel_f64<<<blocks, kThreads, 0, s>>>(*p);
    else return NUREC_ERR_DTYPE;
    return launch_status();
}

extern "C" int nurec_track_poses_backward_cuda(const nurec_track_poses_params* p, void* stream) {
    cudaStream_t s = (cudaStream_t)stream;
    size_t elem = p->dtype == NUREC_F64 ? sizeof(double) : sizeof(float);
    if (p->num_keys > 0 &&
        cudaMemsetAsync(p->grad_key_poses, 0, elem * 7 * (size_t)p->num_keys, s) != cudaSuccess)
        return NUREC_ERR_CUDA;
    if (p->num_tracks == 0) return NUREC_OK;
    unsigned blocks = (unsigned)((p->num_tracks + kThreads - 1) / kThreads);
    if (p->dtype == NUREC_F32) track_poses_backward_kernel_f32<<<blocks, kThreads, 0, s>>>(*p);
    else if (p->dtype == NUREC_F64) track_poses_backward_kernel_f64<<<blocks, kThreads, 0, s>>>(*p);
    else return NUREC_ERR_DTYPE;
    return launch_status();
}
