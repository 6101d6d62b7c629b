/* Generic over real_t (see math/generic.h). */
#include "sensors/camera_pinhole_generic.h"
#include "sensors/camera_models_generic.h"
#include "sensors/rolling_shutter_generic.h"

/* One pinhole camera: world -> camera rotation R (row-major) and t, the
 * intrinsics, the camera centre in the world (-R^T t), and the bounds of
 * x / z and y / z at which the Jacobian is evaluated (SPEC section 3: 30%
 * of the half field of view past each image border, as the 3DGS code and
 * gsplat's classic path clamp it). */
typedef struct NR(rc_camera) {
    real_t R[9], t[3], fx, fy, cx, cy, campos[3];
    real_t lim_x[2], lim_y[2];
    NR(cam_model) model; /* SPEC 6 (sensors/): pinhole, or a model in jets */
    int antialiased;     /* the call's antialiased mode (rc_opacity) */
    real_t eps2d;        /* the call's dilation, px^2 (splat_cov2d) */
} NR(rc_camera);

NUREC_HD void NR(rc_camera_load)(const real_t* V, const real_t* K, int width, int height,
                                 NR(rc_camera)* c) {
    for (int r = 0; r < 3; ++r) {
        for (int k = 0; k < 3; ++k) c->R[3 * r + k] = V[4 * r + k];
        c->t[r] = V[4 * r + 3];
    }
    c->fx = K[0]; c->fy = K[4]; c->cx = K[2]; c->cy = K[5];
    for (int k = 0; k < 3; ++k)
        c->campos[k] = -(c->R[k] * c->t[0] + c->R[3 + k] * c->t[1] + c->R[6 + k] * c->t[2]);
    const real_t tan_x = (real_t)0.5 * (real_t)width / c->fx, tan_y = (real_t)0.5 * (real_t)height / c->fy;
    c->lim_x[0] = -(c->cx / c->fx + (real_t)0.3 * tan_x);
    c->lim_x[1] = ((real_t)width - c->cx) / c->fx + (real_t)0.3 * tan_x;
    c->lim_y[0] = -(c->cy / c->fy + (real_t)0.3 * tan_y);
    c->lim_y[1] = ((real_t)height - c->cy) / c->fy + (real_t)0.3 * tan_y;
    c->model.model = NUREC_CAM_PINHOLE;
    c->antialiased = 0;
    c->eps2d = (real_t)NUREC_RC_EPS2D;
}

/* Camera c of a call: its pose, intrinsics and model. */
NUREC_HD void NR(rc_camera_of)(const nurec_rasterize_camera_params* p, int64_t c, NR(rc_camera)* cam) {
    NR(rc_camera_load)((const real_t*)p->viewmats + 16 * c, (const real_t*)p->Ks + 9 * c, p->width, p->height, cam);
    cam->antialiased = p->antialiased;
    cam->eps2d = (real_t)p->eps2d;
    if (p->camera_model == NUREC_CAM_PINHOLE || !p->model_params) return;
    NR(cam_model)* m = &cam->model;
    m->model = p->camera_model;
    m->fx = cam->fx; m->fy = cam->fy; m->cx = cam->cx; m->cy = cam->cy;
    const real_t* mp = (const real_t*)p->model_params + NUREC_CAM_PARAMS * c;
    for (int k = 0; k < NUREC_CAM_PARAMS; ++k) m->mp[k] = mp[k];
}

/* The camera's pose replaced by world -> camera R, t (SPEC 7's pose at a
 * Gaussian's time). */
NUREC_HD void NR(rc_camera_pose)(NR(rc_camera)* c, const real_t R[9], const real_t t[3]) {
    for (int k = 0; k < 9; ++k) c->R[k] = R[k];
    for (int k = 0; k < 3; ++k) c->t[k] = t[k];
    for (int k = 0; k < 3; ++k)
        c->campos[k] = -(c->R[k] * c->t[0] + c->R[3 + k] * c->t[1] + c->R[6 + k] * c->t[2]);
}

/* The pixel of mean m seen from the camera's current pose; 0 where it is
 * outside the camera's field (SPEC 3's near / far, SPEC 6's models). */
