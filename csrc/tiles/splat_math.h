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

#define NUREC_GENERIC_FILE "tiles/splat_math_generic.h"
#include "math/generic.h"

#endif /* NUREC_SPLAT_MATH_H */
