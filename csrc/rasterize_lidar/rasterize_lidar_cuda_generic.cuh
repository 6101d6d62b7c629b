/* Generic over real_t (see math/generic.h). */

#include "tiles/splat_warp_cuda_generic.cuh"

__global__ void __launch_bounds__(RL_PROJ_THREADS)
NR(rl_project_kernel)(nurec_rasterize_lidar_params p) {
    const int64_t N = p.num_gaussians;
    int64_t it = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (it >= p.num_sweeps * N) return;
    int64_t c = it / N, g = it - c * N;
    NR(rl_sensor) S;
    NR(rl_sensor_load)((const real_t*)p.viewmats + 16 * c, &S);
    const real_t* mp = (const real_t*)p.means + 3 * g;
    const real_t* qp = (const real_t*)p.quats + 4 * g;
    const real_t* sp = (const real_t*)p.scales + 3 * g;
    real_t m[3] = {mp[0], mp[1], mp[2]}, q[4] = {qp[0], qp[1], qp[2], qp[3]};
    real_t s[3] = {sp[0], sp[1], sp[2]};
    real_t rec[NUREC_TREC_SIZE];
    NR(rl_proj) P;
    int vis = NR(rl_project)(&S, m, q, s, ((const real_t*)p.opacities)[g], (real_t)p.near_plane,
                             (real_t)p.far_plane, (real_t)p.eps2d, &P, rec);
    int32_t box[NUREC_BOX_SIZE] = {-1, -1, -1, 0};
    int64_t cnt = 0;
    if (vis)
        cnt = NR(rl_box)(rec, (const real_t*)p.row_elevations, (const real_t*)p.column_azimuths,
                         (const real_t*)p.row_azimuth_offsets, p.rows, p.cols, p.tiles_x,
                         p.tiles_y, box);
    real_t* out = (real_t*)p.records + NUREC_TREC_SIZE * it;
    for (int k = 0; k < NUREC_TREC_SIZE; ++k) out[k] = rec[k];
    int32_t* ob = p.boxes + NUREC_BOX_SIZE * it;
    for (int k = 0; k < NUREC_BOX_SIZE; ++k) ob[k] = box[k];
    p.counts[it] = cnt;
}

/* Warp culling. A tile of the horizon band lists tens of thousands of
 * Gaussians that are tiny in angle (the far street), each reaching a few
 * rays of the tile's 256: evaluating every one at every ray was most of the
 * kernels' time. So each warp reads its tile's list 32 entries at a time
 * (one per lane), tests each against the angular window of its own rays and
 * evaluates only the ones that can reach them, in list order, broadcast by
 * shuffles. The test is conservative: a Gaussian is skipped only when every
 * ray of the warp lies outside its opacity-aware ellipse (widened like the
 * binning's), where alpha is below 1/255 anyway, so the outputs are the same
 * as without culling.
 *
 * The warps of a tile do not wait for each other: no shared memory, no block
 * barrier. (With the list staged block-wide in shared memory, ncu showed
 * 56% (forward) and 65% (backward) of the stall cycles at the barrier: a
 * warp looking down the street evaluates far more than one looking at a
 * facade, and every batch made all 8 wait for the slowest.) Each warp reads
 * the list itself; the records are L2-resident and L1 is left all cache. */
typedef struct NR(rl_window) {
    real_t az, half_az, el_lo, el_hi; /* centre, half-width (wrapped), elevation span */
    bool empty;                       /* no active ray in the warp */
} NR(rl_window);

NUREC_HD_DEV NR(rl_window) NR(rl_warp_window)(bool active, real_t raz, real_t rel) {
    NR(rl_window) w;
    const unsigned in = __ballot_sync(0xffffffffu, active);
    w.empty = in == 0;
    w.az = __shfl_sync(0xffffffffu, raz, in ? __ffs(in) - 1 : 0);
    real_t h = active ? R_FABS(NR(rl_wrap)(raz - w.az)) : (real_t)0;
    real_t lo = active ? rel : (real_t)INFINITY, hi = active ? rel : -(real_t)INFINITY;
    for (int o = 16; o > 0; o >>= 1) {
        h = R_FMAX(h, __shfl_xor_sync(0xffffffffu, h, o));
        lo = R_FMIN(lo, __shfl_xor_sync(0xffffffffu, lo, o));
        hi = R_FMAX(hi, __shfl_xor_sync(0xffffffffu, hi, o));
    }
    w.half_az = h;
    w.el_lo = lo;
    w.el_hi = hi;
    return w;
}

