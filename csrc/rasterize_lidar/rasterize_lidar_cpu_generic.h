/* Generic over real_t (see math/generic.h). */

#define SPLAT_CELL_ALPHA NR(rl_alpha) /* cells are rays: (azimuth, elevation), azimuth wrapped */
#include "tiles/splat_cell_cpu_generic.h"
#undef SPLAT_CELL_ALPHA

/* Projection of every (sweep, Gaussian) item: tile record, tile box and
 * count (tiles/splat_project_generic.h). */
static void NR(rl_project_cpu)(const nurec_rasterize_lidar_params* p) {
    for (int64_t c = 0; c < p->num_sweeps; ++c) {
        NR(rl_sensor) S;
        NR(rl_sensor_load)((const real_t*)p->viewmats + 16 * c, &S);
        for (int64_t g = 0; g < p->num_gaussians; ++g) {
            NR(rl_sensor) Sg = S; /* moved to the Gaussian's time (SPEC 7) */
            NR(rl_project_item)(p, c, g, &Sg);
        }
    }
}

static int NR(rl_forward_cpu)(const nurec_rasterize_lidar_params* p) {
    const int64_t D = p->channels, W = p->cols, H = p->rows, N = p->num_gaussians;
    const real_t* records = (const real_t*)p->records;
    const real_t* row_el = (const real_t*)p->row_elevations;
    const real_t* col_az = (const real_t*)p->column_azimuths;
    const real_t* row_off = (const real_t*)p->row_azimuth_offsets;
    const NR(splat_rows) feats = {(real_t*)p->features, D, N};
    real_t* acc = (real_t*)malloc(sizeof(real_t) * (size_t)(D > 0 ? D : 1));
    if (!acc) return NUREC_ERR_TILES_ALLOC;
    for (int64_t ray = 0; ray < p->num_sweeps * H * W; ++ray) {
        const int64_t* range = rl_tile_range_of(p, ray);
        const int i = (int)((ray / W) % H), j = (int)(ray % W);
        real_t rng;
        real_t T = NR(splat_cell_forward)(p->isect_items, range[0], range[1], records, &feats, D,
                                          col_az[j] + row_off[i], row_el[i], acc, &rng, p->last + ray);
        const int64_t uray = nurec_rl_user_ray(p->column_order, (int)W, ray);
        real_t* out = (real_t*)p->out_features + D * uray;
        for (int64_t k = 0; k < D; ++k) out[k] = acc[k];
        ((real_t*)p->range)[uray] = rng;
        ((real_t*)p->alpha)[uray] = 1 - T;
        ((real_t*)p->final_T)[ray] = T;
    }
    free(acc);
    return NUREC_OK;
}

/* Each ray's median item (tiles/splat_cell_cpu_generic.h) over the
 * forward's lists, written in the user's column order. */
static int NR(rl_median_cpu)(const nurec_rasterize_lidar_params* p) {
    const int64_t W = p->cols, H = p->rows, P = p->num_sweeps * p->num_gaussians;
    const real_t* row_el = (const real_t*)p->row_elevations;
    const real_t* col_az = (const real_t*)p->column_azimuths;
    const real_t* row_off = (const real_t*)p->row_azimuth_offsets;
    for (int64_t ray = 0; ray < p->num_sweeps * H * W; ++ray) {
        const int64_t* range = rl_tile_range_of(p, ray);
        const int i = (int)((ray / W) % H), j = (int)(ray % W);
        p->median_items[nurec_rl_user_ray(p->column_order, (int)W, ray)] =
            p->status[1] != 0 ? NUREC_SPLAT_MEDIAN_OVERFLOW
            : !(((const real_t*)p->final_T)[ray] <= (real_t)0.5)
                ? NUREC_SPLAT_MEDIAN_NONE /* the forward's alpha < 0.5 */
                : NR(splat_cell_median)(p->isect_items, range[0], range[1], p->capacity, P,
                                                      (const real_t*)p->records, col_az[j] + row_off[i], row_el[i]);
    }
    return NUREC_OK;
}

static int NR(rl_backward_cpu)(const nurec_rasterize_lidar_params* p) {
    const int64_t C = p->num_sweeps, N = p->num_gaussians, D = p->channels;
    const int64_t W = p->cols, H = p->rows;
    const real_t* records = (const real_t*)p->records;
    const real_t* row_el = (const real_t*)p->row_elevations;
    const real_t* col_az = (const real_t*)p->column_azimuths;
    const real_t* row_off = (const real_t*)p->row_azimuth_offsets;
    const real_t* gF = (const real_t*)p->grad_out_features;
    const real_t* gR = (const real_t*)p->grad_range;
    const real_t* gA = (const real_t*)p->grad_alpha;
    real_t* grec = (real_t*)p->grad_records;
    const NR(splat_rows) feats = {(real_t*)p->features, D, N};
    const NR(splat_rows) gfeats = {(real_t*)p->grad_features, D, N};
    memset(grec, 0, sizeof(real_t) * NUREC_SPLAT_GREC_ROW(p->absgrad) * (size_t)(C * N));
    memset(gfeats.base, 0, sizeof(real_t) * (size_t)(D * N));
    for (int64_t ray = 0; ray < C * H * W; ++ray) {
        const int64_t* range = rl_tile_range_of(p, ray);
        const int i = (int)((ray / W) % H), j = (int)(ray % W);
        const int64_t uray = nurec_rl_user_ray(p->column_order, (int)W, ray);
        NR(splat_cell_backward)(p->isect_items, range[0], p->last[ray], records, &feats, D,
                                col_az[j] + row_off[i], row_el[i], ((const real_t*)p->final_T)[ray],
                                (const real_t*)0 /* no background behind a ray */,
                                gF + D * uray, gR ? gR[uray] : 0, gA ? gA[uray] : 0, grec, &gfeats, p->absgrad);
    }

    /* per Gaussian: the projection VJP summed over sweeps */
    for (int64_t g = 0; g < N; ++g) NR(rl_project_vjp_gaussian)(p, g, 0, (real_t*)0, 1, 0);
    return NUREC_OK;
}
