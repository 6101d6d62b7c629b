/* Generic over real_t (see math/generic.h). */

/* Sensor-space covariance factor of one Gaussian: with R the world -> sensor
 * rotation (row-major), RM = R Rq diag(s), so Sigma_sensor = RM RM^T.
 * Writes the unit quaternion, 1/|q| and Rq for the VJP. */
NUREC_HD void NR(splat_rm)(const real_t R[9], const real_t q[4], const real_t s[3], real_t qn[4],
                           real_t* inv_qnorm, real_t Rq[9], real_t RM[9]) {
    NR(quat_normalize)(q, qn, inv_qnorm);
    NR(quat_to_rotmat)(qn, Rq);
    for (int r = 0; r < 3; ++r)
        for (int k = 0; k < 3; ++k)
            RM[3 * r + k] = (R[3 * r] * Rq[k] + R[3 * r + 1] * Rq[3 + k] + R[3 * r + 2] * Rq[6 + k]) * s[k];
}

/* 2D covariance T T^T + eps I of T = J RM (2 x 3, row-major). */
NUREC_HD void NR(splat_cov2d)(const real_t T[6], real_t eps, real_t* a, real_t* b, real_t* c,
                              real_t* det) {
    *a = T[0] * T[0] + T[1] * T[1] + T[2] * T[2] + eps;
    *b = T[0] * T[3] + T[1] * T[4] + T[2] * T[5];
    *c = T[3] * T[3] + T[4] * T[4] + T[5] * T[5] + eps;
    *det = *a * *c - *b * *b;
}

/* A projection's record tail: the conic (A, B, C) = inverse(Sigma_2d) of the
 * 2D covariance (a, b, c; its det > 0 checked by the caller) and the
 * footprint threshold, into rec. Returns 0 (thr left as is) when the opacity
 * cannot reach 1/255: alpha >= 1/255 needs o exp(-sigma) >= 1/255, so
 * d^T Q d <= 2 ln(255 o); the margin (in those units) keeps rounding in the
 * per-cell alpha inside the tiles. */
NUREC_HD int NR(splat_record_conic)(real_t a, real_t b, real_t c, real_t det, real_t o, real_t margin,
                                    real_t rec[NUREC_TREC_SIZE]) {
    rec[NUREC_TREC_A] = c / det;
    rec[NUREC_TREC_B] = -b / det;
    rec[NUREC_TREC_C] = a / det;
    if (!((real_t)255 * o >= 1)) return 0;
    rec[NUREC_TREC_THR] = 2 * R_LOG((real_t)255 * o) + margin;
    return 1;
}

/* VJP of the conic (A, B, C) = inverse(T T^T + eps I) with respect to T:
 * g = (gA, gB, gC); writes dT (2 x 3). */
NUREC_HD void NR(splat_conic_vjp)(real_t a, real_t b, real_t c, real_t det, const real_t T[6],
                                  const real_t g[3], real_t dT[6]) {
    real_t A = c / det, B = -b / det, C = a / det;
    /* dL/dSigma2 = -Q G Q, G = [[gA, gB/2], [gB/2, gC]] */
    real_t hb = g[1] * (real_t)0.5;
    real_t qg00 = A * g[0] + B * hb, qg01 = A * hb + B * g[2];
    real_t qg10 = B * g[0] + C * hb, qg11 = B * hb + C * g[2];
    real_t s00 = -(qg00 * A + qg01 * B);
    real_t s01 = -(qg00 * B + qg01 * C);
    real_t s11 = -(qg10 * B + qg11 * C);
    /* Sigma2 = T T^T + eps: dT = 2 S T */
    for (int k = 0; k < 3; ++k) {
        dT[k] = 2 * (s00 * T[k] + s01 * T[3 + k]);
        dT[3 + k] = 2 * (s01 * T[k] + s11 * T[3 + k]);
    }
}

/* VJP of splat_rm: dRM (3 x 3) -> gradients of the quaternion (through its
 * normalization) and of the scales (both written). */
