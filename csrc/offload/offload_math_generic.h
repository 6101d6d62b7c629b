/* Generic over real_t (see math/generic.h). */

/* The value gather_rows writes for an entry r that names no row: 0 for
 * padding (-1), NaN for a bad entry (so that a bad index shows in the
 * result without a host sync to find it). */
NUREC_HD real_t NR(offload_fill)(int64_t r) { return r == -1 ? (real_t)0 : (real_t)NAN; }

/* torch.optim.Adam's scalars of one step, computed in double (as its
 * Python floats) and rounded to real_t where it applies them to a tensor
 * of that dtype. */
typedef struct NR(offload_adam_coefs) {
    real_t one_minus_beta1;  /* lerp's weight */
    real_t beta2, one_minus_beta2;
    real_t step_size;        /* lr / (1 - beta1^t) */
    real_t bc2_sqrt;         /* sqrt(1 - beta2^t) */
    real_t eps, weight_decay;
} NR(offload_adam_coefs);

NUREC_HD NR(offload_adam_coefs) NR(offload_adam_coefs_of)(const nurec_adam_rows_params* p) {
    const double t = nurec_offload_step(p->step, p->step_is_f64);
    NR(offload_adam_coefs) c;
    c.one_minus_beta1 = (real_t)(1.0 - p->beta1);
    c.beta2 = (real_t)p->beta2;
    c.one_minus_beta2 = (real_t)(1.0 - p->beta2);
    c.step_size = (real_t)(p->lr / (1.0 - pow(p->beta1, t)));
    c.bc2_sqrt = (real_t)sqrt(1.0 - pow(p->beta2, t));
    c.eps = (real_t)p->eps;
    c.weight_decay = (real_t)p->weight_decay;
    return c;
}

/* torch's lerp (at::lerp's formula, exact at both ends): a + w (b - a). */
NUREC_HD real_t NR(offload_lerp)(real_t a, real_t b, real_t w) {
    return R_FABS(w) < (real_t)0.5 ? a + w * (b - a) : b - (b - a) * ((real_t)1 - w);
}

/* One element of torch.optim.Adam's step (amsgrad off, L2 weight decay), in
 * its order of operations (single-tensor path):
 *   g = grad + wd p;  m = lerp(m, g, 1 - beta1);  v = beta2 v + (1 - beta2) g g;
 *   p -= step_size m / (sqrt(v) / sqrt(1 - beta2^t) + eps). */
NUREC_HD void NR(offload_adam_element)(const NR(offload_adam_coefs)* c, real_t g, real_t* p, real_t* m,
                                       real_t* v) {
    const real_t pv = *p;
    if (c->weight_decay != 0) g = g + c->weight_decay * pv;
    const real_t mv = NR(offload_lerp)(*m, g, c->one_minus_beta1);
    const real_t vv = *v * c->beta2 + c->one_minus_beta2 * g * g;
    const real_t denom = R_SQRT(vv) / c->bc2_sqrt + c->eps;
    *p = pv - c->step_size * mv / denom;
    *m = mv;
    *v = vv;
}