NUREC_HD int NR(rc_mean_pixel)(const NR(rc_camera)* c, const real_t m[3], real_t near_plane, real_t far_plane,
                               real_t* u, real_t* v) {
    real_t p[3];
    for (int r = 0; r < 3; ++r) p[r] = c->R[3 * r] * m[0] + c->R[3 * r + 1] * m[1] + c->R[3 * r + 2] * m[2] + c->t[r];
    if (c->model.model == NUREC_CAM_PINHOLE) {
        if (!(p[2] > near_plane && p[2] < far_plane)) return 0;
        *u = c->fx * p[0] / p[2] + c->cx;
        *v = c->fy * p[1] / p[2] + c->cy;
        return 1;
    }
    if (!NR(cam_model_valid)(&c->model, p, near_plane, far_plane)) return 0;
    NR(jet) uv[2];
    NR(cam_model_project)(&c->model, p, (const real_t*)0, (const real_t*)0, uv);
    *u = uv[0].v;
    *v = uv[1].v;
    return 1;
}

/* A Gaussian's own time tau* (SPEC 7): from the start pose's projection of
 * the mean, NUREC_RS_STEPS times: tau <- the time of the mean's pixel, the
 * pose at tau, the mean projected again (a step where the mean is outside
 * the field keeps tau). Leaves the camera at the pose of tau*. sp: the
 * camera's packed rolling-shutter parameters. */
NUREC_HD real_t NR(rc_rolling_tau)(NR(rc_camera)* c, const real_t* sp, int shutter, const real_t m[3],
                                   real_t near_plane, real_t far_plane, int width, int height) {
    real_t R[9], t[3], u = 0, v = 0, tau = 0;
    NR(rs_pose_at)(sp, 0, R, t);
    NR(rc_camera_pose)(c, R, t);
    int ok = NR(rc_mean_pixel)(c, m, near_plane, far_plane, &u, &v);
    for (int k = 0; k < NUREC_RS_STEPS; ++k) {
        const real_t next = ok ? NR(rs_tau_of_pixel)(shutter, u, v, width, height) : tau;
        /* a fixed point: the camera is at its pose and every later step would
           repeat it, so stopping gives the SPEC's 10 steps' result exactly */
        if (next == tau) break;
        tau = next;
        NR(rs_pose_at)(sp, tau, R, t);
        NR(rc_camera_pose)(c, R, t);
        if (k + 1 < NUREC_RS_STEPS) ok = NR(rc_mean_pixel)(c, m, near_plane, far_plane, &u, &v);
    }
    return tau;
}

/* The camera at the pose of time tau. */
NUREC_HD void NR(rc_rolling_at)(NR(rc_camera)* c, const real_t* sp, real_t tau) {
    real_t R[9], t[3];
    NR(rs_pose_at)(sp, tau, R, t);
    NR(rc_camera_pose)(c, R, t);
}

/* SPEC 7: the camera at the own time of item it (camera c, mean m), solved
 * and written to taus[it] (the forward; the visibility op has no taus and
 * keeps only the pose) or read from there (the backward, so that both use
 * one pose whatever the rounding). Global shutter: as is. */
NUREC_HD void NR(rc_camera_at_time)(const nurec_rasterize_camera_params* p, int64_t c, int64_t it, const real_t m[3],
                                    int solve, NR(rc_camera)* cam) {
    if (p->shutter == NUREC_SHUTTER_GLOBAL || !p->viewmats_end) return;
    real_t sp[NUREC_RS_PARAMS];
    NR(rs_pack)((const real_t*)p->viewmats + 16 * c, (const real_t*)p->viewmats_end + 16 * c, sp);
    real_t* taus = (real_t*)p->taus;
    if (solve) {
        const real_t tau = NR(rc_rolling_tau)(cam, sp, p->shutter, m, (real_t)p->near_plane, (real_t)p->far_plane,
                                              p->width, p->height);
        if (taus) taus[it] = tau;
    } else {
        NR(rc_rolling_at)(cam, sp, taus[it]);
    }
}

/* Forward intermediates of the projection of one Gaussian (for the VJP). */
typedef struct NR(rc_proj) {
    real_t qn[4], inv_qnorm, Rq[9]; /* unit quaternion, 1/|q|, its rotation */
    real_t RM[9];                   /* R_cam * Rq * diag(s): Sigma_cam = RM RM^T */
    real_t p[3];                    /* camera-space mean */
    real_t tx, ty;                  /* x, y at which J is evaluated (z * clamped x / z, y / z) */
    int clamped_x, clamped_y;
    real_t T[6];                    /* J * RM (2 x 3): Sigma_2d = T T^T + eps I */
    real_t J[6];                    /* a SPEC 6 model's Jacobian at (tx, ty, z) (pinhole: unused) */
    real_t a, b, c, det;            /* Sigma_2d entries */
    real_t o, rho;                  /* the Gaussian's opacity; the record's is o rho (rc_opacity) */
} NR(rc_proj);

