/* Generic over real_t (see math/generic.h): rasterize_rays on the CPU. */

static int NR(nurec_rays_project_cpu)(const nurec_rasterize_rays_params* p, int64_t* total) {
    const int64_t N = p->num_gaussians, C = p->num_sensors;
    const real_t* m = (const real_t*)p->means;
    const real_t* q = (const real_t*)p->quats;
    const real_t* s = (const real_t*)p->scales;
    const real_t* o = (const real_t*)p->opacities;
    for (int64_t g = 0; g < N; ++g)
        NR(rays_gauss)(m + 3 * g, q + 4 * g, s + 3 * g, o[g], (real_t*)p->gauss + NUREC_RAYS_G_SIZE * g);
    int64_t acc = 0;
    for (int64_t c = 0; c < C; ++c)
        for (int64_t g = 0; g < N; ++g) {
            acc += NR(rays_item)(p, c, g);
            p->offsets[c * N + g] = acc;
        }
    *total = acc;
    return NUREC_OK;
}

static int NR(nurec_rays_forward_cpu)(const nurec_rasterize_rays_params* p) {
    const int64_t N = p->num_gaussians, C = p->num_sensors, M = p->num_rays, D = p->channels;
    const int64_t cells = (int64_t)p->tiles_x * p->tiles_y;
    const real_t* feat = (const real_t*)p->features;
    const real_t near = (real_t)p->near_plane, far = (real_t)p->far_plane;
    const int overflowed = p->status[1] != 0;
    real_t* out = (real_t*)p->out_features;
    real_t* rng = (real_t*)p->range;
    real_t* alp = (real_t*)p->alpha;
    real_t* fT = (real_t*)p->final_T;
    for (int64_t c = 0; c < C; ++c)
        for (int64_t t = 0; t <= cells; ++t) { /* t == cells: the rays in no cell */
            int64_t ra, rb;
            nurec_rays_span(p->cell_rays, cells, c, t, M, &ra, &rb);
            const int64_t* tr = p->tile_ranges + 2 * (c * cells + (t < cells ? t : 0));
            const int64_t ga = t < cells ? tr[0] : 0, gb = t < cells ? tr[1] : 0;
            for (int64_t k = ra; k < rb; ++k) {
                const int64_t ray = nurec_rays_ray_of(p->ray_order, M, c, k);
                real_t* f = out + D * ray;
                if (t == cells || overflowed) { /* no valid direction / origin, or no list: NaN, never a guess */
                    const real_t nan = (real_t)NAN;
                    for (int64_t ch = 0; ch < D; ++ch) f[ch] = nan;
                    rng[ray] = alp[ray] = nan;
                    fT[ray] = 1;
                    p->last[ray] = -1;
                    continue;
                }
                const real_t* o = (const real_t*)p->ray_origins + 3 * ray;
                const real_t* d = (const real_t*)p->ray_directions + 3 * ray;
                for (int64_t ch = 0; ch < D; ++ch) f[ch] = 0;
                real_t T = 1, racc = 0;
                int32_t last = -1;
                for (int64_t j = ga; j < gb; ++j) {
                    const int64_t g = p->isect_items[j] - c * N;
                    const real_t* G = (const real_t*)p->gauss + NUREC_RAYS_G_SIZE * g;
                    real_t a[3], b[3], pp[3], ibb, ts, vis;
                    int cl;
                    const real_t al = NR(rays_alpha)(G, o, d, near, far, a, b, pp, &ibb, &ts, &vis, &cl);
                    if (al == 0) continue;
                    const real_t Tn = T * (1 - al);
                    if (Tn < (real_t)NUREC_SPLAT_T_MIN) break;
                    const real_t w = al * T;
                    for (int64_t ch = 0; ch < D; ++ch) f[ch] += w * feat[D * g + ch];
                    racc += w * ts;
                    T = Tn;
                    last = (int32_t)j;
                }
                rng[ray] = racc;
                alp[ray] = 1 - T;
                fT[ray] = T;
                p->last[ray] = last;
            }
        }
    return NUREC_OK;
}

