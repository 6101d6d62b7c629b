// The one registration file: schemas of every nurec_ops operator, and the
// thin glue from PyTorch tensors to each family's plain C params struct
// (validate, make dense, allocate outputs, call the CPU or CUDA launcher on
// the current stream). Only PyTorch's stable ABI is used here.
#include "torch_glue.h"

#include <cstdlib>

extern "C" {
#include "collect/collect.h"
#include "track_poses/track_poses.h"
}

#ifdef NUREC_WITH_CUDA
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#endif

using namespace nurec;

namespace {

// Runs `cpu` or `cuda` (a launcher taking the current stream) on the
// device of `ref`, with that device current.
template <class P>
int launch(const char* op, const Tensor& ref, const P& params,
           int (*cpu)(const P*), int (*cuda)(const P*, void*)) {
    if (ref.is_cpu()) return cpu(&params);
#ifdef NUREC_WITH_CUDA
    torch::stable::accelerator::DeviceGuard guard(ref.get_device_index());
    void* stream = nullptr;
    NUREC_CHECK(aoti_torch_get_current_cuda_stream(ref.get_device_index(), &stream) ==
                        AOTI_TORCH_SUCCESS,
                    "nurec_ops.", op, ": could not get the current CUDA stream");
    return cuda(&params, stream);
#else
    (void)cuda;
    NUREC_CHECK(false, "nurec_ops.", op,
                    ": this build of nurec_ops has no CUDA kernels (built without nvcc, "
                    "or with NUREC_OPS_CUDA=0)");
    return NUREC_ERR_CUDA;
#endif
}

// ---------------------------------------------------------------- track poses

int parse_mode(const char* op, const std::string& mode) {
    if (mode == "slerp") return NUREC_INTERP_SLERP;
    if (mode == "nearest") return NUREC_INTERP_NEAREST;
    NUREC_CHECK(false, "nurec_ops.", op, ": `mode` must be \"slerp\" or \"nearest\", got \"",
                    mode, "\"");
    return -1;
}

// Validates and densifies the inputs shared by forward and backward.
nurec_track_poses_params track_poses_inputs(const char* op, Tensor& key_poses,
                                            Tensor& key_times, Tensor& track_ranges,
                                            Tensor& query_times, const std::string& mode) {
    check_shape(op, "key_poses", key_poses, {-1, 7}, "[P, 7]");
    check_real(op, "key_poses", key_poses, key_poses, "key_poses");
    int64_t P = key_poses.size(0);
    check_shape(op, "key_times", key_times, {P}, "[P] (P = key_poses.shape[0])");
    check_dtype(op, "key_times", key_times, ScalarType::Long);
    check_shape(op, "track_ranges", track_ranges, {-1, 2}, "[T, 2]");
    bool r64 = check_index(op, "track_ranges", track_ranges);
    int64_t T = track_ranges.size(0);
    NUREC_CHECK(query_times.dim() == 1 && (query_times.size(0) == T || query_times.size(0) == 1),
                    "nurec_ops.", op, ": `query_times` must have shape [T] or [1] (T = ", T,
                    " tracks), got ", shape_str(query_times));
    check_dtype(op, "query_times", query_times, ScalarType::Long);
    check_device(op, "key_times", key_times, key_poses, "key_poses");
    check_device(op, "track_ranges", track_ranges, key_poses, "key_poses");
    check_device(op, "query_times", query_times, key_poses, "key_poses");
    key_poses = dense(key_poses);
    key_times = dense(key_times);
    track_ranges = dense(track_ranges);
    query_times = dense(query_times);
    nurec_track_poses_params p = {};
    p.dtype = dtype_code(key_poses);
    p.mode = parse_mode(op, mode);
    p.num_keys = P;
    p.num_tracks = T;
    p.key_poses = key_poses.data_ptr();
    p.key_times = (const int64_t*)key_times.data_ptr();
    p.track_ranges = track_ranges.data_ptr();
    p.ranges_are_int64 = r64;
    p.query_times = (const int64_t*)query_times.data_ptr();
    p.query_stride = query_times.size(0) == T ? 1 : 0;
    return p;
}

std::tuple<Tensor, Tensor> interpolate_track_poses(Tensor key_poses, Tensor key_times,
                                                   Tensor track_ranges, Tensor query_times,
                                                   std::string mode) {
    const char* op = "interpolate_track_poses";
    nurec_track_poses_params p =
        track_poses_inputs(op, key_poses, key_times, track_ranges, query_times, mode);
    Tensor poses = empty_like_shape(key_poses, {p.num_tracks, 7});
    Tensor inside = empty_like_shape(key_poses, {p.num_tracks}, /*as_bool=*/true);
    p.poses = poses.data_ptr();
    p.inside = (uint8_t*)inside.data_ptr();
    check_status(op, launch(op, key_poses, p, nurec_track_poses_forward_cpu,
                            nurec_track_poses_forward_cuda));
    return {poses, inside};
}

Tensor interpolate_track_poses_backward(Tensor grad_poses, Tensor key_poses, Tensor key_times,
                                        Tensor track_ranges, Tensor query_times,
                                        std::string mode) {
    const char* op = "interpolate_track_poses_backward";
    nurec_track_poses_params p =
        track_poses_inputs(op, key_poses, key_times, track_ranges, query_times, mode);
    check_shape(op, "grad_poses", grad_poses, {p.num_tracks, 7}, "[T, 7]");
    check_real(op, "grad_poses", grad_poses, key_poses, "key_poses");
    check_device(op, "grad_poses", grad_poses, key_poses, "key_poses");
    grad_poses = dense(grad_poses);
    Tensor grad_key_poses = empty_like_shape(key_poses, {p.num_keys, 7});
    p.grad_poses = grad_poses.data_ptr();
    p.grad_key_poses = grad_key_poses.data_ptr();
    check_status(op, launch(op, key_poses, p, nurec_track_poses_backward_cpu,
                            nurec_track_poses_backward_cuda));
    return grad_key_poses;
}

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
    check_real(op, "quats", quats, means, "means");
    check_real(op, "log_scales", log_scales, means, "means");
    check_real(op, "opacity_logits", opacity_logits, means, "means");
    check_real(op, "track_poses", track_poses, means, "means");
    bool ids64 = check_index(op, "track_ids", track_ids);
    check_dtype(op, "track_inside", track_inside, ScalarType::Bool);
    check_device(op, "quats", quats, means, "means");
    check_device(op, "log_scales", log_scales, means, "means");
    check_device(op, "opacity_logits", opacity_logits, means, "means");
    check_device(op, "track_ids", track_ids, means, "means");
    check_device(op, "track_poses", track_poses, means, "means");
    check_device(op, "track_inside", track_inside, means, "means");
    means = dense(means);
    quats = dense(quats);
    log_scales = dense(log_scales);
    opacity_logits = dense(opacity_logits);
    track_ids = dense(track_ids);
    track_poses = dense(track_poses);
    track_inside = dense(track_inside);
    nurec_collect_params p = {};
    p.dtype = dtype_code(means);
    p.num_gaussians = N;
    p.num_tracks = T;
    p.means = means.data_ptr();
    p.quats = quats.data_ptr();
    p.log_scales = log_scales.data_ptr();
    p.opacity_logits = opacity_logits.data_ptr();
    p.track_ids = track_ids.data_ptr();
    p.ids_are_int64 = ids64;
    p.track_poses = track_poses.data_ptr();
    p.track_inside = (const uint8_t*)track_inside.data_ptr();
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
    check_real(op, "grad_means_w", grad_means_w, means, "means");
    check_real(op, "grad_quats_w", grad_quats_w, means, "means");
    check_real(op, "grad_scales", grad_scales, means, "means");
    check_real(op, "grad_opacities", grad_opacities, means, "means");
    check_device(op, "grad_means_w", grad_means_w, means, "means");
    check_device(op, "grad_quats_w", grad_quats_w, means, "means");
    check_device(op, "grad_scales", grad_scales, means, "means");
    check_device(op, "grad_opacities", grad_opacities, means, "means");
    grad_means_w = dense(grad_means_w);
    grad_quats_w = dense(grad_quats_w);
    grad_scales = dense(grad_scales);
    grad_opacities = dense(grad_opacities);
    Tensor g_means = empty_like_shape(means, {N, 3});
    Tensor g_quats = empty_like_shape(means, {N, 4});
    Tensor g_log_scales = empty_like_shape(means, {N, 3});
    Tensor g_logits = empty_like_shape(means, {N});
    Tensor g_poses = empty_like_shape(means, {T, 7});
    p.grad_means_w = grad_means_w.data_ptr();
    p.grad_quats_w = grad_quats_w.data_ptr();
    p.grad_scales = grad_scales.data_ptr();
    p.grad_opacities = grad_opacities.data_ptr();
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
// overhead, not device time, bounds these microsecond kernels). The track
// poses are recomputed in the backward (one tiny kernel) rather than saved.

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

std::tuple<Tensor, Tensor, Tensor, Tensor> collect(Tensor means, Tensor quats, Tensor log_scales,
                                                   Tensor opacity_logits, Tensor track_ids,
                                                   Tensor key_poses, Tensor key_times,
                                                   Tensor track_ranges, Tensor query_times,
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
    check_status(op, launch(op, means, c.tp, nurec_track_poses_forward_cpu,
                            nurec_track_poses_forward_cuda));
    // launched right after the pose kernel: may overlap it (opt-in, NUREC_OPS_PDL=1:
    // measured no faster on the H200 while the pose kernel's latency is exposed)
    c.cp.after_track_poses = c.tp.num_tracks > 0 && pdl_enabled();
    check_status(op, launch(op, means, c.cp, nurec_collect_forward_cpu, nurec_collect_forward_cuda));
    return {means_w, quats_w, scales, opacities};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> collect_backward(
    Tensor grad_means_w, Tensor grad_quats_w, Tensor grad_scales, Tensor grad_opacities,
    Tensor means, Tensor quats, Tensor log_scales, Tensor opacity_logits, Tensor track_ids,
    Tensor key_poses, Tensor key_times, Tensor track_ranges, Tensor query_times,
    std::string mode) {
    const char* op = "collect_backward";
    CollectAtTime c = collect_at_time_inputs(op, means, quats, log_scales, opacity_logits,
                                             track_ids, key_poses, key_times, track_ranges,
                                             query_times, mode);
    check_status(op, launch(op, means, c.tp, nurec_track_poses_forward_cpu,
                            nurec_track_poses_forward_cuda));
    auto g = collect_gaussian_parameters_backward(grad_means_w, grad_quats_w, grad_scales,
                                                  grad_opacities, means, quats, log_scales,
                                                  opacity_logits, track_ids, c.poses, c.inside);
    Tensor g_keys = interpolate_track_poses_backward(std::get<4>(g), key_poses, key_times,
                                                     track_ranges, query_times, mode);
    return {std::get<0>(g), std::get<1>(g), std::get<2>(g), std::get<3>(g), g_keys};
}


}  // namespace

STABLE_TORCH_LIBRARY(nurec_ops, m) {
    m.def("interpolate_track_poses(Tensor key_poses, Tensor key_times, Tensor track_ranges, "
          "Tensor query_times, str mode=\"slerp\") -> (Tensor poses, Tensor inside)");
    m.def("interpolate_track_poses_backward(Tensor grad_poses, Tensor key_poses, "
          "Tensor key_times, Tensor track_ranges, Tensor query_times, str mode) -> Tensor");
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
          "-> (Tensor means_w, Tensor quats_w, Tensor scales, Tensor opacities)");
    m.def("collect_backward(Tensor grad_means_w, Tensor grad_quats_w, Tensor grad_scales, "
          "Tensor grad_opacities, Tensor means, Tensor quats, Tensor log_scales, "
          "Tensor opacity_logits, Tensor track_ids, Tensor key_poses, Tensor key_times, "
          "Tensor track_ranges, Tensor query_times, str mode) "
          "-> (Tensor, Tensor, Tensor, Tensor, Tensor)");
}

// One function serves both dispatch keys: it branches on the device itself.
#define NUREC_REGISTER_IMPLS(m)                                                          \
    m.impl("interpolate_track_poses", TORCH_BOX(&interpolate_track_poses));             \
    m.impl("interpolate_track_poses_backward", TORCH_BOX(&interpolate_track_poses_backward)); \
    m.impl("collect_gaussian_parameters", TORCH_BOX(&collect_gaussian_parameters));     \
    m.impl("collect_gaussian_parameters_backward",                                       \
           TORCH_BOX(&collect_gaussian_parameters_backward));                             \
    m.impl("collect", TORCH_BOX(&collect));                                              \
    m.impl("collect_backward", TORCH_BOX(&collect_backward));

STABLE_TORCH_LIBRARY_IMPL(nurec_ops, CPU, m) { NUREC_REGISTER_IMPLS(m) }
#ifdef NUREC_WITH_CUDA
STABLE_TORCH_LIBRARY_IMPL(nurec_ops, CUDA, m) { NUREC_REGISTER_IMPLS(m) }
#endif