/* gsplat's antialiased mode (Mip-Splatting's compensated 2D filter): the
 * dilation by eps I spreads a small Gaussian over more pixels, so its
 * opacity is scaled by rho = sqrt(det(Sigma) / det(Sigma + eps I)), Sigma =
 * T T^T before the dilation, and the item keeps its total weight. det(T T^T)
 * is |T_0 x T_1|^2 (Lagrange's identity), which does not cancel where Sigma
 * is small against eps as (a - eps)(c - eps) - b^2 would. The classic mode:
 * rho = 1. Called once det > 0. Returns the record's opacity o rho; the
 * opacity-aware cut (1/255) and footprint then follow it, as gsplat's. */
NUREC_HD real_t NR(rc_opacity)(const NR(rc_camera)* cam, NR(rc_proj)* P, real_t o) {
    P->o = o;
    P->rho = 1;
    if (cam->antialiased) {
        const real_t* T = P->T;
        const real_t x = T[1] * T[5] - T[2] * T[4], y = T[2] * T[3] - T[0] * T[5], z = T[0] * T[4] - T[1] * T[3];
        P->rho = R_SQRT((x * x + y * y + z * z) / P->det);
    }
    return o * P->rho;
}

/* VJP of rc_opacity: g5, the record opacity's gradient, becomes the
 * Gaussian opacity's (times rho), and with antialiased its part through rho
 * (d rho / d Sigma, per entry, = ((1 - rho^2) Q - eps / det I) / (2 rho),
 * Q = (Sigma + eps I)^-1, the conic) is added to dT as the conic's is
 * (splat_conic_vjp: dT = 2 S T). A record taken into the image has o rho >=
 * 1/255 (its cut), so rho > 0 there. */
NUREC_HD void NR(rc_opacity_vjp)(const NR(rc_camera)* cam, const NR(rc_proj)* P, real_t* g5, real_t dT[6]) {
    if (!cam->antialiased) return;
    const real_t k = *g5 * P->o / (2 * P->rho), w = 1 - P->rho * P->rho;
    const real_t e = cam->eps2d / P->det;
    const real_t s00 = k * (w * P->c / P->det - e), s01 = -k * w * P->b / P->det, s11 = k * (w * P->a / P->det - e);
    const real_t* T = P->T;
    for (int j = 0; j < 3; ++j) {
        dT[j] += 2 * (s00 * T[j] + s01 * T[3 + j]);
        dT[3 + j] += 2 * (s01 * T[j] + s11 * T[3 + j]);
    }
    *g5 *= P->rho;
}

/* The Jacobian's point of a SPEC 6 model: opencv's (x / z, y / z) clamped
 * as SPEC 3's (writes tx, ty and the flags), the others' the mean itself. */
NUREC_HD void NR(rc_model_point)(const NR(rc_camera)* cam, NR(rc_proj)* P, real_t qp[3]) {
    const real_t z = P->p[2];
    P->clamped_x = P->clamped_y = 0;
    if (cam->model.model == NUREC_CAM_OPENCV) {
        P->tx = z * NR(cam_clamp)(P->p[0] / z, cam->lim_x, &P->clamped_x);
        P->ty = z * NR(cam_clamp)(P->p[1] / z, cam->lim_y, &P->clamped_y);
    } else {
        P->tx = P->p[0];
        P->ty = P->p[1];
    }
    qp[0] = P->tx; qp[1] = P->ty; qp[2] = z;
}

/* rc_project's tail for a SPEC 6 model (P->p set): the mean through the
 * model, the covariance through its Jacobian at the clamped point. */
NUREC_HD int NR(rc_project_model)(const NR(rc_camera)* cam, const real_t q[4], const real_t s[3], real_t o,
                                  real_t near_plane, real_t far_plane, NR(rc_proj)* P,
                                  real_t rec[NUREC_TREC_SIZE]) {
    if (!NR(cam_model_valid)(&cam->model, P->p, near_plane, far_plane)) return 0;
    NR(splat_rm)(cam->R, q, s, P->qn, &P->inv_qnorm, P->Rq, P->RM);
    real_t qp[3];
    NR(rc_model_point)(cam, P, qp);
    NR(jet) uv[2];
    NR(cam_model_project)(&cam->model, qp, (const real_t*)0, (const real_t*)0, uv);
    for (int k = 0; k < 3; ++k) {
        P->J[k] = uv[0].g[k];
        P->J[3 + k] = uv[1].g[k];
    }
    if (P->clamped_x || P->clamped_y) NR(cam_model_project)(&cam->model, P->p, (const real_t*)0, (const real_t*)0, uv);
    for (int r = 0; r < 2; ++r)
        for (int k = 0; k < 3; ++k)
            P->T[3 * r + k] = P->J[3 * r] * P->RM[k] + P->J[3 * r + 1] * P->RM[3 + k] + P->J[3 * r + 2] * P->RM[6 + k];
    NR(splat_cov2d)(P->T, cam->eps2d, &P->a, &P->b, &P->c, &P->det);
    rec[NUREC_TREC_U] = uv[0].v;
    rec[NUREC_TREC_V] = uv[1].v;
    if (!(P->det > 0) || !(uv[0].v == uv[0].v) || !(uv[1].v == uv[1].v)) return 0;
    rec[NUREC_TREC_O] = NR(rc_opacity)(cam, P, o);
    return NR(splat_record_conic)(P->a, P->b, P->c, P->det, rec[NUREC_TREC_O], (real_t)NUREC_RC_THR_MARGIN, rec);
}

