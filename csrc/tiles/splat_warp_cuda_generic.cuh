/* Warp-level sums of a splat's gradient, shared by the camera and lidar
 * backward kernels. Generic over real_t (see math/generic.h): included by
 * their *_cuda_generic.cuh files, once per precision. */

/* How the sums reach global memory. Defaults on here, which the lidar
 * keeps; rasterize_camera.cu defines both 0 before this file (H200:
 * they cost the cameras 0.3-6% and gain the lidar ~0.6%:
 * benchmarks/RESULTS.md). Set either through NUREC_OPS_NVCC_FLAGS to time a
 * build the other way.
 *   NUREC_SPLAT_ONE_ATOMIC: a warp sum's lanes select their destination and
 *     issue one atomic instruction (0: a branch per destination array);
 *   NUREC_SPLAT_VEC_ATOMICS: a lane that adds its own values uses sm_90's
 *     vector atomics for the record row and absgrad (0: one per value). */
#ifndef NUREC_SPLAT_ONE_ATOMIC
#define NUREC_SPLAT_ONE_ATOMIC 1
#endif
#ifndef NUREC_SPLAT_VEC_ATOMICS
#define NUREC_SPLAT_VEC_ATOMICS 1
#endif
/* absgrad's two warp totals in one float2 reduction from one lane (1), or
 * as two lanes' scalar ones with the record's (0). H200 (on the
 * parts-list branch, fwd+bwd with absgrad against without): absgrad's cost
 * +0.4-0.5% (street camera) and +2.4-2.6% (lidar) against +1.4-1.9% and
 * +3.5% with 0; the plain kernels are the same code. */
#ifndef NUREC_SPLAT_ABS_WARP_VEC2
#define NUREC_SPLAT_ABS_WARP_VEC2 1
#endif
/* Without NUREC_SPLAT_VEC_ATOMICS (the camera): absgrad's pair of a lane
 * that adds its own values in one float2 atomic (1) or two scalar ones (0).
 * H200, street camera fwd+bwd with absgrad: 2.756-2.759 ms
 * against 2.760-2.768 (absgrad's cost +3.2% against +3.4-3.6%). */
#ifndef NUREC_SPLAT_ABS_VEC2
#define NUREC_SPLAT_ABS_VEC2 1
#endif

/* A measurement switch, never for use: 1 skips the global atomics of both
 * helpers below (a comparison against a value no sum takes keeps every sum
 * computed), so that a timed build shows what the atomics themselves cost.
 * Its gradients are wrong. */
#ifndef NUREC_SPLAT_DIAG_SKIP_ATOMICS
#define NUREC_SPLAT_DIAG_SKIP_ATOMICS 0
#endif
#define NUREC_SPLAT_DIAG_SENTINEL (-1.2345e30)

/* Without absgrad, the warp's sums by recursive halving
 * (NR(splat_warp_reduce_n): fewer shuffles where fewer than 16 values are
 * summed) instead of the 16-value butterfly (0), which absgrad keeps (its
 * pair of totals in one float2 from lanes two apart). On here, which the
 * camera keeps (sm_90 SASS: its backward's loop 355 -> 344 instructions;
 * H100, fwd+bwd against the butterfly: street 1.751 -> 1.740 ms, garden
 * 648 x3 1.162 -> 1.157, garden 1944 x3 3.574 -> 3.520);
 * rasterize_lidar.cu defines it 0. */
#ifndef NUREC_SPLAT_HALVING
#define NUREC_SPLAT_HALVING 1
#endif

#ifndef NUREC_SPLAT_REDUCED_INDEX
#define NUREC_SPLAT_REDUCED_INDEX
/* Which of the 16 values lane l holds after NR(splat_warp_reduce16): bits
 * 4..1 of l (each value lands in lanes l and l ^ 1). */
