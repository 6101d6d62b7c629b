/* Generic over real_t (see math/generic.h). SPEC 6's "ftheta", NVIDIA's
 * FTheta: pixel distance delta(theta) = sum c_i theta^i (or, for a
 * calibration whose reference polynomial is the backward one, the inverse
 * of pixel_to_angle by Newton steps from the forward polynomial's value),
 * (u0, v0) = delta (x, y) / rho, pixel (c u0 + d v0 + cx + 1/2,
 * e u0 + v0 + cy + 1/2) (NCore's principal point is at the first pixel's
 * centre, ours at its corner). mp: camera_models.h. */

NUREC_HD int NR(cam_ftheta_valid)(const real_t* mp, const real_t p[3], real_t near_plane, real_t far_plane) {
    return NR(cam_radial_valid)(mp[11], p, near_plane, far_plane);
}

NUREC_HD void NR(cam_ftheta_project)(const real_t* mp, const NR(jet) p[3], NR(jet) out[2]) {
    NR(jet) g;
    if (NR(cam_on_axis)(p[0].v, p[1].v, p[2].v)) {
        g = NR(jet_affine)(NR(jet_inv)(p[2]), mp[3], 0); /* delta / rho -> c1 / z on the axis */
    } else {
        NR(jet) rho;
        const NR(jet) theta = NR(cam_theta)(p, &rho);
        NR(jet) delta = NR(jet_poly)(mp + 2, 6, theta);
        if (mp[12] == 1) {
            for (int k = 0; k < NUREC_FTHETA_NEWTON_STEPS; ++k) {
                const NR(jet) f = NR(jet_sub)(NR(jet_poly)(mp + 13, 6, delta), theta);
                delta = NR(jet_sub)(delta, NR(jet_div)(f, NR(jet_dpoly)(mp + 13, 6, delta)));
            }
        }
        g = NR(jet_div)(delta, rho);
    }
    const NR(jet) u0 = NR(jet_mul)(g, p[0]), v0 = NR(jet_mul)(g, p[1]);
    out[0] = NR(jet_add)(NR(jet_affine)(u0, mp[8], 0), NR(jet_affine)(v0, mp[9], mp[0] + (real_t)0.5));
    out[1] = NR(jet_add)(NR(jet_affine)(u0, mp[10], 0), NR(jet_affine)(v0, 1, mp[1] + (real_t)0.5));
}
