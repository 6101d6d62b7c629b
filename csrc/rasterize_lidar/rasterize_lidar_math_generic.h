/* Generic over real_t (see math/generic.h). */

#if R_IS_F64
#define RL_CEIL ceil
#else
#define RL_CEIL ceilf
#endif

/* x wrapped to (-pi, pi]: the azimuth difference of SPEC section 4. The
 * reference computes the same expression. */
NUREC_HD real_t NR(rl_wrap)(real_t x) {
    return x - (real_t)NUREC_RL_TWO_PI * RL_CEIL((x - (real_t)NUREC_RL_PI) * (real_t)NUREC_RL_INV_TWO_PI);
}

#include "sensors/lidar_spinning_generic.h"
#include "sensors/rolling_shutter_generic.h"

/* Alpha of record r at ray (az, el): d = (wrap(az - u), el - v). */
NUREC_HD real_t NR(rl_alpha)(const real_t* r, real_t az, real_t el, real_t* vis, real_t* dx,
                             real_t* dy) {
    *dx = NR(rl_wrap)(az - r[0]);
    *dy = el - r[1];
    return NR(splat_alpha)(r, *dx, *dy, vis);
}

/* One lidar pose: world -> lidar rotation R (row-major) and t. */
typedef struct NR(rl_sensor) {
    real_t R[9], t[3];
} NR(rl_sensor);

NUREC_HD void NR(rl_sensor_load)(const real_t* V, NR(rl_sensor)* c) {
    for (int r = 0; r < 3; ++r) {
        for (int k = 0; k < 3; ++k) c->R[3 * r + k] = V[4 * r + k];
        c->t[r] = V[4 * r + 3];
    }
}

/* SPEC 7: the azimuth of mean m seen from S; 0 where the mean is outside the
 * lidar's field (range, elevation). */
NUREC_HD int NR(rl_mean_azimuth)(const NR(rl_sensor)* S, const real_t m[3], real_t near_plane, real_t far_plane,
                                 real_t* az) {
    real_t p[3], el, r, rho2;
    for (int k = 0; k < 3; ++k) p[k] = S->R[3 * k] * m[0] + S->R[3 * k + 1] * m[1] + S->R[3 * k + 2] * m[2] + S->t[k];
    NR(spin_measure)(p, az, &el, &r, &rho2);
    return r > near_plane && r < far_plane && rho2 > 0 && R_FABS(el) <= (real_t)NUREC_RL_MAX_ELEVATION;
}

/* Canonical column j's azimuth, in double: the table keeps each column's
 * azimuth wrapped to [-pi, pi) (the user's precision; the walks' rays use
 * it as it is), and the columns below column 0's lie 2 pi further round
 * (nurec_ops/_lidar_table.py): ascending over the table. */
NUREC_HD double NR(rl_canon_az)(const real_t* col_az, int j) {
    const real_t a = col_az[j];
    return (double)a + (a < col_az[0] ? NUREC_RL_TWO_PI : 0.0);
}

/* The canonical column nearest to azimuth a (round the circle): the
 * smallest |wrap(a - column_azimuths[j])|, the lower column on a tie. */
NUREC_HD int NR(rl_nearest_column)(const real_t* col_az, int W, real_t a) {
    int lo = 0, hi = W - 1;
    const double a0 = (double)col_az[0];
    double x = (double)a - a0;
    x = x - NUREC_RL_TWO_PI * floor(x / NUREC_RL_TWO_PI) + a0; /* in [a0, a0 + 2 pi) */
    /* the last column at or below x (column 0 is, unless x is NaN): from the
     * guess of an evenly spaced table (real tables are nearly even: one or
     * two reads, where a binary search's 12 dependent ones were most of the
     * rolling fixed point's cost), walked up or down at most 4 columns, then
     * a binary search in what is left, so any ascending table is exact */
#define RL_AZ(j) NR(rl_canon_az)(col_az, (j))
    const double span = RL_AZ(W - 1) - a0;
    double f = span > 0 ? (x - a0) / span * (double)(W - 1) : 0.0;
    f = f >= 0 ? (f < (double)(W - 1) ? f : (double)(W - 1)) : 0.0; /* NaN: 0 */
    int j = (int)f;
    if (RL_AZ(j) <= x) {
        int k = 0;
        while (k < 4 && j + 1 < W && RL_AZ(j + 1) <= x) { ++j; ++k; }
        lo = j; hi = k == 4 ? W - 1 : j;
    } else {
        int k = 0;
        while (k < 4 && j > 0 && RL_AZ(j) > x) { --j; ++k; }
        lo = RL_AZ(j) <= x ? j : 0; hi = RL_AZ(j) <= x ? j : j - 1;
    }
    while (lo < hi) { /* RL_AZ(lo) <= x (or lo = 0) */
        const int mid = (lo + hi + 1) / 2;
        if (RL_AZ(mid) <= x) lo = mid; else hi = mid - 1;
    }
    const int next = lo + 1 < W ? lo + 1 : 0;
    const real_t d0 = R_FABS(NR(rl_wrap)(a - col_az[lo])), d1 = R_FABS(NR(rl_wrap)(a - col_az[next]));
    return d1 < d0 || (d1 == d0 && next < lo) ? next : lo;
#undef RL_AZ
}

