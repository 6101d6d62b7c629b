/* CUDA kernels of interpolate_track_poses: one warp per track, one launch
 * forward; backward is a memset and one launch (atomics, because tracks may
 * share key rows; a track touches at most two rows, so there is no
 * reduction to serialize). */
#include <cuda_runtime.h>

#include "math/cuda_pdl.cuh"
#include "track_poses/track_poses_math.h"

/* Last key in [lo, hi] with time <= t (key_times[lo] <= t), by all 32 lanes
 * of a warp together: each step looks at 32 evenly spaced keys and keeps
 * the segment after the last one that is <= t. Any result stays in
 * [lo, hi], whatever the key times hold. */
__device__ int64_t nurec_track_search_warp(const int64_t* key_times, int64_t lo, int64_t hi,
                                           int64_t t) {
    const unsigned full = 0xffffffffu;
    int lane = threadIdx.x & 31;
    while (hi - lo + 1 > 32) {
        int64_t step = (hi - lo + 1 + 31) / 32;
        int64_t idx = lo + lane * step;
        unsigned le = __ballot_sync(full, idx <= hi && key_times[idx] <= t);
        int k = le ? 31 - __clz(le) : 0;
        lo += k * step;
        hi = min(hi, lo + step - 1);
    }
    int64_t idx = lo + lane;
    unsigned le = __ballot_sync(full, idx <= hi && key_times[idx] <= t);
    return lo + (le ? 31 - __clz(le) : 0);
}

#define NUREC_GENERIC_FILE "track_poses/track_poses_cuda_generic.cuh"
#include "math/generic.h"

static int launch_status(void) {
    return cudaGetLastError() == cudaSuccess ? NUREC_OK : NUREC_ERR_CUDA;
}

static const int kThreads = 128; /* 4 tracks (warps) per block */

static unsigned track_blocks(int64_t tracks) {
    return (unsigned)((tracks * 32 + kThreads - 1) / kThreads);
}

extern "C" int nurec_track_poses_forward_cuda(const nurec_track_poses_params* p, void* stream) {
    if (p->num_tracks == 0) return NUREC_OK;
    unsigned blocks = track_blocks(p->num_tracks);
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
    unsigned blocks = track_blocks(p->num_tracks);
    if (p->dtype == NUREC_F32) track_poses_backward_kernel_f32<<<blocks, kThreads, 0, s>>>(*p);
    else if (p->dtype == NUREC_F64) track_poses_backward_kernel_f64<<<blocks, kThreads, 0, s>>>(*p);
    else return NUREC_ERR_DTYPE;
    return launch_status();
}
