// rasterize_camera (SPEC sections 3, 6, 7, 8).
// The glue from PyTorch tensors to the family's plain C params struct
// (validate, make dense, allocate outputs, call the CPU or CUDA launcher on
// the current stream), and the family's schemas and kernels, registered
// beside it (a fragment of the nurec_ops library, csrc/register.cpp). Only
// PyTorch's stable ABI is used here.
#include "glue_launch.h"
#include "tiles/splat_glue.h"

#include <cstdlib>
#include <initializer_list>
#include <utility>

extern "C" {
#include "rasterize_camera/rasterize_camera.h"
#include "sensors/camera_models.h"
#include "sensors/rolling_shutter.h"
#include "tiles/tiles.h"
}

using namespace nurec;

namespace {
struct RcInputs : SplatGaussians {
    nurec_rasterize_camera_params p;
    Tensor Ks;
    std::optional<Tensor> backgrounds;
    Tensor model_params;
    Tensor viewmats_end;
};

// SPEC 7: the shutter's code and the cameras' poses at the frame's end
// [C, 4, 4] (the kernels pack each camera's two poses themselves).
void rc_shutter(const char* op, RcInputs& in, int64_t shutter, const std::optional<Tensor>& viewmats_end) {
    NUREC_CHECK(shutter >= NUREC_SHUTTER_GLOBAL && shutter <= NUREC_SHUTTER_RIGHT_TO_LEFT, "nurec_ops.", op,
                ": `shutter` must be 0..4 (global, top_to_bottom, bottom_to_top, left_to_right, right_to_left), "
                "got ", shutter);
    in.p.shutter = (int)shutter;
    in.p.viewmats_end = nullptr;
    if (shutter == NUREC_SHUTTER_GLOBAL) return;
    NUREC_CHECK(viewmats_end.has_value(), "nurec_ops.", op, ": `viewmats_end` is needed for shutter ", shutter);
    check_shape(op, "viewmats_end", *viewmats_end, {in.p.num_cameras, 4, 4}, "[C, 4, 4] (C = viewmats.shape[0])");
    check_real(op, "viewmats_end", *viewmats_end, in.means, "means");
    check_device(op, "viewmats_end", *viewmats_end, in.means, "means");
    in.viewmats_end = dense(*viewmats_end);
    in.p.viewmats_end = in.viewmats_end.data_ptr();
}

// gsplat's rasterize modes: antialiased (each item's opacity times its
// compensation), eps2d, the dilation added to each 2D covariance, and
// radius_clip, the radii (whole pixels) at or under which an item is
// dropped (the backward passes 0: it reads which items the forward kept
// from their counts).
void rc_filter(const char* op, RcInputs& in, bool antialiased, double eps2d, double radius_clip) {
    NUREC_CHECK(eps2d >= 0 && eps2d <= 1e6, "nurec_ops.", op, ": `eps2d` must be in [0, 1e6] px^2, got ", eps2d);
    NUREC_CHECK(radius_clip >= 0, "nurec_ops.", op, ": `radius_clip` must be >= 0 px, got ", radius_clip);
    in.p.antialiased = antialiased ? 1 : 0;
    in.p.eps2d = eps2d;
    in.p.radius_clip = radius_clip < 2147483647.0 ? (int32_t)radius_clip : (int32_t)2147483647;
}

// SPEC 6: the camera model's code and its packed parameters per camera
// [C, NUREC_CAM_PARAMS] (nurec_ops/_camera_models.py packs them).
void rc_model(const char* op, RcInputs& in, int64_t camera_model, const std::optional<Tensor>& model_params) {
    NUREC_CHECK(camera_model >= NUREC_CAM_PINHOLE && camera_model <= NUREC_CAM_LAST, "nurec_ops.", op,
                ": `camera_model` must be 0..", (int)NUREC_CAM_LAST, " (pinhole, opencv, fisheye, ftheta, ortho), got ",
                camera_model);
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
    check_shape(op, "viewmats", viewmats, {-1, 4, 4}, "[C, 4, 4]");
    const int64_t C = viewmats.size(0);
    // without SH, features per Gaussian [N, D] or per (camera, Gaussian) item [C, N, D]
    const bool per_camera = sh_degree < 0 && features.dim() == 3;
    if (per_camera) {
        check_shape(op, "features", features, {C, N, -1},
                    "[C, N, D] per camera (C = viewmats.shape[0], N = means.shape[0]), [N, D], or SH [N, K, 3] "
                    "with `sh_degree`");
        D = features.size(2);
        NUREC_CHECK(D >= 1, "nurec_ops.", op, ": `features` must have at least one channel, got ",
                        shape_str(features));
    } else if (sh_degree < 0) {
        check_shape(op, "features", features, {N, -1},
                    "[N, D] (N = means.shape[0]), [C, N, D] per camera, or SH [N, K, 3] with sh_degree");
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
    p.features_per_camera = per_camera ? 1 : 0;
    p.sh_coeffs = K;
    p.near_plane = near_plane;
    p.far_plane = far_plane;
    p.Ks = in.Ks.data_ptr();
    p.backgrounds = in.backgrounds.has_value() ? in.backgrounds->data_ptr() : nullptr;
    return in;
}


// CUDA grid limit of the list's grid where lists are cut
// (tiles/splat_parts_grid_cuda.cuh: one dimension of cameras x channel
// passes x tiles first parts and passes x capacity / segment_min later
// parts); the 3-D grid's are rc_inputs' checks (the dense layout, for
// measuring, falls back to the list's where its grid would not fit).
void rc_check_grid(const char* op, const Tensor& means, const nurec_rasterize_camera_params& p, int64_t capacity) {
    if (means.is_cpu()) return;
    const int64_t passes = (p.channels + NUREC_RC_CHANNELS_PER_PASS - 1) / NUREC_RC_CHANNELS_PER_PASS;
    const int64_t tiles = (int64_t)p.tiles_x * p.tiles_y;
    const int64_t chunks = nurec_splat_part_chunks(p.segments, capacity, p.segment_min);
    NUREC_CHECK(chunks == 0 || p.num_cameras * passes * tiles + passes * chunks <= INT32_MAX, "nurec_ops.", op,
                ": too many cameras (`viewmats`) x tiles (`width`, `height`) x feature channels (`features`) "
                "for one CUDA launch where lists are cut (`capacity` / `segment_min`): ", p.num_cameras, " x ",
                tiles, " x ", p.channels, ", ", capacity, " / ", p.segment_min);
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor,
           Tensor, Tensor, Tensor, Tensor, Tensor, Tensor>
rasterize_camera_fwd(Tensor means, Tensor quats, Tensor scales,
                                         Tensor opacities, Tensor features, Tensor viewmats,
                                         Tensor Ks, std::optional<Tensor> backgrounds,
                                         int64_t width, int64_t height, double near_plane,
                                         double far_plane, int64_t sh_degree, int64_t segments,
                                         int64_t segment_min, int64_t capacity, int64_t camera_model,
                                         std::optional<Tensor> model_params, int64_t shutter,
                                         std::optional<Tensor> viewmats_end, bool meta, bool antialiased,
                                         double eps2d, double radius_clip) {
    const char* op = "rasterize_camera";
    RcInputs in = rc_inputs(op, means, quats, scales, opacities, features, viewmats, Ks,
                            backgrounds, width, height, near_plane, far_plane, sh_degree);
    rc_model(op, in, camera_model, model_params);
    rc_shutter(op, in, shutter, viewmats_end);
    rc_filter(op, in, antialiased, eps2d, radius_clip);
    nurec_rasterize_camera_params& p = in.p;
    const int64_t C = p.num_cameras, N = p.num_gaussians, D = p.channels, H = height, W = width;
    Tensor taus = empty_like_shape(in.means, {shutter != NUREC_SHUTTER_GLOBAL ? C : 0, N});
    p.taus = taus.data_ptr();
    splat_segments(op, p, in.means.is_cpu() ? 0 : segments, segment_min);
    rc_check_grid(op, in.means, p, capacity);
    static const SplatForward<nurec_rasterize_camera_params> launchers = {
        nurec_rasterize_camera_project_cpu, nurec_rasterize_camera_forward_cpu,
        NUREC_CUDA_ONLY(nurec_rasterize_camera_workspace_bytes),
        NUREC_CUDA_ONLY(nurec_rasterize_camera_project_cuda),
        NUREC_CUDA_ONLY(nurec_rasterize_camera_forward_cuda)};
    SplatBuffers b;
    splat_projection_buffers(b, in.means, p, C);
    Tensor colors = empty_like_shape(in.means, {sh_degree >= 0 ? C * N * 3 : 0});
    p.colors = colors.data_ptr();
    Tensor boxes = empty_dense(in.means, {C, N, NUREC_BOX_SIZE}, aoti_torch_dtype_int32());
    p.boxes = (int32_t*)boxes.data_ptr();
    const SplatMeta m = splat_meta_outputs(op, in.means, p, C, meta, std::nullopt, 1.0, 1.0); /* pixels */
    splat_project(op, in.means, p, launchers);
    Tensor render = empty_like_shape(in.means, {C, H, W, D});
    Tensor depth = empty_like_shape(in.means, {C, H, W, 1});
    Tensor alpha = empty_like_shape(in.means, {C, H, W, 1});
    splat_binning_buffers(b, in.means, p, C, H, W);
    Tensor seg_state, seg_last;
    splat_segment_buffers(in.means, p, capacity, C * (int64_t)p.tiles_y * p.tiles_x, NUREC_TILE * NUREC_TILE, D,
                          seg_state, seg_last);
    Tensor seg_later = splat_later_parts_output(in.means, p, capacity);
    p.render = render.data_ptr();
    p.depth = depth.data_ptr();
    p.alpha = alpha.data_ptr();
    b.isect = splat_forward(op, in.means, p, capacity, launchers);
    return {render, depth, alpha, b.records, b.counts, colors, b.isect, b.tile_ranges, b.final_T, b.last,
            b.status, seg_state, seg_last, taus, seg_later, m.means2d, m.radii, m.depths};
}

// The gradients of the Gaussians, and per (camera, Gaussian) item its
// gradient record (NUREC_SPLAT_GREC_SIZE values: u, v, conic, opacity,
// depth; SPEC section 8's means2d gradient is its first two), and with
// `absgrad` 16 values a row, slots 8, 9 SPEC 8's sum over pixels of
// |means2d gradient| (tiles/splat.h, NUREC_SPLAT_GREC_ABS).
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor> rasterize_camera_bwd(
    Tensor grad_render, std::optional<Tensor> grad_depth, std::optional<Tensor> grad_alpha, Tensor means, Tensor quats,
    Tensor scales, Tensor opacities, Tensor features, Tensor viewmats, Tensor Ks,
    std::optional<Tensor> backgrounds, Tensor records, Tensor counts, Tensor colors,
    Tensor isect_items, Tensor tile_ranges, Tensor final_T, Tensor last, Tensor status,
    Tensor seg_state, Tensor seg_last, int64_t width, int64_t height, double near_plane, double far_plane,
    int64_t sh_degree, int64_t segment_min, int64_t camera_model, std::optional<Tensor> model_params,
    int64_t shutter, std::optional<Tensor> viewmats_end, std::optional<Tensor> taus, bool absgrad,
    std::optional<Tensor> seg_later, bool means2d_grad, bool antialiased, double eps2d) {
    const char* op = "rasterize_camera_backward";
    RcInputs in = rc_inputs(op, means, quats, scales, opacities, features, viewmats, Ks,
                            backgrounds, width, height, near_plane, far_plane, sh_degree);
    rc_model(op, in, camera_model, model_params);
    rc_shutter(op, in, shutter, viewmats_end);
    rc_filter(op, in, antialiased, eps2d, 0.0); /* as the forward's: its projection is recomputed */
    Tensor taus_d;
    if (shutter != NUREC_SHUTTER_GLOBAL)
        in.p.taus = splat_saved_taus(op, taus, in.p.num_cameras, in.p.num_gaussians, in.means, taus_d,
                                     "for shutter " + std::to_string(shutter));
    nurec_rasterize_camera_params& p = in.p;
    const int64_t C = p.num_cameras, N = p.num_gaussians, D = p.channels, H = height, W = width;
    const int64_t P = C * N;
    check_shape(op, "grad_render", grad_render, {C, H, W, D}, "[C, H, W, D]");
    check_real(op, "grad_render", grad_render, means, "means");
    // depth's and alpha's may be absent (a loss that reads only the render)
    p.grad_depth = splat_optional_cotangent(op, "grad_depth", grad_depth, C, H, W, "[C, H, W, 1]", means);
    p.grad_alpha = splat_optional_cotangent(op, "grad_alpha", grad_alpha, C, H, W, "[C, H, W, 1]", means);
    check_shape(op, "colors", colors, {sh_degree >= 0 ? P * 3 : 0}, "[C * N * 3] (SH) or [0]");
    for (const Tensor* t : {&grad_render, &colors})
        check_device(op, "saved tensors and gradients", *t, means, "means");
    SplatBuffers b = splat_saved(op, means, p, C, H, W, "[C, H, W]", records, counts, isect_items,
                                 tile_ranges, final_T, last, status);
    splat_segments_saved(op, means, p, C * (int64_t)p.tiles_y * p.tiles_x, NUREC_TILE * NUREC_TILE, D, seg_state,
                         seg_last, segment_min);
    rc_check_grid(op, in.means, p, p.capacity);
    const std::optional<Tensor> later = splat_later_parts_saved(op, in.means, p, seg_later);
    grad_render = dense(grad_render);
    colors = dense(colors);
    p.colors = colors.data_ptr();
    p.grad_render = grad_render.data_ptr();
    // per pixel |d loss / d (u, v)| needs the whole gradient of a pixel in
    // one walk: one CUDA pass of channels (the CPU walks all at once, and
    // refuses the same inputs so that both devices agree)
    NUREC_CHECK(!absgrad || D <= NUREC_RC_CHANNELS_PER_PASS, "nurec_ops.", op, ": `absgrad` supports at most ",
                NUREC_RC_CHANNELS_PER_PASS, " feature channels (RGB or SH), got ", D);
    p.absgrad = absgrad ? 1 : 0;
    Tensor grad_records = empty_like_shape(in.means, {P, NUREC_SPLAT_GREC_ROW(p.absgrad)});
    Tensor grad_colors = empty_like_shape(in.means, {sh_degree >= 0 ? P * 3 : 0});
    p.grad_records = grad_records.data_ptr();
    p.grad_colors = grad_colors.data_ptr();
    Tensor grad_means2d = splat_means2d_grad_output(in.means, p, C, means2d_grad);
    SplatGrads g = splat_grads(in.means, p,
                               sh_degree >= 0          ? empty_like_shape(in.means, {N, p.sh_coeffs, 3})
                               : p.features_per_camera ? empty_like_shape(in.means, {C, N, D})
                                                       : empty_like_shape(in.means, {N, D}));
    splat_check_status(op, launch(op, in.means, p, nurec_rasterize_camera_backward_cpu,
                                  NUREC_CUDA_ONLY(nurec_rasterize_camera_backward_cuda)));
    return {g.means, g.quats, g.scales, g.opacities, g.features, grad_records, grad_means2d};
}
// Each pixel's median item over a forward's lists (tiles/splat_median_cuda.cuh
// and splat_cell_cpu_generic.h): [C, H, W] int32, camera x N + Gaussian, or
// NUREC_SPLAT_MEDIAN_NONE / _OVERFLOW.
Tensor rasterize_camera_median(Tensor records, Tensor isect_items, Tensor tile_ranges, Tensor status, Tensor final_T,
                               Tensor seg_state, Tensor seg_last, int64_t segment_min, int64_t width,
                               int64_t height) {
    const char* op = "rasterize_camera_median";
    NUREC_CHECK(width >= 0 && width <= (1 << 24), "nurec_ops.", op, ": `width` must be in [0, 2^24], got ", width);
    NUREC_CHECK(height >= 0 && height <= (1 << 24), "nurec_ops.", op, ": `height` must be in [0, 2^24], got ",
                height);
    nurec_rasterize_camera_params p{};
    p.width = (int)width;
    p.height = (int)height;
    p.tiles_x = (int)((width + NUREC_TILE - 1) / NUREC_TILE);
    p.tiles_y = (int)((height + NUREC_TILE - 1) / NUREC_TILE);
    SplatBuffers keep;
    Tensor out = splat_median_inputs(op, p, p.num_cameras, keep, records, isect_items, tile_ranges, status, final_T,
                                     height, width);
    NUREC_CHECK(p.num_cameras * p.tiles_x * (int64_t)p.tiles_y < ((int64_t)1 << 31), "nurec_ops.", op,
                ": cameras x tiles must be < 2^31 (`width`, `height` too large)");
    splat_median_parts(op, p, records, p.num_cameras * (int64_t)p.tiles_x * p.tiles_y, NUREC_TILE * NUREC_TILE,
                       seg_state, seg_last, segment_min);
    splat_check_status(op, launch(op, records, p, nurec_rasterize_camera_median_cpu,
                                  NUREC_CUDA_ONLY(nurec_rasterize_camera_median_cuda)));
    return out;
}
// Which Gaussians can draw a pixel, [N] bool: the forward's projection and
// footprint per (camera, Gaussian), nothing else written
// (rc_gaussian_visible), for every camera model and shutter; what an
// offloaded scene's step reads (nurec_ops.offload).
Tensor rasterize_camera_visible(Tensor means, Tensor quats, Tensor scales, Tensor opacities, Tensor viewmats,
                                Tensor Ks, int64_t width, int64_t height, double near_plane, double far_plane,
                                int64_t camera_model, std::optional<Tensor> model_params, int64_t shutter,
                                std::optional<Tensor> viewmats_end, bool antialiased, double eps2d,
                                double radius_clip) {
    const char* op = "camera_visible";
    // the projection reads no features: the means stand in for [N, 3] ones,
    // so that the forward's checks and params serve unchanged
    RcInputs in = rc_inputs(op, means, quats, scales, opacities, means, viewmats, Ks, std::nullopt, width, height,
                            near_plane, far_plane, -1);
    rc_model(op, in, camera_model, model_params);
    rc_shutter(op, in, shutter, viewmats_end);
    rc_filter(op, in, antialiased, eps2d, radius_clip);
    Tensor visible = empty_like_shape(in.means, {in.p.num_gaussians}, true);
    in.p.visible = (uint8_t*)visible.data_ptr();
    splat_check_status(op, launch(op, in.means, in.p, nurec_rasterize_camera_visible_cpu,
                                  NUREC_CUDA_ONLY(nurec_rasterize_camera_visible_cuda)));
    return visible;
}
// ====================================================== end rasterize_camera

}  // namespace

STABLE_TORCH_LIBRARY_FRAGMENT(nurec_ops, m) {
    m.def("rasterize_camera_fwd(Tensor means, Tensor quats, Tensor scales, Tensor opacities, "
          "Tensor features, Tensor viewmats, Tensor Ks, Tensor? backgrounds, int width, "
          "int height, float near, float far, int sh_degree, int segments, int segment_min, "
          "int capacity, int camera_model=0, Tensor? model_params=None, int shutter=0, "
          "Tensor? viewmats_end=None, bool meta=False, bool antialiased=False, float eps2d=0.3, "
          "float radius_clip=0.0) -> (Tensor render, "
          "Tensor depth, Tensor alpha, Tensor records, Tensor counts, Tensor colors, "
          "Tensor isect_items, Tensor tile_ranges, Tensor final_T, Tensor last, Tensor status, "
          "Tensor seg_state, Tensor seg_last, Tensor taus, Tensor seg_later, Tensor means2d, "
          "Tensor radii, Tensor depths)");
    m.def("rasterize_camera_bwd(Tensor grad_render, Tensor? grad_depth, Tensor? grad_alpha, "
          "Tensor means, Tensor quats, Tensor scales, Tensor opacities, Tensor features, "
          "Tensor viewmats, Tensor Ks, Tensor? backgrounds, Tensor records, Tensor counts, "
          "Tensor colors, Tensor isect_items, Tensor tile_ranges, Tensor final_T, Tensor last, "
          "Tensor status, Tensor seg_state, Tensor seg_last, int width, int height, float near, "
          "float far, int sh_degree, int segment_min, int camera_model=0, Tensor? model_params=None, "
          "int shutter=0, Tensor? viewmats_end=None, Tensor? taus=None, bool absgrad=False, "
          "Tensor? seg_later=None, bool means2d_grad=False, bool antialiased=False, float eps2d=0.3) -> (Tensor, "
          "Tensor, Tensor, "
          "Tensor, Tensor, Tensor grad_records, Tensor grad_means2d)");
    m.def("rasterize_camera_median(Tensor records, Tensor isect_items, Tensor tile_ranges, Tensor status, "
          "Tensor final_T, Tensor seg_state, Tensor seg_last, int segment_min, int width, int height) -> "
          "Tensor median_items");
    m.def("rasterize_camera_visible(Tensor means, Tensor quats, Tensor scales, Tensor opacities, Tensor viewmats, "
          "Tensor Ks, int width, int height, float near, float far, int camera_model=0, "
          "Tensor? model_params=None, int shutter=0, Tensor? viewmats_end=None, bool antialiased=False, "
          "float eps2d=0.3, float radius_clip=0.0) -> Tensor visible");
}

// One function serves both dispatch keys: it branches on the device itself.
#define NUREC_REGISTER_RASTERIZE_CAMERA(m) \
    m.impl("rasterize_camera_fwd", TORCH_BOX(&rasterize_camera_fwd)); \
    m.impl("rasterize_camera_bwd", TORCH_BOX(&rasterize_camera_bwd)); \
    m.impl("rasterize_camera_median", TORCH_BOX(&rasterize_camera_median)); \
    m.impl("rasterize_camera_visible", TORCH_BOX(&rasterize_camera_visible));

STABLE_TORCH_LIBRARY_IMPL(nurec_ops, CPU, m) { NUREC_REGISTER_RASTERIZE_CAMERA(m) }
#ifdef NUREC_WITH_CUDA
STABLE_TORCH_LIBRARY_IMPL(nurec_ops, CUDA, m) { NUREC_REGISTER_RASTERIZE_CAMERA(m) }
#endif