/* A Gaussian's own time tau* (SPEC 7) for a spinning lidar: from the start
 * pose, NUREC_RS_STEPS times: tau <- the firing time of the column nearest
 * to the mean's azimuth, the pose at tau, the azimuth again (a step where
 * the mean is outside the field keeps tau). Leaves S at the pose of tau*. */
NUREC_HD real_t NR(rl_rolling_tau)(NR(rl_sensor)* S, const real_t* sp, const real_t* col_az,
                                   const real_t* col_times, int W, const real_t m[3], real_t near_plane,
                                   real_t far_plane) {
    real_t tau = 0, az = 0;
    NR(rs_pose_at)(sp, 0, S->R, S->t);
    int ok = NR(rl_mean_azimuth)(S, m, near_plane, far_plane, &az);
    for (int k = 0; k < NUREC_RS_STEPS; ++k) {
        const real_t next = ok ? col_times[NR(rl_nearest_column)(col_az, W, az)] : tau;
        if (next == tau) break; /* a fixed point: later steps repeat it (as the camera's) */
        tau = next;
        NR(rs_pose_at)(sp, tau, S->R, S->t);
        if (k + 1 < NUREC_RS_STEPS) ok = NR(rl_mean_azimuth)(S, m, near_plane, far_plane, &az);
    }
    return tau;
}

/* SPEC 7: sweep c's lidar at the own time of item it (mean m), solved and
 * written to taus[it] (the forward) or read from there (the backward). */
NUREC_HD void NR(rl_sensor_at_time)(const nurec_rasterize_lidar_params* p, int64_t c, int64_t it, const real_t m[3],
                                    int solve, NR(rl_sensor)* S) {
    if (!p->viewmats_end) return;
    real_t sp[NUREC_RS_PARAMS];
    NR(rs_pack)((const real_t*)p->viewmats + 16 * c, (const real_t*)p->viewmats_end + 16 * c, sp);
    real_t* taus = (real_t*)p->taus;
    if (solve)
        taus[it] = NR(rl_rolling_tau)(S, sp, (const real_t*)p->column_azimuths, (const real_t*)p->column_times,
                                      p->cols, m, (real_t)p->near_plane, (real_t)p->far_plane);
    else
        NR(rs_pose_at)(sp, taus[it], S->R, S->t);
}

/* Forward intermediates of the projection of one Gaussian (for the VJP). */
typedef struct NR(rl_proj) {
    real_t qn[4], inv_qnorm, Rq[9]; /* unit quaternion, 1/|q|, its rotation */
    real_t RM[9];                   /* R_lidar * Rq * diag(s) */
    real_t p[3];                    /* lidar-space mean */
    real_t T[6];                    /* J * RM: Sigma_2d = T T^T + eps2d I */
    real_t a, b, c, det;            /* Sigma_2d entries */
} NR(rl_proj);

/* Spherical projection of one Gaussian into a tile record (tiles.h layout:
 * u = azimuth atan2(y, x), v = elevation atan2(z, rho), depth = range |p|),
 * covariance through the Jacobian of (azimuth, elevation) at the mean plus
 * eps2d. Returns 0 (thr = -1) when the range is not in (near, far), the mean
 * is within 5 degrees of a pole, the 2D covariance is not positive definite
 * or the opacity cannot reach 1/255. */
