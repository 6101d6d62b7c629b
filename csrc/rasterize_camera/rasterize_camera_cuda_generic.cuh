/* Generic over real_t (see math/generic.h). */

#include "tiles/splat_warp_cuda_generic.cuh"

/* The projection kernels come in two builds: kModels = false for the
 * pinhole with a global shutter (SPEC 3; the camera's model and shutter set
 * to constants, so the models' jets and the rolling shutter's fixed point
 * are compiled out: the jets doubled the backward's registers, 121 -> 234,
 * and halved its occupancy; the fixed point spilled 64 bytes of the plain
 * projection at 80 registers) and true for SPEC 6's models or SPEC 7's
 * rolling shutter. */
template <bool kModels>
__global__ void __launch_bounds__(RC_PROJ_THREADS, kModels ? 1 : RC_PROJ_MIN_BLOCKS)
NR(rc_project_kernel)(nurec_rasterize_camera_params p) {
    __shared__ nurec_footprint_stage stage[RC_PROJ_THREADS / 32];
    const int64_t N = p.num_gaussians;
    const int64_t it = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int in = it < p.num_cameras * N; /* a lane past the end stays for its warp's footprint walk */
    if (!kModels) p.shutter = NUREC_SHUTTER_GLOBAL;
    const int64_t c = in ? it / N : 0, g = in ? it - c * N : 0;
    NR(rc_camera) cam;
    real_t m[3], rec[NUREC_TREC_SIZE];
    nurec_footprint f;
    int reach = 0;
    if (in) {
        NR(rc_camera_as)(&p, c, !kModels, &cam);
        reach = NR(rc_item_footprint)(&p, rec, NR(rc_project_record)(&p, c, g, &cam, m, rec), &f);
    }
    /* the item's tiles: rc_item_cells's box and count, the rows spread over the warp */
    int32_t box[NUREC_BOX_SIZE];
    const int64_t cnt = nurec_footprint_box_warp(&f, reach, p.width, box, &stage[threadIdx.x >> 5]);
    if (!in) return;
    NR(rc_item_box)(&p, it, box);
    NR(rc_project_write)(&p, &cam, g, it, m, rec, cnt); /* tiles/splat_project_generic.h */
}

/* The visibility op: a thread per Gaussian, its cameras in turn until one
 * can draw it (rc_gaussian_visible); kModels as the projection's. */
template <bool kModels>
__global__ void __launch_bounds__(RC_PROJ_THREADS) NR(rc_visible_kernel)(nurec_rasterize_camera_params p) {
    const int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= p.num_gaussians) return;
    if (!kModels) p.shutter = NUREC_SHUTTER_GLOBAL;
    p.visible[g] = (uint8_t)NR(rc_gaussian_visible)(&p, g, !kModels);
}

/* Where a block works: one block per (tile, camera, pass of up to RC_CH
 * channels, part of the tile's list), one thread per pixel of the tile.
 *
 * The parts: a street camera's tile towards the vanishing point lists
 * thousands of distant Gaussians (12,570 on the 1080p street), none of which
 * takes a pixel's transmittance to the cut-off soon (its pixels walk up to
 * 10,860 entries). One block walking them one after another was the
 * kernels' critical path: ncu showed the SMs 21% (forward) and 26%
 * (backward) busy there. A list longer than p.segment_min is cut into up to
 * p.segments parts of at least segment_min entries, each composited from
 * T = 1 by a block of its own, and rc_combine_kernel chains them per pixel
 * (the same result as one walk up to rounding; where a pixel's cut-off falls
 * inside a later part, that part is walked again from the pixel's
 * transmittance at its start). The lidar rasterizer does the same. Where
 * lists are cut the walks take the list's grid (kList,
 * tiles/splat_parts_grid_cuda.cuh): one dimension, a block per (camera,
 * pass, tile) for the first parts, then one per chunk of the list for the
 * later parts; a block with no part leaves at once (uniform over the
 * block). Uncut, they keep the 3-D grid (tile column, tile row, (camera,
 * pass)) in kernels of their own. (Part-major instead, every camera's first
 * parts dispatched before any later part: H200, garden 648 x3
 * 1.372 -> 1.340 ms fwd+bwd, but the street 2.67 -> 2.72 and the 1296 x3
 * garden 2.54 -> 2.63, not kept: benchmarks/RESULTS.md.) */
typedef struct NR(rc_place) {
    int64_t cz, tile, start, end, lo, hi, pix; /* camera; tile; its list; this block's part; pixel */
    int pass, x, y, seg, cell; /* cell: the pixel's place in its tile, row-major (the parts' slots) */
    int x0, y0;                /* the tile's first pixel */
    bool inside, multi;
} NR(rc_place);

/* The block's tile, pass and part (false: nothing to do, uniform over the
 * block), once per block; rc_place_cell then places one of its pixels. */
