/* collect_gaussian_parameters (SPEC section 2): moves every actor's Gaussians
 * into the world at its track pose and activates scales and opacities, for
 * one packed set of static and actor Gaussians. Plain C params struct and
 * launchers; the per-Gaussian math is in collect_math.h. */
#ifndef NUREC_COLLECT_H
#define NUREC_COLLECT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nurec_collect_params {
    int dtype;                   /* enum nurec_dtype of every real tensor */
    int64_t num_gaussians;       /* N */
    int64_t num_tracks;          /* T */
    const void* means;           /* [N,3] real, contiguous */
    const void* quats;           /* [N,4] */
    const void* log_scales;      /* [N,3] */
    const void* opacity_logits;  /* [N] */
    const void* track_ids;       /* [N] int32 or int64 */
    int ids_are_int64;
    const void* track_poses;     /* [T,7] */
    const uint8_t* track_inside; /* [T] bool */
    /* forward outputs */
    void* means_w;               /* [N,3] */
    void* quats_w;               /* [N,4] */
    void* scales;                /* [N,3] */
    void* opacities;             /* [N] */
    /* backward: gradients of the four outputs in, of the inputs out */
    const void* grad_means_w;
    const void* grad_quats_w;
    const void* grad_scales;
    const void* grad_opacities;
    void* grad_means;
    void* grad_quats;
    void* grad_log_scales;
    void* grad_opacity_logits;
    void* grad_track_poses;      /* [T,7]; the launcher zero-fills it */
    /* CUDA forward only: the launch right before this one on the stream was
       nurec_track_poses_forward_cuda writing track_poses / track_inside, so
       this kernel may start early and wait for it only where it reads them
       (programmatic dependent launch). */
    int after_track_poses;
} nurec_collect_params;

int nurec_collect_forward_cpu(const nurec_collect_params* p);
int nurec_collect_backward_cpu(const nurec_collect_params* p);
int nurec_collect_forward_cuda(const nurec_collect_params* p, void* stream);
int nurec_collect_backward_cuda(const nurec_collect_params* p, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* NUREC_COLLECT_H */
