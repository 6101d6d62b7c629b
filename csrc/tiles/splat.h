/* Constants of Gaussian splatting shared by the rasterizers (camera, lidar):
 * the SPEC section 3 compositing rules, which section 4 reuses "exactly".
 * Plain C, includable from the C++ glue. The per-element math that uses them
 * is in tiles/splat_math.h. */
#ifndef NUREC_SPLAT_H
#define NUREC_SPLAT_H

#define NUREC_SPLAT_ALPHA_MIN (1.0 / 255.0)
#define NUREC_SPLAT_ALPHA_MAX 0.99
#define NUREC_SPLAT_T_MIN 1e-4 /* stop before T would fall below this */
/* Margin on the footprint threshold 2 ln(255 o) (in units of d^T Q d), so
 * that rounding in the per-cell alpha can never reach outside the tiles. */
#define NUREC_SPLAT_THR_MARGIN 0.01
/* Per-item gradient record written by a rasterization backward:
 * gu, gv, gA, gB, gC, go, gdepth, unused (u, v, A, B, C, o, depth as in the
 * tile record, tiles.h). */
#define NUREC_SPLAT_GREC_SIZE 8
/* With SPEC 8's absgrad the record's row has 16 slots and absgrad's pair
 * sits in slots 8, 9: the row is 64 bytes (float32), so the warp's atomics
 * of a Gaussian's record and absgrad meet one cache line, in one atomic
 * instruction (splat_warp_add), where a [C, N, 2] array of its own made them
 * a third line and a third instruction per (entry, warp). */
#define NUREC_SPLAT_GREC_ABS_SIZE 16
#define NUREC_SPLAT_GREC_ABS 8
#define NUREC_SPLAT_GREC_ROW(absgrad) ((absgrad) ? NUREC_SPLAT_GREC_ABS_SIZE : NUREC_SPLAT_GREC_SIZE)

/* Long tile lists cut into parts (CUDA): flags in a part's per-cell last
 * entry (seg_last). The part's own compositing reached the transmittance
 * cut-off; the cell's cut-off falls in this part, which is composited again
 * from the cell's transmittance at its start. The rest is the last entry. */
#define NUREC_SPLAT_SEG_STOPPED 0x40000000
#define NUREC_SPLAT_SEG_FIXUP 0x20000000
#define NUREC_SPLAT_SEG_LAST 0x1fffffff
#define NUREC_SPLAT_MAX_SEGMENTS 64

/* A cell's median item (rasterize_*_median): the item (camera x N +
 * Gaussian) whose entry takes the cell's transmittance to at most one half,
 * or one of these. */
#define NUREC_SPLAT_MEDIAN_NONE -1     /* T stays above one half (alpha < 0.5) */
#define NUREC_SPLAT_MEDIAN_OVERFLOW -2 /* the forward's binning overflowed (CUDA): no list to walk */

/* The fields both rasterizers' params structs share, declared once: a C
 * base struct (flash-attention's Qkv_params is a C++ one). Each params
 * struct opens with these, then adds its sensor count and cell grid, its
 * sensor's own inputs and its outputs' names; the shared glue and kernels
 * (tiles/splat_glue.h, tiles/) read these by one name. C is the struct's
 * sensor count; D the feature channels; "cell" a pixel or a lidar ray. */
