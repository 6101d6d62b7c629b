/* CPU kernels of collect_gaussian_parameters: one loop over Gaussians. */
#include <string.h>

#include "collect/collect_math.h"

#define NUREC_GENERIC_FILE "collect/collect_cpu_generic.h"
#include "math/generic.h"

int nurec_collect_forward_cpu(const nurec_collect_params* p) {
    if (p->dtype == NUREC_F32) return collect_forward_cpu_f32(p);
    if (p->dtype == NUREC_F64) return collect_forward_cpu_f64(p);
    return NUREC_ERR_DTYPE;
}

int nurec_collect_backward_cpu(const nurec_collect_params* p) {
    if (p->dtype == NUREC_F32) return collect_backward_cpu_f32(p);
    if (p->dtype == NUREC_F64) return collect_backward_cpu_f64(p);
    return NUREC_ERR_DTYPE;
}
