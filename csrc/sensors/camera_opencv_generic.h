/* Generic over real_t (see math/generic.h). SPEC 6's "opencv": OpenCV's
 * pinhole with radial (k1..k6, rational), tangential (p1, p2) and thin
 * prism (s1..s4) distortion. mp: the packed parameters (camera_models.h). */

/* The mean is in the field: near < z < far and (x/z, y/z) within the
 * radius where the radial map r d(r) still increases. */
NUREC_HD int NR(cam_opencv_valid)(const real_t* mp, const real_t p[3], real_t near_plane, real_t far_plane) {
    const real_t z = p[2];
    if (!(z > near_plane && z < far_plane)) return 0;
    const real_t a = p[0] / z, b = p[1] / z;
    return R_SQRT(a * a + b * b) <= mp[12];
}

NUREC_HD void NR(cam_opencv_project)(const real_t* mp, real_t fx, real_t fy, real_t cx, real_t cy,
                                     const NR(jet) p[3], NR(jet) out[2]) {
    const NR(jet) iz = NR(jet_inv)(p[2]);
    const NR(jet) a = NR(jet_mul)(p[0], iz), b = NR(jet_mul)(p[1], iz);
    const NR(jet) aa = NR(jet_mul)(a, a), bb = NR(jet_mul)(b, b), ab = NR(jet_mul)(a, b);
    const NR(jet) r2 = NR(jet_add)(aa, bb), r4 = NR(jet_mul)(r2, r2);
    const real_t num_c[4] = {1, mp[0], mp[1], mp[2]}, den_c[4] = {1, mp[3], mp[4], mp[5]};
    const NR(jet) d = NR(jet_div)(NR(jet_poly)(num_c, 4, r2), NR(jet_poly)(den_c, 4, r2));
    const real_t p1 = mp[6], p2 = mp[7], s1 = mp[8], s2 = mp[9], s3 = mp[10], s4 = mp[11];
    /* a' = a d + 2 p1 a b + p2 (r2 + 2 a^2) + s1 r2 + s2 r4 */
    NR(jet) ad = NR(jet_mul)(a, d);
    ad = NR(jet_add)(ad, NR(jet_affine)(ab, 2 * p1, 0));
    ad = NR(jet_add)(ad, NR(jet_affine)(NR(jet_add)(r2, NR(jet_affine)(aa, 2, 0)), p2, 0));
    ad = NR(jet_add)(ad, NR(jet_add)(NR(jet_affine)(r2, s1, 0), NR(jet_affine)(r4, s2, 0)));
    /* b' = b d + p1 (r2 + 2 b^2) + 2 p2 a b + s3 r2 + s4 r4 */
    NR(jet) bd = NR(jet_mul)(b, d);
    bd = NR(jet_add)(bd, NR(jet_affine)(NR(jet_add)(r2, NR(jet_affine)(bb, 2, 0)), p1, 0));
    bd = NR(jet_add)(bd, NR(jet_affine)(ab, 2 * p2, 0));
    bd = NR(jet_add)(bd, NR(jet_add)(NR(jet_affine)(r2, s3, 0), NR(jet_affine)(r4, s4, 0)));
    out[0] = NR(jet_affine)(ad, fx, cx);
    out[1] = NR(jet_affine)(bd, fy, cy);
}
