/* Generic over real_t (see math/generic.h). */

/* The pose (tx, ty, tz, qw, qx, qy, qz) given by nk keys starting at row l of
 * key_poses [P,7], with fraction a (see nurec_track_locate). */
NUREC_HD void NR(track_pose_eval)(const real_t* key_poses, int nk, int64_t l,
                                  real_t a, real_t out[7]) {
    if (nk == 0) {
        for (int c = 0; c < 7; ++c) out[c] = (real_t)0;
        out[3] = (real_t)1;
        return;
    }
    const real_t* kl = key_poses + 7 * l;
    real_t inv;
    if (nk == 1) {
        for (int c = 0; c < 3; ++c) out[c] = kl[c];
        NR(quat_normalize)(kl + 3, out + 3, &inv);
        return;
    }
    const real_t* kr = kl + 7;
    for (int c = 0; c < 3; ++c) out[c] = (1 - a) * kl[c] + a * kr[c];
    real_t ql[4], qr[4], il, ir, p[4];
    NR(quat_normalize)(kl + 3, ql, &il);
    NR(quat_normalize)(kr + 3, qr, &ir);
    if (ql[0] * qr[0] + ql[1] * qr[1] + ql[2] * qr[2] + ql[3] * qr[3] < 0)
        for (int c = 0; c < 4; ++c) qr[c] = -qr[c];
    NR(slerp)(ql, qr, a, p);
    NR(quat_normalize)(p, out + 3, &inv);
}

/* Backward of track_pose_eval: gradients of the (up to two) key rows used,
 * written to gl[7] and gr[7] (gr untouched unless nk == 2). */
NUREC_HD void NR(track_pose_eval_vjp)(const real_t* key_poses, int nk,
                                      int64_t l, real_t a, const real_t g[7],
                                      real_t gl[7], real_t gr[7]) {
    if (nk == 0) return;
    const real_t* kl = key_poses + 7 * l;
    real_t ql[4], il;
    NR(quat_normalize)(kl + 3, ql, &il);
    if (nk == 1) {
        for (int c = 0; c < 3; ++c) gl[c] = g[c];
        NR(quat_normalize_vjp)(ql, il, g + 3, gl + 3);
        return;
    }
    const real_t* kr = kl + 7;
    for (int c = 0; c < 3; ++c) { gl[c] = (1 - a) * g[c]; gr[c] = a * g[c]; }
    real_t qr[4], ir, p[4], u[4], ip, gp[4], gql[4], gqr[4];
    NR(quat_normalize)(kr + 3, qr, &ir);
    int flip = ql[0] * qr[0] + ql[1] * qr[1] + ql[2] * qr[2] + ql[3] * qr[3] < 0;
    if (flip) for (int c = 0; c < 4; ++c) qr[c] = -qr[c];
    NR(slerp)(ql, qr, a, p);
    NR(quat_normalize)(p, u, &ip);
    NR(quat_normalize_vjp)(u, ip, g + 3, gp);
    NR(slerp_vjp)(ql, qr, a, gp, gql, gqr);
    if (flip) {
        for (int c = 0; c < 4; ++c) { qr[c] = -qr[c]; gqr[c] = -gqr[c]; }
    }
    NR(quat_normalize_vjp)(ql, il, gql, gl + 3);
    NR(quat_normalize_vjp)(qr, ir, gqr, gr + 3);
}
