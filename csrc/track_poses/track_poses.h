/* interpolate_track_poses (SPEC section 1): the pose of every actor track at
 * a query time, from keyframed poses. Plain C params struct and launchers;
 * the per-track math is in track_poses_math.h, shared by CPU and CUDA. */
#ifndef NUREC_TRACK_POSES_H
#define NUREC_TRACK_POSES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum nurec_interp_mode { NUREC_INTERP_SLERP = 0, NUREC_INTERP_NEAREST = 1 };

typedef struct nurec_track_poses_params {
    int dtype;                 /* enum nurec_dtype of every real tensor */
    int mode;                  /* enum nurec_interp_mode */
    int64_t num_keys;          /* P */
    int64_t num_tracks;        /* T */
    const void* key_poses;     /* [P,7] real, contiguous */
    const int64_t* key_times;  /* [P] */
    const void* track_ranges;  /* [T,2] (start, count), int32 or int64 */
    int ranges_are_int64;
    const int64_t* query_times; /* [T] or [1] */
    int64_t query_stride;       /* 1, or 0 to broadcast a [1] query */
    /* forward outputs */
    void* poses;               /* [T,7] real */
    uint8_t* inside;           /* [T] bool */
    /* backward */
    const void* grad_poses;    /* [T,7] real */
    void* grad_key_poses;      /* [P,7] real; the launcher zero-fills it */
} nurec_track_poses_params;

int nurec_track_poses_forward_cpu(const nurec_track_poses_params* p);
int nurec_track_poses_backward_cpu(const nurec_track_poses_params* p);
int nurec_track_poses_forward_cuda(const nurec_track_poses_params* p, void* stream);
int nurec_track_poses_backward_cuda(const nurec_track_poses_params* p, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* NUREC_TRACK_POSES_H */
