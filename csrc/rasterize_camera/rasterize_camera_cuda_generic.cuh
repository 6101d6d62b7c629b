/* Generic over real_t (see math/generic.h). */

#include "tiles/splat_warp_cuda_generic.cuh"

__global__ void __launch_bounds__(RC_PROJ_THREADS)
NR(rc_project_kernel)(nurec_rasterize_camera_params p) {
    const int64_t N = p.num_gaussians;
    int64_t it = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (it >= p.num_cameras * N) return;
    int64_t c = it / N, g = it - c * N;
    NR(rc_camera) cam;
    NR(rc_camera_load)((const real_t*)p.viewmats + 16 * c, (const real_t*)p.Ks + 9 * c, p.width, p.height, &cam);
    const real_t* mp = (const real_t*)p.means + 3 * g;
    const real_t* qp = (const real_t*)p.quats + 4 * g;
    const real_t* sp = (const real_t*)p.scales + 3 * g;
    real_t m[3] = {mp[0], mp[1], mp[2]}, q[4] = {qp[0], qp[1], qp[2], qp[3]};
    real_t s[3] = {sp[0], sp[1], sp[2]};
    real_t rec[NUREC_TREC_SIZE];
    NR(rc_proj) P;
    int vis = NR(rc_project)(&cam, m, q, s, ((const real_t*)p.opacities)[g],
                             (real_t)p.near_plane, (real_t)p.far_plane, &P, rec);
    int64_t cnt = 0;
    nurec_footprint f;
    if (vis && NR(nurec_footprint_of)(&f, rec, p.width, p.height))
        cnt = nurec_footprint_count(&f, p.width);
    real_t* out = (real_t*)p.records + NUREC_TREC_SIZE * it;
    for (int k = 0; k < NUREC_TREC_SIZE; ++k) out[k] = rec[k];
    p.counts[it] = cnt;
    if (p.sh_degree >= 0) {
        real_t col[3] = {0, 0, 0};
        if (cnt > 0)
            NR(rc_sh_color)(p.sh_degree, (const real_t*)p.features + 3 * p.sh_coeffs * g, m,
                            cam.campos, col);
        real_t* oc = (real_t*)p.colors + 3 * it;
        oc[0] = col[0]; oc[1] = col[1]; oc[2] = col[2];
    }
}

/* Forward: one block per (tile, camera, pass of up to RC_CH channels), one
 * thread per pixel, Gaussians staged through shared memory in batches. */
