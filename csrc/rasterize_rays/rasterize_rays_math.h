/* Per-element math of rasterize_rays, shared by the C CPU kernels and the
 * CUDA kernels, in float and double: a Gaussian's record (mean, A =
 * S^-1 R^T, opacity, bounding radius) and its VJP to quats and scales, an
 * item's depth and tile rectangle over the rays' direction cells, and a
 * pair's alpha. The response along a ray is the sensor layer's
 * (sensors/ray_bundle.h). */
#ifndef NUREC_RASTERIZE_RAYS_MATH_H
#define NUREC_RASTERIZE_RAYS_MATH_H

#include "math/defs.h"
#include "math/quat.h"
#include "rasterize_rays/rasterize_rays.h"
#include "sensors/ray_bundle.h"
#include "tiles/tiles_math.h"

#define NUREC_RAYS_PI 3.14159265358979323846
#define NUREC_RAYS_TWO_PI 6.28318530717958647692

NUREC_HD double nurec_rays_wrap(double x) {
    return x - NUREC_RAYS_TWO_PI * ceil((x - NUREC_RAYS_PI) / NUREC_RAYS_TWO_PI);
}

/* The band of x among G bands of edges e[0..G] (band i = [e_i, e_i+1), the
 * outer edges unbounded): the number of inner edges e_1..e_G-1 <= x, as
 * torch.searchsorted(e[1:G], x, right=True) assigns the rays. */
NUREC_HD int nurec_rays_band(const double* e, int G, double x) {
    int lo = 0, hi = G - 1; /* answer in [0, G-1]: inner edges e[1..G-1] */
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2; /* is e[mid] <= x ? */
        if (e[mid] <= x) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* A tile's sorted places [*a, *b) of sensor c's rays (cell_rays, clamped to
 * [0, M]: a table not made by the wrapper never indexes out of bounds), and
 * the caller's ray at sorted place k (an order entry out of [0, M) maps to
 * k itself). */
NUREC_HD void nurec_rays_span(const int32_t* cell_rays, int64_t cells, int64_t c, int64_t t, int64_t M,
                              int64_t* a, int64_t* b) {
    const int32_t* r = cell_rays + 2 * ((cells + 1) * c + t);
    int64_t lo = r[0], hi = r[1];
    lo = lo < 0 ? 0 : (lo > M ? M : lo);
    hi = hi < lo ? lo : (hi > M ? M : hi);
    *a = lo;
    *b = hi;
}

NUREC_HD int64_t nurec_rays_ray_of(const int32_t* order, int64_t M, int64_t c, int64_t k) {
    const int32_t r = order[c * M + k];
    return c * M + (r >= 0 && r < M ? r : k);
}

/* The tile rectangle of a bounding ball (mu, R) seen from sensor s (its
 * table, NUREC_RAYS_SENSOR_SIZE) over the direction cells, cells past the
 * first 64 of the rectangle kept, the first 64 cut where the cell's own
 * cone and ball rule the ball out; writes box, returns the tile count. */
NUREC_HD int64_t nurec_rays_box(const double* s, const double* el_e, const double* az_e, const double* cells,
                                int GE, int GA, const double* mu, double R, int32_t box[NUREC_BOX_SIZE]) {
    nurec_box_empty(box);
    const double w0 = mu[0] - s[9], w1 = mu[1] - s[10], w2 = mu[2] - s[11];
    const double L = sqrt(w0 * w0 + w1 * w1 + w2 * w2);
    const double rho = (R + s[12]) * (1.0 + NUREC_RAYS_SLACK_REL) + NUREC_RAYS_SLACK_REL * 1e-2;
    int ty0 = 0, ty1 = GE - 1, tx0 = 0, ntx = GA;
    if (L > rho) {
        const double phi = asin(rho / L) + NUREC_RAYS_SLACK_ANG;
        const double v0 = (s[0] * w0 + s[1] * w1 + s[2] * w2) / L, v1 = (s[3] * w0 + s[4] * w1 + s[5] * w2) / L,
                     v2 = (s[6] * w0 + s[7] * w1 + s[8] * w2) / L;
        const double el = atan2(v2, sqrt(v0 * v0 + v1 * v1));
        const double lo = el - phi, hi = el + phi;
        ty0 = nurec_rays_band(el_e, GE, lo);
        ty1 = nurec_rays_band(el_e, GE, hi);
        const double half_pi = 0.5 * NUREC_RAYS_PI;
        const double sphi = sin(phi), ce = cos(el);
        if (lo > -half_pi && hi < half_pi && sphi < ce) { /* a cap clear of the poles */
            const double dlt = asin(sphi / ce) + NUREC_RAYS_SLACK_ANG;
            const double az = nurec_rays_wrap(atan2(v1, v0) - s[13]);
            const double a = az - dlt, b = az + dlt;
            if (dlt < NUREC_RAYS_PI) {
                const int ta = nurec_rays_band(az_e, GA, nurec_rays_wrap(a));
                const int tb = nurec_rays_band(az_e, GA, nurec_rays_wrap(b));
                const int crosses = a <= -NUREC_RAYS_PI || b > NUREC_RAYS_PI;
                const int n = crosses ? (GA - ta) + tb + 1 : tb - ta + 1;
                if (n >= 1 && n < GA) {
                    tx0 = ta;
                    ntx = n;
                }
            }
        }
    } else if (!(L <= rho)) {
        return 0; /* NaN */
    }
    box[0] = ty0;
    box[1] = ty1;
    box[2] = tx0;
    box[3] = ntx;
    const int64_t n = (int64_t)(ty1 - ty0 + 1) * ntx;
    uint64_t cut = 0;
    for (int64_t q = 0; q < n && q < 64; ++q) {
        const int64_t t = nurec_box_tile(box, q, GA);
        const double* cl = cells + NUREC_RAYS_CELL_SIZE * t;
        if (!nurec_rays_cone_meets(mu, R, cl, cl[3], cl + 4, cl[7])) cut |= (uint64_t)1 << q;
    }
    box[4] = (int32_t)(uint32_t)cut;
    box[5] = (int32_t)(uint32_t)(cut >> 32);
    const int64_t kept = nurec_box_count(box, GA, GE);
    if (kept == 0) nurec_box_empty(box);
    return kept;
}

#define NUREC_GENERIC_FILE "rasterize_rays/rasterize_rays_math_generic.h"
#include "math/generic.h"

#endif /* NUREC_RASTERIZE_RAYS_MATH_H */
