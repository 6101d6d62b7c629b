/* Generic over real_t (see math/generic.h). The camera models of SPEC 6
 * behind one switch: their field test and their projection in jets. */
#include "sensors/jet_generic.h"
#include "sensors/camera_radial_generic.h"
#include "sensors/camera_opencv_generic.h"
#include "sensors/camera_fisheye_generic.h"
#include "sensors/camera_ftheta_generic.h"
#include "sensors/camera_ortho_generic.h"

/* A camera's model: its code, Ks' focal lengths and centre, the packed
 * parameters. */
typedef struct NR(cam_model) {
    int model;
    real_t fx, fy, cx, cy;
    real_t mp[NUREC_CAM_PARAMS];
} NR(cam_model);

NUREC_HD int NR(cam_model_valid)(const NR(cam_model)* m, const real_t p[3], real_t near_plane, real_t far_plane) {
    switch (m->model) {
    case NUREC_CAM_OPENCV: return NR(cam_opencv_valid)(m->mp, p, near_plane, far_plane);
    case NUREC_CAM_FISHEYE: return NR(cam_fisheye_valid)(m->mp, p, near_plane, far_plane);
    case NUREC_CAM_FTHETA: return NR(cam_ftheta_valid)(m->mp, p, near_plane, far_plane);
    case NUREC_CAM_ORTHO: return NR(cam_ortho_valid)(p, near_plane, far_plane);
    default: return 0;
    }
}

/* The pixel of point q as jets, seeded with directions w0, w1 (NULL: 0). */
NUREC_HD void NR(cam_model_project)(const NR(cam_model)* m, const real_t q[3], const real_t* w0, const real_t* w1,
                                    NR(jet) out[2]) {
    NR(jet) p[3];
    for (int k = 0; k < 3; ++k) p[k] = NR(jet_var)(k, q[k], w0 ? w0[k] : (real_t)0, w1 ? w1[k] : (real_t)0);
    switch (m->model) {
    case NUREC_CAM_OPENCV: NR(cam_opencv_project)(m->mp, m->fx, m->fy, m->cx, m->cy, p, out); return;
    case NUREC_CAM_FISHEYE: NR(cam_fisheye_project)(m->mp, m->fx, m->fy, m->cx, m->cy, p, out); return;
    case NUREC_CAM_FTHETA: NR(cam_ftheta_project)(m->mp, p, out); return;
    case NUREC_CAM_ORTHO: NR(cam_ortho_project)(m->fx, m->fy, m->cx, m->cy, p, out); return;
    default: out[0] = out[1] = NR(jet_const)((real_t)0); return;
    }
}
