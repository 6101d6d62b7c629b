/* Footprint of an item on the tile grid, shared by the projections (which
 * count tiles) and the binning (which emits one key per tile), CPU and CUDA.
 *
 * The footprint is the ellipse d^T Q d <= thr (Q the conic, d = cell centre
 * minus (u, v)); for a Gaussian rasterizer thr is where alpha falls below
 * 1/255, so the tiles covered are exactly those a Gaussian can reach (the
 * image does not depend on tiling). Tiles are not the ellipse's bounding box:
 * each tile row takes only the columns the ellipse crosses within that row's
 * band of cell centres, which for elongated or rotated footprints saves most
 * of the box. Computed in double precision whatever the data's precision. */
#ifndef NUREC_TILES_MATH_H
#define NUREC_TILES_MATH_H

#include "math/defs.h"
#include "tiles/tiles.h"

typedef struct nurec_footprint {
    double u, v, A, B, C, thr, delta, dy_right;
    double k, q, inv_a; /* B / A, delta / A and 1 / A, which every row's slice reads */
    int py0, py1; /* cell rows reached, clipped to the grid */
} nurec_footprint;

NUREC_HD double nurec_clampd(double x, double lo, double hi) {
    return fmin(fmax(x, lo), hi); /* NaN -> lo */
}

/* Fills f; returns 0 when no cell of a width x height grid can be reached
 * (NaN-safe: any NaN or non-positive-definite conic is "none"). */
NUREC_HD int nurec_footprint_init(nurec_footprint* f, double u, double v, double A, double B,
                                  double C, double thr, int width, int height) {
    if (!(thr >= 0.0) || !(A > 0.0) || !(C > 0.0)) return 0;
    double delta = A * C - B * B;
    if (!(delta > 0.0)) return 0;
    double ext_y = sqrt(thr * A / delta), ext_x = sqrt(thr * C / delta);
    double lo_y = ceil(v - ext_y - 0.5), hi_y = floor(v + ext_y - 0.5);
    double lo_x = ceil(u - ext_x - 0.5), hi_x = floor(u + ext_x - 0.5);
    if (!(lo_y <= hi_y && lo_x <= hi_x && hi_y >= 0.0 && hi_x >= 0.0 &&
          lo_y <= (double)(height - 1) && lo_x <= (double)(width - 1)))
        return 0;
    f->u = u; f->v = v; f->A = A; f->B = B; f->C = C; f->thr = thr; f->delta = delta;
    f->dy_right = -B * sqrt(thr / (delta * C)); /* dy of the ellipse's rightmost point */
    f->k = B / A;
    f->q = delta / A;
    f->inv_a = 1.0 / A;
    f->py0 = (int)fmax(lo_y, 0.0);
    f->py1 = (int)fmin(hi_y, (double)(height - 1));
    return 1;
}

/* The footprint's edge at row offset dy from its centre: its right edge
 * for side = +1, its left for -1 (where the row misses the ellipse, its
 * centre line u - k dy). Times 1 / A, not over A: a double division is a
 * ~40-instruction routine on the GPU, and a row's two of them were most of
 * its slice. */
NUREC_HD double nurec_footprint_x_at(const nurec_footprint* f, double dy, double side) {
    return f->u - f->k * dy + side * sqrt(fmax(f->thr - dy * dy * f->q, 0.0) * f->inv_a);
}