#define NUREC_SPLAT_PARAMS_FIELDS \
    int dtype;               /* enum nurec_dtype */ \
    int64_t num_gaussians;   /* N */ \
    int tiles_x, tiles_y;    /* the cell grid's tiles */ \
    int64_t channels;        /* D */ \
    double near_plane, far_plane; \
    /* inputs, dense */ \
    const void* means;       /* [N, 3] */ \
    const void* quats;       /* [N, 4] */ \
    const void* scales;      /* [N, 3] */ \
    const void* opacities;   /* [N] */ \
    const void* features;    /* [N, D] (the camera's SH: [N, K, 3]) */ \
    const void* viewmats;    /* [C, 4, 4] world -> sensor */ \
    /* SPEC 7's rolling shutter: NULL for a global shutter */ \
    const void* viewmats_end; /* [C, 4, 4] world -> sensor at the frame's or sweep's end */ \
    void* taus;              /* [C, N] each item's own time (forward writes, backward reads) */ \
    /* intermediates (forward writes, backward reads) */ \
    void* records;           /* [C, N, NUREC_TREC_SIZE] */ \
    int64_t* counts;         /* [C * N] */ \
    int64_t* offsets;        /* [C * N] */ \
    int32_t* isect_items;    /* [capacity] */ \
    int64_t capacity; \
    int64_t* tile_ranges;    /* [C, tiles_y, tiles_x, 2] */ \
    int64_t* status;         /* [2] needed intersections, overflowed */ \
    void* final_T;           /* [C, cells] */ \
    int32_t* last;           /* [C, cells] entries consumed per cell (from the tile start) */ \
    /* Long lists cut into parts (CUDA only; 0 or 1: none): a tile whose */ \
    /* list is longer than segment_min is composited by up to `segments` */ \
    /* blocks, each on its own part from T = 1, chained per cell. */ \
    int segments; \
    int64_t segment_min; \
    /* per part slot (nurec_splat_part_slot) and cell of its tile: */ \
    int64_t seg_slots;       /* slots of seg_state / seg_last */ \
    int seg_shift;           /* how a part finds its slot (nurec_splat_part_layout) */ \
    void* seg_state;         /* [seg_slots, cells per tile, D + 2]: features, depth, T */ \
    int32_t* seg_last;       /* [seg_slots, cells per tile]: last entry | NUREC_SPLAT_SEG_* flags */ \
    /* the walks' grid (tiles/splat_parts_grid_cuda.cuh; set by the launcher): */ \
    int64_t seg_chunks;      /* chunks of segment_min entries; 0: the 3-D grid (no list cut, or dense) */ \
    int64_t* seg_later;      /* [seg_chunks] the later part starting in each chunk, -1: none */ \
    int seg_later_filled;    /* 1: seg_later holds the forward's list (a backward does not build it again) */ \
    int grid_parts;          /* parts per tile in the 3-D grid: segments dense, else 1 */ \
    int64_t block_base;      /* added to blockIdx.x in the list's grid (a launch of the later parts alone) */ \
    void* workspace;         /* CUDA binning scratch */ \
    size_t workspace_bytes; \
    void* alpha;             /* [C, cells] forward output */ \
    int32_t* median_items;   /* [C, cells] rasterize_*_median's output (user's cell order) */ \
    /* SPEC 8's meta, written by the projection where asked for (NULL: not) */ \
    void* meta_means2d;      /* [C, N, 2] */ \
    int32_t* meta_radii;     /* [C, N, 2] */ \
    void* meta_depths;       /* [C, N] */ \
    const void* meta_cell;   /* [2] real on the device (a lidar cell), or NULL: */ \
    double meta_cell_u, meta_cell_v; /* a cell's size in the records' units */ \
    /* backward */ \
    const void* grad_alpha;  /* [C, cells], or NULL: zero (a loss that reads no alpha) */ \
    void* grad_records;      /* [C, N, NUREC_SPLAT_GREC_ROW(absgrad)] scratch, zeroed by the launcher */ \
    int absgrad;             /* SPEC 8's absgrad in the records' slots 8, 9 (one pass of channels) */ \
    void* grad_means2d;      /* [C, N, 2] SPEC 8's means2d gradient (the records' first two), or NULL */ \
    void* grad_means;        /* [N, 3] */ \
    void* grad_quats;        /* [N, 4] */ \
    void* grad_scales;       /* [N, 3] */ \
    void* grad_opacities;    /* [N] */ \
    void* grad_features;     /* as features */

#endif /* NUREC_SPLAT_H */
