/* CUDA kernels of interpolate_track_poses: one warp per track, one launch
 * forward; backward is a memset and one launch (atomics, because tracks may
 * share key rows; a track touches at most two rows, so there is no
 * reduction to serialize). */
#include <cuda_runtime.h>
#include <stdint.h>

#include "math/cuda_pdl.cuh"
#include "track_poses/track_poses_math.h"

/* nurec_track_locate by all 32 lanes of a warp together (same result for
 * sorted key times), in as few dependent loads as we could make it: the
 * first round samples 32 evenly spaced keys of the track and reads its last
 * key too, so the before / after tests need no round of their own; each
 * further round narrows to the segment after the last sample <= t; the final
 * round reads the segment plus the key after it, so t_l and t_r come from
 * the lanes by shuffle. Two rounds for tracks of up to ~1000 keys. Whatever
 * the key times hold, every index read stays in [start, start + count).
 * (Mirrored in Python and checked against the sequential search on random
 * tracks when it was written; the GPU tests compare it with the CPU path.) */
__device__ int nurec_track_locate_warp(const int64_t* kt, int64_t num_keys, int64_t start,
                                       int64_t count, int64_t t, int mode, int64_t* l,
                                       double* a, int* inside) {
    const unsigned full = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    *a = 0.0;
    *inside = 0;
    *l = 0;
    if (count <= 0 || start < 0 || start > num_keys - count) return 0;
    const int64_t last = start + count - 1;
    int64_t lo = start, hi = last;
    int first_round = 1;
    for (;;) {
        const int64_t n = hi - lo + 1;
        const int final_round = n <= 31;
        const int64_t step = final_round ? 1 : (n + 31) / 32;
        const int64_t end = final_round ? min(last, hi + 1) : hi;
        const int64_t idx = lo + lane * step;
        const int64_t v = idx <= end ? kt[idx] : INT64_MAX;
        if (first_round) {
            const int64_t t_last = kt[last];
            const int64_t t_first = __shfl_sync(full, v, 0);
            if (t < t_first) { *l = start; return 1; }
            if (t > t_last) { *l = last; return 1; }
            *inside = 1;
            first_round = 0;
        }
        const unsigned le = __ballot_sync(full, idx <= end && v <= t);
        const int k = le ? 31 - __clz(le) : 0;
        if (final_round) {
            const int64_t tl = __shfl_sync(full, v, k);
            const int64_t tr_lane = __shfl_sync(full, v, min(k + 1, 31));
            *l = lo + k;
            if (*l >= last) { *l = last; return 1; }
            const int64_t tr = *l + 1 <= end ? tr_lane : kt[*l + 1];
            if (mode == NUREC_INTERP_NEAREST) {
                if (t - tl > tr - t) *l += 1;  /* ties go left */
                return 1;
            }
            *a = (tr == tl) ? 0.0 : (double)(t - tl) / (double)(tr - tl);
            return 2;
        }
        lo += k * step;
        hi = min(hi, lo + step - 1);
    }
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
