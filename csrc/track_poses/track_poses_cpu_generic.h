/* Generic over real_t (see math/generic.h). */

static int NR(track_poses_forward_cpu)(const nurec_track_poses_params* p) {
    const real_t* key_poses = (const real_t*)p->key_poses;
    real_t* poses = (real_t*)p->poses;
    for (int64_t k = 0; k < p->num_tracks; ++k) {
        int64_t l;
        double a;
        int inside;
        int nk = nurec_track_locate_k(p, k, &l, &a, &inside);
        NR(track_pose_eval)(key_poses, nk, l, (real_t)a, poses + 7 * k);
        p->inside[k] = (uint8_t)inside;
    }
    return NUREC_OK;
}

static int NR(track_poses_backward_cpu)(const nurec_track_poses_params* p) {
    const real_t* key_poses = (const real_t*)p->key_poses;
    const real_t* grad_poses = (const real_t*)p->grad_poses;
    real_t* grad_keys = (real_t*)p->grad_key_poses;
    memset(grad_keys, 0, sizeof(real_t) * 7 * (size_t)p->num_keys);
    for (int64_t k = 0; k < p->num_tracks; ++k) {
        int64_t l;
        double a;
        int inside;
        int nk = nurec_track_locate_k(p, k, &l, &a, &inside);
        real_t gl[7] = {0, 0, 0, 0, 0, 0, 0}, gr[7] = {0, 0, 0, 0, 0, 0, 0};
        NR(track_pose_eval_vjp)(key_poses, nk, l, (real_t)a, grad_poses + 7 * k, gl, gr);
        /* ranges may overlap: accumulate, never overwrite */
        if (nk >= 1) for (int c = 0; c < 7; ++c) grad_keys[7 * l + c] += gl[c];
        if (nk == 2) for (int c = 0; c < 7; ++c) grad_keys[7 * (l + 1) + c] += gr[c];
    }
    return NUREC_OK;
}
