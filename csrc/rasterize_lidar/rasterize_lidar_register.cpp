// rasterize_lidar (SPEC sections 4, 7, 8).
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
#include "rasterize_lidar/rasterize_lidar.h"
#include "sensors/rolling_shutter.h"
#include "tiles/tiles.h"
}

using namespace nurec;

namespace {
// =========================================================== rasterize_lidar
// Lidar Gaussian rasterizer: validation, allocation of outputs and
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

// The rows in elevation order and their range tables (nurec_ops._lidar_table's
// row_search, built once per table): the projection finds the rows an
// item reaches by search (rl_rows_reached) instead of a scan of every row.
// Absent: the scan. Its values are derived from row_elevations and
// row_azimuth_offsets as column_order is from column_azimuths.
Tensor rl_row_search(const char* op, nurec_rasterize_lidar_params& p, const Tensor& means,
                     const std::optional<Tensor>& row_search) {
    p.row_search = nullptr;
    p.row_levels = 0;
    if (!row_search.has_value() || p.rows == 0) return Tensor();
    const int levels = nurec_floor_log2(p.rows) + 1; /* rl_rows_reached's L */
    check_shape(op, "row_search", *row_search, {1 + 4 * (int64_t)levels, p.rows},
                "[1 + 4 L, R] (nurec_ops._lidar_table.row_search of the rows' table)");
    check_real(op, "row_search", *row_search, means, "means");
    check_device(op, "row_search", *row_search, means, "means");
    Tensor t = dense(*row_search);
    p.row_search = t.data_ptr();
    p.row_levels = levels;
    return t;
}

// CUDA grid limits of the per-tile kernels (tiles/splat_parts_grid_cuda.cuh):
// the 3-D grid (y: tile rows, z: sweeps x channel passes of 2) and, where
// lists are cut, the list's one dimension of slices of sweeps x passes x
// tiles first parts and passes x capacity / segment_min later parts (the
// dense layout, for measuring, falls back to the list's where its grid
// would not fit).
void rl_check_grid(const char* op, const nurec_rasterize_lidar_params& p, int64_t capacity) {
    const int64_t passes = (p.channels + 1) / 2;
    const int64_t chunks = nurec_splat_part_chunks(p.segments, capacity, p.segment_min);
    const int64_t units = p.num_sweeps * passes * (int64_t)p.tiles_x * p.tiles_y + passes * chunks;
    NUREC_CHECK(p.tiles_y <= 65535 && p.num_sweeps * passes <= 65535 &&
                    (chunks == 0 || units <= INT32_MAX / (NUREC_RL_TILE_ROWS * NUREC_RL_TILE_COLS / 32)),
                "nurec_ops.", op, ": too many rows, sweeps, feature channels or segments for one CUDA launch");
}

// SPEC 7 for a lidar: the poses at the sweeps' ends [C, 4, 4] (the kernels
// pack each sweep's two poses themselves) and the canonical columns' firing
// times [W] (nurec_ops/rasterize_lidar.py), both or neither. Keeps the dense
// tensors in `keep`.
void rl_shutter(const char* op, nurec_rasterize_lidar_params& p, const Tensor& means,
                const std::optional<Tensor>& viewmats_end, const std::optional<Tensor>& column_times,
                Tensor keep[2]) {
    p.viewmats_end = nullptr;
    p.column_times = nullptr;
    if (!viewmats_end.has_value()) return;
    check_shape(op, "viewmats_end", *viewmats_end, {p.num_sweeps, 4, 4}, "[C, 4, 4] (C = viewmats.shape[0])");
    check_real(op, "viewmats_end", *viewmats_end, means, "means");
    check_device(op, "viewmats_end", *viewmats_end, means, "means");
    NUREC_CHECK(column_times.has_value(), "nurec_ops.", op, ": `column_times` is needed with `viewmats_end`");
    check_shape(op, "column_times", *column_times, {p.cols}, "[W] (W = column_azimuths.shape[0])");
    check_real(op, "column_times", *column_times, means, "means");
    check_device(op, "column_times", *column_times, means, "means");
    keep[0] = dense(*viewmats_end);
    keep[1] = dense(*column_times);
    p.viewmats_end = keep[0].data_ptr();
    p.column_times = keep[1].data_ptr();
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor,
           Tensor, Tensor, Tensor, Tensor>
rasterize_lidar_fwd(Tensor means, Tensor quats, Tensor scales, Tensor opacities, Tensor features,
                    Tensor viewmats, Tensor row_elevations, Tensor column_azimuths, Tensor column_order,
                    Tensor row_azimuth_offsets, double near_plane, double far_plane, double eps2d,
                    int64_t segments, int64_t segment_min, int64_t capacity,
                    std::optional<Tensor> viewmats_end, std::optional<Tensor> column_times, bool meta,
                    std::optional<Tensor> meta_cell, std::optional<Tensor> row_search) {
    const char* op = "rasterize_lidar";
    RlInputs in = rl_inputs(op, means, quats, scales, opacities, features, viewmats, row_elevations,
                            column_azimuths, column_order, row_azimuth_offsets, near_plane, far_plane, eps2d);
    nurec_rasterize_lidar_params& p = in.p;
    const int64_t C = p.num_sweeps, N = p.num_gaussians, D = p.channels, R = p.rows, W = p.cols;
    Tensor rs_keep[2];
    rl_shutter(op, p, in.means, viewmats_end, column_times, rs_keep);
    NUREC_CHECK(!meta || meta_cell.has_value(), "nurec_ops.", op, ": `meta` needs `meta_cell`, a cell's size [2]");
    const Tensor search = rl_row_search(op, p, in.means, row_search);
    Tensor taus = empty_like_shape(in.means, {p.viewmats_end ? C : 0, N});
    p.taus = taus.data_ptr();
    splat_segments(op, p, in.means.is_cpu() ? 0 : segments, segment_min);
    if (!in.means.is_cpu()) rl_check_grid(op, p, capacity);
    static const SplatForward<nurec_rasterize_lidar_params> launchers = {
        nurec_rasterize_lidar_project_cpu, nurec_rasterize_lidar_forward_cpu,
        NUREC_CUDA_ONLY(nurec_rasterize_lidar_workspace_bytes),
        NUREC_CUDA_ONLY(nurec_rasterize_lidar_project_cuda),
        NUREC_CUDA_ONLY(nurec_rasterize_lidar_forward_cuda)};
    SplatBuffers b;
    splat_projection_buffers(b, in.means, p, C);
    Tensor boxes = empty_dense(in.means, {C, N, NUREC_BOX_SIZE}, aoti_torch_dtype_int32());
    p.boxes = (int32_t*)boxes.data_ptr();
    /* radii in lidar cells: the table's mean column and row spacing (meta_cell) */
    const SplatMeta m = splat_meta_outputs(op, in.means, p, C, meta, meta_cell, 1.0, 1.0);
    splat_project(op, in.means, p, launchers);
    Tensor out = empty_like_shape(in.means, {C, R, W, D});
    Tensor range = empty_like_shape(in.means, {C, R, W, 1});
    Tensor alpha = empty_like_shape(in.means, {C, R, W, 1});
    splat_binning_buffers(b, in.means, p, C, R, W);
    Tensor seg_state, seg_last;
    splat_segment_buffers(in.means, p, capacity, C * (int64_t)p.tiles_y * p.tiles_x,
                          NUREC_RL_TILE_ROWS * NUREC_RL_TILE_COLS, D, seg_state, seg_last);
    Tensor seg_later = splat_later_parts_output(in.means, p, capacity);
    p.out_features = out.data_ptr();
    p.range = range.data_ptr();
    p.alpha = alpha.data_ptr();
    b.isect = splat_forward(op, in.means, p, capacity, launchers);
    return {out,      range,  alpha,    b.records, b.counts,  b.isect,
            b.tile_ranges, b.final_T, b.last, b.status, seg_state, seg_last, taus, seg_later,
            m.means2d,     m.radii,   m.depths};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor> rasterize_lidar_bwd(
    Tensor grad_features, std::optional<Tensor> grad_range, std::optional<Tensor> grad_alpha, Tensor means,
    Tensor quats, Tensor scales, Tensor opacities, Tensor features, Tensor viewmats, Tensor row_elevations,
    Tensor column_azimuths, Tensor column_order, Tensor row_azimuth_offsets, Tensor records, Tensor counts,
    Tensor isect_items, Tensor tile_ranges, Tensor final_T, Tensor last, Tensor status,
    Tensor seg_state, Tensor seg_last, double near_plane, double far_plane, double eps2d,
    int64_t segment_min, std::optional<Tensor> viewmats_end, std::optional<Tensor> column_times,
    std::optional<Tensor> taus, bool absgrad, std::optional<Tensor> seg_later, bool means2d_grad) {
    const char* op = "rasterize_lidar_backward";
    RlInputs in = rl_inputs(op, means, quats, scales, opacities, features, viewmats, row_elevations,
                            column_azimuths, column_order, row_azimuth_offsets, near_plane, far_plane, eps2d);
    nurec_rasterize_lidar_params& p = in.p;
    const int64_t C = p.num_sweeps, N = p.num_gaussians, D = p.channels, R = p.rows, W = p.cols;
    Tensor rs_keep[2], taus_d;
    rl_shutter(op, p, in.means, viewmats_end, column_times, rs_keep);
    if (p.viewmats_end) p.taus = splat_saved_taus(op, taus, C, N, means, taus_d, "with `viewmats_end`");
    check_shape(op, "grad_features", grad_features, {C, R, W, D}, "[C, R, W, D]");
    check_real(op, "grad_features", grad_features, means, "means");
    check_device(op, "saved tensors and gradients", grad_features, means, "means");
    // as the camera's: range's and alpha's may be absent (zero)
    p.grad_range = splat_optional_cotangent(op, "grad_range", grad_range, C, R, W, "[C, R, W, 1]", means);
    p.grad_alpha = splat_optional_cotangent(op, "grad_alpha", grad_alpha, C, R, W, "[C, R, W, 1]", means);
    SplatBuffers b = splat_saved(op, means, p, C, R, W, "[C, R, W]", records, counts, isect_items,
                                 tile_ranges, final_T, last, status);
    splat_segments_saved(op, means, p, C * (int64_t)p.tiles_y * p.tiles_x, NUREC_RL_TILE_ROWS * NUREC_RL_TILE_COLS,
                         D, seg_state, seg_last, segment_min);
    grad_features = dense(grad_features);
    p.grad_out_features = grad_features.data_ptr();
    // as the camera's: the whole gradient of a ray in one walk
    NUREC_CHECK(!absgrad || D <= NUREC_RL_CHANNELS_PER_PASS, "nurec_ops.", op, ": `absgrad` supports at most ",
                NUREC_RL_CHANNELS_PER_PASS, " feature channels, got ", D);
    p.absgrad = absgrad ? 1 : 0;  // in the records' rows (tiles/splat.h, NUREC_SPLAT_GREC_ABS)
    Tensor grad_records = empty_like_shape(in.means, {C * N, NUREC_SPLAT_GREC_ROW(p.absgrad)});
    p.grad_records = grad_records.data_ptr();
    Tensor grad_means2d = splat_means2d_grad_output(in.means, p, C, means2d_grad);
    SplatGrads g = splat_grads(in.means, p, empty_like_shape(in.means, {N, D}));
    if (!in.means.is_cpu()) rl_check_grid(op, p, p.capacity);
    const std::optional<Tensor> later = splat_later_parts_saved(op, in.means, p, seg_later);
    splat_check_status(op, launch(op, in.means, p, nurec_rasterize_lidar_backward_cpu,
                                  NUREC_CUDA_ONLY(nurec_rasterize_lidar_backward_cuda)));
    return {g.means, g.quats, g.scales, g.opacities, g.features, grad_records, grad_means2d};
}
// Each ray's median item over a forward's lists (tiles/splat_median_cuda.cuh
// and splat_cell_cpu_generic.h), in the user's column order: [C, R, W]
// int32, sweep x N + Gaussian, or NUREC_SPLAT_MEDIAN_NONE / _OVERFLOW. The
// table as the forward took it (canonical columns and their order).
Tensor rasterize_lidar_median(Tensor records, Tensor isect_items, Tensor tile_ranges, Tensor status,
                              Tensor final_T, Tensor seg_state, Tensor seg_last, int64_t segment_min,
                              Tensor row_elevations, Tensor column_azimuths, Tensor column_order,
                              Tensor row_azimuth_offsets) {
    const char* op = "rasterize_lidar_median";
    check_shape(op, "row_elevations", row_elevations, {-1}, "[R]");
    check_shape(op, "column_azimuths", column_azimuths, {-1}, "[W]");
    const int64_t R = row_elevations.size(0), W = column_azimuths.size(0);
    NUREC_CHECK(R <= (1 << 20), "nurec_ops.", op, ": `row_elevations` may have at most 2^20 rows, got ", R);
    NUREC_CHECK(W <= (1 << 24), "nurec_ops.", op, ": `column_azimuths` may have at most 2^24 columns, got ", W);
    check_shape(op, "row_azimuth_offsets", row_azimuth_offsets, {R}, "[R] (R = row_elevations.shape[0])");
    check_shape(op, "column_order", column_order, {W}, "[W] (W = column_azimuths.shape[0])");
    check_dtype(op, "column_order", column_order, ScalarType::Int);
    check_device(op, "column_order", column_order, records, "records");
    check_like(op, records, "records", {{"row_elevations", &row_elevations}, {"column_azimuths", &column_azimuths},
                                        {"row_azimuth_offsets", &row_azimuth_offsets}});
    nurec_rasterize_lidar_params p{};
    p.rows = (int)R;
    p.cols = (int)W;
    p.tiles_x = (int)((W + NUREC_RL_TILE_COLS - 1) / NUREC_RL_TILE_COLS);
    p.tiles_y = (int)((R + NUREC_RL_TILE_ROWS - 1) / NUREC_RL_TILE_ROWS);
    SplatBuffers keep;
    Tensor out = splat_median_inputs(op, p, p.num_sweeps, keep, records, isect_items, tile_ranges, status, final_T,
                                     R, W);
    NUREC_CHECK(p.num_sweeps * p.tiles_x * (int64_t)p.tiles_y < ((int64_t)1 << 31), "nurec_ops.", op,
                ": sweeps x tiles must be < 2^31 (too many sweeps, rows or columns)");
    splat_median_parts(op, p, records, p.num_sweeps * (int64_t)p.tiles_x * p.tiles_y,
                       NUREC_RL_TILE_ROWS * NUREC_RL_TILE_COLS, seg_state, seg_last, segment_min);
    Tensor row_el = dense(row_elevations), col_az = dense(column_azimuths), order = dense(column_order),
           row_off = dense(row_azimuth_offsets);
    p.row_elevations = row_el.data_ptr();
    p.column_azimuths = col_az.data_ptr();
    p.column_order = (const int32_t*)order.data_ptr();
    p.row_azimuth_offsets = row_off.data_ptr();
    splat_check_status(op, launch(op, records, p, nurec_rasterize_lidar_median_cpu,
                                  NUREC_CUDA_ONLY(nurec_rasterize_lidar_median_cuda)));
    return out;
}
// ======================================================= end rasterize_lidar

}  // namespace

STABLE_TORCH_LIBRARY_FRAGMENT(nurec_ops, m) {
    m.def("rasterize_lidar_fwd(Tensor means, Tensor quats, Tensor scales, Tensor opacities, "
          "Tensor features, Tensor viewmats, Tensor row_elevations, Tensor column_azimuths, "
          "Tensor column_order, Tensor row_azimuth_offsets, float near, float far, float eps2d, int segments, "
          "int segment_min, int capacity, Tensor? viewmats_end=None, Tensor? column_times=None, "
          "bool meta=False, Tensor? meta_cell=None, Tensor? row_search=None) -> "
          "(Tensor features_out, Tensor range, Tensor alpha, Tensor records, Tensor counts, "
          "Tensor isect_items, Tensor tile_ranges, Tensor final_T, Tensor last, Tensor status, "
          "Tensor seg_state, Tensor seg_last, Tensor taus, Tensor seg_later, Tensor means2d, "
          "Tensor radii, Tensor depths)");
    m.def("rasterize_lidar_bwd(Tensor grad_features, Tensor? grad_range, Tensor? grad_alpha, "
          "Tensor means, Tensor quats, Tensor scales, Tensor opacities, Tensor features, "
          "Tensor viewmats, Tensor row_elevations, Tensor column_azimuths, Tensor column_order, "
          "Tensor row_azimuth_offsets, Tensor records, Tensor counts, Tensor isect_items, "
          "Tensor tile_ranges, Tensor final_T, Tensor last, Tensor status, Tensor seg_state, "
          "Tensor seg_last, float near, float far, float eps2d, int segment_min, Tensor? viewmats_end=None, "
          "Tensor? column_times=None, Tensor? taus=None, bool absgrad=False, Tensor? seg_later=None, "
          "bool means2d_grad=False) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor grad_records, "
          "Tensor grad_means2d)");
    m.def("rasterize_lidar_median(Tensor records, Tensor isect_items, Tensor tile_ranges, Tensor status, "
          "Tensor final_T, Tensor seg_state, Tensor seg_last, int segment_min, Tensor row_elevations, Tensor column_azimuths, Tensor column_order, Tensor row_azimuth_offsets) -> "
          "Tensor median_items");
}

// One function serves both dispatch keys: it branches on the device itself.
#define NUREC_REGISTER_RASTERIZE_LIDAR(m) \
    m.impl("rasterize_lidar_fwd", TORCH_BOX(&rasterize_lidar_fwd)); \
    m.impl("rasterize_lidar_bwd", TORCH_BOX(&rasterize_lidar_bwd)); \
    m.impl("rasterize_lidar_median", TORCH_BOX(&rasterize_lidar_median));

STABLE_TORCH_LIBRARY_IMPL(nurec_ops, CPU, m) { NUREC_REGISTER_RASTERIZE_LIDAR(m) }
#ifdef NUREC_WITH_CUDA
STABLE_TORCH_LIBRARY_IMPL(nurec_ops, CUDA, m) { NUREC_REGISTER_RASTERIZE_LIDAR(m) }
#endif
