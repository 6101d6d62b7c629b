// The one registration file: schemas of every nurec_ops operator, and the
// thin glue from PyTorch tensors to each family's plain C params struct
// (validate, make dense, allocate outputs, call the CPU or CUDA launcher on
// the current stream). Only PyTorch's stable ABI is used here.
#include "torch_glue.h"

#include <cstdlib>
#include <initializer_list>
#include <utility>

extern "C" {
#include "collect/collect.h"
#include "track_poses/track_poses.h"
#include "rasterize_camera/rasterize_camera.h"  // rasterize_camera (issue 3)
#include "rasterize_lidar/rasterize_lidar.h"    // rasterize_lidar (issue 4)
#include "splat_meta/splat_meta.h"              // SPEC 8's meta of both rasterizers
#include "sensors/camera_models.h"              // SPEC 6's camera models
#include "sensors/rolling_shutter.h"            // SPEC 7's rolling shutter
#include "tiles/tiles.h"
}

#ifdef NUREC_WITH_CUDA
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#endif

using namespace nurec;

namespace {

// Calls run_cuda(stream) with the device of `ref` current and its current
// CUDA stream; raises in a build without CUDA kernels.
template <class F>
int on_device(const char* op, const Tensor& ref, F&& run_cuda) {
#ifdef NUREC_WITH_CUDA
    torch::stable::accelerator::DeviceGuard guard(ref.get_device_index());
    void* stream = nullptr;
    NUREC_CHECK(aoti_torch_get_current_cuda_stream(ref.get_device_index(), &stream) ==
                        AOTI_TORCH_SUCCESS,
                    "nurec_ops.", op, ": could not get the current CUDA stream");
    return run_cuda(stream);
#else
    (void)ref;
    (void)run_cuda;
    NUREC_CHECK(false, "nurec_ops.", op,
                    ": this build of nurec_ops has no CUDA kernels (built without nvcc, "
                    "or with NUREC_OPS_CUDA=0)");
    return NUREC_ERR_CUDA;
#endif
}

// A CUDA launcher of params P (its type is not deduced from the argument,
// so that a build without CUDA may pass NUREC_CUDA_ONLY's nullptr).
template <class P>
struct CudaLauncher {
    using type = int (*)(const P*, void*);
};

// Runs `cpu` or `cuda` (a launcher taking the current stream) on the
// device of `ref`, with that device current.
template <class P>
int launch(const char* op, const Tensor& ref, const P& params,
           int (*cpu)(const P*), typename CudaLauncher<P>::type cuda) {
    if (ref.is_cpu()) return cpu(&params);
    return on_device(op, ref, [&](void* stream) { return cuda(&params, stream); });
}

// Two launchers back to back on one device guard and one stream query (the
// fused collection: its host time per call is what back-to-back calls see).
// Returns the first failure.
template <class P1, class P2>
int launch2(const char* op, const Tensor& ref, const P1& p1, int (*cpu1)(const P1*),
            int (*cuda1)(const P1*, void*), const P2& p2, int (*cpu2)(const P2*),
            int (*cuda2)(const P2*, void*)) {
    if (ref.is_cpu()) {
        int st = cpu1(&p1);
        return st != NUREC_OK ? st : cpu2(&p2);
    }
    return on_device(op, ref, [&](void* stream) {
        int st = cuda1(&p1, stream);
        return st != NUREC_OK ? st : cuda2(&p2, stream);
    });
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

// ========================================================== rasterize_camera
// (issue 3) Camera Gaussian rasterizer: validation, allocation of outputs and
// intermediates (sizes from shapes and the host-chosen `capacity` only), and
// the CPU / CUDA launchers of csrc/rasterize_camera and csrc/tiles.


// ----------------------------------------------- what the rasterizers share
// The camera and lidar rasterizers bin the same way (csrc/tiles) and keep the
// same intermediates for their backward; their params structs use the same
// field names for them, so these helpers serve both.

void splat_check_status(const char* op, int status) {
    NUREC_CHECK(status != NUREC_ERR_TILES_ALLOC, "nurec_ops.", op,
                ": out of host memory for the CPU tile binning");
    check_status(op, status);
}

// The intermediates of a forward that its backward takes back: per item its
// tile record, count and offset; the intersection list; per tile its range;
// per cell its final transmittance and last entry; the binning status.
struct SplatBuffers {
    Tensor records, counts, offsets, isect, tile_ranges, final_T, last, status;
};

// Allocates them (sizes from shapes only; the list: splat_forward) and binds
// them to p, in two steps: what the projection writes (splat_project runs it
// on CUDA before the rest is allocated: each allocation is host time before
// the GPU would otherwise start), then the rest.
template <class Params>
void splat_projection_buffers(SplatBuffers& b, const Tensor& like, Params& p, int64_t images) {
    const int64_t C = images, N = p.num_gaussians;
    b.records = empty_like_shape(like, {C, N, NUREC_TREC_SIZE});
    b.counts = empty_dense(like, {C, N}, aoti_torch_dtype_int64());
    p.records = b.records.data_ptr();
    p.counts = (int64_t*)b.counts.data_ptr();
}

template <class Params>
void splat_binning_buffers(SplatBuffers& b, const Tensor& like, Params& p, int64_t images, int64_t rows,
                           int64_t cols) {
    const int64_t C = images, N = p.num_gaussians;
    const int32_t i32 = aoti_torch_dtype_int32(), i64 = aoti_torch_dtype_int64();
    b.offsets = empty_dense(like, {C, N}, i64);
    b.tile_ranges = empty_dense(like, {C, p.tiles_y, p.tiles_x, 2}, i64);
    b.final_T = empty_like_shape(like, {C, rows, cols});
    b.last = empty_dense(like, {C, rows, cols}, i32);
    b.status = empty_dense(like, {2}, i64);
    p.offsets = (int64_t*)b.offsets.data_ptr();
    p.tile_ranges = (int64_t*)b.tile_ranges.data_ptr();
    p.final_T = b.final_T.data_ptr();
    p.last = (int32_t*)b.last.data_ptr();
    p.status = (int64_t*)b.status.data_ptr();
}

#ifdef NUREC_WITH_CUDA
#define NUREC_CUDA_ONLY(f) (f)
#else
#define NUREC_CUDA_ONLY(f) nullptr /* not compiled, and never called without CUDA */
#endif

// A forward's launchers: CPU projection (gives the exact number of
// intersections), CPU forward, CUDA workspace size, CUDA projection, CUDA
// forward after it.
template <class Params>
struct SplatForward {
    int (*project_cpu)(const Params*, int64_t*);
    int (*forward_cpu)(const Params*);
    size_t (*workspace_bytes)(const Params*);
    int (*project_cuda)(const Params*, void*);
    int (*forward_cuda)(const Params*, void*);
};

template <class Params>
int splat_no_cpu(const Params*) { return NUREC_ERR_CUDA; }

// CUDA: launches the projection into the buffers bound so far (the inputs,
// splat_projection_buffers and the op's own per-item outputs). The CPU
// projects in splat_forward, where it also counts.
template <class Params>
void splat_project(const char* op, const Tensor& like, const Params& p, const SplatForward<Params>& f) {
    if (like.is_cpu()) return;
#ifdef NUREC_WITH_CUDA
    splat_check_status(op, launch(op, like, p, &splat_no_cpu<Params>, f.project_cuda));
#else
    (void)op; (void)p; (void)f;
#endif
}

// Binning and rendering into the buffers bound to p (on CUDA after
// splat_project). On the CPU the
// intersection list is sized exactly (a host-side scan); on CUDA by the
// caller's `capacity`, never by device data (an overflow is flagged in
// status, on the device). Returns the list.
template <class Params>
Tensor splat_forward(const char* op, const Tensor& like, Params& p, int64_t capacity,
                     const SplatForward<Params>& f) {
    const int32_t i32 = aoti_torch_dtype_int32();
    Tensor isect;
    if (like.is_cpu()) {
        int64_t total = 0;
        splat_check_status(op, f.project_cpu(&p, &total));
        isect = empty_dense(like, {total}, i32);
        p.capacity = total;
        p.isect_items = (int32_t*)isect.data_ptr();
        splat_check_status(op, f.forward_cpu(&p));
        return isect;
    }
#ifdef NUREC_WITH_CUDA
    NUREC_CHECK(capacity >= 0, "nurec_ops.", op, ": `capacity` must be >= 0, got ", capacity);
    isect = empty_dense(like, {capacity}, i32);
    p.capacity = capacity;
    p.isect_items = (int32_t*)isect.data_ptr();
    size_t ws = f.workspace_bytes(&p);
    NUREC_CHECK(ws > 0, "nurec_ops.", op, ": could not size the binning workspace");
    Tensor workspace = empty_dense(like, {(int64_t)ws}, aoti_torch_dtype_uint8());
    p.workspace = workspace.data_ptr();
    p.workspace_bytes = ws;
    splat_check_status(op, launch(op, like, p, &splat_no_cpu<Params>, f.forward_cuda));
#else
    (void)capacity;
    NUREC_CHECK(false, "nurec_ops.", op, ": this build of nurec_ops has no CUDA kernels");
#endif
    return isect;
}

// The backward's inputs from its forward: checked (shapes from the other
// inputs; cells are rows x cols, described by `cells`, e.g. "[C, H, W]"),
// made dense and bound to p. What it returns must outlive the launch.
template <class Params>
SplatBuffers splat_saved(const char* op, const Tensor& means, Params& p, int64_t images, int64_t rows,
                         int64_t cols, const char* cells, const Tensor& records, const Tensor& counts,
                         const Tensor& isect_items, const Tensor& tile_ranges, const Tensor& final_T,
                         const Tensor& last, const Tensor& status) {
    const int64_t C = images, N = p.num_gaussians;
    check_shape(op, "records", records, {C, N, NUREC_TREC_SIZE}, "[C, N, 8]");
    check_real(op, "records", records, means, "means");
    check_shape(op, "counts", counts, {C, N}, "[C, N]");
    check_dtype(op, "counts", counts, ScalarType::Long);
    check_shape(op, "isect_items", isect_items, {-1}, "[M]");
    check_dtype(op, "isect_items", isect_items, ScalarType::Int);
    check_shape(op, "tile_ranges", tile_ranges, {C, p.tiles_y, p.tiles_x, 2}, "[C, tiles_y, tiles_x, 2]");
    check_dtype(op, "tile_ranges", tile_ranges, ScalarType::Long);
    check_shape(op, "final_T", final_T, {C, rows, cols}, cells);
    check_real(op, "final_T", final_T, means, "means");
    check_shape(op, "last", last, {C, rows, cols}, cells);
    check_dtype(op, "last", last, ScalarType::Int);
    check_shape(op, "status", status, {2}, "[2]");
    check_dtype(op, "status", status, ScalarType::Long);
    for (const Tensor* t : {&records, &counts, &isect_items, &tile_ranges, &final_T, &last, &status})
        check_device(op, "saved tensors and gradients", *t, means, "means");
    SplatBuffers b;
    b.records = dense(records);
    b.counts = dense(counts);
    b.isect = dense(isect_items);
    b.tile_ranges = dense(tile_ranges);
    b.final_T = dense(final_T);
    b.last = dense(last);
    b.status = dense(status);
    p.records = b.records.data_ptr();
    p.counts = (int64_t*)b.counts.data_ptr();
    p.isect_items = (int32_t*)b.isect.data_ptr();
    p.capacity = b.isect.size(0);
    p.tile_ranges = (int64_t*)b.tile_ranges.data_ptr();
    p.final_T = b.final_T.data_ptr();
    p.last = (int32_t*)b.last.data_ptr();
    p.status = (int64_t*)b.status.data_ptr();
    return b;
}

// The Gaussians both rasterizers take. splat_gaussian_shapes checks means
// ([N, 3], real) and quats, scales, opacities against it, returns N;
// check_like_means checks named tensors' dtype and device against means
// (every dtype first, then every device); splat_gaussians makes the six
// inputs dense and binds them to p (features' shape is the rasterizer's,
// checked by it).
int64_t splat_gaussian_shapes(const char* op, const Tensor& means, const Tensor& quats,
                              const Tensor& scales, const Tensor& opacities) {
    check_shape(op, "means", means, {-1, 3}, "[N, 3]");
    check_real(op, "means", means, means, "means");
    const int64_t N = means.size(0);
    check_shape(op, "quats", quats, {N, 4}, "[N, 4] (N = means.shape[0])");
    check_shape(op, "scales", scales, {N, 3}, "[N, 3] (N = means.shape[0])");
    check_shape(op, "opacities", opacities, {N}, "[N] (N = means.shape[0])");
    return N;
}

using NamedTensor = std::pair<const char*, const Tensor*>;

void check_like_means(const char* op, const Tensor& means, std::initializer_list<NamedTensor> named) {
    for (const NamedTensor& nt : named) check_real(op, nt.first, *nt.second, means, "means");
    for (const NamedTensor& nt : named) check_device(op, nt.first, *nt.second, means, "means");
}

struct SplatGaussians {
    Tensor means, quats, scales, opacities, features, viewmats;
};

template <class Params>
void splat_gaussians(SplatGaussians& g, Params& p, const Tensor& means, const Tensor& quats,
                     const Tensor& scales, const Tensor& opacities, const Tensor& features,
                     const Tensor& viewmats) {
    g.means = dense(means);
    g.quats = dense(quats);
    g.scales = dense(scales);
    g.opacities = dense(opacities);
    g.features = dense(features);
    g.viewmats = dense(viewmats);
    p.dtype = dtype_code(means);
    p.means = g.means.data_ptr();
    p.quats = g.quats.data_ptr();
    p.scales = g.scales.data_ptr();
    p.opacities = g.opacities.data_ptr();
    p.features = g.features.data_ptr();
    p.viewmats = g.viewmats.data_ptr();
}

// A backward's gradients per Gaussian, allocated and bound to p; the
// features' gradient (its shape is the rasterizer's) comes allocated.
struct SplatGrads {
    Tensor means, quats, scales, opacities, features;
};

template <class Params>
SplatGrads splat_grads(const Tensor& like, Params& p, Tensor features) {
    const int64_t N = p.num_gaussians;
    SplatGrads g{empty_like_shape(like, {N, 3}), empty_like_shape(like, {N, 4}), empty_like_shape(like, {N, 3}),
                 empty_like_shape(like, {N}), features};
    p.grad_means = g.means.data_ptr();
    p.grad_quats = g.quats.data_ptr();
    p.grad_scales = g.scales.data_ptr();
    p.grad_opacities = g.opacities.data_ptr();
    p.grad_features = g.features.data_ptr();
    return g;
}

// The parts of long lists (CUDA, both rasterizers): `segments` parts at
// most, of at least `segment_min` entries; their per-cell state is kept for
// the backward. The CPU composites every list in one walk (exact) and keeps
// none.
template <class Params>
void splat_segments(const char* op, Params& p, int64_t segments, int64_t segment_min) {
    NUREC_CHECK(segments >= 0 && segments <= NUREC_SPLAT_MAX_SEGMENTS, "nurec_ops.", op,
                ": `segments` must be in [0, ", NUREC_SPLAT_MAX_SEGMENTS, "], got ", segments);
    NUREC_CHECK(segment_min >= 1, "nurec_ops.", op, ": `segment_min` must be >= 1, got ", segment_min);
    p.segments = (int)segments;
    p.segment_min = segment_min;
}

// The parts' per-cell state of a forward ([S, C, rows, cols, D + 2] reals,
// [S, C, rows, cols] int32; S = 0 without parts), allocated and bound.
template <class Params>
void splat_segment_buffers(const Tensor& like, Params& p, int64_t images, int64_t rows, int64_t cols,
                           int64_t channels, Tensor& state, Tensor& last) {
    const int64_t S = p.segments > 1 ? p.segments : 0;
    state = empty_like_shape(like, {S, images, rows, cols, channels + 2});
    last = empty_dense(like, {S, images, rows, cols}, aoti_torch_dtype_int32());
    p.seg_state = state.data_ptr();
    p.seg_last = (int32_t*)last.data_ptr();
}

// The backward's part state from its forward: checked, made dense, bound.
template <class Params>
void splat_segments_saved(const char* op, const Tensor& means, Params& p, int64_t images, int64_t rows,
                          int64_t cols, int64_t channels, Tensor& seg_state, Tensor& seg_last,
                          int64_t segment_min) {
    check_shape(op, "seg_state", seg_state, {-1, images, rows, cols, channels + 2}, "[S, C, rows, cols, D + 2]");
    check_real(op, "seg_state", seg_state, means, "means");
    const int64_t S = seg_state.size(0);
    check_shape(op, "seg_last", seg_last, {S, images, rows, cols}, "[S, C, rows, cols] (S = seg_state.shape[0])");
    check_dtype(op, "seg_last", seg_last, ScalarType::Int);
    check_device(op, "saved tensors and gradients", seg_state, means, "means");
    check_device(op, "saved tensors and gradients", seg_last, means, "means");
    NUREC_CHECK(S != 1 && (S == 0 || !means.is_cpu()), "nurec_ops.", op,
                ": `seg_state` must come from the forward (0 parts, or 2 and more on CUDA), got ", S);
    splat_segments(op, p, S, segment_min);
    seg_state = dense(seg_state);
    seg_last = dense(seg_last);
    p.seg_state = seg_state.data_ptr();
    p.seg_last = (int32_t*)seg_last.data_ptr();
}

struct RcInputs : SplatGaussians {
    nurec_rasterize_camera_params p;
    Tensor Ks;
    std::optional<Tensor> backgrounds;
    Tensor model_params;
    Tensor shutter_params;
};

// SPEC 7: the shutter's code and its packed parameters per camera
// [C, NUREC_RS_PARAMS] (nurec_ops/_rolling_shutter.py packs them).
void rc_shutter(const char* op, RcInputs& in, int64_t shutter, const std::optional<Tensor>& shutter_params) {
    NUREC_CHECK(shutter >= NUREC_SHUTTER_GLOBAL && shutter <= NUREC_SHUTTER_RIGHT_TO_LEFT, "nurec_ops.", op,
                ": `shutter` must be 0..4 (global, top_to_bottom, bottom_to_top, left_to_right, right_to_left), "
                "got ", shutter);
    in.p.shutter = (int)shutter;
    in.p.shutter_params = nullptr;
    if (shutter == NUREC_SHUTTER_GLOBAL) return;
    NUREC_CHECK(shutter_params.has_value(), "nurec_ops.", op, ": `shutter_params` is needed for shutter ", shutter);
    check_shape(op, "shutter_params", *shutter_params, {in.p.num_cameras, NUREC_RS_PARAMS},
                "[C, 16] (C = viewmats.shape[0]; packed by nurec_ops._rolling_shutter)");
    check_real(op, "shutter_params", *shutter_params, in.means, "means");
    check_device(op, "shutter_params", *shutter_params, in.means, "means");
    in.shutter_params = dense(*shutter_params);
    in.p.shutter_params = in.shutter_params.data_ptr();
}

// SPEC 6: the camera model's code and its packed parameters per camera
// [C, NUREC_CAM_PARAMS] (nurec_ops/_camera_models.py packs them).
void rc_model(const char* op, RcInputs& in, int64_t camera_model, const std::optional<Tensor>& model_params) {
    NUREC_CHECK(camera_model >= NUREC_CAM_PINHOLE && camera_model <= NUREC_CAM_FTHETA, "nurec_ops.", op,
                ": `camera_model` must be 0..3 (pinhole, opencv, fisheye, ftheta), got ", camera_model);
    in.p.camera_model = (int)camera_model;
    in.p.model_params = nullptr;
    if (camera_model == NUREC_CAM_PINHOLE) return;
    NUREC_CHECK(model_params.has_value(), "nurec_ops.", op, ": `model_params` is needed for camera_model ",
                camera_model);
    check_shape(op, "model_params", *model_params, {in.p.num_cameras, NUREC_CAM_PARAMS},
                "[C, 20] (C = viewmats.shape[0]; packed by nurec_ops._camera_models)");
    check_real(op, "model_params", *model_params, in.means, "means");
    check_device(op, "model_params", *model_params, in.means, "means");
    in.model_params = dense(*model_params);
    in.p.model_params = in.model_params.data_ptr();
}

RcInputs rc_inputs(const char* op, const Tensor& means, const Tensor& quats, const Tensor& scales,
                   const Tensor& opacities, const Tensor& features, const Tensor& viewmats,
                   const Tensor& Ks, const std::optional<Tensor>& backgrounds, int64_t width,
                   int64_t height, double near_plane, double far_plane, int64_t sh_degree) {
    const int64_t N = splat_gaussian_shapes(op, means, quats, scales, opacities);
    NUREC_CHECK(sh_degree >= -1 && sh_degree <= 3, "nurec_ops.", op,
                    ": `sh_degree` must be None or 0..3, got ", sh_degree);
    int64_t D, K = 0;
    if (sh_degree < 0) {
        check_shape(op, "features", features, {N, -1}, "[N, D] (N = means.shape[0]; or pass sh_degree for SH [N, K, 3])");
        D = features.size(1);
        NUREC_CHECK(D >= 1, "nurec_ops.", op, ": `features` must have at least one channel, got ",
                        shape_str(features));
    } else {
        check_shape(op, "features", features, {N, -1, 3}, "[N, K, 3] SH coefficients (N = means.shape[0])");
        K = features.size(1);
        int64_t need = (sh_degree + 1) * (sh_degree + 1);
        NUREC_CHECK(K >= need, "nurec_ops.", op, ": `features` has K = ", K,
                        " SH coefficients but sh_degree = ", sh_degree, " needs at least ", need);
        D = 3;
    }
    check_shape(op, "viewmats", viewmats, {-1, 4, 4}, "[C, 4, 4]");
    const int64_t C = viewmats.size(0);
    check_shape(op, "Ks", Ks, {C, 3, 3}, "[C, 3, 3] (C = viewmats.shape[0])");
    check_like_means(op, means, {{"quats", &quats}, {"scales", &scales}, {"opacities", &opacities},
                                 {"features", &features}, {"viewmats", &viewmats}, {"Ks", &Ks}});
    if (backgrounds.has_value()) {
        check_shape(op, "backgrounds", *backgrounds, {C, D}, "[C, D] (C cameras, D feature channels)");
        check_real(op, "backgrounds", *backgrounds, means, "means");
        check_device(op, "backgrounds", *backgrounds, means, "means");
    }
    NUREC_CHECK(width >= 0 && width <= (1 << 24), "nurec_ops.", op,
                    ": `width` must be in [0, 2^24], got ", width);
    NUREC_CHECK(height >= 0 && height <= (1 << 24), "nurec_ops.", op,
                    ": `height` must be in [0, 2^24], got ", height);
    NUREC_CHECK(near_plane > 0, "nurec_ops.", op, ": `near` must be > 0, got ", near_plane);
    NUREC_CHECK(far_plane > near_plane, "nurec_ops.", op, ": `far` must be > `near`, got near = ",
                    near_plane, ", far = ", far_plane);
    NUREC_CHECK(C * N < ((int64_t)1 << 31), "nurec_ops.", op,
                    ": cameras x Gaussians must be < 2^31, got ", C, " x ", N);
    NUREC_CHECK(C * ((width + NUREC_TILE - 1) / NUREC_TILE) *
                            ((height + NUREC_TILE - 1) / NUREC_TILE) < ((int64_t)1 << 31),
                    "nurec_ops.", op, ": cameras x tiles must be < 2^31 (`width`, `height` too large)");
    // CUDA grid limits of the per-tile kernels (blockIdx.y: tile rows, z:
    // cameras x channel passes)
    NUREC_CHECK(means.is_cpu() || (height + NUREC_TILE - 1) / NUREC_TILE <= 65535, "nurec_ops.", op,
                ": `height` must be at most ", 65535 * NUREC_TILE, " for one CUDA launch, got ", height);
    NUREC_CHECK(means.is_cpu() ||
                    C * ((D + NUREC_RC_CHANNELS_PER_PASS - 1) / NUREC_RC_CHANNELS_PER_PASS) <= 65535,
                "nurec_ops.", op, ": too many cameras (`viewmats`) x feature channels (`features`) for one "
                "CUDA launch: ", C, " x ", D);
    RcInputs in;
    nurec_rasterize_camera_params& p = in.p;
    p = nurec_rasterize_camera_params{};
    splat_gaussians(in, p, means, quats, scales, opacities, features, viewmats);
    in.Ks = dense(Ks);
    if (backgrounds.has_value()) in.backgrounds = dense(*backgrounds);
    p.num_cameras = C;
    p.num_gaussians = N;
    p.width = (int)width;
    p.height = (int)height;
    p.tiles_x = (int)((width + NUREC_TILE - 1) / NUREC_TILE);
    p.tiles_y = (int)((height + NUREC_TILE - 1) / NUREC_TILE);
    p.channels = D;
    p.sh_degree = (int)sh_degree;
    p.sh_coeffs = K;
    p.near_plane = near_plane;
    p.far_plane = far_plane;
    p.Ks = in.Ks.data_ptr();
    p.backgrounds = in.backgrounds.has_value() ? in.backgrounds->data_ptr() : nullptr;
    return in;
}


// CUDA grid limit of the per-tile kernels (blockIdx.z: cameras x channel
// passes x parts of the lists).
void rc_check_grid(const char* op, const Tensor& means, const nurec_rasterize_camera_params& p) {
    const int64_t parts = p.segments > 1 ? p.segments : 1;
    const int64_t passes = (p.channels + NUREC_RC_CHANNELS_PER_PASS - 1) / NUREC_RC_CHANNELS_PER_PASS;
    NUREC_CHECK(means.is_cpu() || p.num_cameras * passes * parts <= 65535, "nurec_ops.", op,
                ": too many cameras (`viewmats`) x feature channels (`features`) x segments for one CUDA "
                "launch: ", p.num_cameras, " x ", p.channels, " x ", parts);
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor,
           Tensor, Tensor>
rasterize_camera_fwd(Tensor means, Tensor quats, Tensor scales,
                                         Tensor opacities, Tensor features, Tensor viewmats,
                                         Tensor Ks, std::optional<Tensor> backgrounds,
                                         int64_t width, int64_t height, double near_plane,
                                         double far_plane, int64_t sh_degree, int64_t segments,
                                         int64_t segment_min, int64_t capacity, int64_t camera_model,
                                         std::optional<Tensor> model_params, int64_t shutter,
                                         std::optional<Tensor> shutter_params) {
    const char* op = "rasterize_camera";
    RcInputs in = rc_inputs(op, means, quats, scales, opacities, features, viewmats, Ks,
                            backgrounds, width, height, near_plane, far_plane, sh_degree);
    rc_model(op, in, camera_model, model_params);
    rc_shutter(op, in, shutter, shutter_params);
    nurec_rasterize_camera_params& p = in.p;
    const int64_t C = p.num_cameras, N = p.num_gaussians, D = p.channels, H = height, W = width;
    Tensor taus = empty_like_shape(in.means, {shutter != NUREC_SHUTTER_GLOBAL ? C : 0, N});
    p.taus = taus.data_ptr();
    splat_segments(op, p, in.means.is_cpu() ? 0 : segments, segment_min);
    rc_check_grid(op, in.means, p);
    static const SplatForward<nurec_rasterize_camera_params> launchers = {
        nurec_rasterize_camera_project_cpu, nurec_rasterize_camera_forward_cpu,
        NUREC_CUDA_ONLY(nurec_rasterize_camera_workspace_bytes),
        NUREC_CUDA_ONLY(nurec_rasterize_camera_project_cuda),
        NUREC_CUDA_ONLY(nurec_rasterize_camera_forward_cuda)};
    SplatBuffers b;
    splat_projection_buffers(b, in.means, p, C);
    Tensor colors = empty_like_shape(in.means, {sh_degree >= 0 ? C * N * 3 : 0});
    p.colors = colors.data_ptr();
    splat_project(op, in.means, p, launchers);
    Tensor render = empty_like_shape(in.means, {C, H, W, D});
    Tensor depth = empty_like_shape(in.means, {C, H, W, 1});
    Tensor alpha = empty_like_shape(in.means, {C, H, W, 1});
    splat_binning_buffers(b, in.means, p, C, H, W);
    Tensor seg_state, seg_last;
    splat_segment_buffers(in.means, p, C, H, W, D, seg_state, seg_last);
    p.render = render.data_ptr();
    p.depth = depth.data_ptr();
    p.alpha = alpha.data_ptr();
    b.isect = splat_forward(op, in.means, p, capacity, launchers);
    return {render, depth, alpha, b.records, b.counts, colors, b.isect, b.tile_ranges, b.final_T, b.last,
            b.status, seg_state, seg_last, taus};
}

// The gradients of the Gaussians, and per (camera, Gaussian) item its
// gradient record (NUREC_SPLAT_GREC_SIZE values: u, v, conic, opacity,
// depth; SPEC section 8's means2d gradient is its first two), and with
// `absgrad` SPEC 8's sum over pixels of |means2d gradient| [C * N, 2]
// (else [0, 2]).
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor> rasterize_camera_bwd(
    Tensor grad_render, Tensor grad_depth, Tensor grad_alpha, Tensor means, Tensor quats,
    Tensor scales, Tensor opacities, Tensor features, Tensor viewmats, Tensor Ks,
    std::optional<Tensor> backgrounds, Tensor records, Tensor counts, Tensor colors,
    Tensor isect_items, Tensor tile_ranges, Tensor final_T, Tensor last, Tensor status,
    Tensor seg_state, Tensor seg_last, int64_t width, int64_t height, double near_plane, double far_plane,
    int64_t sh_degree, int64_t segment_min, int64_t camera_model, std::optional<Tensor> model_params,
    int64_t shutter, std::optional<Tensor> shutter_params, std::optional<Tensor> taus, bool absgrad) {
    const char* op = "rasterize_camera_backward";
    RcInputs in = rc_inputs(op, means, quats, scales, opacities, features, viewmats, Ks,
                            backgrounds, width, height, near_plane, far_plane, sh_degree);
    rc_model(op, in, camera_model, model_params);
    rc_shutter(op, in, shutter, shutter_params);
    Tensor taus_d;
    if (shutter != NUREC_SHUTTER_GLOBAL) {
        NUREC_CHECK(taus.has_value(), "nurec_ops.", op, ": `taus` (the forward's output) is needed for shutter ",
                    shutter);
        check_shape(op, "taus", *taus, {in.p.num_cameras, in.p.num_gaussians}, "[C, N] (the forward's taus)");
        check_real(op, "taus", *taus, in.means, "means");
        check_device(op, "taus", *taus, in.means, "means");
        taus_d = dense(*taus);
        in.p.taus = taus_d.data_ptr();
    }
    nurec_rasterize_camera_params& p = in.p;
    const int64_t C = p.num_cameras, N = p.num_gaussians, D = p.channels, H = height, W = width;
    const int64_t P = C * N;
    check_shape(op, "grad_render", grad_render, {C, H, W, D}, "[C, H, W, D]");
    check_shape(op, "grad_depth", grad_depth, {C, H, W, 1}, "[C, H, W, 1]");
    check_shape(op, "grad_alpha", grad_alpha, {C, H, W, 1}, "[C, H, W, 1]");
    check_real(op, "grad_render", grad_render, means, "means");
    check_real(op, "grad_depth", grad_depth, means, "means");
    check_real(op, "grad_alpha", grad_alpha, means, "means");
    check_shape(op, "colors", colors, {sh_degree >= 0 ? P * 3 : 0}, "[C * N * 3] (SH) or [0]");
    for (const Tensor* t : {&grad_render, &grad_depth, &grad_alpha, &colors})
        check_device(op, "saved tensors and gradients", *t, means, "means");
    SplatBuffers b = splat_saved(op, means, p, C, H, W, "[C, H, W]", records, counts, isect_items,
                                 tile_ranges, final_T, last, status);
    splat_segments_saved(op, means, p, C, H, W, D, seg_state, seg_last, segment_min);
    rc_check_grid(op, in.means, p);
    grad_render = dense(grad_render);
    grad_depth = dense(grad_depth);
    grad_alpha = dense(grad_alpha);
    colors = dense(colors);
    p.colors = colors.data_ptr();
    p.grad_render = grad_render.data_ptr();
    p.grad_depth = grad_depth.data_ptr();
    p.grad_alpha = grad_alpha.data_ptr();
    Tensor grad_records = empty_like_shape(in.means, {P, NUREC_RC_GREC_SIZE});
    Tensor grad_colors = empty_like_shape(in.means, {sh_degree >= 0 ? P * 3 : 0});
    p.grad_records = grad_records.data_ptr();
    p.grad_colors = grad_colors.data_ptr();
    // per pixel |d loss / d (u, v)| needs the whole gradient of a pixel in
    // one walk: one CUDA pass of channels (the CPU walks all at once, and
    // refuses the same inputs so that both devices agree)
    NUREC_CHECK(!absgrad || D <= NUREC_RC_CHANNELS_PER_PASS, "nurec_ops.", op, ": `absgrad` supports at most ",
                NUREC_RC_CHANNELS_PER_PASS, " feature channels (RGB or SH), got ", D);
    Tensor grad_abs = empty_like_shape(in.means, {absgrad ? P : 0, 2});
    p.grad_abs = absgrad ? grad_abs.data_ptr() : nullptr;
    SplatGrads g = splat_grads(in.means, p,
                               sh_degree >= 0 ? empty_like_shape(in.means, {N, p.sh_coeffs, 3})
                                              : empty_like_shape(in.means, {N, D}));
    splat_check_status(op, launch(op, in.means, p, nurec_rasterize_camera_backward_cpu,
                                  NUREC_CUDA_ONLY(nurec_rasterize_camera_backward_cuda)));
    return {g.means, g.quats, g.scales, g.opacities, g.features, grad_records, grad_abs};
}
// ====================================================== end rasterize_camera

// =========================================================== rasterize_lidar
// (issue 4) Lidar Gaussian rasterizer: validation, allocation of outputs and
// intermediates (sizes from shapes and the host-chosen `capacity` only), and
// the CPU / CUDA launchers of csrc/rasterize_lidar and csrc/tiles (the
// binning and the intermediates through the splat helpers above the camera).

struct RlInputs : SplatGaussians {
    nurec_rasterize_lidar_params p;
    Tensor row_el, col_az, col_order, row_off;
};

RlInputs rl_inputs(const char* op, const Tensor& means, const Tensor& quats, const Tensor& scales,
                   const Tensor& opacities, const Tensor& features, const Tensor& viewmats,
                   const Tensor& row_elevations, const Tensor& column_azimuths,
                   const Tensor& column_order, const Tensor& row_azimuth_offsets, double near_plane,
                   double far_plane, double eps2d) {
    const int64_t N = splat_gaussian_shapes(op, means, quats, scales, opacities);
    check_shape(op, "features", features, {N, -1}, "[N, D] (N = means.shape[0])");
    const int64_t D = features.size(1);
    NUREC_CHECK(D >= 1, "nurec_ops.", op, ": `features` must have at least one channel, got ",
                shape_str(features));
    check_shape(op, "viewmats", viewmats, {-1, 4, 4}, "[C, 4, 4]");
    const int64_t C = viewmats.size(0);
    check_shape(op, "row_elevations", row_elevations, {-1}, "[R]");
    const int64_t R = row_elevations.size(0);
    check_shape(op, "column_azimuths", column_azimuths, {-1}, "[W]");
    const int64_t W = column_azimuths.size(0);
    check_shape(op, "row_azimuth_offsets", row_azimuth_offsets, {R},
                "[R] (R = row_elevations.shape[0])");
    check_shape(op, "column_order", column_order, {W}, "[W] (W = column_azimuths.shape[0])");
    check_dtype(op, "column_order", column_order, ScalarType::Int);
    check_device(op, "column_order", column_order, means, "means");
    check_like_means(op, means, {{"quats", &quats}, {"scales", &scales}, {"opacities", &opacities},
                                 {"features", &features}, {"viewmats", &viewmats},
                                 {"row_elevations", &row_elevations}, {"column_azimuths", &column_azimuths},
                                 {"row_azimuth_offsets", &row_azimuth_offsets}});
    NUREC_CHECK(R <= (1 << 20), "nurec_ops.", op,
                ": `row_elevations` may have at most 2^20 rows, got ", R);
    NUREC_CHECK(W <= (1 << 24), "nurec_ops.", op,
                ": `column_azimuths` may have at most 2^24 columns, got ", W);
    NUREC_CHECK(near_plane > 0, "nurec_ops.", op, ": `near` must be > 0, got ", near_plane);
    NUREC_CHECK(far_plane > near_plane, "nurec_ops.", op,
                ": `far` must be > `near`, got near = ", near_plane, ", far = ", far_plane);
    NUREC_CHECK(eps2d >= 0 && eps2d < 1e30, "nurec_ops.", op,
                ": `eps2d` must be finite and >= 0, got ", eps2d);
    NUREC_CHECK(C * N < ((int64_t)1 << 31), "nurec_ops.", op,
                ": sweeps x Gaussians must be < 2^31, got ", C, " x ", N);
    const int64_t ty = (R + NUREC_RL_TILE_ROWS - 1) / NUREC_RL_TILE_ROWS;
    const int64_t tx = (W + NUREC_RL_TILE_COLS - 1) / NUREC_RL_TILE_COLS;
    NUREC_CHECK(C * tx * ty < ((int64_t)1 << 31), "nurec_ops.", op,
                ": sweeps x tiles must be < 2^31 (too many sweeps, rows or columns)");
    RlInputs in;
    nurec_rasterize_lidar_params& p = in.p;
    p = nurec_rasterize_lidar_params{};
    splat_gaussians(in, p, means, quats, scales, opacities, features, viewmats);
    in.row_el = dense(row_elevations);
    in.col_az = dense(column_azimuths);
    in.col_order = dense(column_order);
    in.row_off = dense(row_azimuth_offsets);
    p.num_sweeps = C;
    p.num_gaussians = N;
    p.rows = (int)R;
    p.cols = (int)W;
    p.tiles_x = (int)tx;
    p.tiles_y = (int)ty;
    p.channels = D;
    p.near_plane = near_plane;
    p.far_plane = far_plane;
    p.eps2d = eps2d;
    p.row_elevations = in.row_el.data_ptr();
    p.column_azimuths = in.col_az.data_ptr();
    p.column_order = (const int32_t*)in.col_order.data_ptr();
    p.row_azimuth_offsets = in.row_off.data_ptr();
    return in;
}

// CUDA grid limits of the per-tile kernels (blockIdx.y: tile rows, z: sweeps
// x channel passes of 2 x parts of the lists).
void rl_check_grid(const char* op, const nurec_rasterize_lidar_params& p) {
    const int64_t parts = p.segments > 1 ? p.segments : 1;
    NUREC_CHECK(p.tiles_y <= 65535 && p.num_sweeps * ((p.channels + 1) / 2) * parts <= 65535, "nurec_ops.",
                op, ": too many rows, sweeps, feature channels or segments for one CUDA launch");
}

// SPEC 7 for a lidar: the packed start / end poses per sweep [C, 16] and the
// canonical columns' firing times [W] (nurec_ops/rasterize_lidar.py), both
// or neither. Keeps the dense tensors in `keep`.
void rl_shutter(const char* op, nurec_rasterize_lidar_params& p, const Tensor& means,
                const std::optional<Tensor>& shutter_params, const std::optional<Tensor>& column_times,
                Tensor keep[2]) {
    p.shutter_params = nullptr;
    p.column_times = nullptr;
    if (!shutter_params.has_value()) return;
    check_shape(op, "shutter_params", *shutter_params, {p.num_sweeps, NUREC_RS_PARAMS},
                "[C, 16] (C = viewmats.shape[0]; packed by nurec_ops._rolling_shutter)");
    check_real(op, "shutter_params", *shutter_params, means, "means");
    check_device(op, "shutter_params", *shutter_params, means, "means");
    NUREC_CHECK(column_times.has_value(), "nurec_ops.", op, ": `column_times` is needed with `shutter_params`");
    check_shape(op, "column_times", *column_times, {p.cols}, "[W] (W = column_azimuths.shape[0])");
    check_real(op, "column_times", *column_times, means, "means");
    check_device(op, "column_times", *column_times, means, "means");
    keep[0] = dense(*shutter_params);
    keep[1] = dense(*column_times);
    p.shutter_params = keep[0].data_ptr();
    p.column_times = keep[1].data_ptr();
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor>
rasterize_lidar_fwd(Tensor means, Tensor quats, Tensor scales, Tensor opacities, Tensor features,
                    Tensor viewmats, Tensor row_elevations, Tensor column_azimuths, Tensor column_order,
                    Tensor row_azimuth_offsets, double near_plane, double far_plane, double eps2d,
                    int64_t segments, int64_t segment_min, int64_t capacity,
                    std::optional<Tensor> shutter_params, std::optional<Tensor> column_times) {
    const char* op = "rasterize_lidar";
    RlInputs in = rl_inputs(op, means, quats, scales, opacities, features, viewmats, row_elevations,
                            column_azimuths, column_order, row_azimuth_offsets, near_plane, far_plane, eps2d);
    nurec_rasterize_lidar_params& p = in.p;
    const int64_t C = p.num_sweeps, N = p.num_gaussians, D = p.channels, R = p.rows, W = p.cols;
    Tensor rs_keep[2];
    rl_shutter(op, p, in.means, shutter_params, column_times, rs_keep);
    Tensor taus = empty_like_shape(in.means, {p.shutter_params ? C : 0, N});
    p.taus = taus.data_ptr();
    splat_segments(op, p, in.means.is_cpu() ? 0 : segments, segment_min);
    if (!in.means.is_cpu()) rl_check_grid(op, p);
    static const SplatForward<nurec_rasterize_lidar_params> launchers = {
        nurec_rasterize_lidar_project_cpu, nurec_rasterize_lidar_forward_cpu,
        NUREC_CUDA_ONLY(nurec_rasterize_lidar_workspace_bytes),
        NUREC_CUDA_ONLY(nurec_rasterize_lidar_project_cuda),
        NUREC_CUDA_ONLY(nurec_rasterize_lidar_forward_cuda)};
    SplatBuffers b;
    splat_projection_buffers(b, in.means, p, C);
    Tensor boxes = empty_dense(in.means, {C, N, NUREC_BOX_SIZE}, aoti_torch_dtype_int32());
    p.boxes = (int32_t*)boxes.data_ptr();
    splat_project(op, in.means, p, launchers);
    Tensor out = empty_like_shape(in.means, {C, R, W, D});
    Tensor range = empty_like_shape(in.means, {C, R, W, 1});
    Tensor alpha = empty_like_shape(in.means, {C, R, W, 1});
    splat_binning_buffers(b, in.means, p, C, R, W);
    Tensor seg_state, seg_last;
    splat_segment_buffers(in.means, p, C, R, W, D, seg_state, seg_last);
    p.out_features = out.data_ptr();
    p.range = range.data_ptr();
    p.alpha = alpha.data_ptr();
    b.isect = splat_forward(op, in.means, p, capacity, launchers);
    return {out,      range,  alpha,    b.records, b.counts,  b.isect,
            b.tile_ranges, b.final_T, b.last, b.status, seg_state, seg_last, taus};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor> rasterize_lidar_bwd(
    Tensor grad_features, Tensor grad_range, Tensor grad_alpha, Tensor means, Tensor quats,
    Tensor scales, Tensor opacities, Tensor features, Tensor viewmats, Tensor row_elevations,
    Tensor column_azimuths, Tensor column_order, Tensor row_azimuth_offsets, Tensor records, Tensor counts,
    Tensor isect_items, Tensor tile_ranges, Tensor final_T, Tensor last, Tensor status,
    Tensor seg_state, Tensor seg_last, double near_plane, double far_plane, double eps2d,
    int64_t segment_min, std::optional<Tensor> shutter_params, std::optional<Tensor> column_times,
    std::optional<Tensor> taus, bool absgrad) {
    const char* op = "rasterize_lidar_backward";
    RlInputs in = rl_inputs(op, means, quats, scales, opacities, features, viewmats, row_elevations,
                            column_azimuths, column_order, row_azimuth_offsets, near_plane, far_plane, eps2d);
    nurec_rasterize_lidar_params& p = in.p;
    const int64_t C = p.num_sweeps, N = p.num_gaussians, D = p.channels, R = p.rows, W = p.cols;
    Tensor rs_keep[2], taus_d;
    rl_shutter(op, p, in.means, shutter_params, column_times, rs_keep);
    if (p.shutter_params) {
        NUREC_CHECK(taus.has_value(), "nurec_ops.", op, ": `taus` (the forward's output) is needed with "
                    "`shutter_params`");
        check_shape(op, "taus", *taus, {C, N}, "[C, N] (the forward's taus)");
        check_real(op, "taus", *taus, means, "means");
        check_device(op, "taus", *taus, means, "means");
        taus_d = dense(*taus);
        p.taus = taus_d.data_ptr();
    }
    check_shape(op, "grad_features", grad_features, {C, R, W, D}, "[C, R, W, D]");
    check_shape(op, "grad_range", grad_range, {C, R, W, 1}, "[C, R, W, 1]");
    check_shape(op, "grad_alpha", grad_alpha, {C, R, W, 1}, "[C, R, W, 1]");
    check_real(op, "grad_features", grad_features, means, "means");
    check_real(op, "grad_range", grad_range, means, "means");
    check_real(op, "grad_alpha", grad_alpha, means, "means");
    for (const Tensor* t : {&grad_features, &grad_range, &grad_alpha})
        check_device(op, "saved tensors and gradients", *t, means, "means");
    SplatBuffers b = splat_saved(op, means, p, C, R, W, "[C, R, W]", records, counts, isect_items,
                                 tile_ranges, final_T, last, status);
    splat_segments_saved(op, means, p, C, R, W, D, seg_state, seg_last, segment_min);
    grad_features = dense(grad_features);
    grad_range = dense(grad_range);
    grad_alpha = dense(grad_alpha);
    p.grad_out_features = grad_features.data_ptr();
    p.grad_range = grad_range.data_ptr();
    p.grad_alpha = grad_alpha.data_ptr();
    Tensor grad_records = empty_like_shape(in.means, {C * N, NUREC_SPLAT_GREC_SIZE});
    p.grad_records = grad_records.data_ptr();
    // as the camera's: the whole gradient of a ray in one walk
    NUREC_CHECK(!absgrad || D <= NUREC_RL_CHANNELS_PER_PASS, "nurec_ops.", op, ": `absgrad` supports at most ",
                NUREC_RL_CHANNELS_PER_PASS, " feature channels, got ", D);
    Tensor grad_abs = empty_like_shape(in.means, {absgrad ? C * N : 0, 2});
    p.grad_abs = absgrad ? grad_abs.data_ptr() : nullptr;
    SplatGrads g = splat_grads(in.means, p, empty_like_shape(in.means, {N, D}));
    if (!in.means.is_cpu()) rl_check_grid(op, p);
    splat_check_status(op, launch(op, in.means, p, nurec_rasterize_lidar_backward_cpu,
                                  NUREC_CUDA_ONLY(nurec_rasterize_lidar_backward_cuda)));
    return {g.means, g.quats, g.scales, g.opacities, g.features, grad_records, grad_abs};
}
// ======================================================= end rasterize_lidar

// ================================================================ splat_meta
// SPEC section 8's (means2d, radii, depths) of either rasterizer's forward
// records, in one pass.
std::tuple<Tensor, Tensor, Tensor> splat_meta(Tensor records, Tensor counts, std::optional<Tensor> cell,
                                              double cell_u, double cell_v) {
    const char* op = "splat_meta";
    check_shape(op, "records", records, {-1, -1, NUREC_TREC_SIZE}, "[C, N, 8] (a rasterizer forward's records)");
    check_real(op, "records", records, records, "records");
    const int64_t C = records.size(0), N = records.size(1);
    check_shape(op, "counts", counts, {C, N}, "[C, N]");
    check_dtype(op, "counts", counts, ScalarType::Long);
    check_device(op, "counts", counts, records, "records");
    NUREC_CHECK(cell_u > 0 && cell_v > 0, "nurec_ops.", op, ": the cell size must be > 0, got ", cell_u, " x ",
                cell_v);
    nurec_splat_meta_params p = {};
    p.dtype = dtype_code(records);
    p.num_items = C * N;
    records = dense(records);
    counts = dense(counts);
    Tensor cell_d;
    if (cell.has_value()) {
        check_shape(op, "cell", *cell, {2}, "[2]");
        check_real(op, "cell", *cell, records, "records");
        check_device(op, "cell", *cell, records, "records");
        cell_d = dense(*cell);
        p.cell = cell_d.data_ptr();
    }
    p.records = records.data_ptr();
    p.counts = (const int64_t*)counts.data_ptr();
    p.cell_u = cell_u;
    p.cell_v = cell_v;
    Tensor means2d = empty_like_shape(records, {C, N, 2});
    Tensor radii = empty_dense(records, {C, N, 2}, aoti_torch_dtype_int32());
    Tensor depths = empty_like_shape(records, {C, N});
    p.means2d = means2d.data_ptr();
    p.radii = (int32_t*)radii.data_ptr();
    p.depths = depths.data_ptr();
    check_status(op, launch(op, records, p, nurec_splat_meta_cpu, NUREC_CUDA_ONLY(nurec_splat_meta_cuda)));
    return {means2d, radii, depths};
}
// ============================================================ end splat_meta

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
          "-> (Tensor means_w, Tensor quats_w, Tensor scales, Tensor opacities, "
          "Tensor track_poses, Tensor track_inside)");
    m.def("collect_backward(Tensor grad_means_w, Tensor grad_quats_w, Tensor grad_scales, "
          "Tensor grad_opacities, Tensor means, Tensor quats, Tensor log_scales, "
          "Tensor opacity_logits, Tensor track_ids, Tensor track_poses, Tensor track_inside, "
          "Tensor key_poses, Tensor key_times, Tensor track_ranges, Tensor query_times, str mode) "
          "-> (Tensor, Tensor, Tensor, Tensor, Tensor)");
    // ---- rasterize_camera (issue 3)
    m.def("rasterize_camera_fwd(Tensor means, Tensor quats, Tensor scales, Tensor opacities, "
          "Tensor features, Tensor viewmats, Tensor Ks, Tensor? backgrounds, int width, "
          "int height, float near, float far, int sh_degree, int segments, int segment_min, "
          "int capacity, int camera_model=0, Tensor? model_params=None, int shutter=0, "
          "Tensor? shutter_params=None) -> (Tensor render, "
          "Tensor depth, Tensor alpha, Tensor records, Tensor counts, Tensor colors, "
          "Tensor isect_items, Tensor tile_ranges, Tensor final_T, Tensor last, Tensor status, "
          "Tensor seg_state, Tensor seg_last, Tensor taus)");
    m.def("rasterize_camera_bwd(Tensor grad_render, Tensor grad_depth, Tensor grad_alpha, "
          "Tensor means, Tensor quats, Tensor scales, Tensor opacities, Tensor features, "
          "Tensor viewmats, Tensor Ks, Tensor? backgrounds, Tensor records, Tensor counts, "
          "Tensor colors, Tensor isect_items, Tensor tile_ranges, Tensor final_T, Tensor last, "
          "Tensor status, Tensor seg_state, Tensor seg_last, int width, int height, float near, "
          "float far, int sh_degree, int segment_min, int camera_model=0, Tensor? model_params=None, "
          "int shutter=0, Tensor? shutter_params=None, Tensor? taus=None, bool absgrad=False) -> (Tensor, Tensor, Tensor, "
          "Tensor, Tensor, Tensor grad_records, Tensor grad_abs)");
    // ---- end rasterize_camera
    // ---- rasterize_lidar (issue 4)
    m.def("rasterize_lidar_fwd(Tensor means, Tensor quats, Tensor scales, Tensor opacities, "
          "Tensor features, Tensor viewmats, Tensor row_elevations, Tensor column_azimuths, "
          "Tensor column_order, Tensor row_azimuth_offsets, float near, float far, float eps2d, int segments, "
          "int segment_min, int capacity, Tensor? shutter_params=None, Tensor? column_times=None) -> "
          "(Tensor features_out, Tensor range, Tensor alpha, Tensor records, Tensor counts, "
          "Tensor isect_items, Tensor tile_ranges, Tensor final_T, Tensor last, Tensor status, "
          "Tensor seg_state, Tensor seg_last, Tensor taus)");
    m.def("rasterize_lidar_bwd(Tensor grad_features, Tensor grad_range, Tensor grad_alpha, "
          "Tensor means, Tensor quats, Tensor scales, Tensor opacities, Tensor features, "
          "Tensor viewmats, Tensor row_elevations, Tensor column_azimuths, Tensor column_order, "
          "Tensor row_azimuth_offsets, Tensor records, Tensor counts, Tensor isect_items, "
          "Tensor tile_ranges, Tensor final_T, Tensor last, Tensor status, Tensor seg_state, "
          "Tensor seg_last, float near, float far, float eps2d, int segment_min, Tensor? shutter_params=None, "
          "Tensor? column_times=None, Tensor? taus=None, bool absgrad=False) "
          "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor grad_records, Tensor grad_abs)");
    // ---- end rasterize_lidar
    m.def("splat_meta(Tensor records, Tensor counts, Tensor? cell, float cell_u, float cell_v) "
          "-> (Tensor means2d, Tensor radii, Tensor depths)");
}

// One function serves both dispatch keys: it branches on the device itself.
#define NUREC_REGISTER_IMPLS(m)                                                          \
    m.impl("interpolate_track_poses", TORCH_BOX(&interpolate_track_poses));             \
    m.impl("interpolate_track_poses_backward", TORCH_BOX(&interpolate_track_poses_backward)); \
    m.impl("collect_gaussian_parameters", TORCH_BOX(&collect_gaussian_parameters));     \
    m.impl("collect_gaussian_parameters_backward",                                       \
           TORCH_BOX(&collect_gaussian_parameters_backward));                             \
    m.impl("collect", TORCH_BOX(&collect));                                              \
    m.impl("collect_backward", TORCH_BOX(&collect_backward));                            \
    m.impl("rasterize_camera_fwd", TORCH_BOX(&rasterize_camera_fwd)); /* issue 3 */      \
    m.impl("rasterize_camera_bwd", TORCH_BOX(&rasterize_camera_bwd));                  \
    m.impl("rasterize_lidar_fwd", TORCH_BOX(&rasterize_lidar_fwd)); /* issue 4 */        \
    m.impl("rasterize_lidar_bwd", TORCH_BOX(&rasterize_lidar_bwd));                    \
    m.impl("splat_meta", TORCH_BOX(&splat_meta));

STABLE_TORCH_LIBRARY_IMPL(nurec_ops, CPU, m) { NUREC_REGISTER_IMPLS(m) }
#ifdef NUREC_WITH_CUDA
STABLE_TORCH_LIBRARY_IMPL(nurec_ops, CUDA, m) { NUREC_REGISTER_IMPLS(m) }
#endif
