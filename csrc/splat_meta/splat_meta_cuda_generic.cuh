/* Generic over real_t (see math/generic.h). */

__global__ void __launch_bounds__(256) NR(splat_meta_kernel)(nurec_splat_meta_params p) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.num_items) return;
    const real_t* cell = (const real_t*)p.cell;
    const real_t cu = cell ? cell[0] : (real_t)p.cell_u, cv = cell ? cell[1] : (real_t)p.cell_v;
    NR(splat_meta_item)((const real_t*)p.records + NUREC_TREC_SIZE * i, p.counts[i], cu, cv,
                        (real_t*)p.means2d + 2 * i, p.radii + 2 * i, (real_t*)p.depths + i);
}
