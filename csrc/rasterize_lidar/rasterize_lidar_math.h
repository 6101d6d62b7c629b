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
#include "rasterize_lidar/rasterize_lidar.h"

#define NUREC_RL_PI 3.14159265358979323846
#define NUREC_RL_TWO_PI 6.28318530717958647692

/* x wrapped to (-pi, pi], in double (binning). */
NUREC_HD double nurec_rl_wrapd(double x) {
    return x - NUREC_RL_TWO_PI * ceil((x - NUREC_RL_PI) / NUREC_RL_TWO_PI);
}

#define NUREC_GENERIC_FILE "rasterize_lidar/rasterize_lidar_math_generic.h"
#include "math/generic.h"

#endif /* NUREC_RASTERIZE_LIDAR_MATH_H */
