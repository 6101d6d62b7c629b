/* covariance: per Gaussian, the covariance R S S R^T and the precision
 * R S^-1 S^-1 R^T of a quaternion (normalized here) and scales, as 3 x 3
 * matrices or their upper triangles, and the backward, in one pass each
 * (gsplat's quat_scale_to_covar_preci, which MCMCStrategy calls every step:
 * one kernel instead of dozens of small tensor ops). Plain C params struct
 * and launchers; the per-item math is in covariance_math.h, shared by CPU
 * and CUDA. */
#ifndef NUREC_COVARIANCE_H
#define NUREC_COVARIANCE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Values per item of a covariance or precision: 9 (row-major 3 x 3) or,
 * with triu, 6 (00, 01, 02, 11, 12, 22). */
#define NUREC_COV_FULL 9
#define NUREC_COV_TRIU 6

typedef struct nurec_covariance_params {
    int dtype;             /* enum nurec_dtype of the real tensors */
    int64_t num_items;     /* Gaussians (the batch shape flattened) */
    int compute_covar;     /* forward: write covars; backward: grad_covars is given */
    int compute_preci;     /* forward: write precis; backward: grad_precis is given */
    int triu;              /* covariances and precisions as upper triangles */
    const void* quats;     /* [num_items, 4] real (w, x, y, z), any norm */
    const void* scales;    /* [num_items, 3] real */
    /* forward outputs, [num_items, 9 or 6] real (unused when not computed) */
    void* covars;
    void* precis;
    /* backward: the gradients of the outputs (same layout) in, of the
     * inputs ([num_items, 4], [num_items, 3]) out */
    const void* grad_covars;
    const void* grad_precis;
    void* grad_quats;
    void* grad_scales;
} nurec_covariance_params;

int nurec_covariance_forward_cpu(const nurec_covariance_params* p);
int nurec_covariance_backward_cpu(const nurec_covariance_params* p);
int nurec_covariance_forward_cuda(const nurec_covariance_params* p, void* stream);
int nurec_covariance_backward_cuda(const nurec_covariance_params* p, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* NUREC_COVARIANCE_H */
