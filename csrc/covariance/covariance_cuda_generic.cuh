/* Generic over real_t (see math/generic.h). */

__global__ void __launch_bounds__(256) NR(covariance_forward_kernel)(nurec_covariance_params p) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.num_items) return;
    const int64_t w = p.triu ? NUREC_COV_TRIU : NUREC_COV_FULL;
    real_t q[4], s[3];
    NUREC_UNROLL
    for (int k = 0; k < 4; ++k) q[k] = ((const real_t*)p.quats)[4 * i + k];
    NUREC_UNROLL
    for (int k = 0; k < 3; ++k) s[k] = ((const real_t*)p.scales)[3 * i + k];
    NR(covariance_item)(q, s, p.triu, p.compute_covar ? (real_t*)p.covars + w * i : NULL,
                        p.compute_preci ? (real_t*)p.precis + w * i : NULL);
}

__global__ void __launch_bounds__(256) NR(covariance_backward_kernel)(nurec_covariance_params p) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.num_items) return;
    const int64_t w = p.triu ? NUREC_COV_TRIU : NUREC_COV_FULL;
    real_t q[4], s[3], gq[4], gs[3];
    NUREC_UNROLL
    for (int k = 0; k < 4; ++k) q[k] = ((const real_t*)p.quats)[4 * i + k];
    NUREC_UNROLL
    for (int k = 0; k < 3; ++k) s[k] = ((const real_t*)p.scales)[3 * i + k];
    NR(covariance_item_vjp)(q, s, p.compute_covar ? (const real_t*)p.grad_covars + w * i : NULL,
                            p.compute_preci ? (const real_t*)p.grad_precis + w * i : NULL, p.triu, gq, gs);
    NUREC_UNROLL
    for (int k = 0; k < 4; ++k) ((real_t*)p.grad_quats)[4 * i + k] = gq[k];
    NUREC_UNROLL
    for (int k = 0; k < 3; ++k) ((real_t*)p.grad_scales)[3 * i + k] = gs[k];
}