__global__ void __launch_bounds__(RC_BLOCK)
NR(rc_forward_kernel)(nurec_rasterize_camera_params p, int passes) {
    __shared__ real_t s_rec[RC_BLOCK * 7];
    __shared__ real_t s_f[RC_BLOCK * RC_CH];
    const int tid = threadIdx.x;
    const int64_t cz = blockIdx.z / passes;
    const int pass = blockIdx.z - (int)cz * passes;
    const int64_t D = p.channels;
    const int c0 = pass * RC_CH;
    const int nch = D - c0 < RC_CH ? (int)(D - c0) : RC_CH;
    const int x = blockIdx.x * NUREC_TILE + (tid % NUREC_TILE);
    const int y = blockIdx.y * NUREC_TILE + (tid / NUREC_TILE);
    const bool inside = x < p.width && y < p.height;
    const int64_t tile = (cz * p.tiles_y + blockIdx.y) * p.tiles_x + blockIdx.x;
    const int64_t start = p.tile_ranges[2 * tile], end = p.tile_ranges[2 * tile + 1];
    const bool overflow = p.status[1] != 0;
    const int sh = p.sh_degree >= 0;
    const real_t px = (real_t)x + (real_t)0.5, py = (real_t)y + (real_t)0.5;
    real_t T = 1, dep = 0, acc[RC_CH];
    for (int k = 0; k < RC_CH; ++k) acc[k] = 0;
    int32_t last = 0;
    bool done = !inside || overflow;
    for (int64_t b = start; b < end; b += RC_BLOCK) {
        if (__syncthreads_count(done) == RC_BLOCK) break;
        int64_t j = b + tid;
        if (j < end) {
            int64_t it = p.isect_items[j];
            const real_t* r = (const real_t*)p.records + NUREC_TREC_SIZE * it;
            for (int k = 0; k < 7; ++k) s_rec[7 * tid + k] = r[k];
            const real_t* f = sh ? (const real_t*)p.colors + 3 * it
                                 : (const real_t*)p.features + D * (it % p.num_gaussians);
            for (int k = 0; k < RC_CH; ++k) s_f[RC_CH * tid + k] = k < nch ? f[c0 + k] : (real_t)0;
        }
        __syncthreads();
        int cnt = end - b < RC_BLOCK ? (int)(end - b) : RC_BLOCK;
        for (int k = 0; k < cnt && !done; ++k) {
            const real_t* r = s_rec + 7 * k;
            real_t vis, dx, dy;
            real_t a = NR(rc_alpha)(r, px, py, &vis, &dx, &dy);
            if (a == 0) continue;
            real_t Tn = T * (1 - a);
            if (Tn < (real_t)NUREC_SPLAT_T_MIN) { done = true; break; }
            real_t w = a * T;
            for (int q = 0; q < RC_CH; ++q) acc[q] += w * s_f[RC_CH * k + q];
            dep += w * r[NUREC_TREC_DEPTH];
            last = (int32_t)(b + k - start + 1);
            T = Tn;
        }
    }
    if (!inside) return;
    const int64_t pix = (cz * p.height + y) * (int64_t)p.width + x;
    real_t* out = (real_t*)p.render + D * pix + c0;
    const real_t* bg = (const real_t*)p.backgrounds;
    const real_t nan = (real_t)NAN;
    for (int q = 0; q < RC_CH; ++q)
        if (q < nch) out[q] = overflow ? nan : acc[q] + (bg ? T * bg[cz * D + c0 + q] : (real_t)0);
    if (pass == 0) {
        ((real_t*)p.depth)[pix] = overflow ? nan : dep;
        ((real_t*)p.alpha)[pix] = overflow ? nan : 1 - T;
        ((real_t*)p.final_T)[pix] = overflow ? nan : T;
        p.last[pix] = overflow ? 0 : last;
    }
}

/* Backward: one block per (tile, camera, pass), pixels sweep their lists
 * back to front in shared-memory batches; each Gaussian's gradient is summed
 * over the warp's pixels with shuffles before one lane adds it to global
 * memory (when only a few lanes of the warp contribute, as for small
 * Gaussians, those lanes add directly instead). Its own register budget (RC_BWD_MIN_BLOCKS) and batch size. */