template <bool kList>
NUREC_HD_DEV bool NR(rc_place_block)(const nurec_rasterize_camera_params& p, int passes, NR(rc_place)* w) {
    nurec_splat_block b;
    if (!nurec_splat_block_of<kList>(p, p.num_cameras, passes, 1, &b)) return false;
    w->seg = b.seg;
    w->pass = b.pass;
    w->tile = b.tile;
    w->cz = b.image;
    w->x0 = b.tx * NUREC_TILE;
    w->y0 = b.ty * NUREC_TILE;
    w->start = p.tile_ranges[2 * w->tile];
    w->end = p.tile_ranges[2 * w->tile + 1];
    int64_t seg_len;
    /* an overflowed binning: one "part", whose forward writes the NaN outputs */
    const int n = p.status[1] != 0 ? 1 : nurec_splat_segment_count(p.segments, p.segment_min, w->end - w->start, &seg_len);
    if (w->seg >= n) return false;
    w->multi = n > 1;
    w->lo = w->multi ? w->start + w->seg * seg_len : w->start;
    w->hi = w->multi && w->lo + seg_len < w->end ? w->lo + seg_len : w->end;
    return true;
}

NUREC_HD_DEV void NR(rc_place_cell)(const nurec_rasterize_camera_params& p, int cell, NR(rc_place)* w) {
    w->cell = cell;
    w->x = w->x0 + (cell % NUREC_TILE);
    w->y = w->y0 + (cell / NUREC_TILE);
    w->inside = w->x < p.width && w->y < p.height;
    w->pix = (w->cz * p.height + w->y) * (int64_t)p.width + w->x;
}

template <bool kList>
NUREC_HD_DEV bool NR(rc_place_of)(const nurec_rasterize_camera_params& p, int passes, int cell, NR(rc_place)* w) {
    if (!NR(rc_place_block)<kList>(p, passes, w)) return false;
    NR(rc_place_cell)(p, cell, w);
    return true;
}

/* Which blocks of RC_BWD_WARP_W x RC_BWD_WARP_H pixels of a tile a staged
 * entry can reach, in the backward, where a warp holds RC_BWD_PIX of them
 * (rc_bwd_cell); the entry's footprint (d^T Q d <= thr, the threshold
 * the binning cut the tiles with: alpha < 1/255 outside it, rounding
 * included) lies in the box u +- sqrt(thr Sigma_xx), v +- sqrt(thr
 * Sigma_yy), Sigma = inverse(Q). Written into the staged entry's threshold
 * slot (unused by the steps) as a bit per block, so that a warp skips the
 * entries whose box misses its blocks, and a pixel those whose box misses
 * its own block, without computing their alphas (the
 * lidar's walks cull per warp the same way). H200, warps of two
 * whole rows culled by rows: rc_backward_kernel 1,673 -> 1,646 us (street),
 * 877 -> 836 us (small garden): the culled pairs are the cheap ones, where
 * no pixel's alpha reaches 1/255 anyway. Warps of 8 x 4 pixels, culled by
 * the box: fewer (entry, warp) pairs with a pixel to composite, and more
 * pixels in each (benchmarks/device/camera_strip_stats.py, small garden: 3.50 ->
 * 2.94 M pairs reach a pixel, 3.98 -> 3.51 M pass the cull); H200,
 * with NUREC_SPLAT_ONE_ATOMIC and _VEC_ATOMICS: 1,650 -> 1,556 us
 * (street), 837 -> 787 us (small garden). The forward's walks were slower with a cull
 * (street first walk 505 -> 574 us: the culled loop's registers, 32 -> 48,
 * and its bookkeeping per entry outweigh an alpha per pair), so they do not
 * cull, and keep warps of whole rows. x0, y0: the tile's first column and
 * row. */
#ifndef RC_BWD_WARP_W
#define RC_BWD_WARP_W 8
#endif
#define RC_BWD_WARP_H (32 / RC_BWD_WARP_W)
#define RC_BWD_WARPS_X (NUREC_TILE / RC_BWD_WARP_W) /* warps across a tile */
#define RC_WARPS (RC_BLOCK / 32)
#if RC_BWD_WARP_W * RC_BWD_WARP_H != 32 || NUREC_TILE % RC_BWD_WARP_W != 0 || NUREC_TILE % RC_BWD_WARP_H != 0
#error "a backward warp's block of pixels must tile the tile"
#endif
#ifndef RC_BWD_CELL_ONCE /* not generic over real_t: once for both precisions */
#define RC_BWD_CELL_ONCE
/* Pixels per thread of the backward (RC_BWD_PIX, rasterize_camera.cu): a
 * warp holds RC_BWD_PIX of the blocks above, stacked, lane l the pixel at
 * place l of each, so a warp's sums per entry cover 32 x RC_BWD_PIX pixels.
 * Why: a warp's steps per entry are mostly the entry's own (the ballot, the
 * 16-value butterfly, the atomics: ~150 of the ~220 SASS instructions of a
 * step with one pixel a lane, the pixel's alpha and VJP ~70), and over the
 * walked entries of the small garden the 8 x 8 warps meet 1.96 M (entry,
 * warp) pairs where the 8 x 4 meet 3.51 M, both of their halves in 79% of
 * them (benchmarks/device/camera_strip_stats.py). A half whose box the entry misses
 * is skipped, uniform over the warp. H200 (with the camera's
 * atomics switches off): rc_backward_kernel 1,573 -> 1,359 us (street),
 * 800 -> 692 us (small garden); fwd+bwd of the 1944 x3 garden 5.17 -> 4.20
 * ms. Four pixels a thread lost on the street (+7%) at a quarter of the
 * occupancy while a pixel's state was a suffix sum a channel; with one a
 * pixel (splat_composite_vjp) four fit 14 blocks of 64, and they ship
 * (rasterize_camera.cu's RC_BWD_PIX: 1944 garden -11%, street +2.5%). */
