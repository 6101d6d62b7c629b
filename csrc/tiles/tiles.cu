/* CUDA tile binning: scan (CUB) -> depth ranks (CUB sort of the items by
 * depth) -> key emission (one fused launch that also pads the unused tail of
 * the host-sized buffers with sentinel keys and clears the tile ranges) ->
 * radix sort (CUB, only the key
 * bits that can be set) -> tile ranges. Everything runs on the caller's
 * stream; the intersection count stays on the device (status), nothing waits
 * on it, and no size depends on it.
 *
 * A key is (tile << rank bits) | the item's rank in depth order, not the
 * depth's 32 float bits: the same order (ties in depth keep item order both
 * ways: the sorts are stable), but 30 bits instead of 43 for the street
 * lidar (1,920 tiles, 464,000 items), so 4-byte keys and 4 radix passes
 * instead of 8-byte keys and 6, over millions of entries, for one sort of
 * the items themselves (hundreds of thousands). Keys that need more than 32
 * bits (many images or items) stay 8 bytes, with as few passes as their bits.
 * With several images the rank may be the item's place within its image
 * (KeyBits: fewer bits, where that saves a pass or halves the keys). Small
 * float32 binnings, which are host-bound, skip the ranks: their keys hold
 * the depth's own 32 bits, the same order for no sort of the items.
 *
 * Tile keys (KeyBits.tile_keys, NUREC_OPS_TILES_TILE_KEYS, default on for
 * binnings past the depth keys' size): the items are emitted in depth order
 * (the depth sort's order, each item's run of keys at its place in a scan of
 * the counts taken in that order) and keyed by their tile alone, so that the
 * stable sort of the entries needs only the tile's bits: 2 radix passes of
 * 2-byte keys where tile | rank took 4 of 4-byte keys (1944 garden x3: 15
 * bits against 32), and no ranks to scatter. Within a tile the entries stay
 * in emission order, which is the depth order with ties in item order: the
 * same list, bit for bit. (An early form, measured on the H200 before the
 * emission wrote a warp's runs 32 slots at a time, was slower: street
 * binning 4.9 vs 2.7 ms, when the emission's writes were per item and
 * scattered.) */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "tiles/depth_sort_cuda.cuh"

extern "C" {
#include "tiles/tiles_math.h"
}

#define TILES_THREADS 256