/* Whether record r (tiles.h layout) may reach a ray of the window: outside
 * the half-extents (azimuth, elevation) of its ellipse d^T Q d <= thr,
 * widened as the binning widens them, alpha is below 1/255. NaN: yes. */
NUREC_HD_DEV bool NR(rl_may_reach)(const NR(rl_window)* w, const real_t* r) {
    real_t thr = r[NUREC_TREC_THR], A = r[NUREC_TREC_A], B = r[NUREC_TREC_B], C = r[NUREC_TREC_C];
    real_t delta = A * C - B * B;
    const real_t grow = (real_t)(1.0 + 10 * NUREC_RL_BOUND_REL), pad = (real_t)(10 * NUREC_RL_BOUND_ABS);
    real_t ea = R_SQRT(thr * C / delta) * grow + pad, ee = R_SQRT(thr * A / delta) * grow + pad;
    real_t u = r[NUREC_TREC_U], v = r[NUREC_TREC_V];
    bool far_az = R_FABS(NR(rl_wrap)(u - w->az)) - w->half_az > ea;
    bool far_el = v - ee > w->el_hi || v + ee < w->el_lo;
    return !(far_az || far_el);
}

/* One list entry per lane: the record (first 7 values) and the features of
 * the pass of item `it`. */
typedef struct NR(rl_entry) {
    real_t r[7], f[RL_CH];
    int64_t it;
} NR(rl_entry);

/* A warp's walk over the entries [lo, hi) of its tile's list, 32 per chunk
 * (one per lane), forward (step 1) or back to front (step -1). While the
 * current chunk is processed, the next chunk's records and the item ids of
 * the one after are already in flight: a warp walking a long list (36,887
 * entries on the street's horizon) otherwise waited for two dependent
 * global loads (id, then record) per chunk, and the longest lists made the
 * kernels' tail. */
typedef struct NR(rl_walk) {
    int64_t e, lo, hi;  /* this lane's entry in the current chunk; bounds */
    int step;
    int32_t it, it_next, it_after; /* items of this, the next and the one after (-1: none) */
    real_t rec[NUREC_TREC_SIZE], rec_next[NUREC_TREC_SIZE];
} NR(rl_walk);

NUREC_HD_DEV int32_t NR(rl_item_at)(const nurec_rasterize_lidar_params& p, const NR(rl_walk)* w, int64_t e) {
    return e >= w->lo && e < w->hi ? p.isect_items[e] : -1;
}

NUREC_HD_DEV void NR(rl_record_of)(const nurec_rasterize_lidar_params& p, int32_t it, real_t* rec) {
    if (it < 0) {
        for (int q = 0; q < NUREC_TREC_SIZE; ++q) rec[q] = 0;
        return;
    }
    const real_t* r = (const real_t*)p.records + NUREC_TREC_SIZE * (int64_t)it;
    for (int q = 0; q < NUREC_TREC_SIZE; ++q) rec[q] = r[q];
}

NUREC_HD_DEV void NR(rl_walk_init)(const nurec_rasterize_lidar_params& p, NR(rl_walk)* w, int64_t first,
                                   int64_t lo, int64_t hi, int step) {
    w->e = first;
    w->lo = lo;
    w->hi = hi;
    w->step = step;
    w->it = NR(rl_item_at)(p, w, first);
    w->it_next = NR(rl_item_at)(p, w, first + 32 * step);
    NR(rl_record_of)(p, w->it, w->rec);
}

/* Issues the loads of the chunks after the current one (before processing it). */
NUREC_HD_DEV void NR(rl_walk_prefetch)(const nurec_rasterize_lidar_params& p, NR(rl_walk)* w) {
    NR(rl_record_of)(p, w->it_next, w->rec_next);
    w->it_after = NR(rl_item_at)(p, w, w->e + 64 * w->step);
}

NUREC_HD_DEV void NR(rl_walk_advance)(NR(rl_walk)* w) {
    w->e += 32 * w->step;
    w->it = w->it_next;
    w->it_next = w->it_after;
    for (int q = 0; q < NUREC_TREC_SIZE; ++q) w->rec[q] = w->rec_next[q];
}

/* Whether this lane's entry of the current chunk may reach the warp's
 * window; if so, fills x (its features loaded now: most entries are culled,
 * so they are not prefetched). */