__global__ void __launch_bounds__(RC_BLOCK, sizeof(real_t) == 4 ? RC_BWD_MIN_BLOCKS_F32 : RC_BWD_MIN_BLOCKS_F64)
NR(rc_backward_kernel)(nurec_rasterize_camera_params p, int passes) {
    __shared__ real_t s_rec[RC_BWD_BATCH * 7];
    __shared__ real_t s_f[RC_BWD_BATCH * RC_CH];
    __shared__ int64_t s_it[RC_BWD_BATCH];
    __shared__ int s_max_last;
    if (p.status[1] != 0) return; /* overflowed forward: outputs were NaN */
    const int tid = threadIdx.x, lane = tid & 31;
    const int64_t cz = blockIdx.z / passes;
    const int pass = blockIdx.z - (int)cz * passes;
    const int64_t D = p.channels, N = p.num_gaussians;
    const int c0 = pass * RC_CH;
    const int nch = D - c0 < RC_CH ? (int)(D - c0) : RC_CH;
    const int x = blockIdx.x * NUREC_TILE + (tid % NUREC_TILE);
    const int y = blockIdx.y * NUREC_TILE + (tid / NUREC_TILE);
    const bool inside = x < p.width && y < p.height;
    const int64_t tile = (cz * p.tiles_y + blockIdx.y) * p.tiles_x + blockIdx.x;
    const int64_t start = p.tile_ranges[2 * tile];
    const int sh = p.sh_degree >= 0;
    const real_t px = (real_t)x + (real_t)0.5, py = (real_t)y + (real_t)0.5;
    const int64_t pix = (cz * p.height + y) * (int64_t)p.width + x;
    real_t T = 0, gf[RC_CH], S[RC_CH], gz = 0, gTa = 0, Sz = 0;
    int32_t last = 0;
    for (int q = 0; q < RC_CH; ++q) gf[q] = S[q] = 0;
    if (inside) {
        T = ((const real_t*)p.final_T)[pix];
        last = p.last[pix];
        const real_t* g = (const real_t*)p.grad_render + D * pix + c0;
        const real_t* bg = (const real_t*)p.backgrounds;
        for (int q = 0; q < RC_CH; ++q) {
            if (q >= nch) continue;
            gf[q] = g[q];
            S[q] = bg ? T * bg[cz * D + c0 + q] : (real_t)0;
        }
        if (pass == 0) {
            gz = ((const real_t*)p.grad_depth)[pix];
            gTa = ((const real_t*)p.grad_alpha)[pix] * T;
        }
    }
    if (tid == 0) s_max_last = 0;
    __syncthreads();
    if (last > 0) atomicMax(&s_max_last, last);
    __syncthreads();
    const int64_t stop = start + s_max_last;
    real_t* grec = (real_t*)p.grad_records;
    real_t* gcol = sh ? (real_t*)p.grad_colors : (real_t*)p.grad_features;
    for (int64_t b_end = stop; b_end > start; b_end -= RC_BWD_BATCH) {
        const int cnt = b_end - start < RC_BWD_BATCH ? (int)(b_end - start) : RC_BWD_BATCH;
        __syncthreads();
        if (tid < cnt) {
            int64_t it = p.isect_items[b_end - 1 - tid];
            s_it[tid] = it;
            const real_t* r = (const real_t*)p.records + NUREC_TREC_SIZE * it;
            for (int k = 0; k < 7; ++k) s_rec[7 * tid + k] = r[k];
            const real_t* f = sh ? (const real_t*)p.colors + 3 * it
                                 : (const real_t*)p.features + D * (it % N);
            for (int k = 0; k < RC_CH; ++k) s_f[RC_CH * tid + k] = k < nch ? f[c0 + k] : (real_t)0;
        }
        __syncthreads();
        for (int k = 0; k < cnt; ++k) {
            const int64_t rel = b_end - 1 - k - start;
            const real_t* r = s_rec + 7 * k;
            real_t v[7 + RC_CH];
            for (int q = 0; q < 7 + RC_CH; ++q) v[q] = 0;
            bool contrib = false;
            if (rel < last) {
                real_t vis, dx, dy;
                real_t a = NR(rc_alpha)(r, px, py, &vis, &dx, &dy);
                if (a != 0) {
                    contrib = true;
                    real_t w;
                    real_t ga = NR(splat_composite_vjp)(a, s_f + RC_CH * k, RC_CH, r[NUREC_TREC_DEPTH], gf,
                                                     gz, gTa, &T, S, &Sz, &w);
                    NR(splat_alpha_vjp)(r, vis, dx, dy, ga, v);
                    v[6] = w * gz;
                    for (int q = 0; q < RC_CH; ++q) v[7 + q] = w * gf[q];
                }
            }
            const unsigned mask = __ballot_sync(0xffffffffu, contrib);
            if (mask == 0) continue;
            const int64_t it = s_it[k];
            real_t* g = grec + NUREC_SPLAT_GREC_SIZE * it;
            real_t* gc = gcol + (sh ? 3 * it : D * (it % N)) + c0;
            if (__popc(mask) > RC_BWD_DIRECT_LANES) {
                /* many pixels of the warp: the warp's sums, one atomic per value */
                NR(splat_warp_add)(v, 7 + RC_CH, lane, g, pass == 0 ? 7 : 6, gc, nch);
            } else if (contrib) {
                for (int q = 0; q < (pass == 0 ? 7 : 6); ++q) atomicAdd(g + q, v[q]);
                for (int q = 0; q < RC_CH; ++q)
                    if (q < nch) atomicAdd(gc + q, v[7 + q]);
            }
        }
    }
}

