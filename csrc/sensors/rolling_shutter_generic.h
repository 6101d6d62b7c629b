/* Generic over real_t (see math/generic.h). SPEC 7's sensor pose at
 * relative time tau and a camera pixel's relative time. Needs math/quat.h. */

/* The packed poses sp (rolling_shutter.h) of a sensor whose world -> sensor
 * matrices at the start and the end are V0 and V1 ([4, 4] row-major), as
 * nurec_ops/_rolling_shutter.py's pack_poses (the reference's) computes
 * them. */
NUREC_HD void NR(rs_pack)(const real_t V0[16], const real_t V1[16], real_t sp[NUREC_RS_PARAMS]) {
    for (int k = 0; k < 2; ++k) {
        const real_t* V = k ? V1 : V0;
        real_t Rw[9]; /* sensor -> world: the transpose of V's rotation */
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) Rw[3 * i + j] = V[4 * j + i];
        NR(rotmat_to_quat)(Rw, sp + 4 * k);
        for (int i = 0; i < 3; ++i) /* the centre, -R^T t */
            sp[8 + 3 * k + i] = -(Rw[3 * i] * V[3] + Rw[3 * i + 1] * V[7] + Rw[3 * i + 2] * V[11]);
    }
    if (sp[0] * sp[4] + sp[1] * sp[5] + sp[2] * sp[6] + sp[3] * sp[7] < 0) /* the end in the start's hemisphere */
        for (int i = 4; i < 8; ++i) sp[i] = -sp[i];
    sp[14] = sp[15] = 0;
}

/* World -> sensor rotation R (row-major) and translation t at tau, from the
 * packed parameters sp (rolling_shutter.h). */
NUREC_HD void NR(rs_pose_at)(const real_t* sp, real_t tau, real_t R[9], real_t t[3]) {
    real_t q[4], qn[4], inv, Rw[9];
    NR(slerp)(sp, sp + 4, tau, q);
    NR(quat_normalize)(q, qn, &inv);
    NR(quat_to_rotmat)(qn, Rw); /* sensor -> world */
    real_t c[3];
    for (int k = 0; k < 3; ++k) c[k] = (1 - tau) * sp[8 + k] + tau * sp[11 + k];
    for (int r = 0; r < 3; ++r) {
        for (int k = 0; k < 3; ++k) R[3 * r + k] = Rw[3 * k + r];
        t[r] = -(R[3 * r] * c[0] + R[3 * r + 1] * c[1] + R[3 * r + 2] * c[2]);
    }
}

/* Relative time of the pixel holding image point (u, v) (SPEC 7: its row or
 * column over the image's last one), clamped to [0, 1]: a point off the
 * image takes the nearest edge's time. */
NUREC_HD real_t NR(rs_tau_of_pixel)(int shutter, real_t u, real_t v, int width, int height) {
    real_t tau = 0;
    const real_t hm = (real_t)(height - 1), wm = (real_t)(width - 1);
    switch (shutter) {
    case NUREC_SHUTTER_TOP_TO_BOTTOM: tau = hm > 0 ? R_FLOOR(v) / hm : 0; break;
    case NUREC_SHUTTER_BOTTOM_TO_TOP: tau = hm > 0 ? (hm - R_FLOOR(v)) / hm : 0; break;
    case NUREC_SHUTTER_LEFT_TO_RIGHT: tau = wm > 0 ? R_FLOOR(u) / wm : 0; break;
    case NUREC_SHUTTER_RIGHT_TO_LEFT: tau = wm > 0 ? (wm - R_FLOOR(u)) / wm : 0; break;
    default: return 0;
    }
    return !(tau > 0) ? (real_t)0 : (tau > 1 ? (real_t)1 : tau); /* NaN: 0 */
}
