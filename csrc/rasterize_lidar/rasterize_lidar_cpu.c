/* CPU kernels of rasterize_lidar (C, exact, single-threaded): the same
 * pipeline as CUDA (projection -> tile binning -> per-tile compositing), so
 * CPU and CUDA agree on images and gradients. */
#include <stdlib.h>

#include "rasterize_lidar/rasterize_lidar_math.h"
#include "tiles/splat_cpu.h"

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
    NUREC_SPLAT_TILES(p, t, p->num_sweeps, p->cols, p->rows);
    t->boxes = p->boxes;
}

NUREC_SPLAT_CPU_LAUNCHERS(lidar, rl)
