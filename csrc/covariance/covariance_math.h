/* Per-item math of covariance, C99 and CUDA, float and double. */
#ifndef NUREC_COVARIANCE_MATH_H
#define NUREC_COVARIANCE_MATH_H

#include <stddef.h> /* NULL: an output or gradient not computed */

#include "covariance/covariance.h"
#include "math/defs.h"
#include "math/quat.h"

#define NUREC_GENERIC_FILE "covariance/covariance_math_generic.h"
#include "math/generic.h"

#endif /* NUREC_COVARIANCE_MATH_H */