static int NR(nurec_rays_backward_cpu)(const nurec_rasterize_rays_params* p) {
    const int64_t N = p->num_gaussians, C = p->num_sensors, M = p->num_rays, D = p->channels;
    const int64_t cells = (int64_t)p->tiles_x * p->tiles_y;
    const real_t* feat = (const real_t*)p->features;
    const real_t near = (real_t)p->near_plane, far = (real_t)p->far_plane;
    const real_t* gout = (const real_t*)p->grad_out_features;
    const real_t* grng = (const real_t*)p->grad_range;
    const real_t* galp = (const real_t*)p->grad_alpha;
    real_t* gg = (real_t*)p->grad_gauss;
    real_t* gfeat = (real_t*)p->grad_features;
    memset(gg, 0, sizeof(real_t) * NUREC_RAYS_GG_SIZE * (size_t)N);
    memset(gfeat, 0, sizeof(real_t) * (size_t)(N * D));
    if (p->status[1] == 0) {
        for (int64_t c = 0; c < C; ++c)
            for (int64_t t = 0; t < cells; ++t) {
                int64_t ra, rb;
                nurec_rays_span(p->cell_rays, cells, c, t, M, &ra, &rb);
                const int64_t ga = p->tile_ranges[2 * (c * cells + t)];
                for (int64_t k = ra; k < rb; ++k) {
                    const int64_t ray = nurec_rays_ray_of(p->ray_order, M, c, k);
                    const real_t* o = (const real_t*)p->ray_origins + 3 * ray;
                    const real_t* d = (const real_t*)p->ray_directions + 3 * ray;
                    const real_t* gf = gout + D * ray;
                    const real_t g_r = grng ? grng[ray] : (real_t)0, g_al = galp ? galp[ray] : (real_t)0;
                    const real_t T_final = ((const real_t*)p->final_T)[ray];
                    real_t T = T_final, GS = 0, RS = 0;
                    for (int64_t j = p->last[ray]; j >= ga; --j) {
                        const int64_t g = p->isect_items[j] - c * N;
                        const real_t* G = (const real_t*)p->gauss + NUREC_RAYS_G_SIZE * g;
                        real_t a[3], b[3], pp[3], ibb, ts, vis;
                        int cl;
                        const real_t al = NR(rays_alpha)(G, o, d, near, far, a, b, pp, &ibb, &ts, &vis, &cl);
                        if (al == 0) continue;
                        const real_t r1 = 1 / (1 - al);
                        const real_t Tb = T * r1, w = al * Tb;
                        real_t fg = 0;
                        for (int64_t ch = 0; ch < D; ++ch) {
                            fg += gf[ch] * feat[D * g + ch];
                            gfeat[D * g + ch] += w * gf[ch];
                        }
                        const real_t g_a = Tb * fg - GS * r1 + g_r * (Tb * ts - RS * r1) + g_al * T_final * r1;
                        real_t* acc = gg + NUREC_RAYS_GG_SIZE * g;
                        if (!cl) {
                            acc[12] += g_a * vis;
                            NR(ray_eval_vjp)(o, d, G + NUREC_RAYS_G_MU, G + NUREC_RAYS_G_A, a, b, pp, ibb, ts,
                                             -g_a * al, g_r * w, acc, acc + 3);
                        } else {
                            NR(ray_eval_vjp)(o, d, G + NUREC_RAYS_G_MU, G + NUREC_RAYS_G_A, a, b, pp, ibb, ts, 0,
                                             g_r * w, acc, acc + 3);
                        }
                        GS += w * fg;
                        RS += w * ts;
                        T = Tb;
                    }
                }
            }
    }
    const real_t* m = (const real_t*)p->means;
    const real_t* q = (const real_t*)p->quats;
    const real_t* s = (const real_t*)p->scales;
    for (int64_t g = 0; g < N; ++g) {
        const real_t* G = (const real_t*)p->gauss + NUREC_RAYS_G_SIZE * g;
        (void)m;
        NR(rays_gauss_vjp)(q + 4 * g, s + 3 * g, G, gg + NUREC_RAYS_GG_SIZE * g, (real_t*)p->grad_means + 3 * g,
                           (real_t*)p->grad_quats + 4 * g, (real_t*)p->grad_scales + 3 * g,
                           (real_t*)p->grad_opacities + g);
    }
    return NUREC_OK;
}
