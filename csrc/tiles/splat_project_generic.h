/* Generic over real_t (see math/generic.h). The projection of both
 * rasterizers, written once: per (sensor, Gaussian) item its tile record and
 * cell count, and per Gaussian the projection VJP summed over the sensors.
 * The C CPU loops and the CUDA kernels of both families call these two
 * functions; what differs per sensor is the family's hooks below (its sensor
 * model's projection lives in sensors/ and its family math header). With
 * meta asked for (p->meta_radii), the projection also writes SPEC 8's meta
 * of each item, as nurec_ops::splat_meta would from its record and count
 * (splat_meta/splat_meta_math_generic.h's item), without that op's second
 * pass over the records.
 *
 * A family's math generic file defines, then includes this file (which
 * undefines them):
 *   SPLAT_FN(name)      the family's name for a function here (rc_name, rl_name)
 *   SPLAT_PARAMS        its params struct (opens with NUREC_SPLAT_PARAMS_FIELDS)
 *   SPLAT_SENSOR        its sensor struct; SPLAT_PROJ its projection's intermediates
 *   SPLAT_NUM_SENSORS(p)
 *   SPLAT_SENSOR_OF(p, c, S, plain)       sensor c into *S (plain: the family's
 *                                         plain model, a CUDA build's constant)
 *   SPLAT_AT_TIME(p, c, it, m, solve, S)  SPEC 7: S at item it's own time
 *   SPLAT_PROJECT(p, S, m, q, s, o, P, rec)           -> visible (the record)
 *   SPLAT_PROJECT_VJP(S, m, q, s, P, gr, gm, gq, gs)  gm added to, gq gs written;
 *                                         gr[5] left as, or made, the Gaussian
 *                                         opacity's gradient (the camera's
 *                                         antialiased records carry o rho)
 *   SPLAT_CELLS(p, it, rec, vis)          -> the item's count of tile entries
 *                                         (the lidar writes its tile box here)
 *   SPLAT_ITEM_DONE(p, S, g, it, m, cnt)  the family's extra per item (the
 *                                         camera's SH colour), or nothing
 *   SPLAT_ITEM_VJP(p, S, g, it, m, extra, stride, gm)  its VJP (extra: the
 *                                         camera's SH gradients), or nothing */

/* Item it = c N + g, in two halves around its cells (a CUDA projection
 * may count those with its warp: tiles/footprint_warp_cuda.cuh).
 * project_record: the Gaussian's record through sensor c (S moved here to
 * the item's own time, m its mean there) into rec; returns whether it is
 * visible. project_write: the record, its count cnt, SPEC 8's meta and the
 * family's extra, written. project_item: both, with SPLAT_CELLS between. */
NUREC_HD int SPLAT_FN(project_record)(const SPLAT_PARAMS* p, int64_t c, int64_t g, SPLAT_SENSOR* S, real_t m[3],
                                      real_t rec[NUREC_TREC_SIZE]) {
    const int64_t it = c * p->num_gaussians + g;
    const real_t* mp = (const real_t*)p->means + 3 * g;
    const real_t* qp = (const real_t*)p->quats + 4 * g;
    const real_t* sp = (const real_t*)p->scales + 3 * g;
    real_t q[4] = {qp[0], qp[1], qp[2], qp[3]}, s[3] = {sp[0], sp[1], sp[2]};
    m[0] = mp[0]; m[1] = mp[1]; m[2] = mp[2];
    SPLAT_AT_TIME(p, c, it, m, 1, S);
    SPLAT_PROJ P;
    return SPLAT_PROJECT(p, S, m, q, s, ((const real_t*)p->opacities)[g], &P, rec);
}

NUREC_HD void SPLAT_FN(project_write)(const SPLAT_PARAMS* p, const SPLAT_SENSOR* S, int64_t g, int64_t it,
                                      const real_t m[3], const real_t rec[NUREC_TREC_SIZE], int64_t cnt) {
    real_t* out = (real_t*)p->records + NUREC_TREC_SIZE * it;
    for (int k = 0; k < NUREC_TREC_SIZE; ++k) out[k] = rec[k];
    p->counts[it] = cnt;
    if (p->meta_radii) { /* SPEC 8's meta from the record in hand (splat_meta's own item) */
        const real_t* cell = (const real_t*)p->meta_cell;
        NR(splat_meta_item)(rec, cnt, cell ? cell[0] : (real_t)p->meta_cell_u, cell ? cell[1] : (real_t)p->meta_cell_v,
                            (real_t*)p->meta_means2d + 2 * it, p->meta_radii + 2 * it, (real_t*)p->meta_depths + it);
    }
    SPLAT_ITEM_DONE(p, S, g, it, m, cnt);
}