/* The cell (row-major place in its tile) of pixel h of thread t. */
static __device__ __forceinline__ int rc_bwd_cell(int t, int h) {
    const int wi = t >> 5, l = t & 31;
    const int row = (wi / RC_BWD_WARPS_X) * (RC_BWD_WARP_H * RC_BWD_PIX) + h * RC_BWD_WARP_H + l / RC_BWD_WARP_W;
    const int col = (wi % RC_BWD_WARPS_X) * RC_BWD_WARP_W + l % RC_BWD_WARP_W;
    return row * NUREC_TILE + col;
}
/* The bit of rc_stage_warps' mask (a block of RC_BWD_WARP_W x RC_BWD_WARP_H
 * pixels, row-major over the tile) that pixel h of thread t lies in. */
static __device__ __forceinline__ int rc_bwd_group(int t, int h) {
    const int wi = t >> 5;
    return ((wi / RC_BWD_WARPS_X) * RC_BWD_PIX + h) * RC_BWD_WARPS_X + wi % RC_BWD_WARPS_X;
}
#endif
/* The bits [klo, khi] of the span of groups of n cells that centres c -
 * half .. c + half can meet, the groups' first cell at o (all 0..n_groups - 1
 * when not finite: a degenerate conic). */
NUREC_HD_DEV unsigned NR(rc_span_bits)(real_t c, real_t half, real_t o, int n, int n_groups) {
    const real_t lo = (c - half - o - (real_t)(n - 0.5)) / n;
    const real_t hi = (c + half - o - (real_t)0.5) / n;
    if (!(lo > (real_t)-1e9 && hi < (real_t)1e9)) return (1u << n_groups) - 1;
    const real_t klo = R_FMAX(R_CEIL(lo), (real_t)0), khi = R_FMIN(R_FLOOR(hi), (real_t)(n_groups - 1));
    return khi < klo ? 0u : ((2u << (int)khi) - 1u) & ~((1u << (int)klo) - 1u);
}
NUREC_HD_DEV void NR(rc_stage_warps)(const real_t* r, real_t x0, real_t y0, real_t* e) {
    const real_t A = r[NUREC_TREC_A], B = r[NUREC_TREC_B], C = r[NUREC_TREC_C];
    const real_t t = r[NUREC_TREC_THR] / (A * C - B * B);
    const unsigned rows = NR(rc_span_bits)(r[NUREC_TREC_V], R_SQRT(t * A), y0, RC_BWD_WARP_H, RC_WARPS / RC_BWD_WARPS_X);
    const unsigned cols = RC_BWD_WARPS_X == 1 ? 1u
        : NR(rc_span_bits)(r[NUREC_TREC_U], R_SQRT(t * C), x0, RC_BWD_WARP_W, RC_BWD_WARPS_X);
    unsigned m = 0;
#pragma unroll
    for (int k = 0; k < RC_WARPS / RC_BWD_WARPS_X; ++k)
        if (rows >> k & 1u) m |= cols << (k * RC_BWD_WARPS_X);
    e[NUREC_TREC_THR] = (real_t)m;
}

/* The staged entries [c, c + 32) of n whose box meets one of this warp's
 * blocks (wmask: their bits), a bit each (uniform over the warp). */
NUREC_HD_DEV unsigned NR(rc_warp_entries)(const real_t* s_e, int c, int n, unsigned wmask) {
    const int k = c + (threadIdx.x & 31);
    const bool meets = k < n && ((unsigned)s_e[RC_ENTRY * k + NUREC_TREC_THR] & wmask) != 0;
    return __ballot_sync(0xffffffffu, meets);
}

/* Composites a taken staged entry r (alpha a) into the pixel's T, features
 * and depth; false, changing nothing, where T would fall below the cut-off
 * (the pixel stops before it). kPack: the entry's depth is staged in its
 * last feature slot (fewer than RC_CH channels, one pass), so acc's last
 * sum is the depth's: one 16-byte load and four FMAs a taken entry where
 * the unused slot took an FMA of zeros and the depth a load and an FMA of
 * their own. The same FMAs in the same order: the same bits. */
template <bool kPack>
__device__ __forceinline__ bool NR(rc_composite)(const real_t* r, real_t a, real_t* T, real_t acc[RC_CH],
                                                 real_t* dep) {
    const real_t Tn = *T * (1 - a);
    if (Tn < (real_t)NUREC_SPLAT_T_MIN) return false;
    const real_t wt = a * *T;
    for (int q = 0; q < RC_CH; ++q) acc[q] += wt * r[NUREC_TREC_SIZE + q];
    if (!kPack) *dep += wt * r[NUREC_TREC_DEPTH];
    *T = Tn;
    return true;
}

/* Forward body, Gaussians staged through shared memory in batches.
 * fixup = 1: the second walk of the parts where a pixel's cut-off falls
 * (flagged by the combine kernel): only those pixels, from the
 * transmittance the combine left in final_T. kPack: fewer channels than
 * RC_CH, the depth summed in the last slot (rc_composite). */