NUREC_HD int NR(rl_project)(const NR(rl_sensor)* S, const real_t m[3], const real_t q[4],
                            const real_t s[3], real_t o, real_t near_plane, real_t far_plane,
                            real_t eps2d, NR(rl_proj)* P, real_t rec[NUREC_TREC_SIZE]) {
    const real_t* R = S->R;
    for (int k = 0; k < NUREC_TREC_SIZE; ++k) rec[k] = 0;
    rec[NUREC_TREC_THR] = -1;
    rec[NUREC_TREC_O] = o;
    for (int r = 0; r < 3; ++r)
        P->p[r] = R[3 * r] * m[0] + R[3 * r + 1] * m[1] + R[3 * r + 2] * m[2] + S->t[r];
    real_t az, el, r, rho2;
    NR(spin_measure)(P->p, &az, &el, &r, &rho2);
    rec[NUREC_TREC_DEPTH] = r;
    if (!(r > near_plane && r < far_plane)) return 0;
    rec[NUREC_TREC_U] = az;
    rec[NUREC_TREC_V] = el;
    if (!(R_FABS(el) <= (real_t)NUREC_RL_MAX_ELEVATION) || !(rho2 > 0)) return 0;
    NR(splat_rm)(R, q, s, P->qn, &P->inv_qnorm, P->Rq, P->RM);
    real_t J0[3], J1[3];
    NR(spin_jacobian)(P->p, rho2, r, J0, J1);
    for (int k = 0; k < 3; ++k) {
        P->T[k] = J0[0] * P->RM[k] + J0[1] * P->RM[3 + k];
        P->T[3 + k] = J1[0] * P->RM[k] + J1[1] * P->RM[3 + k] + J1[2] * P->RM[6 + k];
    }
    NR(splat_cov2d)(P->T, eps2d, &P->a, &P->b, &P->c, &P->det);
    if (!(P->det > 0)) return 0;
    return NR(splat_record_conic)(P->a, P->b, P->c, P->det, o, (real_t)NUREC_SPLAT_THR_MARGIN, rec);
}

/* Gradient of the projection: g = (gu, gv, gA, gB, gC, go, gr) of the record
 * -> gradients of the mean (added to gm), quaternion and scales (written). */
NUREC_HD void NR(rl_project_vjp)(const NR(rl_sensor)* S, const real_t s[3], const NR(rl_proj)* P,
                                 const real_t* g, real_t gm[3], real_t gq[4], real_t gs[3]) {
    const real_t* R = S->R;
    const real_t x = P->p[0], y = P->p[1], z = P->p[2], rho2 = x * x + y * y;
    real_t J0[3], J1[3];
    NR(spin_jacobian)(P->p, rho2, R_SQRT(rho2 + z * z), J0, J1);
    real_t dT[6];
    NR(splat_conic_vjp)(P->a, P->b, P->c, P->det, P->T, g + 2, dT);
    /* T = J RM: dJ = dT RM^T, dRM = J^T dT */
    real_t dJ0[3], dJ1[3], dRM[9];
    for (int b = 0; b < 3; ++b) {
        dJ0[b] = dT[0] * P->RM[3 * b] + dT[1] * P->RM[3 * b + 1] + dT[2] * P->RM[3 * b + 2];
        dJ1[b] = dT[3] * P->RM[3 * b] + dT[4] * P->RM[3 * b + 1] + dT[5] * P->RM[3 * b + 2];
        for (int k = 0; k < 3; ++k) dRM[3 * b + k] = J0[b] * dT[k] + J1[b] * dT[3 + k];
    }
    real_t gp[3];
    NR(spin_vjp)(P->p, g[0], g[1], g[6], dJ0, dJ1, gp);
    for (int k = 0; k < 3; ++k) gm[k] += R[k] * gp[0] + R[3 + k] * gp[1] + R[6 + k] * gp[2];
    NR(splat_rm_vjp)(R, P->qn, P->inv_qnorm, P->Rq, s, dRM, gq, gs);
}