NUREC_HD void SPLAT_FN(project_item)(const SPLAT_PARAMS* p, int64_t c, int64_t g, SPLAT_SENSOR* S) {
    const int64_t it = c * p->num_gaussians + g;
    real_t m[3], rec[NUREC_TREC_SIZE];
    const int vis = SPLAT_FN(project_record)(p, c, g, S, m, rec);
    SPLAT_FN(project_write)(p, S, g, it, m, rec, SPLAT_CELLS(p, it, rec, vis));
}

/* Gaussian g: the projection VJP of its items summed over the sensors (no
 * atomics), from the backward's per-item gradient records; its mean,
 * quaternion, scale and opacity gradients written. The family's extra
 * gradients (extra_len of them, entry k at extra[k * stride]: the camera's
 * SH coefficients, in global memory or a shared-memory column) start at 0
 * here. After an overflowed forward (NaN outputs) all are 0. plain:
 * every sensor taken as the family's plain model (SPLAT_SENSOR_OF). */
NUREC_HD void SPLAT_FN(project_vjp_gaussian)(const SPLAT_PARAMS* p, int64_t g, int plain, real_t* extra,
                                             int64_t stride, int64_t extra_len) {
    const int64_t N = p->num_gaussians, C = SPLAT_NUM_SENSORS(p);
    const int overflow = p->status[1] != 0;
    const real_t* mp = (const real_t*)p->means + 3 * g;
    const real_t* qp = (const real_t*)p->quats + 4 * g;
    const real_t* sp = (const real_t*)p->scales + 3 * g;
    real_t m[3] = {mp[0], mp[1], mp[2]}, q[4] = {qp[0], qp[1], qp[2], qp[3]};
    real_t s[3] = {sp[0], sp[1], sp[2]};
    const real_t o = ((const real_t*)p->opacities)[g];
    real_t gm[3] = {0, 0, 0}, gq[4] = {0, 0, 0, 0}, gs[3] = {0, 0, 0}, go = 0;
    for (int64_t k = 0; k < extra_len; ++k) extra[k * stride] = 0;
    real_t* om2d = (real_t*)p->grad_means2d;
    for (int64_t c = 0; c < C; ++c) {
        const int64_t it = c * N + g;
        const int taken = !overflow && p->counts[it] > 0;
        const real_t* gp = (const real_t*)p->grad_records + NUREC_SPLAT_GREC_ROW(p->absgrad) * it;
        if (om2d) { /* SPEC 8's means2d gradient, contiguous (a dropped item's is 0, as its record row's) */
            om2d[2 * it] = taken ? gp[0] : (real_t)0;
            om2d[2 * it + 1] = taken ? gp[1] : (real_t)0;
        }
        if (!taken) continue;
        SPLAT_SENSOR S;
        SPLAT_SENSOR_OF(p, c, &S, plain);
        SPLAT_AT_TIME(p, c, it, m, 0, &S);
        SPLAT_PROJ P;
        real_t rec[NUREC_TREC_SIZE], q1[4], s1[3], gr[NUREC_SPLAT_GREC_SIZE];
        for (int k = 0; k < NUREC_SPLAT_GREC_SIZE; ++k) gr[k] = gp[k];
        SPLAT_PROJECT(p, &S, m, q, s, o, &P, rec);
        SPLAT_PROJECT_VJP(&S, m, q, s, &P, gr, gm, q1, s1);
        for (int k = 0; k < 4; ++k) gq[k] += q1[k];
        for (int k = 0; k < 3; ++k) gs[k] += s1[k];
        go += gr[5];
        SPLAT_ITEM_VJP(p, &S, g, it, m, extra, stride, gm);
    }
    real_t* om = (real_t*)p->grad_means + 3 * g;
    real_t* oq = (real_t*)p->grad_quats + 4 * g;
    real_t* os = (real_t*)p->grad_scales + 3 * g;
    for (int k = 0; k < 3; ++k) { om[k] = gm[k]; os[k] = gs[k]; }
    for (int k = 0; k < 4; ++k) oq[k] = gq[k];
    ((real_t*)p->grad_opacities)[g] = go;
}

#undef SPLAT_FN
#undef SPLAT_PARAMS
#undef SPLAT_SENSOR
#undef SPLAT_PROJ
#undef SPLAT_NUM_SENSORS
#undef SPLAT_SENSOR_OF
#undef SPLAT_AT_TIME
#undef SPLAT_PROJECT
#undef SPLAT_PROJECT_VJP
#undef SPLAT_CELLS
#undef SPLAT_ITEM_DONE
#undef SPLAT_ITEM_VJP
