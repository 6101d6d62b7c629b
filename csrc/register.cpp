// The nurec_ops operator library's declaration. Each op family registers
// its own schemas and kernels beside its glue, as fragments of this library
// (csrc/<family>/<family>_register.cpp); shared glue is in glue_launch.h,
// torch_glue.h, tiles/splat_glue.h and track_poses/track_poses_glue.h.
#include <torch/csrc/stable/library.h>

STABLE_TORCH_LIBRARY(nurec_ops, m) { (void)m; }
