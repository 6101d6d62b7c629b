/* The grid of the per-tile walks when long lists are cut into parts (CUDA;
 * both rasterizers' forward walk, second walk and backward).
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
 * (the second walk, where first parts have nothing to do). Both
 * rasterizers' walks take this grid (the camera's and the lidar's). */
#ifndef NUREC_SPLAT_PARTS_GRID_CUDA_CUH
#define NUREC_SPLAT_PARTS_GRID_CUDA_CUH

#include <stdlib.h>

#include "tiles/splat.h"
#include "tiles/splat_math.h"

/* What one block of a per-tile walk works on. */
typedef struct nurec_splat_block {
    int64_t tile;     /* over all images: (image, tile row, tile column) */
    int64_t image;    /* its image (camera or sweep) */
    unsigned in_image; /* its place in the image's tiles, row-major */
    int pass, seg;
    int slice;        /* which of the tile's `slices` blocks */
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

/* Units (a unit: `slices` blocks) of the first parts (or of every part,
 * dense) and of the whole grid, for `tiles` tiles per image and `images`
 * images. */
template <typename Params>
__host__ __device__ inline int64_t nurec_splat_first_units(const Params& p, int64_t images, int64_t tiles,
                                                           int passes) {
    const int64_t dense = p.seg_chunks == 0 && p.segments > 1 ? p.segments : 1;
    return images * passes * tiles * dense;
}

template <typename Params>
__host__ __device__ inline int64_t nurec_splat_grid_units(const Params& p, int64_t images, int64_t tiles,
                                                          int passes) {
    return nurec_splat_first_units(p, images, tiles, passes) + (int64_t)passes * p.seg_chunks;
}

/* Block blockIdx.x + p.block_base's (tile, pass, part, slice); false: a
 * chunk where no later part starts (uniform over the block: it leaves). In
 * 32 bits (the glue keeps the grid under 2^31 blocks, and the tiles of all
 * images under 2^31): a block pays this before any work, and with 64-bit
 * divisions, emulated, three 1944x1260 garden cameras (87,000 blocks a
 * kernel, no parts) ran fwd+bwd 95 us slower than on the old 3-D grid, in
 * 32 bits 65 us (H200, session 23; the rest is not explained yet). */
template <typename Params>
__device__ __forceinline__ bool nurec_splat_block_of(const Params& p, int64_t images, int64_t tiles, int passes,
                                                     int slices, nurec_splat_block* o) {
    (void)images;
    const unsigned g = blockIdx.x + (unsigned)p.block_base;
    const unsigned b = slices == 1 ? g : g / (unsigned)slices;
    o->slice = (int)(g - b * (unsigned)slices);
    const unsigned T = (unsigned)tiles, P = (unsigned)passes;
    const unsigned first = (unsigned)nurec_splat_first_units(p, images, tiles, passes);
    if (b < first) { /* (image, pass, part, tile), the tile fastest: the old 3-D grid's order */
        const unsigned nseg = p.seg_chunks == 0 && p.segments > 1 ? (unsigned)p.segments : 1u;
        unsigned r = b / T;
        o->in_image = b - r * T;
        unsigned seg = 0;
        if (nseg > 1) {
            const unsigned q = r / nseg;
            seg = r - q * nseg;
            r = q;
        }
        o->seg = (int)seg;
        const unsigned img = P == 1 ? r : r / P;
        o->pass = (int)(r - img * P);
        o->image = img;
        o->tile = (int64_t)img * T + o->in_image;
        return true;
    }
    const unsigned e = b - first;
    const unsigned C = (unsigned)p.seg_chunks;
    const unsigned pass = P == 1 ? 0u : e / C;
    o->pass = (int)pass;
    const int64_t v = p.seg_later[e - pass * C];
    if (v < 0) return false;
    const unsigned t = (unsigned)(v / NUREC_SPLAT_MAX_SEGMENTS); /* a power of two: a shift */
    o->seg = (int)(v - (int64_t)t * NUREC_SPLAT_MAX_SEGMENTS);
    o->tile = t;
    o->image = t / T;
    o->in_image = t - (unsigned)o->image * T;
    return true;
}

/* A launcher's copy of its params with the walks' grid chosen: the later
 * parts' list at `later` (the forward's workspace, the backward's own
 * buffer; NULL where lists are not cut), or the dense layout. */
template <typename Params>
Params nurec_splat_with_parts_grid(const Params* p, int64_t* later) {
    Params q = *p;
    q.seg_chunks = later && !nurec_splat_parts_dense()
                       ? nurec_splat_part_chunks(p->segments, p->capacity, p->segment_min) : 0;
    q.seg_later = later;
    q.block_base = 0;
    return q;
}

/* Where the forward's later-parts list lies in its workspace: after the
 * binning's `tiles_bytes`; and the workspace's whole size. */
static inline size_t nurec_splat_later_offset(size_t tiles_bytes) { return (tiles_bytes + 255) & ~(size_t)255; }

template <typename Params>
size_t nurec_splat_workspace_bytes(const Params* p, size_t tiles_bytes) {
    if (tiles_bytes == 0) return 0;
    return nurec_splat_later_offset(tiles_bytes) +
           sizeof(int64_t) * (size_t)nurec_splat_part_chunks(p->segments, p->capacity, p->segment_min);
}

/* The grid of a second walk: the later parts alone (first parts are never
 * walked again), or, dense, the whole grid. Sets q's block_base. */
template <typename Params>
dim3 nurec_splat_later_grid(Params* q, int64_t images, int64_t tiles, int passes, int slices) {
    if (q->seg_chunks == 0) return dim3((unsigned)(nurec_splat_grid_units(*q, images, tiles, passes) * slices));
    q->block_base = nurec_splat_first_units(*q, images, tiles, passes) * slices;
    return dim3((unsigned)((int64_t)passes * q->seg_chunks * slices));
}

#endif /* NUREC_SPLAT_PARTS_GRID_CUDA_CUH */
