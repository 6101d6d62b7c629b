/* Generic over real_t (see math/generic.h). */

#include "tiles/splat_warp_cuda_generic.cuh"

/* kRolling: SPEC 7's rolling shutter (p.viewmats_end set). The plain sweep
 * is a build of its own, with the end pose known to be absent, so that it
 * does not carry the rolling fixed point's registers: one kernel for both
 * held 87 registers (21% occupancy), the plain one 64 (float32, no spills). */
template <bool kRolling>
__global__ void __launch_bounds__(RL_PROJ_THREADS)
NR(rl_project_kernel)(nurec_rasterize_lidar_params p) {
    const int64_t N = p.num_gaussians;
    int64_t it = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (it >= p.num_sweeps * N) return;
    if (!kRolling) p.viewmats_end = NULL;
    int64_t c = it / N, g = it - c * N;
    NR(rl_sensor) S;
    NR(rl_sensor_load)((const real_t*)p.viewmats + 16 * c, &S);
    NR(rl_project_item)(&p, c, g, &S); /* tiles/splat_project_generic.h */
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

/* The window of the warp's active rays: its azimuth span centred (a warp's
 * columns are consecutive, so the rays lie on one side of the first one: a
 * window centred on the first ray was twice as wide as the rays) and its
 * elevation span (one row: el_lo == el_hi). */
NUREC_HD_DEV NR(rl_window) NR(rl_warp_window)(bool active, real_t raz, real_t rel) {
    NR(rl_window) w;
    const unsigned in = __ballot_sync(0xffffffffu, active);
    w.empty = in == 0;
    const real_t az0 = __shfl_sync(0xffffffffu, raz, in ? __ffs(in) - 1 : 0);
    const real_t d = active ? NR(rl_wrap)(raz - az0) : (real_t)0;
    real_t dlo = d, dhi = d;
    real_t lo = active ? rel : (real_t)INFINITY, hi = active ? rel : -(real_t)INFINITY;
    for (int o = 16; o > 0; o >>= 1) {
        dlo = R_FMIN(dlo, __shfl_xor_sync(0xffffffffu, dlo, o));
        dhi = R_FMAX(dhi, __shfl_xor_sync(0xffffffffu, dhi, o));
        lo = R_FMIN(lo, __shfl_xor_sync(0xffffffffu, lo, o));
        hi = R_FMAX(hi, __shfl_xor_sync(0xffffffffu, hi, o));
    }
    w.az = NR(rl_wrap)(az0 + (real_t)0.5 * (dlo + dhi));
    w.half_az = (real_t)0.5 * (dhi - dlo);
    w.el_lo = lo;
    w.el_hi = hi;
    return w;
}

/* Whether record r (tiles.h layout) may reach a ray of the window, that is
 * lie inside its ellipse d^T Q d <= thr (outside, alpha is below 1/255),
 * with the ellipse widened as the binning widens it. NaN: yes.
 *
 * A window on one row (a tile is one row: every warp's is) meets the
 * ellipse where the row's elevation cuts it: on the line dy = el - v the
 * ellipse is the azimuth interval centred at dx = -B dy / A with half-width
 * sqrt(A thr - det dy^2) / A (det = AC - B^2). The ellipse's bounding box
 * let through ~1.6x as many entries on the street scene, 39% of all
 * evaluations, where no ray of the warp got alpha > 0
 * (benchmarks/device/lidar_tile_stats.py --warps). Several rows: the bounding box. */
/* The culling test's reciprocal and square root: in float32 the hardware's
 * approximations (rcp.approx, sqrt.approx: within ~2 ulp), whose errors
 * (< 1e-6 rad here) are far inside the test's own slack (the ellipse grown
 * by 1% and padded by 1e-4 rad); IEEE division and sqrt each added a range
 * check and a slow-path call to the test every entry of a list goes
 * through. Float64 keeps them exact. */
NUREC_HD_DEV real_t NR(rl_cull_rcp)(real_t x) {
#if R_IS_F64
    return 1 / x;
#else
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#endif
}

NUREC_HD_DEV real_t NR(rl_cull_sqrt)(real_t x) {
#if R_IS_F64
    return sqrt(x);
#else
    float y;
    asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#endif
}

NUREC_HD_DEV bool NR(rl_may_reach)(const NR(rl_window)* w, const real_t* r) {
    real_t thr = r[NUREC_TREC_THR], A = r[NUREC_TREC_A], B = r[NUREC_TREC_B], C = r[NUREC_TREC_C];
    real_t delta = A * C - B * B;
    const real_t grow = (real_t)(1.0 + 10 * NUREC_RL_BOUND_REL), pad = (real_t)(10 * NUREC_RL_BOUND_ABS);
    real_t u = r[NUREC_TREC_U], v = r[NUREC_TREC_V];
    if (w->el_lo == w->el_hi) {
        const real_t dy = w->el_lo - v;
        const real_t disc = A * thr * (grow * grow) - delta * dy * dy;
        const real_t inv_a = NR(rl_cull_rcp)(A);
        const real_t hw = NR(rl_cull_sqrt)(R_FMAX(disc, (real_t)0)) * inv_a + pad;
        const real_t ctr = u - B * dy * inv_a;
        return !(disc < 0 || R_FABS(NR(rl_wrap)(ctr - w->az)) - w->half_az > hw);
    }
    real_t ea = R_SQRT(thr * C / delta) * grow + pad, ee = R_SQRT(thr * A / delta) * grow + pad;
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
    NR(splat_stage_conic)(x->r); /* as the walks' steps read it (tiles/splat_math_generic.h): both walks stage */
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

/* Where a sweep block works. A block is a slice of a tile: blockDim.x of
 * its rays (whole warps), chosen at launch (slice_threads in
 * rasterize_lidar.cu). The warps of a tile share nothing, and a block's
 * resources stay held until its slowest warp ends: with a whole 256-ray tile
 * per block, a warp looking down the street (thousands of Gaussians) keeps 7
 * finished siblings' slots (ncu: 21% achieved of 37.5% theoretical
 * occupancy). Smaller blocks free them, but measured no faster on the street
 * scene: the time was one warp's chain, which the parts below cut.
 *
 * And a block composites one part (segment) of its tile's list. Towards the
 * street's vanishing point ~30,000 Gaussians stack up on the same rays, none
 * of which stops early: one warp compositing them one after another was the
 * kernels' critical path, whatever the tiling (benchmarks/RESULTS.md). A list
 * longer than p.segment_min is cut into up to p.segments parts of at least
 * segment_min entries, each composited from T = 1 by its own blocks; the
 * combine kernel below chains them per ray. The grids are the camera's
 * (tiles/splat_parts_grid_cuda.cuh): where lists are cut the list's (kList:
 * one dimension, a unit of slices per (sweep, pass, tile) for the first
 * parts, then a unit per chunk of the list for the later parts; a unit with
 * no part leaves at once), else the 3-D grid (x: tile column x slices, y:
 * tile row, z: (sweep, pass)). */
typedef struct NR(rl_place) {
    int64_t cz, tile, start, end, lo, hi; /* sweep; tile; its list; this block's part */
    int pass, i, j;                       /* channel pass; this thread's ray */
    bool inside, multi;                   /* ray exists; list cut into parts */
    int seg;
    int cell;                             /* the ray's place among its tile's */
} NR(rl_place);

/* false: this block has no part to work on (uniform over the block). */
template <bool kList>
NUREC_HD_DEV bool NR(rl_place_of)(const nurec_rasterize_lidar_params& p, int passes, NR(rl_place)* w) {
    const int per_tile = RL_BLOCK / blockDim.x;
    nurec_splat_block b;
    if (!nurec_splat_block_of<kList>(p, p.num_sweeps, passes, per_tile, &b)) return false;
    w->seg = b.seg;
    w->pass = b.pass;
    w->tile = b.tile;
    w->cz = b.image;
    const int ty = b.ty, tx = b.tx;
    const int tid = b.slice * blockDim.x + threadIdx.x;
    w->cell = tid;
    w->j = tx * NUREC_RL_TILE_COLS + (tid % NUREC_RL_TILE_COLS);
    w->i = ty * NUREC_RL_TILE_ROWS + (tid / NUREC_RL_TILE_COLS);
    w->inside = w->j < p.cols && w->i < p.rows;
    w->start = p.tile_ranges[2 * w->tile];
    w->end = p.tile_ranges[2 * w->tile + 1];
    int64_t seg_len;
    const int n = p.status[1] != 0 ? 1 : nurec_splat_segment_count(p.segments, p.segment_min, w->end - w->start, &seg_len);
    if (w->seg >= n) return false;
    w->multi = n > 1;
    w->lo = w->multi ? w->start + w->seg * seg_len : w->start;
    w->hi = w->multi && w->lo + seg_len < w->end ? w->lo + seg_len : w->end;
    return true;
}

/* Forward: one block per (tile slice, sweep, pass of up to RL_CH channels), one
 * thread per ray of the tile; each warp walks the list on its own (above).
 * fixup = 1: the second walk of the parts where a ray's cut-off falls (see
 * the combine kernel): only those rays, from their transmittance at the
 * part's start. */
template <bool kList>
__device__ __forceinline__ void NR(rl_forward_body)(const nurec_rasterize_lidar_params& p, int passes,
                                                   const int fixup) {
    const int lane = threadIdx.x & 31;
    NR(rl_place) w;
    if (!NR(rl_place_of)<kList>(p, passes, &w)) return;
    if (fixup && (!w.multi || w.seg == 0)) return; /* a first part is never walked again */
    const int64_t cz = w.cz, start = w.start, D = p.channels;
    const int pass = w.pass, i = w.i, j = w.j;
    const bool inside = w.inside;
    const int c0 = pass * RL_CH;
    const int nch = D - c0 < RL_CH ? (int)(D - c0) : RL_CH;
    const bool overflow = p.status[1] != 0;
    real_t raz = 0, rel = 0;
    if (inside) {
        raz = ((const real_t*)p.column_azimuths)[j] + ((const real_t*)p.row_azimuth_offsets)[i];
        rel = ((const real_t*)p.row_elevations)[i];
    }
    bool done = !inside || overflow;
    const int64_t ray = (cz * p.rows + i) * (int64_t)p.cols + j;
    /* its part's slot of this ray (when cut): the ray's cell of its tile's */
    const int64_t at = nurec_splat_part_at<RL_BLOCK>(p, w.tile, w.start, w.cell, w.seg);
    real_t T = 1;
    if (fixup && !done) {
        done = (p.seg_last[at] & NUREC_RL_SEG_FIXUP) == 0;
        if (!done) T = ((const real_t*)p.final_T)[ray]; /* the start T the combine left there */
    }
    const NR(rl_window) win = NR(rl_warp_window)(!done, raz, rel);
    const bool active = !done;
    real_t rng = 0, acc[RL_CH];
    for (int k = 0; k < RL_CH; ++k) acc[k] = 0;
    int32_t last = 0;
    NR(rl_walk) walk;
    NR(rl_walk_init)(p, &walk, w.lo + lane, w.lo, w.hi, 1);
    /* A later part's walk is wasted on a ray that an earlier part already
     * stopped (the combine never reads it). The first walk of a part that
     * stops a ray publishes that in p.last (atomicMin of the part; the
     * launcher fills it with a large value first), and a later part looks
     * every 4 chunks: whatever it sees is final, and what it has not seen yet
     * only costs the work it would have done anyway, so the outputs do not
     * depend on the timing. (Its own result for such a ray, flagged stopped
     * or not, lies behind the cut-off: never read, and cleared by the
     * combine, since the op returns it.) */
    const bool parts_first_walk = w.multi && !fixup;
    for (int64_t b = w.lo; b < w.hi; b += 32, NR(rl_walk_advance)(&walk)) {
        if (parts_first_walk && w.seg > 0 && !done && ((b - w.lo) & 127) == 0)
            done = __ldcg(p.last + ray) < w.seg;
        if (__all_sync(0xffffffffu, done)) break;
        NR(rl_walk_prefetch)(p, &walk);
        NR(rl_entry) mine, x;
        const bool reach = NR(rl_walk_entry)(p, &walk, c0, nch, &win, &mine);
        for (unsigned m = __ballot_sync(0xffffffffu, reach); m != 0; m &= m - 1) {
            const int src = __ffs(m) - 1;
            NR(rl_bcast)(&mine, src, &x); /* every lane takes part */
            if (done) continue;
            real_t vis, a;
            if (!NR(splat_alpha_staged)(x.r, NR(rl_wrap)(raz - x.r[0]), rel - x.r[1], &a, &vis)) continue;
            real_t Tn = T * (1 - a);
            if (Tn < (real_t)NUREC_SPLAT_T_MIN) {
                done = true;
                if (parts_first_walk && pass == 0) atomicMin(p.last + ray, w.seg);
                continue;
            }
            real_t wt = a * T;
            for (int q = 0; q < RL_CH; ++q) acc[q] += wt * x.f[q];
            rng += wt * x.r[NUREC_TREC_DEPTH];
            last = (int32_t)(b + src - start + 1);
            T = Tn;
        }
    }
    if (!inside || (fixup && !active)) return;
    if (w.multi) { /* this part's own result, for the combine kernel */
        real_t* st = (real_t*)p.seg_state + (D + 2) * at;
        for (int q = 0; q < RL_CH; ++q)
            if (q < nch) st[c0 + q] = acc[q];
        if (pass == 0) {
            st[D] = rng;
            st[D + 1] = T;
            p.seg_last[at] = last | (fixup ? NUREC_RL_SEG_FIXUP : done ? NUREC_RL_SEG_STOPPED : 0);
        }
        return;
    }
    const int64_t uray = nurec_rl_user_ray(p.column_order, p.cols, ray);
    real_t* out = (real_t*)p.out_features + D * uray + c0;
    const real_t nan = (real_t)NAN;
    for (int q = 0; q < RL_CH; ++q)
        if (q < nch) out[q] = overflow ? nan : acc[q];
    if (pass == 0) {
        ((real_t*)p.range)[uray] = overflow ? nan : rng;
        ((real_t*)p.alpha)[uray] = overflow ? nan : 1 - T;
        ((real_t*)p.final_T)[ray] = overflow ? nan : T;
        p.last[ray] = overflow ? 0 : last;
    }
}

/* Two kernels, so that the first walk does not carry the second's registers;
 * each on the 3-D grid and on the list's (kList). */
template <bool kList>
__global__ void RL_FWD_BOUNDS
NR(rl_forward_kernel)(nurec_rasterize_lidar_params p, int passes) { NR(rl_forward_body)<kList>(p, passes, 0); }

template <bool kList>
__global__ void RL_FWD_BOUNDS
NR(rl_forward_fixup_kernel)(nurec_rasterize_lidar_params p, int passes) {
    NR(rl_forward_body)<kList>(p, passes, 1);
}

/* The lidar's cells for the shared combine (tiles/splat_combine_cuda.cuh):
 * canonical rays; the outputs go to the user's columns. */
struct NR(rl_cells) {
    __device__ static int64_t count(const nurec_rasterize_lidar_params& p) {
        return p.num_sweeps * p.rows * (int64_t)p.cols;
    }
    static constexpr int per_tile = NUREC_RL_TILE_ROWS * NUREC_RL_TILE_COLS;
    __device__ static int64_t tile(const nurec_rasterize_lidar_params& p, int64_t ray, int* local) {
        const int64_t cz = ray / (p.rows * (int64_t)p.cols);
        const int i = (int)((ray / p.cols) % p.rows), j = (int)(ray % p.cols);
        *local = (i % NUREC_RL_TILE_ROWS) * NUREC_RL_TILE_COLS + j % NUREC_RL_TILE_COLS;
        return (cz * p.tiles_y + i / NUREC_RL_TILE_ROWS) * p.tiles_x + j / NUREC_RL_TILE_COLS;
    }
    struct Out {
        int64_t uray; /* the ray in the user's column order */
    };
    __device__ static Out out(const nurec_rasterize_lidar_params& p, int64_t ray) {
        return Out{nurec_rl_user_ray(p.column_order, p.cols, ray)};
    }
    __device__ static void write(const nurec_rasterize_lidar_params& p, Out o, int64_t q, real_t v, real_t) {
        if (q < p.channels) ((real_t*)p.out_features)[p.channels * o.uray + q] = v;
        else ((real_t*)p.range)[o.uray] = v;
    }
    __device__ static void alpha(const nurec_rasterize_lidar_params& p, Out o, real_t P) {
        ((real_t*)p.alpha)[o.uray] = 1 - P;
    }
};

__global__ void __launch_bounds__(RL_PROJ_THREADS)
NR(rl_combine_kernel)(nurec_rasterize_lidar_params p, int phase) {
    nurec_splat_combine<real_t, NR(rl_cells)>(p, phase);
}

/* Backward, the lidar's own kernel: one block per (tile slice, sweep, pass,
 * part of the list); each warp sweeps its rays' part back to front from the
 * furthest entry any of them reached, culled as in the forward, starting
 * from the transmittance and what lies behind as the forward left them (the
 * last part: final T, nothing; an earlier part: from the combine kernel);
 * each Gaussian's gradient is summed
 * over the warp's rays with shuffles before one lane adds it to global
 * memory (when only a few lanes contribute, those lanes add directly).
 * Register budget from RL_BWD_MIN_BLOCKS_*, carveout of its own. Every lane
 * of a warp reaches every shuffle (the culled set is warp-uniform). */
/* kAbs: SPEC 8's absgrad is written (a build of its own, so that the plain
 * backward keeps its registers and stack: with a runtime test its f32
 * build spilled 8 bytes more) */
template <bool kAbs, bool kList>
__global__ void __launch_bounds__(RL_BLOCK, sizeof(real_t) == 4 ? RL_BWD_MIN_BLOCKS_F32 : RL_BWD_MIN_BLOCKS_F64)
NR(rl_backward_kernel)(nurec_rasterize_lidar_params p, int passes) {
    if (p.status[1] != 0) return; /* overflowed forward (uniform over the grid) */
    const int lane = threadIdx.x & 31;
    NR(rl_place) w;
    if (!NR(rl_place_of)<kList>(p, passes, &w)) return;
    const int64_t start = w.start, D = p.channels, N = p.num_gaussians;
    const int pass = w.pass, i = w.i, j = w.j;
    const bool inside = w.inside;
    const int c0 = pass * RL_CH;
    const int nch = D - c0 < RL_CH ? (int)(D - c0) : RL_CH;
    const int64_t ray = (w.cz * p.rows + i) * (int64_t)p.cols + j;
    real_t raz = 0, rel = 0;
    real_t T = 0, gf[RL_CH], gz = 0, P = 0; /* P: splat_composite_vjp's sum of what lies behind */
    int32_t last = 0;
    for (int q = 0; q < RL_CH; ++q) gf[q] = 0;
    if (inside) {
        raz = ((const real_t*)p.column_azimuths)[j] + ((const real_t*)p.row_azimuth_offsets)[i];
        rel = ((const real_t*)p.row_elevations)[i];
        const real_t T_final = ((const real_t*)p.final_T)[ray];
        T = T_final;
        last = p.last[ray];
        const int64_t uray = nurec_rl_user_ray(p.column_order, p.cols, ray);
        const real_t* g = (const real_t*)p.grad_out_features + D * uray + c0;
        for (int q = 0; q < RL_CH; ++q)
            if (q < nch) gf[q] = g[q];
        real_t gTa = 0;
        if (pass == 0) {
            gz = p.grad_range ? ((const real_t*)p.grad_range)[uray] : (real_t)0; /* absent: zero */
            gTa = p.grad_alpha ? ((const real_t*)p.grad_alpha)[uray] * T_final : (real_t)0;
        }
        /* nothing behind a ray's list; a part: what lies behind it (the combine's suffix sums) */
        real_t S[RL_CH], Sz = 0;
        for (int q = 0; q < RL_CH; ++q) S[q] = 0;
        if (w.multi) {
            const int64_t at = nurec_splat_part_at<RL_BLOCK>(p, w.tile, w.start, w.cell, w.seg);
            const real_t* st = (const real_t*)p.seg_state + (D + 2) * at;
            for (int q = 0; q < RL_CH; ++q)
                if (q < nch) S[q] = st[c0 + q];
            Sz = st[D];
            T = st[D + 1];
        }
        P = NR(splat_composite_vjp_start)(gTa, gz, Sz, gf, S, RL_CH);
    }
    /* the window of the rays that have anything to sweep in this part, and how far */
    const NR(rl_window) win = NR(rl_warp_window)(last > w.lo - start, raz, rel);
    int32_t warp_last = last;
    for (int o = 16; o > 0; o >>= 1) warp_last = max(warp_last, __shfl_xor_sync(0xffffffffu, warp_last, o));
    const int64_t hi = start + warp_last < w.hi ? start + warp_last : w.hi;
    real_t* grec = (real_t*)p.grad_records;
    real_t* gfeat = (real_t*)p.grad_features;
    NR(rl_walk) walk; /* lane order = back to front: entry b_end - 1 - lane */
    NR(rl_walk_init)(p, &walk, hi - 1 - lane, w.lo, hi, -1);
    for (int64_t b_end = hi; b_end > w.lo; b_end -= 32, NR(rl_walk_advance)(&walk)) {
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
                real_t vis, a;
                const real_t dx = NR(rl_wrap)(raz - x.r[0]), dy = rel - x.r[1];
                if (NR(splat_alpha_staged)(x.r, dx, dy, &a, &vis)) {
                    contrib = true;
                    real_t wt;
                    real_t ga = NR(splat_composite_vjp)(a, x.f, RL_CH, x.r[NUREC_TREC_DEPTH], gf, gz, &T, &P, &wt);
                    NR(splat_alpha_vjp_staged)(x.r, vis, dx, dy, ga, v);
                    v[6] = wt * gz;
                    for (int q = 0; q < RL_CH; ++q) v[7 + q] = wt * gf[q];
                }
            }
            const unsigned cm = __ballot_sync(0xffffffffu, contrib);
            if (cm == 0) continue;
            real_t* g = grec + NUREC_SPLAT_GREC_ROW(kAbs) * x.it;
            real_t* gc = gfeat + D * (x.it % N) + c0;
            /* SPEC 8's absgrad, in the record's row (the glue allows it with one pass of channels) */
            real_t* ga = kAbs ? g + NUREC_SPLAT_GREC_ABS : (real_t*)0;
            if (__popc(cm) > (kAbs ? RL_BWD_DIRECT_LANES_ABS : RL_BWD_DIRECT_LANES)) {
                NR(splat_warp_add)<RL_CH>(v, lane, g, pass == 0 ? 7 : 6, gc, nch, ga, (const real_t*)0);
            } else if (contrib) {
                NR(splat_lane_add)(v, RL_CH, g, pass == 0 ? 7 : 6, gc, nch, ga, (const real_t*)0);
            }
        }
    }
}

