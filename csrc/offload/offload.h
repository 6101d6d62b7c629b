/* offload: the rows of a table that may live in pinned host memory (issue
 * 51: a scene too big for the GPU keeps its appearance rows and their Adam
 * moments on the host), read and updated in place by CUDA kernels through
 * unified addressing, with no host sync:
 *   gather_rows  rows[k] = table[index[k]] (zeros for padding -1, NaN for
 *                any other index out of range: never read out of bounds);
 *   adam_rows    torch.optim.Adam's step on the listed rows only (gsplat's
 *                SelectiveAdam), checked first on the device: a bad index
 *                updates nothing and reports its bad entries in a status;
 *   put_rows     table[index[k]] = rows[k] (a cache's write-back), the
 *                index checked as adam_rows' (a bad one writes nothing).
 * Plain C params structs and launchers; the per-element math is in
 * offload_math.h, shared by CPU and CUDA. */
#ifndef NUREC_OFFLOAD_H
#define NUREC_OFFLOAD_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nurec_gather_rows_params {
    int dtype;             /* enum nurec_dtype of table and rows */
    int64_t num_rows;      /* N, rows of the table */
    int64_t dim;           /* D, values a row */
    int64_t num_index;     /* K, entries of index (rows out) */
    const void* table;     /* [N, D] real, dense: on the device, or (CUDA)
                              the device address of pinned host memory */
    const int64_t* index;  /* [K] rows to read: [0, N), -1 padding */
    void* rows;            /* [K, D] real out */
} nurec_gather_rows_params;

typedef struct nurec_adam_rows_params {
    int dtype;             /* enum nurec_dtype of param, moments and grad */
    int64_t num_rows;      /* N */
    int64_t dim;           /* D */
    int64_t num_index;     /* K */
    /* [N, D] real, dense, updated in place (device addresses, as table) */
    void* param;
    void* exp_avg;
    void* exp_avg_sq;
    const int64_t* index;  /* [K]: valid entries strictly increasing, -1 skipped */
    const void* grad;      /* [K, D] real: row k is the gradient of row index[k] */
    const void* step;      /* one float32 or float64 value: Adam's t (>= 1) */
    int step_is_f64;
    double lr, beta1, beta2, eps, weight_decay;
    int64_t* status;       /* [1] out: index's bad entries (0: updated) */
} nurec_adam_rows_params;

typedef struct nurec_put_rows_params {
    int dtype;             /* enum nurec_dtype of table and rows */
    int64_t num_rows;      /* N */
    int64_t dim;           /* D */
    int64_t num_index;     /* K */
    void* table;           /* [N, D] real, dense, written in place (device addresses, as gather's) */
    const int64_t* index;  /* [K]: valid entries strictly increasing, -1 skipped */
    const void* rows;      /* [K, D] real: row k goes to table row index[k] */
    int64_t* status;       /* [1] out: index's bad entries (0: written) */
} nurec_put_rows_params;

int nurec_gather_rows_cpu(const nurec_gather_rows_params* p);
int nurec_gather_rows_cuda(const nurec_gather_rows_params* p, void* stream);
int nurec_adam_rows_cpu(const nurec_adam_rows_params* p);
int nurec_adam_rows_cuda(const nurec_adam_rows_params* p, void* stream);
int nurec_put_rows_cpu(const nurec_put_rows_params* p);
int nurec_put_rows_cuda(const nurec_put_rows_params* p, void* stream);

/* The address at which CUDA kernels on the current device reach host
 * memory in place (zero-copy, cudaPointerGetAttributes): NUREC_OK with
 * *device set, NUREC_ERR_NOT_PINNED where `host` is not page-locked memory
 * (cudaHostAlloc / cudaHostRegister, e.g. Tensor.pin_memory()), which no
 * kernel can reach, or NUREC_ERR_CUDA. An address inside a pinned block (a
 * view with an offset) resolves too. The glue resolves each host tensor
 * before the launch, so that its message names the one that is not pinned. */
int nurec_offload_device_pointer_cuda(const void* host, void** device);

#ifdef __cplusplus
}
#endif

#endif /* NUREC_OFFLOAD_H */
