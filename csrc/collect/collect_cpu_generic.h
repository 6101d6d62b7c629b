/* Generic over real_t (see math/generic.h). */

static int NR(collect_forward_cpu)(const nurec_collect_params* p) {
    const real_t* means = (const real_t*)p->means;
    const real_t* quats = (const real_t*)p->quats;
    const real_t* log_scales = (const real_t*)p->log_scales;
    const real_t* logits = (const real_t*)p->opacity_logits;
    const real_t* poses = (const real_t*)p->track_poses;
    for (int64_t i = 0; i < p->num_gaussians; ++i) {
        int64_t id = nurec_load_index(p->track_ids, p->ids_are_int64, i);
        int kind = nurec_collect_kind(id, p->num_tracks, p->track_inside);
        int has_pose = id >= 0 && id < p->num_tracks;
        NR(collect_one)(kind, has_pose, has_pose ? poses + 7 * id : poses, means + 3 * i,
                        quats + 4 * i, log_scales + 3 * i, logits[i],
                        (real_t*)p->means_w + 3 * i, (real_t*)p->quats_w + 4 * i,
                        (real_t*)p->scales + 3 * i, (real_t*)p->opacities + i);
    }
    return NUREC_OK;
}

static int NR(collect_backward_cpu)(const nurec_collect_params* p) {
    const real_t* poses = (const real_t*)p->track_poses;
    real_t* gposes = (real_t*)p->grad_track_poses;
    memset(gposes, 0, sizeof(real_t) * 7 * (size_t)p->num_tracks);
    for (int64_t i = 0; i < p->num_gaussians; ++i) {
        int64_t id = nurec_load_index(p->track_ids, p->ids_are_int64, i);
        int kind = nurec_collect_kind(id, p->num_tracks, p->track_inside);
        real_t* gm = (real_t*)p->grad_means + 3 * i;
        real_t* gq = (real_t*)p->grad_quats + 4 * i;
        real_t* gls = (real_t*)p->grad_log_scales + 3 * i;
        real_t* glogit = (real_t*)p->grad_opacity_logits + i;
        if (kind == NUREC_FORCED) {
            for (int c = 0; c < 3; ++c) gm[c] = gls[c] = 0;
            for (int c = 0; c < 4; ++c) gq[c] = 0;
            *glogit = 0;
            continue;
        }
        real_t gpose[7] = {0, 0, 0, 0, 0, 0, 0};
        int on_track = kind == NUREC_ON_TRACK;
        NR(collect_one_vjp)(on_track, on_track ? poses + 7 * id : poses,
                            (const real_t*)p->means + 3 * i, (const real_t*)p->quats + 4 * i,
                            (const real_t*)p->log_scales + 3 * i,
                            ((const real_t*)p->opacity_logits)[i],
                            (const real_t*)p->grad_means_w + 3 * i,
                            (const real_t*)p->grad_quats_w + 4 * i,
                            (const real_t*)p->grad_scales + 3 * i,
                            ((const real_t*)p->grad_opacities)[i], gm, gq, gls, glogit, gpose);
        if (kind == NUREC_ON_TRACK)
            for (int c = 0; c < 7; ++c) gposes[7 * id + c] += gpose[c];
    }
    return NUREC_OK;
}