/* rc_project_vjp for a SPEC 6 model: the record's gradient -> the camera-
 * space mean's (through the pixel at the mean, the Jacobian at its
 * clamped point by the jets' second order, and the depth), and dRM. */
NUREC_HD void NR(rc_project_model_vjp)(const NR(rc_camera)* cam, const NR(rc_proj)* P, const real_t* g,
                                       const real_t dT[6], real_t gp[3], real_t dRM[9]) {
    real_t dJ[6];
    for (int r = 0; r < 2; ++r)
        for (int j = 0; j < 3; ++j)
            dJ[3 * r + j] = dT[3 * r] * P->RM[3 * j] + dT[3 * r + 1] * P->RM[3 * j + 1] + dT[3 * r + 2] * P->RM[3 * j + 2];
    for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 3; ++k) dRM[3 * j + k] = P->J[j] * dT[k] + P->J[3 + j] * dT[3 + k];
    real_t qp[3] = {P->tx, P->ty, P->p[2]};
    NR(jet) uv[2];
    NR(cam_model_project)(&cam->model, qp, dJ, dJ + 3, uv);
    real_t gq[3], Jp[6];
    for (int k = 0; k < 3; ++k) {
        gq[k] = uv[0].h[0][k] + uv[1].h[1][k]; /* d/dq of sum_rj dJ_rj J_rj */
        Jp[k] = uv[0].g[k];
        Jp[3 + k] = uv[1].g[k];
    }
    if (P->clamped_x || P->clamped_y) { /* the pixel's Jacobian at the mean itself */
        NR(cam_model_project)(&cam->model, P->p, (const real_t*)0, (const real_t*)0, uv);
        for (int k = 0; k < 3; ++k) {
            Jp[k] = uv[0].g[k];
            Jp[3 + k] = uv[1].g[k];
        }
    }
    for (int k = 0; k < 3; ++k) gp[k] = Jp[k] * g[0] + Jp[3 + k] * g[1];
    /* q = (z c_x or x, z c_y or y, z): a clamped coordinate passes its
     * gradient to z only, times its bound c = tx / z */
    const real_t z = P->p[2];
    gp[0] += P->clamped_x ? 0 : gq[0];
    gp[1] += P->clamped_y ? 0 : gq[1];
    gp[2] += gq[2] + (P->clamped_x ? gq[0] * P->tx / z : 0) + (P->clamped_y ? gq[1] * P->ty / z : 0);
    gp[2] += g[6];
}

/* EWA projection of one Gaussian into a tile record (tiles.h layout).
 * Returns 0 (and thr = -1) when the mean is outside (near, far), the 2D
 * covariance is not positive definite, or the opacity cannot reach 1/255. */
NUREC_HD int NR(rc_project)(const NR(rc_camera)* cam, const real_t m[3], const real_t q[4],
                            const real_t s[3], real_t o, real_t near_plane, real_t far_plane,
                            NR(rc_proj)* P, real_t rec[NUREC_TREC_SIZE]) {
    const real_t* R = cam->R;
    for (int k = 0; k < NUREC_TREC_SIZE; ++k) rec[k] = 0;
    rec[NUREC_TREC_THR] = -1;
    rec[NUREC_TREC_O] = o;
    for (int r = 0; r < 3; ++r)
        P->p[r] = R[3 * r] * m[0] + R[3 * r + 1] * m[1] + R[3 * r + 2] * m[2] + cam->t[r];
    const real_t z = P->p[2];
    rec[NUREC_TREC_DEPTH] = z;
    if (cam->model.model != NUREC_CAM_PINHOLE)
        return NR(rc_project_model)(cam, q, s, o, near_plane, far_plane, P, rec);
    if (!(z > near_plane && z < far_plane)) return 0;
    NR(splat_rm)(R, q, s, P->qn, &P->inv_qnorm, P->Rq, P->RM);
    NR(pinhole_clamp_point)(P->p, cam->lim_x, cam->lim_y, &P->tx, &P->ty, &P->clamped_x, &P->clamped_y);
    real_t j[4]; /* J = [[j0, 0, j1], [0, j2, j3]] */
    NR(pinhole_jacobian)(cam->fx, cam->fy, z, P->tx, P->ty, j);
    for (int k = 0; k < 3; ++k) {
        P->T[k] = j[0] * P->RM[k] + j[1] * P->RM[6 + k];
        P->T[3 + k] = j[2] * P->RM[3 + k] + j[3] * P->RM[6 + k];
    }
    NR(splat_cov2d)(P->T, cam->eps2d, &P->a, &P->b, &P->c, &P->det);
    NR(pinhole_pixel)(cam->fx, cam->fy, cam->cx, cam->cy, P->p, &rec[NUREC_TREC_U], &rec[NUREC_TREC_V]);
    if (!(P->det > 0)) return 0;
    rec[NUREC_TREC_O] = NR(rc_opacity)(cam, P, o);
    return NR(splat_record_conic)(P->a, P->b, P->c, P->det, rec[NUREC_TREC_O], (real_t)NUREC_RC_THR_MARGIN, rec);
}

