/* The ray bundle sensor (nurec_ops.rasterize_rays): a sensor given by its
 * rays, not by a projection. The per-pair response is in
 * ray_bundle_generic.h; here, in double whatever the data's precision, the
 * geometry the binning needs: whether a Gaussian's bounding ball can meet
 * any ray of a tile, the tile given by a cone of directions (axis, half
 * angle) and a ball of origins (centre, radius).
 *
 * Why it is exact for binning: a ray from o in ball(c, r) passing within
 * R of mu gives the ray from c with the same direction passing within
 * R + r of mu (the two half-lines are r apart at every t); the half-line
 * from c with direction d passes within rho of mu (|mu - c| = L > rho) iff
 * the angle between d and mu - c is at most asin(rho / L). So a tile is
 * reached only if the angle between its axis and mu - c is at most
 * half + asin(rho / L), rho = R + r. A pair with alpha >= 1/255 has its
 * peak at t* > near >= 0 inside the Gaussian's k-sigma ellipsoid, which
 * lies in its bounding ball: such pairs are never binned away. */
#ifndef NUREC_SENSORS_RAY_BUNDLE_H
#define NUREC_SENSORS_RAY_BUNDLE_H

#include "math/defs.h"

/* Rounding slack of the tests: the cones and balls come from the rays in
 * the data's precision and the response is evaluated in it; the bounds are
 * widened by a relative 1e-4 and 1e-6 rad so that no pair at the edge is
 * lost to rounding (a wider bound costs only work). */
#define NUREC_RAYS_SLACK_REL 1e-4
#define NUREC_RAYS_SLACK_ANG 1e-6

/* Per-tile geometry (layout of the caller's cell table, double, 8 each):
 * axis (3, unit, world), half angle (rad; < 0: the tile has no rays),
 * origins' centre (3, world), origins' radius. */
#define NUREC_RAYS_CELL_SIZE 8

/* 1 if a ball (mu, R) may meet a ray whose origin is within r of c and
 * whose direction is within `half` of `axis`; half < 0: never. */
NUREC_HD int nurec_rays_cone_meets(const double* mu, double R, const double* axis, double half,
                                   const double* c, double r) {
    if (!(half >= 0.0)) return 0;
    const double w0 = mu[0] - c[0], w1 = mu[1] - c[1], w2 = mu[2] - c[2];
    const double L = sqrt(w0 * w0 + w1 * w1 + w2 * w2);
    const double rho = (R + r) * (1.0 + NUREC_RAYS_SLACK_REL) + NUREC_RAYS_SLACK_REL * 1e-2;
    if (!(L > rho)) return 1; /* the ball holds an origin's neighbourhood (or NaN: kept) */
    /* angle between axis and w, by atan2 (acos loses small angles) */
    const double cx = axis[1] * w2 - axis[2] * w1, cy = axis[2] * w0 - axis[0] * w2,
                 cz = axis[0] * w1 - axis[1] * w0;
    const double ang = atan2(sqrt(cx * cx + cy * cy + cz * cz), axis[0] * w0 + axis[1] * w1 + axis[2] * w2);
    return ang <= half + asin(rho / L) + NUREC_RAYS_SLACK_ANG;
}

#define NUREC_GENERIC_FILE "sensors/ray_bundle_generic.h"
#include "math/generic.h"

#endif /* NUREC_SENSORS_RAY_BUNDLE_H */