static __device__ __forceinline__ int nurec_splat_reduced_index(int lane) {
    return ((lane >> 4) & 1) * 8 + ((lane >> 3) & 1) * 4 + ((lane >> 2) & 1) * 2 + ((lane >> 1) & 1);
}
#endif

/* Sums 16 values over the warp's 32 lanes with 16 shuffles instead of 5 per
 * value: at each butterfly round a lane keeps one half of its values and
 * sends the other half to its partner, which keeps the opposite half. On
 * return the lane holds the warp's total of value
 * nurec_splat_reduced_index(lane). a is overwritten. */
/* One butterfly round over lane distance o: the first o values of a. */
#define NUREC_SPLAT_ROUND(a, lane, o)                                          \
    do {                                                                       \
        const bool hi_ = ((lane) & (o)) != 0;                                  \
        _Pragma("unroll") for (int k_ = 0; k_ < (o) / 2; ++k_) {               \
            const real_t send_ = hi_ ? (a)[k_] : (a)[k_ + (o) / 2];            \
            const real_t keep_ = hi_ ? (a)[k_ + (o) / 2] : (a)[k_];            \
            (a)[k_] = keep_ + __shfl_xor_sync(0xffffffffu, send_, (o));        \
        }                                                                      \
    } while (0)

NUREC_HD_DEV real_t NR(splat_warp_reduce16)(real_t a[16], int lane) {
    /* rounds written out: a loop over o was not unrolled and put a in local memory */
    NUREC_SPLAT_ROUND(a, lane, 16);
    NUREC_SPLAT_ROUND(a, lane, 8);
    NUREC_SPLAT_ROUND(a, lane, 4);
    NUREC_SPLAT_ROUND(a, lane, 2);
    return a[0] + __shfl_xor_sync(0xffffffffu, a[0], 1);
}

/* The same sums for N <= 16 values, N known at compile time, by recursive
 * halving: at each round a lane keeps h = ceil(n / 2) of its n slots and
 * sends the other half to its partner (a slot past n is a zero), so the
 * rounds over lane distances 16, 8, 4, 2 shuffle ceil(N / 2), then about
 * half as many each, and the last round 1: 13 shuffles for the camera's 11
 * values, 12 for the lidar's 9, where NR(splat_warp_reduce16) always shuffles
 * 16. Each value's partial sums are over the same lanes, added in the same
 * order, as NR(splat_warp_reduce16)'s: the same totals, bit for bit. On
 * return the lane holds the total of value *id (lanes l and l ^ 1 the same
 * one), or *id = N: a lane left with a zero slot. a is overwritten. */
#define NUREC_SPLAT_HALVE(a, lane, o, n, h)                                    \
    do {                                                                       \
        const bool hi_ = ((lane) & (o)) != 0;                                  \
        _Pragma("unroll") for (int k_ = 0; k_ < (h); ++k_) {                   \
            const real_t far_ = k_ + (h) < (n) ? (a)[k_ + (h)] : (real_t)0;    \
            const real_t send_ = hi_ ? (a)[k_] : far_;                         \
            const real_t keep_ = hi_ ? far_ : (a)[k_];                         \
            (a)[k_] = keep_ + __shfl_xor_sync(0xffffffffu, send_, (o));        \
        }                                                                      \
    } while (0)

template <int N>
NUREC_HD_DEV real_t NR(splat_warp_reduce_n)(real_t a[16], int lane, int* id) {
    static_assert(N >= 1 && N <= 16, "16 values at most: the rounds over 16, 8, 4, 2 leave one");
    constexpr int h16 = (N + 1) / 2, h8 = (h16 + 1) / 2, h4 = (h8 + 1) / 2, h2 = (h4 + 1) / 2;
    NUREC_SPLAT_HALVE(a, lane, 16, N, h16);
    NUREC_SPLAT_HALVE(a, lane, 8, h16, h8);
    NUREC_SPLAT_HALVE(a, lane, 4, h8, h4);
    NUREC_SPLAT_HALVE(a, lane, 2, h4, h2);
    /* the slot back through the rounds: a hi lane kept slot k + h of n */
    int k = (lane & 2) ? h2 : 0;
    bool ok = k < h4;
    k += (lane & 4) ? h4 : 0;
    ok = ok && k < h8;
    k += (lane & 8) ? h8 : 0;
    ok = ok && k < h16;
    k += (lane & 16) ? h16 : 0;
    *id = ok && k < N ? k : N;
    return a[0] + __shfl_xor_sync(0xffffffffu, a[0], 1);
}

