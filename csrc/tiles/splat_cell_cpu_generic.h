/* Compositing of one cell (a camera pixel, a lidar ray) over its tile's
 * list, forward and backward: the C CPU path of both rasterizers. Generic
 * over real_t (see math/generic.h) and over the cell's alpha: the includer
 * defines SPLAT_CELL_ALPHA(rec, cu, cv, vis, dx, dy) (the camera's
 * rc_alpha at a pixel centre, the lidar's rl_alpha with its wrapped
 * azimuth) before including this file inside its own generic file, so the
 * alpha is inlined, not called through a pointer. */
#ifndef SPLAT_CELL_ALPHA
#error "define SPLAT_CELL_ALPHA before including tiles/splat_cell_cpu_generic.h"
#endif

/* Rows of per-item values (features, or their gradients): item it's row is
 * base + stride * it, or base + stride * (it % mod) when mod > 0 (values
 * per Gaussian for items that are (image, Gaussian) pairs). */
typedef struct NR(splat_rows) {
    real_t* base;
    int64_t stride, mod;
} NR(splat_rows);

static real_t* NR(splat_row)(const NR(splat_rows)* r, int64_t it) {
    return r->base + r->stride * (r->mod > 0 ? it % r->mod : it);
}

/* Front to back over the list entries [start, end) as SPEC section 3 says:
 * skipped below alpha 1/255, stop before T falls under NUREC_SPLAT_T_MIN.
 * Writes the D accumulated features (weights not normalized) to acc, the
 * accumulated depth (range) to *depth and the number of entries walked to
 * the last contributing one to *last; returns the final transmittance. */
static real_t NR(splat_cell_forward)(const int32_t* items, int64_t start, int64_t end, const real_t* records,
                                     const NR(splat_rows)* feats, int64_t D, real_t cu, real_t cv, real_t* acc,
                                     real_t* depth, int32_t* last) {
    real_t T = 1, dep = 0;
    *last = 0;
    for (int64_t k = 0; k < D; ++k) acc[k] = 0;
    for (int64_t j = start; j < end; ++j) {
        int64_t it = items[j];
        const real_t* rec = records + NUREC_TREC_SIZE * it;
        real_t vis, dx, dy;
        real_t a = SPLAT_CELL_ALPHA(rec, cu, cv, &vis, &dx, &dy);
        if (a == 0) continue;
        real_t Tn = T * (1 - a);
        if (Tn < (real_t)NUREC_SPLAT_T_MIN) break;
        real_t w = a * T;
        const real_t* f = NR(splat_row)(feats, it);
        for (int64_t k = 0; k < D; ++k) acc[k] += w * f[k];
        dep += w * rec[NUREC_TREC_DEPTH];
        *last = (int32_t)(j - start + 1);
        T = Tn;
    }
    *depth = dep;
    return T;
}

/* The median item of a cell over the list entries [start, end): the item
 * of the first entry after which T is at most one half, composited as
 * splat_cell_forward does, or NUREC_SPLAT_MEDIAN_NONE. Entries and items
 * outside the list (M entries) and the items (P) are skipped, so a bad
 * saved list reads nothing out of bounds. */
static int32_t NR(splat_cell_median)(const int32_t* items, int64_t start, int64_t end, int64_t M, int64_t P,
                                     const real_t* records, real_t cu, real_t cv) {
    real_t T = 1;
    if (start < 0) start = 0;
    if (end > M) end = M;
    for (int64_t j = start; j < end; ++j) {
        int64_t it = items[j];
        if (it < 0 || it >= P) continue;
        real_t vis, dx, dy;
        real_t a = SPLAT_CELL_ALPHA(records + NUREC_TREC_SIZE * it, cu, cv, &vis, &dx, &dy);
        if (a == 0) continue;
        int step = NR(splat_median_step)(a, &T);
        if (step > 0) return (int32_t)it;
        if (step < 0) break;
    }
    return NUREC_SPLAT_MEDIAN_NONE;
}

/* Back to front over the entries [start, start + last) of the forward:
 * adds each Gaussian's gradient to its record row (grad_records, 7 values),
 * its feature row and, with absgrad, the absolute values of this cell's
 * (u, v) gradient to the row's slots NUREC_SPLAT_GREC_ABS, + 1 (SPEC 8's
 * absgrad; rows of NUREC_SPLAT_GREC_ROW(absgrad)). T is the forward's final transmittance, bg (D)
 * the background behind the list (NULL: none), gf (D), gz and g_alpha the
 * cell's output gradients. */
static void NR(splat_cell_backward)(const int32_t* items, int64_t start, int32_t last, const real_t* records,
                                    const NR(splat_rows)* feats, int64_t D, real_t cu, real_t cv, real_t T,
                                    const real_t* bg, const real_t* gf, real_t gz, real_t g_alpha, real_t* grec,
                                    const NR(splat_rows)* gfeats, int absgrad) {
    /* splat_composite_vjp_start with S = T bg and Sz = 0, T taken out */
    real_t P = bg ? T * NR(splat_composite_vjp_start)(g_alpha, 0, 0, gf, bg, (int)D) : g_alpha * T;
    for (int64_t j = start + last - 1; j >= start; --j) {
        int64_t it = items[j];
        const real_t* rec = records + NUREC_TREC_SIZE * it;
        real_t vis, dx, dy, w;
        real_t a = SPLAT_CELL_ALPHA(rec, cu, cv, &vis, &dx, &dy);
        if (a == 0) continue;
        const real_t* f = NR(splat_row)(feats, it);
        real_t ga = NR(splat_composite_vjp)(a, f, (int)D, rec[NUREC_TREC_DEPTH], gf, gz, &T, &P, &w);
        real_t* gc = NR(splat_row)(gfeats, it);
        for (int64_t k = 0; k < D; ++k) gc[k] += w * gf[k];
        real_t* g = grec + NUREC_SPLAT_GREC_ROW(absgrad) * it;
        real_t here[6] = {0, 0, 0, 0, 0, 0};
        NR(splat_alpha_vjp)(rec, vis, dx, dy, ga, here);
        for (int k = 0; k < 6; ++k) g[k] += here[k];
        g[6] += w * gz;
        if (absgrad) {
            g[NUREC_SPLAT_GREC_ABS] += R_FABS(here[0]);
            g[NUREC_SPLAT_GREC_ABS + 1] += R_FABS(here[1]);
        }
    }
}
