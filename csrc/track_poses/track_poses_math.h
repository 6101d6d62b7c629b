/* Per-track math of interpolate_track_poses, shared by the CPU and CUDA
 * kernels: which keys a query uses (locate), the pose they give (eval) and
 * its backward (eval_vjp). */
#ifndef NUREC_TRACK_POSES_MATH_H
#define NUREC_TRACK_POSES_MATH_H

#include "math/defs.h"
#include "math/quat.h"
#include "track_poses/track_poses.h"

/* Which keys a query at time t uses, in three steps so that the search in
 * the middle can be sequential (CPU) or done by a whole warp (CUDA):
 *   nurec_track_bounds  range checks, before / after the track
 *   nurec_track_search  the last key with time <= t
 *   nurec_track_finish  nearest key or blend fraction
 * A range that does not fit in [0, num_keys) is treated as an empty track,
 * so no input can make a kernel read out of bounds. */

/* Returns 0 (empty track: identity pose), 1 (t outside the keys: key *l
 * alone) or -1 (t inside: search [*l, *last]). */
NUREC_HD int nurec_track_bounds(const int64_t* key_times, int64_t num_keys, int64_t start,
                                int64_t count, int64_t t, int64_t* l, int64_t* last) {
    if (count <= 0 || start < 0 || start > num_keys - count) return 0;
    *last = start + count - 1;
    if (t < key_times[start]) { *l = start; return 1; }
    if (t > key_times[*last]) { *l = *last; return 1; }
    *l = start;
    return -1;
}

/* Last key in [lo, hi] with time <= t, given key_times[lo] <= t. */
NUREC_HD int64_t nurec_track_search(const int64_t* key_times, int64_t lo, int64_t hi,
                                    int64_t t) {
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (key_times[mid] <= t) lo = mid; else hi = mid - 1;
    }
    return lo;
}

/* From l (the last key with time <= t) to the keys used: returns 1 (key *l)
 * or 2 (keys *l and *l + 1 with fraction *a). */
NUREC_HD int nurec_track_finish(const int64_t* key_times, int64_t last, int64_t t, int mode,
                                int64_t* l, double* a) {
    int64_t lo = *l;
    *a = 0.0;
    if (lo == last) return 1;
    int64_t tl = key_times[lo], tr = key_times[lo + 1];
    if (mode == NUREC_INTERP_NEAREST) {
        if (t - tl > tr - t) *l = lo + 1;  /* ties go left */
        return 1;
    }
    /* int64 differences, fraction in float64 (epoch microseconds) */
    *a = (tr == tl) ? 0.0 : (double)(t - tl) / (double)(tr - tl);
    return 2;
}

/* The three steps in sequence; *inside as the SPEC defines it. */
NUREC_HD int nurec_track_locate(const int64_t* key_times, int64_t num_keys,
                                int64_t start, int64_t count, int64_t t,
                                int mode, int64_t* l, double* a, int* inside) {
    int64_t last = 0;
    *a = 0.0;
    int nk = nurec_track_bounds(key_times, num_keys, start, count, t, l, &last);
    *inside = nk < 0;
    if (nk >= 0) return nk;
    *l = nurec_track_search(key_times, *l, last, t);
    return nurec_track_finish(key_times, last, t, mode, l, a);
}

/* nurec_track_locate for track k of a params struct (CPU kernels). */
NUREC_HD int nurec_track_locate_k(const nurec_track_poses_params* p, int64_t k, int64_t* l,
                                  double* a, int* inside) {
    int64_t start = nurec_load_index(p->track_ranges, p->ranges_are_int64, 2 * k);
    int64_t count = nurec_load_index(p->track_ranges, p->ranges_are_int64, 2 * k + 1);
    *l = 0;
    return nurec_track_locate(p->key_times, p->num_keys, start, count,
                              p->query_times[k * p->query_stride], p->mode, l, a, inside);
}

#define NUREC_GENERIC_FILE "track_poses/track_poses_math_generic.h"
#include "math/generic.h"

#endif /* NUREC_TRACK_POSES_MATH_H */
