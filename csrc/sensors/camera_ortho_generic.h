/* Generic over real_t (see math/generic.h). gsplat's "ortho": an
 * orthographic camera, pixel (fx x + cx, fy y + cy) of the camera-space
 * point (x, y, z), fx, fy in pixels per metre; z orders the compositing and
 * is the depth, as for the pinhole. Its Jacobian [[fx, 0, 0], [0, fy, 0]]
 * is the same at every point, so the EWA covariance needs no clamp and its
 * VJP has no Jacobian term (the jets give both). A BEV map of a drive is
 * one: a camera above the scene looking down. */

/* The mean is in the field: near < z < far (false for NaN). */
NUREC_HD int NR(cam_ortho_valid)(const real_t p[3], real_t near_plane, real_t far_plane) {
    return p[2] > near_plane && p[2] < far_plane;
}

NUREC_HD void NR(cam_ortho_project)(real_t fx, real_t fy, real_t cx, real_t cy, const NR(jet) p[3], NR(jet) out[2]) {
    out[0] = NR(jet_affine)(p[0], fx, cx);
    out[1] = NR(jet_affine)(p[1], fy, cy);
}
