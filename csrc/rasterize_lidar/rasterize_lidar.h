/* rasterize_lidar (SPEC section 4): 3D Gaussian splatting into a spinning
 * lidar given by per-row elevations, per-column azimuths and per-row azimuth
 * offsets. Plain C params struct and launchers; the per-element math is in
 * rasterize_lidar_math.h, what it shares with the camera rasterizer
 * (covariance, conic, alpha, compositing and their VJPs) in
 * tiles/splat_math.h, the binning in tiles/ (tile rectangles mode).
 *
 * Cells are rays (row i, column j): ray (i, j) points at azimuth
 * column_azimuths[j] + row_azimuth_offsets[i], elevation row_elevations[i].
 * A tile is NUREC_RL_TILE_ROWS consecutive rows x NUREC_RL_TILE_COLS
 * consecutive columns; tile columns are circular (the column after the last
 * is column 0), so a Gaussian on the azimuth seam is binned on both sides.
 *
 * Pipeline, CPU and CUDA alike: projection of every (sweep, Gaussian) item
 * into a tile record (tiles.h layout: u = azimuth, v = elevation, depth =
 * range), its tile rectangle and count -> tile binning -> per-tile
 * front-to-back compositing -> (backward) per-tile back-to-front sweep
 * accumulating per-item gradients -> per-Gaussian projection VJP summed over
 * sweeps. */
#ifndef NUREC_RASTERIZE_LIDAR_H
#define NUREC_RASTERIZE_LIDAR_H

#include <stdint.h>

#include "tiles/splat.h"
#include "tiles/tiles.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One row x 256 columns. A real spinning lidar fires its rows with
 * azimuth offsets that jump between neighbouring rows (the 128-row model:
 * -4.5 to +11 degrees, neighbours up to 6.6 degrees apart), so a tile of
 * several rows spans its columns' azimuths plus that whole spread: on the
 * street scene 16 x 16 tiles listed every small Gaussian in ~10 tiles and
 * made each ray test thousands it could not reach. Within one row a tile's
 * rays are exactly its columns' azimuths, and each warp (32 consecutive
 * columns, 3.2 degrees) culls what cannot reach it (the CUDA kernels). */
#ifndef NUREC_RL_TILE_ROWS /* overridable for benchmark variants (setup.py: both compilers' flags) */
/* feature channels a CUDA tile pass composites (rasterize_lidar.cu's RL_CH) */
#define NUREC_RL_CHANNELS_PER_PASS 2
#define NUREC_RL_TILE_ROWS 1
#endif
#ifndef NUREC_RL_TILE_COLS
#define NUREC_RL_TILE_COLS 256
#endif
/* Gaussians whose mean is within 5 degrees of a pole are dropped. */
#define NUREC_RL_MAX_ELEVATION 1.4835298641951802 /* pi/2 - 5 deg */
#define NUREC_RL_EPS2D_FACTOR 0.3                 /* default eps2d = 0.3 (2 pi / W)^2 */
/* Slack of the binning bounds in radians (relative, absolute) on top of the
 * opacity-aware ellipse, so that rounding of the per-ray offsets (float32
 * sums and wraps of angles ~3 rad) can never reach outside the tiles. */
#define NUREC_RL_BOUND_REL 1e-3
#define NUREC_RL_BOUND_ABS 1e-5

/* Flags in seg_last: the part's own compositing reached the transmittance
 * cut-off; the ray's cut-off falls in this part, which is composited again
 * from the ray's transmittance at its start. The rest is the last entry. */
#define NUREC_RL_SEG_STOPPED NUREC_SPLAT_SEG_STOPPED
#define NUREC_RL_SEG_FIXUP NUREC_SPLAT_SEG_FIXUP
#define NUREC_RL_SEG_LAST NUREC_SPLAT_SEG_LAST
#define NUREC_RL_MAX_SEGMENTS NUREC_SPLAT_MAX_SEGMENTS

typedef struct nurec_rasterize_lidar_params {
    NUREC_SPLAT_PARAMS_FIELDS /* tiles/splat.h: the Gaussians, poses, binning, parts, gradients */
    int64_t num_sweeps;      /* C */
    int rows, cols;          /* R, W: the cells are rays */
    double eps2d;
    /* the lidar's inputs, dense */
    const void* row_elevations;      /* [R] monotone or not (rows are scanned) */
    const void* column_azimuths;     /* [W] canonical order, wrapped to [-pi, pi): ascending spanning < 2 pi
                                        once lifted (rl_canon_az) */
    const int32_t* column_order;     /* [W] the user's column of each canonical column */
    const void* column_times;        /* [W] canonical: each column's relative firing time (with viewmats_end) */
    const void* row_azimuth_offsets; /* [R] */
    /* the rows in elevation order and their range tables (rl_rows_reached:
       [1 + 4 L, R] real, L = row_levels), or NULL: the rows are scanned */
    const void* row_search;
    int row_levels;
    int32_t* boxes;          /* [C * N, NUREC_BOX_SIZE] tile rectangles (forward writes) */
    /* forward outputs (and alpha) */
    void* out_features;      /* [C, R, W, D] */
    void* range;             /* [C, R, W] */
    /* backward */
    const void* grad_out_features; /* [C, R, W, D] */
    const void* grad_range;  /* [C, R, W], or NULL: zero (a loss that reads no range) */
} nurec_rasterize_lidar_params;

/* Fills the binning params of this call (shared by both devices). */
void nurec_rasterize_lidar_tiles(const nurec_rasterize_lidar_params* p, nurec_tiles_params* t);

/* CPU: projection + counts (the exact total through *total), then the caller
 * allocates isect_items of that size, then the rest. */
int nurec_rasterize_lidar_project_cpu(const nurec_rasterize_lidar_params* p, int64_t* total);
int nurec_rasterize_lidar_forward_cpu(const nurec_rasterize_lidar_params* p);
int nurec_rasterize_lidar_backward_cpu(const nurec_rasterize_lidar_params* p);
/* Each cell's median item (p->median_items; NUREC_SPLAT_MEDIAN_*) over the
 * lists of a forward (its records, isect_items, tile_ranges, status). */
int nurec_rasterize_lidar_median_cpu(const nurec_rasterize_lidar_params* p);

/* CUDA: everything on `stream`, no host synchronization. The forward is
 * two calls: the projection (it needs only the inputs, records, counts and
 * boxes), launched before the caller allocates the rest so the GPU
 * starts while the host works, then binning and compositing. */
size_t nurec_rasterize_lidar_workspace_bytes(const nurec_rasterize_lidar_params* p);
int nurec_rasterize_lidar_project_cuda(const nurec_rasterize_lidar_params* p, void* stream);
int nurec_rasterize_lidar_forward_cuda(const nurec_rasterize_lidar_params* p, void* stream);
int nurec_rasterize_lidar_backward_cuda(const nurec_rasterize_lidar_params* p, void* stream);
int nurec_rasterize_lidar_median_cuda(const nurec_rasterize_lidar_params* p, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* NUREC_RASTERIZE_LIDAR_H */
