/* CPU kernels of offload: one loop over the index each (the host tables are
 * plain memory here: pinned or not, nothing to resolve). */
#include "offload/offload_math.h"

#define NUREC_GENERIC_FILE "offload/offload_cpu_generic.h"
#include "math/generic.h"

int nurec_gather_rows_cpu(const nurec_gather_rows_params* p) {
    if (p->dtype == NUREC_F32) return gather_rows_cpu_f32(p);
    if (p->dtype == NUREC_F64) return gather_rows_cpu_f64(p);
    return NUREC_ERR_DTYPE;
}

/* adam_rows' index check, in one pass: its bad entries (0: fine). */
static int64_t offload_bad_entries(const int64_t* index, int64_t num_index, int64_t num_rows) {
    int64_t prev = -1, bad = 0;
    for (int64_t k = 0; k < num_index; ++k) {
        bad += nurec_offload_bad_entry(index[k], prev, num_rows);
        prev = nurec_offload_last_row(prev, nurec_offload_row_or_none(index[k], num_rows));
    }
    return bad;
}

/* The same semantics as on CUDA: the check writes the status, and a bad
 * index updates nothing (the Python wrapper raises). */
int nurec_adam_rows_cpu(const nurec_adam_rows_params* p) {
    if (p->dtype != NUREC_F32 && p->dtype != NUREC_F64) return NUREC_ERR_DTYPE;
    *p->status = offload_bad_entries(p->index, p->num_index, p->num_rows);
    if (*p->status != 0) return NUREC_OK;
    return p->dtype == NUREC_F64 ? adam_rows_cpu_f64(p) : adam_rows_cpu_f32(p);
}

int nurec_put_rows_cpu(const nurec_put_rows_params* p) {
    if (p->dtype != NUREC_F32 && p->dtype != NUREC_F64) return NUREC_ERR_DTYPE;
    *p->status = offload_bad_entries(p->index, p->num_index, p->num_rows);
    if (*p->status != 0) return NUREC_OK;
    return p->dtype == NUREC_F64 ? put_rows_cpu_f64(p) : put_rows_cpu_f32(p);
}
