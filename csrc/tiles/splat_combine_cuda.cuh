/* Long lists cut into parts (CUDA), the combine that both rasterizers
 * share: each part of a long tile list was composited from T = 1 by a block
 * of its own; per cell (a pixel or a lidar ray) this chains the parts front
 * to back. Part s started from T = 1; the cell's transmittance when it
 * begins is P, the product of the earlier parts' T. Its result counts P
 * times over unless the cut-off falls inside it (its own walk stopped, or
 * P x its T < 1e-4: T only falls); that part is composited again from T = P
 * under the SPEC's stop rule by the forward kernel (fixup = 1, warps and
 * culling as in the first walk) between phase 0 and phase 1 of this kernel:
 * the same result as one walk over the whole list, up to rounding (a second
 * walk by this thread alone, ray by ray, took 4.3 ms on the lidar's street
 * scene). Finally each part's slot holds what
 * the backward starts from: T after the part and what lies behind it
 * (suffix sums of the later parts), and the sums are the outputs.
 *
 * Written once over the fields of NUREC_SPLAT_PARAMS_FIELDS; a rasterizer
 * gives its cell grid as `Cells`, a struct of static device functions:
 *   count(p)                 C x its cells
 *   per_tile                 cells per tile (a static constexpr int)
 *   tile(p, cell, &local)    the tile a cell lies in, and its place there
 *                            (0 .. per_tile - 1: its cell of a part's slot)
 *   out(p, cell)             where the cell's outputs go (Cells::Out), found
 *                            once per cell (the lidar's user column, the
 *                            camera's background)
 *   write(p, o, q, v, P)     output channel q < D (q == D: depth or range)
 *   alpha(p, o, P)           alpha = 1 - P
 * Templates on the real type (`Real`, not the generic files' real_t macro):
 * include this before math/generic.h instantiates a family's kernels. */
#ifndef NUREC_SPLAT_COMBINE_CUDA_CUH
#define NUREC_SPLAT_COMBINE_CUDA_CUH

#include "tiles/splat.h"
#include "tiles/splat_math.h"

/* A cell's place in part s's slot (tiles/splat_math.h): slot x cells per
 * tile + its place `local` in the tile (the combine's cells and the walks'
 * threads alike). */
template <int kPerTile, typename Params>
__device__ __forceinline__ int64_t nurec_splat_part_at(const Params& p, int64_t tile, int64_t start,
                                                       int64_t local, int s) {
    return nurec_splat_part_slot(p.seg_shift, p.segments, tile, start, s) * kPerTile + local;
}

template <typename Real, typename Cells, typename Params>
__device__ __forceinline__ void nurec_splat_combine_finish(const Params& p, int64_t cell, int64_t tile,
                                                           int64_t start, int local, int n, int used, Real P,
                                                           int32_t last) {
    const int64_t D = p.channels, E = D + 2;
    const typename Cells::Out o = Cells::out(p, cell);
    Real* state = (Real*)p.seg_state;
    for (int s = used; s < n; ++s) { /* behind the cut-off: nothing to sweep */
        const int64_t at = nurec_splat_part_at<Cells::per_tile>(p, tile, start, local, s);
        Real* st = state + E * at;
        for (int64_t q = 0; q <= D; ++q) st[q] = 0;
        st[D + 1] = P;
        /* what the first walk left here depends on when it saw the early-out
           (p.last): overwritten, so that every output is the same call to call */
        p.seg_last[at] = 0;
    }
    for (int64_t q = 0; q <= D; ++q) {
        Real behind = 0;
        for (int s = used - 1; s >= 0; --s) {
            Real* v = state + E * nurec_splat_part_at<Cells::per_tile>(p, tile, start, local, s) + q;
            const Real c = *v;
            *v = behind;
            behind += c;
        }
        Cells::write(p, o, q, behind, P);
    }
    Cells::alpha(p, o, P);
    ((Real*)p.final_T)[cell] = P;
    p.last[cell] = last;
}

template <typename Real, typename Cells, typename Params>
__device__ __forceinline__ void nurec_splat_combine(const Params& p, int phase) {
    const int64_t CC = Cells::count(p);
    const int64_t cell = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (cell >= CC || p.status[1] != 0) return;
    const int64_t D = p.channels, E = D + 2;
    int local;
    const int64_t tile = Cells::tile(p, cell, &local);
    const int64_t start = p.tile_ranges[2 * tile];
    int64_t seg_len;
    const int n = nurec_splat_segment_count(p.segments, p.segment_min, p.tile_ranges[2 * tile + 1] - start, &seg_len);
    if (n <= 1) return; /* the forward kernel wrote this cell */
    Real* state = (Real*)p.seg_state;
    if (phase == 1) { /* after the second walk: only cells phase 0 left open (last < 0) */
        const int32_t open = p.last[cell];
        if (open >= 0) return;
        int s = 1;
        while (s < n - 1 && (p.seg_last[nurec_splat_part_at<Cells::per_tile>(p, tile, start, local, s)] & NUREC_SPLAT_SEG_FIXUP) == 0)
            ++s;
        const int64_t at = nurec_splat_part_at<Cells::per_tile>(p, tile, start, local, s);
        const int32_t sl = p.seg_last[at] & NUREC_SPLAT_SEG_LAST;
        const Real P = state[E * at + D + 1];
        nurec_splat_combine_finish<Real, Cells>(p, cell, tile, start, local, n, s + 1, P, sl > 0 ? sl : -open - 1);
        return;
    }
    Real P = 1;
    int32_t last = 0;
    for (int s = 0; s < n; ++s) {
        const int64_t at = nurec_splat_part_at<Cells::per_tile>(p, tile, start, local, s);
        Real* st = state + E * at;
        int32_t* sl = p.seg_last + at;
        const bool stopped = (*sl & NUREC_SPLAT_SEG_STOPPED) != 0;
        if (s > 0 && (stopped || P * st[D + 1] < (Real)NUREC_SPLAT_T_MIN)) {
            /* the cut-off falls in this part: to be walked again from T = P */
            *sl = NUREC_SPLAT_SEG_FIXUP;
            ((Real*)p.final_T)[cell] = P;
            p.last[cell] = -last - 1; /* open; the entries so far */
            return;
        }
        for (int64_t q = 0; q <= D; ++q) st[q] *= P;
        if ((*sl & NUREC_SPLAT_SEG_LAST) > 0) last = *sl & NUREC_SPLAT_SEG_LAST;
        P *= st[D + 1];
        st[D + 1] = P;
        if (stopped) { /* first part only: later ones are behind the cut-off */
            nurec_splat_combine_finish<Real, Cells>(p, cell, tile, start, local, n, s + 1, P, last);
            return;
        }
    }
    nurec_splat_combine_finish<Real, Cells>(p, cell, tile, start, local, n, n, P, last);
}

#endif /* NUREC_SPLAT_COMBINE_CUDA_CUH */
