/* Generic over real_t (see math/generic.h). One warp per track: the kernel
 * is latency-bound (a chain of dependent loads), not bandwidth-bound, so the
 * search is 32-ary by a warp (nurec_track_locate_warp in track_poses.cu). */

__device__ __forceinline__ int NR(track_locate_warp)(const nurec_track_poses_params& p,
                                                     int64_t k, int64_t* l, double* a,
                                                     int* inside) {
    int64_t start = nurec_load_index(p.track_ranges, p.ranges_are_int64, 2 * k);
    int64_t count = nurec_load_index(p.track_ranges, p.ranges_are_int64, 2 * k + 1);
    int64_t t = p.query_times[k * p.query_stride];
    return nurec_track_locate_warp(p.key_times, p.num_keys, start, count, t, p.mode, l, a, inside);
}

__global__ void NR(track_poses_forward_kernel)(nurec_track_poses_params p) {
    /* the collection kernel may start now: it waits for these poses only
       where a Gaussian is on a track (programmatic dependent launch) */
    nurec_pdl_allow_next();
    int64_t k = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (k >= p.num_tracks) return;  /* whole warps leave together */
    int64_t l = 0;
    double a;
    int inside;
    int nk = NR(track_locate_warp)(p, k, &l, &a, &inside);
    if ((threadIdx.x & 31) != 0) return;
    real_t out[7];
    NR(track_pose_eval)((const real_t*)p.key_poses, nk, l, (real_t)a, out);
    real_t* poses = (real_t*)p.poses + 7 * k;
    for (int c = 0; c < 7; ++c) poses[c] = out[c];
    p.inside[k] = (uint8_t)inside;
}

__global__ void NR(track_poses_backward_kernel)(nurec_track_poses_params p) {
    int64_t k = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (k >= p.num_tracks) return;
    int64_t l = 0;
    double a;
    int inside;
    int nk = NR(track_locate_warp)(p, k, &l, &a, &inside);
    if ((threadIdx.x & 31) != 0) return;
    real_t g[7], gl[7], gr[7];
    const real_t* gp = (const real_t*)p.grad_poses + 7 * k;
    for (int c = 0; c < 7; ++c) g[c] = gp[c];
    NR(track_pose_eval_vjp)((const real_t*)p.key_poses, nk, l, (real_t)a, g, gl, gr);
    /* tracks may share key rows: accumulate */
    real_t* gk = (real_t*)p.grad_key_poses;
    if (nk >= 1) for (int c = 0; c < 7; ++c) atomicAdd(gk + 7 * l + c, gl[c]);
    if (nk == 2) for (int c = 0; c < 7; ++c) atomicAdd(gk + 7 * (l + 1) + c, gr[c]);
}
