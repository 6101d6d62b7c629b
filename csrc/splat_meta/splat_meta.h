/* splat_meta (SPEC section 8): per sensor and Gaussian, the projected mean,
 * the half-extents of the binning's bounding box and the depth, read off a
 * rasterizer forward's records in one pass (one kernel on CUDA instead of a
 * dozen small tensor ops). Shared by the camera and lidar rasterizers. Plain
 * C params struct and launchers; the per-item math is in
 * splat_meta_math.h, shared by CPU and CUDA. */
#ifndef NUREC_SPLAT_META_H
#define NUREC_SPLAT_META_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nurec_splat_meta_params {
    int dtype;              /* enum nurec_dtype of the real tensors */
    int64_t num_items;      /* C * N */
    const void* records;    /* [C, N, NUREC_TREC_SIZE] real (tiles/tiles.h layout) */
    const int64_t* counts;  /* [C, N] tiles per item (0: dropped by the binning) */
    /* a cell's size in the records' units (camera: 1 pixel), or cell [2]
     * real on the device (lidar: mean column and row spacing) if not NULL */
    double cell_u, cell_v;
    const void* cell;
    /* outputs */
    void* means2d;          /* [C, N, 2] real */
    int32_t* radii;         /* [C, N, 2] */
    void* depths;           /* [C, N] real */
} nurec_splat_meta_params;

int nurec_splat_meta_cpu(const nurec_splat_meta_params* p);
int nurec_splat_meta_cuda(const nurec_splat_meta_params* p, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* NUREC_SPLAT_META_H */