/* Tile columns [*tx0, *tx1] touched in tile row ty; returns 0 if none. */
NUREC_HD int nurec_footprint_row(const nurec_footprint* f, int ty, int width, int* tx0,
                                 int* tx1) {
    int r0 = ty * NUREC_TILE, r1 = r0 + NUREC_TILE - 1;
    if (r0 < f->py0) r0 = f->py0;
    if (r1 > f->py1) r1 = f->py1;
    if (r0 > r1) return 0;
    double a = (double)r0 + 0.5 - f->v, b = (double)r1 + 0.5 - f->v;
    /* the band's widest rows: where each edge is furthest out */
    double dr = nurec_clampd(f->dy_right, a, b), dl = nurec_clampd(-f->dy_right, a, b);
    double lo = ceil(nurec_footprint_x_at(f, dl, -1.0) - 0.5), hi = floor(nurec_footprint_x_at(f, dr, 1.0) - 0.5);
    if (!(lo <= hi && hi >= 0.0 && lo <= (double)(width - 1))) return 0;
    *tx0 = (int)fmax(lo, 0.0) / NUREC_TILE;
    *tx1 = (int)fmin(hi, (double)(width - 1)) / NUREC_TILE;
    return 1;
}

/* Number of tiles the footprint touches. */
NUREC_HD int64_t nurec_footprint_count(const nurec_footprint* f, int width) {
    int64_t n = 0;
    for (int ty = f->py0 / NUREC_TILE; ty <= f->py1 / NUREC_TILE; ++ty) {
        int a, b;
        if (nurec_footprint_row(f, ty, width, &a, &b)) n += b - a + 1;
    }
    return n;
}

/* Whether a cell centre of the grid lies in the footprint, row by row of
 * cells up to the first that has one (the visibility op's test). Tighter
 * than a tile count > 0: a tile row takes the columns the ellipse crosses
 * anywhere in its band of centre rows, so a footprint that passes between
 * two rows of centres can still be listed (and then draws nothing). */
NUREC_HD int nurec_footprint_any_cell(const nurec_footprint* f, int width) {
    for (int py = f->py0; py <= f->py1; ++py) {
        const double dy = (double)py + 0.5 - f->v;
        if (!(f->thr - dy * dy * f->q >= 0.0)) continue; /* the row misses the ellipse */
        const double lo = fmax(ceil(nurec_footprint_x_at(f, dy, -1.0) - 0.5), 0.0);
        const double hi = fmin(floor(nurec_footprint_x_at(f, dy, 1.0) - 0.5), (double)(width - 1));
        if (lo <= hi) return 1;
    }
    return 0;
}

/* The n low bits of a word (n in [0, 64]). */
NUREC_HD uint64_t nurec_low_bits(int n) {
    return n >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1;
}

/* The footprint's tiles as a tile rectangle less its cut cells (tiles.h
 * boxes mode: the same tiles, named by a cell index instead of a walk over
 * the rows) where the rectangle has at most 64 cells, the cut's reach;
 * otherwise an empty rectangle (cells 0), and the binning walks the
 * footprint. Written as a fold over the footprint's rows in ascending
 * order (nurec_box_fold_row for each row that has a run) and a finish, so
 * that the rows themselves can be computed elsewhere: the CUDA projection
 * spreads a warp's rows over its lanes (tiles/footprint_warp_cuda.cuh) and
 * folds them in the same order, for the same bits. */
typedef struct nurec_box_fold {
    int64_t n; /* tiles so far */
    int ty0, ty1, x0, x1, af;
    /* the first 8 rows' runs, byte r of pa / pb: a - af + 64, b - af + 64
     * (af: the first run's a; in 1..127 wherever the rectangle has at most
     * 64 cells, 0: no run), so that the cut needs no second walk there */
    uint64_t pa, pb;
} nurec_box_fold;

NUREC_HD void nurec_box_fold_init(nurec_box_fold* s) {
    s->n = 0;
    s->ty0 = s->ty1 = -1;
    s->x0 = s->af = 0;
    s->x1 = -1;
    s->pa = s->pb = 0;
}