namespace {

int bits_for(uint64_t n) { /* bits that hold the values 0..n */
    int bits = 1;
    while (bits < 63 && (n >> bits) != 0) ++bits;
    return bits;
}

__host__ __device__ int64_t num_items(const nurec_tiles_params* p) {
    return p->num_images * p->items_per_image;
}

__host__ __device__ int64_t num_tiles(const nurec_tiles_params* p) { /* of all images */
    return p->num_images * p->tiles_x * (int64_t)p->tiles_y;
}

/* The key layout of one binning: tile above rank. A rank is the item's
 * place in depth order among all P items, or among its image's N items
 * (per image): a tile holds one image's entries, so both order every tile
 * alike, and per-image ranks take fewer bits (three cameras: 2 fewer) for
 * one more small sort (the depth-sorted items by image, one radix pass).
 * Per image is chosen where it saves passes of the big sort or halves its
 * keys: garden 1944x1260 x3, 34 -> 32 bits, 8-byte keys -> 4-byte. */
struct KeyBits {
    int rank;        /* low bits: ranks 0..P-1, or 0..N-1 per image */
    int end;         /* rank + tile bits (tiles 0..ntile, the last the sentinel's) */
    bool per_image;  /* ranks within the image */
    int image_bits;  /* bits of the image index (the per-image sort's) */
    bool depth_keys; /* the low 32 bits are the depth's own (depth_key): no ranks, no depth sort */
    bool tile_keys;  /* keys are the tile alone, items emitted in depth order (no rank bits) */
    int key_bytes;   /* 2, 4 or 8: the entries' key type */
};

/* Small float32 binnings key the entries by tile | the depth's 32 bits
 * instead of tile | rank: the same order (the depth key is monotone and the
 * sorts are stable, so ties keep item order both ways), without the depth
 * sort of the items and its rank scatter. That is 8-byte keys and two more
 * passes of the big sort, but 5 launches and 3 memsets fewer (CUB's onesweep
 * sort alone is a histogram, a scan and a memset and a kernel per pass): a
 * small call is host-bound (benchmarks/RESULTS.md: the trainer's 20k-
 * Gaussian scene, ~1.2 ms of host time per camera fwd+bwd call), a large one
 * is not, and there the ranks' 4-byte keys win (H200, fwd+bwd
 * with depth keys at every size against ranks: garden 648 x3, 1.29 M
 * entries, 1.341 against 1.362 ms; the street, 2.36 M, 2.675 against
 * 2.664; garden 1944 x3 4.279 against 4.203; the lidar 2.299 against
 * 2.241). Up to this capacity (entries); NUREC_OPS_TILES_DEPTH_KEYS_MAX
 * overrides it. */
#ifndef NUREC_TILES_DEPTH_KEYS_MAX
#define NUREC_TILES_DEPTH_KEYS_MAX (1 << 21)
#endif
/* A tuning default, or the environment's value (read at each call, so that
 * a test can compare both ways in one process: both give the same bits). */
int64_t env_or(const char* name, int64_t fallback) {
    const char* e = getenv(name);
    return e && *e ? (int64_t)strtoll(e, nullptr, 10) : fallback;
}
int64_t depth_keys_max(void) { return env_or("NUREC_OPS_TILES_DEPTH_KEYS_MAX", NUREC_TILES_DEPTH_KEYS_MAX); }
#ifndef NUREC_TILES_TILE_KEYS
#define NUREC_TILES_TILE_KEYS 1
#endif
bool tile_keys_on(void) { return env_or("NUREC_OPS_TILES_TILE_KEYS", NUREC_TILES_TILE_KEYS) != 0; }

int key_bytes_for(int end) { return end > 32 ? 8 : end > 16 ? 4 : 2; }

/* Bytes the big sort moves per entry and pass, times its passes (8-bit
 * digits), for keys of `end` bits: what the choice of rank weighs. */
int entry_sort_cost(int end) {
    return (end + 7) / 8 * ((end > 32 ? 8 : 4) + 4);
}

KeyBits key_bits(const nurec_tiles_params* p) {
    KeyBits k;
    const int64_t P = num_items(p), N = p->items_per_image;
    const int tile = bits_for((uint64_t)num_tiles(p));
    const int global = bits_for(P > 1 ? (uint64_t)(P - 1) : 1);
    const int image = bits_for(N > 1 ? (uint64_t)(N - 1) : 1);
    k.depth_keys = p->dtype == NUREC_F32 && p->capacity <= depth_keys_max();
    k.tile_keys = false;
    if (k.depth_keys) {
        k.per_image = false;
        k.rank = 32;
        k.end = 32 + tile;
        k.key_bytes = 8;
        k.image_bits = 0;
        return k;
    }
    if (tile_keys_on() && tile <= 32) { /* the depth sort's order, no ranks: global order serves every image */
        k.tile_keys = true;
        k.per_image = false;
        k.rank = 0;
        k.end = tile;
        k.key_bytes = key_bytes_for(tile);
        k.image_bits = 0;
        return k;
    }
    k.per_image = p->num_images > 1 && entry_sort_cost(image + tile) < entry_sort_cost(global + tile);
    k.rank = k.per_image ? image : global;
    k.end = k.rank + tile;
    k.key_bytes = k.end > 32 ? 8 : 4; /* 4 bytes even for 16 bits or fewer, as before the tile keys */
    k.image_bits = bits_for(p->num_images > 1 ? (uint64_t)(p->num_images - 1) : 1);
    return k;
}

/* Tile keys: the count of the r-th item in the depth sort's order, read by
 * the scan that places each item's run of keys (offsets are then indexed by
 * that order) as its input, so that no kernel gathers them first (a launch
 * and P int64 written and read back: 4 us on the 1944 garden's 335 k
 * items, H200). */
struct CountInOrder {
    const int32_t* order;
    const int64_t* counts;
    __host__ __device__ int64_t operator()(int64_t r) const { return counts[order[r]]; }
};
using CountsInOrder = thrust::transform_iterator<CountInOrder, thrust::counting_iterator<int64_t>>;
CountsInOrder counts_in_order(const int32_t* order, const int64_t* counts) {
    return CountsInOrder(thrust::counting_iterator<int64_t>(0), CountInOrder{order, counts});
}

struct Layout {
    size_t keys_in, keys_out, vals_in, sort_tmp, scan_tmp;
    size_t dkeys_in, dkeys_out, dvals_in, dvals_out, rank, dsort_tmp;
    size_t total;
    size_t sort_bytes, scan_bytes, dsort_bytes;
};

size_t align_up(size_t x) { return (x + 255) & ~(size_t)255; }

template <typename K>
bool sort_bytes(size_t* bytes, int64_t n, int end_bit) {
    return cub::DeviceRadixSort::SortPairs(nullptr, *bytes, (const K*)nullptr, (K*)nullptr,
                                           (const int32_t*)nullptr, (int32_t*)nullptr, n, 0,
                                           end_bit) == cudaSuccess;
}

// Sizes of the scratch buffers; CUB's size queries are host computations.
bool layout_of(const nurec_tiles_params* p, Layout* L) {
    const int64_t P = num_items(p), cap = p->capacity;
    const KeyBits kb = key_bits(p);
    const bool f64 = p->dtype == NUREC_F64;
    const size_t key = (size_t)kb.key_bytes, dkey = f64 ? 8 : 4;
    L->sort_bytes = L->scan_bytes = L->dsort_bytes = 0;
    if (cap > 0 && !(kb.key_bytes == 8   ? sort_bytes<uint64_t>(&L->sort_bytes, cap, kb.end)
                     : kb.key_bytes == 4 ? sort_bytes<uint32_t>(&L->sort_bytes, cap, kb.end)
                                         : sort_bytes<uint16_t>(&L->sort_bytes, cap, kb.end)))
        return false;
    if (P > 0 && cub::DeviceScan::InclusiveSum(nullptr, L->scan_bytes, (const int64_t*)nullptr,
                                               (int64_t*)nullptr, P) != cudaSuccess)
        return false;
    if (P > 0 && !kb.depth_keys &&
        (f64 ? nurec_depth_sort<uint64_t>(nullptr, &L->dsort_bytes, nullptr, nullptr, nullptr, nullptr, P, 0)
             : nurec_depth_sort<uint32_t>(nullptr, &L->dsort_bytes, nullptr, nullptr, nullptr, nullptr, P, 0)) !=
            cudaSuccess)
        return false;
    const int64_t PR = kb.depth_keys ? 0 : P; /* the depth sort's and the ranks' items */
    size_t isort_bytes = 0; /* the per-image sort shares the depth sort's scratch */
    if (P > 0 && kb.per_image) {
        if (!sort_bytes<uint32_t>(&isort_bytes, P, kb.image_bits)) return false;
        if (isort_bytes > L->dsort_bytes) L->dsort_bytes = isort_bytes;
    }
    size_t iscan_bytes = 0; /* tile keys: the scan reads the counts in depth order (counts_in_order) */
    if (P > 0 && kb.tile_keys) {
        if (cub::DeviceScan::InclusiveSum(nullptr, iscan_bytes, counts_in_order(nullptr, nullptr), (int64_t*)nullptr,
                                          P) != cudaSuccess)
            return false;
        if (iscan_bytes > L->scan_bytes) L->scan_bytes = iscan_bytes;
    }
    size_t o = 0;
    L->keys_in = o; o += align_up(key * (size_t)cap);
    L->keys_out = o; o += align_up(key * (size_t)cap);
    L->vals_in = o; o += align_up(sizeof(int32_t) * (size_t)cap);
    L->sort_tmp = o; o += align_up(L->sort_bytes);
    L->scan_tmp = o; o += align_up(L->scan_bytes);
    L->dkeys_in = o; o += align_up(dkey * (size_t)PR);
    L->dkeys_out = o; o += align_up(dkey * (size_t)PR);
    L->dvals_in = o; o += align_up(sizeof(int32_t) * (size_t)PR);
    L->dvals_out = o; o += align_up(sizeof(int32_t) * (size_t)PR);
    L->rank = o; o += align_up(sizeof(int32_t) * (size_t)(kb.tile_keys ? 0 : PR)); /* tile keys: no ranks */
    L->dsort_tmp = o; o += align_up(L->dsort_bytes);
    L->total = o + 256;
    return true;
}

// Depth keys of the items: the float bits mapped so that unsigned order is
// the values' order, negative depths included (a wide FTheta or fisheye
// camera sees Gaussians past 90 degrees, at z < 0: they have tiles; the CPU
// sorts them by value too); NaN sorts last (such items have no tiles).
template <typename R, typename DK>
__host__ __device__ DK depth_key(R d) {
    DK bits;
    memcpy(&bits, &d, sizeof(bits));
    const DK sign = (DK)1 << (8 * sizeof(DK) - 1);
    return d == d ? ((bits & sign) ? ~bits : (bits | sign)) : ~(DK)0;
}

template <typename R, typename DK>
__global__ void depth_bits_kernel(const R* records, int64_t P, DK* keys, int32_t* vals) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= P) return;
    keys[i] = depth_key<R, DK>(records[NUREC_TREC_SIZE * i + NUREC_TREC_DEPTH]);
    vals[i] = (int32_t)i;
}

