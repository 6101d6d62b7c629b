// collect_gaussian_parameters and the fused collect (SPEC section 2).
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
#include "collect/collect.h"
#include "track_poses/track_poses.h"
}

using namespace nurec;

namespace {
// ------------------------------------------------------------------- collect

nurec_collect_params collect_inputs(const char* op, Tensor& means, Tensor& quats,
                                    Tensor& log_scales, Tensor& opacity_logits,
                                    Tensor& track_ids, Tensor& track_poses,
                                    Tensor& track_inside) {
    check_shape(op, "means", means, {-1, 3}, "[N, 3]");
    check_real(op, "means", means, means, "means");
    int64_t N = means.size(0);
    check_shape(op, "quats", quats, {N, 4}, "[N, 4] (N = means.shape[0])");
    check_shape(op, "log_scales", log_scales, {N, 3}, "[N, 3] (N = means.shape[0])");
    check_shape(op, "opacity_logits", opacity_logits, {N}, "[N] (N = means.shape[0])");
    check_shape(op, "track_ids", track_ids, {N}, "[N] (N = means.shape[0])");
    check_shape(op, "track_poses", track_poses, {-1, 7}, "[T, 7]");
    int64_t T = track_poses.size(0);
    check_shape(op, "track_inside", track_inside, {T}, "[T] (T = track_poses.shape[0])");
    check_like(op, means, "means", {{"quats", &quats}, {"log_scales", &log_scales},
                                    {"opacity_logits", &opacity_logits}, {"track_poses", &track_poses}});
    bool ids64 = check_index(op, "track_ids", track_ids);
    check_dtype(op, "track_inside", track_inside, ScalarType::Bool);
    check_device(op, "track_ids", track_ids, means, "means");
    check_device(op, "track_inside", track_inside, means, "means");
    nurec_collect_params p = {};
    p.dtype = dtype_code(means);
    p.num_gaussians = N;
    p.num_tracks = T;
    p.means = dense_data(means);
    p.quats = dense_data(quats);
    p.log_scales = dense_data(log_scales);
    p.opacity_logits = dense_data(opacity_logits);
    p.track_ids = dense_data(track_ids);
    p.ids_are_int64 = ids64;
    p.track_poses = dense_data(track_poses);
    p.track_inside = (const uint8_t*)dense_data(track_inside);
    return p;
}

std::tuple<Tensor, Tensor, Tensor, Tensor> collect_gaussian_parameters(
    Tensor means, Tensor quats, Tensor log_scales, Tensor opacity_logits, Tensor track_ids,
    Tensor track_poses, Tensor track_inside) {
    const char* op = "collect_gaussian_parameters";
    nurec_collect_params p = collect_inputs(op, means, quats, log_scales, opacity_logits,
                                            track_ids, track_poses, track_inside);
    int64_t N = p.num_gaussians;
    Tensor means_w = empty_like_shape(means, {N, 3});
    Tensor quats_w = empty_like_shape(means, {N, 4});
    Tensor scales = empty_like_shape(means, {N, 3});
    Tensor opacities = empty_like_shape(means, {N});
    p.means_w = means_w.data_ptr();
    p.quats_w = quats_w.data_ptr();
    p.scales = scales.data_ptr();
    p.opacities = opacities.data_ptr();
    check_status(op, launch(op, means, p, nurec_collect_forward_cpu, nurec_collect_forward_cuda));
    return {means_w, quats_w, scales, opacities};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> collect_gaussian_parameters_backward(
    Tensor grad_means_w, Tensor grad_quats_w, Tensor grad_scales, Tensor grad_opacities,
    Tensor means, Tensor quats, Tensor log_scales, Tensor opacity_logits, Tensor track_ids,
    Tensor track_poses, Tensor track_inside) {
    const char* op = "collect_gaussian_parameters_backward";
    nurec_collect_params p = collect_inputs(op, means, quats, log_scales, opacity_logits,
                                            track_ids, track_poses, track_inside);
    int64_t N = p.num_gaussians, T = p.num_tracks;
    check_shape(op, "grad_means_w", grad_means_w, {N, 3}, "[N, 3]");
    check_shape(op, "grad_quats_w", grad_quats_w, {N, 4}, "[N, 4]");
    check_shape(op, "grad_scales", grad_scales, {N, 3}, "[N, 3]");
    check_shape(op, "grad_opacities", grad_opacities, {N}, "[N]");
    check_like(op, means, "means", {{"grad_means_w", &grad_means_w}, {"grad_quats_w", &grad_quats_w},
                                    {"grad_scales", &grad_scales}, {"grad_opacities", &grad_opacities}});
    p.grad_means_w = dense_data(grad_means_w);
    p.grad_quats_w = dense_data(grad_quats_w);
    p.grad_scales = dense_data(grad_scales);
    p.grad_opacities = dense_data(grad_opacities);
    Tensor g_means = empty_like_shape(means, {N, 3});
    Tensor g_quats = empty_like_shape(means, {N, 4});
    Tensor g_log_scales = empty_like_shape(means, {N, 3});
    Tensor g_logits = empty_like_shape(means, {N});
    Tensor g_poses = empty_like_shape(means, {T, 7});
    p.grad_means = g_means.data_ptr();
    p.grad_quats = g_quats.data_ptr();
    p.grad_log_scales = g_log_scales.data_ptr();
    p.grad_opacity_logits = g_logits.data_ptr();
    p.grad_track_poses = g_poses.data_ptr();
    check_status(op, launch(op, means, p, nurec_collect_backward_cpu, nurec_collect_backward_cuda));
    return {g_means, g_quats, g_log_scales, g_logits, g_poses};
}

// ---------------------------------------------- collect at a time (fused)
// interpolate_track_poses and collect_gaussian_parameters in one op: one
// dispatcher call and one autograd node per frame instead of two (host
// overhead, not device time, bounds these microsecond kernels).

bool pdl_enabled() {
    static const bool on = [] {
        const char* v = std::getenv("NUREC_OPS_PDL");
        return v && std::string(v) == "1";
    }();
    return on;
}

struct CollectAtTime {
    Tensor poses, inside;
    nurec_track_poses_params tp;
    nurec_collect_params cp;
};

CollectAtTime collect_at_time_inputs(const char* op, Tensor& means, Tensor& quats,
                                     Tensor& log_scales, Tensor& opacity_logits,
                                     Tensor& track_ids, Tensor& key_poses, Tensor& key_times,
                                     Tensor& track_ranges, Tensor& query_times,
                                     const std::string& mode) {
    CollectAtTime c;
    c.tp = track_poses_inputs(op, key_poses, key_times, track_ranges, query_times, mode);
    check_real(op, "key_poses", key_poses, means, "means");
    check_device(op, "key_poses", key_poses, means, "means");
    c.poses = empty_like_shape(key_poses, {c.tp.num_tracks, 7});
    c.inside = empty_like_shape(key_poses, {c.tp.num_tracks}, /*as_bool=*/true);
    c.tp.poses = c.poses.data_ptr();
    c.tp.inside = (uint8_t*)c.inside.data_ptr();
    c.cp = collect_inputs(op, means, quats, log_scales, opacity_logits, track_ids, c.poses,
                          c.inside);
    return c;
}

// Also returns the track poses and inside flags it computed: the backward
// takes them back instead of recomputing them (one kernel fewer).
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor> collect(
    Tensor means, Tensor quats, Tensor log_scales, Tensor opacity_logits, Tensor track_ids,
    Tensor key_poses, Tensor key_times, Tensor track_ranges, Tensor query_times,
    std::string mode) {
    const char* op = "collect";
    CollectAtTime c = collect_at_time_inputs(op, means, quats, log_scales, opacity_logits,
                                             track_ids, key_poses, key_times, track_ranges,
                                             query_times, mode);
    int64_t N = c.cp.num_gaussians;
    Tensor means_w = empty_like_shape(means, {N, 3});
    Tensor quats_w = empty_like_shape(means, {N, 4});
    Tensor scales = empty_like_shape(means, {N, 3});
    Tensor opacities = empty_like_shape(means, {N});
    c.cp.means_w = means_w.data_ptr();
    c.cp.quats_w = quats_w.data_ptr();
    c.cp.scales = scales.data_ptr();
    c.cp.opacities = opacities.data_ptr();
    // the collection kernel is launched right after the pose kernel: may
    // overlap it (opt-in, NUREC_OPS_PDL=1: measured no faster on the H200
    // while the pose kernel's latency is exposed)
    c.cp.after_track_poses = c.tp.num_tracks > 0 && pdl_enabled();
    check_status(op, launch2(op, means, c.tp, nurec_track_poses_forward_cpu, nurec_track_poses_forward_cuda,
                             c.cp, nurec_collect_forward_cpu, nurec_collect_forward_cuda));
    return {means_w, quats_w, scales, opacities, c.poses, c.inside};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> collect_backward(
    Tensor grad_means_w, Tensor grad_quats_w, Tensor grad_scales, Tensor grad_opacities,
    Tensor means, Tensor quats, Tensor log_scales, Tensor opacity_logits, Tensor track_ids,
    Tensor track_poses, Tensor track_inside, Tensor key_poses, Tensor key_times,
    Tensor track_ranges, Tensor query_times, std::string mode) {
    auto g = collect_gaussian_parameters_backward(grad_means_w, grad_quats_w, grad_scales,
                                                  grad_opacities, means, quats, log_scales,
                                                  opacity_logits, track_ids, track_poses,
                                                  track_inside);
    Tensor g_keys = interpolate_track_poses_backward(std::get<4>(g), key_poses, key_times,
                                                     track_ranges, query_times, mode);
    return {std::get<0>(g), std::get<1>(g), std::get<2>(g), std::get<3>(g), g_keys};
}

}  // namespace

STABLE_TORCH_LIBRARY_FRAGMENT(nurec_ops, m) {
    m.def("collect_gaussian_parameters(Tensor means, Tensor quats, Tensor log_scales, "
          "Tensor opacity_logits, Tensor track_ids, Tensor track_poses, Tensor track_inside) "
          "-> (Tensor means_w, Tensor quats_w, Tensor scales, Tensor opacities)");
    m.def("collect_gaussian_parameters_backward(Tensor grad_means_w, Tensor grad_quats_w, "
          "Tensor grad_scales, Tensor grad_opacities, Tensor means, Tensor quats, "
          "Tensor log_scales, Tensor opacity_logits, Tensor track_ids, Tensor track_poses, "
          "Tensor track_inside) -> (Tensor, Tensor, Tensor, Tensor, Tensor)");
    m.def("collect(Tensor means, Tensor quats, Tensor log_scales, Tensor opacity_logits, "
          "Tensor track_ids, Tensor key_poses, Tensor key_times, Tensor track_ranges, "
          "Tensor query_times, str mode=\"slerp\") "
          "-> (Tensor means_w, Tensor quats_w, Tensor scales, Tensor opacities, "
          "Tensor track_poses, Tensor track_inside)");
    m.def("collect_backward(Tensor grad_means_w, Tensor grad_quats_w, Tensor grad_scales, "
          "Tensor grad_opacities, Tensor means, Tensor quats, Tensor log_scales, "
          "Tensor opacity_logits, Tensor track_ids, Tensor track_poses, Tensor track_inside, "
          "Tensor key_poses, Tensor key_times, Tensor track_ranges, Tensor query_times, str mode) "
          "-> (Tensor, Tensor, Tensor, Tensor, Tensor)");
}

// One function serves both dispatch keys: it branches on the device itself.
#define NUREC_REGISTER_COLLECT(m) \
    m.impl("collect_gaussian_parameters", TORCH_BOX(&collect_gaussian_parameters)); \
    m.impl("collect_gaussian_parameters_backward", TORCH_BOX(&collect_gaussian_parameters_backward)); \
    m.impl("collect", TORCH_BOX(&collect)); \
    m.impl("collect_backward", TORCH_BOX(&collect_backward));

STABLE_TORCH_LIBRARY_IMPL(nurec_ops, CPU, m) { NUREC_REGISTER_COLLECT(m) }
#ifdef NUREC_WITH_CUDA
STABLE_TORCH_LIBRARY_IMPL(nurec_ops, CUDA, m) { NUREC_REGISTER_COLLECT(m) }
#endif