NUREC_HD void NR(splat_rm_vjp)(const real_t R[9], const real_t qn[4], real_t inv_qnorm,
                               const real_t Rq[9], const real_t s[3], const real_t dRM[9],
                               real_t gq[4], real_t gs[3]) {
    /* RM = R Rq diag(s): dM = R^T dRM; dRq = dM diag(s); ds_k = sum_i dM_ik Rq_ik */
    real_t G[9];
    for (int k = 0; k < 3; ++k) gs[k] = 0;
    for (int i = 0; i < 3; ++i)
        for (int k = 0; k < 3; ++k) {
            real_t dM = R[i] * dRM[k] + R[3 + i] * dRM[3 + k] + R[6 + i] * dRM[6 + k];
            G[3 * i + k] = dM * s[k];
            gs[k] += dM * Rq[3 * i + k];
        }
    /* rotation matrix of the unit quaternion, then the normalization */
    real_t gu[4];
    NR(quat_to_rotmat_vjp)(qn, G, gu);
    NR(quat_normalize_vjp)(qn, inv_qnorm, gu, gq);
}

/* Alpha of a record r (u, v, A, B, C, o; tiles.h layout) at the offset
 * d = (dx, dy) = cell - (u, v): 0 when the Gaussian is skipped there
 * (sigma < 0 or alpha < 1/255). Writes exp(-sigma) for the VJP. */
NUREC_HD real_t NR(splat_alpha)(const real_t* r, real_t dx, real_t dy, real_t* vis) {
    real_t sigma = (real_t)0.5 * (r[2] * dx * dx + r[4] * dy * dy) + r[3] * dx * dy;
    /* without a branch (the walks' innermost step: a select, not a jump);
       e and a of a sigma < 0 are computed and dropped */
    real_t e = R_EXP_FALLOFF(-sigma); /* math/defs.h */
    real_t a = R_FMIN((real_t)NUREC_SPLAT_ALPHA_MAX, r[5] * e);
    *vis = e;
    return sigma >= 0 && a >= (real_t)NUREC_SPLAT_ALPHA_MIN ? a : (real_t)0;
}

/* One entry of a cell's median walk (rasterize_*_median), given its alpha
 * a > 0 and the transmittance *T before it: 1 when the entry takes T to at
 * most one half (its Gaussian is the cell's median), -1 when SPEC 3's
 * compositing stops before it (T would fall below 1e-4: from above one half
 * no single entry does, alpha <= 0.99, so this ends walks that found no
 * median), else 0 with *T updated. */
NUREC_HD int NR(splat_median_step)(real_t a, real_t* T) {
    const real_t Tn = *T * (1 - a);
    if (Tn < (real_t)NUREC_SPLAT_T_MIN) return -1;
    if (Tn <= (real_t)0.5) return 1;
    *T = Tn;
    return 0;
}

/* A record as the CUDA walks stage it (shared memory): its values with the
 * conic (A, B, C) replaced by (-A S / 2, -B S, -C S / 2), S =
 * R_STAGED_SCALE (math/defs.h), so that splat_alpha_staged's exponent is
 * q = dx (a dx + b dy) + c dy^2 = -sigma S: 3 multiplies and 2 FMAs a
 * pixel where splat_alpha's sigma and its scale took 5 and 3. A kernel's
 * forward and backward both stage, so both see the same alpha bits. */
NUREC_HD void NR(splat_stage_conic)(real_t* e) {
    const real_t h = (real_t)(-0.5 * R_STAGED_SCALE);
    e[2] *= h;
    e[3] *= (real_t)(-R_STAGED_SCALE);
    e[4] *= h;
}

NUREC_HD void NR(splat_stage_record)(const real_t* r, real_t* e) {
    for (int k = 0; k < NUREC_TREC_SIZE; ++k) e[k] = r[k];
    NR(splat_stage_conic)(e);
}

/* splat_alpha on a staged record e: whether the Gaussian counts at the
 * offset (q <= 0, i.e. sigma >= 0, and alpha >= 1/255), its alpha in *a
 * (clamped at 0.99) and the falloff in *vis. */
