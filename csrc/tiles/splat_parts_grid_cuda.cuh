/* The grids of the per-tile walks when long lists are cut into parts (CUDA;
 * both rasterizers' forward walk, second walk and backward).
 *
 * Why: a grid with a block for every (tile, part) up to p.segments launched
 * ~40,000 blocks per kernel on three 648x420 garden cameras (16 parts, most
 * tiles with one) that only left at once: ~70 us of its fwd+bwd (H200).
 * Here the first parts keep a block per tile, and the later
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
 *   (camera, pass, tile)'s first part, in the 3-D grid's order; the
 *   p.seg_chunks x passes blocks after them (pass-major) each take a chunk's
 *   later part, or leave. So every later part is dispatched after every
 *   first part of its pass (its walk looks for the cells an earlier part
 *   already stopped: p.last), and the grid has at most capacity /
 *   segment_min later-part blocks whatever p.segments is. A second walk
 *   launches the later parts alone (p.block_base).
 *
 * Where no list is cut (p.seg_chunks = 0) the walks keep the 3-D grid (x:
 * tile column x slices, y: tile row, z: (image, pass, part)) in kernels of
 * their own (kList false): the list grid's decode and load on every
 * block's path made the camera backward's innermost loops 8 SASS
 * instructions longer (ptxas schedules a kernel as a whole), and three
 * 1944x1260 garden cameras, uncut, ran fwd+bwd 65 us slower (H200).
 * The list grid's later parts in a kernel of their own instead, after
 * the first parts', serialized the two: the small garden
 * +210 us, the lidar street +280 (a tile's later parts waited for every
 * first part to end), not kept.
 *
 * The dense layout, the 3-D grid with a block per (tile, part) for every
 * part up to p.grid_parts = p.segments: NUREC_OPS_SPLAT_PARTS_DENSE=1, for
 * measuring; both give the same bits. */
#ifndef NUREC_SPLAT_PARTS_GRID_CUDA_CUH
#define NUREC_SPLAT_PARTS_GRID_CUDA_CUH

#include <stdlib.h>

#include "tiles/splat.h"
#include "tiles/splat_math.h"

