/* Generic over real_t (see math/generic.h). SPEC 3's pinhole camera, the
 * sensor layer's plain model (no jets): a camera-space point's pixel
 *   u = fx x / z + cx,  v = fy y / z + cy,
 * the EWA Jacobian of (u, v) at the point whose x / z and y / z are clamped
 * to 30% of the half field of view past each image border (as the 3DGS code
 * and gsplat's classic path clamp it; tx = z clamp(x / z), ty likewise)
 *   J = [[fx / z, 0, -fx tx / z^2], [0, fy / z, -fy ty / z^2]],
 * and the VJP of both back to the point. The OpenCV model in jets shares
 * the clamp (rasterize_camera_math_generic.h's rc_model_point). */

/* v clamped to [lim[0], lim[1]]; *clamped tells whether it was moved (at
 * a bound exactly it was not: the gradient passes, as torch.clamp's). A NaN
 * stays NaN. */
NUREC_HD real_t NR(cam_clamp)(real_t v, const real_t lim[2], int* clamped) {
    *clamped = v < lim[0] || v > lim[1];
    return v < lim[0] ? lim[0] : (v > lim[1] ? lim[1] : v);
}

/* The Jacobian's point of p: (tx, ty) and whether each coordinate was
 * clamped. */
NUREC_HD void NR(pinhole_clamp_point)(const real_t p[3], const real_t lim_x[2], const real_t lim_y[2],
                                      real_t* tx, real_t* ty, int* clamped_x, int* clamped_y) {
    const real_t z = p[2], iz = 1 / z;
    *tx = z * NR(cam_clamp)(p[0] * iz, lim_x, clamped_x);
    *ty = z * NR(cam_clamp)(p[1] * iz, lim_y, clamped_y);
}

/* J's non-zero entries j = (j00, j02, j11, j12) at (tx, ty, z). */
NUREC_HD void NR(pinhole_jacobian)(real_t fx, real_t fy, real_t z, real_t tx, real_t ty, real_t j[4]) {
    const real_t iz = 1 / z;
    j[0] = fx * iz;
    j[1] = -fx * tx * iz * iz;
    j[2] = fy * iz;
    j[3] = -fy * ty * iz * iz;
}

/* The pixel of p (z > 0). */
NUREC_HD void NR(pinhole_pixel)(real_t fx, real_t fy, real_t cx, real_t cy, const real_t p[3], real_t* u,
                                real_t* v) {
    const real_t iz = 1 / p[2];
    *u = fx * p[0] * iz + cx;
    *v = fy * p[1] * iz + cy;
}

/* VJP: the gradients of the pixel (gu, gv), of J's entries dj (as j) and
 * of the depth z (gz) -> the point's gp. j02 = -fx tx / z^2 with tx = x
 * unclamped (d/dx = -fx / z^2, d/dz = 2 fx x / z^3) or tx = z c, c the
 * bound (d/dx = 0, d/dz = fx c / z^2 = fx tx / z^3); j12 likewise. */
NUREC_HD void NR(pinhole_vjp)(real_t fx, real_t fy, const real_t p[3], real_t tx, real_t ty, int clamped_x,
                              int clamped_y, real_t gu, real_t gv, real_t gz, const real_t dj[4], real_t gp[3]) {
    const real_t x = p[0], y = p[1], iz = 1 / p[2], iz2 = iz * iz;
    gp[0] = (clamped_x ? 0 : dj[1] * (-fx * iz2)) + gu * fx * iz;
    gp[1] = (clamped_y ? 0 : dj[3] * (-fy * iz2)) + gv * fy * iz;
    gp[2] = dj[0] * (-fx * iz2) + dj[1] * (fx * (clamped_x ? tx : 2 * x) * iz2 * iz) + dj[2] * (-fy * iz2) +
            dj[3] * (fy * (clamped_y ? ty : 2 * y) * iz2 * iz) - gu * fx * x * iz2 - gv * fy * y * iz2 + gz;
}
