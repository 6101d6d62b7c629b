/* Per-element math of rasterize_camera, shared by the C CPU kernels and the
 * CUDA kernels, in float and double: projection (EWA splatting), SH colour,
 * alpha and compositing, each with its hand-written VJP. */
#ifndef NUREC_RASTERIZE_CAMERA_MATH_H
#define NUREC_RASTERIZE_CAMERA_MATH_H

#include "math/defs.h"
#include "math/quat.h"
#include "tiles/tiles_math.h"
#include "tiles/splat_math.h"
#include "splat_meta/splat_meta_math.h" /* SPEC 8's meta item, in the projection */
#include "rasterize_camera/rasterize_camera.h"
#include "sensors/camera_models.h"
#include "sensors/rolling_shutter.h"

/* Real spherical-harmonics constants of the 3DGS convention. */
#define NUREC_SH_C0 0.28209479177387814
#define NUREC_SH_C1 0.4886025119029199
#define NUREC_SH_C20 1.0925484305920792
#define NUREC_SH_C21 -1.0925484305920792
#define NUREC_SH_C22 0.31539156525252005
#define NUREC_SH_C23 -1.0925484305920792
#define NUREC_SH_C24 0.5462742152960396
#define NUREC_SH_C30 -0.5900435899266435
#define NUREC_SH_C31 2.890611442640554
#define NUREC_SH_C32 -0.4570457994644658
#define NUREC_SH_C33 0.3731763325901154
#define NUREC_SH_C34 -0.4570457994644658
#define NUREC_SH_C35 1.445305721320277
#define NUREC_SH_C36 -0.5900435899266435

#define NUREC_GENERIC_FILE "rasterize_camera/rasterize_camera_math_generic.h"
#include "math/generic.h"

#endif /* NUREC_RASTERIZE_CAMERA_MATH_H */
