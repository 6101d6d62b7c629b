// interpolate_track_poses (SPEC section 1).
// The glue from PyTorch tensors to the family's plain C params struct
// (validate, make dense, allocate outputs, call the CPU or CUDA launcher on
// the current stream), and the family's schemas and kernels, registered
// beside it (a fragment of the nurec_ops library, csrc/register.cpp). Only
// PyTorch's stable ABI is used here.
#include "glue_launch.h"
#include "track_poses/track_poses_glue.h"

#include <cstdlib>
#include <initializer_list>
#include <utility>

extern "C" {
#include "track_poses/track_poses.h"
}

using namespace nurec;

// (the glue itself is in track_poses_glue.h: the fused collection composes it)

STABLE_TORCH_LIBRARY_FRAGMENT(nurec_ops, m) {
    m.def("interpolate_track_poses(Tensor key_poses, Tensor key_times, Tensor track_ranges, "
          "Tensor query_times, str mode=\"slerp\") -> (Tensor poses, Tensor inside)");
    m.def("interpolate_track_poses_backward(Tensor grad_poses, Tensor key_poses, "
          "Tensor key_times, Tensor track_ranges, Tensor query_times, str mode) -> Tensor");
}

// One function serves both dispatch keys: it branches on the device itself.
#define NUREC_REGISTER_TRACK_POSES(m) \
    m.impl("interpolate_track_poses", TORCH_BOX(&interpolate_track_poses)); \
    m.impl("interpolate_track_poses_backward", TORCH_BOX(&interpolate_track_poses_backward));

STABLE_TORCH_LIBRARY_IMPL(nurec_ops, CPU, m) { NUREC_REGISTER_TRACK_POSES(m) }
#ifdef NUREC_WITH_CUDA
STABLE_TORCH_LIBRARY_IMPL(nurec_ops, CUDA, m) { NUREC_REGISTER_TRACK_POSES(m) }
#endif
