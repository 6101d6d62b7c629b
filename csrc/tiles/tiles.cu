/* CUDA tile binning: scan (CUB) -> key emission (one fused launch that also
 * pads the unused tail of the host-sized buffers with sentinel keys) ->
 * radix sort (CUB, only the key bits that can be set) -> tile ranges.
 * Everything runs on the caller's stream; the intersection count stays on
 * the device (status), nothing waits on it, and no size depends on it.
 *
 * (Measured on the H200: emitting in depth order and sorting 4-byte tile-id
 * keys only (2 radix passes) was slower than this 64-bit tile|depth key sort
 * on the benchmark scenes (street: binning 4.9 vs 2.7 ms), so this is kept.) */
#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

extern "C" {
#include "tiles/tiles_math.h"
}

#define TILES_THREADS 256

namespace {

struct Layout {
    size_t keys_in, keys_out, vals_in, sort_tmp, scan_tmp;
    size_t dkeys_in, dkeys_out, dvals_in, dvals_out, rank, dsort_tmp;
    size_t total;
    size_t sort_bytes, scan_bytes, dsort_bytes;
};

size_t align_up(size_t x) { return (x + 255) & ~(size_t)255; }

int key_end_bit(const nurec_tiles_params* p) {
    uint64_t ntile = (uint64_t)(p->num_images * p->tiles_x * (int64_t)p->tiles_y);
    int bits = 1;
    while (bits < 32 && (ntile >> bits) != 0) ++bits; /* values 0..ntile (sentinel) */
    return 32 + bits;
}

__host__ __device__ int64_t num_items(const nurec_tiles_params* p) {
    return p->num_images * p->items_per_image;
}

// Sizes of the scratch buffers; CUB's size queries are host computations.
bool layout_of(const nurec_tiles_params* p, Layout* L) {
    int64_t P = num_items(p), cap = p->capacity;
    L->sort_bytes = L->scan_bytes = L->dsort_bytes = 0;
    if (cap > 0 &&
        cub::DeviceRadixSort::SortPairs(nullptr, L->sort_bytes, (const uint64_t*)nullptr,
                                        (uint64_t*)nullptr, (const int32_t*)nullptr,
                                        (int32_t*)nullptr, cap, 0, key_end_bit(p)) != cudaSuccess)
        return false;
    if (P > 0 && cub::DeviceScan::InclusiveSum(nullptr, L->scan_bytes, (const int64_t*)nullptr,
                                               (int64_t*)nullptr, P) != cudaSuccess)
        return false;
    bool f64 = p->dtype == NUREC_F64;
    if (f64 && P > 0 &&
        cub::DeviceRadixSort::SortPairs(nullptr, L->dsort_bytes, (const uint64_t*)nullptr,
                                        (uint64_t*)nullptr, (const int32_t*)nullptr,
                                        (int32_t*)nullptr, P) != cudaSuccess)
        return false;
    size_t o = 0;
    L->keys_in = o; o += align_up(sizeof(uint64_t) * (size_t)cap);
    L->keys_out = o; o += align_up(sizeof(uint64_t) * (size_t)cap);
    L->vals_in = o; o += align_up(sizeof(int32_t) * (size_t)cap);
    L->sort_tmp = o; o += align_up(L->sort_bytes);
    L->scan_tmp = o; o += align_up(L->scan_bytes);
    size_t np = f64 ? (size_t)P : 0;
    L->dkeys_in = o; o += align_up(sizeof(uint64_t) * np);
    L->dkeys_out = o; o += align_up(sizeof(uint64_t) * np);
    L->dvals_in = o; o += align_up(sizeof(int32_t) * np);
    L->dvals_out = o; o += align_up(sizeof(int32_t) * np);
    L->rank = o; o += align_up(sizeof(int32_t) * np);
    L->dsort_tmp = o; o += align_up(f64 ? L->dsort_bytes : 0);
    L->total = o + 256;
    return true;
}

// float64 depth keys: the rank of each item in a stable sort by depth.
__global__ void depth_bits_kernel(const double* records, int64_t P, uint64_t* keys, int32_t* vals) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= P) return;
    double d = records[NUREC_TREC_SIZE * i + NUREC_TREC_DEPTH];
    keys[i] = d > 0.0 ? (uint64_t)__double_as_longlong(d) : ~(uint64_t)0;
    vals[i] = (int32_t)i;
}

__global__ void rank_scatter_kernel(const int32_t* sorted, int64_t P, int32_t* rank) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < P) rank[sorted[i]] = (int32_t)i;
}