/* Per Gaussian: the projection VJP summed over cameras (no atomics). */
__global__ void __launch_bounds__(RC_PROJ_THREADS)
NR(rc_project_backward_kernel)(nurec_rasterize_camera_params p) {
    const int64_t N = p.num_gaussians, C = p.num_cameras;
    int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= N) return;
    const bool overflow = p.status[1] != 0;
    const int sh = p.sh_degree >= 0;
    const real_t* mp = (const real_t*)p.means + 3 * g;
    const real_t* qp = (const real_t*)p.quats + 4 * g;
    const real_t* sp = (const real_t*)p.scales + 3 * g;
    real_t m[3] = {mp[0], mp[1], mp[2]}, q[4] = {qp[0], qp[1], qp[2], qp[3]};
    real_t s[3] = {sp[0], sp[1], sp[2]};
    real_t o = ((const real_t*)p.opacities)[g];
    real_t gm[3] = {0, 0, 0}, gq[4] = {0, 0, 0, 0}, gs[3] = {0, 0, 0}, go = 0;
    real_t* gsh = sh ? (real_t*)p.grad_features + 3 * p.sh_coeffs * g : (real_t*)0;
    if (sh)
        for (int64_t k = 0; k < 3 * p.sh_coeffs; ++k) gsh[k] = 0;
    for (int64_t c = 0; c < C && !overflow; ++c) {
        int64_t it = c * N + g;
        if (p.counts[it] <= 0) continue;
        NR(rc_camera) cam;
        NR(rc_camera_load)((const real_t*)p.viewmats + 16 * c, (const real_t*)p.Ks + 9 * c, p.width, p.height, &cam);
        NR(rc_proj) P;
        real_t rec[NUREC_TREC_SIZE], q1[4], s1[3], gr[NUREC_SPLAT_GREC_SIZE];
        const real_t* gp = (const real_t*)p.grad_records + NUREC_SPLAT_GREC_SIZE * it;
        for (int k = 0; k < NUREC_SPLAT_GREC_SIZE; ++k) gr[k] = gp[k];
        NR(rc_project)(&cam, m, q, s, o, (real_t)p.near_plane, (real_t)p.far_plane, &P, rec);
        NR(rc_project_vjp)(&cam, m, q, s, &P, gr, gm, q1, s1);
        for (int k = 0; k < 4; ++k) gq[k] += q1[k];
        for (int k = 0; k < 3; ++k) gs[k] += s1[k];
        go += gr[5];
        if (sh)
            NR(rc_sh_color_vjp)(p.sh_degree, (const real_t*)p.features + 3 * p.sh_coeffs * g, m,
                                cam.campos, (const real_t*)p.grad_colors + 3 * it, gsh, gm);
    }
    /* an overflowed forward returned NaN images: its gradients are zero */
    real_t* om = (real_t*)p.grad_means + 3 * g;
    real_t* oq = (real_t*)p.grad_quats + 4 * g;
    real_t* os = (real_t*)p.grad_scales + 3 * g;
    for (int k = 0; k < 3; ++k) { om[k] = gm[k]; os[k] = gs[k]; }
    for (int k = 0; k < 4; ++k) oq[k] = gq[k];
    ((real_t*)p.grad_opacities)[g] = go;
}
