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
/* float32 with int32 ids and 16-byte aligned buffers: a warp takes 32
 * consecutive Gaussians, and every global access is a coalesced 16-byte one
 * whatever the row width. The 32 rows of 3 floats (means, log-scales, and
 * the outputs' means and scales) travel as 24 float4s on lanes 0..23 and
 * are redistributed by shuffles. No shared memory and no block barrier: each
 * warp loads, computes and stores on its own, so the loads and stores of
 * different warps overlap. (A block-wide shared-memory staging, all of a
 * block's loads, then its compute, then its stores, ran 15.3-16.5 us on the
 * street scene against 14.8-14.9 for this; benchmarks/RESULTS.md.) */
__device__ __forceinline__ float nurec_pick4(const float v[4], int c) {
    return c == 0 ? v[0] : c == 1 ? v[1] : c == 2 ? v[2] : v[3];
}

__device__ __forceinline__ float nurec_pick3(const float v[3], int c) {
    return c == 0 ? v[0] : c == 1 ? v[1] : v[2];
}

/* Row `lane` (3 floats) of 32 rows held as float4 number `lane` (lanes < 24). */
__device__ __forceinline__ void nurec_row3_of_vec4s(float4 v, int lane, float r[3]) {
    const unsigned full = 0xffffffffu;
    const int f0 = 3 * lane, la = f0 >> 2, lb = (f0 + 2) >> 2;
    const float a[4] = {__shfl_sync(full, v.x, la), __shfl_sync(full, v.y, la), __shfl_sync(full, v.z, la),
                        __shfl_sync(full, v.w, la)};
    const float b[4] = {__shfl_sync(full, v.x, lb), __shfl_sync(full, v.y, lb), __shfl_sync(full, v.z, lb),
                        __shfl_sync(full, v.w, lb)};
    for (int c = 0; c < 3; ++c) {
        const int f = f0 + c;
        r[c] = (f >> 2) == la ? nurec_pick4(a, f & 3) : nurec_pick4(b, f & 3);
    }
}

/* Float4 number `lane` (meaningful on lanes < 24) of 32 rows of 3 floats,
 * lane g holding row g. */
__device__ __forceinline__ float4 nurec_vec4_of_row3s(const float r[3], int lane) {
    const unsigned full = 0xffffffffu;
    const int f0 = 4 * lane, ga = min(f0 / 3, 31), gb = min(ga + 1, 31);
    const float a[3] = {__shfl_sync(full, r[0], ga), __shfl_sync(full, r[1], ga), __shfl_sync(full, r[2], ga)};
    const float b[3] = {__shfl_sync(full, r[0], gb), __shfl_sync(full, r[1], gb), __shfl_sync(full, r[2], gb)};
    float o[4];
    for (int j = 0; j < 4; ++j) {
        const int f = f0 + j, g = f / 3;
        o[j] = g == ga ? nurec_pick3(a, f - 3 * g) : nurec_pick3(b, f - 3 * g);
    }
    return make_float4(o[0], o[1], o[2], o[3]);
}

__global__ void __launch_bounds__(NUREC_COLLECT_THREADS)
NR(collect_forward_warp_kernel)(nurec_collect_params p) {
    const int lane = threadIdx.x & 31;
    const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t g0 = 32 * warp;
    if (g0 >= p.num_gaussians) return; /* whole warps */
    if (g0 + 32 > p.num_gaussians) {   /* the last, partial group: one Gaussian per lane */
        if (g0 + lane < p.num_gaussians) NR(collect_forward_scalar)(p, g0 + lane);
        return;
    }
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
    const int64_t v3 = 24 * warp + lane; /* this lane's float4 of the 3-float rows */
    const float4 vm = lane < 24 ? ((const float4*)p.means)[v3] : zero;
    const float4 vl = lane < 24 ? ((const float4*)p.log_scales)[v3] : zero;
    const float4 vq = ((const float4*)p.quats)[g0 + lane];
    const float logit = ((const float*)p.opacity_logits)[g0 + lane];
    const int id = ((const int*)p.track_ids)[g0 + lane];
    float m[3], l[3], q[4] = {vq.x, vq.y, vq.z, vq.w};
    nurec_row3_of_vec4s(vm, lane, m);
    nurec_row3_of_vec4s(vl, lane, l);
    float mw[3], qw[4], sc[3], o;
    NR(collect_forward_gaussian)(p, id, m, q, l, logit, mw, qw, sc, &o);
    const float4 om = nurec_vec4_of_row3s(mw, lane), os = nurec_vec4_of_row3s(sc, lane);
    if (lane < 24) {
        ((float4*)p.means_w)[v3] = om;
        ((float4*)p.scales)[v3] = os;
    }
    ((float4*)p.quats_w)[g0 + lane] = make_float4(qw[0], qw[1], qw[2], qw[3]);
    ((float*)p.opacities)[g0 + lane] = o;
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
