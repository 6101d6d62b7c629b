/* Generic over real_t (see math/generic.h). */

#define SPLAT_CELL_ALPHA NR(rc_alpha) /* cells are pixel centres */
#include "tiles/splat_cell_cpu_generic.h"
#undef SPLAT_CELL_ALPHA

/* Projection of every (camera, Gaussian) item: tile record, tile count and,
 * with SH, the colour seen from that camera (tiles/splat_project_generic.h). */
static void NR(rc_project_cpu)(const nurec_rasterize_camera_params* p) {
    for (int64_t c = 0; c < p->num_cameras; ++c) {
        NR(rc_camera) cam;
        NR(rc_camera_of)(p, c, &cam);
        for (int64_t g = 0; g < p->num_gaussians; ++g) {
            NR(rc_camera) camg = cam; /* moved to the Gaussian's time (SPEC 7) */
            NR(rc_project_item)(p, c, g, &camg);
        }
    }
}

/* Each Gaussian's visibility (rc_gaussian_visible). */
static void NR(rc_visible_cpu)(const nurec_rasterize_camera_params* p) {
    for (int64_t g = 0; g < p->num_gaussians; ++g) p->visible[g] = (uint8_t)NR(rc_gaussian_visible)(p, g, 0);
}

/* Rows of item features: SH colours or features per (camera, Gaussian)
 * item, or the Gaussian's features (NUREC_RC_FEATURE_ROW). */
static NR(splat_rows) NR(rc_feature_rows)(const nurec_rasterize_camera_params* p, void* sh_base, void* base) {
    NR(splat_rows) r;
    if (p->sh_degree >= 0) {
        r.base = (real_t*)sh_base;
        r.stride = 3;
        r.mod = 0;
    } else {
        r.base = (real_t*)base;
        r.stride = p->channels;
        r.mod = p->features_per_camera ? 0 : p->num_gaussians;
    }
    return r;
}

static int NR(rc_forward_cpu)(const nurec_rasterize_camera_params* p) {
    const int64_t D = p->channels, W = p->width, H = p->height;
    const real_t* records = (const real_t*)p->records;
    const real_t* bgs = (const real_t*)p->backgrounds;
    const NR(splat_rows) feats = NR(rc_feature_rows)(p, p->colors, (void*)p->features);
    real_t* acc = (real_t*)malloc(sizeof(real_t) * (size_t)(D > 0 ? D : 1));
    if (!acc) return NUREC_ERR_TILES_ALLOC;
    for (int64_t c = 0; c < p->num_cameras; ++c)
        for (int ty = 0; ty < p->tiles_y; ++ty)
            for (int tx = 0; tx < p->tiles_x; ++tx) {
                const int64_t* range = p->tile_ranges + 2 * ((c * p->tiles_y + ty) * p->tiles_x + tx);
                for (int y = ty * NUREC_TILE; y < (ty + 1) * NUREC_TILE && y < H; ++y)
                    for (int x = tx * NUREC_TILE; x < (tx + 1) * NUREC_TILE && x < W; ++x) {
                        int64_t pix = (c * H + y) * W + x;
                        real_t dep;
                        real_t T = NR(splat_cell_forward)(p->isect_items, range[0], range[1], records, &feats, D,
                                                          (real_t)x + (real_t)0.5, (real_t)y + (real_t)0.5, acc,
                                                          &dep, p->last + pix);
                        real_t* out = (real_t*)p->render + D * pix;
                        for (int64_t k = 0; k < D; ++k) out[k] = acc[k] + (bgs ? T * bgs[c * D + k] : 0);
                        ((real_t*)p->depth)[pix] = dep;
                        ((real_t*)p->alpha)[pix] = 1 - T;
                        ((real_t*)p->final_T)[pix] = T;
                    }
            }
    free(acc);
    return NUREC_OK;
}

/* Each pixel's median item (tiles/splat_cell_cpu_generic.h) over the
 * forward's lists. */
