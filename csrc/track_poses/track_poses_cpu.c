/* CPU kernels of interpolate_track_poses: one loop over tracks. */
#include <string.h>

#include "track_poses/track_poses_math.h"

#define NUREC_GENERIC_FILE "track_poses/track_poses_cpu_generic.h"
#include "math/generic.h"

int nurec_track_poses_forward_cpu(const nurec_track_poses_params* p) {
    if (p->dtype == NUREC_F32) return track_poses_forward_cpu_f32(p);
    if (p->dtype == NUREC_F64) return track_poses_forward_cpu_f64(p);
    return NUREC_ERR_DTYPE;
}

int nurec_track_poses_backward_cpu(const nurec_track_poses_params* p) {
    if (p->dtype == NUREC_F32) return track_poses_backward_cpu_f32(p);
    if (p->dtype == NUREC_F64) return track_poses_backward_cpu_f64(p);
    return NUREC_ERR_DTYPE;
}