/* Adds the warp's sums of one Gaussian's gradient to global memory. v holds
 * 7 record values, then nfs feature slots: record values q < n_rec go to
 * g_rec[q], features f < n_feat to g_feat[f], and when g_abs is not NULL
 * the sums of |v[0]|, |v[1]| (SPEC section 8's absgrad; av[0..1] instead
 * where av is not NULL: a lane that sums several pixels passes the sums of
 * their |.|) to g_abs[0..1], in the butterfly's spare slots (the 16
 * shuffles sum 16 values either way); one atomic per value, issued by 16
 * lanes at once (g_abs is the record row's slots 8, 9: tiles/splat.h's
 * NUREC_SPLAT_GREC_ABS). Every lane of the warp must call it. */
template <int NFS>
NUREC_HD_DEV void NR(splat_warp_add)(const real_t* v, int lane, real_t* g_rec, int n_rec, real_t* g_feat,
                                     int n_feat, real_t* g_abs, const real_t* av) {
    constexpr int nfs = NFS, nv = 7 + NFS;
    real_t a[16];
#pragma unroll
    for (int q = 0; q < 16; ++q) a[q] = q < nv ? v[q] : (real_t)0;
#if NUREC_SPLAT_HALVING
    if (!g_abs) { /* without absgrad (a literal NULL in the plain builds: this branch only) */
        int q;
        const real_t total = NR(splat_warp_reduce_n)<nv>(a, lane, &q);
#if NUREC_SPLAT_DIAG_SKIP_ATOMICS
        if (total != (real_t)NUREC_SPLAT_DIAG_SENTINEL) return;
#endif
        if ((lane & 1) != 0 || q >= nv) return; /* q = nv: a zero slot */
#if NUREC_SPLAT_ONE_ATOMIC
        real_t* dst = q < 7 ? (q < n_rec ? g_rec + q : (real_t*)0) : (q - 7 < n_feat ? g_feat + (q - 7) : (real_t*)0);
        if (dst) atomicAdd(dst, total);
#else
        if (q < 7) {
            if (q < n_rec) atomicAdd(g_rec + q, total);
        } else if (q - 7 < n_feat) {
            atomicAdd(g_feat + (q - 7), total);
        }
#endif
        return;
    }
#endif
    if (g_abs) {
        a[nv] = av ? av[0] : R_FABS(v[0]);
        a[nv + 1] = av ? av[1] : R_FABS(v[1]);
    }
    const real_t total = NR(splat_warp_reduce16)(a, lane);
    const int q = nurec_splat_reduced_index(lane);
#if NUREC_SPLAT_DIAG_SKIP_ATOMICS
    if (total != (real_t)NUREC_SPLAT_DIAG_SENTINEL) return;
#endif
#if NUREC_SPLAT_ABS_WARP_VEC2 && !R_IS_F64 && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (g_abs) { /* uniform over the warp: every lane shuffles */
        /* value q sits in lanes 2q, 2q + 1: absgrad's second total is two
           lanes up from its first; one 8-byte reduction for the pair */
        const real_t next = __shfl_down_sync(0xffffffffu, total, 2);
        if ((lane & 1) == 0 && q == 7 + nfs) atomicAdd((float2*)g_abs, make_float2(total, next));
        g_abs = (real_t*)0; /* the record and features as without absgrad */
    }
