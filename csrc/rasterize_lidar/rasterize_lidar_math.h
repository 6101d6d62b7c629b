/* Per-element math of rasterize_lidar, shared by the C CPU kernels and the
 * CUDA kernels, in float and double: the spherical projection (azimuth,
 * elevation, range) with its Jacobian and VJP, azimuth wrapping, ray
 * directions, and the tile rectangle of a footprint over the real (uneven)
 * rows and (circular) columns. Covariance, alpha and compositing are the
 * camera's (tiles/splat_math.h). */
#ifndef NUREC_RASTERIZE_LIDAR_MATH_H
#define NUREC_RASTERIZE_LIDAR_MATH_H

#include "math/defs.h"
#include "tiles/splat_math.h"
#include "tiles/tiles_math.h"
#include "splat_meta/splat_meta_math.h" /* SPEC 8's meta item, in the projection */
#include "rasterize_lidar/rasterize_lidar.h"
#include "math/quat.h"
#include "sensors/rolling_shutter.h"

#define NUREC_RL_PI 3.14159265358979323846
#define NUREC_RL_TWO_PI 6.28318530717958647692
/* 1 / (2 pi): the wraps multiply by it. A division by 2 pi was an IEEE
 * division on the GPU (a check and a slow-path call, ~17 instructions) in
 * the walks' innermost step; the product differs from the quotient by an
 * ulp at most, which moves a wrap only where x - pi is within an ulp of a
 * multiple of 2 pi: at the seam, where -pi and pi are the same azimuth.
 * The reference wraps by the same product. */
#define NUREC_RL_INV_TWO_PI 0.15915494309189533577

/* x wrapped to (-pi, pi], in double (binning). */
NUREC_HD double nurec_rl_wrapd(double x) {
    return x - NUREC_RL_TWO_PI * ceil((x - NUREC_RL_PI) * NUREC_RL_INV_TWO_PI);
}

/* The kernels walk the sensor's columns in azimuth order (the canonical
 * table the caller derives from the user's: see nurec_ops/_lidar_table.py),
 * so that a tile's columns are neighbours in azimuth whatever the user's
 * table looks like; column_order[k] is the user's column of canonical column
 * k. The outputs and their gradients are indexed by the user's columns:
 * ray (sweep, row, k) of the walk is this ray of theirs. An order entry out
 * of [0, W) (never made by the wrapper) maps to k itself: never out of
 * bounds. */
NUREC_HD int64_t nurec_rl_user_ray(const int32_t* column_order, int W, int64_t ray) {
    const int64_t k = ray % W;
    const int32_t j = column_order ? column_order[k] : (int32_t)k;
    return ray - k + (j >= 0 && j < W ? j : k);
}

#define NUREC_GENERIC_FILE "rasterize_lidar/rasterize_lidar_math_generic.h"
#include "math/generic.h"

#endif /* NUREC_RASTERIZE_LIDAR_MATH_H */
