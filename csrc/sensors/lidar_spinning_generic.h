/* Generic over real_t (see math/generic.h). SPEC 4's spinning lidar, a
 * model of the sensor layer: a lidar-space point p = (x, y, z) measured as
 *   azimuth = atan2(y, x),  elevation = atan2(z, rho),  range r = |p|
 * (rho^2 = x^2 + y^2), the Jacobian rows of azimuth and elevation
 *   J0 = (-y, x, 0) / rho^2,  J1 = (-x z, -y z, rho^2) / (r^2 rho),
 * and the VJP of the three measures and of J back to the point. The cell
 * grid (the table of rows and columns) is the rasterizer's, not the
 * model's. */

/* The measures of p, with rho^2 (the field's tests need it: rho^2 > 0). */
NUREC_HD void NR(spin_measure)(const real_t p[3], real_t* az, real_t* el, real_t* range, real_t* rho2) {
    const real_t x = p[0], y = p[1], z = p[2];
    *rho2 = x * x + y * y;
    const real_t rho = R_SQRT(*rho2);
    *range = R_SQRT(*rho2 + z * z);
    *el = R_ATAN2(z, rho);
    *az = R_ATAN2(y, x);
}

/* J0, J1 at p, from its rho^2 and range (rho^2 > 0). */
NUREC_HD void NR(spin_jacobian)(const real_t p[3], real_t rho2, real_t range, real_t J0[3], real_t J1[3]) {
    const real_t x = p[0], y = p[1], z = p[2];
    const real_t irho2 = 1 / rho2, g = 1 / (range * range * R_SQRT(rho2));
    J0[0] = -y * irho2; J0[1] = x * irho2; J0[2] = 0;
    J1[0] = -x * z * g; J1[1] = -y * z * g; J1[2] = rho2 * g;
}

/* VJP: the gradients of azimuth, elevation and range (g_az, g_el, g_r) and
 * of J's rows (dJ0, dJ1) -> the point's gp (written). */
NUREC_HD void NR(spin_vjp)(const real_t p[3], real_t g_az, real_t g_el, real_t g_r, const real_t dJ0[3],
                           const real_t dJ1[3], real_t gp[3]) {
    const real_t x = p[0], y = p[1], z = p[2];
    const real_t rho2 = x * x + y * y, rho = R_SQRT(rho2), r2 = rho2 + z * z, r = R_SQRT(r2);
    const real_t irho2 = 1 / rho2, ir2 = 1 / r2, gg = ir2 / rho;
    /* J0 = (-y, x, 0) / rho^2 */
    const real_t dm0 = -y * dJ0[0] + x * dJ0[1];
    const real_t lx = 2 * x * irho2, ly = 2 * y * irho2;
    real_t gx = irho2 * (dJ0[1] - lx * dm0);
    real_t gy = irho2 * (-dJ0[0] - ly * dm0);
    real_t gz = 0;
    /* J1 = n gg, n = (-x z, -y z, rho^2), gg = 1 / (r^2 rho):
     * d gg / dp = -gg h, h = (x (2/r^2 + 1/rho^2), y (2/r^2 + 1/rho^2), 2 z / r^2) */
    const real_t dn1 = -x * z * dJ1[0] - y * z * dJ1[1] + rho2 * dJ1[2];
    const real_t hk = 2 * ir2 + irho2;
    gx += gg * (-z * dJ1[0] + 2 * x * dJ1[2] - x * hk * dn1);
    gy += gg * (-z * dJ1[1] + 2 * y * dJ1[2] - y * hk * dn1);
    gz += gg * (-x * dJ1[0] - y * dJ1[1] - 2 * z * ir2 * dn1);
    /* azimuth (row J0), elevation (row J1), range p / r */
    const real_t ir = 1 / r;
    gp[0] = gx + g_az * (-y * irho2) + g_el * (-x * z * gg) + g_r * x * ir;
    gp[1] = gy + g_az * (x * irho2) + g_el * (-y * z * gg) + g_r * y * ir;
    gp[2] = gz + g_el * (rho2 * gg) + g_r * z * ir;
}