template <bool kPack, bool kList>
__device__ __forceinline__ void NR(rc_forward_body)(const nurec_rasterize_camera_params& p, int passes,
                                                   const int fixup) {
    /* per staged entry its exponent's terms for this tile (splat_stage_ldl:
       6 values), its depth and a spare slot, then its RC_CH features: 48 bytes
       (float32) in one array, so that every read is a 16-byte vector load
       (a broadcast) from one base */
    __shared__ __align__(16) real_t s_e[(RC_BLOCK + 1) * RC_ENTRY]; /* + 1: the steps' pairs (below) */
    NR(rc_place) w;
    if (!NR(rc_place_of)<kList>(p, passes, threadIdx.x, &w)) return;
    if (fixup && (!w.multi || w.seg == 0)) return; /* a first part is never walked again */
    const int tid = threadIdx.x;
    const int64_t D = p.channels, cz = w.cz, start = w.start, lo = w.lo, hi = w.hi, pix = w.pix;
    const int pass = w.pass;
    const int c0 = pass * RC_CH;
    const int nch = D - c0 < RC_CH ? (int)(D - c0) : RC_CH;
    const bool inside = w.inside;
    const bool overflow = p.status[1] != 0;
    const int sh = p.sh_degree >= 0;
    /* the pixel's centre from its tile's (x0 + 8, y0 + 8): splat_alpha_ldl's offsets */
    const real_t lx = (real_t)(w.x - w.x0) - (real_t)7.5, ly = (real_t)(w.y - w.y0) - (real_t)7.5;
    const real_t xc = (real_t)(w.x0 + NUREC_TILE / 2), yc = (real_t)(w.y0 + NUREC_TILE / 2);
    /* its part's slot of this pixel (when cut): the thread's cell of its tile's */
    const int64_t at = nurec_splat_part_at<RC_BLOCK>(p, w.tile, w.start, threadIdx.x, w.seg);
    real_t T = 1, dep = 0, acc[RC_CH];
    for (int k = 0; k < RC_CH; ++k) acc[k] = 0;
    int32_t last = 0;
    bool done = !inside || overflow;
    if (fixup && !done) {
        done = (p.seg_last[at] & NUREC_SPLAT_SEG_FIXUP) == 0;
        if (!done) T = ((const real_t*)p.final_T)[pix]; /* the start T the combine left there */
    }
    const bool active = !done;
    /* A later part's walk is wasted on a pixel that an earlier part already
     * stopped (the combine never reads it). The first walk of a part that
     * stops a pixel publishes that in p.last (atomicMin of the part; the
     * launcher fills it with a large value first), and a later part looks
     * at each batch: whatever it sees is final, and what it has not seen
     * yet only costs the work it would have done anyway, so the outputs do
     * not depend on the timing (its own result for such a pixel lies behind
     * the cut-off: never read, and cleared by the combine). As the lidar's. */
    const bool parts_first_walk = w.multi && !fixup;
    for (int64_t b = lo; b < hi; b += RC_BLOCK) {
        if (parts_first_walk && w.seg > 0 && !done) done = __ldcg(p.last + pix) < w.seg;
        if (__syncthreads_count(done) == RC_BLOCK) break;
        int64_t j = b + tid;
        if (j < hi) {
            int64_t it = p.isect_items[j];
            const real_t* r = (const real_t*)p.records + NUREC_TREC_SIZE * it;
            real_t* e = s_e + RC_ENTRY * tid;
            NR(splat_stage_ldl)(r, xc, yc, e); /* the exponent as the step reads it (tiles/splat_math_generic.h) */
            e[NUREC_TREC_DEPTH] = r[NUREC_TREC_DEPTH]; /* slot 7 unread */
            const real_t* f = sh ? (const real_t*)p.colors + 3 * it
                                 : (const real_t*)p.features + D * NUREC_RC_FEATURE_ROW(p, it);
            for (int k = 0; k < RC_CH; ++k) e[NUREC_TREC_SIZE + k] = k < nch ? f[c0 + k] : (real_t)0;
            if (kPack) e[NUREC_TREC_SIZE + RC_CH - 1] = e[NUREC_TREC_DEPTH];
        }
        __syncthreads();
        const int cnt = hi - b < RC_BLOCK ? (int)(hi - b) : RC_BLOCK;
        /* The steps, the kernel's innermost loop, two entries at a time: both
           alphas first (independent chains of loads, FMAs and ex2, which one
           entry at a time left waiting on each other's latency), then the
           two composites in order under the stop rule, as one at a time
           would (the same bits). Skipped entries (alpha below 1/255) are
           only a predicate; the last entry taken is counted per batch. The
           second entry of an odd batch's last pair reads the staged array's
           spare entry and is never composited. */
        int taken = -1;
        const bool was_done = done;
        const real_t* r = s_e;
        const int n = done ? 0 : cnt;
        for (int k = 0; k < n; k += 2, r += 2 * RC_ENTRY) {
            const real_t* r1 = r + RC_ENTRY;
            real_t a0, a1, oa, qe, t, wq; /* the last four: the backward's */
            const bool c0 = NR(splat_alpha_ldl)(r, lx, ly, &a0, &oa, &qe, &t, &wq);
            const bool c1 = NR(splat_alpha_ldl)(r1, lx, ly, &a1, &oa, &qe, &t, &wq) && k + 1 < n;
            if (c0) {
                if (!NR(rc_composite)<kPack>(r, a0, &T, acc, &dep)) {
                    done = true;
                    break;
                }
                taken = k;
            }
            if (c1) {
                if (!NR(rc_composite)<kPack>(r1, a1, &T, acc, &dep)) {
                    done = true;
                    break;
                }
                taken = k + 1;
            }
        }
        if (taken >= 0) last = (int32_t)(b + taken - start + 1);
        if (done && !was_done && parts_first_walk && pass == 0) atomicMin(p.last + pix, w.seg);
    }
    if (!inside || (fixup && !active)) return;
    if (kPack) dep = acc[RC_CH - 1];
    if (w.multi) { /* this part's own result, for the combine kernel */
        real_t* st = (real_t*)p.seg_state + (D + 2) * at;
        for (int q = 0; q < RC_CH; ++q)
            if (q < nch) st[c0 + q] = acc[q];
        if (pass == 0) {
            st[D] = dep;
            st[D + 1] = T;
            p.seg_last[at] = last | (fixup ? NUREC_SPLAT_SEG_FIXUP : done ? NUREC_SPLAT_SEG_STOPPED : 0);
        }
        return;
    }
    real_t* out = (real_t*)p.render + D * pix + c0;
    const real_t* bg = (const real_t*)p.backgrounds;
    const real_t nan = (real_t)NAN;
    for (int q = 0; q < RC_CH; ++q)
        if (q < nch) out[q] = overflow ? nan : acc[q] + (bg ? T * bg[cz * D + c0 + q] : (real_t)0);
    if (pass == 0) {
        ((real_t*)p.depth)[pix] = overflow ? nan : dep;
        ((real_t*)p.alpha)[pix] = overflow ? nan : 1 - T;
        ((real_t*)p.final_T)[pix] = overflow ? nan : T;
        p.last[pix] = overflow ? 0 : last;
    }
}

