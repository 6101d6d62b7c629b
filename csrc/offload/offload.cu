/* CUDA kernels of offload. gather_rows: one launch, a thread per vector (or
 * value) of an output row. adam_rows and put_rows: a memset of the status, a check of
 * the index (its bad entries counted into the status) and the update,
 * which reads the status on the device and does nothing where it is not
 * zero: no host sync anywhere. The tables may be pinned host memory, read
 * and written in place over PCIe (their device addresses:
 * nurec_offload_device_pointer_cuda). */
#include <cuda_runtime.h>

#include "offload/offload_math.h"

#include <stdint.h>

#define NUREC_OFFLOAD_THREADS 256
#define NUREC_OFFLOAD_WARPS (NUREC_OFFLOAD_THREADS / 32)

#define NUREC_GENERIC_FILE "offload/offload_cuda_generic.cuh"
#include "math/generic.h"

extern "C" int nurec_offload_device_pointer_cuda(const void* host, void** device) {
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, host) != cudaSuccess) {
        cudaGetLastError(); /* not sticky: clear it, so that no later launch reports it */
        return NUREC_ERR_CUDA;
    }
    /* cudaMemoryTypeUnregistered: pageable memory (no kernel can reach it) */
    if (a.type != cudaMemoryTypeHost || a.devicePointer == NULL) return NUREC_ERR_NOT_PINNED;
    *device = a.devicePointer;
    return NUREC_OK;
}

/* ------------------------------------------------------------ the check */

/* Inclusive scan of nurec_offload_last_row over the block's values (each a
 * row or -1), in thread order; *total is the block's last row (-1: none).
 * Every thread of the block must call it (it synchronizes the block). */
__device__ int64_t offload_scan_last_row(int64_t x, int64_t* total) {
    __shared__ int64_t warp_last[NUREC_OFFLOAD_WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int d = 1; d < 32; d <<= 1) {
        const int64_t y = __shfl_up_sync(0xffffffffu, x, d);
        if (lane >= d) x = nurec_offload_last_row(y, x);
    }
    if (lane == 31) warp_last[warp] = x;
    __syncthreads();
    int64_t before = -1, all = -1;
    for (int w = 0; w < NUREC_OFFLOAD_WARPS; ++w) {
        if (w < warp) before = nurec_offload_last_row(before, warp_last[w]);
        all = nurec_offload_last_row(all, warp_last[w]);
    }
    __syncthreads(); /* warp_last is read before the next call writes it */
    *total = all;
    return nurec_offload_last_row(before, x);
}

/* Counts adam_rows' bad entries of index into *status (zeroed before).
 * Each entry needs the nearest row before it: within the block from the
 * scan, before the block from the blocks before it, read back a block at a
 * time until one names a row. In a compaction's layout (rows, then
 * padding) that is one step, and only blocks that hold a row look back;
 * they look back over disjoint stretches (each stops at the first block
 * with a row), so all of them together read the index at most twice. */
__global__ void __launch_bounds__(NUREC_OFFLOAD_THREADS)
    offload_check_kernel(const int64_t* index, int64_t num_index, int64_t num_rows, int64_t* status) {
    __shared__ int64_t last[NUREC_OFFLOAD_THREADS];
    const int64_t start = (int64_t)blockIdx.x * NUREC_OFFLOAD_THREADS;
    const int64_t k = start + threadIdx.x;
    const int64_t r = k < num_index ? index[k] : -1;
    int64_t block_last;
    last[threadIdx.x] = offload_scan_last_row(nurec_offload_row_or_none(r, num_rows), &block_last);
    __syncthreads();
    int64_t prev = threadIdx.x > 0 ? last[threadIdx.x - 1] : -1;
    if (block_last >= 0) { /* uniform over the block, as the loop below */
        int64_t carry = -1;
        for (int64_t s = start; s > 0 && carry < 0; s -= NUREC_OFFLOAD_THREADS) {
            const int64_t j = s - NUREC_OFFLOAD_THREADS + threadIdx.x; /* s is a multiple of the block */
            offload_scan_last_row(nurec_offload_row_or_none(index[j], num_rows), &carry);
        }
        prev = nurec_offload_last_row(carry, prev);
    }
    const int bad = k < num_index && nurec_offload_bad_entry(r, prev, num_rows);
    const int count = __syncthreads_count(bad);
    if (threadIdx.x == 0 && count > 0) atomicAdd((unsigned long long*)status, (unsigned long long)count);
}

/* ------------------------------------------------------------ launchers */

static int aligned16(const void* ptr) { return ((uintptr_t)ptr & 15) == 0; }

/* Whether rows of `dim` values split into 16-byte vectors in every buffer. */
static int can_vectorize(int dtype, int64_t dim, const void* const* ptrs, int n) {
    const int64_t per_vec = dtype == NUREC_F64 ? 2 : 4;
    if (dim % per_vec != 0) return 0;
    for (int i = 0; i < n; ++i)
        if (!aligned16(ptrs[i])) return 0;
    return 1;
}

/* Blocks for the threads of `items` entries of `dim` values, V a thread;
 * 0 where there is nothing to do, -1 where the grid would be too large. */