NUREC_HD int NR(splat_alpha_staged)(const real_t* e, real_t dx, real_t dy, real_t* a, real_t* vis) {
    const real_t q = dx * (e[2] * dx + e[3] * dy) + e[4] * dy * dy;
    const real_t v = R_EXP_STAGED(q);
    const real_t oa = e[5] * v;
    *vis = v;
    *a = R_FMIN((real_t)NUREC_SPLAT_ALPHA_MAX, oa);
    return q <= 0 && oa >= (real_t)NUREC_SPLAT_ALPHA_MIN;
}

/* splat_alpha_vjp on a staged record: the same gradient of the record's
 * (u, v, A, B, C, o). With A = -2 a / S, B = -b / S, C = -2 c / S:
 * A dx + B dy = -(2 a dx + b dy) / S. */
NUREC_HD void NR(splat_alpha_vjp_staged)(const real_t* e, real_t vis, real_t dx, real_t dy,
                                         real_t g_alpha, real_t g[6]) {
    /* dL/dsigma, in the product's order of the early return this replaced
       (the same bits); none where alpha is clamped at 0.99: a select, as
       splat_dsigma's */
    const int clamped = e[5] * vis > (real_t)NUREC_SPLAT_ALPHA_MAX;
    const real_t gs = clamped ? (real_t)0 : -g_alpha * e[5] * vis;
    const real_t gq = gs * (real_t)(1.0 / R_STAGED_SCALE);
    const real_t ax = e[2] * dx, cy = e[4] * dy;
    g[0] += gq * (ax + ax + e[3] * dy);
    g[1] += gq * (e[3] * dx + cy + cy);
    g[2] += gs * (real_t)0.5 * dx * dx;
    g[3] += gs * dx * dy;
    g[4] += gs * (real_t)0.5 * dy * dy;
    g[5] += clamped ? (real_t)0 : g_alpha * vis;
}

/* The camera walks' exponent in completed squares (CUDA; the lidar's
 * azimuth wraps, so it keeps splat_alpha_staged). With the pixel at
 * (x, y) from its tile's centre (xc, yc) and d = (x - ul, y - vl),
 * (ul, vl) = (u - xc, v - yc): 2 sigma = A (dx + B/A dy)^2 + det/A dy^2,
 * det = A C - B^2, so that
 *     S log(o) - S sigma = L - t^2 - w^2,  t = al dx + ga dy,  w = be dy,
 *     al = sqrt(A S / 2), ga = al B / A, be = sqrt(det S / (2 A)),
 *     L = S log(o),  S = R_STAGED_SCALE,
 * and with K1 = -(al ul + ga vl), K2 = -be vl staged per entry and tile,
 * t = al x + ga y + K1 is two FMAs, w = be y + K2 one, and the exponent
 * two more: o exp(-sigma) = R_EXP_STAGED of it. Five FMAs a pixel, where
 * splat_alpha_staged's form and its opacity took two subtractions, four
 * multiplies, two FMAs and a second test (the step of the forward's loop,
 * sm_90 SASS: 13 instructions an entry and pixel -> 9). The exponent is a
 * sum of squares under L whatever the rounding, so the "sigma >= 0" test
 * goes: the conic is positive definite (splat_record_conic's caller checks
 * det > 0), and a det that rounds to <= 0 counts as 0 (w = 0). Rounding:
 * the cancellation is in t and w, O(sqrt(|q|)) at most ~4 where alpha
 * reaches 1/255, not in a quadratic's terms, which a tile-local polynomial
 * in x^2, xy, y^2 would have taken from ~|d|^2 / sigma^2 (hundreds for a
 * small Gaussian near a tile's corner). Float32 against float64 over random
 * Gaussians and pixels (benchmarks/device/ldl_precision.py): alpha within
 * 1e-6 where splat_alpha_staged's form was off by up to 2e-5, within 9e-6
 * for anisotropy up to 1,000 where it was off by up to 2e-3, 6e-7 against
 * 3e-7 for small Gaussians far from the image's origin; no more 1/255
 * flips. tests/test_splat_alpha_ldl.py checks these functions against the
 * plain form on the host.
 * The forward and the backward both call splat_alpha_ldl on the same staged
 * values and offsets, so they see the same alpha bits. */
#define NUREC_SPLAT_LDL_SIZE 6 /* al, ga, K1, be, K2, L */

