/* Generic over real_t (see math/generic.h). */

/* A half-extent in cells, rounded up: the binning's bounding box of the
 * ellipse d^T Q d <= thr is |dx| <= sqrt(thr C / det), |dy| <= sqrt(thr A /
 * det) for the conic Q = [[A, B], [B, C]]. Saturates at INT32_MAX (and for
 * NaN) instead of an undefined conversion. */
NUREC_HD int32_t NR(splat_meta_extent)(real_t num, real_t det, real_t cell) {
    real_t q = num / det;
    real_t e = R_SQRT(q > 0 ? q : (real_t)0) / cell;
    e = R_CEIL(e);
    return e < (real_t)2147483647.0 ? (int32_t)e : (int32_t)2147483647;
}

/* A kept item's radii from its record rec (u, v, A, B, C, o, depth,
 * threshold), cells cu x cv: the half-extents of its footprint's box. */
NUREC_HD void NR(splat_meta_radii)(const real_t* rec, real_t cu, real_t cv, int32_t radii[2]) {
    const real_t A = rec[NUREC_TREC_A], B = rec[NUREC_TREC_B], C = rec[NUREC_TREC_C], thr = rec[NUREC_TREC_THR];
    const real_t det = A * C - B * B;
    radii[0] = NR(splat_meta_extent)(thr * C, det, cu);
    radii[1] = NR(splat_meta_extent)(thr * A, det, cv);
}

/* One item: record rec, its tile count (radii 0 for a dropped item). */
NUREC_HD void NR(splat_meta_item)(const real_t* rec, int64_t count, real_t cu, real_t cv, real_t* m2d,
                                  int32_t* radii, real_t* depth) {
    m2d[0] = rec[NUREC_TREC_U];
    m2d[1] = rec[NUREC_TREC_V];
    *depth = rec[NUREC_TREC_DEPTH];
    if (count <= 0) {
        radii[0] = radii[1] = 0;
        return;
    }
    NR(splat_meta_radii)(rec, cu, cv, radii);
}
