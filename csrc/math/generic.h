/* Instantiates a generic file for float and for double.
 *
 * Usage (a C file, a CUDA file or a header):
 *     #define NUREC_GENERIC_FILE "collect/collect_cpu_generic.h"
 *     #include "math/generic.h"
 *
 * Inside the generic file:
 *   real_t      the scalar type (float, then double)
 *   NR(name)    name suffixed with the type: name_f32 / name_f64
 *   R_SQRT, R_EXP, R_SIN, R_COS, R_ATAN2, R_FABS, R_LOG, R_FMAX, R_FMIN,
 *   R_LOG1P, R_EXPM1, R_CEIL, R_FLOOR, R_FMA, R_EXP_FALLOFF, R_RCP_NORMAL (the
 *               splats' exp(-sigma), 1 / (1 - alpha): math/defs.h)
 *               the math function of that precision (sqrtf / sqrt, ...)
 *   R_DTYPE     NUREC_F32 / NUREC_F64 (R_IS_F64: 0 / 1, for #if)
 *
 * This is the one place where precision is chosen: kernels and math are
 * written once and compiled twice. No include guard, on purpose. */
#ifndef NUREC_GENERIC_FILE
#error "define NUREC_GENERIC_FILE before including math/generic.h"
#endif

#include "math/defs.h"

#define real_t float
#define NR(name) NUREC_PASTE(name, f32)
#define R_DTYPE NUREC_F32
#define R_IS_F64 0
#define R_SQRT sqrtf
#define R_EXP expf
#define R_EXP_FALLOFF NUREC_EXPF_FALLOFF
#define R_EXP_STAGED NUREC_EXPF_STAGED
#define R_STAGED_SCALE NUREC_STAGED_SCALE_F32
#define R_RCP_NORMAL NUREC_RCPF_NORMAL
#define R_EXPM1 expm1f
#define R_LOG logf
#define R_LOG1P log1pf
#define R_SIN sinf
#define R_COS cosf
#define R_ATAN2 atan2f
#define R_FABS fabsf
#define R_FMAX fmaxf
#define R_FMIN fminf
#define R_CEIL ceilf
#define R_FLOOR floorf
#define R_FMA fmaf
#include NUREC_GENERIC_FILE
#include "math/generic_undef.h"

#define real_t double
#define NR(name) NUREC_PASTE(name, f64)
#define R_DTYPE NUREC_F64
#define R_IS_F64 1
#define R_SQRT sqrt
#define R_EXP exp
#define R_EXP_FALLOFF exp
#define R_EXP_STAGED exp
#define R_STAGED_SCALE 1.0
#define R_RCP_NORMAL(x) (1.0 / (x))
#define R_EXPM1 expm1
#define R_LOG log
#define R_LOG1P log1p
#define R_SIN sin
#define R_COS cos
#define R_ATAN2 atan2
#define R_FABS fabs
#define R_FMAX fmax
#define R_FMIN fmin
#define R_CEIL ceil
#define R_FLOOR floor
#define R_FMA fma
#include NUREC_GENERIC_FILE
#include "math/generic_undef.h"

#undef NUREC_GENERIC_FILE