/* Row ty's run [a, b] (rows in ascending order; rows without a run skipped). */
NUREC_HD void nurec_box_fold_row(nurec_box_fold* s, int ty, int a, int b) {
    s->n += b - a + 1;
    if (s->ty0 < 0) {
        s->ty0 = ty;
        s->af = s->x0 = a;
        s->x1 = b;
    }
    s->ty1 = ty;
    s->x0 = a < s->x0 ? a : s->x0;
    s->x1 = b > s->x1 ? b : s->x1;
    const int r = ty - s->ty0;
    if (r < 8 && a - s->af > -64 && b - s->af < 64) {
        s->pa |= (uint64_t)(uint8_t)(a - s->af + 64) << (8 * r);
        s->pb |= (uint64_t)(uint8_t)(b - s->af + 64) << (8 * r);
    }
}

/* An empty rectangle (no cells, no cut): what an item that reaches no
 * tile, or one past 64 cells, writes. */
NUREC_HD void nurec_box_empty(int32_t box[NUREC_BOX_SIZE]) {
    box[0] = box[1] = box[2] = -1;
    box[3] = box[4] = box[5] = 0;
}

/* Writes box (the rectangle and its cut, or an empty one past 64 cells);
 * returns the tile count. Rows past the first 8 of a rectangle of at most
 * 64 cells (at most 7 columns) are walked again here. */
NUREC_HD int64_t nurec_box_fold_finish(const nurec_box_fold* s, const nurec_footprint* f, int width,
                                       int32_t box[NUREC_BOX_SIZE]) {
    nurec_box_empty(box);
    const int ntx = s->x1 - s->x0 + 1;
    if (s->n == 0 || (int64_t)(s->ty1 - s->ty0 + 1) * ntx > 64) return s->n;
    /* the rectangle's cells outside each row's run, a row's bits at once
       (a loop over its cells took most of a garden item's walk: ~27 cells) */
    const uint64_t row_cells = nurec_low_bits(ntx);
    uint64_t cut = 0;
    for (int ty = s->ty0; ty <= s->ty1; ++ty) {
        const int r = ty - s->ty0;
        uint64_t out = row_cells; /* no run: the whole row */
        int a, b, has = 0;
        if (r < 8) {
            const int ea = (int)((s->pa >> (8 * r)) & 0xff), eb = (int)((s->pb >> (8 * r)) & 0xff);
            has = ea != 0;
            a = ea - 64 + s->af;
            b = eb - 64 + s->af;
        } else {
            has = nurec_footprint_row(f, ty, width, &a, &b);
        }
        /* a run lies inside the rectangle's columns: x0 <= a <= b <= x1 */
        if (has) out &= ~(nurec_low_bits(b - s->x0 + 1) & ~nurec_low_bits(a - s->x0));
        cut |= out << (r * ntx); /* r * ntx <= 64 - ntx */
    }
    box[0] = s->ty0;
    box[1] = s->ty1;
    box[2] = s->x0;
    box[3] = ntx;
    box[4] = (int32_t)(uint32_t)cut;
    box[5] = (int32_t)(uint32_t)(cut >> 32);
    return s->n;
}

/* The fold over a thread's own walk of the rows. Returns the tile count
 * (nurec_footprint_count's). */
NUREC_HD int64_t nurec_footprint_box(const nurec_footprint* f, int width, int32_t box[NUREC_BOX_SIZE]) {
    nurec_box_fold s;
    nurec_box_fold_init(&s);
    for (int ty = f->py0 / NUREC_TILE; ty <= f->py1 / NUREC_TILE; ++ty) {
        int a, b;
        if (nurec_footprint_row(f, ty, width, &a, &b)) nurec_box_fold_row(&s, ty, a, b);
    }
    return nurec_box_fold_finish(&s, f, width, box);
}

/* Footprint of a record (layout NUREC_TREC_* in tiles.h) of either precision. */
NUREC_HD int nurec_footprint_of_f32(nurec_footprint* f, const float* r, int width, int height) {
    return nurec_footprint_init(f, r[NUREC_TREC_U], r[NUREC_TREC_V], r[NUREC_TREC_A],
                                r[NUREC_TREC_B], r[NUREC_TREC_C], r[NUREC_TREC_THR], width,
                                height);
}
NUREC_HD int nurec_footprint_of_f64(nurec_footprint* f, const double* r, int width, int height) {
    return nurec_footprint_init(f, r[NUREC_TREC_U], r[NUREC_TREC_V], r[NUREC_TREC_A],
                                r[NUREC_TREC_B], r[NUREC_TREC_C], r[NUREC_TREC_THR], width,
                                height);
}

