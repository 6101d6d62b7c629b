/* What the two rasterizers' C CPU launchers share, written once over the
 * fields of NUREC_SPLAT_PARAMS_FIELDS (tiles/splat.h), which both params
 * structs open with: the binning params of a call, and the three launchers
 * (projection + scan, binning + compositing, backward) that dispatch on the
 * dtype to a family's generic kernels. Macros, because C has no templates:
 * a family's rasterize_<family>_cpu.c expands them with its names. */
#ifndef NUREC_SPLAT_CPU_H
#define NUREC_SPLAT_CPU_H

#include <string.h>

#include "tiles/tiles.h"

/* Fills the binning params t of the call p (C sensors, a W x H cell grid). */
#define NUREC_SPLAT_TILES(p, t, C, W, H)             \
    do {                                              \
        memset((t), 0, sizeof(*(t)));                 \
        (t)->dtype = (p)->dtype;                      \
        (t)->num_images = (C);                        \
        (t)->items_per_image = (p)->num_gaussians;    \
        (t)->width = (W);                             \
        (t)->height = (H);                            \
        (t)->tiles_x = (p)->tiles_x;                  \
        (t)->tiles_y = (p)->tiles_y;                  \
        (t)->records = (p)->records;                  \
        (t)->counts = (p)->counts;                    \
        (t)->offsets = (p)->offsets;                  \
        (t)->capacity = (p)->capacity;                \
        (t)->isect_items = (p)->isect_items;          \
        (t)->tile_ranges = (p)->tile_ranges;          \
        (t)->status = (p)->status;                    \
        (t)->workspace = (p)->workspace;              \
        (t)->workspace_bytes = (p)->workspace_bytes;  \
    } while (0)

/* nurec_rasterize_<fam>_{project,forward,backward,median}_cpu over the
 * generic kernels <pre>_{project,forward,backward,median}_cpu_{f32,f64}; the family
 * defines nurec_rasterize_<fam>_tiles. */
#define NUREC_SPLAT_CPU_LAUNCHERS(fam, pre)                                                              \
    int nurec_rasterize_##fam##_project_cpu(const nurec_rasterize_##fam##_params* p, int64_t* total) {    \
        if (p->dtype == NUREC_F32) pre##_project_cpu_f32(p);                                            \
        else if (p->dtype == NUREC_F64) pre##_project_cpu_f64(p);                                       \
        else return NUREC_ERR_DTYPE;                                                                     \
        nurec_tiles_params t;                                                                            \
        nurec_rasterize_##fam##_tiles(p, &t);                                                            \
        *total = nurec_tiles_scan_cpu(&t);                                                               \
        return NUREC_OK;                                                                                 \
    }                                                                                                    \
    int nurec_rasterize_##fam##_forward_cpu(const nurec_rasterize_##fam##_params* p) {                    \
        nurec_tiles_params t;                                                                            \
        nurec_rasterize_##fam##_tiles(p, &t);                                                            \
        int st = nurec_tiles_bin_cpu(&t);                                                                \
        if (st != NUREC_OK) return st;                                                                   \
        if (p->dtype == NUREC_F32) return pre##_forward_cpu_f32(p);                                     \
        if (p->dtype == NUREC_F64) return pre##_forward_cpu_f64(p);                                     \
        return NUREC_ERR_DTYPE;                                                                          \
    }                                                                                                    \
    int nurec_rasterize_##fam##_backward_cpu(const nurec_rasterize_##fam##_params* p) {                   \
        if (p->dtype == NUREC_F32) return pre##_backward_cpu_f32(p);                                    \
        if (p->dtype == NUREC_F64) return pre##_backward_cpu_f64(p);                                    \
        return NUREC_ERR_DTYPE;                                                                          \
    }                                                                                                    \
    int nurec_rasterize_##fam##_median_cpu(const nurec_rasterize_##fam##_params* p) {                     \
        if (p->dtype == NUREC_F32) return pre##_median_cpu_f32(p);                                      \
        if (p->dtype == NUREC_F64) return pre##_median_cpu_f64(p);                                      \
        return NUREC_ERR_DTYPE;                                                                          \
    }

#endif /* NUREC_SPLAT_CPU_H */
