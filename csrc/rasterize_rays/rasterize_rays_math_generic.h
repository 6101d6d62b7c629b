/* Generic over real_t (see math/generic.h). */

/* Gaussian g's record (NUREC_RAYS_G_*): mean, A = S^-1 R^T (R the rotation
 * of the normalized quaternion, so Sigma^-1 = A^T A), opacity and the
 * radius of the ball holding its ellipsoid d^T Sigma^-1 d <= 2 ln(255 o),
 * outside which alpha < 1/255. A Gaussian with a scale <= 0, an opacity
 * below 1/255 or anything non-finite is never drawn (opacity 0, radius -1). */
NUREC_HD void NR(rays_gauss)(const real_t* mean, const real_t* q, const real_t* s, real_t o, real_t* G) {
    real_t qn[4], inv, R[9];
    NR(quat_normalize)(q, qn, &inv);
    NR(quat_to_rotmat)(qn, R);
    int ok = o >= (real_t)NUREC_SPLAT_ALPHA_MIN && o < (real_t)1e30 && inv > (real_t)0;
    real_t smax = 0;
    for (int k = 0; k < 3; ++k) {
        ok = ok && s[k] > (real_t)0 && s[k] < (real_t)1e30 && R_FABS(mean[k]) < (real_t)1e30;
        smax = R_FMAX(smax, s[k]);
        G[NUREC_RAYS_G_MU + k] = mean[k];
    }
    for (int k = 0; k < 3; ++k)
        for (int j = 0; j < 3; ++j) G[NUREC_RAYS_G_A + 3 * k + j] = ok ? R[3 * j + k] / s[k] : (real_t)0;
    G[NUREC_RAYS_G_O] = ok ? o : (real_t)0;
    G[NUREC_RAYS_G_RADIUS] = ok ? R_SQRT(2 * R_LOG((real_t)255 * o)) * smax : (real_t)-1;
    G[14] = G[15] = 0;
}

/* Item (sensor c, Gaussian g): its record (the binning reads its depth:
 * the mean's distance from the sensor's centre), box and tile count. */
NUREC_HD int64_t NR(rays_item)(const nurec_rasterize_rays_params* p, int64_t c, int64_t g) {
    const real_t* G = (const real_t*)p->gauss + NUREC_RAYS_G_SIZE * g;
    const int64_t i = c * p->num_gaussians + g;
    real_t* rec = (real_t*)p->records + NUREC_TREC_SIZE * i;
    int32_t* box = p->boxes + NUREC_BOX_SIZE * i;
    const double* s = p->sensor + NUREC_RAYS_SENSOR_SIZE * c;
    const double mu[3] = {(double)G[0], (double)G[1], (double)G[2]};
    const double w0 = mu[0] - s[9], w1 = mu[1] - s[10], w2 = mu[2] - s[11];
    for (int k = 0; k < NUREC_TREC_SIZE; ++k) rec[k] = 0;
    rec[NUREC_TREC_THR] = -1;
    rec[NUREC_TREC_DEPTH] = (real_t)sqrt(w0 * w0 + w1 * w1 + w2 * w2);
    int64_t n = 0;
    nurec_box_empty(box);
    if (G[NUREC_RAYS_G_RADIUS] >= 0) {
        const int64_t cells = (int64_t)p->tiles_x * p->tiles_y;
        n = nurec_rays_box(s, p->el_edges + (p->tiles_y + 1) * c, p->az_edges + (p->tiles_x + 1) * c,
                           p->cells + NUREC_RAYS_CELL_SIZE * cells * c, p->tiles_y, p->tiles_x, mu,
                           (double)G[NUREC_RAYS_G_RADIUS], box);
        if (n > 0) rec[NUREC_TREC_THR] = 1;
    }
    p->counts[i] = n;
    return n;
}

/* A pair's alpha (SPEC 3's rules on the ray's response): 0 when skipped
 * (t* outside (near, far), alpha < 1/255). Writes t*, exp(-sigma), whether
 * alpha was clamped at 0.99 and what the VJP needs. */
NUREC_HD real_t NR(rays_alpha)(const real_t* G, const real_t* o, const real_t* d, real_t near, real_t far,
                               real_t a[3], real_t b[3], real_t pp[3], real_t* ibb, real_t* t, real_t* vis,
                               int* clamped) {
    real_t sigma;
    NR(ray_eval)(G + NUREC_RAYS_G_A, G + NUREC_RAYS_G_MU, o, d, a, b, pp, ibb, t, &sigma);
    if (!(*t > near && *t < far)) return 0;
    *vis = R_EXP(-sigma);
    const real_t al = G[NUREC_RAYS_G_O] * *vis;
    if (!(al >= (real_t)NUREC_SPLAT_ALPHA_MIN)) return 0;
    *clamped = al > (real_t)NUREC_SPLAT_ALPHA_MAX;
    return *clamped ? (real_t)NUREC_SPLAT_ALPHA_MAX : al;
}

/* Gaussian g's gradients from its accumulated (mean, A, opacity) ones:
 * A[k][j] = R[j][k] / s_k, so dR[j][k] = dA[k][j] / s_k and
 * ds_k = -sum_j dA[k][j] A[k][j] / s_k; then the rotation's VJP to the
 * quaternion through its normalization. Never-drawn Gaussians get zeros. */
NUREC_HD void NR(rays_gauss_vjp)(const real_t* q, const real_t* s, const real_t* G, const real_t* gg,
                                 real_t* gmean, real_t* gq, real_t* gs, real_t* go) {
    const int ok = G[NUREC_RAYS_G_RADIUS] >= 0;
    for (int k = 0; k < 3; ++k) gmean[k] = ok ? gg[k] : (real_t)0;
    *go = ok ? gg[12] : (real_t)0;
    if (!ok) {
        for (int k = 0; k < 4; ++k) gq[k] = 0;
        for (int k = 0; k < 3; ++k) gs[k] = 0;
        return;
    }
    real_t qn[4], inv, dR[9], gu[4];
    NR(quat_normalize)(q, qn, &inv);
    for (int k = 0; k < 3; ++k) {
        real_t acc = 0;
        for (int j = 0; j < 3; ++j) {
            const real_t dA = gg[3 + 3 * k + j];
            dR[3 * j + k] = dA / s[k];
            acc += dA * G[NUREC_RAYS_G_A + 3 * k + j];
        }
        gs[k] = -acc / s[k];
    }
    NR(quat_to_rotmat_vjp)(qn, dR, gu);
    NR(quat_normalize_vjp)(qn, inv, gu, gq);
}
