/* The grid of the per-tile walks when long lists are cut into parts (CUDA;
 * the camera rasterizer's forward walk, its second walk and its backward).
 *
 * Why: a grid with a block for every (tile, part) up to p.segments launched
 * ~40,000 blocks per kernel on three 648x420 garden cameras (16 parts, most
 * tiles with one) that only left at once: ~70 us of its fwd+bwd (H200,
 * session 22). Here the first parts keep a block per tile, and the later
 * parts (1 and up) get a compact list instead, with no count read back:
 *
 * - Cut the sorted intersection list into chunks of segment_min entries
 *   (p.seg_chunks = ceil(capacity / segment_min), host-known). A later part
 *   starts in exactly one chunk, and no chunk holds the starts of two later
 *   parts: the parts of a list are at least segment_min long, and a later
 *   part of the next list starts at least segment_min past the last start
 *   of this one.
 * - p.seg_later[chunk] = tile x NUREC_SPLAT_MAX_SEGMENTS + part for the
 *   later part that starts there, -1 for none (a memset and one thread per
 *   tile: nurec_splat_later_parts).
 * - Block b of a one-dimensional grid: b < C x passes x tiles per image is
 *   (camera, pass, tile)'s first part, in the old grid's order; the
 *   p.seg_chunks x passes blocks after them (pass-major) each take a chunk's
 *   later part, or leave. So every later part is dispatched after every
 *   first part of its pass, as before (its walk looks for the cells an
 *   earlier part already stopped: p.last), and the grid has at most
 *   capacity / segment_min later-part blocks whatever p.segments is.
 *
 * p.seg_chunks = 0 keeps the dense layout (a block per (tile, part) for
 * every part up to p.segments, in the same one-dimensional grid):
 * NUREC_OPS_SPLAT_PARTS_DENSE=1, for measuring; both give the same bits.
 * p.block_base offsets blockIdx.x, for a launch of only the later parts
 * (the second walk, where first parts have nothing to do). */
#ifndef NUREC_SPLAT_PARTS_GRID_CUDA_CUH
#define NUREC_SPLAT_PARTS_GRID_CUDA_CUH

#include <stdlib.h>

#include "tiles/splat.h"
#include "tiles/splat_math.h"

/* What one block of a per-tile walk works on. */
typedef struct nurec_splat_block {
    int64_t tile; /* over all images: (image, tile row, tile column) */
    int pass, seg;
} nurec_splat_block;

/* The later parts' list (see above), from the tile ranges of the binning
 * (one thread per tile of every image). An overflowed binning cuts nothing
 * (its walks write NaN outputs from the first parts alone). */
static __global__ void nurec_splat_later_parts_kernel(const int64_t* tile_ranges, const int64_t* status, int64_t ntiles,
                                               int segments, int64_t segment_min, int64_t chunks, int64_t* later) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= ntiles || status[1] != 0) return;
    const int64_t start = tile_ranges[2 * t], len = tile_ranges[2 * t + 1] - start;
    int64_t seg_len;
    const int n = nurec_splat_segment_count(segments, segment_min, len, &seg_len);
    for (int k = 1; k < n; ++k) {
        const int64_t c = (start + k * seg_len) / segment_min;
        if (c < chunks) later[c] = t * NUREC_SPLAT_MAX_SEGMENTS + k;
    }
}

/* Whether the walks take the dense layout (the environment's choice, read
 * at each call so that a test can compare both in one process). */
static inline int nurec_splat_parts_dense(void) {
    const char* e = getenv("NUREC_OPS_SPLAT_PARTS_DENSE");
    return e && e[0] == '1';
}

/* Fills the later parts' list of p (p.seg_chunks entries at p.seg_later;
 * nothing where there are none). Returns 0, or the CUDA error. */
template <typename Params>
cudaError_t nurec_splat_later_parts(const Params& p, int64_t ntiles, cudaStream_t s) {
    if (p.seg_chunks <= 0) return cudaSuccess;
    cudaError_t e = cudaMemsetAsync(p.seg_later, 0xff, sizeof(int64_t) * (size_t)p.seg_chunks, s);
    if (e != cudaSuccess || ntiles == 0) return e;
    const unsigned threads = 256, blocks = (unsigned)((ntiles + threads - 1) / threads);
    nurec_splat_later_parts_kernel<<<blocks, threads, 0, s>>>(p.tile_ranges, p.status, ntiles, p.segments,
                                                              p.segment_min, p.seg_chunks, p.seg_later);
    return cudaGetLastError();
}

/* Blocks of the first parts (or of every part, dense) and of the later
 * parts' list, for `tiles` tiles per image and `images` images. */
template <typename Params>
__host__ __device__ inline int64_t nurec_splat_first_blocks(const Params& p, int64_t images, int64_t tiles,
                                                            int passes) {
    const int64_t dense = p.seg_chunks == 0 && p.segments > 1 ? p.segments : 1;
    return images * passes * tiles * dense;
}

template <typename Params>
__host__ __device__ inline int64_t nurec_splat_grid_blocks(const Params& p, int64_t images, int64_t tiles,
                                                           int passes) {
    return nurec_splat_first_blocks(p, images, tiles, passes) + (int64_t)passes * p.seg_chunks;
}

/* Block b's (tile, pass, part); false: a chunk where no later part starts
 * (uniform over the block: it leaves). */
template <typename Params>
__device__ __forceinline__ bool nurec_splat_block_of(const Params& p, int64_t images, int64_t tiles, int passes,
                                                     nurec_splat_block* o) {
    int64_t b = (int64_t)blockIdx.x + p.block_base;
    const int64_t first = nurec_splat_first_blocks(p, images, tiles, passes);
    if (b < first) { /* (image, pass, part, tile), the tile fastest: the old 3-D grid's order */
        const int nseg = p.seg_chunks == 0 && p.segments > 1 ? p.segments : 1;
        const int64_t tin = b % tiles, r = b / tiles;
        o->seg = (int)(r % nseg);
        const int64_t ip = r / nseg;
        o->pass = (int)(ip % passes);
        o->tile = (ip / passes) * tiles + tin;
        return true;
    }
    b -= first;
    o->pass = (int)(b / p.seg_chunks);
    const int64_t v = p.seg_later[b - o->pass * p.seg_chunks];
    if (v < 0) return false;
    o->tile = v / NUREC_SPLAT_MAX_SEGMENTS;
    o->seg = (int)(v - o->tile * NUREC_SPLAT_MAX_SEGMENTS);
    return true;
}

#endif /* NUREC_SPLAT_PARTS_GRID_CUDA_CUH */