/* Two kernels, so that the first walk does not carry the second's registers;
 * each on the 3-D grid and on the list's (kList). The first walk's float32
 * kernels at 8 blocks of 256 (32 registers, full occupancy; the list's
 * decode would take 48 without the bound). */
template <bool kPack, bool kList>
__global__ void __launch_bounds__(RC_BLOCK, sizeof(real_t) == 4 ? RC_FWD_MIN_BLOCKS_F32 : 1)
NR(rc_forward_kernel)(nurec_rasterize_camera_params p, int passes) {
    NR(rc_forward_body)<kPack, kList>(p, passes, 0);
}

template <bool kPack, bool kList>
__global__ void __launch_bounds__(RC_BLOCK)
NR(rc_forward_fixup_kernel)(nurec_rasterize_camera_params p, int passes) {
    NR(rc_forward_body)<kPack, kList>(p, passes, 1);
}

/* The camera's cells for the shared combine (tiles/splat_combine_cuda.cuh):
 * pixels; the background is added behind what the parts left. */
struct NR(rc_cells) {
    __device__ static int64_t count(const nurec_rasterize_camera_params& p) {
        return p.num_cameras * p.height * (int64_t)p.width;
    }
    static constexpr int per_tile = RC_BLOCK;
    __device__ static int64_t tile(const nurec_rasterize_camera_params& p, int64_t pix, int* local) {
        const int64_t HW = p.height * (int64_t)p.width, cz = pix / HW;
        const int y = (int)((pix - cz * HW) / p.width), x = (int)(pix % p.width);
        *local = (y % NUREC_TILE) * NUREC_TILE + x % NUREC_TILE;
        return (cz * p.tiles_y + y / NUREC_TILE) * p.tiles_x + x / NUREC_TILE;
    }
    struct Out {
        int64_t pix;
        const real_t* bg; /* the camera's background, or NULL */
    };
    __device__ static Out out(const nurec_rasterize_camera_params& p, int64_t pix) {
        const real_t* bg = (const real_t*)p.backgrounds;
        return Out{pix, bg ? bg + p.channels * (pix / (p.height * (int64_t)p.width)) : bg};
    }
    __device__ static void write(const nurec_rasterize_camera_params& p, Out o, int64_t q, real_t v, real_t P) {
        if (q == p.channels) ((real_t*)p.depth)[o.pix] = v;
        else ((real_t*)p.render)[p.channels * o.pix + q] = v + (o.bg ? P * o.bg[q] : (real_t)0);
    }
    __device__ static void alpha(const nurec_rasterize_camera_params& p, Out o, real_t P) {
        ((real_t*)p.alpha)[o.pix] = 1 - P;
    }
};

__global__ void __launch_bounds__(RC_PROJ_THREADS)
NR(rc_combine_kernel)(nurec_rasterize_camera_params p, int phase) {
    nurec_splat_combine<real_t, NR(rc_cells)>(p, phase);
}

/* Backward: one block per (tile, camera, pass), RC_BWD_PIX pixels per
 * thread (rc_bwd_cell); pixels sweep their lists back to front in
 * shared-memory batches; each Gaussian's gradient is summed over the warp's
 * pixels with shuffles before one lane adds it to global memory (when only a
 * few lanes of the warp contribute, as for small Gaussians, those lanes add
 * directly instead). Its own register budget (RC_BWD_MIN_BLOCKS) and batch
 * size. */
