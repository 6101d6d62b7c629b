/* rasterize_rays, C99 CPU kernels: the per-Gaussian records, the items and
 * their exact count, the binning (tiles/tiles_cpu.c), then each tile's rays
 * composited over its list, forward and backward (one thread, the same
 * per-element math as the CUDA kernels). */
#include <stdlib.h>
#include <string.h>

#include "rasterize_rays/rasterize_rays.h"
#include "rasterize_rays/rasterize_rays_math.h"
#include "tiles/tiles.h"

#define NUREC_GENERIC_FILE "rasterize_rays/rasterize_rays_cpu_generic.h"
#include "math/generic.h"

int nurec_rasterize_rays_project_cpu(const nurec_rasterize_rays_params* p, int64_t* total) {
    if (p->dtype == NUREC_F64) return nurec_rays_project_cpu_f64(p, total);
    if (p->dtype == NUREC_F32) return nurec_rays_project_cpu_f32(p, total);
    return NUREC_ERR_DTYPE;
}

int nurec_rasterize_rays_forward_cpu(const nurec_rasterize_rays_params* p) {
    const nurec_tiles_params t = nurec_rasterize_rays_tiles(p);
    const int st = nurec_tiles_bin_cpu(&t);
    if (st != NUREC_OK) return st;
    if (p->dtype == NUREC_F64) return nurec_rays_forward_cpu_f64(p);
    if (p->dtype == NUREC_F32) return nurec_rays_forward_cpu_f32(p);
    return NUREC_ERR_DTYPE;
}

int nurec_rasterize_rays_backward_cpu(const nurec_rasterize_rays_params* p) {
    if (p->dtype == NUREC_F64) return nurec_rays_backward_cpu_f64(p);
    if (p->dtype == NUREC_F32) return nurec_rays_backward_cpu_f32(p);
    return NUREC_ERR_DTYPE;
}
