/* Per-Gaussian math of collect_gaussian_parameters, shared by the CPU and
 * CUDA kernels. */
#ifndef NUREC_COLLECT_MATH_H
#define NUREC_COLLECT_MATH_H

#include "math/defs.h"
#include "math/quat.h"
#include "collect/collect.h"

/* How a Gaussian is collected, from its track id (SPEC section 2). */
enum nurec_collect_kind {
    NUREC_STATIC = 0,    /* id == -1 */
    NUREC_ON_TRACK = 1,  /* valid id, track inside its time range */
    NUREC_FORCED = 2     /* valid id outside its range, or any other id:
                            opacity 0 and exactly zero gradients */
};

NUREC_HD int nurec_collect_kind(int64_t id, int64_t num_tracks,
                                const uint8_t* track_inside) {
    if (id == -1) return NUREC_STATIC;
    if (id < 0 || id >= num_tracks) return NUREC_FORCED;
    return track_inside[id] ? NUREC_ON_TRACK : NUREC_FORCED;
}

#define NUREC_GENERIC_FILE "collect/collect_math_generic.h"
#include "math/generic.h"

#endif /* NUREC_COLLECT_MATH_H */