/* kAbs: SPEC 8's absgrad is written (a build of its own, so that the plain
 * backward keeps its registers and stack: with a runtime test its f32
 * build spilled 8 bytes more). kCh: channels a pass, RC_CH, or 3 for an
 * absgrad call of exactly 3 channels (rasterize_camera.cu's RC_BWD_CH3),
 * which then carries no fourth, zero channel through every pixel's VJP and
 * the lane sums. */
template <bool kAbs, int kCh, bool kList>
__global__ void __launch_bounds__(RC_BWD_THREADS, sizeof(real_t) == 4 ? RC_BWD_MIN_BLOCKS_F32 : RC_BWD_MIN_BLOCKS_F64)
NR(rc_backward_kernel)(nurec_rasterize_camera_params p, int passes) {
    __shared__ __align__(16) real_t s_e[RC_BWD_BATCH * RC_ENTRY]; /* exponent's terms, features: as the forward's */
    __shared__ real_t s_uv[2 * RC_BWD_BATCH]; /* the centre from the tile's (ul, vl): the VJP's offsets */
    __shared__ int64_t s_it[RC_BWD_BATCH];
    __shared__ int64_t s_gc[RC_BWD_BATCH]; /* where its colour gradient goes (frees registers in the sweep) */
    __shared__ int s_max_last;
    if (p.status[1] != 0) return; /* overflowed forward: outputs were NaN */
    const int tid = threadIdx.x, lane = tid & 31;
    /* each pixel's state: the transmittance, output gradients and the one
       suffix sum of its sweep (splat_composite_vjp's P) */
    real_t T[RC_BWD_PIX], gf[RC_BWD_PIX][kCh], gz[RC_BWD_PIX], P[RC_BWD_PIX], ly[RC_BWD_PIX];
    int32_t last[RC_BWD_PIX];
    unsigned wmask = 0;
    NR(rc_place) w;
    if (!NR(rc_place_block)<kList>(p, passes, &w)) return; /* uniform over the block */
#pragma unroll
    for (int h = 0; h < RC_BWD_PIX; ++h) {
        /* the pixels differ only in x, y, pix, cell */
        NR(rc_place_cell)(p, rc_bwd_cell(tid, h), &w);
        wmask |= 1u << rc_bwd_group(tid, h);
        const int64_t cz = w.cz, pix = w.pix;
        const int64_t D = p.channels;
        const int c0 = w.pass * kCh;
        const int nch = D - c0 < kCh ? (int)(D - c0) : kCh;
        ly[h] = (real_t)(w.y - w.y0) - (real_t)7.5; /* from the tile's centre, as the forward's */
        T[h] = gz[h] = P[h] = 0;
        last[h] = 0;
        for (int q = 0; q < kCh; ++q) gf[h][q] = 0;
        if (!w.inside) continue;
        const real_t T_final = ((const real_t*)p.final_T)[pix];
        T[h] = T_final;
        last[h] = p.last[pix];
        /* what lies behind the list: the background, and for a part what the
           later parts composited (the combine's suffix sums) */
        real_t S[kCh], Sz = 0, gTa = 0;
        const real_t* g = (const real_t*)p.grad_render + D * pix + c0;
        const real_t* bg = (const real_t*)p.backgrounds;
        for (int q = 0; q < kCh; ++q) {
            S[q] = 0;
            if (q >= nch) continue;
            gf[h][q] = g[q];
            S[q] = bg ? T_final * bg[cz * D + c0 + q] : (real_t)0;
        }
        if (w.multi) { /* a part: from T after it */
            const int64_t at = nurec_splat_part_at<RC_BLOCK>(p, w.tile, w.start, w.cell, w.seg);
            const real_t* st = (const real_t*)p.seg_state + (D + 2) * at;
            for (int q = 0; q < kCh; ++q)
                if (q < nch) S[q] += st[c0 + q];
            Sz = st[D];
            T[h] = st[D + 1];
        }
        if (w.pass == 0) {
            gz[h] = p.grad_depth ? ((const real_t*)p.grad_depth)[pix] : (real_t)0; /* absent: zero */
            gTa = p.grad_alpha ? ((const real_t*)p.grad_alpha)[pix] * T_final : (real_t)0;
        }
        P[h] = NR(splat_composite_vjp_start)(gTa, gz[h], Sz, gf[h], S, kCh);
    }
    const int64_t start = w.start, lo = w.lo;
    const int pass = w.pass;
    const int64_t D = p.channels;
    const int c0 = pass * kCh;
    const int nch = D - c0 < kCh ? (int)(D - c0) : kCh;
    const int sh = p.sh_degree >= 0;
    const real_t lx = (real_t)(w.x - w.x0) - (real_t)7.5; /* the same column for every pixel of the thread */
    const real_t xc = (real_t)(w.x0 + NUREC_TILE / 2), yc = (real_t)(w.y0 + NUREC_TILE / 2);
    int32_t my_last = 0;
#pragma unroll
    for (int h = 0; h < RC_BWD_PIX; ++h) my_last = last[h] > my_last ? last[h] : my_last;
    if (tid == 0) s_max_last = 0;
    __syncthreads();
    if (my_last > 0) atomicMax(&s_max_last, my_last);
    __syncthreads();
    /* entries from the tile's start, in 32 bits (a list is shorter than 2^31,
     * as `last` is): with 64-bit bounds the kernel spilled at its register
     * budget (56 bytes, ptxas) */
    const int32_t lo_rel = (int32_t)(lo - start), hi_rel = (int32_t)(w.hi - start);
    const int32_t stop_rel = s_max_last < hi_rel ? s_max_last : hi_rel;
    real_t* grec = (real_t*)p.grad_records;
    real_t* gcol = sh ? (real_t*)p.grad_colors : (real_t*)p.grad_features;
    for (int32_t e_end = stop_rel; e_end > lo_rel; e_end -= RC_BWD_BATCH) {
        const int cnt = e_end - lo_rel < RC_BWD_BATCH ? e_end - lo_rel : RC_BWD_BATCH;
        __syncthreads();
        /* a batch may hold more entries than the block has threads
           (RC_BWD_BATCH): a thread's entries unrolled, so that their chains
           of loads (item, record, features) are in flight together */
#pragma unroll
        for (int j = 0; j < (RC_BWD_BATCH + RC_BWD_THREADS - 1) / RC_BWD_THREADS; ++j) {
            const int i = tid + j * RC_BWD_THREADS;
            if (i >= cnt) continue;
            int64_t it = p.isect_items[start + e_end - 1 - i];
            s_it[i] = it;
            s_gc[i] = (sh ? 3 * it : D * NUREC_RC_FEATURE_ROW(p, it)) + c0;
            const real_t* r = (const real_t*)p.records + NUREC_TREC_SIZE * it;
            real_t* e = s_e + RC_ENTRY * i;
            NR(splat_stage_ldl)(r, xc, yc, e); /* as the forward staged it: the same alpha bits */
            e[NUREC_TREC_DEPTH] = r[NUREC_TREC_DEPTH];
            NR(rc_stage_warps)(r, (real_t)w.x0, (real_t)w.y0, e);
            s_uv[2 * i] = r[NUREC_TREC_U] - xc;
            s_uv[2 * i + 1] = r[NUREC_TREC_V] - yc;
            const real_t* f = sh ? (const real_t*)p.colors + 3 * it
                                 : (const real_t*)p.features + D * NUREC_RC_FEATURE_ROW(p, it);
            for (int k = 0; k < kCh; ++k) e[NUREC_TREC_SIZE + k] = k < nch ? f[c0 + k] : (real_t)0;
        }
        __syncthreads();
        /* the batch's entries whose box meets this warp's pixels (rc_stage_warps), in order */
        for (int c = 0; c < cnt; c += 32)
        for (unsigned m = NR(rc_warp_entries)(s_e, c, cnt, wmask); m != 0; m &= m - 1) {
            const int k = c + __ffs(m) - 1;
            const real_t* r = s_e + RC_ENTRY * k;
            const int32_t rel = e_end - 1 - k;
            const unsigned bits = (unsigned)r[NUREC_TREC_THR];
            real_t v[7 + kCh], av[2] = {0, 0}, col[3] = {0, 0, 0};
            for (int q = 0; q < 7 + kCh; ++q) v[q] = 0;
            bool contrib = false;
#pragma unroll
            for (int h = 0; h < RC_BWD_PIX; ++h) {
                /* the first test is uniform over the warp: a block the box misses */
                if (!(bits >> rc_bwd_group(tid, h) & 1u) || rel >= last[h]) continue;
                real_t a, oa, qe, t, wq;
                if (NR(splat_alpha_ldl)(r, lx, ly[h], &a, &oa, &qe, &t, &wq)) {
                    contrib = true;
                    real_t wt;
                    real_t ga = NR(splat_composite_vjp)(a, r + NUREC_TREC_SIZE, kCh, r[NUREC_TREC_DEPTH], gf[h],
                                                     gz[h], &T[h], &P[h], &wt);
                    const real_t dy = ly[h] - s_uv[2 * k + 1];
                    /* the pixels' sums, finished once an entry (below): the
                       thread's pixels are a column (one dx), three sums; with
                       absgrad (SPEC 8), which needs each pixel's |d/du| and
                       |d/dv|, the six sums and those */
                    if (kAbs)
                        NR(splat_alpha_vjp_ldl_sums)(oa, t, wq, lx - s_uv[2 * k], dy, ga, v, r, av);
                    else
                        NR(splat_alpha_vjp_ldl_column)(oa, dy, ga, col);
                    v[6] += wt * gz[h];
                    for (int q = 0; q < kCh; ++q) v[7 + q] += wt * gf[h][q];
                }
            }
            const unsigned mask = __ballot_sync(0xffffffffu, contrib);
            if (mask == 0) continue;
            /* a lane none of whose pixels counted gets zeros from its zero
               sums: a listed entry's staged terms and offsets are finite
               (the binning gives a non-finite record no tiles), and a test
               of contrib here cost 11 SASS instructions */
            if (!kAbs) NR(splat_alpha_vjp_ldl_column_sums)(r, lx - s_uv[2 * k], col, v);
            NR(splat_alpha_vjp_ldl_finish)(r, v, kAbs ? av : (real_t*)0); /* linear: a lane's sums over its pixels */
            v[5] *= R_EXP_STAGED(-r[5]); /* 1 / o: splat_alpha_vjp_ldl summed o exp(-sigma) */
            const int64_t it = s_it[k];
            real_t* g = grec + NUREC_SPLAT_GREC_ROW(kAbs) * it;
            real_t* gc = gcol + s_gc[k];
            /* SPEC 8's absgrad, in the record's row (the glue allows it with one pass of channels) */
            real_t* ga = kAbs ? g + NUREC_SPLAT_GREC_ABS : (real_t*)0;
            if (__popc(mask) > (kAbs ? RC_BWD_DIRECT_LANES_ABS : RC_BWD_DIRECT_LANES)) {
                /* many pixels of the warp: the warp's sums, one atomic per value */
                NR(splat_warp_add)<kCh>(v, lane, g, pass == 0 ? 7 : 6, gc, nch, ga, av);
            } else if (contrib) {
                NR(splat_lane_add)(v, kCh, g, pass == 0 ? 7 : 6, gc, nch, ga, av);
            }
        }
    }
}

