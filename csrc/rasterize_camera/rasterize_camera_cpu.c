/* CPU kernels of rasterize_camera (C, exact, single-threaded): the same
 * pipeline as CUDA (projection -> tile binning -> per-tile compositing),
 * so CPU and CUDA agree on images and gradients. */
#include <stdlib.h>

#include "rasterize_camera/rasterize_camera_math.h"
#include "tiles/splat_cpu.h"

#define NUREC_GENERIC_FILE "rasterize_camera/rasterize_camera_cpu_generic.h"
#include "math/generic.h"

void nurec_rasterize_camera_tiles(const nurec_rasterize_camera_params* p, nurec_tiles_params* t) {
    NUREC_SPLAT_TILES(p, t, p->num_cameras, p->width, p->height);
    t->boxes = p->boxes; /* small footprints as rectangles, the rest walked (boxes_mixed) */
    t->boxes_mixed = 1;
}

NUREC_SPLAT_CPU_LAUNCHERS(camera, rc)

int nurec_rasterize_camera_visible_cpu(const nurec_rasterize_camera_params* p) {
    if (p->dtype == NUREC_F32) rc_visible_cpu_f32(p);
    else if (p->dtype == NUREC_F64) rc_visible_cpu_f64(p);
    else return NUREC_ERR_DTYPE;
    return NUREC_OK;
}