/* Tile rectangles (boxes mode, tiles.h). nurec_box_cells: the tiles of
 * the rectangle (0 for an empty or invalid one); nurec_box_tile: its q-th
 * tile (row-major over the rectangle, columns wrapping modulo tiles_x),
 * q < nurec_box_cells; nurec_box_count: the tiles kept (the cut, b[4..5],
 * marks tiles among the first 64 that no ray reaches); nurec_box_kept: the
 * cell q of the s-th tile kept, s < nurec_box_count (the s-th clear bit of
 * the cut, or past the first 64 cells, all kept). Keys are written in the
 * order of s: the CPU binning and the CUDA emission share these. */
NUREC_HD int64_t nurec_box_cells(const int32_t* b, int tiles_x, int tiles_y) {
    if (b[0] < 0 || b[1] < b[0] || b[1] >= tiles_y || b[2] < 0 || b[2] >= tiles_x || b[3] <= 0 ||
        b[3] > tiles_x)
        return 0;
    return (int64_t)(b[1] - b[0] + 1) * b[3];
}

NUREC_HD uint64_t nurec_box_cut(const int32_t* b) {
    return (uint64_t)(uint32_t)b[4] | ((uint64_t)(uint32_t)b[5] << 32);
}

NUREC_HD int nurec_popcount64(uint64_t x) {
#ifdef __CUDA_ARCH__
    return __popcll(x);
#else
    return __builtin_popcountll(x);
#endif
}

NUREC_HD int nurec_popcount32(uint32_t x) {
#ifdef __CUDA_ARCH__
    return __popc(x);
#else
    return __builtin_popcount(x);
#endif
}

NUREC_HD int64_t nurec_box_count(const int32_t* b, int tiles_x, int tiles_y) {
    const int64_t n = nurec_box_cells(b, tiles_x, tiles_y);
    uint64_t cut = nurec_box_cut(b);
    if (n < 64) cut &= ((uint64_t)1 << n) - 1;
    return n - nurec_popcount64(cut);
}

NUREC_HD int64_t nurec_box_kept(const int32_t* b, int64_t s) {
    const uint64_t cut = nurec_box_cut(b);
    const int z = 64 - nurec_popcount64(cut); /* kept among the first 64 cells */
    if (s >= z) return 64 + (s - z);
    /* the n-th (0-based) set bit of the clear bits, by halves: no loop over cells */
    const uint32_t lo = ~(uint32_t)cut;
    const int z0 = nurec_popcount32(lo);
    uint32_t m = s < z0 ? lo : ~(uint32_t)(cut >> 32);
    int n = (int)(s < z0 ? s : s - z0), pos = s < z0 ? 0 : 32;
    for (int w = 16; w >= 1; w >>= 1) {
        const uint32_t low = m & ((1u << w) - 1u);
        const int c = nurec_popcount32(low);
        if (n >= c) {
            n -= c;
            m >>= w;
            pos += w;
        } else {
            m = low;
        }
    }
    return pos;
}

NUREC_HD int64_t nurec_box_tile(const int32_t* b, int64_t q, int tiles_x) {
    /* 32-bit division: q < cells <= tiles of an image < 2^31 (the glue's
       bound), and a GPU divides 64-bit integers in a long software routine,
       once per emitted key */
    const int32_t qi = (int32_t)q;
    int64_t ty = b[0] + qi / b[3];
    int64_t tx = b[2] + qi % b[3];
    if (tx >= tiles_x) tx -= tiles_x;
    return ty * tiles_x + tx;
}

#endif /* NUREC_TILES_MATH_H */
