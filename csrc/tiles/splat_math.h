/* Per-element math shared by the Gaussian rasterizers (camera and lidar), C99
 * and CUDA, float and double: the 3D covariance factor R Rq diag(s), the 2D
 * covariance and its conic, alpha of a record at an offset d, the
 * back-to-front compositing step, and their VJPs. What differs between the
 * sensors (the projection of the mean and its Jacobian, the cell
 * coordinates) stays in each family's math header. */
#ifndef NUREC_SPLAT_MATH_H
#define NUREC_SPLAT_MATH_H

#include "math/defs.h"
#include "math/quat.h"
#include "tiles/splat.h"
#include "tiles/tiles.h"

/* Parts of a long tile list (CUDA, both rasterizers): the number of parts
 * of a list of len entries, cut into at most `segments` parts of at least
 * segment_min entries (1: not cut), and their length. */
NUREC_HD int nurec_splat_segment_count(int segments, int64_t segment_min, int64_t len, int64_t* seg_len) {
    if (segments <= 1 || len <= segment_min) {
        *seg_len = len;
        return 1;
    }
    int64_t n = (len + segments - 1) / segments;
    n = n < segment_min ? segment_min : n;
    *seg_len = n;
    return (int)((len + n - 1) / n);
}

/* Where the parts keep their per-cell state (CUDA): in slots of a tile's
 * cells, one slot per part. Dense per (tile, part), most of the state
 * belonged to parts that tiles do not have, and its memset took ~60 us of
 * every street camera or 648x420 x3 garden forward. A part seg of the list
 * that starts at sorted entry `start` takes slot (2 start >> shift) + seg,
 * 2^shift the largest power of two m <= segment_min (a shift: a 64-bit
 * division spilled the lidar backward). Slots of different tiles never
 * meet: a list of len > segment_min >= m entries has at most ceil(len / m)
 * <= floor(2 len / m) parts, so 2 capacity / m slots hold every part of a
 * call that did not overflow (an overflowed one cuts no list). Where one
 * slot per (tile, part) is fewer (a small segment_min), slot tile x segments
 * + seg (shift = -1). Returns the slots; the same on host and device. */
NUREC_HD int64_t nurec_splat_part_layout(int64_t capacity, int64_t segment_min, int segments, int64_t tiles,
                                         int* shift) {
    int k = 0;
    while (k < 62 && (segment_min >> (k + 1)) != 0) ++k;
    const int64_t by_start = capacity > 0 ? (2 * capacity) >> k : 0;
    const int64_t by_tile = (int64_t)segments * tiles;
    *shift = by_start <= by_tile ? k : -1;
    return by_start <= by_tile ? by_start : by_tile;
}

NUREC_HD int64_t nurec_splat_part_slot(int shift, int segments, int64_t tile, int64_t start, int seg) {
    return (shift >= 0 ? (2 * start) >> shift : tile * segments) + seg;
}

/* Chunks of segment_min entries of a list of `capacity` (CUDA, where lists
 * are cut: the later parts' grid, tiles/splat_parts_grid_cuda.cuh); 0 where
 * no list is cut. */
NUREC_HD int64_t nurec_splat_part_chunks(int segments, int64_t capacity, int64_t segment_min) {
    return segments > 1 && capacity > 0 && segment_min > 0 ? (capacity + segment_min - 1) / segment_min : 0;
}

#define NUREC_GENERIC_FILE "tiles/splat_math_generic.h"
#include "math/generic.h"

#endif /* NUREC_SPLAT_MATH_H */