/* What one block of a per-tile walk works on. */
typedef struct nurec_splat_block {
    int64_t tile;  /* over all images: (image, tile row, tile column) */
    int64_t image; /* its image (camera or sweep) */
    int tx, ty;    /* its tile column and row */
    int pass, seg;
    int slice;     /* which of the tile's `slices` blocks */
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

/* Fills the later parts' list at p.seg_later (the launcher's params as the
 * glue bound them: nurec_splat_part_chunks entries, whichever grid the walks
 * take, so that the forward's output is defined in the dense layout too);
 * nothing where there are none, or where it holds the forward's list
 * already (a backward given the forward's output). Returns 0, or the CUDA
 * error. */
template <typename Params>
cudaError_t nurec_splat_later_parts(const Params& p, int64_t ntiles, cudaStream_t s) {
    const int64_t chunks = nurec_splat_part_chunks(p.segments, p.capacity, p.segment_min);
    if (chunks <= 0 || !p.seg_later || p.seg_later_filled) return cudaSuccess;
    cudaError_t e = cudaMemsetAsync(p.seg_later, 0xff, sizeof(int64_t) * (size_t)chunks, s);
    if (e != cudaSuccess || ntiles == 0) return e;
    const unsigned threads = 256, blocks = (unsigned)((ntiles + threads - 1) / threads);
    nurec_splat_later_parts_kernel<<<blocks, threads, 0, s>>>(p.tile_ranges, p.status, ntiles, p.segments,
                                                              p.segment_min, chunks, p.seg_later);
    return cudaGetLastError();
}

/* The block's (tile, pass, part, slice) in a walk's kernel on the 3-D grid
 * (kList false: no list cut, or the dense layout) or on the list's grid
 * (kList true: one dimension, p.block_base added to blockIdx.x); false: a
 * chunk where no later part starts (uniform over the block: it leaves). The
 * list's grid decodes in 32 bits (the glue keeps it and the tiles of all
 * `images` under 2^31): a block pays this before any work, and with 64-bit
 * divisions, emulated, three 1944x1260 garden cameras ran fwd+bwd 95 us
 * slower than on the 3-D grid, in 32 bits 65 us (H200). */
template <bool kList, typename Params>
__device__ __forceinline__ bool nurec_splat_block_of(const Params& p, int64_t images, int passes, int slices,
                                                     nurec_splat_block* o) {
    if (!kList) {
        const int nseg = p.grid_parts;
        const int64_t czp = blockIdx.z / nseg;
        o->seg = (int)(blockIdx.z - czp * nseg);
        o->image = czp / passes;
        o->pass = (int)(czp - o->image * passes);
        o->tx = blockIdx.x / slices;
        o->slice = blockIdx.x - o->tx * slices;
        o->ty = blockIdx.y;
        o->tile = (o->image * p.tiles_y + o->ty) * p.tiles_x + o->tx;
        return true;
    }
    const unsigned g = blockIdx.x + (unsigned)p.block_base;
    const unsigned b = slices == 1 ? g : g / (unsigned)slices;
    o->slice = (int)(g - b * (unsigned)slices);
    const unsigned X = (unsigned)p.tiles_x, T = X * (unsigned)p.tiles_y, P = (unsigned)passes;
    const unsigned first = (unsigned)images * P * T;
    unsigned img, in_image;
    if (b < first) { /* (image, pass, tile), the tile fastest: the 3-D grid's order */
        const unsigned r = b / T;
        in_image = b - r * T;
        img = P == 1 ? r : r / P;
        o->pass = (int)(r - img * P);
        o->seg = 0;
        o->tile = (int64_t)img * T + in_image;
    } else {
        const unsigned e = b - first, C = (unsigned)p.seg_chunks;
        const unsigned pass = P == 1 ? 0u : e / C;
        o->pass = (int)pass;
        const int64_t v = p.seg_later[e - pass * C];
        if (v < 0) return false;
        const unsigned t = (unsigned)(v / NUREC_SPLAT_MAX_SEGMENTS); /* a power of two: a shift */
        o->seg = (int)(v - (int64_t)t * NUREC_SPLAT_MAX_SEGMENTS);
        o->tile = t;
        img = t / T;
        in_image = t - img * T;
    }
    o->image = img;
    o->ty = (int)(in_image / X);
    o->tx = (int)(in_image - (unsigned)o->ty * X);
    return true;
}

/* A launcher's copy of its params with the walks' grids chosen, for
 * `image_passes` images x channel passes: the later parts' list at
 * `p->seg_later` (the forward's output, which its backward takes back;
 * NULL, or no list cut: none), or the dense layout where its z (image_passes x segments)
 * fits a grid (the glue checked the compact layout's). */
template <typename Params>
Params nurec_splat_with_parts_grid(const Params* p, int64_t image_passes) {
    Params q = *p;
    const int64_t chunks = nurec_splat_part_chunks(p->segments, p->capacity, p->segment_min);
    const bool dense = nurec_splat_parts_dense() && p->segments > 1 && image_passes * p->segments <= 65535;
    q.seg_chunks = p->seg_later && !dense ? chunks : 0;
    q.seg_later = q.seg_chunks > 0 ? p->seg_later : NULL;
    q.grid_parts = dense ? p->segments : 1;
    q.block_base = 0;
    return q;
}

/* One walk of the tiles of `images` images: where lists are cut, the
 * list's grid (first parts, then the chunks' later parts; `second`: a
 * second walk, where first parts have nothing to do, the later parts
 * alone), else the 3-D grid (every part in it, dense). */
template <typename Params, typename... Args>
void nurec_splat_walk(void (*grid3d)(Params, Args...), void (*list)(Params, Args...), const Params& q,
                      int64_t images, int passes, int slices, unsigned threads, cudaStream_t s, bool second,
                      Args... args) {
    if (q.seg_chunks == 0) {
        grid3d<<<dim3((unsigned)(q.tiles_x * slices), (unsigned)q.tiles_y, (unsigned)(images * passes * q.grid_parts)),
                 threads, 0, s>>>(q, args...);
        return;
    }
    Params r = q;
    const int64_t first = images * passes * (int64_t)q.tiles_x * q.tiles_y;
    const int64_t skip = second ? first : 0;
    r.block_base = skip * slices;
    list<<<dim3((unsigned)((first + (int64_t)passes * q.seg_chunks - skip) * slices)), threads, 0, s>>>(r, args...);
}

/* A walk kernel on both grids (kList false, true), as the entries of a
 * list of kernels; `...`: the template arguments before kList. */
#define NUREC_SPLAT_BOTH_GRIDS(kernel, ...) (const void*)kernel<__VA_ARGS__, false>, (const void*)kernel<__VA_ARGS__, true>
#define NUREC_SPLAT_BOTH_GRIDS1(kernel) (const void*)kernel<false>, (const void*)kernel<true>

/* A family's shared-memory carveout preferences for its walks: the
 * forward's kernels at fwd_carveout, the backward's at bwd_carveout. Set
 * once per process (`*done`): they are not stream operations, and each
 * cudaFuncSetAttribute is host time. */
template <size_t F, size_t B>
void nurec_splat_set_carveouts(bool* done, const void* const (&fwd)[F], int fwd_carveout,
                               const void* const (&bwd)[B], int bwd_carveout) {
    if (*done) return;
    *done = true;
    for (const void* k : fwd) cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, fwd_carveout);
    for (const void* k : bwd) cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, bwd_carveout);
    cudaGetLastError();
}

#endif /* NUREC_SPLAT_PARTS_GRID_CUDA_CUH */