/* The staged terms of record r for the tile centred at (xc, yc), e[0..5]. */
NUREC_HD void NR(splat_stage_ldl)(const real_t* r, real_t xc, real_t yc, real_t* e) {
    const real_t A = r[NUREC_TREC_A], B = r[NUREC_TREC_B], C = r[NUREC_TREC_C];
    const real_t h = (real_t)(0.5 * R_STAGED_SCALE);
    /* A C - B^2 with B^2's rounding put back (an elongated Gaussian's det
       is a small difference of large products) */
    const real_t bb = B * B;
    const real_t det = R_FMA(A, C, -bb) - R_FMA(B, B, -bb);
#if defined(__CUDA_ARCH__) && !R_IS_F64
    /* the hardware's approximations (a few ulps): IEEE sqrt, division and
       log take slow paths whose registers the walks' pixel state cannot
       spare at 32 (ptxas: 12 bytes of spills) */
    const real_t iA = __fdividef(1.0f, A), hA = h * A, hd = h * R_FMAX(det, (real_t)0) * iA;
    const real_t al = hA * rsqrtf(hA);
    const real_t ga = al * (B * iA);
    const real_t be = hd > 0 ? hd * rsqrtf(hd) : (real_t)0;
    const real_t L = __log2f(r[NUREC_TREC_O]); /* S log(o), S = log2(e) on the GPU (math/defs.h) */
#else
    const real_t al = R_SQRT(h * A);
    const real_t ga = al * (B / A);
    const real_t be = R_SQRT(h * R_FMAX(det, (real_t)0) / A);
    const real_t L = R_LOG(r[NUREC_TREC_O]) * (real_t)R_STAGED_SCALE;
#endif
    const real_t ul = r[NUREC_TREC_U] - xc, vl = r[NUREC_TREC_V] - yc;
    e[0] = al;
    e[1] = ga;
    e[2] = -R_FMA(al, ul, ga * vl);
    e[3] = be;
    e[4] = -(be * vl);
    e[5] = L;
}

/* splat_alpha on staged terms e at the tile-local offset (x, y): whether
 * the Gaussian counts there (alpha >= 1/255), its alpha in *a (clamped at
 * 0.99), and for the VJP o exp(-sigma) in *oa, the exponent in *qe and the
 * squares' roots in *t, *w. */
NUREC_HD int NR(splat_alpha_ldl)(const real_t* e, real_t x, real_t y, real_t* a, real_t* oa, real_t* qe,
                                 real_t* t, real_t* w) {
    *t = R_FMA(e[0], x, R_FMA(e[1], y, e[2]));
    *w = R_FMA(e[3], y, e[4]);
    *qe = R_FMA(-*t, *t, R_FMA(-*w, *w, e[5]));
    *oa = R_EXP_STAGED(*qe);
    *a = R_FMIN((real_t)NUREC_SPLAT_ALPHA_MAX, *oa);
    return *oa >= (real_t)NUREC_SPLAT_ALPHA_MIN;
}

/* dL/dsigma at a counted pixel from splat_alpha_ldl's o exp(-sigma), oa,
 * and dL/dalpha; 0 where alpha is clamped at 0.99 (no gradient there). A
 * select, not an early return: the camera backward's loop branched around
 * the sums at every pixel (a branch and its convergence barrier, 3 SASS
 * instructions a pixel) for a case few pixels meet; adding its zeros leaves
 * every sum the same bits (the terms are finite wherever alpha counts). */
NUREC_HD real_t NR(splat_dsigma)(real_t oa, real_t g_alpha) {
    return oa > (real_t)NUREC_SPLAT_ALPHA_MAX ? (real_t)0 : -g_alpha * oa;
}