/* Per Gaussian: the projection VJP summed over sweeps (no atomics;
 * tiles/splat_project_generic.h). */
__global__ void __launch_bounds__(RL_PROJ_THREADS)
NR(rl_project_backward_kernel)(nurec_rasterize_lidar_params p) {
    int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= p.num_gaussians) return;
    NR(rl_project_vjp_gaussian)(&p, g, 0, (real_t*)0, 1, 0);
}

/* Each ray's median item (tiles/splat_median_cuda.cuh): a block per
 * (sweep, tile), rays as the forward aims them, rl_alpha as the CPU's,
 * written in the user's column order. */
struct NR(rl_median_cells) {
    static constexpr int per_tile = RL_BLOCK;
    __device__ static int64_t tiles(const nurec_rasterize_lidar_params& p) {
        return p.num_sweeps * (int64_t)p.tiles_x * p.tiles_y;
    }
    __device__ static int64_t items(const nurec_rasterize_lidar_params& p) { return p.num_sweeps * p.num_gaussians; }
    __device__ static int64_t cell(const nurec_rasterize_lidar_params& p, int64_t tile, int local) {
        const int64_t per_sweep = (int64_t)p.tiles_x * p.tiles_y, c = tile / per_sweep;
        const int t = (int)(tile - c * per_sweep), ty = t / p.tiles_x, tx = t - ty * p.tiles_x;
        const int i = ty * NUREC_RL_TILE_ROWS + local / NUREC_RL_TILE_COLS;
        const int j = tx * NUREC_RL_TILE_COLS + local % NUREC_RL_TILE_COLS;
        return i < p.rows && j < p.cols ? (c * p.rows + i) * (int64_t)p.cols + j : -1;
    }
    __device__ static void ray(const nurec_rasterize_lidar_params& p, int64_t ray, real_t* cu, real_t* cv) {
        const int i = (int)((ray / p.cols) % p.rows), j = (int)(ray % p.cols);
        *cu = ((const real_t*)p.column_azimuths)[j] + ((const real_t*)p.row_azimuth_offsets)[i];
        *cv = ((const real_t*)p.row_elevations)[i];
    }
    __device__ static real_t alpha(const real_t* rec, real_t cu, real_t cv) {
        real_t vis, dx, dy;
        return NR(rl_alpha)(rec, cu, cv, &vis, &dx, &dy);
    }
    __device__ static int step(real_t a, real_t* T) { return NR(splat_median_step)(a, T); }
    __device__ static int64_t out(const nurec_rasterize_lidar_params& p, int64_t ray) {
        return nurec_rl_user_ray(p.column_order, p.cols, ray);
    }
};

__global__ void __launch_bounds__(RL_BLOCK) NR(rl_median_kernel)(nurec_rasterize_lidar_params p) {
    nurec_splat_median<real_t, NR(rl_median_cells)>(p);
}
