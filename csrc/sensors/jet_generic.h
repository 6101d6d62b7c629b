/* Generic over real_t (see math/generic.h). Second-order forward-mode
 * numbers in three variables (the camera-space point p = (x, y, z)): a
 * jet holds a value v, its gradient g = dv/dp, two directional
 * derivatives d[i] = g . w_i along seed directions w_0, w_1, and their
 * gradients h[i] = d(d[i])/dp. A camera model written once in these
 * operations yields its pixel, its Jacobian (g of each coordinate) and the
 * VJP of that Jacobian, sum_k w[k] d2u/dp_k dp (h of the coordinate with
 * w_i the Jacobian row's cotangent), with no derivative written by hand. */

typedef struct NR(jet) {
    real_t v, g[3], d[2], h[2][3];
} NR(jet);

NUREC_HD NR(jet) NR(jet_const)(real_t c) {
    NR(jet) r;
    r.v = c;
    for (int k = 0; k < 3; ++k) r.g[k] = r.h[0][k] = r.h[1][k] = 0;
    r.d[0] = r.d[1] = 0;
    return r;
}

/* Variable k of p, at value x, seeded with directions w0[k], w1[k]. */
NUREC_HD NR(jet) NR(jet_var)(int k, real_t x, real_t w0k, real_t w1k) {
    NR(jet) r = NR(jet_const)(x);
    r.g[k] = 1;
    r.d[0] = w0k;
    r.d[1] = w1k;
    return r;
}

NUREC_HD NR(jet) NR(jet_add)(NR(jet) a, NR(jet) b) {
    NR(jet) r;
    r.v = a.v + b.v;
    for (int k = 0; k < 3; ++k) {
        r.g[k] = a.g[k] + b.g[k];
        r.h[0][k] = a.h[0][k] + b.h[0][k];
        r.h[1][k] = a.h[1][k] + b.h[1][k];
    }
    r.d[0] = a.d[0] + b.d[0];
    r.d[1] = a.d[1] + b.d[1];
    return r;
}

/* a * s + c for real s, c */
NUREC_HD NR(jet) NR(jet_affine)(NR(jet) a, real_t s, real_t c) {
    NR(jet) r;
    r.v = a.v * s + c;
    for (int k = 0; k < 3; ++k) {
        r.g[k] = a.g[k] * s;
        r.h[0][k] = a.h[0][k] * s;
        r.h[1][k] = a.h[1][k] * s;
    }
    r.d[0] = a.d[0] * s;
    r.d[1] = a.d[1] * s;
    return r;
}

NUREC_HD NR(jet) NR(jet_sub)(NR(jet) a, NR(jet) b) { return NR(jet_add)(a, NR(jet_affine)(b, -1, 0)); }

NUREC_HD NR(jet) NR(jet_mul)(NR(jet) a, NR(jet) b) {
    NR(jet) r;
    r.v = a.v * b.v;
    for (int k = 0; k < 3; ++k) r.g[k] = a.g[k] * b.v + a.v * b.g[k];
    for (int i = 0; i < 2; ++i) {
        r.d[i] = a.d[i] * b.v + a.v * b.d[i];
        for (int k = 0; k < 3; ++k)
            r.h[i][k] = a.h[i][k] * b.v + a.g[k] * b.d[i] + a.d[i] * b.g[k] + a.v * b.h[i][k];
    }
    return r;
}

/* f(a) with f(a.v) = f0, f'(a.v) = f1, f''(a.v) = f2 */
NUREC_HD NR(jet) NR(jet_apply)(NR(jet) a, real_t f0, real_t f1, real_t f2) {
    NR(jet) r;
    r.v = f0;
    for (int k = 0; k < 3; ++k) r.g[k] = f1 * a.g[k];
    for (int i = 0; i < 2; ++i) {
        r.d[i] = f1 * a.d[i];
        for (int k = 0; k < 3; ++k) r.h[i][k] = f2 * a.g[k] * a.d[i] + f1 * a.h[i][k];
    }
    return r;
}

NUREC_HD NR(jet) NR(jet_inv)(NR(jet) a) {
    real_t i = 1 / a.v;
    return NR(jet_apply)(a, i, -i * i, 2 * i * i * i);
}

NUREC_HD NR(jet) NR(jet_div)(NR(jet) a, NR(jet) b) { return NR(jet_mul)(a, NR(jet_inv)(b)); }

/* sqrt of a > 0 */
NUREC_HD NR(jet) NR(jet_sqrt)(NR(jet) a) {
    real_t s = R_SQRT(a.v);
    return NR(jet_apply)(a, s, (real_t)0.5 / s, (real_t)-0.25 / (s * a.v));
}

/* atan2(a, b) (a the "y"), for a^2 + b^2 > 0 */
NUREC_HD NR(jet) NR(jet_atan2)(NR(jet) a, NR(jet) b) {
    const real_t s = a.v * a.v + b.v * b.v, is = 1 / s, is2 = is * is;
    const real_t fa = b.v * is, fb = -a.v * is; /* d/da, d/db */
    const real_t faa = -2 * a.v * b.v * is2, fbb = 2 * a.v * b.v * is2, fab = (a.v * a.v - b.v * b.v) * is2;
    NR(jet) r;
    r.v = R_ATAN2(a.v, b.v);
    for (int k = 0; k < 3; ++k) r.g[k] = fa * a.g[k] + fb * b.g[k];
    for (int i = 0; i < 2; ++i) {
        r.d[i] = fa * a.d[i] + fb * b.d[i];
        for (int k = 0; k < 3; ++k)
            r.h[i][k] = fa * a.h[i][k] + fb * b.h[i][k] + faa * a.g[k] * a.d[i] +
                        fab * (a.g[k] * b.d[i] + b.g[k] * a.d[i]) + fbb * b.g[k] * b.d[i];
    }
    return r;
}

/* sum_i c[i] t^i, i < n (Horner) */
NUREC_HD NR(jet) NR(jet_poly)(const real_t* c, int n, NR(jet) t) {
    NR(jet) r = NR(jet_const)(c[n - 1]);
    for (int i = n - 2; i >= 0; --i) r = NR(jet_affine)(NR(jet_mul)(r, t), 1, c[i]);
    return r;
}

/* its derivative sum_i i c[i] t^(i-1) */
NUREC_HD NR(jet) NR(jet_dpoly)(const real_t* c, int n, NR(jet) t) {
    NR(jet) r = NR(jet_const)((real_t)(n - 1) * c[n - 1]);
    for (int i = n - 2; i >= 1; --i) r = NR(jet_affine)(NR(jet_mul)(r, t), 1, (real_t)i * c[i]);
    return r;
}