/* Gradient of the projection: g = (gu, gv, gA, gB, gC, go, gz) of the record
 * -> gradients of the mean (added to gm), quaternion and scales (written);
 * g[5] becomes the Gaussian opacity's gradient (rc_opacity_vjp). */
NUREC_HD void NR(rc_project_vjp)(const NR(rc_camera)* cam, const real_t m[3], const real_t q[4],
                                 const real_t s[3], const NR(rc_proj)* P, real_t* g,
                                 real_t gm[3], real_t gq[4], real_t gs[3]) {
    const real_t* R = cam->R;
    real_t dT[6];
    NR(splat_conic_vjp)(P->a, P->b, P->c, P->det, P->T, g + 2, dT);
    NR(rc_opacity_vjp)(cam, P, g + 5, dT);
    if (cam->model.model != NUREC_CAM_PINHOLE) {
        real_t gp[3], dRM[9];
        NR(rc_project_model_vjp)(cam, P, g, dT, gp, dRM);
        for (int k = 0; k < 3; ++k) gm[k] += R[k] * gp[0] + R[3 + k] * gp[1] + R[6 + k] * gp[2];
        NR(splat_rm_vjp)(R, P->qn, P->inv_qnorm, P->Rq, s, dRM, gq, gs);
        return;
    }
    /* T = J RM: dJ = dT RM^T, dRM = J^T dT */
    real_t dj[4] = {0, 0, 0, 0}, j[4];
    for (int k = 0; k < 3; ++k) {
        dj[0] += dT[k] * P->RM[k];
        dj[1] += dT[k] * P->RM[6 + k];
        dj[2] += dT[3 + k] * P->RM[3 + k];
        dj[3] += dT[3 + k] * P->RM[6 + k];
    }
    NR(pinhole_jacobian)(cam->fx, cam->fy, P->p[2], P->tx, P->ty, j);
    real_t dRM[9];
    for (int k = 0; k < 3; ++k) {
        dRM[k] = j[0] * dT[k];
        dRM[3 + k] = j[2] * dT[3 + k];
        dRM[6 + k] = j[1] * dT[k] + j[3] * dT[3 + k];
    }
    /* the camera-space mean: through J, the pixel and the depth */
    real_t gp[3];
    NR(pinhole_vjp)(cam->fx, cam->fy, P->p, P->tx, P->ty, P->clamped_x, P->clamped_y, g[0], g[1], g[6], dj, gp);
    for (int k = 0; k < 3; ++k) gm[k] += R[k] * gp[0] + R[3 + k] * gp[1] + R[6 + k] * gp[2];
    NR(splat_rm_vjp)(R, P->qn, P->inv_qnorm, P->Rq, s, dRM, gq, gs);
    (void)m; (void)q;
}

/* SH basis functions (up to degree 3) at unit direction d; those past the
 * degree are 0. Every loop over the 16 is unrolled with a constant bound
 * (the degree only guards), so b stays in registers: with run-time bounds
 * the basis and its gradient table lived on the stack (288 B per thread in
 * the projection backward, the rig step's costliest per-Gaussian kernel). */
