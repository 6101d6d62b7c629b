/* Generic over real_t (see math/generic.h). */

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
 * kernels' time, and the heaviest tiles were a long tail. So each warp first
 * tests a staged batch 32 Gaussians at a time (one per lane) against the
 * angular window of its own rays and then evaluates only the ones that can
 * reach them, in list order. The test is conservative: a Gaussian is skipped
 * only when every ray of the warp lies outside its opacity-aware ellipse
 * (widened like the binning's), where alpha is below 1/255 anyway, so the
 * outputs are the same as without culling. */
typedef struct NR(rl_window) {
    real_t az, half_az, el_lo, el_hi; /* centre, half-width (wrapped), elevation span */
    bool empty;                       /* no ray of the warp is inside the sensor */
} NR(rl_window);

NUREC_HD_DEV NR(rl_window) NR(rl_warp_window)(bool inside, real_t raz, real_t rel) {
    NR(rl_window) w;
    const unsigned in = __ballot_sync(0xffffffffu, inside);
    w.empty = in == 0;
    w.az = __shfl_sync(0xffffffffu, raz, in ? __ffs(in) - 1 : 0);
    real_t h = inside ? R_FABS(NR(rl_wrap)(raz - w.az)) : (real_t)0;
    real_t lo = inside ? rel : (real_t)INFINITY, hi = inside ? rel : -(real_t)INFINITY;
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

/* Half-extents (azimuth, elevation) of a record's ellipse d^T Q d <= thr,
 * widened as the binning widens them; +inf when not finite (never culled). */
NUREC_HD_DEV void NR(rl_extents)(const real_t* r, real_t* e_az, real_t* e_el) {
    real_t thr = r[NUREC_TREC_THR], A = r[NUREC_TREC_A], B = r[NUREC_TREC_B], C = r[NUREC_TREC_C];
    real_t delta = A * C - B * B;
    real_t a = R_SQRT(thr * C / delta), e = R_SQRT(thr * A / delta);
    const real_t grow = (real_t)(1.0 + 10 * NUREC_RL_BOUND_REL), pad = (real_t)(10 * NUREC_RL_BOUND_ABS);
    *e_az = a == a ? a * grow + pad : (real_t)INFINITY;
    *e_el = e == e ? e * grow + pad : (real_t)INFINITY;
}

/* Whether a Gaussian at (u, v) with half-extents (ea, ee) may reach a ray of
 * the window (NaN: yes). */
NUREC_HD_DEV bool NR(rl_may_reach)(const NR(rl_window)* w, real_t u, real_t v, real_t ea, real_t ee) {
    bool far_az = R_FABS(NR(rl_wrap)(u - w->az)) - w->half_az > ea;
    bool far_el = v - ee > w->el_hi || v + ee < w->el_lo;
    return !(far_az || far_el);
}

/* Stages entry e of the list (item it) into slot k of the batch. */
NUREC_HD_DEV void NR(rl_stage)(const nurec_rasterize_lidar_params& p, int64_t it, int k, int c0, int nch,
                               real_t* s_rec, real_t* s_ext, real_t* s_f) {
    const real_t* r = (const real_t*)p.records + NUREC_TREC_SIZE * it;
    for (int q = 0; q < 7; ++q) s_rec[7 * k + q] = r[q];
    NR(rl_extents)(r, s_ext + 2 * k, s_ext + 2 * k + 1);
    const real_t* f = (const real_t*)p.features + p.channels * (it % p.num_gaussians);
    for (int q = 0; q < RL_CH; ++q) s_f[RL_CH * k + q] = q < nch ? f[c0 + q] : (real_t)0;
}

/* Forward: one block per (tile, sweep, pass of up to RL_CH channels), one
 * thread per ray of the tile, Gaussians staged through shared memory in
 * batches of one per thread, culled per warp (above). */
__global__ void __launch_bounds__(RL_BLOCK)
NR(rl_forward_kernel)(nurec_rasterize_lidar_params p, int passes) {
    __shared__ real_t s_rec[RL_BLOCK * 7];
    __shared__ real_t s_ext[RL_BLOCK * 2];
    __shared__ real_t s_f[RL_BLOCK * RL_CH];
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
    const NR(rl_window) win = NR(rl_warp_window)(inside, raz, rel);
    real_t T = 1, rng = 0, acc[RL_CH];
    for (int k = 0; k < RL_CH; ++k) acc[k] = 0;
    int32_t last = 0;
    bool done = !inside || overflow;
    for (int64_t b = start; b < end; b += RL_BLOCK) {
        if (__syncthreads_count(done) == RL_BLOCK) break;
        if (b + tid < end) NR(rl_stage)(p, p.isect_items[b + tid], tid, c0, nch, s_rec, s_ext, s_f);
        __syncthreads();
        const int cnt = end - b < RL_BLOCK ? (int)(end - b) : RL_BLOCK;
        for (int k0 = 0; k0 < cnt; k0 += 32) {
            if (__all_sync(0xffffffffu, done)) break;
            const int kl = k0 + lane;
            const bool reach = kl < cnt && !win.empty &&
                               NR(rl_may_reach)(&win, s_rec[7 * kl], s_rec[7 * kl + 1], s_ext[2 * kl], s_ext[2 * kl + 1]);
            for (unsigned m = __ballot_sync(0xffffffffu, reach); m != 0; m &= m - 1) {
                const int k = k0 + __ffs(m) - 1;
                if (done) continue;
                const real_t* r = s_rec + 7 * k;
                real_t vis, dx, dy;
                real_t a = NR(rl_alpha)(r, raz, rel, &vis, &dx, &dy);
                if (a == 0) continue;
                real_t Tn = T * (1 - a);
                if (Tn < (real_t)NUREC_SPLAT_T_MIN) { done = true; continue; }
                real_t w = a * T;
                for (int q = 0; q < RL_CH; ++q) acc[q] += w * s_f[RL_CH * k + q];
                rng += w * r[NUREC_TREC_DEPTH];
                last = (int32_t)(b + k - start + 1);
                T = Tn;
            }
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

NUREC_HD_DEV real_t NR(rl_warp_sum)(real_t v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Backward, the lidar's own kernel: one block per (tile, sweep, pass), rays
 * sweep their lists back to front in shared-memory batches of RL_BWD_BATCH,
 * culled per warp as in the forward; each Gaussian's gradient is summed
 * over the warp's rays with shuffles before one lane adds it to global
 * memory (when only a few lanes contribute, those lanes add directly).
 * Register budget from RL_BWD_MIN_BLOCKS_*, its own batch size and
 * shared-memory carveout. Every thread of the block reaches every barrier,
 * and every lane of a warp every shuffle (the culled set is warp-uniform). */
__global__ void __launch_bounds__(RL_BLOCK, sizeof(real_t) == 4 ? RL_BWD_MIN_BLOCKS_F32 : RL_BWD_MIN_BLOCKS_F64)
NR(rl_backward_kernel)(nurec_rasterize_lidar_params p, int passes) {
    __shared__ real_t s_rec[RL_BWD_BATCH * 7];
    __shared__ real_t s_ext[RL_BWD_BATCH * 2];
    __shared__ real_t s_f[RL_BWD_BATCH * RL_CH];
    __shared__ int64_t s_it[RL_BWD_BATCH];
    __shared__ int s_max_last;
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
    /* the window of the rays that have anything to sweep */
    const NR(rl_window) win = NR(rl_warp_window)(inside && last > 0, raz, rel);
    int32_t warp_last = last;
    for (int o = 16; o > 0; o >>= 1) warp_last = max(warp_last, __shfl_xor_sync(0xffffffffu, warp_last, o));
    if (tid == 0) s_max_last = 0;
    __syncthreads();
    if (last > 0) atomicMax(&s_max_last, last);
    __syncthreads();
    const int64_t stop = start + s_max_last;
    real_t* grec = (real_t*)p.grad_records;
    real_t* gfeat = (real_t*)p.grad_features;
    for (int64_t b_end = stop; b_end > start; b_end -= RL_BWD_BATCH) {
        const int cnt = b_end - start < RL_BWD_BATCH ? (int)(b_end - start) : RL_BWD_BATCH;
        __syncthreads();
        for (int k = tid; k < cnt; k += RL_BLOCK) {
            int64_t it = p.isect_items[b_end - 1 - k];
            s_it[k] = it;
            NR(rl_stage)(p, it, k, c0, nch, s_rec, s_ext, s_f);
        }
        __syncthreads();
        if (win.empty) continue;
        for (int k0 = 0; k0 < cnt; k0 += 32) {
            const int kl = k0 + lane;
            const bool reach = kl < cnt && b_end - 1 - kl - start < warp_last &&
                               NR(rl_may_reach)(&win, s_rec[7 * kl], s_rec[7 * kl + 1], s_ext[2 * kl], s_ext[2 * kl + 1]);
            for (unsigned m = __ballot_sync(0xffffffffu, reach); m != 0; m &= m - 1) {
                const int k = k0 + __ffs(m) - 1;
                const int64_t rel_k = b_end - 1 - k - start;
                const real_t* r = s_rec + 7 * k;
                real_t v[7 + RL_CH];
                for (int q = 0; q < 7 + RL_CH; ++q) v[q] = 0;
                bool contrib = false;
                if (rel_k < last) {
                    real_t vis, dx, dy;
                    real_t a = NR(rl_alpha)(r, raz, rel, &vis, &dx, &dy);
                    if (a != 0) {
                        contrib = true;
                        real_t w;
                        real_t ga = NR(splat_composite_vjp)(a, s_f + RL_CH * k, RL_CH, r[NUREC_TREC_DEPTH],
                                                            gf, gz, gTa, &T, S, &Sz, &w);
                        NR(splat_alpha_vjp)(r, vis, dx, dy, ga, v);
                        v[6] = w * gz;
                        for (int q = 0; q < RL_CH; ++q) v[7 + q] = w * gf[q];
                    }
                }
                const unsigned cm = __ballot_sync(0xffffffffu, contrib);
                if (cm == 0) continue;
                bool writer = contrib;
                if (__popc(cm) > RL_BWD_DIRECT_LANES) {
                    for (int q = 0; q < 7 + RL_CH; ++q) v[q] = NR(rl_warp_sum)(v[q]);
                    writer = lane == 0;
                }
                if (writer) {
                    const int64_t it = s_it[k];
                    real_t* g = grec + NUREC_SPLAT_GREC_SIZE * it;
                    for (int q = 0; q < (pass == 0 ? 7 : 6); ++q) atomicAdd(g + q, v[q]);
                    real_t* gc = gfeat + D * (it % N) + c0;
                    for (int q = 0; q < RL_CH; ++q)
                        if (q < nch) atomicAdd(gc + q, v[7 + q]);
                }
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
