/* CPU tile binning (C, exact): counts -> int64 offsets -> one entry per
 * item-tile intersection -> sort by (tile, depth, item) -> tile ranges.
 * Same order as the CUDA radix sort: ascending depth within a tile, equal
 * depths in item order. */
#include <stdlib.h>
#include <string.h>

#include "tiles/tiles_math.h"

typedef struct tile_entry {
    uint64_t tile;  /* image * tiles + tile */
    double depth;
    int32_t item;
} tile_entry;

static int entry_cmp(const void* pa, const void* pb) {
    const tile_entry* a = (const tile_entry*)pa;
    const tile_entry* b = (const tile_entry*)pb;
    if (a->tile != b->tile) return a->tile < b->tile ? -1 : 1;
    if (a->depth != b->depth) return a->depth < b->depth ? -1 : 1;
    return a->item < b->item ? -1 : (a->item > b->item);
}

int64_t nurec_tiles_scan_cpu(const nurec_tiles_params* p) {
    int64_t P = p->num_images * p->items_per_image, acc = 0;
    for (int64_t i = 0; i < P; ++i) {
        acc += p->counts[i];
        p->offsets[i] = acc;
    }
    return acc;
}

static int footprint_of(const nurec_tiles_params* p, int64_t i, nurec_footprint* f,
                        double* depth) {
    if (p->dtype == NUREC_F64) {
        const double* r = (const double*)p->records + NUREC_TREC_SIZE * i;
        *depth = r[NUREC_TREC_DEPTH];
        return nurec_footprint_of_f64(f, r, p->width, p->height);
    }
    const float* r = (const float*)p->records + NUREC_TREC_SIZE * i;
    *depth = (double)r[NUREC_TREC_DEPTH];
    return nurec_footprint_of_f32(f, r, p->width, p->height);
}

int nurec_tiles_bin_cpu(const nurec_tiles_params* p) {
    int64_t P = p->num_images * p->items_per_image;
    int64_t tiles = (int64_t)p->tiles_x * p->tiles_y;
    int64_t total = P > 0 ? p->offsets[P - 1] : 0;
    memset(p->tile_ranges, 0, sizeof(int64_t) * 2 * (size_t)(p->num_images * tiles));
    p->status[0] = total;
    p->status[1] = total > p->capacity;
    if (total == 0) return NUREC_OK;
    tile_entry* e = (tile_entry*)malloc(sizeof(tile_entry) * (size_t)total);
    if (!e) return NUREC_ERR_TILES_ALLOC;
    for (int64_t i = 0; i < P; ++i) {
        int64_t cnt = p->counts[i];
        if (cnt <= 0) continue;
        nurec_footprint f;
        double depth;
        int64_t img = i / p->items_per_image, start = p->offsets[i] - cnt, k = 0;
        const int32_t* bx = p->boxes ? p->boxes + NUREC_BOX_SIZE * i : NULL;
        if (bx && nurec_box_cells(bx, p->tiles_x, p->tiles_y) > 0) {
            (void)footprint_of(p, i, &f, &depth); /* for the depth only */
            const int64_t kept = nurec_box_count(bx, p->tiles_x, p->tiles_y);
            for (; k < kept && k < cnt; ++k) {
                tile_entry* t = &e[start + k];
                t->tile = (uint64_t)(img * tiles + nurec_box_tile(bx, nurec_box_kept(bx, k), p->tiles_x));
                t->depth = depth;
                t->item = (int32_t)i;
            }
        } else if (footprint_of(p, i, &f, &depth)) {
            for (int ty = f.py0 / NUREC_TILE; ty <= f.py1 / NUREC_TILE && k < cnt; ++ty) {
                int a, b;
                if (!nurec_footprint_row(&f, ty, p->width, &a, &b)) continue;
                for (int tx = a; tx <= b && k < cnt; ++tx, ++k) {
                    tile_entry* t = &e[start + k];
                    t->tile = (uint64_t)(img * tiles + (int64_t)ty * p->tiles_x + tx);
                    t->depth = depth;
                    t->item = (int32_t)i;
                }
            }
        }
        for (; k < cnt; ++k) { /* never reached when counts came from the footprint */
            e[start + k].tile = (uint64_t)(p->num_images * tiles);
            e[start + k].depth = 0;
            e[start + k].item = (int32_t)i;
        }
    }
    qsort(e, (size_t)total, sizeof(tile_entry), entry_cmp);
    int64_t limit = total < p->capacity ? total : p->capacity;
    int64_t ntile = p->num_images * tiles;
    for (int64_t j = 0; j < limit; ++j) {
        p->isect_items[j] = e[j].item;
        uint64_t t = e[j].tile;
        if (t >= (uint64_t)ntile) continue;
        if (j == 0 || e[j - 1].tile != t) p->tile_ranges[2 * t] = j;
        if (j == limit - 1 || e[j + 1].tile != t) p->tile_ranges[2 * t + 1] = j + 1;
    }
    free(e);
    return NUREC_OK;
}
