/* rasterize_camera (SPEC section 3): 3D Gaussian splatting through pinhole
 * cameras. Plain C params struct and launchers; the per-element math
 * (projection, EWA covariance, SH, alpha compositing and their VJPs) is in
 * rasterize_camera_math.h, the binning in tiles/.
 *
 * Pipeline, CPU and CUDA alike: projection of every (camera, Gaussian) item
 * into a tile record (tiles.h layout) and its tile count -> tile binning ->
 * per-tile front-to-back compositing -> (backward) per-tile back-to-front
 * sweep accumulating per-item 2D gradients -> per-Gaussian projection VJP
 * summed over cameras. */
#ifndef NUREC_RASTERIZE_CAMERA_H
#define NUREC_RASTERIZE_CAMERA_H

#include <stdint.h>

#include "tiles/splat.h"
#include "tiles/tiles.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NUREC_RC_EPS2D 0.3        /* px^2 added to the 2D covariance diagonal: SPEC 3's, the default of eps2d */
/* feature channels a CUDA tile pass composites (D = 3, 4: one pass); the
   grid's z dimension is cameras x passes */
#define NUREC_RC_CHANNELS_PER_PASS 4
/* Compositing constants shared with the lidar rasterizer: tiles/splat.h. */
#define NUREC_RC_ALPHA_MIN NUREC_SPLAT_ALPHA_MIN
#define NUREC_RC_ALPHA_MAX NUREC_SPLAT_ALPHA_MAX
#define NUREC_RC_T_MIN NUREC_SPLAT_T_MIN
#define NUREC_RC_THR_MARGIN NUREC_SPLAT_THR_MARGIN

/* The features row of item `it` (c N + g): the item's own with features
   per camera, else its Gaussian's. */
#define NUREC_RC_FEATURE_ROW(p, it) ((p).features_per_camera ? (it) : (it) % (p).num_gaussians)

typedef struct nurec_rasterize_camera_params {
    NUREC_SPLAT_PARAMS_FIELDS /* tiles/splat.h: the Gaussians, poses, binning, parts, gradients */
    int64_t num_cameras;     /* C */
    int width, height;       /* the cells: pixels */
    int sh_degree;           /* -1: features [N, D]; 0..3: SH [N, K, 3] */
    int features_per_camera; /* without SH: features [C, N, D], a row per (camera, Gaussian) item
                                (gsplat's per-camera colours), not [N, D]; NUREC_RC_FEATURE_ROW */
    int64_t sh_coeffs;       /* K */
    /* the camera's inputs, dense */
    const void* Ks;          /* [C, 3, 3] */
    int camera_model;        /* enum nurec_camera_model (sensors/camera_models.h) */
    const void* model_params; /* [C, NUREC_CAM_PARAMS] packed per camera, or NULL (pinhole) */
    int shutter;             /* enum nurec_shutter (sensors/rolling_shutter.h); viewmats_end with it */
    double eps2d;            /* px^2 added to each 2D covariance's diagonal (SPEC 3: NUREC_RC_EPS2D;
                                gsplat's eps2d), >= 0 */
    int antialiased;         /* gsplat's antialiased mode: each item's opacity times its
                                compensation (rasterize_camera_math_generic.h: rc_opacity) */
    int32_t radius_clip;     /* gsplat's radius_clip, floored to whole pixels: an item whose SPEC 8
                                radii are both <= it is dropped (rc_clipped); 0: none is */
    const void* backgrounds; /* [C, D] or NULL */
    void* colors;            /* SH: [C, N, 3] evaluated colours (forward writes); else unused */
    int32_t* boxes;          /* [C * N, NUREC_BOX_SIZE] footprints as tile rectangles (forward
                                writes; nurec_footprint_box), or NULL: the binning walks them */
    /* forward outputs (and alpha) */
    void* render;            /* [C, H, W, D] */
    void* depth;             /* [C, H, W] */
    /* backward */
    const void* grad_render; /* [C, H, W, D] */
    const void* grad_depth;  /* [C, H, W], or NULL: zero (a loss that reads no depth) */
    void* grad_colors;       /* SH: [C, N, 3] scratch (zeroed); features: unused */
    /* the visibility op */
    uint8_t* visible;        /* [N] 1 where a pixel centre of a camera lies in the Gaussian's footprint */
} nurec_rasterize_camera_params;

/* Fills the binning params of this call (shared by both devices). */
void nurec_rasterize_camera_tiles(const nurec_rasterize_camera_params* p, nurec_tiles_params* t);

/* CPU: projection + counts, then the caller allocates isect_items with the
 * exact total (returned through *total), then the rest. */
int nurec_rasterize_camera_project_cpu(const nurec_rasterize_camera_params* p, int64_t* total);
int nurec_rasterize_camera_forward_cpu(const nurec_rasterize_camera_params* p);
int nurec_rasterize_camera_backward_cpu(const nurec_rasterize_camera_params* p);
/* Each cell's median item (p->median_items; NUREC_SPLAT_MEDIAN_*) over the
 * lists of a forward (its records, isect_items, tile_ranges, status). */
int nurec_rasterize_camera_median_cpu(const nurec_rasterize_camera_params* p);
/* p->visible[g] for every Gaussian (rc_gaussian_visible): the projection
 * alone, no records, counts or binning (memory O(N), not O(C N)). */
int nurec_rasterize_camera_visible_cpu(const nurec_rasterize_camera_params* p);

/* CUDA: everything on `stream`, no host synchronization. The forward is
 * two calls: the projection (it needs only the inputs, records, counts and
 * colors), launched before the caller allocates the rest so the GPU
 * starts while the host works, then binning and compositing. */
size_t nurec_rasterize_camera_workspace_bytes(const nurec_rasterize_camera_params* p);
int nurec_rasterize_camera_project_cuda(const nurec_rasterize_camera_params* p, void* stream);
int nurec_rasterize_camera_forward_cuda(const nurec_rasterize_camera_params* p, void* stream);
int nurec_rasterize_camera_backward_cuda(const nurec_rasterize_camera_params* p, void* stream);
int nurec_rasterize_camera_median_cuda(const nurec_rasterize_camera_params* p, void* stream);
int nurec_rasterize_camera_visible_cuda(const nurec_rasterize_camera_params* p, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* NUREC_RASTERIZE_CAMERA_H */
