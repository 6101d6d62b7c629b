/* Generic over real_t (see math/generic.h). */

/* The upper triangle u (00, 01, 02, 11, 12, 22) of F F^T, F = R diag(f):
 * f = s gives the covariance R S S R^T, f = 1 / s the precision
 * R S^-1 S^-1 R^T. Through the factor F (not R diag(f^2) R^T) so that
 * float32 rounds as the reference's M M^T does. */
NUREC_HD void NR(cov_gram)(const real_t R[9], const real_t f[3], real_t u[6]) {
    real_t F[9];
    NUREC_UNROLL
    for (int k = 0; k < 9; ++k) F[k] = R[k] * f[k % 3];
    u[0] = F[0] * F[0] + F[1] * F[1] + F[2] * F[2];
    u[1] = F[0] * F[3] + F[1] * F[4] + F[2] * F[5];
    u[2] = F[0] * F[6] + F[1] * F[7] + F[2] * F[8];
    u[3] = F[3] * F[3] + F[4] * F[4] + F[5] * F[5];
    u[4] = F[3] * F[6] + F[4] * F[7] + F[5] * F[8];
    u[5] = F[6] * F[6] + F[7] * F[7] + F[8] * F[8];
}

/* Writes the symmetric matrix of upper triangle u: its 6 values (triu) or
 * all 9, row-major. */
NUREC_HD void NR(cov_store)(const real_t u[6], int triu, real_t* out) {
    if (triu) {
        NUREC_UNROLL
        for (int k = 0; k < 6; ++k) out[k] = u[k];
        return;
    }
    out[0] = u[0]; out[1] = u[1]; out[2] = u[2];
    out[3] = u[1]; out[4] = u[3]; out[5] = u[4];
    out[6] = u[2]; out[7] = u[4]; out[8] = u[5];
}

/* The rotation of a quaternion of any norm (quat_normalize's policy: a zero
 * quaternion is the identity, with zero gradient) and 1 / |q|. */
NUREC_HD void NR(cov_rotation)(const real_t q[4], real_t qn[4], real_t* inv_norm, real_t R[9]) {
    NR(quat_normalize)(q, qn, inv_norm);
    NR(quat_to_rotmat)(qn, R);
}

/* One item: the covariance into covar and / or the precision into preci
 * (NULL: not computed), 9 or (triu) 6 values each. */
NUREC_HD void NR(covariance_item)(const real_t q[4], const real_t s[3], int triu, real_t* covar,
                                  real_t* preci) {
    real_t qn[4], inv_norm, R[9], u[6];
    NR(cov_rotation)(q, qn, &inv_norm, R);
    if (covar) {
        NR(cov_gram)(R, s, u);
        NR(cov_store)(u, triu, covar);
    }
    if (preci) {
        const real_t t[3] = {(real_t)1 / s[0], (real_t)1 / s[1], (real_t)1 / s[2]};
        NR(cov_gram)(R, t, u);
        NR(cov_store)(u, triu, preci);
    }
}

/* VJP of cov_gram then cov_store, given g, the gradient of what cov_store
 * wrote: adds dR to dR, writes df. The gradient of F F^T as a full matrix
 * G (with triu, zero below the diagonal: an entry of the triangle stands
 * for itself alone) gives dF = (G + G^T) F; then dR_ij = dF_ij f_j and
 * df_j = sum_i dF_ij R_ij. */
NUREC_HD void NR(cov_gram_vjp)(const real_t R[9], const real_t f[3], const real_t* g, int triu, real_t dR[9],
                               real_t df[3]) {
    real_t S[9]; /* G + G^T */
    if (triu) {
        S[0] = 2 * g[0]; S[1] = g[1]; S[2] = g[2];
        S[4] = 2 * g[3]; S[5] = g[4];
        S[8] = 2 * g[5];
    } else {
        S[0] = 2 * g[0]; S[1] = g[1] + g[3]; S[2] = g[2] + g[6];
        S[4] = 2 * g[4]; S[5] = g[5] + g[7];
        S[8] = 2 * g[8];
    }
    S[3] = S[1]; S[6] = S[2]; S[7] = S[5];
    df[0] = df[1] = df[2] = 0;
    NUREC_UNROLL
    for (int i = 0; i < 3; ++i)
        NUREC_UNROLL
        for (int j = 0; j < 3; ++j) {
            const real_t dF = (S[3 * i] * R[j] + S[3 * i + 1] * R[3 + j] + S[3 * i + 2] * R[6 + j]) * f[j];
            dR[3 * i + j] += dF * f[j];
            df[j] += dF * R[3 * i + j];
        }
}

/* Backward of covariance_item given the gradients gc of the covariance and
 * gp of the precision (NULL: zero): writes gq [4] (through R's VJP and the
 * normalization) and gs [3]. The precision's factor is 1 / s:
 * ds = -d(1/s) / s^2. */
NUREC_HD void NR(covariance_item_vjp)(const real_t q[4], const real_t s[3], const real_t* gc, const real_t* gp,
                                      int triu, real_t gq[4], real_t gs[3]) {
    real_t qn[4], inv_norm, R[9], df[3], gu[4];
    real_t dR[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    NR(cov_rotation)(q, qn, &inv_norm, R);
    gs[0] = gs[1] = gs[2] = 0;
    if (gc) {
        NR(cov_gram_vjp)(R, s, gc, triu, dR, df);
        NUREC_UNROLL
        for (int k = 0; k < 3; ++k) gs[k] += df[k];
    }
    if (gp) {
        const real_t t[3] = {(real_t)1 / s[0], (real_t)1 / s[1], (real_t)1 / s[2]};
        NR(cov_gram_vjp)(R, t, gp, triu, dR, df);
        NUREC_UNROLL
        for (int k = 0; k < 3; ++k) gs[k] -= df[k] * t[k] * t[k];
    }
    NR(quat_to_rotmat_vjp)(qn, dR, gu);
    NR(quat_normalize_vjp)(qn, inv_norm, gu, gq);
}