NUREC_HD_DEV bool NR(rl_walk_entry)(const nurec_rasterize_lidar_params& p, const NR(rl_walk)* w, int c0,
                                    int nch, const NR(rl_window)* win, NR(rl_entry)* x) {
    if (w->it < 0 || !NR(rl_may_reach)(win, w->rec)) return false;
    x->it = w->it;
    for (int q = 0; q < 7; ++q) x->r[q] = w->rec[q];
    const real_t* f = (const real_t*)p.features + p.channels * (x->it % p.num_gaussians);
    for (int q = 0; q < RL_CH; ++q) x->f[q] = q < nch ? f[c0 + q] : (real_t)0;
    return true;
}

/* Lane src's entry, on every lane. */
NUREC_HD_DEV void NR(rl_bcast)(const NR(rl_entry)* x, int src, NR(rl_entry)* y) {
    for (int q = 0; q < 7; ++q) y->r[q] = __shfl_sync(0xffffffffu, x->r[q], src);
    for (int q = 0; q < RL_CH; ++q) y->f[q] = __shfl_sync(0xffffffffu, x->f[q], src);
    y->it = __shfl_sync(0xffffffffu, x->it, src);
}

/* Forward: one block per (tile, sweep, pass of up to RL_CH channels), one
 * thread per ray of the tile; each warp walks the list on its own (above). */
__global__ void __launch_bounds__(RL_BLOCK)
NR(rl_forward_kernel)(nurec_rasterize_lidar_params p, int passes) {
    const int tid = threadIdx.x, lane = tid & 31;
    const int64_t cz = blockIdx.z / passes;
    const int pass = blockIdx.z - (int)cz * passes;
    const int64_t D = p.channels;
    const int c0 = pass * RL_CH;
    const int nch = D - c0 < RL_CH ? (int)(D - c0) : RL_CH;
    const int j = blockIdx.x * NUREC_RL_TILE_COLS + (tid % NUREC_RL_TILE_COLS);
    const int i = blockIdx.y * NUREC_RL_TILE_ROWS + (tid / NUREC_RL_TILE_COLS);
    const bool inside = j < p.cols && i < p.rows;
    const int64_t tile = (cz * p.tiles_y + blockIdx.y) * p.tiles_x + blockIdx.x;
    const int64_t start = p.tile_ranges[2 * tile], end = p.tile_ranges[2 * tile + 1];
    const bool overflow = p.status[1] != 0;
    real_t raz = 0, rel = 0;
    if (inside) {
        raz = ((const real_t*)p.column_azimuths)[j] + ((const real_t*)p.row_azimuth_offsets)[i];
        rel = ((const real_t*)p.row_elevations)[i];
    }
    bool done = !inside || overflow;
    const NR(rl_window) win = NR(rl_warp_window)(!done, raz, rel);
    real_t T = 1, rng = 0, acc[RL_CH];
    for (int k = 0; k < RL_CH; ++k) acc[k] = 0;
    int32_t last = 0;
    NR(rl_walk) walk;
    NR(rl_walk_init)(p, &walk, start + lane, start, end, 1);
    for (int64_t b = start; b < end; b += 32, NR(rl_walk_advance)(&walk)) {
        if (__all_sync(0xffffffffu, done)) break;
        NR(rl_walk_prefetch)(p, &walk);
        NR(rl_entry) mine, x;
        const bool reach = NR(rl_walk_entry)(p, &walk, c0, nch, &win, &mine);
        for (unsigned m = __ballot_sync(0xffffffffu, reach); m != 0; m &= m - 1) {
            const int src = __ffs(m) - 1;
            NR(rl_bcast)(&mine, src, &x); /* every lane takes part */
            if (done) continue;
            real_t vis, dx, dy;
            real_t a = NR(rl_alpha)(x.r, raz, rel, &vis, &dx, &dy);
            if (a == 0) continue;
            real_t Tn = T * (1 - a);
            if (Tn < (real_t)NUREC_SPLAT_T_MIN) { done = true; continue; }
            real_t w = a * T;
            for (int q = 0; q < RL_CH; ++q) acc[q] += w * x.f[q];
            rng += w * x.r[NUREC_TREC_DEPTH];
            last = (int32_t)(b + src - start + 1);
            T = Tn;
        }
    }
    if (!inside) return;
    const int64_t ray = (cz * p.rows + i) * (int64_t)p.cols + j;
    real_t* out = (real_t*)p.out_features + D * ray + c0;
    const real_t nan = (real_t)NAN;
    for (int q = 0; q < RL_CH; ++q)
        if (q < nch) out[q] = overflow ? nan : acc[q];
    if (pass == 0) {
        ((real_t*)p.range)[ray] = overflow ? nan : rng;
        ((real_t*)p.alpha)[ray] = overflow ? nan : 1 - T;
        ((real_t*)p.final_T)[ray] = overflow ? nan : T;
        p.last[ray] = overflow ? 0 : last;
    }
}