/* Per Gaussian: the projection VJP summed over cameras (no atomics;
 * tiles/splat_project_generic.h). SH: each thread's 3 x 16 coefficient
 * gradients are summed over the cameras in shared memory (one column per
 * thread: no bank conflicts) and the block writes its Gaussians' rows at the
 * end, coalesced: read-modify-writes of [N, K, 3] in global memory per
 * (camera, Gaussian), 192 B apart across a warp, were the rig step's
 * costliest per-Gaussian traffic (its projection backward 3.7 ms on 2M
 * Gaussians x 5 cameras against gsplat's ~1.2). */
template <bool kModels>
__global__ void __launch_bounds__(RC_PROJ_BWD_THREADS)
NR(rc_project_backward_kernel)(nurec_rasterize_camera_params p) {
    __shared__ real_t s_gsh[RC_SH_MAX * RC_PROJ_BWD_THREADS];
    const int64_t N = p.num_gaussians;
    const int64_t g0 = (int64_t)blockIdx.x * blockDim.x, g = g0 + threadIdx.x;
    const int sh = p.sh_degree >= 0;
    const int64_t K3 = 3 * p.sh_coeffs;
    if (g < N) /* the degree's coefficients (at most 16) in this thread's column */
        NR(rc_project_vjp_gaussian)(&p, g, !kModels, sh ? s_gsh + threadIdx.x : (real_t*)0, RC_PROJ_BWD_THREADS,
                                    sh ? (K3 < RC_SH_MAX ? K3 : RC_SH_MAX) : 0);
    if (!sh) return; /* uniform over the grid */
    __syncthreads();
    /* the block's rows [g0, g0 + n) x 3K, contiguous in global memory, written
       in order from the columns (coefficients past the first 16 are 0) */
    const int64_t n = N - g0 < RC_PROJ_BWD_THREADS ? N - g0 : RC_PROJ_BWD_THREADS;
    real_t* out = (real_t*)p.grad_features + K3 * g0;
    for (int64_t i = threadIdx.x; i < n * K3; i += RC_PROJ_BWD_THREADS) {
        const int64_t row = i / K3, k = i - row * K3;
        out[i] = k < RC_SH_MAX ? s_gsh[k * RC_PROJ_BWD_THREADS + row] : (real_t)0;
    }
}

