/* Generic over real_t (see math/generic.h). SPEC 6's "fisheye": OpenCV's
 * equidistant fisheye, theta_d = theta (1 + k1 theta^2 + ... + k4 theta^8),
 * pixel (fx theta_d x / rho + cx, fy theta_d y / rho + cy). mp: k1..k4,
 * max angle (camera_models.h). */

NUREC_HD int NR(cam_fisheye_valid)(const real_t* mp, const real_t p[3], real_t near_plane, real_t far_plane) {
    return NR(cam_radial_valid)(mp[4], p, near_plane, far_plane);
}

NUREC_HD void NR(cam_fisheye_project)(const real_t* mp, real_t fx, real_t fy, real_t cx, real_t cy,
                                      const NR(jet) p[3], NR(jet) out[2]) {
    NR(jet) t_over_rho, t2;
    if (NR(cam_on_axis)(p[0].v, p[1].v, p[2].v)) {
        t_over_rho = NR(jet_inv)(p[2]);
        t2 = NR(jet_mul)(NR(jet_add)(NR(jet_mul)(p[0], p[0]), NR(jet_mul)(p[1], p[1])),
                         NR(jet_mul)(t_over_rho, t_over_rho));
    } else {
        NR(jet) rho;
        const NR(jet) theta = NR(cam_theta)(p, &rho);
        t_over_rho = NR(jet_div)(theta, rho);
        t2 = NR(jet_mul)(theta, theta);
    }
    const real_t c[5] = {1, mp[0], mp[1], mp[2], mp[3]};
    const NR(jet) g = NR(jet_mul)(t_over_rho, NR(jet_poly)(c, 5, t2));
    out[0] = NR(jet_affine)(NR(jet_mul)(g, p[0]), fx, cx);
    out[1] = NR(jet_affine)(NR(jet_mul)(g, p[1]), fy, cy);
}
