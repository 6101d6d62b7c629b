/* CPU kernel of splat_meta: one loop over items. */
#include "splat_meta/splat_meta_math.h"

#define NUREC_GENERIC_FILE "splat_meta/splat_meta_cpu_generic.h"
#include "math/generic.h"

int nurec_splat_meta_cpu(const nurec_splat_meta_params* p) {
    if (p->dtype == NUREC_F32) return splat_meta_cpu_f32(p);
    if (p->dtype == NUREC_F64) return splat_meta_cpu_f64(p);
    return NUREC_ERR_DTYPE;
}
