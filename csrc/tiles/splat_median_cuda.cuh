/* The median walk that both rasterizers share (CUDA): per cell (a pixel,
 * a lidar ray) the item of the first list entry after which the cell's
 * transmittance is at most one half (rasterize_*_median), composited as
 * the forward does. One block per tile, one thread per cell of it; the
 * tile's list is staged in shared-memory batches of a block's width, and
 * the block leaves as soon as every cell has its answer. Only cells the
 * forward left at T <= 1/2 walk (their median exists; the forward's final_T,
 * indexed as `cell`), each stopping at its median.
 *
 * Written once over the fields of NUREC_SPLAT_PARAMS_FIELDS; a rasterizer
 * gives its cells as `Cells`, a struct of static device functions:
 *   per_tile                    cells per tile (a static constexpr int: the block)
 *   tiles(p), items(p)          C x its tiles, C x its Gaussians
 *   cell(p, tile, local)        the cell at place `local` of a tile, or -1
 *   ray(p, cell, &cu, &cv)      the cell's coordinates in the records' units
 *   alpha(rec, cu, cv)          the forward's alpha of record rec there
 *   step(a, &T)                 splat_median_step of its precision
 *   out(p, cell)                where its answer goes (the user's order)
 * Templates on the real type: include this before math/generic.h
 * instantiates a family's kernels. */
#ifndef NUREC_SPLAT_MEDIAN_CUDA_CUH
#define NUREC_SPLAT_MEDIAN_CUDA_CUH

#include "tiles/splat.h"
#include "tiles/splat_math.h"
#include "tiles/splat_combine_cuda.cuh" /* nurec_splat_part_at */

/* the staged part of a record: u, v, the conic and the opacity (what an
   alpha reads; tiles.h layout) */
#define NUREC_SPLAT_MEDIAN_STAGED 6

template <typename Real, typename Cells, typename Params>
__device__ __forceinline__ void nurec_splat_median(const Params& p) {
    __shared__ Real s_rec[Cells::per_tile * NUREC_SPLAT_MEDIAN_STAGED];
    __shared__ int32_t s_it[Cells::per_tile];
    const int64_t tile = blockIdx.x;
    const int local = threadIdx.x;
    if (tile >= Cells::tiles(p)) return;
    const int64_t cell = Cells::cell(p, tile, local);
    if (p.status[1] != 0) { /* no list to walk (uniform over the grid) */
        if (cell >= 0) p.median_items[Cells::out(p, cell)] = NUREC_SPLAT_MEDIAN_OVERFLOW;
        return;
    }
    Real cu = 0, cv = 0;
    if (cell >= 0) Cells::ray(p, cell, &cu, &cv);
    const int64_t P = Cells::items(p), M = p.capacity;
    /* a saved list's range clamped to the list: nothing out of bounds */
    int64_t start = p.tile_ranges[2 * tile], end = p.tile_ranges[2 * tile + 1];
    start = start < 0 ? 0 : start;
    end = end > M ? M : end;
    int32_t found = NUREC_SPLAT_MEDIAN_NONE;
    /* a cell the forward left with T > 1/2 (alpha < 0.5) has none: only
       cells with a median walk, each to its median, never past the
       forward's own walk */
    bool done = cell < 0 || !(((const Real*)p.final_T)[cell] <= (Real)0.5);
    Real T = 1;
    /* a list the forward cut into parts: each part's slot holds the cell's
       transmittance after it (tiles/splat_combine_cuda.cuh), so the cell
       starts at the part its median lies in, from the transmittance there
       (a long list is walked a part's length, not its whole length, as the
       forward's blocks do) */
    int64_t from = start;
    __shared__ int s_first;
    if (local == 0) s_first = 1 << 30;
    __syncthreads();
    if (!done && p.segments > 1 && p.seg_state != NULL) {
        int64_t seg_len;
        const int n = nurec_splat_segment_count(p.segments, p.segment_min, end - start, &seg_len);
        const int64_t E = p.channels + 2;
        int s = 0;
        for (; s < n - 1; ++s) {
            const int64_t at = nurec_splat_part_at<Cells::per_tile>(p, tile, start, local, s);
            if (at < 0 || at >= p.seg_slots * Cells::per_tile) break; /* not a forward's layout: walk it all */
            const Real after = ((const Real*)p.seg_state)[E * at + E - 1];
            if (after <= (Real)0.5) break;
            T = after;
        }
        if (s > 0 && T == T) { /* not NaN */
            from = start + s * seg_len;
        } else {
            T = 1;
        }
        atomicMin(&s_first, (int)((from - start) / (seg_len > 0 ? seg_len : 1)));
        from = from < end ? from : end;
    } else if (!done) {
        atomicMin(&s_first, 0);
    }
    __syncthreads();
    /* the block's walk begins at the earliest part any of its cells needs */
    int64_t begin = start;
    if (s_first != (1 << 30) && s_first > 0) {
        int64_t seg_len;
        nurec_splat_segment_count(p.segments, p.segment_min, end - start, &seg_len);
        begin = start + (int64_t)s_first * seg_len;
    }
    for (int64_t b = begin; b < end; b += Cells::per_tile) {
        /* also the barrier before the batch is overwritten */
        if (__syncthreads_and(done)) break;
        const int64_t j = b + local;
        int32_t it = -1;
        if (j < end) {
            it = p.isect_items[j];
            if (it < 0 || it >= P) it = -1;
        }
        s_it[local] = it;
        if (it >= 0) {
            const Real* r = (const Real*)p.records + NUREC_TREC_SIZE * (int64_t)it;
            for (int k = 0; k < NUREC_SPLAT_MEDIAN_STAGED; ++k) s_rec[NUREC_SPLAT_MEDIAN_STAGED * local + k] = r[k];
        }
        __syncthreads();
        const int n = end - b < Cells::per_tile ? (int)(end - b) : Cells::per_tile;
        for (int k = 0; k < n && !done; ++k) {
            const int32_t e = s_it[k];
            if (e < 0 || b + k < from) continue;
            const Real a = Cells::alpha(s_rec + NUREC_SPLAT_MEDIAN_STAGED * k, cu, cv);
            if (a == 0) continue;
            const int st = Cells::step(a, &T);
            if (st > 0) found = e;
            done = st != 0;
        }
    }
    if (cell >= 0) p.median_items[Cells::out(p, cell)] = found;
}

#endif /* NUREC_SPLAT_MEDIAN_CUDA_CUH */