/* The low bits of item i's keys: none with tile keys (`order`: the items
 * are emitted in depth order), its depth rank, or (no ranks: KeyBits'
 * depth_keys, float32 only) its depth key itself. */
__device__ __forceinline__ uint32_t item_rank(const nurec_tiles_params& p, const int32_t* rank, const int32_t* order,
                                              int64_t i) {
    if (order) return 0;
    if (rank) return (uint32_t)rank[i];
    return depth_key<float, uint32_t>(((const float*)p.records)[NUREC_TREC_SIZE * i + NUREC_TREC_DEPTH]);
}


__global__ void rank_scatter_kernel(const int32_t* sorted, int64_t P, int32_t* rank) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < P) rank[sorted[i]] = (int32_t)i;
}

/* Per-image ranks: the image of each depth-sorted item, as the key of a
 * stable sort that groups the items by image in depth order ... */
__global__ void image_keys_kernel(const int32_t* sorted, int64_t P, int64_t N, uint32_t* keys) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < P) keys[i] = (uint32_t)(sorted[i] / N);
}

/* ... after which image g holds places [g N, (g + 1) N) (every image has
 * exactly N items), so an item's rank in its image is its place - g N. */
__global__ void image_rank_scatter_kernel(const int32_t* grouped, int64_t P, int64_t N, int32_t* rank) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= P) return;
    const int32_t item = grouped[i];
    rank[item] = (int32_t)(i - (int64_t)(item / N) * N);
}

