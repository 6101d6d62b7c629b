/* Generic over real_t (see math/generic.h). */

/* One Gaussian of the forward. Reads its track's pose and inside flag only
 * after the pose kernel has finished (programmatic dependent launch): the
 * static background, most of a scene, never waits. */
__device__ __forceinline__ void NR(collect_forward_gaussian)(
    const nurec_collect_params& p, int64_t id, const real_t m[3], const real_t q[4],
    const real_t l[3], real_t logit, real_t mw[3], real_t qw[4], real_t s[3], real_t* o) {
    const real_t* pose = NULL;
    real_t pose_r[7];
    int kind = NUREC_STATIC;
    if (id != -1) kind = NUREC_FORCED;
    if (id >= 0 && id < p.num_tracks) {
        nurec_pdl_wait_prev();
        kind = nurec_collect_kind(id, p.num_tracks, p.track_inside);
        const real_t* tp = (const real_t*)p.track_poses + 7 * id;
        for (int c = 0; c < 7; ++c) pose_r[c] = tp[c];
        pose = pose_r;
    }
    NR(collect_one)(kind, pose, m, q, l, logit, mw, qw, s, o);
}

/* Scalar path: one Gaussian per thread, any dtype, any index width. */
__device__ __forceinline__ void NR(collect_forward_scalar)(const nurec_collect_params& p,
                                                           int64_t i) {
    const real_t* means = (const real_t*)p.means + 3 * i;
    const real_t* quats = (const real_t*)p.quats + 4 * i;
    const real_t* ls = (const real_t*)p.log_scales + 3 * i;
    real_t m[3] = {means[0], means[1], means[2]};
    real_t q[4] = {quats[0], quats[1], quats[2], quats[3]};
    real_t l[3] = {ls[0], ls[1], ls[2]};
    real_t logit = ((const real_t*)p.opacity_logits)[i];
    int64_t id = nurec_load_index(p.track_ids, p.ids_are_int64, i);
    real_t mw[3], qw[4], s[3], o;
    NR(collect_forward_gaussian)(p, id, m, q, l, logit, mw, qw, s, &o);
    real_t* omw = (real_t*)p.means_w + 3 * i;
    real_t* oqw = (real_t*)p.quats_w + 4 * i;
    real_t* os = (real_t*)p.scales + 3 * i;
    for (int c = 0; c < 3; ++c) { omw[c] = mw[c]; os[c] = s[c]; }
    for (int c = 0; c < 4; ++c) oqw[c] = qw[c];
    ((real_t*)p.opacities)[i] = o;
}

/* Threads [0, n_vec) take 4 Gaussians each through 16-byte loads and stores
 * (float32, int32 ids, 16-byte aligned buffers: the launcher checks); the
 * remaining threads take one Gaussian each from Gaussian 4 * n_vec on. */
__global__ void __launch_bounds__(NUREC_COLLECT_THREADS)
NR(collect_forward_kernel)(nurec_collect_params p, int64_t n_vec) {
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
#if !R_IS_F64
    if (t < n_vec) {
        /* all loads first: 12 independent 16-byte loads in flight per thread */
        float4 mv[3], qv[4], lv[3], ov;
        int4 iv;
        const float4* M = (const float4*)p.means + 3 * t;
        const float4* Q = (const float4*)p.quats + 4 * t;
        const float4* L = (const float4*)p.log_scales + 3 * t;
        for (int k = 0; k < 3; ++k) { mv[k] = M[k]; lv[k] = L[k]; }
        for (int k = 0; k < 4; ++k) qv[k] = Q[k];
        ov = ((const float4*)p.opacity_logits)[t];
        iv = ((const int4*)p.track_ids)[t];
        const float* m = (const float*)mv;
        const float* q = (const float*)qv;
        const float* l = (const float*)lv;
        const float* lo = (const float*)&ov;
        const int* id = (const int*)&iv;
        float4 mwv[3], qwv[4], sv[3], opv;
        float* mw = (float*)mwv;
        float* qw = (float*)qwv;
        float* s = (float*)sv;
        float* o = (float*)&opv;
#pragma unroll
        for (int g = 0; g < 4; ++g)
            NR(collect_forward_gaussian)(p, id[g], m + 3 * g, q + 4 * g, l + 3 * g, lo[g],
                                         mw + 3 * g, qw + 4 * g, s + 3 * g, o + g);
        float4* OM = (float4*)p.means_w + 3 * t;
        float4* OQ = (float4*)p.quats_w + 4 * t;
        float4* OS = (float4*)p.scales + 3 * t;
        for (int k = 0; k < 3; ++k) { OM[k] = mwv[k]; OS[k] = sv[k]; }
        for (int k = 0; k < 4; ++k) OQ[k] = qwv[k];
        ((float4*)p.opacities)[t] = opv;
        return;
    }
#endif
    int64_t i = 4 * n_vec + (t - n_vec);
    if (i < p.num_gaussians) NR(collect_forward_scalar)(p, i);
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