#endif
#if NUREC_SPLAT_ONE_ATOMIC
    /* each lane picks its destination, then one atomic instruction for the
       warp: a branch per destination array issued up to three */
    real_t* dst = (real_t*)0;
    if (q < 7)
        dst = q < n_rec ? g_rec + q : (real_t*)0;
    else if (q - 7 < nfs)
        dst = q - 7 < n_feat ? g_feat + (q - 7) : (real_t*)0;
    else if (g_abs && q - 7 - nfs < 2)
        dst = g_abs + (q - 7 - nfs);
    if ((lane & 1) == 0 && dst) atomicAdd(dst, total);
#else
    if ((lane & 1) != 0) return;
    if (!g_abs) { /* a literal NULL where the caller has no absgrad: this branch only */
        if (q < 7) {
            if (q < n_rec) atomicAdd(g_rec + q, total);
        } else if (q - 7 < nfs && q - 7 < n_feat) {
            atomicAdd(g_feat + (q - 7), total);
        }
    } else if (q >= 7 && q - 7 < nfs) {
        if (q - 7 < n_feat) atomicAdd(g_feat + (q - 7), total);
    } else {
        /* the record and absgrad in one instruction: g_abs is the record
           row's slots 8, 9 (NUREC_SPLAT_GREC_ABS), so one line is touched */
        real_t* dst = q < 7 ? (q < n_rec ? g_rec + q : (real_t*)0) : (q - 7 - nfs < 2 ? g_abs + (q - 7 - nfs) : (real_t*)0);
        if (dst) atomicAdd(dst, total);
    }
#endif
}

/* The same for a lane that adds its own values (few lanes of the warp
 * contribute). */
NUREC_HD_DEV void NR(splat_lane_add)(const real_t* v, int nfs, real_t* g_rec, int n_rec, real_t* g_feat,
                                     int n_feat, real_t* g_abs, const real_t* av) {
    const real_t abs0 = av ? av[0] : R_FABS(v[0]), abs1 = av ? av[1] : R_FABS(v[1]);
#if NUREC_SPLAT_DIAG_SKIP_ATOMICS
    real_t all = abs0 + abs1;
    for (int q = 0; q < 7 + nfs; ++q) all += v[q];
    if (all != (real_t)NUREC_SPLAT_DIAG_SENTINEL) return;
#endif
#if NUREC_SPLAT_VEC_ATOMICS && !R_IS_F64 && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* sm_90's vector reductions: the record row's 8 slots in two (a row of
       [P, 8] float32 scratch from the glue: 32-byte aligned; slot 7 is
       unused and gets 0, and so does the depth slot past n_rec), absgrad's
       pair ([P, 2]) in one: 3 atomic instructions where there were 9 */
    atomicAdd((float4*)g_rec, make_float4(v[0], v[1], v[2], v[3]));
    atomicAdd((float4*)(g_rec + 4), make_float4(v[4], v[5], n_rec > 6 ? v[6] : 0.f, 0.f));
    for (int q = 0; q < nfs; ++q)
        if (q < n_feat) atomicAdd(g_feat + q, v[7 + q]);
    if (g_abs) atomicAdd((float2*)g_abs, make_float2(abs0, abs1));
#else
    for (int q = 0; q < n_rec; ++q) atomicAdd(g_rec + q, v[q]);
    for (int q = 0; q < nfs; ++q)
        if (q < n_feat) atomicAdd(g_feat + q, v[7 + q]);
    if (g_abs) {
#if NUREC_SPLAT_ABS_VEC2 && !R_IS_F64 && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        /* absgrad's pair in one vector atomic (8-byte aligned: slots 8, 9
           of a 64-byte row), without the record's float4s */
        atomicAdd((float2*)g_abs, make_float2(abs0, abs1));
#else
        atomicAdd(g_abs, abs0);
        atomicAdd(g_abs + 1, abs1);
#endif
    }
#endif
}
