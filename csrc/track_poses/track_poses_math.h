/* Per-track math of interpolate_track_poses, shared by the CPU and CUDA
 * kernels: which keys a query uses (locate), the pose they give (eval) and
 * its backward (eval_vjp). */
#ifndef NUREC_TRACK_POSES_MATH_H
#define NUREC_TRACK_POSES_MATH_H

#include "math/defs.h"
#include "math/quat.h"
#include "track_poses/track_poses.h"

/* Which keys a query at time t uses. Returns how many (0, 1 or 2): 0 gives
 * the identity pose, 1 key *l alone, 2 keys *l and *l + 1 blended with
 * fraction *a. *inside follows the SPEC. A range that does not fit in
 * [0, num_keys) is treated as an empty track, so no input can make a kernel
 * read out of bounds. */
NUREC_HD int nurec_track_locate(const int64_t* key_times, int64_t num_keys,
                                int64_t start, int64_t count, int64_t t,
                                int mode, int64_t* l, double* a, int* inside) {
    *a = 0.0;
    *inside = 0;
    if (count <= 0 || start < 0 || start > num_keys - count) return 0;
    int64_t last = start + count - 1;
    if (t < key_times[start]) { *l = start; return 1; }
    if (t > key_times[last]) { *l = last; return 1; }
    *inside = 1;
    /* last key with time <= t: binary search in [start, last] */
    int64_t lo = start, hi = last;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (key_times[mid] <= t) lo = mid; else hi = mid - 1;
    }
    *l = lo;
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

#define NUREC_GENERIC_FILE "track_poses/track_poses_math_generic.h"
#include "math/generic.h"

#endif /* NUREC_TRACK_POSES_MATH_H */