/* First column j in [0, W] with az[j] - az[0] >= v (> v when strict),
 * over the canonical (ascending, rl_canon_az) azimuths, whose last offset
 * is sv_last. Starts from the guess of an evenly spaced table and steps up
 * to 4 columns from it (real tables are nearly even: two or three reads);
 * a binary search finishes what that leaves. The comparison holds from
 * some column on, so any order of probes finds the same column: the
 * binary search's 12 dependent reads a bound (3,600 columns) were a large
 * part of the lidar projection's cells. Any input stays in bounds. */
NUREC_HD int NR(rl_col_search)(const real_t* az, int W, double sv_last, double v, int strict) {
    const double a0 = (double)az[0];
#define RL_HOLDS(j) (strict ? NR(rl_canon_az)(az, (j)) - a0 > v : NR(rl_canon_az)(az, (j)) - a0 >= v)
    double f = sv_last > 0 ? v / sv_last * (double)(W - 1) : 0.0;
    f = f >= 0 ? (f < (double)(W - 1) ? f : (double)(W - 1)) : 0.0; /* NaN: 0 */
    const int j = (int)f;
    int lo = 0, hi = W; /* the column is in [lo, hi]: the comparison fails before lo, holds at hi < W */
    if (RL_HOLDS(j)) {
        hi = j;
        for (int k = 0; k < 4 && hi > 0; ++k) {
            if (!RL_HOLDS(hi - 1)) {
                lo = hi;
                break;
            }
            --hi;
        }
    } else {
        lo = j + 1;
        for (int k = 0; k < 4 && lo < W; ++k) {
            if (RL_HOLDS(lo)) {
                hi = lo;
                break;
            }
            ++lo;
        }
    }
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (RL_HOLDS(mid)) hi = mid;
        else lo = mid + 1;
    }
#undef RL_HOLDS
    return lo;
}

/* The columns j0..j1 whose offsets sv_j = az_j - az_0 lie in [v0, v0 + L]
 * (returns 0 when there are none). The canonical table ascends from column
 * 0 (rl_canon_az): sv rises from 0 to sv_last < 2 pi, so a bound outside
 * [0, sv_last] names its column without a search. rl_box asks for k = 0
 * and k = -1 (v0 - 2 pi); k = +1 starts past every column: the same
 * columns as a search for every bound of every k, in at most three
 * searches (most Gaussians: two) of the six that ran before. */
NUREC_HD int NR(rl_col_range)(const real_t* col_az, int W, double sv_last, double v0, double L, int* j0,
                              int* j1) {
    const double v1 = v0 + L;
    if (!(v1 >= 0.0) || !(v0 <= sv_last)) return 0; /* before column 0, after the last */
    *j0 = v0 <= 0.0 ? 0 : NR(rl_col_search)(col_az, W, sv_last, v0, 0);
    *j1 = v1 >= sv_last ? W - 1 : NR(rl_col_search)(col_az, W, sv_last, v1, 1) - 1;
    return *j0 <= *j1;
}

/* Cuts out of a tile rectangle (one sensor row per tile row) the tiles
 * that the ellipse does not reach on their row: the row's elevation cuts
 * the ellipse d^T Q d <= thr (widened as the rectangle is) in the azimuth
 * interval centred at dx = -B dy / A, with half-width
 * sqrt(A thr - det dy^2) / A (dy = row elevation - v); a tile whose rays'
 * azimuths (columns plus the row's offset) all lie outside it is cut. A
 * rectangle spans its rows' whole spread of azimuth offsets (-4.5 to +11
 * degrees on the real sensor) and its ellipse's bounding box: on the street
 * scene a third of its tiles are reached by no ray (5.8 M -> 3.7 M
 * entries). The first 64 tiles of the rectangle can be cut (tiles.h).
 * rl_tile_span: a tile column's azimuth span (centre, half-width), before
 * the row's offset. */
NUREC_HD void NR(rl_tile_span)(const real_t* col_az, int W, int tx, double span[2]) {
    const int j0 = tx * NUREC_RL_TILE_COLS;
    const int j1 = j0 + NUREC_RL_TILE_COLS <= W ? j0 + NUREC_RL_TILE_COLS - 1 : W - 1;
    const double a0 = NR(rl_canon_az)(col_az, j0), a1 = NR(rl_canon_az)(col_az, j1);
    span[0] = 0.5 * (a0 + a1);
    span[1] = 0.5 * fabs(a0 - a1);
}