/* Keys of item i: (image tile << rank bits) | its depth rank, one per tile it
 * touches, written from the item's offset. Footprint mode (the camera's
 * tiles; boxes mode: emit_boxes_warp below): one thread per item writes the
 * keys of a small item; an item with more than EMIT_COOP tiles (a Gaussian
 * near the camera covers thousands) is written by its whole warp, 32
 * consecutive keys at a time: one thread looping over thousands of keys was
 * a long tail that made emission the largest part of binning (street camera:
 * 1.37 ms of 2.65). The loop over items is warp-uniform so that the warp can
 * vote. */
#define EMIT_COOP 32

/* Items are emitted at positions r: the item itself (r = i), or with tile
 * keys the depth sort's r-th item (`order`), whose run of key slots is at
 * offsets[r]. */
struct EmitItem {
    int64_t item;       /* the item (its id is the entries' value) */
    int64_t start, cnt; /* first key slot, number of keys */
    uint64_t base;      /* first tile id of the item's image */
    uint32_t rank;      /* depth rank */
    int ok;             /* footprint mode: a valid footprint */
    nurec_footprint f;
};

__device__ bool emit_item_init(const nurec_tiles_params& p, int64_t r, int64_t tiles, const int32_t* rank,
                               const int32_t* order, EmitItem* e) {
    const int64_t i = order ? (int64_t)order[r] : r;
    e->item = i;
    e->cnt = p.counts[i];
    if (e->cnt <= 0) return false;
    e->start = p.offsets[r] - e->cnt;
    if (e->start >= p.capacity) return false;
    if (p.dtype == NUREC_F64)
        e->ok = nurec_footprint_of_f64(&e->f, (const double*)p.records + NUREC_TREC_SIZE * i, p.width, p.height);
    else e->ok = nurec_footprint_of_f32(&e->f, (const float*)p.records + NUREC_TREC_SIZE * i, p.width, p.height);
    e->rank = item_rank(p, rank, order, i);
    e->base = (uint64_t)((i / p.items_per_image) * tiles);
    return true;
}

/* Writes all of an item's keys that fit the capacity, by one thread (a whole
 * warp's: emit_item_warp below). Any key the geometry cannot name (never
 * when the counts match) is a sentinel. */
template <typename K>
__device__ void emit_item(const nurec_tiles_params& p, const EmitItem& e, int shift, K sentinel, K* keys,
                          int32_t* vals) {
    const int64_t cap = p.capacity, i = e.item;
    const int64_t end = e.start + e.cnt < cap ? e.cnt : cap - e.start; /* keys that fit */
    int64_t k = 0; /* keys named so far */
    if (e.ok) {
        for (int ty = e.f.py0 / NUREC_TILE; ty <= e.f.py1 / NUREC_TILE && k < end; ++ty) {
            int a, b;
            if (!nurec_footprint_row(&e.f, ty, p.width, &a, &b)) continue;
            const uint64_t row = e.base + (uint64_t)ty * p.tiles_x + (uint64_t)a;
            int64_t w = b - a + 1;
            if (w > end - k) w = end - k;
            for (int64_t q = 0; q < w; ++q) {
                keys[e.start + k + q] = ((K)(row + (uint64_t)q) << shift) | e.rank;
                vals[e.start + k + q] = (int32_t)i;
            }
            k += w;
        }
    }
    for (int64_t q = k; q < end; ++q) {
        keys[e.start + q] = sentinel;
        vals[e.start + q] = (int32_t)i;
    }
}

/* emit_item by a whole warp (every lane, the same item): the same keys in
 * the same slots, with the footprint's rows taken 32 at a time, one a lane
 * (its tile span), and the keys of those rows written 32 slots a round, each
 * lane finding its slot's row among the lanes by a search over their
 * exclusive sums. Why: a row at a time, each row a chain of double-precision
 * square roots and roundings before its handful of stores, made a large item
 * (372 tiles, ~20 rows on the 1944 garden) a long serial walk. */
template <typename K>
__device__ void emit_item_warp(const nurec_tiles_params& p, const EmitItem& e, int lane, int shift, K sentinel,
                               K* keys, int32_t* vals) {
    const unsigned all = 0xffffffffu;
    const int64_t cap = p.capacity, i = e.item;
    const int64_t end = e.start + e.cnt < cap ? e.cnt : cap - e.start; /* keys that fit */
    int64_t k = 0; /* keys named so far (uniform over the lanes) */
    if (e.ok) {
        const int ty1 = e.f.py1 / NUREC_TILE;
        for (int r0 = e.f.py0 / NUREC_TILE; r0 <= ty1 && k < end; r0 += 32) { /* warp-uniform */
            int a = 0, b = -1;
            if (!(r0 + lane <= ty1 && nurec_footprint_row(&e.f, r0 + lane, p.width, &a, &b))) b = a - 1;
            const int w = b - a + 1;
            int incl = w; /* inclusive sum of the widths over the lanes */
            for (int d = 1; d < 32; d <<= 1) {
                const int y = __shfl_up_sync(all, incl, d);
                if (lane >= d) incl += y;
            }
            const int excl = incl - w, total = __shfl_sync(all, incl, 31);
            for (int s0 = 0; s0 < total && k + s0 < end; s0 += 32) { /* warp-uniform */
                const int s = s0 + lane;
                int L = 0; /* the last lane whose row starts at or before slot s: its owner */
                for (int step = 16; step >= 1; step >>= 1)
                    if (__shfl_sync(all, excl, L + step) <= s) L += step;
                const int aL = __shfl_sync(all, a, L), eL = __shfl_sync(all, excl, L);
                if (s < total && k + s < end) {
                    const uint64_t row = e.base + (uint64_t)(r0 + L) * p.tiles_x + (uint64_t)aL;
                    keys[e.start + k + s] = ((K)(row + (uint64_t)(s - eL)) << shift) | e.rank;
                    vals[e.start + k + s] = (int32_t)i;
                }
            }
            k += total;
        }
    }
    for (int64_t q = k + lane; q < end; q += 32) {
        keys[e.start + q] = sentinel;
        vals[e.start + q] = (int32_t)i;
    }
}

