// interpolate_track_poses' glue (argument checks, forward, backward), shared
// by its registration and the fused collection's
// (csrc/collect/collect_register.cpp), which composes it.
#ifndef NUREC_TRACK_POSES_GLUE_H
#define NUREC_TRACK_POSES_GLUE_H

#include <string>

#include "glue_launch.h"

extern "C" {
#include "track_poses/track_poses.h"
}

namespace nurec {

inline int parse_mode(const char* op, const std::string& mode) {
    if (mode == "slerp") return NUREC_INTERP_SLERP;
    if (mode == "nearest") return NUREC_INTERP_NEAREST;
    NUREC_CHECK(false, "nurec_ops.", op, ": `mode` must be \"slerp\" or \"nearest\", got \"",
                    mode, "\"");
    return -1;
}

// Validates and densifies the inputs shared by forward and backward.
inline nurec_track_poses_params track_poses_inputs(const char* op, Tensor& key_poses,
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
    nurec_track_poses_params p = {};
    p.dtype = dtype_code(key_poses);
    p.mode = parse_mode(op, mode);
    p.num_keys = P;
    p.num_tracks = T;
    p.key_poses = dense_data(key_poses);
    p.key_times = (const int64_t*)dense_data(key_times);
    p.track_ranges = dense_data(track_ranges);
    p.ranges_are_int64 = r64;
    p.query_times = (const int64_t*)dense_data(query_times);
    p.query_stride = query_times.size(0) == T ? 1 : 0;
    return p;
}

inline std::tuple<Tensor, Tensor> interpolate_track_poses(Tensor key_poses, Tensor key_times,
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

inline Tensor interpolate_track_poses_backward(Tensor grad_poses, Tensor key_poses, Tensor key_times,
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

}  // namespace nurec

#endif  // NUREC_TRACK_POSES_GLUE_H
