/* Generic over real_t (see math/generic.h). */

static int NR(covariance_forward_cpu)(const nurec_covariance_params* p) {
    const int64_t w = p->triu ? NUREC_COV_TRIU : NUREC_COV_FULL;
    const real_t* q = (const real_t*)p->quats;
    const real_t* s = (const real_t*)p->scales;
    real_t* cov = p->compute_covar ? (real_t*)p->covars : NULL;
    real_t* pre = p->compute_preci ? (real_t*)p->precis : NULL;
    for (int64_t i = 0; i < p->num_items; ++i)
        NR(covariance_item)(q + 4 * i, s + 3 * i, p->triu, cov ? cov + w * i : NULL, pre ? pre + w * i : NULL);
    return NUREC_OK;
}

static int NR(covariance_backward_cpu)(const nurec_covariance_params* p) {
    const int64_t w = p->triu ? NUREC_COV_TRIU : NUREC_COV_FULL;
    const real_t* q = (const real_t*)p->quats;
    const real_t* s = (const real_t*)p->scales;
    const real_t* gc = p->compute_covar ? (const real_t*)p->grad_covars : NULL;
    const real_t* gp = p->compute_preci ? (const real_t*)p->grad_precis : NULL;
    real_t* gq = (real_t*)p->grad_quats;
    real_t* gs = (real_t*)p->grad_scales;
    for (int64_t i = 0; i < p->num_items; ++i)
        NR(covariance_item_vjp)(q + 4 * i, s + 3 * i, gc ? gc + w * i : NULL, gp ? gp + w * i : NULL, p->triu,
                                gq + 4 * i, gs + 3 * i);
    return NUREC_OK;
}
