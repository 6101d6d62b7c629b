/* Tile binning shared by the Gaussian rasterizers (camera: pixels; lidar:
 * rays on a rows x columns grid). An "item" is one Gaussian seen by one
 * image (camera or lidar sweep): item p = image * items_per_image + gaussian.
 *
 * The caller's projection writes, per item, a record of NUREC_TREC_SIZE reals
 * (layout below) and the number of tiles its footprint touches (from
 * nurec_tile_count in tiles_math.h; 0 = culled). Binning then
 *   1. scans the counts into int64 offsets (64-bit: the number of item-tile
 *      intersections may pass 2^31),
 *   2. ranks the items by depth (a stable sort of the items' depths: equal
 *      depths keep item order),
 *   3. emits one key per intersection, (image*tiles + tile) << rank bits |
 *      the item's depth rank, with the item id as value (4-byte keys when
 *      that fits in 32 bits, else 8-byte),
 *   4. sorts the keys (stable radix sort over the bits that can be set),
 *   5. finds each tile's [start, end) range in the sorted list.
 * (The CPU does the same with one comparison sort on (tile, depth, item).)
 * Ranks instead of the depths' bits make the keys short (30 bits for the
 * street lidar against 43), so the big sort has fewer passes over fewer
 * bytes, for one small sort of the items; see csrc/tiles/tiles.cu.
 *
 * On CUDA nothing here synchronizes the host or allocates: the sort buffers
 * have a host-chosen `capacity`. The device writes `status = (needed,
 * overflowed)`; an overflowing call writes only the first `capacity`
 * intersections (never out of bounds) and the rasterizer, reading
 * `status[1]`, marks its outputs invalid (NaN) instead of rendering a wrong
 * image. The host policy that chooses the capacity lives in Python
 * (nurec_ops/_binning.py). On the CPU binning is exact: the count is known
 * before the buffers are allocated. */
#ifndef NUREC_TILES_H
#define NUREC_TILES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status of a host allocation that failed (CPU binning scratch). */
#define NUREC_ERR_TILES_ALLOC 64

/* Cells (pixels / rays) per tile side. */
#define NUREC_TILE 16

/* Per-item record written by a projection (reals, NUREC_TREC_SIZE each). The
 * footprint is the ellipse d^T Q d <= thr around (u, v) in cell units, Q the
 * conic (A, B; B, C); a cell is reached when its centre (x + 0.5, y + 0.5) is
 * inside. */
#define NUREC_TREC_U 0
#define NUREC_TREC_V 1
#define NUREC_TREC_A 2
#define NUREC_TREC_B 3
#define NUREC_TREC_C 4
#define NUREC_TREC_O 5     /* opacity */
#define NUREC_TREC_DEPTH 6 /* sort key (camera z, lidar range) */
#define NUREC_TREC_THR 7   /* footprint threshold; < 0: culled */
#define NUREC_TREC_SIZE 8

typedef struct nurec_tiles_params {
    int dtype;                /* enum nurec_dtype of `records` */
    int64_t num_images;       /* C */
    int64_t items_per_image;  /* N; items P = C * N (< 2^31); C * tiles < 2^31 */
    int width, height;        /* cells of one image */
    int tiles_x, tiles_y;     /* ceil(width / NUREC_TILE), ceil(height / NUREC_TILE) */
    const void* records;      /* [P, NUREC_TREC_SIZE] real */
    const int64_t* counts;    /* [P] tiles per item (written by the projection) */
    /* NULL: each item's tiles are those its ellipse crosses (records, cell
     * units of a regular width x height grid: the camera). Otherwise [P, 6]
     * int32 tile rectangles (ty0, ty1, tx0, ntx, cut_lo, cut_hi) written by
     * the projection: tile rows ty0..ty1, and the ntx <= tiles_x tile
     * columns tx0, tx0 + 1, ... taken modulo tiles_x (a rectangle may wrap
     * around the last column: the lidar's azimuth seam), less the cells cut
     * out: bit q of the 64-bit cut (cut_hi above cut_lo) drops the q-th
     * tile of the rectangle in row-major order (tiles past the 64th are
     * never cut; all bits 0: the whole rectangle). counts must equal
     * nurec_box_count, except where the rectangle is empty (no cells) and
     * the count positive: that item's tiles are its footprint's, as with
     * boxes NULL (the camera's items of more than 64 cells,
     * nurec_footprint_box). */
    const int32_t* boxes;
    int boxes_mixed;          /* CUDA: 1 where some boxes are empty footprints (the camera) */
    int64_t* offsets;         /* [P] out: inclusive scan of counts */
    int64_t capacity;         /* entries of the sorted list (CUDA: host-chosen) */
    int32_t* isect_items;     /* [capacity] out: item of each sorted entry */
    int64_t* tile_ranges;     /* [C * tiles_y * tiles_x, 2] out: [start, end) */
    int64_t* status;          /* [2] out: needed entries, overflowed (0/1) */
    void* workspace;          /* CUDA: nurec_tiles_workspace_bytes() bytes */
    size_t workspace_bytes;
} nurec_tiles_params;

#define NUREC_BOX_SIZE 6

/* CPU, exact. nurec_tiles_scan_cpu fills offsets and returns the total;
 * the caller allocates `isect_items` of that size (capacity = total) and
 * calls nurec_tiles_bin_cpu. */
int64_t nurec_tiles_scan_cpu(const nurec_tiles_params* p);
int nurec_tiles_bin_cpu(const nurec_tiles_params* p);

/* CUDA: bytes of scratch for one binning of this size (host arithmetic
 * only), then the whole binning on `stream`, without host synchronization. */
size_t nurec_tiles_workspace_bytes(const nurec_tiles_params* p);
int nurec_tiles_bin_cuda(const nurec_tiles_params* p, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* NUREC_TILES_H */
