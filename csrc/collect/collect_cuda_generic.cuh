/* Generic over real_t (see math/generic.h). */

__global__ void __launch_bounds__(NUREC_COLLECT_THREADS)
NR(collect_forward_kernel)(nurec_collect_params p) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.num_gaussians) return;
    const real_t* means = (const real_t*)p.means + 3 * i;
    const real_t* quats = (const real_t*)p.quats + 4 * i;
    const real_t* ls = (const real_t*)p.log_scales + 3 * i;
    real_t m[3] = {means[0], means[1], means[2]};
    real_t q[4] = {quats[0], quats[1], quats[2], quats[3]};
    real_t l[3] = {ls[0], ls[1], ls[2]};
    real_t logit = ((const real_t*)p.opacity_logits)[i];
    int64_t id = nurec_load_index(p.track_ids, p.ids_are_int64, i);
    int kind = nurec_collect_kind(id, p.num_tracks, p.track_inside);
    const real_t* pose = NULL;
    real_t pose_r[7];
    if (id >= 0 && id < p.num_tracks) {
        const real_t* tp = (const real_t*)p.track_poses + 7 * id;
        for (int c = 0; c < 7; ++c) pose_r[c] = tp[c];
        pose = pose_r;
    }
    real_t mw[3], qw[4], s[3], o;
    NR(collect_one)(kind, pose, m, q, l, logit, mw, qw, s, &o);
    real_t* omw = (real_t*)p.means_w + 3 * i;
    real_t* oqw = (real_t*)p.quats_w + 4 * i;
    real_t* os = (real_t*)p.scales + 3 * i;
    for (int c = 0; c < 3; ++c) { omw[c] = mw[c]; os[c] = s[c]; }
    for (int c = 0; c < 4; ++c) oqw[c] = qw[c];
    ((real_t*)p.opacities)[i] = o;
}

__global__ void __launch_bounds__(NUREC_COLLECT_THREADS)
NR(collect_backward_kernel)(nurec_collect_params p) {
    __shared__ real_t s_acc[7];
    __shared__ long long s_key;
    const unsigned full = 0xffffffffu;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    long long key = -1;  /* the track this thread's pose gradient goes to */
    real_t gpose[7] = {0, 0, 0, 0, 0, 0, 0};
    if (i < p.num_gaussians) {
        int64_t id = nurec_load_index(p.track_ids, p.ids_are_int64, i);
        int kind = nurec_collect_kind(id, p.num_tracks, p.track_inside);
        real_t gm[3] = {0, 0, 0}, gq[4] = {0, 0, 0, 0}, gls[3] = {0, 0, 0}, glogit = 0;
        if (kind != NUREC_FORCED) {
            const real_t* a = (const real_t*)p.means + 3 * i;
            const real_t* b = (const real_t*)p.quats + 4 * i;
            const real_t* c3 = (const real_t*)p.log_scales + 3 * i;
            const real_t* g1 = (const real_t*)p.grad_means_w + 3 * i;
            const real_t* g2 = (const real_t*)p.grad_quats_w + 4 * i;
            const real_t* g3 = (const real_t*)p.grad_scales + 3 * i;
            real_t m[3] = {a[0], a[1], a[2]}, q[4] = {b[0], b[1], b[2], b[3]};
            real_t l[3] = {c3[0], c3[1], c3[2]};
            real_t gmw[3] = {g1[0], g1[1], g1[2]}, gqw[4] = {g2[0], g2[1], g2[2], g2[3]};
            real_t gs[3] = {g3[0], g3[1], g3[2]};
            real_t pose_r[7];
            const real_t* pose = NULL;
            if (kind == NUREC_ON_TRACK) {
                const real_t* tp = (const real_t*)p.track_poses + 7 * id;
                for (int c = 0; c < 7; ++c) pose_r[c] = tp[c];
                pose = pose_r;
                key = id;
            }
            NR(collect_one_vjp)(pose, m, q, l, ((const real_t*)p.opacity_logits)[i], gmw, gqw,
                                gs, ((const real_t*)p.grad_opacities)[i], gm, gq, gls, &glogit,
                                gpose);
        }
        real_t* om = (real_t*)p.grad_means + 3 * i;
        real_t* oq = (real_t*)p.grad_quats + 4 * i;
        real_t* ol = (real_t*)p.grad_log_scales + 3 * i;
        for (int c = 0; c < 3; ++c) { om[c] = gm[c]; ol[c] = gls[c]; }
        for (int c = 0; c < 4; ++c) oq[c] = gq[c];
        ((real_t*)p.grad_opacity_logits)[i] = glogit;
    }

    /* Reduce the pose gradients: the block's first Gaussian names the track
       most of the block belongs to (packed actors are contiguous); that
       track accumulates in shared memory, any other in global memory. */
    if (threadIdx.x == 0) s_key = key;
    if (threadIdx.x < 7) s_acc[threadIdx.x] = 0;
    __syncthreads();
    long long bkey = s_key;
    real_t* gtp = (real_t*)p.grad_track_poses;
    long long key0 = __shfl_sync(full, key, 0);
    if (__all_sync(full, key == key0)) {
        if (key0 >= 0) {
            for (int c = 0; c < 7; ++c) {
                real_t v = gpose[c];
                for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(full, v, off);
                if ((threadIdx.x & 31) == 0)
                    atomicAdd(key0 == bkey ? &s_acc[c] : &gtp[7 * key0 + c], v);
            }
        }
    } else if (key >= 0) {
        for (int c = 0; c < 7; ++c)
            atomicAdd(key == bkey ? &s_acc[c] : &gtp[7 * key + c], gpose[c]);
    }
    __syncthreads();
    if (bkey >= 0 && threadIdx.x < 7) atomicAdd(&gtp[7 * bkey + threadIdx.x], s_acc[threadIdx.x]);
}