/* Keys of item i: (image tile << 32) | depth key, one per tile it touches,
 * written from the item's offset. One thread per item writes the keys of a
 * small item; an item with more than EMIT_COOP tiles (a Gaussian near the
 * camera covers thousands) is written by its whole warp, 32 consecutive
 * keys at a time: one thread looping over thousands of keys was a long tail
 * that made emission the largest part of binning (street camera: 1.37 ms of
 * 2.65). The loop over items is warp-uniform so that the warp can vote. */
#define EMIT_COOP 32

struct EmitItem {
    int64_t start, cnt; /* first key slot, number of keys */
    uint64_t base;      /* first tile id of the item's image */
    uint32_t dkey;      /* depth key */
    int ok;             /* footprint mode: a valid footprint */
    nurec_footprint f;
};

__device__ bool emit_item_init(const nurec_tiles_params& p, int64_t i, int64_t tiles, const int32_t* rank,
                               EmitItem* e) {
    e->cnt = p.counts[i];
    if (e->cnt <= 0) return false;
    e->start = p.offsets[i] - e->cnt;
    if (e->start >= p.capacity) return false;
    if (p.dtype == NUREC_F64) {
        const double* r = (const double*)p.records + NUREC_TREC_SIZE * i;
        e->ok = p.boxes ? 1 : nurec_footprint_of_f64(&e->f, r, p.width, p.height);
        e->dkey = (uint32_t)rank[i];
    } else {
        const float* r = (const float*)p.records + NUREC_TREC_SIZE * i;
        e->ok = p.boxes ? 1 : nurec_footprint_of_f32(&e->f, r, p.width, p.height);
        e->dkey = __float_as_uint(r[NUREC_TREC_DEPTH]);
    }
    e->base = (uint64_t)((i / p.items_per_image) * tiles);
    return true;
}

/* Writes an item's keys that fit the capacity: this thread the ones at
 * lane, lane + step, ... (lane 0, step 1: all of them; lane, 32: its share
 * of a warp's). Any key the geometry cannot name (never when the counts
 * match) is a sentinel. */
__device__ void emit_item(const nurec_tiles_params& p, int64_t i, const EmitItem& e, int lane, int step,
                          uint64_t sentinel, uint64_t* keys, int32_t* vals) {
    const int64_t cap = p.capacity;
    const int64_t end = e.start + e.cnt < cap ? e.cnt : cap - e.start; /* keys that fit */
    int64_t k = 0; /* keys named so far (uniform over the lanes) */
    if (p.boxes) {
        const int32_t* bx = p.boxes + NUREC_BOX_SIZE * i;
        int64_t n = nurec_box_count(bx, p.tiles_x, p.tiles_y);
        if (n > end) n = end;
        for (int64_t q = lane; q < n; q += step) {
            keys[e.start + q] = ((e.base + (uint64_t)nurec_box_tile(bx, q, p.tiles_x)) << 32) | e.dkey;
            vals[e.start + q] = (int32_t)i;
        }
        k = n;
    } else if (e.ok) {
        for (int ty = e.f.py0 / NUREC_TILE; ty <= e.f.py1 / NUREC_TILE && k < end; ++ty) {
            int a, b;
            if (!nurec_footprint_row(&e.f, ty, p.width, &a, &b)) continue;
            const uint64_t row = e.base + (uint64_t)ty * p.tiles_x + (uint64_t)a;
            int64_t w = b - a + 1;
            if (w > end - k) w = end - k;
            for (int64_t q = lane; q < w; q += step) {
                keys[e.start + k + q] = ((row + (uint64_t)q) << 32) | e.dkey;
                vals[e.start + k + q] = (int32_t)i;
            }
            k += w;
        }
    }
    for (int64_t q = k + lane; q < end; q += step) {
        keys[e.start + q] = sentinel;
        vals[e.start + q] = (int32_t)i;
    }
}

__global__ void __launch_bounds__(TILES_THREADS)
emit_kernel(nurec_tiles_params p, uint64_t* keys, int32_t* vals, const int32_t* rank) {
    const int64_t P = num_items(&p);
    const int64_t cap = p.capacity;
    const int64_t tiles = (int64_t)p.tiles_x * p.tiles_y;
    const uint64_t sentinel = ((uint64_t)(p.num_images * tiles) << 32) | 0xffffffffu;
    const int64_t total = P > 0 ? p.offsets[P - 1] : 0;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = threadIdx.x & 31;
    if (tid == 0) {
        p.status[0] = total;
        p.status[1] = total > cap ? 1 : 0;
    }
    for (int64_t i0 = tid - lane; i0 < P; i0 += stride) { /* warp-uniform */
        const int64_t i = i0 + lane;
        EmitItem e;
        const bool has = i < P && emit_item_init(p, i, tiles, rank, &e);
        const bool coop = has && e.cnt > EMIT_COOP;
        if (has && !coop) emit_item(p, i, e, 0, 1, sentinel, keys, vals);
        for (unsigned m = __ballot_sync(0xffffffffu, coop); m != 0; m &= m - 1) {
            const int src = __ffs(m) - 1;
            const int64_t j = i0 + src;
            EmitItem ej;
            emit_item_init(p, j, tiles, rank, &ej); /* every lane: the same item */
            emit_item(p, j, ej, lane, 32, sentinel, keys, vals);
        }
    }
    for (int64_t j = (total < cap ? total : cap) + tid; j < cap; j += stride) {
        keys[j] = sentinel;
        vals[j] = 0;
    }
}