NUREC_HD void NR(rl_box_cut)(const real_t* rec, const real_t* row_el, const real_t* col_az,
                             const real_t* row_off, int W, int tiles_x, int tiles_y,
                             int32_t box[NUREC_BOX_SIZE]) {
    if (NUREC_RL_TILE_ROWS != 1) return; /* a tile row of several elevations: no cut */
    const double thr = rec[NUREC_TREC_THR], A = rec[NUREC_TREC_A], B = rec[NUREC_TREC_B],
                 C = rec[NUREC_TREC_C], u = rec[NUREC_TREC_U], v = rec[NUREC_TREC_V];
    const double g = 1.0 + NUREC_RL_BOUND_REL, det = A * C - B * B, inv_a = 1.0 / A;
    const double a_thr = A * thr * g * g;
    const int64_t n = nurec_box_cells(box, tiles_x, tiles_y);
    const int ntx = box[3];
    uint64_t cut = 0;
    /* per row of the rectangle: its slice (a square root); per tile: a comparison */
    for (int64_t q0 = 0; q0 < n && q0 < 64; q0 += ntx) {
        const int i = box[0] + (int)(q0 / ntx);
        const int m = q0 + ntx <= 64 ? ntx : (int)(64 - q0); /* this row's tiles that can be cut */
        const double dy = (double)row_el[i] - v;
        const double disc = a_thr - det * dy * dy;
        if (disc < 0) {
            cut |= (m == 64 ? ~(uint64_t)0 : (((uint64_t)1 << m) - 1)) << q0;
            continue;
        }
        const double hw = sqrt(disc) * inv_a + NUREC_RL_BOUND_ABS;
        const double ctr = u - B * dy * inv_a - (double)row_off[i]; /* in column azimuths */
        for (int k = 0; k < m; ++k) {
            int tx = box[2] + k;
            if (tx >= tiles_x) tx -= tiles_x;
            double span[2];
            NR(rl_tile_span)(col_az, W, tx, span);
            double d = ctr - span[0];
            d -= NUREC_RL_TWO_PI * floor((d + NUREC_RL_PI) * (1.0 / NUREC_RL_TWO_PI)); /* [-pi, pi) */
            if (fabs(d) - span[1] > hw) cut |= (uint64_t)1 << (q0 + k);
        }
    }
    box[4] = (int32_t)(uint32_t)cut;
    box[5] = (int32_t)(uint32_t)(cut >> 32);
}

/* The rows an item's elevation extent reaches, |row_el[i] - mu| <= e (in
 * double), by search instead of a scan of every row: their first and last
 * index i0, i1 (i1 < 0: none) and the min and max of their azimuth offsets
 * (omin, omax: as a fold of fmin / fmax from +-1e300 over them, NaN
 * skipped). `t` ([1 + 4 L, R], built per table by nurec_ops._lidar_table's
 * row_search): row 0 the elevations ascending (NaN as +inf), then L levels
 * each of the sparse tables of min index, max index, min offset (NaN as
 * +inf) and max offset (NaN as -inf), level l's entry k over the sorted
 * rows [k, k + 2^l). The rows reached are an interval of the sorted ones
 * (a rounded difference is monotone in the elevation), found by two binary
 * searches on the scan's own comparisons, and each of the four by two
 * lookups: the same rows and values as the scan (rl_box), in ~60
 * instructions where the scan took ~8 a row (1,088 for 128 rows, most of
 * the lidar projection's; SASS). */
NUREC_HD int NR(rl_rows_first)(const real_t* s, int R, double mu, double e, int above) {
    int first = 0, count = R; /* the first k whose comparison holds (false ... true over k) */
    while (count > 0) {
        const int step = count / 2, k = first + step;
        const double d = (double)s[k] - mu;
        if (above ? d > e : d >= -e) count = step;
        else {
            first = k + 1;
            count -= step + 1;
        }
    }
    return first;
}