/* Boxes mode (the lidar's tile rectangles): the keys of a warp's 32 items
 * fill one run of consecutive slots (the offsets are an inclusive scan in
 * item order), so the warp writes the run 32 slots at a time, each lane one
 * slot: it finds the item owning its slot (the last of the 32 whose first
 * slot is <= it: a search over the lanes by shuffles) and that item's s-th
 * kept tile (s = slot - the item's first slot: nurec_box_kept, as the CPU
 * binning writes them). Every store is coalesced and no lane waits while
 * another loops over its item's cells (the per-item loop, as footprint
 * mode still does, took 136 us for the street lidar's 3.7 M keys, whose
 * bytes a copy moves in ~10 us).
 *
 * kMixed (the camera: footprints of at most 64 cells as rectangles,
 * nurec_footprint_box): an item whose rectangle is empty is written by the
 * whole warp from its footprint afterwards, as footprint mode writes a
 * large item; the run skips its slots (where its first slot is the
 * window's, at once to its end). Footprint mode's one thread per small
 * item took 216 us for the street camera's 1.9 M keys. */
/* The OR of v over the warp (every lane). */
__device__ __forceinline__ unsigned warp_or(unsigned v) {
#if __CUDA_ARCH__ >= 800
    return __reduce_or_sync(0xffffffffu, v);
#else
    for (int d = 16; d >= 1; d >>= 1) v |= __shfl_xor_sync(0xffffffffu, v, d);
    return v;
#endif
}

template <typename K, bool kMixed>
__device__ void emit_boxes_warp(const nurec_tiles_params& p, int64_t r0, int lane, int64_t tiles, int shift,
                                K sentinel, K* keys, int32_t* vals, const int32_t* rank, const int32_t* order,
                                int* win) {
    const unsigned all = 0xffffffffu;
    const int64_t P = num_items(&p), cap = p.capacity;
    const int64_t total = p.offsets[P - 1];
    const int64_t r = r0 + lane; /* this lane's position; its runs follow the positions */
    const int64_t i = r < P ? (order ? (int64_t)order[r] : r) : 0; /* its item */
    /* this lane's item (past the last item: an empty one at the end) */
    int64_t first = total, stop = total, kept = 0;
    int32_t bx[NUREC_BOX_SIZE] = {0, 0, 0, 1, 0, 0};
    uint64_t base = 0;
    uint32_t rk = 0;
    bool walked = false; /* kMixed: written from its footprint */
    if (r < P) {
        const int64_t cnt = p.counts[i];
        stop = p.offsets[r];
        first = stop - cnt;
        if (cnt > 0) {
            for (int k = 0; k < NUREC_BOX_SIZE; ++k) bx[k] = p.boxes[NUREC_BOX_SIZE * i + k];
            kept = nurec_box_count(bx, p.tiles_x, p.tiles_y);
            walked = kMixed && nurec_box_cells(bx, p.tiles_x, p.tiles_y) == 0;
            rk = item_rank(p, rank, order, i);
            base = (uint64_t)((i / p.items_per_image) * tiles);
        }
    }
    const int64_t lo = __shfl_sync(all, first, 0);
    const int64_t end = p.offsets[r0 + 31 < P ? r0 + 31 : P - 1];
    const int64_t hi = end < cap ? end : cap;
    int carry = 0; /* the owner of the last window's last slot */
    for (int64_t t0 = lo; t0 < hi;) { /* warp-uniform */
        const int64_t t = t0 + lane;
        /* The owner of slot t (the last lane whose item starts at or before
           it): an item with keys that starts in the window [t0, t0 + 32)
           writes its lane at its start's place in win (one writer a place:
           such starts differ) and sets that place's bit; slot t's owner is
           the lane at the last bit at or below t's place, or, with none,
           the last window's owner of its last slot, which goes on. One OR
           and a count of leading zeros, where a binary search over the
           lanes' starts took five dependent rounds of 64-bit shuffles. */
        const int64_t rel = first - t0;
        const bool starts = first < stop && rel >= 0 && rel < 32;
        if (starts) win[rel] = lane;
        const unsigned at = warp_or(starts ? 1u << (int)rel : 0u) & (0xffffffffu >> (31 - lane));
        __syncwarp();
        const int L = at ? win[31 - __clz(at)] : carry;
        __syncwarp(); /* win read before the next window's writes */
        carry = __shfl_sync(all, L, 31);
        const bool walkedL = kMixed && __shfl_sync(all, walked, L);
        if (kMixed) {
            const int L0 = __shfl_sync(all, L, 0);
            if (__shfl_sync(all, walked, L0)) { /* the window starts in a walked item: past it */
                t0 = __shfl_sync(all, stop, L0);
                continue;
            }
        }
        const int64_t s = t - __shfl_sync(all, first, L);
        const int64_t kL = __shfl_sync(all, kept, L);
        /* the owner's rectangle: rows from b[0], columns b[2] .. + b[3], cut b[4..5] */
        const int32_t b[NUREC_BOX_SIZE] = {__shfl_sync(all, bx[0], L), 0, __shfl_sync(all, bx[2], L),
                                           __shfl_sync(all, bx[3], L), __shfl_sync(all, bx[4], L),
                                           __shfl_sync(all, bx[5], L)};
        const uint64_t baseL = __shfl_sync(all, base, L);
        const uint32_t rL = __shfl_sync(all, rk, L);
        const int64_t iL = __shfl_sync(all, i, L);
        t0 += 32;
        if (t >= hi || walkedL) continue;
        K key = sentinel; /* a slot the geometry cannot name (never when the counts match) */
        if (s < kL) key = (K)(((K)(baseL + (uint64_t)nurec_box_tile(b, nurec_box_kept(b, s), p.tiles_x)) << shift) | rL);
        keys[t] = key;
        vals[t] = (int32_t)iL;
    }
    if (kMixed)
        for (unsigned m = __ballot_sync(all, walked); m != 0; m &= m - 1) {
            const int64_t j = r0 + (__ffs(m) - 1);
            EmitItem e;
            if (emit_item_init(p, j, tiles, rank, order, &e)) /* every lane: the same item */
                emit_item_warp(p, e, lane, shift, sentinel, keys, vals);
        }
}