__global__ void ranges_kernel(const uint64_t* keys, const int64_t* status, int64_t cap,
                              int64_t ntile, int64_t* ranges) {
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t n = status[0] < cap ? status[0] : cap;
    if (j >= n) return;
    uint64_t t = keys[j] >> 32;
    if (t >= (uint64_t)ntile) return;
    if (j == 0 || (keys[j - 1] >> 32) != t) ranges[2 * t] = j;
    if (j == n - 1 || (keys[j + 1] >> 32) != t) ranges[2 * t + 1] = j + 1;
}

unsigned blocks_for(int64_t n) { return (unsigned)((n + TILES_THREADS - 1) / TILES_THREADS); }

}  // namespace

extern "C" size_t nurec_tiles_workspace_bytes(const nurec_tiles_params* p) {
    Layout L;
    if (!layout_of(p, &L)) return 0;
    return L.total;
}

extern "C" int nurec_tiles_bin_cuda(const nurec_tiles_params* p, void* stream) {
    cudaStream_t s = (cudaStream_t)stream;
    const int64_t P = num_items(p), cap = p->capacity;
    const int64_t ntile = p->num_images * p->tiles_x * (int64_t)p->tiles_y;
    Layout L;
    if (!layout_of(p, &L) || p->workspace_bytes < L.total) return NUREC_ERR_CUDA;
    char* w = (char*)(((uintptr_t)p->workspace + 255) & ~(uintptr_t)255);
    uint64_t* keys_in = (uint64_t*)(w + L.keys_in);
    uint64_t* keys_out = (uint64_t*)(w + L.keys_out);
    int32_t* vals_in = (int32_t*)(w + L.vals_in);
    if (ntile > 0 && cudaMemsetAsync(p->tile_ranges, 0, sizeof(int64_t) * 2 * (size_t)ntile, s) != cudaSuccess)
        return NUREC_ERR_CUDA;
    if (P > 0) {
        size_t bytes = L.scan_bytes;
        if (cub::DeviceScan::InclusiveSum(w + L.scan_tmp, bytes, p->counts, p->offsets, P, s) !=
            cudaSuccess)
            return NUREC_ERR_CUDA;
    }
    const int32_t* rank = nullptr;
    if (p->dtype == NUREC_F64 && P > 0) {
        uint64_t* dk_in = (uint64_t*)(w + L.dkeys_in);
        uint64_t* dk_out = (uint64_t*)(w + L.dkeys_out);
        int32_t* dv_in = (int32_t*)(w + L.dvals_in);
        int32_t* dv_out = (int32_t*)(w + L.dvals_out);
        int32_t* rk = (int32_t*)(w + L.rank);
        depth_bits_kernel<<<blocks_for(P), TILES_THREADS, 0, s>>>((const double*)p->records, P, dk_in, dv_in);
        size_t bytes = L.dsort_bytes;
        if (cub::DeviceRadixSort::SortPairs(w + L.dsort_tmp, bytes, dk_in, dk_out, dv_in, dv_out, P,
                                            0, 64, s) != cudaSuccess)
            return NUREC_ERR_CUDA;
        rank_scatter_kernel<<<blocks_for(P), TILES_THREADS, 0, s>>>(dv_out, P, rk);
        rank = rk;
    }
    unsigned eb = blocks_for(P > 0 ? P : 1);
    unsigned tail = blocks_for(cap) < 4096 ? blocks_for(cap) : 4096;
    if (tail > eb) eb = tail;
    emit_kernel<<<eb, TILES_THREADS, 0, s>>>(*p, keys_in, vals_in, rank);
    if (cap > 0) {
        size_t bytes = L.sort_bytes;
        if (cub::DeviceRadixSort::SortPairs(w + L.sort_tmp, bytes, keys_in, keys_out, vals_in,
                                            p->isect_items, cap, 0, key_end_bit(p), s) != cudaSuccess)
            return NUREC_ERR_CUDA;
        ranges_kernel<<<blocks_for(cap), TILES_THREADS, 0, s>>>(keys_out, p->status, cap, ntile,
                                                               p->tile_ranges);
    }
    return cudaGetLastError() == cudaSuccess ? NUREC_OK : NUREC_ERR_CUDA;
}
