/* CPU kernels of rasterize_lidar (C, exact, single-threaded): the same
 * pipeline as CUDA (projection -> tile binning -> per-tile compositing), so
 * CPU and CUDA agree on images and gradients. */
#include <stdlib.h>
#include <string.h>

#include "rasterize_lidar/rasterize_lidar_math.h"

/* The [start, end) of the list of the tile that ray (sweep, row, column),
 * flattened, lies in. The CPU walks rays in order: with tiles of one row
 * that is the tiles' order too, and the gradients sum in the same order. */
static const int64_t* rl_tile_range_of(const nurec_rasterize_lidar_params* p, int64_t ray) {
    const int64_t W = p->cols, H = p->rows;
    const int64_t c = ray / (H * W), i = (ray / W) % H, j = ray % W;
    const int64_t tile = (c * p->tiles_y + i / NUREC_RL_TILE_ROWS) * p->tiles_x + j / NUREC_RL_TILE_COLS;
    return p->tile_ranges + 2 * tile;
}

#define NUREC_GENERIC_FILE "rasterize_lidar/rasterize_lidar_cpu_generic.h"
#include "math/generic.h"

void nurec_rasterize_lidar_tiles(const nurec_rasterize_lidar_params* p, nurec_tiles_params* t) {
    memset(t, 0, sizeof(*t));
    t->dtype = p->dtype;
    t->num_images = p->num_sweeps;
    t->items_per_image = p->num_gaussians;
    t->width = p->cols;
    t->height = p->rows;
    t->tiles_x = p->tiles_x;
    t->tiles_y = p->tiles_y;
    t->records = p->records;
    t->counts = p->counts;
    t->boxes = p->boxes;
    t->offsets = p->offsets;
    t->capacity = p->capacity;
    t->isect_items = p->isect_items;
    t->tile_ranges = p->tile_ranges;
    t->status = p->status;
    t->workspace = p->workspace;
    t->workspace_bytes = p->workspace_bytes;
}

int nurec_rasterize_lidar_project_cpu(const nurec_rasterize_lidar_params* p, int64_t* total) {
    if (p->dtype == NUREC_F32) rl_project_cpu_f32(p);
    else if (p->dtype == NUREC_F64) rl_project_cpu_f64(p);
    else return NUREC_ERR_DTYPE;
    nurec_tiles_params t;
    nurec_rasterize_lidar_tiles(p, &t);
    *total = nurec_tiles_scan_cpu(&t);
    return NUREC_OK;
}

int nurec_rasterize_lidar_forward_cpu(const nurec_rasterize_lidar_params* p) {
    nurec_tiles_params t;
    nurec_rasterize_lidar_tiles(p, &t);
    int st = nurec_tiles_bin_cpu(&t);
    if (st != NUREC_OK) return st;
    if (p->dtype == NUREC_F32) return rl_forward_cpu_f32(p);
    if (p->dtype == NUREC_F64) return rl_forward_cpu_f64(p);
    return NUREC_ERR_DTYPE;
}

int nurec_rasterize_lidar_backward_cpu(const nurec_rasterize_lidar_params* p) {
    if (p->dtype == NUREC_F32) return rl_backward_cpu_f32(p);
    if (p->dtype == NUREC_F64) return rl_backward_cpu_f64(p);
    return NUREC_ERR_DTYPE;
}
