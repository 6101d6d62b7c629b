/* Per-item math of splat_meta, C99 and CUDA, float and double. */
#ifndef NUREC_SPLAT_META_MATH_H
#define NUREC_SPLAT_META_MATH_H

#include "math/defs.h"
#include "splat_meta/splat_meta.h"
#include "tiles/tiles.h"

#define NUREC_GENERIC_FILE "splat_meta/splat_meta_math_generic.h"
#include "math/generic.h"

#endif /* NUREC_SPLAT_META_MATH_H */
