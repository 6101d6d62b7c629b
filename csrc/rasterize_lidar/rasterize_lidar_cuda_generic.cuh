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

/* Forward: one block per (tile, sweep, pass of up to RL_CH channels), one
 * thread per ray of the tile, Gaussians staged through shared memory in
 * batches of one per thread. */
__global__ void __launch_bounds__(RL_BLOCK)
NR(rl_forward_kernel)(nurec_rasterize_lidar_params p, int passes) {
    __shared__ real_t s_rec[RL_BLOCK * 7];
    __shared__ real_t s_f[RL_BLOCK * RL_CH];
    const int tid = threadIdx.x;
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
    real_t T = 1, rng = 0, acc[RL_CH];
    for (int k = 0; k < RL_CH; ++k) acc[k] = 0;
    int32_t last = 0;
    bool done = !inside || overflow;
    for (int64_t b = start; b < end; b += RL_BLOCK) {
        if (__syncthreads_count(done) == RL_BLOCK) break;
        int64_t e = b + tid;
        if (e < end) {
            int64_t it = p.isect_items[e];
            const real_t* r = (const real_t*)p.records + NUREC_TREC_SIZE * it;
            for (int k = 0; k < 7; ++k) s_rec[7 * tid + k] = r[k];
            const real_t* f = (const real_t*)p.features + D * (it % p.num_gaussians);
            for (int k = 0; k < RL_CH; ++k) s_f[RL_CH * tid + k] = k < nch ? f[c0 + k] : (real_t)0;
        }
        __syncthreads();
        int cnt = end - b < RL_BLOCK ? (int)(end - b) : RL_BLOCK;
        for (int k = 0; k < cnt && !done; ++k) {
            const real_t* r = s_rec + 7 * k;
            real_t vis, dx, dy;
            real_t a = NR(rl_alpha)(r, raz, rel, &vis, &dx, &dy);
            if (a == 0) continue;
            real_t Tn = T * (1 - a);
            if (Tn < (real_t)NUREC_SPLAT_T_MIN) { done = true; break; }
            real_t w = a * T;
            for (int q = 0; q < RL_CH; ++q) acc[q] += w * s_f[RL_CH * k + q];
            rng += w * r[NUREC_TREC_DEPTH];
            last = (int32_t)(b + k - start + 1);
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

NUREC_HD_DEV real_t NR(rl_warp_sum)(real_t v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Backward, the lidar's own kernel: one block per (tile, sweep, pass), rays
 * sweep their lists back to front in shared-memory batches of RL_BWD_BATCH;
 * each Gaussian's gradient is summed over the warp's rays with shuffles
 * before one lane adds it to global memory (when only a few lanes
 * contribute, those lanes add directly). Register budget from
 * RL_BWD_MIN_BLOCKS_* (64 registers per thread for float32), its own batch
 * size and shared-memory carveout. Every thread of the block reaches every
 * barrier and every shuffle (no early return after the first barrier). */
__global__ void __launch_bounds__(RL_BLOCK, sizeof(real_t) == 4 ? RL_BWD_MIN_BLOCKS_F32 : RL_BWD_MIN_BLOCKS_F64)
NR(rl_backward_kernel)(nurec_rasterize_lidar_params p, int passes) {
    __shared__ real_t s_rec[RL_BWD_BATCH * 7];
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
        if (tid < cnt) {
            int64_t it = p.isect_items[b_end - 1 - tid];
            s_it[tid] = it;
            const real_t* r = (const real_t*)p.records + NUREC_TREC_SIZE * it;
            for (int k = 0; k < 7; ++k) s_rec[7 * tid + k] = r[k];
            const real_t* f = (const real_t*)p.features + D * (it % N);
            for (int k = 0; k < RL_CH; ++k) s_f[RL_CH * tid + k] = k < nch ? f[c0 + k] : (real_t)0;
        }
        __syncthreads();
        for (int k = 0; k < cnt; ++k) {
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
            const unsigned mask = __ballot_sync(0xffffffffu, contrib);
            if (mask == 0) continue;
            bool writer = contrib;
            if (__popc(mask) > RL_BWD_DIRECT_LANES) {
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
