/* Generic over real_t (see math/generic.h). The ray bundle, a model of the
 * sensor layer: a sensor given by its rays, each an origin o and a unit
 * direction d in world space (the caller has put each ray at its own
 * time's pose), with no grid behind them. A Gaussian (mean mu, A =
 * S^-1 R^T, so that Sigma^-1 = A^T A) meets the ray o + t d where its
 * density along the ray peaks: with a = A (o - mu), b = A d,
 *   t* = -(a . b) / (b . b),   p = a + t* b,   sigma = |p|^2 / 2,
 * sigma the smallest Mahalanobis half-distance of the ray to the mean and
 * t* the range of that point (3DGRT's and gsplat eval3d's response, exact
 * in 3D: no projection, no Jacobian). p, not a.a - (a.b)^2 / b.b: far from
 * the mean the two terms cancel, and float32 loses sigma there. */

/* sigma and t* of one (ray, Gaussian) pair; writes a, b, p and 1 / b.b for
 * the VJP. A row-major 3 x 3. */
NUREC_HD void NR(ray_eval)(const real_t* A, const real_t* mu, const real_t* o, const real_t* d, real_t a[3],
                           real_t b[3], real_t p[3], real_t* ibb, real_t* tstar, real_t* sigma) {
    const real_t w0 = o[0] - mu[0], w1 = o[1] - mu[1], w2 = o[2] - mu[2];
    for (int k = 0; k < 3; ++k) {
        a[k] = A[3 * k] * w0 + A[3 * k + 1] * w1 + A[3 * k + 2] * w2;
        b[k] = A[3 * k] * d[0] + A[3 * k + 1] * d[1] + A[3 * k + 2] * d[2];
    }
    const real_t bb = b[0] * b[0] + b[1] * b[1] + b[2] * b[2];
    *ibb = (real_t)1 / bb;
    const real_t t = -(a[0] * b[0] + a[1] * b[1] + a[2] * b[2]) * *ibb;
    for (int k = 0; k < 3; ++k) p[k] = a[k] + t * b[k];
    *tstar = t;
    *sigma = (real_t)0.5 * (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]);
}

/* VJP of ray_eval: the gradients of sigma and t* -> the Gaussian's mean
 * and A (added into g_mu [3], g_A [9]). By the envelope theorem
 * d sigma / d a = p and d sigma / d b = t* p; d t* / d a = -b / b.b and
 * d t* / d b = -(p + t* b) / b.b. The ray gets no gradient (its pose is a
 * constant, as the other rasterizers' sensor poses). */
NUREC_HD void NR(ray_eval_vjp)(const real_t* o, const real_t* d, const real_t* mu, const real_t* A,
                               const real_t a[3], const real_t b[3], const real_t p[3], real_t ibb,
                               real_t tstar, real_t g_sigma, real_t g_t, real_t* g_mu, real_t* g_A) {
    const real_t w[3] = {o[0] - mu[0], o[1] - mu[1], o[2] - mu[2]};
    real_t ga[3], gb[3];
    for (int k = 0; k < 3; ++k) {
        ga[k] = g_sigma * p[k] - g_t * b[k] * ibb;
        gb[k] = g_sigma * tstar * p[k] - g_t * (p[k] + tstar * b[k]) * ibb;
    }
    (void)a;
    for (int k = 0; k < 3; ++k)
        for (int j = 0; j < 3; ++j) g_A[3 * k + j] += ga[k] * w[j] + gb[k] * d[j];
    for (int j = 0; j < 3; ++j) g_mu[j] -= A[j] * ga[0] + A[3 + j] * ga[1] + A[6 + j] * ga[2];
}
