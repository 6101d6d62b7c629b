/* Generic over real_t: instantiated by math/quat.h through math/generic.h. */

/* Normalizes q without overflow or underflow of |q|^2: scale by the largest
 * component first, so float32 quaternions of norm 1e30 or 1e-30 normalize
 * exactly like unit ones. Writes 1 / |q| to *inv_norm for the backward.
 * A zero quaternion is defined to normalize to the identity with zero
 * gradient (*inv_norm = 0), rather than producing NaN. */
NUREC_HD void NR(quat_normalize)(const real_t q[4], real_t out[4],
                                 real_t* inv_norm) {
    real_t m = R_FMAX(R_FMAX(R_FABS(q[0]), R_FABS(q[1])),
                      R_FMAX(R_FABS(q[2]), R_FABS(q[3])));
    if (!(m > (real_t)0)) {
        out[0] = (real_t)1; out[1] = out[2] = out[3] = (real_t)0;
        *inv_norm = (real_t)0;
        return;
    }
    /* Multiplications by reciprocals, not 9 divisions: on the GPU an IEEE
     * division is a sequence of ~10 dependent instructions, and a track pose
     * runs three normalizations in a row (the pose kernel is one warp's
     * chain of dependent instructions). 1 / m overflows only for m below the
     * smallest normal number: there the divisions stay. */
    const real_t rm = (real_t)1 / m;
    real_t s[4];
    if (rm * (real_t)0 == (real_t)0) {
        for (int c = 0; c < 4; ++c) s[c] = q[c] * rm;
    } else {
        for (int c = 0; c < 4; ++c) s[c] = q[c] / m;
    }
    const real_t n = R_SQRT(s[0] * s[0] + s[1] * s[1] + s[2] * s[2] + s[3] * s[3]); /* in [1, 2] */
    const real_t rn = (real_t)1 / n;
    for (int c = 0; c < 4; ++c) out[c] = s[c] * rn;
    *inv_norm = (real_t)1 / (m * n);
}

/* Backward of quat_normalize: (I - u u^T) g / |q|, u the normalized output. */
NUREC_HD void NR(quat_normalize_vjp)(const real_t u[4], real_t inv_norm,
                                     const real_t g[4], real_t gq[4]) {
    real_t d = u[0] * g[0] + u[1] * g[1] + u[2] * g[2] + u[3] * g[3];
    for (int c = 0; c < 4; ++c) gq[c] = (g[c] - u[c] * d) * inv_norm;
}

/* Hamilton product a ⊗ b. */
NUREC_HD void NR(quat_mul)(const real_t a[4], const real_t b[4], real_t o[4]) {
    real_t w = a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3];
    real_t x = a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2];
    real_t y = a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1];
    real_t z = a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0];
    o[0] = w; o[1] = x; o[2] = y; o[3] = z;
}

/* Backward of o = a ⊗ b (bilinear): ga = g ⊗ b*, gb = a* ⊗ g. */
NUREC_HD void NR(quat_mul_vjp)(const real_t a[4], const real_t b[4],
                               const real_t g[4], real_t ga[4], real_t gb[4]) {
    real_t bc[4] = {b[0], -b[1], -b[2], -b[3]};
    real_t ac[4] = {a[0], -a[1], -a[2], -a[3]};
    NR(quat_mul)(g, bc, ga);
    NR(quat_mul)(ac, g, gb);
}

/* Row-major rotation matrix of a unit quaternion. */
NUREC_HD void NR(quat_to_rotmat)(const real_t q[4], real_t R[9]) {
    real_t w = q[0], x = q[1], y = q[2], z = q[3];
    R[0] = 1 - 2 * (y * y + z * z); R[1] = 2 * (x * y - w * z); R[2] = 2 * (x * z + w * y);
    R[3] = 2 * (x * y + w * z); R[4] = 1 - 2 * (x * x + z * z); R[5] = 2 * (y * z - w * x);
    R[6] = 2 * (x * z - w * y); R[7] = 2 * (y * z + w * x); R[8] = 1 - 2 * (x * x + y * y);
}

/* The unit quaternion (w, x, y, z), w >= 0, of rotation matrix M (row-major),
 * by Shepperd's method: from the largest of trace, M00, M11, M22 (the first
 * on ties), so no square root of a small number. Not differentiated (poses
 * are constants). */
NUREC_HD void NR(rotmat_to_quat)(const real_t M[9], real_t q[4]) {
    const real_t tr = M[0] + M[4] + M[8];
    int which = 0;
    real_t best = tr;
    if (M[0] > best) { best = M[0]; which = 1; }
    if (M[4] > best) { best = M[4]; which = 2; }
    if (M[8] > best) { which = 3; }
    if (which == 0) {
        q[0] = 1 + tr; q[1] = M[7] - M[5]; q[2] = M[2] - M[6]; q[3] = M[3] - M[1];
    } else if (which == 1) {
        q[0] = M[7] - M[5]; q[1] = 1 + M[0] - M[4] - M[8]; q[2] = M[1] + M[3]; q[3] = M[2] + M[6];
    } else if (which == 2) {
        q[0] = M[2] - M[6]; q[1] = M[1] + M[3]; q[2] = 1 - M[0] + M[4] - M[8]; q[3] = M[5] + M[7];
    } else {
        q[0] = M[3] - M[1]; q[1] = M[2] + M[6]; q[2] = M[5] + M[7]; q[3] = 1 - M[0] - M[4] + M[8];
    }
    real_t n[4], inv;
    NR(quat_normalize)(q, n, &inv);
    const real_t s = n[0] < 0 ? (real_t)-1 : (real_t)1;
    for (int k = 0; k < 4; ++k) q[k] = s * n[k];
}