/* The gradient of (u, v, A, B, C, o) from splat_alpha_ldl's values, in two
 * steps, so that a walk that sums an entry over many pixels pays the
 * entry's constants once. With d = (dx, dy) the pixel's offset from (u, v),
 * A dx + B dy = 2 al t / S and B dx + C dy = 2 (ga t + be w) / S (the
 * squares' definitions), so of dL/dsigma = gs at each pixel only gs t,
 * gs w, gs dx^2, gs dx dy, gs dy^2 and -gs depend on the pixel:
 * splat_alpha_vjp_ldl_sums adds those to s[0..5] (5 FMAs and 3 multiplies a
 * pixel where the finished form took 15 and an add per value), and
 * splat_alpha_vjp_ldl_finish turns a sum of them, over any pixels of one
 * entry, into the gradient. The opacity's, s[5], is left times o
 * (g_alpha o exp(-sigma), from oa): the caller divides an entry's sum by o
 * once (rasterize_camera's backward: R_EXP_STAGED(-L)), where exp(-sigma) =
 * R_EXP_STAGED(qe - L) took a second exponential at every pixel. With av
 * (not NULL; SPEC 8's absgrad, the sums over pixels of each pixel's |d/du|
 * and |d/dv|), e the entry's staged terms: d/du = k al gs t and d/dv =
 * k (ga gs t + be gs w), k = -2 / S, so av gathers |gs t| and |ga gs t + be
 * gs w|, and the finish scales them by |k al| and |k|. */
NUREC_HD void NR(splat_alpha_vjp_ldl_sums)(real_t oa, real_t t, real_t w, real_t dx, real_t dy, real_t g_alpha,
                                           real_t s[6], const real_t* e, real_t* av) {
    const real_t gs = NR(splat_dsigma)(oa, g_alpha);
    const real_t gt = gs * t, gw = gs * w, gx = gs * dx;
    s[0] += gt;
    s[1] += gw;
    s[2] += gx * dx;
    s[3] += gx * dy;
    s[4] += gs * dy * dy;
    s[5] -= gs; /* times o: see above */
    if (av) {
        av[0] += R_FABS(gt);
        av[1] += R_FABS(e[1] * gt + e[3] * gw);
    }
}

/* splat_alpha_vjp_ldl_sums over a column of pixels, pixels that share the
 * offset dx (a thread's RC_BWD_PIX pixels of the camera backward lie in one
 * column of its tile), in three sums instead of six. With K1 = -(al ul +
 * ga vl) and K2 = -be vl (splat_stage_ldl), t = al dx + ga dy and w = be
 * dy, so over the column sum gs t = al dx c0 + ga c1, sum gs w = be c1,
 * sum gs dx^2 = dx^2 c0, sum gs dx dy = dx c1, sum gs dy^2 = c2 and the
 * opacity's -c0, from c0 = sum gs, c1 = sum gs dy, c2 = sum gs dy^2: 4
 * instructions a pixel where the six took 10 and the pixel's dx (sm_90
 * SASS: the camera's plain float32 loop over a warp's entries 361 -> 350
 * instructions, its 12 spilled bytes gone), and
 * splat_alpha_vjp_ldl_column_sums turns them into the six once a column
 * and entry. The same gradient up to rounding (t and w from dx, dy rather
 * than from the staged terms' FMAs). */
NUREC_HD void NR(splat_alpha_vjp_ldl_column)(real_t oa, real_t dy, real_t g_alpha, real_t c[3]) {
    const real_t gs = NR(splat_dsigma)(oa, g_alpha);
    const real_t gy = gs * dy;
    c[0] += gs;
    c[1] += gy;
    c[2] += gy * dy;
}

/* splat_alpha_vjp_ldl_sums' six sums s of a column (its offset dx) from
 * its three c, for the entry whose staged terms are e (written, not added). */
NUREC_HD void NR(splat_alpha_vjp_ldl_column_sums)(const real_t* e, real_t dx, const real_t c[3], real_t s[6]) {
    s[0] = R_FMA(e[1], c[1], e[0] * dx * c[0]);
    s[1] = e[3] * c[1];
    s[2] = dx * dx * c[0];
    s[3] = dx * c[1];
    s[4] = c[2];
    s[5] = -c[0];
}

/* The gradient of (u, v, A, B, C, o) from splat_alpha_vjp_ldl_sums' sums
 * s (and av) of the entry whose staged terms are e, in place. */