NUREC_HD void NR(rc_sh_basis)(int deg, const real_t d[3], real_t b[16]) {
    const real_t x = d[0], y = d[1], z = d[2];
#ifdef __CUDACC__
#pragma unroll
#endif
    for (int k = 0; k < 16; ++k) b[k] = 0;
    b[0] = (real_t)NUREC_SH_C0;
    if (deg < 1) return;
    const real_t c1 = (real_t)NUREC_SH_C1;
    b[1] = -c1 * y; b[2] = c1 * z; b[3] = -c1 * x;
    if (deg < 2) return;
    const real_t xx = x * x, yy = y * y, zz = z * z;
    b[4] = (real_t)NUREC_SH_C20 * x * y; b[5] = (real_t)NUREC_SH_C21 * y * z;
    b[6] = (real_t)NUREC_SH_C22 * (2 * zz - xx - yy);
    b[7] = (real_t)NUREC_SH_C23 * x * z; b[8] = (real_t)NUREC_SH_C24 * (xx - yy);
    if (deg < 3) return;
    b[9] = (real_t)NUREC_SH_C30 * y * (3 * xx - yy);
    b[10] = (real_t)NUREC_SH_C31 * x * y * z;
    b[11] = (real_t)NUREC_SH_C32 * y * (4 * zz - xx - yy);
    b[12] = (real_t)NUREC_SH_C33 * z * (2 * zz - 3 * xx - 3 * yy);
    b[13] = (real_t)NUREC_SH_C34 * x * (4 * zz - xx - yy);
    b[14] = (real_t)NUREC_SH_C35 * z * (xx - yy);
    b[15] = (real_t)NUREC_SH_C36 * x * (xx - 3 * yy);
}

/* gd = sum_k w[k] d b_k / d d: the basis's VJP in closed form (no table). */
NUREC_HD void NR(rc_sh_basis_vjp)(int deg, const real_t d[3], const real_t w[16], real_t gd[3]) {
    const real_t x = d[0], y = d[1], z = d[2];
    gd[0] = gd[1] = gd[2] = 0;
    if (deg < 1) return;
    const real_t c1 = (real_t)NUREC_SH_C1;
    gd[0] = -c1 * w[3]; gd[1] = -c1 * w[1]; gd[2] = c1 * w[2];
    if (deg < 2) return;
    const real_t c20 = (real_t)NUREC_SH_C20, c21 = (real_t)NUREC_SH_C21, c22 = (real_t)NUREC_SH_C22,
                 c23 = (real_t)NUREC_SH_C23, c24 = (real_t)NUREC_SH_C24;
    gd[0] += c20 * y * w[4] - 2 * c22 * x * w[6] + c23 * z * w[7] + 2 * c24 * x * w[8];
    gd[1] += c20 * x * w[4] + c21 * z * w[5] - 2 * c22 * y * w[6] - 2 * c24 * y * w[8];
    gd[2] += c21 * y * w[5] + 4 * c22 * z * w[6] + c23 * x * w[7];
    if (deg < 3) return;
    const real_t xx = x * x, yy = y * y, zz = z * z;
    const real_t c30 = (real_t)NUREC_SH_C30, c31 = (real_t)NUREC_SH_C31, c32 = (real_t)NUREC_SH_C32,
                 c33 = (real_t)NUREC_SH_C33, c34 = (real_t)NUREC_SH_C34, c35 = (real_t)NUREC_SH_C35,
                 c36 = (real_t)NUREC_SH_C36;
    gd[0] += 6 * c30 * x * y * w[9] + c31 * y * z * w[10] - 2 * c32 * x * y * w[11] - 6 * c33 * x * z * w[12] +
             c34 * (4 * zz - 3 * xx - yy) * w[13] + 2 * c35 * x * z * w[14] + c36 * (3 * xx - 3 * yy) * w[15];
    gd[1] += c30 * (3 * xx - 3 * yy) * w[9] + c31 * x * z * w[10] + c32 * (4 * zz - xx - 3 * yy) * w[11] -
             6 * c33 * y * z * w[12] - 2 * c34 * x * y * w[13] - 2 * c35 * y * z * w[14] - 6 * c36 * x * y * w[15];
    gd[2] += c31 * x * y * w[10] + 8 * c32 * y * z * w[11] + c33 * (6 * zz - 3 * xx - 3 * yy) * w[12] +
             8 * c34 * x * z * w[13] + c35 * (xx - yy) * w[14];
}

/* Unit view direction from the camera centre to the mean, and 1 / distance. */
NUREC_HD void NR(rc_view_dir)(const real_t m[3], const real_t campos[3], real_t d[3], real_t* inv) {
    real_t v0 = m[0] - campos[0], v1 = m[1] - campos[1], v2 = m[2] - campos[2];
    real_t n = R_SQRT(v0 * v0 + v1 * v1 + v2 * v2);
    *inv = n > 0 ? 1 / n : 0;
    d[0] = v0 * *inv; d[1] = v1 * *inv; d[2] = v2 * *inv;
}

