/* Generic over real_t (see math/generic.h). */

/* One Gaussian of the forward. Reads its track's pose and inside flag only
 * after the pose kernel has finished (programmatic dependent launch): the
 * static background, most of a scene, never waits. */
__device__ __forceinline__ void NR(collect_forward_gaussian)(
    const nurec_collect_params& p, int64_t id, const real_t m[3], const real_t q[4],
    const real_t l[3], real_t logit, real_t mw[3], real_t qw[4], real_t s[3], real_t* o) {
    real_t pose[7] = {0, 0, 0, 1, 0, 0, 0};
    int kind = id == -1 ? NUREC_STATIC : NUREC_FORCED;
    int has_pose = id >= 0 && id < p.num_tracks;
    if (has_pose) {
        nurec_pdl_wait_prev();
        kind = nurec_collect_kind(id, p.num_tracks, p.track_inside);
        const real_t* tp = (const real_t*)p.track_poses + 7 * id;
        for (int c = 0; c < 7; ++c) pose[c] = tp[c];
    }
    NR(collect_one)(kind, has_pose, pose, m, q, l, logit, mw, qw, s, o);
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

/* One thread per Gaussian: any dtype, any index width, any alignment. */
__global__ void __launch_bounds__(NUREC_COLLECT_THREADS)
NR(collect_forward_kernel)(nurec_collect_params p) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < p.num_gaussians) NR(collect_forward_scalar)(p, i);
}

#if !R_IS_F64
/* Copies n floats between global and shared memory with the whole block,
 * 16 bytes per thread and access, consecutive threads on consecutive
 * addresses (both ends 16-byte aligned; the launcher checks global). */
__device__ __forceinline__ void nurec_block_copy_f32(float* dst, const float* src, int n) {
    int n4 = n / 4;
    for (int k = threadIdx.x; k < n4; k += blockDim.x)
        ((float4*)dst)[k] = ((const float4*)src)[k];
    for (int k = 4 * n4 + threadIdx.x; k < n; k += blockDim.x) dst[k] = src[k];
}

/* float32 with int32 ids: a block stages `staged` Gaussians (a multiple of
 * 4; dynamic shared memory, 48 bytes each) in shared memory, so that every
 * global load and store is a coalesced 16-byte access whatever the row
 * width (3 or 4 floats), then each thread works on its Gaussians from
 * shared memory and the results leave the same way. */
__global__ void __launch_bounds__(NUREC_COLLECT_THREADS)
NR(collect_forward_staged_kernel)(nurec_collect_params p, int staged) {
    extern __shared__ __align__(16) float s_stage[];
    float* s_means = s_stage;                /* 3 * staged */
    float* s_quats = s_means + 3 * staged;   /* 4 * staged, 16-byte aligned */
    float* s_scales = s_quats + 4 * staged;  /* 3 * staged */
    float* s_opac = s_scales + 3 * staged;   /* staged */
    int* s_ids = (int*)(s_opac + staged);    /* staged */
    int64_t g0 = (int64_t)blockIdx.x * staged;
    int nb = (int)min((int64_t)staged, p.num_gaussians - g0);
    nurec_block_copy_f32(s_means, (const float*)p.means + 3 * g0, 3 * nb);
    nurec_block_copy_f32(s_quats, (const float*)p.quats + 4 * g0, 4 * nb);
    nurec_block_copy_f32(s_scales, (const float*)p.log_scales + 3 * g0, 3 * nb);
    nurec_block_copy_f32(s_opac, (const float*)p.opacity_logits + g0, nb);
    nurec_block_copy_f32((float*)s_ids, (const float*)p.track_ids + g0, nb);
    __syncthreads();
    /* each thread reads its rows and writes its results in place */
    for (int j = threadIdx.x; j < nb; j += blockDim.x) {
        float m[3] = {s_means[3 * j], s_means[3 * j + 1], s_means[3 * j + 2]};
        float4 qv = ((const float4*)s_quats)[j];
        float q[4] = {qv.x, qv.y, qv.z, qv.w};
        float l[3] = {s_scales[3 * j], s_scales[3 * j + 1], s_scales[3 * j + 2]};
        float mw[3], qw[4], sc[3], o;
        NR(collect_forward_gaussian)(p, s_ids[j], m, q, l, s_opac[j], mw, qw, sc, &o);
        for (int c = 0; c < 3; ++c) { s_means[3 * j + c] = mw[c]; s_scales[3 * j + c] = sc[c]; }
        ((float4*)s_quats)[j] = make_float4(qw[0], qw[1], qw[2], qw[3]);
        s_opac[j] = o;
    }
    __syncthreads();
    nurec_block_copy_f32((float*)p.means_w + 3 * g0, s_means, 3 * nb);
    nurec_block_copy_f32((float*)p.quats_w + 4 * g0, s_quats, 4 * nb);
    nurec_block_copy_f32((float*)p.scales + 3 * g0, s_scales, 3 * nb);
    nurec_block_copy_f32((float*)p.opacities + g0, s_opac, nb);
}
#endif