NUREC_HD void NR(splat_alpha_vjp_ldl_finish)(const real_t* e, real_t s[6], real_t* av) {
    const real_t k = (real_t)(-2.0 / R_STAGED_SCALE);
    const real_t st = s[0];
    s[0] = k * (e[0] * st);
    s[1] = k * (e[1] * st + e[3] * s[1]);
    s[2] *= (real_t)0.5;
    s[4] *= (real_t)0.5;
    if (av) {
        av[0] *= R_FABS(k * e[0]);
        av[1] *= -k;
    }
}

/* Both steps at one pixel: adds its gradient to g[0..5] (the opacity's
 * times o, as above). */
NUREC_HD void NR(splat_alpha_vjp_ldl)(const real_t* e, real_t oa, real_t t, real_t w, real_t dx, real_t dy,
                                      real_t g_alpha, real_t g[6]) {
    real_t s[6] = {0, 0, 0, 0, 0, 0};
    NR(splat_alpha_vjp_ldl_sums)(oa, t, w, dx, dy, g_alpha, s, e, (real_t*)0);
    NR(splat_alpha_vjp_ldl_finish)(e, s, (real_t*)0);
    for (int q = 0; q < 6; ++q) g[q] += s[q];
}

/* VJP of splat_alpha: adds the gradient of (u, v, A, B, C, o) to g[0..5]
 * (d = cell - (u, v), so d/du = -d/ddx whatever shift made dx). */
NUREC_HD void NR(splat_alpha_vjp)(const real_t* r, real_t vis, real_t dx, real_t dy,
                                  real_t g_alpha, real_t g[6]) {
    if (r[5] * vis > (real_t)NUREC_SPLAT_ALPHA_MAX) return; /* clamped at 0.99 */
    real_t gs = -g_alpha * r[5] * vis;                       /* dL/dsigma */
    g[0] += -gs * (r[2] * dx + r[3] * dy);
    g[1] += -gs * (r[3] * dx + r[4] * dy);
    g[2] += gs * (real_t)0.5 * dx * dx;
    g[3] += gs * dx * dy;
    g[4] += gs * (real_t)0.5 * dy * dy;
    g[5] += g_alpha * vis;
}

/* One step of the back-to-front sweep of a cell. On entry *T is the
 * transmittance after this Gaussian and *P what its dL/dalpha needs of what
 * is composited behind it: gTa - gz Sz - sum_k gf_k S_k, with S[nch] and Sz
 * the features and depth behind it (background included) and gf, gz, gTa =
 * dL/dfeatures, dL/ddepth and dL/dalpha * T_final (splat_composite_vjp_start);
 * on exit both include this Gaussian. Returns dL/dalpha of this Gaussian and
 * writes its weight alpha T to *w. Why one sum where there were nch + 1:
 * dL/dalpha = gTa / (1 - a) + gz (Ti z - Sz / (1 - a)) + sum_k gf_k (Ti f_k -
 * S_k / (1 - a)) = P / (1 - a) + Ti Q with Q = gz z + sum_k gf_k f_k, and the
 * step adds wi f_k to each S_k and wi z to Sz, so P loses wi Q: a pixel's
 * state is one value, not nch + 1, and a step 3 FMAs a channel fewer. */
NUREC_HD real_t NR(splat_composite_vjp)(real_t a, const real_t* f, int nch, real_t z, const real_t* gf, real_t gz,
                                        real_t* T, real_t* P, real_t* w) {
    real_t ra = R_RCP_NORMAL(1 - a); /* 1 - a >= 0.01: math/defs.h */
    real_t Ti = *T * ra;
    real_t wi = a * Ti;
    real_t Q = gz * z;
    for (int k = 0; k < nch; ++k) Q += gf[k] * f[k];
    const real_t g = *P * ra + Ti * Q;
    *P -= wi * Q;
    *T = Ti;
    *w = wi;
    return g;
}

/* splat_composite_vjp's *P before a sweep, from what lies behind the
 * sweep's first entry: features S[nch] and depth Sz. */
NUREC_HD real_t NR(splat_composite_vjp_start)(real_t gTa, real_t gz, real_t Sz, const real_t* gf, const real_t* S,
                                              int nch) {
    real_t P = gTa - gz * Sz;
    for (int k = 0; k < nch; ++k) P -= gf[k] * S[k];
    return P;
}
