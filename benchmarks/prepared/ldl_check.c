/* The completed-squares alpha and its VJP (splat_stage_ldl, splat_alpha_ldl,
 * splat_alpha_vjp_ldl, tiles/splat_math_generic.h) against splat_alpha and
 * splat_alpha_vjp, host build, float64 and float32, on random records and
 * pixels of the tiles they reach. Not built by setup.py:
 *     cc -std=c99 -O2 -I csrc benchmarks/prepared/ldl_check.c -lm && ./a.out
 * Exit status 1 where the two disagree past rounding. */
#include <stdio.h>
#include <stdlib.h>

#include "tiles/splat_math.h"

static double uni(void) { return rand() / (RAND_MAX + 1.0); }

int main(void) {
    srand(7);
    const int n = 2000000;
    double worst_a64 = 0, worst_g64 = 0, worst_a32 = 0, worst_g32 = 0, plain_a32 = 0, plain_g32 = 0;
    long counted = 0, flips64 = 0, flips32 = 0;
    for (int it = 0; it < n; ++it) {
        /* a 2D covariance: sizes 0.3 .. 300 px, anisotropy up to 1,000, + 0.3 blur */
        const double s1 = exp(log(0.3) + uni() * log(1000.0)), s2 = fmax(s1 / exp(uni() * log(1000.0)), 0.3);
        const double th = uni() * 3.141592653589793, c = cos(th), s = sin(th);
        const double a = c * c * s1 * s1 + s * s * s2 * s2 + 0.3, cc = s * s * s1 * s1 + c * c * s2 * s2 + 0.3;
        const double b = c * s * (s1 * s1 - s2 * s2), det = a * cc - b * b;
        const double tx0 = 16.0 * (int)(uni() * 240), ty0 = 16.0 * (int)(uni() * 80);
        const double reach = 3.5 * sqrt(fmax(a, cc)) + 8;
        double r[NUREC_TREC_SIZE] = {0};
        r[NUREC_TREC_U] = tx0 + 8 + (2 * uni() - 1) * reach;
        r[NUREC_TREC_V] = ty0 + 8 + (2 * uni() - 1) * reach;
        r[NUREC_TREC_A] = cc / det;
        r[NUREC_TREC_B] = -b / det;
        r[NUREC_TREC_C] = a / det;
        r[NUREC_TREC_O] = 0.004 + 0.996 * uni();
        float rf[NUREC_TREC_SIZE];
        for (int k = 0; k < NUREC_TREC_SIZE; ++k) rf[k] = (float)r[k];
        for (int k = 0; k < NUREC_TREC_SIZE; ++k) r[k] = rf[k]; /* the same record in both precisions */
        const int lx = (int)(uni() * 16), ly = (int)(uni() * 16);
        const double px = tx0 + lx + 0.5, py = ty0 + ly + 0.5, ga = 2 * uni() - 1;
        /* float64 */
        double vis, g0[6] = {0}, g1[6] = {0}, e[NUREC_SPLAT_LDL_SIZE], al, oa, qe, t, w;
        const double aref = splat_alpha_f64(r, px - r[0], py - r[1], &vis);
        splat_stage_ldl_f64(r, tx0 + 8, ty0 + 8, e);
        const int ok = splat_alpha_ldl_f64(e, lx - 7.5, ly - 7.5, &al, &oa, &qe, &t, &w);
        if (ok != (aref > 0)) ++flips64;
        if (ok && aref > 0) {
            ++counted;
            worst_a64 = fmax(worst_a64, fabs(al - aref));
            splat_alpha_vjp_f64(r, vis, px - r[0], py - r[1], ga, g0);
            splat_alpha_vjp_ldl_f64(e, oa, qe, t, w, px - r[0], py - r[1], ga, g1);
            for (int k = 0; k < 6; ++k) /* each against the largest, per Gaussian */
                worst_g64 = fmax(worst_g64, fabs(g1[k] - g0[k]) / fmax(1e-300, fabs(g0[k]) + fabs(g0[0]) + fabs(g0[1])));
        }
        /* float32 (host: expf, scale 1) */
        float visf, h0[6] = {0}, h1[6] = {0}, ef[NUREC_SPLAT_LDL_SIZE], alf, oaf, qef, tf, wf;
        const float arf = splat_alpha_f32(rf, (float)px - rf[0], (float)py - rf[1], &visf);
        splat_stage_ldl_f32(rf, (float)(tx0 + 8), (float)(ty0 + 8), ef);
        const int okf = splat_alpha_ldl_f32(ef, lx - 7.5f, ly - 7.5f, &alf, &oaf, &qef, &tf, &wf);
        if (okf != (aref > 0)) ++flips32;
        if (okf && arf > 0 && aref > 0) {
            worst_a32 = fmax(worst_a32, fabs(alf - aref));
            plain_a32 = fmax(plain_a32, fabs(arf - aref));
            splat_alpha_vjp_f32(rf, visf, (float)px - rf[0], (float)py - rf[1], (float)ga, h0);
            splat_alpha_vjp_ldl_f32(ef, oaf, qef, tf, wf, (float)px - rf[0], (float)py - rf[1], (float)ga, h1);
            for (int k = 0; k < 6; ++k)
            {
                const double scale = fmax(1e-30, fabs(g0[k]) + fabs(g0[0]) + fabs(g0[1]));
                worst_g32 = fmax(worst_g32, fabs(h1[k] - g0[k]) / scale);
                plain_g32 = fmax(plain_g32, fabs(h0[k] - g0[k]) / scale);
            }
        }
    }
    printf("pairs counted %ld of %d; float64: alpha max |diff| %.2e, VJP max rel %.2e, 1/255 flips %ld\n", counted, n,
           worst_a64, worst_g64, flips64);
    printf("float32 against float64's plain form: alpha max |diff| %.2e (the plain form's own %.2e), VJP max rel "
           "%.2e (%.2e), 1/255 flips %ld\n", worst_a32, plain_a32, worst_g32, plain_g32, flips32);
    return worst_a64 < 1e-12 && worst_g64 < 1e-8 && worst_a32 < 1e-5 && worst_g32 < 1e-3 ? 0 : 1;
}