NUREC_HD void NR(rl_rows_reached)(const real_t* t, int R, int L, double mu, double e, int* i0, int* i1,
                                  double* omin, double* omax) {
    *i0 = R;
    *i1 = -1;
    *omin = 1e300;
    *omax = -1e300;
    const int a = NR(rl_rows_first)(t, R, mu, e, 0), b = NR(rl_rows_first)(t, R, mu, e, 1);
    if (a >= b) return;
    const int l = nurec_floor_log2(b - a);
    if (l >= L) return; /* never for a table built for these R rows */
    const int c = b - (1 << l); /* [a, a + 2^l) and [c, b) cover [a, b) */
    const real_t* lv = t + (int64_t)R * (1 + l);
    const int64_t q = (int64_t)R * L; /* one table's levels */
    *i0 = (int)R_FMIN(lv[a], lv[c]);
    *i1 = (int)R_FMAX(lv[q + a], lv[q + c]);
    *omin = fmin(1e300, (double)R_FMIN(lv[2 * q + a], lv[2 * q + c]));
    *omax = fmax(-1e300, (double)R_FMAX(lv[3 * q + a], lv[3 * q + c]));
}

/* Tile rectangle (tiles.h boxes mode) of a record: the rays (i, j) whose
 * offset to the mean can lie in the opacity-aware ellipse d^T Q d <= thr
 * (widened by NUREC_RL_BOUND_*). Rows: a scan of the real row elevations
 * (any order) against the elevation extent, which also gives the azimuth
 * offsets of the rows reached, or the same by search (rl_rows_reached)
 * where the table's row_search is given. Columns: azimuths c_j with
 * c_j + offset - mean in [-e, e] modulo 2 pi, by binary search over the
 * canonical column azimuths (lifted: rl_canon_az); a range that wraps past the last
 * column continues at column 0 (the seam). Computed in double. Writes box,
 * returns its tile count (0: no ray reached). */
NUREC_HD int64_t NR(rl_box)(const real_t* rec, const real_t* row_el, const real_t* col_az,
                            const real_t* row_off, const real_t* row_search, int row_levels, int R, int W,
                            int tiles_x, int tiles_y, int32_t box[NUREC_BOX_SIZE]) {
    nurec_box_empty(box);
    double thr = rec[NUREC_TREC_THR], A = rec[NUREC_TREC_A], B = rec[NUREC_TREC_B],
           C = rec[NUREC_TREC_C];
    if (R <= 0 || W <= 0 || !(thr >= 0.0) || !(A > 0.0) || !(C > 0.0)) return 0;
    double delta = A * C - B * B;
    if (!(delta > 0.0)) return 0;
    double e_az = sqrt(thr * C / delta) * (1.0 + NUREC_RL_BOUND_REL) + NUREC_RL_BOUND_ABS;
    double e_el = sqrt(thr * A / delta) * (1.0 + NUREC_RL_BOUND_REL) + NUREC_RL_BOUND_ABS;
    double mu_az = rec[NUREC_TREC_U], mu_el = rec[NUREC_TREC_V];
    if (!(fabs(mu_az) < 1e6 && fabs(mu_el) < 1e6 && e_el < 1e30)) return 0;
    /* the rows reached: first the first and last (a compare per row), then
     * their offsets' span over those between (every row reached lies there).
     * One loop doing both ran ~29 SASS instructions per row, each row's
     * double min/max predicated through whether or not it was reached: a
     * third of the projection's instructions for 128 rows (ncu). */
    int i0 = R, i1 = -1;
    double omin = 1e300, omax = -1e300;
    if (row_search) {
        NR(rl_rows_reached)(row_search, R, row_levels, mu_el, e_el, &i0, &i1, &omin, &omax);
    } else {
        for (int i = 0; i < R; ++i) {
            const int in = fabs((double)row_el[i] - mu_el) <= e_el;
            i0 = in && i0 == R ? i : i0;
            i1 = in ? i : i1;
        }
        for (int i = i0; i <= i1; ++i) {
            if (!(fabs((double)row_el[i] - mu_el) <= e_el)) continue;
            const double o = (double)row_off[i];
            omin = fmin(omin, o);
            omax = fmax(omax, o);
        }
    }
    if (i1 < 0) return 0;
    double lo = mu_az - omax - e_az, hi = mu_az - omin + e_az, L = hi - lo;
    int ja = 0, jb = W - 1, wrap = 0;
    if (L < NUREC_RL_TWO_PI) { /* else (or NaN): every column */
        /* the range [a, a + L] (a in [0, 2 pi)) meets the table's offsets
         * at k = 0 and, past 2 pi, at k = -1 (rl_col_range); in column
         * order, k = -1's columns come first */
        const double a0 = (double)col_az[0], sv_last = NR(rl_canon_az)(col_az, W - 1) - a0;
        double a = lo - a0;
        a -= NUREC_RL_TWO_PI * floor(a / NUREC_RL_TWO_PI); /* [0, 2 pi) */
        int ja1, jb1, ja0, jb0;
        const int has1 = NR(rl_col_range)(col_az, W, sv_last, a - NUREC_RL_TWO_PI, L, &ja1, &jb1);
        const int has0 = NR(rl_col_range)(col_az, W, sv_last, a, L, &ja0, &jb0);
        if (!has1 && !has0) return 0;
        ja = has1 ? ja1 : ja0;
        jb = has0 ? jb0 : jb1;
        if (has1 && has0 && (W - ja0) + jb1 + 1 < jb - ja + 1) { /* across the seam */
            ja = ja0;
            jb = jb1;
            wrap = 1;
        }
    }
    box[0] = i0 / NUREC_RL_TILE_ROWS;
    box[1] = i1 / NUREC_RL_TILE_ROWS;
    int t0 = ja / NUREC_RL_TILE_COLS, t1 = jb / NUREC_RL_TILE_COLS;
    int ntx = wrap ? (tiles_x - t0) + t1 + 1 : t1 - t0 + 1;
    if (ntx >= tiles_x) {
        t0 = 0;
        ntx = tiles_x;
    }
    box[2] = t0;
    box[3] = ntx;
    NR(rl_box_cut)(rec, row_el, col_az, row_off, W, tiles_x, tiles_y, box);
    return nurec_box_count(box, tiles_x, tiles_y);
}

