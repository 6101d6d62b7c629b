/* Generic over real_t (see math/generic.h). */

__global__ void NR(track_poses_forward_kernel)(nurec_track_poses_params p) {
    int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.num_tracks) return;
    int64_t start = nurec_load_index(p.track_ranges, p.ranges_are_int64, 2 * k);
    int64_t count = nurec_load_index(p.track_ranges, p.ranges_are_int64, 2 * k + 1);
    int64_t l = 0;
    double a;
    int inside;
    int nk = nurec_track_locate(p.key_times, p.num_keys, start, count,
                                p.query_times[k * p.query_stride], p.mode, &l, &a, &inside);
    real_t out[7];
    NR(track_pose_eval)((const real_t*)p.key_poses, nk, l, (real_t)a, out);
    real_t* poses = (real_t*)p.poses + 7 * k;
    for (int c = 0; c < 7; ++c) poses[c] = out[c];
    p.inside[k] = (uint8_t)inside;
}

__global__ void NR(track_poses_backward_kernel)(nurec_track_poses_params p) {
    int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= p.num_tracks) return;
    int64_t start = nurec_load_index(p.track_ranges, p.ranges_are_int64, 2 * k);
    int64_t count = nurec_load_index(p.track_ranges, p.ranges_are_int64, 2 * k + 1);
    int64_t l = 0;
    double a;
    int inside;
    int nk = nurec_track_locate(p.key_times, p.num_keys, start, count,
                                p.query_times[k * p.query_stride], p.mode, &l, &a, &inside);
    real_t g[7], gl[7], gr[7];
    const real_t* gp = (const real_t*)p.grad_poses + 7 * k;
    for (int c = 0; c < 7; ++c) g[c] = gp[c];
    NR(track_pose_eval_vjp)((const real_t*)p.key_poses, nk, l, (real_t)a, g, gl, gr);
    real_t* gk = (real_t*)p.grad_key_poses;
    if (nk >= 1) for (int c = 0; c < 7; ++c) atomicAdd(gk + 7 * l + c, gl[c]);
    if (nk == 2) for (int c = 0; c < 7; ++c) atomicAdd(gk + 7 * (l + 1) + c, gr[c]);
}
