/* Generic over real_t (see math/generic.h): rasterize_rays' CUDA kernels. */

/* Per Gaussian: its record (rasterize_rays_math_generic.h). */
__global__ void NR(rays_gauss_kernel)(nurec_rasterize_rays_params p) {
    const int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= p.num_gaussians) return;
    const real_t* m = (const real_t*)p.means;
    const real_t* q = (const real_t*)p.quats;
    const real_t* s = (const real_t*)p.scales;
    NR(rays_gauss)(m + 3 * g, q + 4 * g, s + 3 * g, ((const real_t*)p.opacities)[g],
                   (real_t*)p.gauss + NUREC_RAYS_G_SIZE * g);
}

/* Per item (sensor, Gaussian): depth, box and count. */
__global__ void NR(rays_item_kernel)(nurec_rasterize_rays_params p) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.num_sensors * p.num_gaussians) return;
    (void)NR(rays_item)(&p, i / p.num_gaussians, i % p.num_gaussians);
}

/* A tile's Gaussians staged in shared memory, a batch of the block's size. */
#define RAYS_STAGE (NUREC_RAYS_G_RADIUS) /* mean, A, opacity */

/* Forward: block (tile, sensor, channel pass x split q); its rays in chunks
 * of the block (chunks q, q + SPLIT, ... of the tile), each chunk walking
 * the tile's list front to back in batches staged in shared memory; the
 * block leaves a batch loop once all its rays are done (T cut-off). Pass 0
 * writes range, alpha, final_T and last. */
__global__ void __launch_bounds__(RAYS_THREADS) NR(rays_forward_kernel)(nurec_rasterize_rays_params p) {
    __shared__ real_t sG[RAYS_THREADS * RAYS_STAGE];
    __shared__ real_t sF[RAYS_THREADS * NUREC_RAYS_CHANNELS_PER_PASS];
    const int64_t cells = (int64_t)p.tiles_x * p.tiles_y;
    const int64_t t = blockIdx.x, c = blockIdx.y, N = p.num_gaussians, M = p.num_rays, D = p.channels;
    const int pass = (int)blockIdx.z / NUREC_RAYS_CHUNK_SPLIT, q = (int)blockIdx.z % NUREC_RAYS_CHUNK_SPLIT;
    const int ch0 = pass * NUREC_RAYS_CHANNELS_PER_PASS;
    const int nch = (int)(D - ch0 < NUREC_RAYS_CHANNELS_PER_PASS ? D - ch0 : NUREC_RAYS_CHANNELS_PER_PASS);
    const int tid = threadIdx.x;
    int64_t ra, rb;
    nurec_rays_span(p.cell_rays, cells, c, t, M, &ra, &rb);
    const bool tail = t == cells; /* the rays in no cell */
    const int64_t ga = tail ? 0 : p.tile_ranges[2 * (c * cells + t)];
    const int64_t gb = tail ? 0 : p.tile_ranges[2 * (c * cells + t) + 1];
    const bool overflowed = p.status[1] != 0;
    const real_t near = (real_t)p.near_plane, far = (real_t)p.far_plane;
    const real_t* feat = (const real_t*)p.features;
    for (int64_t k0 = ra + (int64_t)q * RAYS_THREADS; k0 < rb; k0 += (int64_t)NUREC_RAYS_CHUNK_SPLIT * RAYS_THREADS) {
        const int64_t k = k0 + tid;
        const bool has = k < rb;
        const int64_t ray = has ? nurec_rays_ray_of(p.ray_order, M, c, k) : 0;
        real_t o[3] = {0, 0, 0}, d[3] = {0, 0, 1};
        if (has && !tail)
            for (int e = 0; e < 3; ++e) {
                o[e] = ((const real_t*)p.ray_origins)[3 * ray + e];
                d[e] = ((const real_t*)p.ray_directions)[3 * ray + e];
            }
        real_t T = 1, racc = 0, acc[NUREC_RAYS_CHANNELS_PER_PASS];
        for (int e = 0; e < NUREC_RAYS_CHANNELS_PER_PASS; ++e) acc[e] = 0;
        int32_t last = -1;
        bool done = !has || tail || overflowed;
        for (int64_t b0 = ga; b0 < gb; b0 += RAYS_THREADS) {
            if (__syncthreads_count(done) == RAYS_THREADS) break; /* also: the last batch is no longer read */
            const int64_t j = b0 + tid;
            if (j < gb) {
                const int64_t g = p.isect_items[j] - c * N;
                const real_t* G = (const real_t*)p.gauss + NUREC_RAYS_G_SIZE * g;
                for (int e = 0; e < RAYS_STAGE; ++e) sG[RAYS_STAGE * tid + e] = G[e];
                for (int e = 0; e < nch; ++e) sF[NUREC_RAYS_CHANNELS_PER_PASS * tid + e] = feat[D * g + ch0 + e];
            }
            __syncthreads();
            const int n = (int)(gb - b0 < RAYS_THREADS ? gb - b0 : RAYS_THREADS);
            for (int jj = 0; jj < n && !done; ++jj) {
                real_t a[3], b[3], pp[3], ibb, ts, vis;
                int cl;
                const real_t al = NR(rays_alpha)(sG + RAYS_STAGE * jj, o, d, near, far, a, b, pp, &ibb, &ts, &vis, &cl);
                if (al == 0) continue;
                const real_t Tn = T * (1 - al);
                if (Tn < (real_t)NUREC_SPLAT_T_MIN) {
                    done = true;
                    break;
                }
                const real_t w = al * T;
                NUREC_UNROLL
                for (int e = 0; e < NUREC_RAYS_CHANNELS_PER_PASS; ++e)
                    if (e < nch) acc[e] += w * sF[NUREC_RAYS_CHANNELS_PER_PASS * jj + e];
                racc += w * ts;
                T = Tn;
                last = (int32_t)(b0 + jj);
            }
        }
        __syncthreads(); /* the next chunk restages the batches */
        if (!has) continue;
        real_t* f = (real_t*)p.out_features + D * ray + ch0;
        if (tail || overflowed) { /* no valid ray, or no list: NaN, never a guess */
            const real_t nan = (real_t)NAN;
            for (int e = 0; e < nch; ++e) f[e] = nan;
            if (pass == 0) {
                ((real_t*)p.range)[ray] = ((real_t*)p.alpha)[ray] = nan;
                ((real_t*)p.final_T)[ray] = 1;
                p.last[ray] = -1;
            }
            continue;
        }
        for (int e = 0; e < nch; ++e) f[e] = acc[e];
        if (pass == 0) {
            ((real_t*)p.range)[ray] = racc;
            ((real_t*)p.alpha)[ray] = 1 - T;
            ((real_t*)p.final_T)[ray] = T;
            p.last[ray] = last;
        }
    }
}