#undef RL_CEIL

/* The lidar's hooks of the projection written once for both rasterizers
 * (tiles/splat_project_generic.h): its cells are the tile box of rows x
 * columns its ellipse crosses, written per item; no extra per item. */
NUREC_HD int64_t NR(rl_item_cells)(const nurec_rasterize_lidar_params* p, int64_t it, const real_t* rec, int vis) {
    int32_t box[NUREC_BOX_SIZE];
    nurec_box_empty(box);
    int64_t cnt = 0;
    if (vis)
        cnt = NR(rl_box)(rec, (const real_t*)p->row_elevations, (const real_t*)p->column_azimuths,
                         (const real_t*)p->row_azimuth_offsets, (const real_t*)p->row_search, p->row_levels,
                         p->rows, p->cols, p->tiles_x, p->tiles_y, box);
    int32_t* ob = p->boxes + NUREC_BOX_SIZE * it;
    for (int k = 0; k < NUREC_BOX_SIZE; ++k) ob[k] = box[k];
    return cnt;
}

#define SPLAT_FN(name) NR(NUREC_PASTE(rl, name))
#define SPLAT_PARAMS nurec_rasterize_lidar_params
#define SPLAT_SENSOR NR(rl_sensor)
#define SPLAT_PROJ NR(rl_proj)
#define SPLAT_NUM_SENSORS(p) ((p)->num_sweeps)
#define SPLAT_SENSOR_OF(p, c, S, plain) NR(rl_sensor_load)((const real_t*)(p)->viewmats + 16 * (c), S)
#define SPLAT_AT_TIME(p, c, it, m, solve, S) NR(rl_sensor_at_time)(p, c, it, m, solve, S)
#define SPLAT_PROJECT(p, S, m, q, s, o, P, rec)                                                      \
    NR(rl_project)(S, m, q, s, o, (real_t)(p)->near_plane, (real_t)(p)->far_plane, (real_t)(p)->eps2d, P, \
                   rec)
#define SPLAT_PROJECT_VJP(S, m, q, s, P, gr, gm, gq, gs) NR(rl_project_vjp)(S, s, P, gr, gm, gq, gs)
#define SPLAT_CELLS(p, it, rec, vis) NR(rl_item_cells)(p, it, rec, vis)
#define SPLAT_ITEM_DONE(p, S, g, it, m, cnt) ((void)0)
#define SPLAT_ITEM_VJP(p, S, g, it, m, extra, stride, gm) ((void)0)
#include "tiles/splat_project_generic.h"
