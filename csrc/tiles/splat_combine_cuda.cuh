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
 *   tile(p, cell)            the tile a cell lies in
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

template <typename Real, typename Cells, typename Params>
__device__ __forceinline__ void nurec_splat_combine_finish(const Params& p, int64_t cell, int n, int used,
                                                           Real P, int32_t last) {
    const int64_t CC = Cells::count(p), D = p.channels, E = D + 2;
    const typename Cells::Out o = Cells::out(p, cell);
    Real* state = (Real*)p.seg_state;
    for (int s = used; s < n; ++s) { /* behind the cut-off: nothing to sweep */
        Real* st = state + E * (s * CC + cell);
        for (int64_t q = 0; q <= D; ++q) st[q] = 0;
        st[D + 1] = P;
        /* what the first walk left here depends on when it saw the early-out
           (p.last): overwritten, so that every output is the same call to call */
        p.seg_last[s * CC + cell] = 0;
    }
    for (int64_t q = 0; q <= D; ++q) {
        Real behind = 0;
        for (int s = used - 1; s >= 0; --s) {
            Real* v = state + E * (s * CC + cell) + q;
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
    const int64_t tile = Cells::tile(p, cell);
    int64_t seg_len;
    const int n = nurec_splat_segment_count(p.segments, p.segment_min, p.tile_ranges[2 * tile + 1] - p.tile_ranges[2 * tile],
                                            &seg_len);
    if (n <= 1) return; /* the forward kernel wrote this cell */
    Real* state = (Real*)p.seg_state;
    if (phase == 1) { /* after the second walk: only cells phase 0 left open (last < 0) */
        const int32_t open = p.last[cell];
        if (open >= 0) return;
        int s = 1;
        while (s < n - 1 && (p.seg_last[s * CC + cell] & NUREC_SPLAT_SEG_FIXUP) == 0) ++s;
        const int32_t sl = p.seg_last[s * CC + cell] & NUREC_SPLAT_SEG_LAST;
        const Real P = state[E * (s * CC + cell) + D + 1];
        nurec_splat_combine_finish<Real, Cells>(p, cell, n, s + 1, P, sl > 0 ? sl : -open - 1);
        return;
    }
    Real P = 1;
    int32_t last = 0;
    for (int s = 0; s < n; ++s) {
        Real* st = state + E * (s * CC + cell);
        int32_t* sl = p.seg_last + s * CC + cell;
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
            nurec_splat_combine_finish<Real, Cells>(p, cell, n, s + 1, P, last);
            return;
        }
    }
    nurec_splat_combine_finish<Real, Cells>(p, cell, n, n, P, last);
}

#endif /* NUREC_SPLAT_COMBINE_CUDA_CUH */