/* SH colour seen from campos: SH(dir) + 0.5, clamped at 0. coeffs [K, 3]. */
NUREC_HD void NR(rc_sh_color)(int deg, const real_t* coeffs, const real_t m[3],
                              const real_t campos[3], real_t out[3]) {
    real_t d[3], inv, b[16];
    NR(rc_view_dir)(m, campos, d, &inv);
    NR(rc_sh_basis)(deg, d, b);
    const int n = (deg + 1) * (deg + 1);
    real_t acc[3] = {(real_t)0.5, (real_t)0.5, (real_t)0.5};
    NUREC_UNROLL
    for (int k = 0; k < 16; ++k)
        if (k < n)
            for (int ch = 0; ch < 3; ++ch) acc[ch] += b[k] * coeffs[3 * k + ch];
    for (int ch = 0; ch < 3; ++ch) out[ch] = acc[ch] > 0 ? acc[ch] : (real_t)0;
}

/* VJP of rc_sh_color: adds to gcoeffs [K, 3] and to gm[3]. */
NUREC_HD void NR(rc_sh_color_vjp)(int deg, const real_t* coeffs, const real_t m[3],
                                  const real_t campos[3], const real_t gcol[3], real_t* gcoeffs,
                                  int64_t gstride, real_t gm[3]) {
    real_t d[3], inv, b[16], w[16];
    NR(rc_view_dir)(m, campos, d, &inv);
    NR(rc_sh_basis)(deg, d, b);
    const int n = (deg + 1) * (deg + 1);
    real_t acc[3] = {(real_t)0.5, (real_t)0.5, (real_t)0.5}, g[3];
    NUREC_UNROLL
    for (int k = 0; k < 16; ++k)
        if (k < n)
            for (int ch = 0; ch < 3; ++ch) acc[ch] += b[k] * coeffs[3 * k + ch];
    /* clamped channels pass no gradient (it passes at exactly 0, as torch.clamp) */
    for (int ch = 0; ch < 3; ++ch) g[ch] = acc[ch] >= 0 ? gcol[ch] : (real_t)0;
    NUREC_UNROLL
    for (int k = 0; k < 16; ++k) {
        w[k] = 0;
        if (k < n)
            for (int ch = 0; ch < 3; ++ch) {
                gcoeffs[(3 * k + ch) * gstride] += b[k] * g[ch];
                w[k] += coeffs[3 * k + ch] * g[ch];
            }
    }
    real_t gd[3];
    NR(rc_sh_basis_vjp)(deg, d, w, gd);
    /* d = v / |v|: dv = (gd - d (d . gd)) / |v| */
    const real_t dd = d[0] * gd[0] + d[1] * gd[1] + d[2] * gd[2];
    for (int k = 0; k < 3; ++k) gm[k] += (gd[k] - d[k] * dd) * inv;
}

/* Alpha of a record r (u, v, A, B, C, o) at pixel centre (px, py); 0 when the
 * Gaussian is skipped there (sigma < 0 or alpha < 1/255). Writes
 * exp(-sigma) and the offsets for the VJP (tiles/splat_math.h). */
NUREC_HD real_t NR(rc_alpha)(const real_t* r, real_t px, real_t py, real_t* vis, real_t* dx,
                             real_t* dy) {
    *dx = px - r[0];
    *dy = py - r[1];
    return NR(splat_alpha)(r, *dx, *dy, vis);
}

/* gsplat's radius_clip: whether a visible item's SPEC 8 radii, in pixels
 * as the meta writes them (splat_meta_radii), are both <= p->radius_clip
 * (whole pixels: the radii are). Such an item is dropped like one that
 * reaches no tile: no entries, radii 0, no gradient. */
NUREC_HD int NR(rc_clipped)(const nurec_rasterize_camera_params* p, const real_t* rec) {
    if (p->radius_clip <= 0) return 0;
    int32_t radii[2];
    NR(splat_meta_radii)(rec, (real_t)1, (real_t)1, radii);
    return radii[0] <= p->radius_clip && radii[1] <= p->radius_clip;
}

/* The camera's hooks of the projection written once for both rasterizers
 * (tiles/splat_project_generic.h): its cells are the tiles its footprint
 * crosses; its extra per item is the SH colour seen from the camera. */
NUREC_HD int NR(rc_item_footprint)(const nurec_rasterize_camera_params* p, const real_t* rec, int vis,
                                   nurec_footprint* f) {
    return vis && !NR(rc_clipped)(p, rec) && NR(nurec_footprint_of)(f, rec, p->width, p->height);
}

NUREC_HD void NR(rc_item_box)(const nurec_rasterize_camera_params* p, int64_t it, const int32_t box[NUREC_BOX_SIZE]) {
    if (p->boxes)
        for (int k = 0; k < NUREC_BOX_SIZE; ++k) p->boxes[NUREC_BOX_SIZE * it + k] = box[k];
}