/* Adds one Gaussian's pose gradient (warp-wide call; key -1: none) to its
 * track: a warp whose lanes all share a track sums in registers first; the
 * block's own track (bkey) accumulates in shared memory, any other in global
 * memory. */
__device__ __forceinline__ void NR(reduce_pose_grad)(long long key, const real_t gpose[7],
                                                     long long bkey, real_t* s_acc,
                                                     real_t* gtp) {
    const unsigned full = 0xffffffffu;
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
}

/* The track a Gaussian's pose gradient goes to, or -1. */
__device__ __forceinline__ long long NR(pose_grad_key)(const nurec_collect_params& p, int64_t id) {
    return nurec_collect_kind(id, p.num_tracks, p.track_inside) == NUREC_ON_TRACK ? id : -1;
}

/* Backward of one Gaussian from values in registers; forced Gaussians get
 * exact zeros. Returns the pose-gradient key. */
__device__ __forceinline__ long long NR(collect_backward_gaussian)(
    const nurec_collect_params& p, int64_t id, const real_t m[3], const real_t q[4],
    const real_t l[3], real_t logit, const real_t gmw[3], const real_t gqw[4],
    const real_t gs[3], real_t go, real_t gm[3], real_t gq[4], real_t gls[3], real_t* glogit,
    real_t gpose[7]) {
    int kind = nurec_collect_kind(id, p.num_tracks, p.track_inside);
    for (int c = 0; c < 7; ++c) gpose[c] = 0;
    if (kind == NUREC_FORCED) {
        for (int c = 0; c < 3; ++c) gm[c] = gls[c] = 0;
        for (int c = 0; c < 4; ++c) gq[c] = 0;
        *glogit = 0;
        return -1;
    }
    real_t pose[7] = {0, 0, 0, 1, 0, 0, 0};
    int on_track = kind == NUREC_ON_TRACK;
    if (on_track) {
        const real_t* tp = (const real_t*)p.track_poses + 7 * id;
        for (int c = 0; c < 7; ++c) pose[c] = tp[c];
    }
    NR(collect_one_vjp)(on_track, pose, m, q, l, logit, gmw, gqw, gs, go, gm, gq, gls, glogit,
                        gpose);
    return on_track ? id : -1;
}

/* One thread per Gaussian: any dtype, any index width, any alignment. */
__global__ void __launch_bounds__(NUREC_COLLECT_THREADS)
NR(collect_backward_kernel)(nurec_collect_params p) {
    __shared__ real_t s_acc[7];
    __shared__ long long s_key;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    long long key = -1;  /* the track this thread's pose gradient goes to */
    real_t gpose[7] = {0, 0, 0, 0, 0, 0, 0};
    if (i < p.num_gaussians) {
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
        real_t gm[3], gq[4], gls[3], glogit;
        key = NR(collect_backward_gaussian)(
            p, nurec_load_index(p.track_ids, p.ids_are_int64, i), m, q, l,
            ((const real_t*)p.opacity_logits)[i], gmw, gqw, gs, ((const real_t*)p.grad_opacities)[i],
            gm, gq, gls, &glogit, gpose);
        real_t* om = (real_t*)p.grad_means + 3 * i;
        real_t* oq = (real_t*)p.grad_quats + 4 * i;
        real_t* ol = (real_t*)p.grad_log_scales + 3 * i;
        for (int c = 0; c < 3; ++c) { om[c] = gm[c]; ol[c] = gls[c]; }
        for (int c = 0; c < 4; ++c) oq[c] = gq[c];
        ((real_t*)p.grad_opacity_logits)[i] = glogit;
    }
    /* the block's first Gaussian names the track most of the block belongs
       to (packed actors are contiguous) */
    if (threadIdx.x == 0) s_key = key;
    if (threadIdx.x < 7) s_acc[threadIdx.x] = 0;
    __syncthreads();
    long long bkey = s_key;
    real_t* gtp = (real_t*)p.grad_track_poses;
    NR(reduce_pose_grad)(key, gpose, bkey, s_acc, gtp);
    __syncthreads();
    if (bkey >= 0 && threadIdx.x < 7) atomicAdd(&gtp[7 * bkey + threadIdx.x], s_acc[threadIdx.x]);
}