/* Backward of R = quat_to_rotmat(q) with respect to q, given dR (row-major
 * 3 x 3); the formula of quat_to_rotmat differentiated as written (the
 * caller projects onto the unit sphere through quat_normalize_vjp, which
 * makes the result independent of which unit-sphere formula was used). */
NUREC_HD void NR(quat_to_rotmat_vjp)(const real_t q[4], const real_t G[9], real_t gq[4]) {
    real_t w = q[0], x = q[1], y = q[2], z = q[3];
    gq[0] = 2 * (-z * G[1] + y * G[2] + z * G[3] - x * G[5] - y * G[6] + x * G[7]);
    gq[1] = 2 * (y * G[1] + z * G[2] + y * G[3] - 2 * x * G[4] - w * G[5] + z * G[6] + w * G[7] - 2 * x * G[8]);
    gq[2] = 2 * (-2 * y * G[0] + x * G[1] + w * G[2] + x * G[3] + z * G[5] - w * G[6] + z * G[7] - 2 * y * G[8]);
    gq[3] = 2 * (-2 * z * G[0] - w * G[1] + x * G[2] + w * G[3] - 2 * z * G[4] + y * G[5] + x * G[6] + y * G[7]);
}

/* Backward of v = R(q) m with respect to q, given gv: dR = gv m^T. */
NUREC_HD void NR(rotate_vjp_quat)(const real_t q[4], const real_t m[3],
                                  const real_t gv[3], real_t gq[4]) {
    real_t G[9];
    NUREC_UNROLL
    for (int i = 0; i < 3; ++i)
        NUREC_UNROLL
        for (int k = 0; k < 3; ++k) G[3 * i + k] = gv[i] * m[k];
    NR(quat_to_rotmat_vjp)(q, G, gq);
}

/* Logistic sigmoid without overflow for large |x|. */
NUREC_HD real_t NR(sigmoid)(real_t x) {
    if (x >= (real_t)0) return (real_t)1 / ((real_t)1 + R_EXP(-x));
    real_t e = R_EXP(x);
    return e / ((real_t)1 + e);
}

/* Angle between two unit 4-vectors, accurate for tiny angles (acos of a dot
 * product loses all digits there): 2 atan2(|a - b|, |a + b|). */
NUREC_HD real_t NR(quat_angle)(const real_t a[4], const real_t b[4],
                               real_t* nu, real_t* nv) {
    real_t su = 0, sv = 0;
    for (int c = 0; c < 4; ++c) {
        real_t u = a[c] - b[c], v = a[c] + b[c];
        su += u * u; sv += v * v;
    }
    *nu = R_SQRT(su); *nv = R_SQRT(sv);
    return 2 * R_ATAN2(*nu, *nv);
}

/* Below this angle (rad) slerp falls back to linear interpolation (SPEC). */
#define NUREC_SLERP_MIN_ANGLE 1e-6

/* Slerp of unit quaternions ql, qr (same hemisphere) at fraction a; the
 * result is NOT normalized (the caller normalizes, as the SPEC says). */
NUREC_HD void NR(slerp)(const real_t ql[4], const real_t qr[4], real_t a,
                        real_t o[4]) {
    real_t nu, nv;
    real_t th = NR(quat_angle)(ql, qr, &nu, &nv);
    real_t cl, cr;
    if (th < (real_t)NUREC_SLERP_MIN_ANGLE) {
        cl = 1 - a; cr = a;
    } else {
        real_t rs = (real_t)1 / R_SIN(th);
        cl = R_SIN((1 - a) * th) * rs;
        cr = R_SIN(a * th) * rs;
    }
    for (int c = 0; c < 4; ++c) o[c] = cl * ql[c] + cr * qr[c];
}

/* Backward of slerp with respect to ql and qr (a is not differentiated). */
NUREC_HD void NR(slerp_vjp)(const real_t ql[4], const real_t qr[4], real_t a,
                            const real_t g[4], real_t gl[4], real_t gr[4]) {
    real_t nu, nv;
    real_t th = NR(quat_angle)(ql, qr, &nu, &nv);
    if (th < (real_t)NUREC_SLERP_MIN_ANGLE) {
        for (int c = 0; c < 4; ++c) { gl[c] = (1 - a) * g[c]; gr[c] = a * g[c]; }
        return;
    }
    real_t s = R_SIN(th), co = R_COS(th);
    real_t sl = R_SIN((1 - a) * th), sr = R_SIN(a * th);
    real_t cl = sl / s, cr = sr / s;
    real_t dcl = ((1 - a) * R_COS((1 - a) * th) * s - sl * co) / (s * s);
    real_t dcr = (a * R_COS(a * th) * s - sr * co) / (s * s);
    real_t dl = 0, dr = 0;
    for (int c = 0; c < 4; ++c) { dl += ql[c] * g[c]; dr += qr[c] * g[c]; }
    real_t gth = dl * dcl + dr * dcr;
    /* th = 2 atan2(nu, nv): dth/dnu = 2 nv / (nu^2 + nv^2), dth/dnv = -2 nu / (...) */
    real_t den = nu * nu + nv * nv;
    real_t ku = gth * 2 * nv / den / nu;  /* times u = ql - qr */
    real_t kv = -gth * 2 * nu / den / nv; /* times v = ql + qr */
    for (int c = 0; c < 4; ++c) {
        real_t u = ql[c] - qr[c], v = ql[c] + qr[c];
        gl[c] = cl * g[c] + ku * u + kv * v;
        gr[c] = cr * g[c] - ku * u + kv * v;
    }
}
