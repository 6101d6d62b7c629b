/* rasterize_rays: 3D Gaussian splatting into a sensor given by arbitrary
 * rays (gsplat issue 1009: non-separable lidar scan patterns, or any
 * sensor as a ray bundle). Plain C params struct and launchers; the
 * per-pair response is the sensor layer's (sensors/ray_bundle.h), the
 * per-Gaussian and per-item math is in rasterize_rays_math.h, the binning
 * in tiles/ (tile rectangles mode).
 *
 * The rays come in world space, each at its own time's pose (the Python
 * wrapper poses them, nurec_ops/rasterize_rays.py), with a table that
 * groups them into tiles (nurec_ops/_ray_layout.py): a grid of GE x GA
 * cells over the rays' directions (elevation and azimuth bands of equal
 * ray counts in a frame of the sensor's), the rays sorted by cell, and per
 * cell the cone of its rays' directions and the ball of their origins. A
 * tile is a cell; its rays are any number (walked in chunks of a block).
 *
 * Pipeline, CPU and CUDA alike: per Gaussian its mean, A = S^-1 R^T,
 * opacity and bounding radius (the k-sigma ball where alpha can reach
 * 1/255) -> per (sensor, Gaussian) item its depth (distance from the
 * sensor's centre) and tile rectangle (the cells whose directions the
 * ball's cone from the origins' ball can reach, less those each cell's own
 * cone and ball rule out) -> tile binning -> per-tile front-to-back
 * compositing of each ray -> (backward) per-tile back-to-front walk
 * accumulating per-Gaussian gradients of (mean, A, opacity, features) ->
 * per Gaussian the chain to quats and scales. */
#ifndef NUREC_RASTERIZE_RAYS_H
#define NUREC_RASTERIZE_RAYS_H

#include <stddef.h>
#include <stdint.h>

#include "tiles/splat.h"
#include "tiles/tiles.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Per-Gaussian record (reals): mean (3), A = S^-1 R^T row-major (9),
 * opacity (0: never drawn), bounding radius (< 0: never drawn), unused. */
#define NUREC_RAYS_G_SIZE 16
#define NUREC_RAYS_G_MU 0
#define NUREC_RAYS_G_A 3
#define NUREC_RAYS_G_O 12
#define NUREC_RAYS_G_RADIUS 13
/* Per-Gaussian gradient accumulator (reals): mean (3), A (9), opacity. */
#define NUREC_RAYS_GG_SIZE 13
/* Per-sensor table (double): world -> binning frame rotation (9,
 * row-major), origins' centre (3), origins' radius, azimuth origin. */
#define NUREC_RAYS_SENSOR_SIZE 16
/* feature channels a CUDA forward pass composites */
#define NUREC_RAYS_CHANNELS_PER_PASS 4
/* CUDA: blocks a cell's chunks (128 rays each) are dealt to, round robin
 * (chunk q to block q mod SPLIT): a cell holding many rays (a dense part
 * of the pattern, e.g. a rosette's centre) is walked by up to this many
 * blocks side by side instead of one block in turn */
#define NUREC_RAYS_CHUNK_SPLIT 8
/* CUDA: the most feature channels a call (the forward grid's z, passes x
 * SPLIT, stays within 65535) */
#define NUREC_RAYS_MAX_CHANNELS (NUREC_RAYS_CHANNELS_PER_PASS * (65535 / NUREC_RAYS_CHUNK_SPLIT))