/* Backward, the lidar's own kernel: one block per (tile, sweep, pass); each
 * warp sweeps its rays' lists back to front from the furthest entry any of
 * them reached, culled as in the forward; each Gaussian's gradient is summed
 * over the warp's rays with shuffles before one lane adds it to global
 * memory (when only a few lanes contribute, those lanes add directly).
 * Register budget from RL_BWD_MIN_BLOCKS_*, carveout of its own. Every lane
 * of a warp reaches every shuffle (the culled set is warp-uniform). */
__global__ void __launch_bounds__(RL_BLOCK, sizeof(real_t) == 4 ? RL_BWD_MIN_BLOCKS_F32 : RL_BWD_MIN_BLOCKS_F64)
NR(rl_backward_kernel)(nurec_rasterize_lidar_params p, int passes) {
    if (p.status[1] != 0) return; /* overflowed forward (uniform over the grid) */
    const int tid = threadIdx.x, lane = tid & 31;
    const int64_t cz = blockIdx.z / passes;
    const int pass = blockIdx.z - (int)cz * passes;
    const int64_t D = p.channels, N = p.num_gaussians;
    const int c0 = pass * RL_CH;
    const int nch = D - c0 < RL_CH ? (int)(D - c0) : RL_CH;
    const int j = blockIdx.x * NUREC_RL_TILE_COLS + (tid % NUREC_RL_TILE_COLS);
    const int i = blockIdx.y * NUREC_RL_TILE_ROWS + (tid / NUREC_RL_TILE_COLS);
    const bool inside = j < p.cols && i < p.rows;
    const int64_t tile = (cz * p.tiles_y + blockIdx.y) * p.tiles_x + blockIdx.x;
    const int64_t start = p.tile_ranges[2 * tile];
    const int64_t ray = (cz * p.rows + i) * (int64_t)p.cols + j;
    real_t raz = 0, rel = 0;
    real_t T = 0, gf[RL_CH], S[RL_CH], gz = 0, gTa = 0, Sz = 0;
    int32_t last = 0;
    for (int q = 0; q < RL_CH; ++q) gf[q] = S[q] = 0;
    if (inside) {
        raz = ((const real_t*)p.column_azimuths)[j] + ((const real_t*)p.row_azimuth_offsets)[i];
        rel = ((const real_t*)p.row_elevations)[i];
        T = ((const real_t*)p.final_T)[ray];
        last = p.last[ray];
        const real_t* g = (const real_t*)p.grad_out_features + D * ray + c0;
        for (int q = 0; q < RL_CH; ++q)
            if (q < nch) gf[q] = g[q];
        if (pass == 0) {
            gz = ((const real_t*)p.grad_range)[ray];
            gTa = ((const real_t*)p.grad_alpha)[ray] * T;
        }
    }
    /* the window of the rays that have anything to sweep, and how far */
    const NR(rl_window) win = NR(rl_warp_window)(last > 0, raz, rel);
    int32_t warp_last = last;
    for (int o = 16; o > 0; o >>= 1) warp_last = max(warp_last, __shfl_xor_sync(0xffffffffu, warp_last, o));
    real_t* grec = (real_t*)p.grad_records;
    real_t* gfeat = (real_t*)p.grad_features;
    NR(rl_walk) walk; /* lane order = back to front: entry b_end - 1 - lane */
    NR(rl_walk_init)(p, &walk, start + warp_last - 1 - lane, start, start + warp_last, -1);
    for (int64_t b_end = start + warp_last; b_end > start; b_end -= 32, NR(rl_walk_advance)(&walk)) {
        NR(rl_walk_prefetch)(p, &walk);
        NR(rl_entry) mine, x;
        const bool reach = NR(rl_walk_entry)(p, &walk, c0, nch, &win, &mine);
        for (unsigned m = __ballot_sync(0xffffffffu, reach); m != 0; m &= m - 1) {
            const int src = __ffs(m) - 1;
            NR(rl_bcast)(&mine, src, &x);
            const int64_t rel_k = b_end - 1 - src - start;
            real_t v[7 + RL_CH];
            for (int q = 0; q < 7 + RL_CH; ++q) v[q] = 0;
            bool contrib = false;
            if (rel_k < last) {
                real_t vis, dx, dy;
                real_t a = NR(rl_alpha)(x.r, raz, rel, &vis, &dx, &dy);
                if (a != 0) {
                    contrib = true;
                    real_t w;
                    real_t ga = NR(splat_composite_vjp)(a, x.f, RL_CH, x.r[NUREC_TREC_DEPTH], gf, gz, gTa, &T,
                                                        S, &Sz, &w);
                    NR(splat_alpha_vjp)(x.r, vis, dx, dy, ga, v);
                    v[6] = w * gz;
                    for (int q = 0; q < RL_CH; ++q) v[7 + q] = w * gf[q];
                }
            }
            const unsigned cm = __ballot_sync(0xffffffffu, contrib);
            if (cm == 0) continue;
            real_t* g = grec + NUREC_SPLAT_GREC_SIZE * x.it;
            real_t* gc = gfeat + D * (x.it % N) + c0;
            if (__popc(cm) > RL_BWD_DIRECT_LANES) {
                NR(splat_warp_add)(v, 7 + RL_CH, lane, g, pass == 0 ? 7 : 6, gc, nch);
            } else if (contrib) {
                for (int q = 0; q < (pass == 0 ? 7 : 6); ++q) atomicAdd(g + q, v[q]);
                for (int q = 0; q < RL_CH; ++q)
                    if (q < nch) atomicAdd(gc + q, v[7 + q]);
            }
        }
    }
}

