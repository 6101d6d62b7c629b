/* CPU kernels of covariance: one loop over items, forward and backward. */
#include "covariance/covariance_math.h"

#define NUREC_GENERIC_FILE "covariance/covariance_cpu_generic.h"
#include "math/generic.h"

int nurec_covariance_forward_cpu(const nurec_covariance_params* p) {
    if (p->dtype == NUREC_F32) return covariance_forward_cpu_f32(p);
    if (p->dtype == NUREC_F64) return covariance_forward_cpu_f64(p);
    return NUREC_ERR_DTYPE;
}

int nurec_covariance_backward_cpu(const nurec_covariance_params* p) {
    if (p->dtype == NUREC_F32) return covariance_backward_cpu_f32(p);
    if (p->dtype == NUREC_F64) return covariance_backward_cpu_f64(p);
    return NUREC_ERR_DTYPE;
}
