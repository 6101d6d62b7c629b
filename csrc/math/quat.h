/* Quaternion and activation math shared by the CPU and CUDA kernels, in
 * float and double: quat_normalize_f32 / quat_normalize_f64, and so on.
 * Conventions (SPEC): quaternions are (w, x, y, z), Hamilton product, a unit
 * q rotates v as q v q*. Every function that has a backward has a *_vjp
 * twin next to it: the vector-Jacobian product, written by hand. */
#ifndef NUREC_MATH_QUAT_H
#define NUREC_MATH_QUAT_H

#define NUREC_GENERIC_FILE "math/quat_generic.h"
#include "math/generic.h"

#endif /* NUREC_MATH_QUAT_H */