/* One kernel per mode (MODE: 0 footprints, 1 boxes, 2 boxes mixed with
   footprints), so that each has its own register count (the footprint
   walk's ~100 registers would hold the boxes mode's occupancy down). (The
   walked items in a kernel of their own, their warps' items spread over
   the list: H200, the same fwd+bwd as here once a warp walks
   32 rows at a time, street 2.605 / 2.604 ms, garden 1944 x3 4.115 / 4.104;
   before that, with one row at a time, street 2.61 against 2.66: a warp's
   32 consecutive items come in clusters of large ones near the camera.) */
template <typename K, int MODE>
__global__ void __launch_bounds__(TILES_THREADS)
emit_kernel(nurec_tiles_params p, int shift, K* keys, int32_t* vals, const int32_t* rank, const int32_t* order) {
    const int64_t P = num_items(&p);
    const int64_t cap = p.capacity;
    const int64_t tiles = (int64_t)p.tiles_x * p.tiles_y;
    const K sentinel = (K)(((K)num_tiles(&p) << shift) | (K)(((uint64_t)1 << shift) - 1));
    const int64_t total = P > 0 ? p.offsets[P - 1] : 0;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = threadIdx.x & 31;
    if (tid == 0) {
        p.status[0] = total;
        p.status[1] = total > cap ? 1 : 0;
    }
    if (MODE != 0) {
        __shared__ int win[TILES_THREADS]; /* emit_boxes_warp's owners, 32 a warp */
        for (int64_t r0 = tid - lane; r0 < P; r0 += stride) /* warp-uniform */
            emit_boxes_warp<K, MODE == 2>(p, r0, lane, tiles, shift, sentinel, keys, vals, rank, order,
                                          win + (threadIdx.x & ~31));
    } else for (int64_t r0 = tid - lane; r0 < P; r0 += stride) { /* warp-uniform */
        const int64_t r = r0 + lane;
        EmitItem e;
        const bool has = r < P && emit_item_init(p, r, tiles, rank, order, &e);
        const bool coop = has && e.cnt > EMIT_COOP;
        if (has && !coop) emit_item(p, e, shift, sentinel, keys, vals);
        for (unsigned m = __ballot_sync(0xffffffffu, coop); m != 0; m &= m - 1) {
            const int src = __ffs(m) - 1;
            const int64_t j = r0 + src;
            EmitItem ej;
            emit_item_init(p, j, tiles, rank, order, &ej); /* every lane: the same item */
            emit_item_warp(p, ej, lane, shift, sentinel, keys, vals);
        }
    }
    for (int64_t j = (total < cap ? total : cap) + tid; j < cap; j += stride) {
        keys[j] = sentinel;
        vals[j] = 0;
    }
    /* the tile ranges cleared for ranges_kernel, which writes only the tiles
       that have entries (here rather than by a memset: one launch fewer) */
    for (int64_t j = tid; j < 2 * num_tiles(&p); j += stride) p.tile_ranges[j] = 0;
}