static int64_t num_blocks(int64_t items, int64_t dim, int vec, int dtype) {
    const int64_t per_thread = vec ? (dtype == NUREC_F64 ? 2 : 4) : 1;
    const int64_t blocks = (items * (dim / per_thread) + NUREC_OFFLOAD_THREADS - 1) / NUREC_OFFLOAD_THREADS;
    return blocks > 2147483647 ? -1 : blocks;
}

typedef void (*gather_kernel)(nurec_gather_rows_params);
typedef void (*adam_kernel)(nurec_adam_rows_params);
typedef void (*put_kernel)(nurec_put_rows_params);

/* adam_rows' and put_rows' first two steps: the status zeroed, then the
 * index's bad entries counted into it (K > 0). */
static int check_index_async(const int64_t* index, int64_t num_index, int64_t num_rows, int64_t* status,
                             cudaStream_t s) {
    const int64_t check_blocks = (num_index + NUREC_OFFLOAD_THREADS - 1) / NUREC_OFFLOAD_THREADS;
    if (check_blocks > 2147483647) return NUREC_ERR_CUDA;
    if (cudaMemsetAsync(status, 0, sizeof(int64_t), s) != cudaSuccess) return NUREC_ERR_CUDA;
    if (num_index == 0) return NUREC_OK;
    offload_check_kernel<<<(unsigned)check_blocks, NUREC_OFFLOAD_THREADS, 0, s>>>(index, num_index, num_rows,
                                                                                status);
    return NUREC_OK;
}

extern "C" int nurec_gather_rows_cuda(const nurec_gather_rows_params* p, void* stream) {
    if (p->dtype != NUREC_F32 && p->dtype != NUREC_F64) return NUREC_ERR_DTYPE;
    const void* ptrs[] = {p->table, p->rows};
    const int vec = can_vectorize(p->dtype, p->dim, ptrs, 2);
    const int64_t blocks = num_blocks(p->num_index, p->dim, vec, p->dtype);
    if (blocks == 0) return NUREC_OK;
    if (blocks < 0) return NUREC_ERR_CUDA;
    const gather_kernel kernels[2][2] = {{gather_rows_kernel_f32<false>, gather_rows_kernel_f32<true>},
                                         {gather_rows_kernel_f64<false>, gather_rows_kernel_f64<true>}};
    kernels[p->dtype == NUREC_F64][vec]<<<(unsigned)blocks, NUREC_OFFLOAD_THREADS, 0, (cudaStream_t)stream>>>(*p);
    return cudaGetLastError() == cudaSuccess ? NUREC_OK : NUREC_ERR_CUDA;
}

extern "C" int nurec_adam_rows_cuda(const nurec_adam_rows_params* p, void* stream) {
    if (p->dtype != NUREC_F32 && p->dtype != NUREC_F64) return NUREC_ERR_DTYPE;
    cudaStream_t s = (cudaStream_t)stream;
    const void* ptrs[] = {p->param, p->exp_avg, p->exp_avg_sq, p->grad};
    const int vec = can_vectorize(p->dtype, p->dim, ptrs, 4);
    const int64_t blocks = num_blocks(p->num_index, p->dim, vec, p->dtype);
    if (blocks < 0) return NUREC_ERR_CUDA;
    const int st = check_index_async(p->index, p->num_index, p->num_rows, p->status, s);
    if (st != NUREC_OK || blocks == 0) return st; /* K = 0: nothing to check or update (status 0) */
    const adam_kernel kernels[2][2] = {{adam_rows_kernel_f32<false>, adam_rows_kernel_f32<true>},
                                       {adam_rows_kernel_f64<false>, adam_rows_kernel_f64<true>}};
    kernels[p->dtype == NUREC_F64][vec]<<<(unsigned)blocks, NUREC_OFFLOAD_THREADS, 0, s>>>(*p);
    return cudaGetLastError() == cudaSuccess ? NUREC_OK : NUREC_ERR_CUDA;
}

extern "C" int nurec_put_rows_cuda(const nurec_put_rows_params* p, void* stream) {
    if (p->dtype != NUREC_F32 && p->dtype != NUREC_F64) return NUREC_ERR_DTYPE;
    cudaStream_t s = (cudaStream_t)stream;
    const void* ptrs[] = {p->table, p->rows};
    const int vec = can_vectorize(p->dtype, p->dim, ptrs, 2);
    const int64_t blocks = num_blocks(p->num_index, p->dim, vec, p->dtype);
    if (blocks < 0) return NUREC_ERR_CUDA;
    const int st = check_index_async(p->index, p->num_index, p->num_rows, p->status, s);
    if (st != NUREC_OK || blocks == 0) return st;
    const put_kernel kernels[2][2] = {{put_rows_kernel_f32<false>, put_rows_kernel_f32<true>},
                                      {put_rows_kernel_f64<false>, put_rows_kernel_f64<true>}};
    kernels[p->dtype == NUREC_F64][vec]<<<(unsigned)blocks, NUREC_OFFLOAD_THREADS, 0, s>>>(*p);
    return cudaGetLastError() == cudaSuccess ? NUREC_OK : NUREC_ERR_CUDA;
}