typedef struct nurec_rasterize_rays_params {
    int dtype;
    int64_t num_sensors;   /* C */
    int64_t num_gaussians; /* N */
    int64_t num_rays;      /* M per sensor */
    int64_t channels;      /* D */
    int tiles_y, tiles_x;  /* GE elevation bands x GA azimuth bands */
    double near_plane, far_plane;

    const void* means;     /* [N, 3] */
    const void* quats;     /* [N, 4] (w, x, y, z), normalized here */
    const void* scales;    /* [N, 3] */
    const void* opacities; /* [N] */
    const void* features;  /* [N, D] */
    const void* ray_origins;    /* [C, M, 3] world */
    const void* ray_directions; /* [C, M, 3] world, unit */
    const int32_t* ray_order;   /* [C, M]: the caller's ray at each sorted place */
    const int32_t* cell_rays;   /* [C, cells + 1, 2]: sorted places [start, end); the last: rays in no cell */
    const double* cells;        /* [C, cells, NUREC_RAYS_CELL_SIZE] */
    const double* el_edges;     /* [C, GE + 1]: band i = [e_i, e_i+1); e_0, e_GE unused (unbounded) */
    const double* az_edges;     /* [C, GA + 1], azimuth from the sensor's origin, in (-pi, pi] */
    const double* sensor;       /* [C, NUREC_RAYS_SENSOR_SIZE] */

    /* intermediates */
    void* gauss;          /* [N, NUREC_RAYS_G_SIZE] */
    void* records;        /* [C, N, NUREC_TREC_SIZE] (the binning reads the depth) */
    int64_t* counts;      /* [C, N] */
    int32_t* boxes;       /* [C, N, NUREC_BOX_SIZE] */
    int64_t* offsets;     /* [C, N] */
    int64_t capacity;
    int32_t* isect_items; /* [capacity] */
    int64_t* tile_ranges; /* [C, GE, GA, 2] */
    int64_t* status;      /* [2] */
    void* workspace;
    size_t workspace_bytes;
    void* final_T; /* [C, M] */
    int32_t* last; /* [C, M]: the last list entry composited, -1 none */

    /* forward outputs (the caller's ray order) */
    void* out_features; /* [C, M, D] */
    void* range;        /* [C, M] */
    void* alpha;        /* [C, M] */

    /* backward */
    const void* grad_out_features; /* [C, M, D] */
    const void* grad_range;        /* [C, M] or NULL (zero) */
    const void* grad_alpha;        /* [C, M] or NULL (zero) */
    void* grad_gauss;              /* [N, NUREC_RAYS_GG_SIZE] accumulators (zeroed by the launcher) */
    void* grad_means, *grad_quats, *grad_scales, *grad_opacities, *grad_features;
} nurec_rasterize_rays_params;

/* CPU: per-Gaussian records, items and the exact intersection count. */
int nurec_rasterize_rays_project_cpu(const nurec_rasterize_rays_params* p, int64_t* total);
int nurec_rasterize_rays_forward_cpu(const nurec_rasterize_rays_params* p);
int nurec_rasterize_rays_backward_cpu(const nurec_rasterize_rays_params* p);

size_t nurec_rasterize_rays_workspace_bytes(const nurec_rasterize_rays_params* p);
int nurec_rasterize_rays_project_cuda(const nurec_rasterize_rays_params* p, void* stream);
int nurec_rasterize_rays_forward_cuda(const nurec_rasterize_rays_params* p, void* stream);
int nurec_rasterize_rays_backward_cuda(const nurec_rasterize_rays_params* p, void* stream);

/* The binning's params over this family's buffers. */
static inline nurec_tiles_params nurec_rasterize_rays_tiles(const nurec_rasterize_rays_params* p) {
    nurec_tiles_params t;
    t.dtype = p->dtype;
    t.num_images = p->num_sensors;
    t.items_per_image = p->num_gaussians;
    t.tiles_x = p->tiles_x;
    t.tiles_y = p->tiles_y;
    t.width = p->tiles_x * NUREC_TILE;
    t.height = p->tiles_y * NUREC_TILE;
    t.records = p->records;
    t.counts = p->counts;
    t.boxes = p->boxes;
    t.boxes_mixed = 0;
    t.offsets = p->offsets;
    t.capacity = p->capacity;
    t.isect_items = p->isect_items;
    t.tile_ranges = p->tile_ranges;
    t.status = p->status;
    t.workspace = p->workspace;
    t.workspace_bytes = p->workspace_bytes;
    return t;
}

#ifdef __cplusplus
}
#endif

#endif /* NUREC_RASTERIZE_RAYS_H */
