/* Per-element math shared by the Gaussian rasterizers (camera and lidar), C99
 * and CUDA, float and double: the 3D covariance factor R Rq diag(s), the 2D
 * covariance and its conic, alpha of a record at an offset d, the
 * back-to-front compositing step, and their VJPs. What differs between the
 * sensors (the projection of the mean and its Jacobian, the cell
 * coordinates) stays in each family's math header. */
#ifndef NUREC_SPLAT_MATH_H
#define NUREC_SPLAT_MATH_H

#include "math/defs.h"
#include "math/quat.h"
#include "tiles/splat.h"
#include "tiles/tiles.h"

/* Parts of a long tile list (CUDA, both rasterizers): the number of parts
 * of a list of len entries, cut into at most `segments` parts of at least
 * segment_min entries (1: not cut), and their length. */
NUREC_HD int nurec_splat_segment_count(int segments, int64_t segment_min, int64_t len, int64_t* seg_len) {
    if (segments <= 1 || len <= segment_min) {
        *seg_len = len;
        return 1;
    }
    int64_t n = (len + segments - 1) / segments;
    n = n < segment_min ? segment_min : n;
    *seg_len = n;
    return (int)((len + n - 1) / n);
}

#define NUREC_GENERIC_FILE "tiles/splat_math_generic.h"
#include "math/generic.h"

#endif /* NUREC_SPLAT_MATH_H */
