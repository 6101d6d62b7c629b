/* Generic over real_t (see math/generic.h). What the radial models
 * (fisheye, FTheta) share: the angle from the optical axis and the field
 * test, smooth through the axis itself. */

/* rho < 1e-12 |z|: on the optical axis for the arithmetic (theta / rho is
 * 1 / z there to 1e-24, and sqrt's derivative at 0 is not finite) */
NUREC_HD int NR(cam_on_axis)(real_t x, real_t y, real_t z) {
    const real_t az = R_FABS(z) > (real_t)1e-30 ? R_FABS(z) : (real_t)1e-30;
    return R_SQRT(x * x + y * y) < (real_t)1e-12 * az;
}

/* The mean is in the field: near < |p| < far and its angle from the axis
 * at most max_angle. */
NUREC_HD int NR(cam_radial_valid)(real_t max_angle, const real_t p[3], real_t near_plane, real_t far_plane) {
    const real_t rho2 = p[0] * p[0] + p[1] * p[1];
    const real_t dist = R_SQRT(rho2 + p[2] * p[2]);
    if (!(dist > near_plane && dist < far_plane)) return 0;
    return R_ATAN2(R_SQRT(rho2), p[2]) <= max_angle;
}

/* theta = atan2(rho, z), rho = |(x, y)| (off the axis) */
NUREC_HD NR(jet) NR(cam_theta)(const NR(jet) p[3], NR(jet)* rho) {
    *rho = NR(jet_sqrt)(NR(jet_add)(NR(jet_mul)(p[0], p[0]), NR(jet_mul)(p[1], p[1])));
    return NR(jet_atan2)(*rho, p[2]);
}