/* Each pixel's median item (tiles/splat_median_cuda.cuh): a block per
 * (camera, tile), pixels at their centres, rc_alpha as the CPU's. */
struct NR(rc_median_cells) {
    static constexpr int per_tile = RC_BLOCK;
    __device__ static int64_t tiles(const nurec_rasterize_camera_params& p) {
        return p.num_cameras * (int64_t)p.tiles_x * p.tiles_y;
    }
    __device__ static int64_t items(const nurec_rasterize_camera_params& p) {
        return p.num_cameras * p.num_gaussians;
    }
    __device__ static int64_t cell(const nurec_rasterize_camera_params& p, int64_t tile, int local) {
        const int64_t per_camera = (int64_t)p.tiles_x * p.tiles_y, c = tile / per_camera;
        const int t = (int)(tile - c * per_camera), ty = t / p.tiles_x, tx = t - ty * p.tiles_x;
        const int x = tx * NUREC_TILE + local % NUREC_TILE, y = ty * NUREC_TILE + local / NUREC_TILE;
        return x < p.width && y < p.height ? (c * p.height + y) * (int64_t)p.width + x : -1;
    }
    __device__ static void ray(const nurec_rasterize_camera_params& p, int64_t pix, real_t* cu, real_t* cv) {
        *cu = (real_t)(pix % p.width) + (real_t)0.5;
        *cv = (real_t)((pix / p.width) % p.height) + (real_t)0.5;
    }
    __device__ static real_t alpha(const real_t* rec, real_t cu, real_t cv) {
        real_t vis, dx, dy;
        return NR(rc_alpha)(rec, cu, cv, &vis, &dx, &dy);
    }
    __device__ static int step(real_t a, real_t* T) { return NR(splat_median_step)(a, T); }
    __device__ static int64_t out(const nurec_rasterize_camera_params&, int64_t pix) { return pix; }
};

__global__ void __launch_bounds__(RC_BLOCK) NR(rc_median_kernel)(nurec_rasterize_camera_params p) {
    nurec_splat_median<real_t, NR(rc_median_cells)>(p);
}