static int NR(rc_median_cpu)(const nurec_rasterize_camera_params* p) {
    const int64_t W = p->width, H = p->height, P = p->num_cameras * p->num_gaussians;
    for (int64_t c = 0; c < p->num_cameras; ++c)
        for (int ty = 0; ty < p->tiles_y; ++ty)
            for (int tx = 0; tx < p->tiles_x; ++tx) {
                const int64_t* range = p->tile_ranges + 2 * ((c * p->tiles_y + ty) * p->tiles_x + tx);
                for (int y = ty * NUREC_TILE; y < (ty + 1) * NUREC_TILE && y < H; ++y)
                    for (int x = tx * NUREC_TILE; x < (tx + 1) * NUREC_TILE && x < W; ++x)
                        p->median_items[(c * H + y) * W + x] =
                            p->status[1] != 0 ? NUREC_SPLAT_MEDIAN_OVERFLOW
                            : !(((const real_t*)p->final_T)[(c * H + y) * W + x] <= (real_t)0.5)
                                ? NUREC_SPLAT_MEDIAN_NONE /* the forward's alpha < 0.5 */
                                : NR(splat_cell_median)(p->isect_items, range[0], range[1], p->capacity,
                                                                      P, (const real_t*)p->records,
                                                                      (real_t)x + (real_t)0.5, (real_t)y + (real_t)0.5);
            }
    return NUREC_OK;
}

static int NR(rc_backward_cpu)(const nurec_rasterize_camera_params* p) {
    const int64_t C = p->num_cameras, N = p->num_gaussians, D = p->channels;
    const int64_t W = p->width, H = p->height;
    const real_t* records = (const real_t*)p->records;
    const real_t* bgs = (const real_t*)p->backgrounds;
    const real_t* gR = (const real_t*)p->grad_render;
    const real_t* gD = (const real_t*)p->grad_depth;
    const real_t* gA = (const real_t*)p->grad_alpha;
    real_t* grec = (real_t*)p->grad_records;
    const int sh = p->sh_degree >= 0;
    const NR(splat_rows) feats = NR(rc_feature_rows)(p, p->colors, (void*)p->features);
    const NR(splat_rows) gfeats = NR(rc_feature_rows)(p, p->grad_colors, p->grad_features);
    memset(grec, 0, sizeof(real_t) * NUREC_SPLAT_GREC_ROW(p->absgrad) * (size_t)(C * N));
    memset(gfeats.base, 0, sizeof(real_t) * (size_t)((sh ? C * 3 : D * (p->features_per_camera ? C : 1)) * N));
    for (int64_t c = 0; c < C; ++c)
        for (int ty = 0; ty < p->tiles_y; ++ty)
            for (int tx = 0; tx < p->tiles_x; ++tx) {
                const int64_t* range = p->tile_ranges + 2 * ((c * p->tiles_y + ty) * p->tiles_x + tx);
                for (int y = ty * NUREC_TILE; y < (ty + 1) * NUREC_TILE && y < H; ++y)
                    for (int x = tx * NUREC_TILE; x < (tx + 1) * NUREC_TILE && x < W; ++x) {
                        int64_t pix = (c * H + y) * W + x;
                        real_t T = ((const real_t*)p->final_T)[pix];
                        NR(splat_cell_backward)(p->isect_items, range[0], p->last[pix], records, &feats, D,
                                                (real_t)x + (real_t)0.5, (real_t)y + (real_t)0.5, T,
                                                bgs ? bgs + c * D : (const real_t*)0,
                                                gR + D * pix, gD ? gD[pix] : 0, gA ? gA[pix] : 0, grec, &gfeats, p->absgrad);
                    }
            }

    /* per Gaussian: the projection VJP summed over cameras */
    for (int64_t g = 0; g < N; ++g)
        NR(rc_project_vjp_gaussian)(p, g, 0, sh ? (real_t*)p->grad_features + 3 * p->sh_coeffs * g : (real_t*)0, 1,
                                    sh ? 3 * p->sh_coeffs : 0);
    return NUREC_OK;
}
