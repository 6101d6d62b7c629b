/* Generic over real_t (see math/generic.h). */

static int NR(gather_rows_cpu)(const nurec_gather_rows_params* p) {
    const int64_t D = p->dim;
    const real_t* table = (const real_t*)p->table;
    for (int64_t k = 0; k < p->num_index; ++k) {
        const int64_t r = p->index[k];
        real_t* out = (real_t*)p->rows + k * D;
        if (nurec_offload_is_row(r, p->num_rows)) {
            const real_t* src = table + r * D;
            for (int64_t j = 0; j < D; ++j) out[j] = src[j];
        } else {
            const real_t fill = NR(offload_fill)(r);
            for (int64_t j = 0; j < D; ++j) out[j] = fill;
        }
    }
    return NUREC_OK;
}

/* The update of every listed row, once the index has been checked (every
 * entry a row or padding, the rows strictly increasing). */
static int NR(adam_rows_cpu)(const nurec_adam_rows_params* p) {
    const int64_t D = p->dim;
    const NR(offload_adam_coefs) c = NR(offload_adam_coefs_of)(p);
    for (int64_t k = 0; k < p->num_index; ++k) {
        const int64_t r = p->index[k];
        if (r < 0) continue; /* padding */
        const real_t* g = (const real_t*)p->grad + k * D;
        real_t* param = (real_t*)p->param + r * D;
        real_t* m = (real_t*)p->exp_avg + r * D;
        real_t* v = (real_t*)p->exp_avg_sq + r * D;
        for (int64_t j = 0; j < D; ++j) NR(offload_adam_element)(&c, g[j], param + j, m + j, v + j);
    }
    return NUREC_OK;
}

/* put_rows, once the index has been checked. */
static int NR(put_rows_cpu)(const nurec_put_rows_params* p) {
    const int64_t D = p->dim;
    for (int64_t k = 0; k < p->num_index; ++k) {
        const int64_t r = p->index[k];
        if (r < 0) continue; /* padding */
        const real_t* src = (const real_t*)p->rows + k * D;
        real_t* dst = (real_t*)p->table + r * D;
        for (int64_t j = 0; j < D; ++j) dst[j] = src[j];
    }
    return NUREC_OK;
}