/* Per Gaussian: the projection VJP summed over sweeps (no atomics). */
__global__ void __launch_bounds__(RL_PROJ_THREADS)
NR(rl_project_backward_kernel)(nurec_rasterize_lidar_params p) {
    const int64_t N = p.num_gaussians, C = p.num_sweeps;
    int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= N) return;
    const bool overflow = p.status[1] != 0;
    const real_t* mp = (const real_t*)p.means + 3 * g;
    const real_t* qp = (const real_t*)p.quats + 4 * g;
    const real_t* sp = (const real_t*)p.scales + 3 * g;
    real_t m[3] = {mp[0], mp[1], mp[2]}, q[4] = {qp[0], qp[1], qp[2], qp[3]};
    real_t s[3] = {sp[0], sp[1], sp[2]};
    real_t o = ((const real_t*)p.opacities)[g];
    real_t gm[3] = {0, 0, 0}, gq[4] = {0, 0, 0, 0}, gs[3] = {0, 0, 0}, go = 0;
    for (int64_t c = 0; c < C && !overflow; ++c) {
        int64_t it = c * N + g;
        if (p.counts[it] <= 0) continue;
        NR(rl_sensor) S;
        NR(rl_sensor_load)((const real_t*)p.viewmats + 16 * c, &S);
        NR(rl_proj) P;
        real_t rec[NUREC_TREC_SIZE], q1[4], s1[3], gr[NUREC_SPLAT_GREC_SIZE];
        const real_t* gp = (const real_t*)p.grad_records + NUREC_SPLAT_GREC_SIZE * it;
        for (int k = 0; k < NUREC_SPLAT_GREC_SIZE; ++k) gr[k] = gp[k];
        NR(rl_project)(&S, m, q, s, o, (real_t)p.near_plane, (real_t)p.far_plane, (real_t)p.eps2d,
                       &P, rec);
        NR(rl_project_vjp)(&S, s, &P, gr, gm, q1, s1);
        for (int k = 0; k < 4; ++k) gq[k] += q1[k];
        for (int k = 0; k < 3; ++k) gs[k] += s1[k];
        go += gr[5];
    }
    /* an overflowed forward returned NaN outputs: its gradients are zero */
    real_t* om = (real_t*)p.grad_means + 3 * g;
    real_t* oq = (real_t*)p.grad_quats + 4 * g;
    real_t* os = (real_t*)p.grad_scales + 3 * g;
    for (int k = 0; k < 3; ++k) { om[k] = gm[k]; os[k] = gs[k]; }
    for (int k = 0; k < 4; ++k) oq[k] = gq[k];
    ((real_t*)p.grad_opacities)[g] = go;
}