/* The tile ranges of the sorted keys: each tile's first entry and one past
 * its last, written where the tile changes between neighbouring entries.
 * Each thread reads RANGES_PER_THREAD consecutive keys in 16-byte vector
 * loads (the workspace's buffers are 256-byte aligned) and the key before
 * them: one thread per key, three 2-byte loads each, made the 1944 garden's
 * ranges 20 us for its 5.8 M keys, which a copy moves in a few. A change of
 * tile at a thread's first key is that thread's (the previous thread ends
 * at the key before it), so each boundary is written once. */
#define RANGES_PER_THREAD 8

template <typename K>
__device__ __forceinline__ void ranges_load(const K* keys, int64_t j0, int64_t cap, K v[RANGES_PER_THREAD]) {
    constexpr int kVec = (int)(sizeof(K) * RANGES_PER_THREAD / 16);
    if (j0 + RANGES_PER_THREAD <= cap) {
        union {
            uint4 u[kVec];
            K k[RANGES_PER_THREAD];
        } buf;
        const uint4* src = (const uint4*)(keys + j0);
#pragma unroll
        for (int q = 0; q < kVec; ++q) buf.u[q] = src[q];
#pragma unroll
        for (int q = 0; q < RANGES_PER_THREAD; ++q) v[q] = buf.k[q];
    } else {
#pragma unroll
        for (int q = 0; q < RANGES_PER_THREAD; ++q) v[q] = j0 + q < cap ? keys[j0 + q] : (K)0;
    }
}

template <typename K>
__global__ void ranges_kernel(const K* keys, int shift, const int64_t* status, int64_t cap, int64_t ntile,
                              int64_t* ranges) {
    const int64_t j0 = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * RANGES_PER_THREAD;
    const int64_t n = status[0] < cap ? status[0] : cap;
    if (j0 >= n) return;
    K v[RANGES_PER_THREAD];
    ranges_load(keys, j0, cap, v);
    const uint64_t none = ~(uint64_t)0;
    uint64_t prev = j0 == 0 ? none : (uint64_t)(keys[j0 - 1] >> shift);
#pragma unroll
    for (int q = 0; q < RANGES_PER_THREAD; ++q) {
        const int64_t j = j0 + q;
        if (j >= n) break;
        const uint64_t t = (uint64_t)(v[q] >> shift);
        if (t != prev) {
            if (prev < (uint64_t)ntile) ranges[2 * prev + 1] = j;
            if (t < (uint64_t)ntile) ranges[2 * t] = j;
        }
        prev = t;
    }
    if (j0 + RANGES_PER_THREAD >= n && prev < (uint64_t)ntile) ranges[2 * prev + 1] = n;
}

unsigned blocks_for(int64_t n) { return (unsigned)((n + TILES_THREADS - 1) / TILES_THREADS); }

// The items in depth order (a stable sort of their depth keys: ties in item
// order), in the workspace's dvals_out.
template <typename R, typename DK>
int depth_order(const nurec_tiles_params* p, const Layout& L, char* w, cudaStream_t s) {
    const int64_t P = num_items(p);
    DK* dk_in = (DK*)(w + L.dkeys_in);
    DK* dk_out = (DK*)(w + L.dkeys_out);
    int32_t* dv_in = (int32_t*)(w + L.dvals_in);
    int32_t* dv_out = (int32_t*)(w + L.dvals_out);
    depth_bits_kernel<R, DK><<<blocks_for(P), TILES_THREADS, 0, s>>>((const R*)p->records, P, dk_in, dv_in);
    size_t bytes = L.dsort_bytes;
    if (nurec_depth_sort<DK>(w + L.dsort_tmp, &bytes, dk_in, dk_out, dv_in, dv_out, P, s) != cudaSuccess)
        return NUREC_ERR_CUDA;
    return NUREC_OK;
}

// The items' depth ranks (depth_order), over all items or, per image,
// after a second stable sort by image.
template <typename R, typename DK>
int depth_ranks(const nurec_tiles_params* p, const Layout& L, const KeyBits& kb, char* w, cudaStream_t s,
                int32_t* rank) {
    const int64_t P = num_items(p);
    DK* dk_in = (DK*)(w + L.dkeys_in);
    DK* dk_out = (DK*)(w + L.dkeys_out);
    int32_t* dv_in = (int32_t*)(w + L.dvals_in);
    int32_t* dv_out = (int32_t*)(w + L.dvals_out);
    const int st = depth_order<R, DK>(p, L, w, s);
    if (st != NUREC_OK) return st;
    size_t bytes;
    if (!kb.per_image) {
        rank_scatter_kernel<<<blocks_for(P), TILES_THREADS, 0, s>>>(dv_out, P, rank);
        return NUREC_OK;
    }
    /* the depth sort's inputs are free now (stream order): its key buffers
       hold the image keys (DK is at least 4 bytes), dv_in the grouped items */
    const int64_t N = p->items_per_image;
    uint32_t* ik_in = (uint32_t*)dk_in;
    uint32_t* ik_out = (uint32_t*)dk_out;
    image_keys_kernel<<<blocks_for(P), TILES_THREADS, 0, s>>>(dv_out, P, N, ik_in);
    bytes = L.dsort_bytes;
    if (cub::DeviceRadixSort::SortPairs(w + L.dsort_tmp, bytes, ik_in, ik_out, dv_out, dv_in, P, 0, kb.image_bits,
                                        s) != cudaSuccess)
        return NUREC_ERR_CUDA;
    image_rank_scatter_kernel<<<blocks_for(P), TILES_THREADS, 0, s>>>(dv_in, P, N, rank);
    return NUREC_OK;
}