/* The sum of v over the warp, in lane 0. */
static __device__ __forceinline__ real_t NR(rays_warp_sum)(real_t v) {
    for (int off = 16; off >= 1; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

/* Backward: block (tile, sensor, split q); its rays in chunks (q, q +
 * SPLIT, ... of the tile), each chunk walking the
 * list back to front from the chunk's largest last entry, in batches staged
 * in shared memory. A pair's gradients of (mean, A, opacity, features) are
 * summed over the warp (its lanes meet the same Gaussian at the same step)
 * and added once per warp. */
__global__ void __launch_bounds__(RAYS_THREADS) NR(rays_backward_kernel)(nurec_rasterize_rays_params p) {
    __shared__ real_t sG[RAYS_THREADS * RAYS_STAGE];
    __shared__ int32_t sg[RAYS_THREADS];
    __shared__ int32_t s_last;
    if (p.status[1] != 0) return; /* an overflowed forward: no list, zero gradients */
    const int64_t cells = (int64_t)p.tiles_x * p.tiles_y;
    const int64_t t = blockIdx.x, c = blockIdx.y, N = p.num_gaussians, M = p.num_rays, D = p.channels;
    const int tid = threadIdx.x, lane = tid & 31;
    int64_t ra, rb;
    nurec_rays_span(p.cell_rays, cells, c, t, M, &ra, &rb);
    const int64_t ga = p.tile_ranges[2 * (c * cells + t)];
    const real_t near = (real_t)p.near_plane, far = (real_t)p.far_plane;
    const real_t* feat = (const real_t*)p.features;
    const real_t* gout = (const real_t*)p.grad_out_features;
    real_t* gg = (real_t*)p.grad_gauss;
    real_t* gfeat = (real_t*)p.grad_features;
    const int64_t q = blockIdx.z;
    for (int64_t k0 = ra + q * RAYS_THREADS; k0 < rb; k0 += (int64_t)NUREC_RAYS_CHUNK_SPLIT * RAYS_THREADS) {
        const int64_t k = k0 + tid;
        const bool has = k < rb;
        const int64_t ray = has ? nurec_rays_ray_of(p.ray_order, M, c, k) : 0;
        real_t o[3] = {0, 0, 0}, d[3] = {0, 0, 1};
        int32_t last = -1;
        real_t T_final = 1, g_r = 0, g_al = 0;
        if (has) {
            for (int e = 0; e < 3; ++e) {
                o[e] = ((const real_t*)p.ray_origins)[3 * ray + e];
                d[e] = ((const real_t*)p.ray_directions)[3 * ray + e];
            }
            last = p.last[ray];
            T_final = ((const real_t*)p.final_T)[ray];
            g_r = p.grad_range ? ((const real_t*)p.grad_range)[ray] : (real_t)0;
            g_al = p.grad_alpha ? ((const real_t*)p.grad_alpha)[ray] : (real_t)0;
        }
        if (tid == 0) s_last = -1;
        __syncthreads();
        if (has && last >= 0) atomicMax(&s_last, last);
        __syncthreads();
        const int64_t top = s_last;
        int32_t warp_last = last; /* the warp's furthest entry: later ones reach none of its rays */
        for (int off = 16; off >= 1; off >>= 1) warp_last = max(warp_last, __shfl_xor_sync(0xffffffffu, warp_last, off));
        real_t T = T_final, GS = 0, RS = 0;
        for (int64_t b1 = top + 1; b1 > ga; b1 -= RAYS_THREADS) { /* batch [b0, b1) */
            const int64_t b0 = b1 - RAYS_THREADS > ga ? b1 - RAYS_THREADS : ga;
            const int64_t j = b0 + tid;
            __syncthreads(); /* the last batch is no longer read */
            if (j < b1) {
                const int64_t g = p.isect_items[j] - c * N;
                const real_t* G = (const real_t*)p.gauss + NUREC_RAYS_G_SIZE * g;
                for (int e = 0; e < RAYS_STAGE; ++e) sG[RAYS_STAGE * tid + e] = G[e];
                sg[tid] = (int32_t)g;
            }
            __syncthreads();
            const int j_top = (int)(warp_last - b0 < b1 - 1 - b0 ? warp_last - b0 : b1 - 1 - b0);
            for (int jj = j_top; jj >= 0; --jj) { /* warp-uniform */
                const int64_t jg = b0 + jj;
                const real_t* G = sG + RAYS_STAGE * jj;
                const int64_t g = sg[jj];
                real_t a[3], b[3], pp[3], ibb = 0, ts = 0, vis = 0, al = 0;
                int cl = 0;
                if (has && jg <= last) al = NR(rays_alpha)(G, o, d, near, far, a, b, pp, &ibb, &ts, &vis, &cl);
                const bool on = al != 0;
                const unsigned onm = __ballot_sync(0xffffffffu, on);
                if (onm == 0) continue; /* warp-uniform: jj is */
                real_t gm[3] = {0, 0, 0}, gA[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0}, go = 0, w = 0;
                if (on) {
                    const real_t r1 = 1 / (1 - al);
                    const real_t Tb = T * r1;
                    w = al * Tb;
                    real_t fg = 0;
                    for (int64_t ch = 0; ch < D; ++ch) fg += gout[D * ray + ch] * feat[D * g + ch];
                    const real_t g_a = Tb * fg - GS * r1 + g_r * (Tb * ts - RS * r1) + g_al * T_final * r1;
                    go = cl ? (real_t)0 : g_a * vis;
                    NR(ray_eval_vjp)(o, d, G + NUREC_RAYS_G_MU, G + NUREC_RAYS_G_A, a, b, pp, ibb, ts,
                                     cl ? (real_t)0 : -g_a * al, g_r * w, gm, gA);
                    GS += w * fg;
                    RS += w * ts;
                    T = Tb;
                }
                real_t* acc = gg + NUREC_RAYS_GG_SIZE * g;
                if (__popc(onm) <= RAYS_BWD_DIRECT_LANES) { /* few lanes: each adds its own, no shuffles */
                    if (on) {
                        for (int e = 0; e < 3; ++e) atomicAdd(acc + e, gm[e]);
                        for (int e = 0; e < 9; ++e) atomicAdd(acc + 3 + e, gA[e]);
                        atomicAdd(acc + 12, go);
                        for (int64_t ch = 0; ch < D; ++ch) atomicAdd(gfeat + D * g + ch, w * gout[D * ray + ch]);
                    }
                    continue;
                }
                for (int e = 0; e < 3; ++e) {
                    const real_t v = NR(rays_warp_sum)(gm[e]);
                    if (lane == 0) atomicAdd(acc + e, v);
                }
                for (int e = 0; e < 9; ++e) {
                    const real_t v = NR(rays_warp_sum)(gA[e]);
                    if (lane == 0) atomicAdd(acc + 3 + e, v);
                }
                {
                    const real_t v = NR(rays_warp_sum)(go);
                    if (lane == 0) atomicAdd(acc + 12, v);
                }
                for (int64_t ch = 0; ch < D; ++ch) {
                    const real_t v = NR(rays_warp_sum)(on ? w * gout[D * ray + ch] : (real_t)0);
                    if (lane == 0) atomicAdd(gfeat + D * g + ch, v);
                }
            }
        }
        __syncthreads(); /* s_last and the batches are reset by the next chunk */
    }
}

/* Per Gaussian: the chain from (mean, A, opacity) to the inputs. */
__global__ void NR(rays_gauss_vjp_kernel)(nurec_rasterize_rays_params p) {
    const int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= p.num_gaussians) return;
    NR(rays_gauss_vjp)((const real_t*)p.quats + 4 * g, (const real_t*)p.scales + 3 * g,
                       (const real_t*)p.gauss + NUREC_RAYS_G_SIZE * g,
                       (const real_t*)p.grad_gauss + NUREC_RAYS_GG_SIZE * g, (real_t*)p.grad_means + 3 * g,
                       (real_t*)p.grad_quats + 4 * g, (real_t*)p.grad_scales + 3 * g,
                       (real_t*)p.grad_opacities + g);
}
