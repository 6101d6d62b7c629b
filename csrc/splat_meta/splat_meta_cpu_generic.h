/* Generic over real_t (see math/generic.h). */

static int NR(splat_meta_cpu)(const nurec_splat_meta_params* p) {
    const real_t* rec = (const real_t*)p->records;
    const real_t* cell = (const real_t*)p->cell;
    const real_t cu = cell ? cell[0] : (real_t)p->cell_u, cv = cell ? cell[1] : (real_t)p->cell_v;
    real_t* m2d = (real_t*)p->means2d;
    real_t* dep = (real_t*)p->depths;
    for (int64_t i = 0; i < p->num_items; ++i)
        NR(splat_meta_item)(rec + NUREC_TREC_SIZE * i, p->counts[i], cu, cv, m2d + 2 * i, p->radii + 2 * i,
                            dep + i);
    return NUREC_OK;
}