// Emission, the sort of the entries and the tile ranges, with K-wide keys.
template <typename K>
int bin_entries(const nurec_tiles_params* p, const Layout& L, const KeyBits& kb, char* w, cudaStream_t s,
                const int32_t* rank, const int32_t* order) {
    const int64_t P = num_items(p), cap = p->capacity;
    const int64_t ntile = num_tiles(p);
    K* keys_in = (K*)(w + L.keys_in);
    K* keys_out = (K*)(w + L.keys_out);
    int32_t* vals_in = (int32_t*)(w + L.vals_in);
    unsigned eb = blocks_for(P > 0 ? P : 1);
    unsigned tail = blocks_for(cap) < 4096 ? blocks_for(cap) : 4096;
    if (tail > eb) eb = tail;
    if (p->boxes && p->boxes_mixed)
        emit_kernel<K, 2><<<eb, TILES_THREADS, 0, s>>>(*p, kb.rank, keys_in, vals_in, rank, order);
    else if (p->boxes) emit_kernel<K, 1><<<eb, TILES_THREADS, 0, s>>>(*p, kb.rank, keys_in, vals_in, rank, order);
    else emit_kernel<K, 0><<<eb, TILES_THREADS, 0, s>>>(*p, kb.rank, keys_in, vals_in, rank, order);
    if (cap == 0) return NUREC_OK;
    size_t bytes = L.sort_bytes;
    if (cub::DeviceRadixSort::SortPairs(w + L.sort_tmp, bytes, keys_in, keys_out, vals_in, p->isect_items,
                                        cap, 0, kb.end, s) != cudaSuccess)
        return NUREC_ERR_CUDA;
    ranges_kernel<K><<<blocks_for((cap + RANGES_PER_THREAD - 1) / RANGES_PER_THREAD), TILES_THREADS, 0, s>>>(
        keys_out, kb.rank, p->status, cap, ntile, p->tile_ranges);
    return NUREC_OK;
}

}  // namespace

extern "C" size_t nurec_tiles_workspace_bytes(const nurec_tiles_params* p) {
    Layout L;
    if (!layout_of(p, &L)) return 0;
    return L.total;
}

extern "C" int nurec_tiles_bin_cuda(const nurec_tiles_params* p, void* stream) {
    cudaStream_t s = (cudaStream_t)stream;
    const int64_t P = num_items(p);
    Layout L;
    if (!layout_of(p, &L) || p->workspace_bytes < L.total) return NUREC_ERR_CUDA;
    char* w = (char*)(((uintptr_t)p->workspace + 255) & ~(uintptr_t)255);
    const KeyBits kb = key_bits(p);
    int st = NUREC_OK;
    int32_t* rank = nullptr;
    const int32_t* order = nullptr;
    if (kb.tile_keys && P > 0) {
        /* the items in depth order, their counts in that order scanned: each
           item's run of keys at its place in depth order */
        st = p->dtype == NUREC_F64 ? depth_order<double, uint64_t>(p, L, w, s) : depth_order<float, uint32_t>(p, L, w, s);
        if (st != NUREC_OK) return st;
        order = (const int32_t*)(w + L.dvals_out);
        size_t bytes = L.scan_bytes;
        if (cub::DeviceScan::InclusiveSum(w + L.scan_tmp, bytes, counts_in_order(order, p->counts), p->offsets, P,
                                          s) != cudaSuccess)
            return NUREC_ERR_CUDA;
    } else if (P > 0) {
        size_t bytes = L.scan_bytes;
        if (cub::DeviceScan::InclusiveSum(w + L.scan_tmp, bytes, p->counts, p->offsets, P, s) !=
            cudaSuccess)
            return NUREC_ERR_CUDA;
        if (!kb.depth_keys) {
            rank = (int32_t*)(w + L.rank);
            st = p->dtype == NUREC_F64 ? depth_ranks<double, uint64_t>(p, L, kb, w, s, rank)
                                       : depth_ranks<float, uint32_t>(p, L, kb, w, s, rank);
            if (st != NUREC_OK) return st;
        }
    }
    st = kb.key_bytes == 8   ? bin_entries<uint64_t>(p, L, kb, w, s, rank, order)
         : kb.key_bytes == 4 ? bin_entries<uint32_t>(p, L, kb, w, s, rank, order)
                             : bin_entries<uint16_t>(p, L, kb, w, s, rank, order);
    if (st != NUREC_OK) return st;
    return cudaGetLastError() == cudaSuccess ? NUREC_OK : NUREC_ERR_CUDA;
}
