/* Generic over real_t (see math/generic.h). */

/* Forward of one Gaussian. `pose` is its track's (t, q), used when
 * has_pose: the id is a valid track (also when forced: the SPEC still moves
 * it into the world); not read for static and invalid ids. (A flag, not a
 * NULL pointer: a pointer that may point at a local array would push that
 * array to local memory in the CUDA kernels.) */
NUREC_HD void NR(collect_one)(int kind, int has_pose, const real_t pose[7], const real_t m[3],
                              const real_t q[4], const real_t ls[3],
                              real_t logit, real_t mw[3], real_t qw[4],
                              real_t s[3], real_t* o) {
    real_t qn[4], inv;
    NR(quat_normalize)(q, qn, &inv);
    if (has_pose) {
        real_t qk[4], ik, R[9], p[4];
        NR(quat_normalize)(pose + 3, qk, &ik);
        NR(quat_to_rotmat)(qk, R);
        for (int r = 0; r < 3; ++r)
            mw[r] = R[3 * r] * m[0] + R[3 * r + 1] * m[1] + R[3 * r + 2] * m[2] + pose[r];
        NR(quat_mul)(qk, qn, p);
        NR(quat_normalize)(p, qw, &inv);
    } else {
        for (int c = 0; c < 3; ++c) mw[c] = m[c];
        for (int c = 0; c < 4; ++c) qw[c] = qn[c];
    }
    for (int c = 0; c < 3; ++c) s[c] = R_EXP(ls[c]);
    *o = kind == NUREC_FORCED ? (real_t)0 : NR(sigmoid)(logit);
}

/* Backward of one Gaussian that is not forced (forced ones get exact zeros,
 * written by the caller). For a Gaussian on a track (has_pose), also writes
 * the Gaussian's contribution to its track pose gradient to gpose[7]. */
NUREC_HD void NR(collect_one_vjp)(int has_pose, const real_t pose[7], const real_t m[3],
                                  const real_t q[4], const real_t ls[3],
                                  real_t logit, const real_t gmw[3],
                                  const real_t gqw[4], const real_t gs[3],
                                  real_t go, real_t gm[3], real_t gq[4],
                                  real_t gls[3], real_t* glogit,
                                  real_t gpose[7]) {
    real_t qn[4], inv;
    NR(quat_normalize)(q, qn, &inv);
    for (int c = 0; c < 3; ++c) gls[c] = gs[c] * R_EXP(ls[c]);
    real_t sg = NR(sigmoid)(logit);
    *glogit = go * sg * (1 - sg);
    if (!has_pose) {
        for (int c = 0; c < 3; ++c) gm[c] = gmw[c];
        NR(quat_normalize_vjp)(qn, inv, gqw, gq);
        return;
    }
    real_t qk[4], ik, R[9];
    NR(quat_normalize)(pose + 3, qk, &ik);
    NR(quat_to_rotmat)(qk, R);
    /* means: mw = R m + t */
    for (int c = 0; c < 3; ++c) {
        gm[c] = R[c] * gmw[0] + R[3 + c] * gmw[1] + R[6 + c] * gmw[2];
        gpose[c] = gmw[c];
    }
    real_t gqk[4], gqk_mul[4], gqn[4], p[4], u[4], ip, gp[4];
    NR(rotate_vjp_quat)(qk, m, gmw, gqk);
    /* quats: qw = normalize(qk ⊗ qn) */
    NR(quat_mul)(qk, qn, p);
    NR(quat_normalize)(p, u, &ip);
    NR(quat_normalize_vjp)(u, ip, gqw, gp);
    NR(quat_mul_vjp)(qk, qn, gp, gqk_mul, gqn);
    NR(quat_normalize_vjp)(qn, inv, gqn, gq);
    for (int c = 0; c < 4; ++c) gqk[c] += gqk_mul[c];
    /* qk = normalize(track quat): the projection is linear, so applying it
       per Gaussian before the reduction over the track is exact */
    NR(quat_normalize_vjp)(qk, ik, gqk, gpose + 3);
}