NUREC_HD int64_t NR(rc_item_cells)(const nurec_rasterize_camera_params* p, int64_t it, const real_t* rec, int vis) {
    nurec_footprint f;
    int32_t box[NUREC_BOX_SIZE];
    nurec_box_empty(box);
    int64_t n = 0;
    if (NR(rc_item_footprint)(p, rec, vis, &f))
        n = p->boxes ? nurec_footprint_box(&f, p->width, box) : nurec_footprint_count(&f, p->width);
    NR(rc_item_box)(p, it, box);
    return n;
}

NUREC_HD void NR(rc_item_color)(const nurec_rasterize_camera_params* p, const NR(rc_camera)* cam, int64_t g,
                                int64_t it, const real_t m[3], int64_t cnt) {
    if (p->sh_degree < 0) return;
    real_t col[3] = {0, 0, 0};
    if (cnt > 0)
        NR(rc_sh_color)(p->sh_degree, (const real_t*)p->features + 3 * p->sh_coeffs * g, m, cam->campos, col);
    real_t* oc = (real_t*)p->colors + 3 * it;
    oc[0] = col[0]; oc[1] = col[1]; oc[2] = col[2];
}

/* Camera c; plain: held to the pinhole (a CUDA build without the models' jets). */
NUREC_HD void NR(rc_camera_as)(const nurec_rasterize_camera_params* p, int64_t c, int plain, NR(rc_camera)* cam) {
    NR(rc_camera_of)(p, c, cam);
    if (plain) cam->model.model = NUREC_CAM_PINHOLE;
}

#define SPLAT_FN(name) NR(NUREC_PASTE(rc, name))
#define SPLAT_PARAMS nurec_rasterize_camera_params
#define SPLAT_SENSOR NR(rc_camera)
#define SPLAT_PROJ NR(rc_proj)
#define SPLAT_NUM_SENSORS(p) ((p)->num_cameras)
#define SPLAT_SENSOR_OF(p, c, S, plain) NR(rc_camera_as)(p, c, plain, S)
#define SPLAT_AT_TIME(p, c, it, m, solve, S) NR(rc_camera_at_time)(p, c, it, m, solve, S)
#define SPLAT_PROJECT(p, S, m, q, s, o, P, rec) \
    NR(rc_project)(S, m, q, s, o, (real_t)(p)->near_plane, (real_t)(p)->far_plane, P, rec)
#define SPLAT_PROJECT_VJP(S, m, q, s, P, gr, gm, gq, gs) NR(rc_project_vjp)(S, m, q, s, P, gr, gm, gq, gs)
#define SPLAT_CELLS(p, it, rec, vis) NR(rc_item_cells)(p, it, rec, vis)
#define SPLAT_ITEM_DONE(p, S, g, it, m, cnt) NR(rc_item_color)(p, S, g, it, m, cnt)
#define SPLAT_ITEM_VJP(p, S, g, it, m, extra, stride, gm)                                                     \
    do {                                                                                                      \
        if ((p)->sh_degree >= 0)                                                                              \
            NR(rc_sh_color_vjp)((p)->sh_degree, (const real_t*)(p)->features + 3 * (p)->sh_coeffs * (g), m,   \
                                (S)->campos, (const real_t*)(p)->grad_colors + 3 * (it), extra, stride, gm);  \
    } while (0)
#include "tiles/splat_project_generic.h"

/* Whether Gaussian g can draw a pixel of one of the cameras: the forward's
 * own projection record (at the Gaussian's own time under a rolling
 * shutter) and a pixel centre in its footprint (d^T Q d <= thr, the
 * binning's ellipse: the walks' alpha reaches 1/255 nowhere else), nothing
 * written. The visibility op (nurec_ops.camera_visible: which offloaded
 * rows a step needs, for every camera model and shutter). plain: the
 * pinhole with a global shutter (a CUDA build's constants). */
NUREC_HD int NR(rc_gaussian_visible)(const nurec_rasterize_camera_params* p, int64_t g, int plain) {
    for (int64_t c = 0; c < p->num_cameras; ++c) {
        NR(rc_camera) cam;
        NR(rc_camera_as)(p, c, plain, &cam);
        real_t m[3], rec[NUREC_TREC_SIZE];
        nurec_footprint f;
        if (NR(rc_item_footprint)(p, rec, NR(rc_project_record)(p, c, g, &cam, m, rec), &f) &&
            nurec_footprint_any_cell(&f, p->width))
            return 1;
    }
    return 0;
}
