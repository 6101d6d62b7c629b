/* The camera walks' completed-squares alpha and its VJP (splat_stage_ldl,
 * splat_alpha_ldl, splat_alpha_vjp_ldl: tiles/splat_math_generic.h, which
 * only the CUDA walks call), host build, in float64 and float32, against
 * the plain form (alpha = o exp(-sigma), sigma = (A dx^2 + C dy^2) / 2 +
 * B dx dy, and its VJP as splat_alpha_vjp writes it) evaluated in long
 * double on the same float32 record; and the float32 plain form
 * (splat_alpha, splat_alpha_vjp) against the same, for comparison. Random
 * records: Gaussians of 0.3-300 pixels, anisotropy up to 1,000, the
 * projection's 0.3 blur, a random pixel of a tile each reaches. Built and
 * run by tests/test_splat_alpha_ldl.py:  ./a.out SEED N
 * Exit status 1 where the completed squares are off past rounding. */
#include <stdio.h>
#include <stdlib.h>

#include "tiles/splat_math.h"

static uint64_t state;
static double uni(void) { /* splitmix64: the same draws on every libc */
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

/* The plain form in long double: alpha (0 where skipped) and, where it
 * counts and is not clamped, the gradient of (u, v, A, B, C, o) for dL/dalpha = ga. */
static long double plain(const double* r, double px, double py, double ga, long double g[6]) {
    const long double dx = (long double)px - r[0], dy = (long double)py - r[1];
    const long double sg = 0.5L * (r[2] * dx * dx + r[4] * dy * dy) + r[3] * dx * dy;
    const long double vis = expl(-sg), oa = r[5] * vis;
    for (int k = 0; k < 6; ++k) g[k] = 0;
    if (!(sg >= 0 && oa >= 1.0L / 255)) return 0;
    if (oa <= 0.99L) {
        const long double gs = -ga * oa;
        g[0] = -gs * (r[2] * dx + r[3] * dy);
        g[1] = -gs * (r[3] * dx + r[4] * dy);
        g[2] = gs * 0.5L * dx * dx;
        g[3] = gs * dx * dy;
        g[4] = gs * 0.5L * dy * dy;
        g[5] = ga * vis;
    }
    return oa < 0.99L ? oa : 0.99L;
}

/* |g - ref| per value, against the largest of the Gaussian's six */
static double vjp_err(const long double ref[6], const double g[6]) {
    long double scale = 1e-300L, worst = 0;
    for (int k = 0; k < 6; ++k) scale = fabsl(ref[k]) > scale ? fabsl(ref[k]) : scale;
    for (int k = 0; k < 6; ++k) worst = fabsl(g[k] - ref[k]) > worst ? fabsl(g[k] - ref[k]) : worst;
    return (double)(worst / scale);
}

/* A column of one thread's pixels in the camera backward (RC_BWD_PIX = 4:
 * one column lx of the tile, rows ly0 + 4 h), its VJP through
 * splat_alpha_vjp_ldl_column and _column_sums in float64 (f32 = 0) or
 * float32, against the plain form's per-pixel gradients summed in long
 * double: the worst error against the sum over the pixels of each one's
 * largest value. -1 where no pixel counts or a 1/255 decision differs. The
 * offsets as the kernel takes them: tile-local pixel minus tile-local
 * centre. */
static double column_err(int f32, const double* r, double tx0, double ty0, int lx, int ly0, double ga) {
    long double ref[6] = {0, 0, 0, 0, 0, 0}, scale = 1e-300L;
    double e[NUREC_SPLAT_LDL_SIZE], c[3] = {0, 0, 0}, s[6];
    float rf[NUREC_TREC_SIZE], ef[NUREC_SPLAT_LDL_SIZE], cf[3] = {0, 0, 0}, sf[6];
    for (int k = 0; k < NUREC_TREC_SIZE; ++k) rf[k] = (float)r[k];
    splat_stage_ldl_f64(r, tx0 + 8, ty0 + 8, e);
    splat_stage_ldl_f32(rf, (float)(tx0 + 8), (float)(ty0 + 8), ef);
    int any = 0;
    for (int h = 0; h < 4; ++h) {
        const int ly = ly0 + 4 * h;
        long double g[6];
        const long double aref = plain(r, tx0 + lx + 0.5, ty0 + ly + 0.5, ga, g);
        double al, oa, qe, t, w;
        float alf, oaf, qef, tf, wf;
        const int ok = f32 ? splat_alpha_ldl_f32(ef, lx - 7.5f, ly - 7.5f, &alf, &oaf, &qef, &tf, &wf)
                           : splat_alpha_ldl_f64(e, lx - 7.5, ly - 7.5, &al, &oa, &qe, &t, &w);
        if (ok != (aref > 0)) return -1;
        if (!ok) continue;
        any = 1;
        long double m = 0;
        for (int k = 0; k < 6; ++k) {
            ref[k] += g[k];
            m = fabsl(g[k]) > m ? fabsl(g[k]) : m;
        }
        scale += m;
        if (f32) splat_alpha_vjp_ldl_column_f32(oaf, (ly - 7.5f) - (rf[1] - (float)(ty0 + 8)), (float)ga, cf);
        else splat_alpha_vjp_ldl_column_f64(oa, (ly - 7.5) - (r[1] - (ty0 + 8)), ga, c);
    }
    if (!any) return -1;
    if (f32) {
        splat_alpha_vjp_ldl_column_sums_f32(ef, (lx - 7.5f) - (rf[0] - (float)(tx0 + 8)), cf, sf);
        splat_alpha_vjp_ldl_finish_f32(ef, sf, NULL);
        sf[5] /= rf[NUREC_TREC_O];
        for (int k = 0; k < 6; ++k) s[k] = sf[k];
    } else {
        splat_alpha_vjp_ldl_column_sums_f64(e, (lx - 7.5) - (r[0] - (tx0 + 8)), c, s);
        splat_alpha_vjp_ldl_finish_f64(e, s, NULL);
        s[5] /= r[NUREC_TREC_O];
    }
    long double worst = 0;
    for (int k = 0; k < 6; ++k) worst = fabsl(s[k] - ref[k]) > worst ? fabsl(s[k] - ref[k]) : worst;
    return (double)(worst / scale);
}

int main(int argc, char** argv) {
    state = argc > 1 ? strtoull(argv[1], NULL, 10) : 7;
    const long n = argc > 2 ? atol(argv[2]) : 2000000;
    double a64 = 0, g64 = 0, a32 = 0, g32 = 0, pa32 = 0, pg32 = 0; /* worst errors; p: the float32 plain form */
    long counted = 0, flips64 = 0, flips32 = 0, columns = 0;
    double c64 = 0, c32 = 0; /* the columns' worst errors */
    for (long it = 0; it < n; ++it) {
        const double s1 = exp(log(0.3) + uni() * log(1000.0)), s2 = fmax(s1 / exp(uni() * log(1000.0)), 0.3);
        const double th = uni() * 3.141592653589793, c = cos(th), s = sin(th);
        const double a = c * c * s1 * s1 + s * s * s2 * s2 + 0.3, cc = s * s * s1 * s1 + c * c * s2 * s2 + 0.3;
        const double b = c * s * (s1 * s1 - s2 * s2), det = a * cc - b * b;
        const double tx0 = 16.0 * (int)(uni() * 240), ty0 = 16.0 * (int)(uni() * 80);
        const double reach = 3.5 * sqrt(fmax(a, cc)) + 8;
        float rf[NUREC_TREC_SIZE] = {0};
        rf[NUREC_TREC_U] = (float)(tx0 + 8 + (2 * uni() - 1) * reach);
        rf[NUREC_TREC_V] = (float)(ty0 + 8 + (2 * uni() - 1) * reach);
        rf[NUREC_TREC_A] = (float)(cc / det);
        rf[NUREC_TREC_B] = (float)(-b / det);
        rf[NUREC_TREC_C] = (float)(a / det);
        rf[NUREC_TREC_O] = (float)(0.004 + 0.996 * uni());
        double r[NUREC_TREC_SIZE]; /* the same record in both precisions */
        for (int k = 0; k < NUREC_TREC_SIZE; ++k) r[k] = rf[k];
        const int lx = (int)(uni() * 16), ly = (int)(uni() * 16);
        const double px = tx0 + lx + 0.5, py = ty0 + ly + 0.5, ga = 2 * uni() - 1;
        long double gref[6];
        const long double aref = plain(r, px, py, ga, gref);
        /* float64 */
        double e[NUREC_SPLAT_LDL_SIZE], al, oa, qe, t, w, g[6] = {0};
        splat_stage_ldl_f64(r, tx0 + 8, ty0 + 8, e);
        const int ok = splat_alpha_ldl_f64(e, lx - 7.5, ly - 7.5, &al, &oa, &qe, &t, &w);
        if (ok != (aref > 0)) ++flips64;
        if (ok && aref > 0) {
            ++counted;
            a64 = fmax(a64, (double)fabsl(al - aref));
            splat_alpha_vjp_ldl_f64(e, oa, t, w, px - r[0], py - r[1], ga, g);
            g[5] /= r[NUREC_TREC_O]; /* left times o: the caller divides by o once an entry */
            g64 = fmax(g64, vjp_err(gref, g));
        }
        /* float32 (the host's expf: scale 1), and the plain float32 form beside it */
        float ef[NUREC_SPLAT_LDL_SIZE], alf, oaf, qef, tf, wf, h[6] = {0}, visf, hp[6] = {0};
        splat_stage_ldl_f32(rf, (float)(tx0 + 8), (float)(ty0 + 8), ef);
        const int okf = splat_alpha_ldl_f32(ef, lx - 7.5f, ly - 7.5f, &alf, &oaf, &qef, &tf, &wf);
        const float dxf = (float)px - rf[0], dyf = (float)py - rf[1];
        const float apf = splat_alpha_f32(rf, dxf, dyf, &visf);
        if (okf != (aref > 0)) ++flips32;
        if (okf && aref > 0) {
            double gd[6];
            a32 = fmax(a32, (double)fabsl(alf - aref));
            splat_alpha_vjp_ldl_f32(ef, oaf, tf, wf, dxf, dyf, (float)ga, h);
            h[5] /= rf[NUREC_TREC_O];
            for (int k = 0; k < 6; ++k) gd[k] = h[k];
            g32 = fmax(g32, vjp_err(gref, gd));
        }
        const double ce64 = column_err(0, r, tx0, ty0, lx, ly % 4, ga), ce32 = column_err(1, r, tx0, ty0, lx, ly % 4, ga);
        if (ce64 >= 0 && ce32 >= 0) {
            ++columns;
            c64 = fmax(c64, ce64);
            c32 = fmax(c32, ce32);
        }
        if (apf > 0 && aref > 0) {
            double gd[6];
            pa32 = fmax(pa32, (double)fabsl(apf - aref));
            splat_alpha_vjp_f32(rf, visf, dxf, dyf, (float)ga, hp);
            for (int k = 0; k < 6; ++k) gd[k] = hp[k];
            pg32 = fmax(pg32, vjp_err(gref, gd));
        }
    }
    printf("pairs counted %ld of %ld\n", counted, n);
    printf("float64: alpha max |diff| %.2e, VJP max %.2e of its scale, 1/255 flips %ld\n", a64, g64, flips64);
    printf("float32: alpha max |diff| %.2e (the plain form's %.2e), VJP max %.2e of its scale (%.2e), "
           "1/255 flips %ld\n", a32, pa32, g32, pg32, flips32);
    printf("columns of 4 pixels (splat_alpha_vjp_ldl_column) %ld: VJP max %.2e (float64), %.2e (float32) of their "
           "scale\n", columns, c64, c32);
    /* a flip needs an alpha within rounding of 1/255: not in float64 here, rare in float32 */
    const int ok64 = a64 < 1e-13 && g64 < 1e-10 && flips64 == 0 && c64 < 1e-10;
    const int ok32 = a32 < 1e-5 && g32 < 1e-3 && flips32 <= n / 10000 && c32 < 1e-3 && columns > n / 10;
    return ok64 && ok32 ? 0 : 1;
}
