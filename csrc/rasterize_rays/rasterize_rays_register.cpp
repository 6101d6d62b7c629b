// rasterize_rays (a sensor given by its rays, docs/api.md).
// The glue from PyTorch tensors to the family's plain C params struct
// (validate, make dense, allocate outputs, call the CPU or CUDA launcher on
// the current stream), and the family's schemas and kernels, registered
// beside it (a fragment of the nurec_ops library, csrc/register.cpp). Only
// PyTorch's stable ABI is used here.
#include "glue_launch.h"
#include "tiles/splat_glue.h"

extern "C" {
#include "rasterize_rays/rasterize_rays.h"
#include "sensors/ray_bundle.h"
#include "tiles/tiles.h"
}

using namespace nurec;

namespace {

struct RaysInputs {
    nurec_rasterize_rays_params p;
    Tensor means, quats, scales, opacities, features, ray_o, ray_d, order, cell_rays;
};

// The Gaussians and the rays with their table (nurec_ops/_ray_layout.py):
// shapes, dtypes, devices and sizes, before anything is allocated.
RaysInputs rays_inputs(const char* op, const Tensor& means, const Tensor& quats, const Tensor& scales,
                       const Tensor& opacities, const Tensor& features, const Tensor& ray_origins,
                       const Tensor& ray_directions, const Tensor& ray_order, const Tensor& cell_rays,
                       double near_plane, double far_plane) {
    const int64_t N = splat_gaussian_shapes(op, means, quats, scales, opacities);
    check_shape(op, "features", features, {N, -1}, "[N, D] (N = means.shape[0])");
    const int64_t D = features.size(1);
    NUREC_CHECK(D >= 1, "nurec_ops.", op, ": `features` must have at least one channel, got ",
                shape_str(features));
    check_shape(op, "ray_origins", ray_origins, {-1, -1, 3}, "[C, M, 3]");
    const int64_t C = ray_origins.size(0), M = ray_origins.size(1);
    check_shape(op, "ray_directions", ray_directions, {C, M, 3}, "[C, M, 3] (as ray_origins)");
    check_shape(op, "ray_order", ray_order, {C, M}, "[C, M] (nurec_ops._ray_layout)");
    check_dtype(op, "ray_order", ray_order, ScalarType::Int);
    check_device(op, "ray_order", ray_order, means, "means");
    check_shape(op, "cell_rays", cell_rays, {C, -1, 2}, "[C, cells + 1, 2] (nurec_ops._ray_layout)");
    check_dtype(op, "cell_rays", cell_rays, ScalarType::Int);
    check_device(op, "cell_rays", cell_rays, means, "means");
    check_like_means(op, means, {{"quats", &quats}, {"scales", &scales}, {"opacities", &opacities},
                                 {"features", &features}, {"ray_origins", &ray_origins},
                                 {"ray_directions", &ray_directions}});
    NUREC_CHECK(M < ((int64_t)1 << 31), "nurec_ops.", op, ": at most 2^31 - 1 rays a sensor, got ", M);
    NUREC_CHECK(near_plane >= 0, "nurec_ops.", op, ": `near` must be >= 0, got ", near_plane);
    NUREC_CHECK(far_plane > near_plane, "nurec_ops.", op,
                ": `far` must be > `near`, got near = ", near_plane, ", far = ", far_plane);
    NUREC_CHECK(C * N < ((int64_t)1 << 31), "nurec_ops.", op,
                ": sensors x Gaussians must be < 2^31, got ", C, " x ", N);
    NUREC_CHECK(C <= 65535, "nurec_ops.", op, ": at most 65535 sensors a call, got ", C);
    NUREC_CHECK(!means.is_cuda() || D <= NUREC_RAYS_MAX_CHANNELS, "nurec_ops.", op, ": at most ",
                (int64_t)NUREC_RAYS_MAX_CHANNELS, " feature channels a call on CUDA (its launch grid), got ", D);
    RaysInputs in;
    nurec_rasterize_rays_params& p = in.p;
    p = nurec_rasterize_rays_params{};
    in.means = dense(means);
    in.quats = dense(quats);
    in.scales = dense(scales);
    in.opacities = dense(opacities);
    in.features = dense(features);
    in.ray_o = dense(ray_origins);
    in.ray_d = dense(ray_directions);
    in.order = dense(ray_order);
    in.cell_rays = dense(cell_rays);
    p.dtype = dtype_code(means);
    p.num_sensors = C;
    p.num_gaussians = N;
    p.num_rays = M;
    p.channels = D;
    p.near_plane = near_plane;
    p.far_plane = far_plane;
    p.means = in.means.data_ptr();
    p.quats = in.quats.data_ptr();
    p.scales = in.scales.data_ptr();
    p.opacities = in.opacities.data_ptr();
    p.features = in.features.data_ptr();
    p.ray_origins = in.ray_o.data_ptr();
    p.ray_directions = in.ray_d.data_ptr();
    p.ray_order = (const int32_t*)in.order.data_ptr();
    p.cell_rays = (const int32_t*)in.cell_rays.data_ptr();
    return in;
}

// The direction grid's tables (float64): edges [C, GE + 1], [C, GA + 1],
// cells [C, GE GA, 8], sensor [C, 16]; cell_rays must have GE GA + 1 rows.
void rays_grid(const char* op, nurec_rasterize_rays_params& p, const Tensor& means, const Tensor& cell_rays,
               const Tensor& cells, const Tensor& el_edges, const Tensor& az_edges, const Tensor& sensor,
               Tensor keep[4]) {
    const int64_t C = p.num_sensors;
    check_shape(op, "el_edges", el_edges, {C, -1}, "[C, GE + 1]");
    check_shape(op, "az_edges", az_edges, {C, -1}, "[C, GA + 1]");
    const int64_t GE = el_edges.size(1) - 1, GA = az_edges.size(1) - 1;
    NUREC_CHECK(GE >= 1 && GA >= 1 && GE <= 4096 && GA <= 4096, "nurec_ops.", op,
                ": the direction grid must have 1 to 4096 bands each way, got ", GE, " x ", GA);
    check_shape(op, "cells", cells, {C, GE * GA, NUREC_RAYS_CELL_SIZE}, "[C, GE GA, 8]");
    check_shape(op, "cell_rays", cell_rays, {C, GE * GA + 1, 2}, "[C, GE GA + 1, 2]");
    check_shape(op, "sensor", sensor, {C, NUREC_RAYS_SENSOR_SIZE}, "[C, 16]");
    const NamedTensor tables[] = {{"cells", &cells}, {"el_edges", &el_edges}, {"az_edges", &az_edges},
                                  {"sensor", &sensor}};
    for (const NamedTensor& nt : tables) {
        check_dtype(op, nt.first, *nt.second, ScalarType::Double);
        check_device(op, nt.first, *nt.second, means, "means");
    }
    NUREC_CHECK(C * (GE * GA + 1) < ((int64_t)1 << 31), "nurec_ops.", op, ": too many cells");
    p.tiles_y = (int)GE;
    p.tiles_x = (int)GA;
    keep[0] = dense(cells);
    keep[1] = dense(el_edges);
    keep[2] = dense(az_edges);
    keep[3] = dense(sensor);
    p.cells = (const double*)keep[0].data_ptr();
    p.el_edges = (const double*)keep[1].data_ptr();
    p.az_edges = (const double*)keep[2].data_ptr();
    p.sensor = (const double*)keep[3].data_ptr();
}

// A [C, M, 1] cotangent that may be absent (None: the loss did not read it).
const void* rays_cotangent(const char* op, const char* name, std::optional<Tensor>& t, int64_t C, int64_t M,
                           const Tensor& means) {
    if (!t.has_value()) return nullptr;
    check_shape(op, name, *t, {C, M, 1}, "[C, M, 1]");
    check_real(op, name, *t, means, "means");
    check_device(op, "saved tensors and gradients", *t, means, "means");
    t = dense(*t);
    return t->data_ptr();
}

const SplatForward<nurec_rasterize_rays_params>& rays_launchers() {
    static const SplatForward<nurec_rasterize_rays_params> l = {
        nurec_rasterize_rays_project_cpu, nurec_rasterize_rays_forward_cpu,
        NUREC_CUDA_ONLY(nurec_rasterize_rays_workspace_bytes), NUREC_CUDA_ONLY(nurec_rasterize_rays_project_cuda),
        NUREC_CUDA_ONLY(nurec_rasterize_rays_forward_cuda)};
    return l;
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor>
rasterize_rays_fwd(Tensor means, Tensor quats, Tensor scales, Tensor opacities, Tensor features,
                   Tensor ray_origins, Tensor ray_directions, Tensor ray_order, Tensor cell_rays, Tensor cells,
                   Tensor el_edges, Tensor az_edges, Tensor sensor, double near_plane, double far_plane,
                   int64_t capacity) {
    const char* op = "rasterize_rays";
    RaysInputs in = rays_inputs(op, means, quats, scales, opacities, features, ray_origins, ray_directions,
                                ray_order, cell_rays, near_plane, far_plane);
    nurec_rasterize_rays_params& p = in.p;
    Tensor keep[4];
    rays_grid(op, p, in.means, in.cell_rays, cells, el_edges, az_edges, sensor, keep);
    const int64_t C = p.num_sensors, N = p.num_gaussians, M = p.num_rays, D = p.channels;
    const int32_t i32 = aoti_torch_dtype_int32(), i64 = aoti_torch_dtype_int64();
    Tensor gauss = empty_like_shape(in.means, {N, NUREC_RAYS_G_SIZE});
    Tensor records = empty_like_shape(in.means, {C, N, NUREC_TREC_SIZE});
    Tensor counts = empty_dense(in.means, {C, N}, i64);
    Tensor boxes = empty_dense(in.means, {C, N, NUREC_BOX_SIZE}, i32);
    Tensor offsets = empty_dense(in.means, {C, N}, i64);
    Tensor tile_ranges = empty_dense(in.means, {C, p.tiles_y, p.tiles_x, 2}, i64);
    Tensor status = empty_dense(in.means, {2}, i64);
    Tensor final_T = empty_like_shape(in.means, {C, M});
    Tensor last = empty_dense(in.means, {C, M}, i32);
    Tensor out = empty_like_shape(in.means, {C, M, D});
    Tensor range = empty_like_shape(in.means, {C, M, 1});
    Tensor alpha = empty_like_shape(in.means, {C, M, 1});
    p.gauss = gauss.data_ptr();
    p.records = records.data_ptr();
    p.counts = (int64_t*)counts.data_ptr();
    p.boxes = (int32_t*)boxes.data_ptr();
    p.offsets = (int64_t*)offsets.data_ptr();
    p.tile_ranges = (int64_t*)tile_ranges.data_ptr();
    p.status = (int64_t*)status.data_ptr();
    p.final_T = final_T.data_ptr();
    p.last = (int32_t*)last.data_ptr();
    p.out_features = out.data_ptr();
    p.range = range.data_ptr();
    p.alpha = alpha.data_ptr();
    splat_project(op, in.means, p, rays_launchers());
    Tensor isect = splat_forward(op, in.means, p, capacity, rays_launchers());
    return {out, range, alpha, gauss, records, counts, isect, tile_ranges, final_T, last, status};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> rasterize_rays_bwd(
    Tensor grad_features, std::optional<Tensor> grad_range, std::optional<Tensor> grad_alpha, Tensor means,
    Tensor quats, Tensor scales, Tensor opacities, Tensor features, Tensor ray_origins, Tensor ray_directions,
    Tensor ray_order, Tensor cell_rays, Tensor gauss, Tensor isect_items, Tensor tile_ranges, Tensor final_T,
    Tensor last, Tensor status, double near_plane, double far_plane) {
    const char* op = "rasterize_rays_backward";
    RaysInputs in = rays_inputs(op, means, quats, scales, opacities, features, ray_origins, ray_directions,
                                ray_order, cell_rays, near_plane, far_plane);
    nurec_rasterize_rays_params& p = in.p;
    const int64_t C = p.num_sensors, N = p.num_gaussians, M = p.num_rays, D = p.channels;
    check_shape(op, "tile_ranges", tile_ranges, {C, -1, -1, 2}, "[C, GE, GA, 2] (the forward's)");
    check_dtype(op, "tile_ranges", tile_ranges, ScalarType::Long);
    check_device(op, "tile_ranges", tile_ranges, means, "means");
    p.tiles_y = (int)tile_ranges.size(1);
    p.tiles_x = (int)tile_ranges.size(2);
    check_shape(op, "cell_rays", in.cell_rays, {C, (int64_t)p.tiles_y * p.tiles_x + 1, 2},
                "[C, GE GA + 1, 2] (the forward's table)");
    check_shape(op, "grad_features", grad_features, {C, M, D}, "[C, M, D]");
    check_real(op, "grad_features", grad_features, means, "means");
    check_device(op, "saved tensors and gradients", grad_features, means, "means");
    p.grad_range = rays_cotangent(op, "grad_range", grad_range, C, M, means);
    p.grad_alpha = rays_cotangent(op, "grad_alpha", grad_alpha, C, M, means);
    check_shape(op, "gauss", gauss, {N, NUREC_RAYS_G_SIZE}, "[N, 16] (the forward's)");
    check_real(op, "gauss", gauss, means, "means");
    check_device(op, "gauss", gauss, means, "means");
    check_shape(op, "isect_items", isect_items, {-1}, "[capacity] (the forward's)");
    check_dtype(op, "isect_items", isect_items, ScalarType::Int);
    check_device(op, "isect_items", isect_items, means, "means");
    check_shape(op, "final_T", final_T, {C, M}, "[C, M] (the forward's)");
    check_real(op, "final_T", final_T, means, "means");
    check_device(op, "final_T", final_T, means, "means");
    check_shape(op, "last", last, {C, M}, "[C, M] (the forward's)");
    check_dtype(op, "last", last, ScalarType::Int);
    check_device(op, "last", last, means, "means");
    check_shape(op, "status", status, {2}, "[2] (the forward's)");
    check_dtype(op, "status", status, ScalarType::Long);
    check_device(op, "status", status, means, "means");
    Tensor k_gauss = dense(gauss), k_isect = dense(isect_items), k_ranges = dense(tile_ranges),
           k_T = dense(final_T), k_last = dense(last), k_status = dense(status), k_g = dense(grad_features);
    p.gauss = k_gauss.data_ptr();
    p.isect_items = (int32_t*)k_isect.data_ptr();
    p.capacity = isect_items.size(0);
    p.tile_ranges = (int64_t*)k_ranges.data_ptr();
    p.final_T = k_T.data_ptr();
    p.last = (int32_t*)k_last.data_ptr();
    p.status = (int64_t*)k_status.data_ptr();
    p.grad_out_features = k_g.data_ptr();
    Tensor grad_gauss = empty_like_shape(in.means, {N, NUREC_RAYS_GG_SIZE});
    Tensor gm = empty_like_shape(in.means, {N, 3}), gq = empty_like_shape(in.means, {N, 4}),
           gs = empty_like_shape(in.means, {N, 3}), go = empty_like_shape(in.means, {N}),
           gf = empty_like_shape(in.means, {N, D});
    p.grad_gauss = grad_gauss.data_ptr();
    p.grad_means = gm.data_ptr();
    p.grad_quats = gq.data_ptr();
    p.grad_scales = gs.data_ptr();
    p.grad_opacities = go.data_ptr();
    p.grad_features = gf.data_ptr();
    splat_check_status(op, launch(op, in.means, p, nurec_rasterize_rays_backward_cpu,
                                  NUREC_CUDA_ONLY(nurec_rasterize_rays_backward_cuda)));
    return {gm, gq, gs, go, gf};
}

}  // namespace

STABLE_TORCH_LIBRARY_FRAGMENT(nurec_ops, m) {
    m.def("rasterize_rays_fwd(Tensor means, Tensor quats, Tensor scales, Tensor opacities, Tensor features, "
          "Tensor ray_origins, Tensor ray_directions, Tensor ray_order, Tensor cell_rays, Tensor cells, "
          "Tensor el_edges, Tensor az_edges, Tensor sensor, float near, float far, int capacity) -> "
          "(Tensor features_out, Tensor range, Tensor alpha, Tensor gauss, Tensor records, Tensor counts, "
          "Tensor isect_items, Tensor tile_ranges, Tensor final_T, Tensor last, Tensor status)");
    m.def("rasterize_rays_bwd(Tensor grad_features, Tensor? grad_range, Tensor? grad_alpha, Tensor means, "
          "Tensor quats, Tensor scales, Tensor opacities, Tensor features, Tensor ray_origins, "
          "Tensor ray_directions, Tensor ray_order, Tensor cell_rays, Tensor gauss, Tensor isect_items, "
          "Tensor tile_ranges, Tensor final_T, Tensor last, Tensor status, float near, float far) -> "
          "(Tensor, Tensor, Tensor, Tensor, Tensor)");
}

// One function serves both dispatch keys: it branches on the device itself.
#define NUREC_REGISTER_RASTERIZE_RAYS(m) \
    m.impl("rasterize_rays_fwd", TORCH_BOX(&rasterize_rays_fwd)); \
    m.impl("rasterize_rays_bwd", TORCH_BOX(&rasterize_rays_bwd));

STABLE_TORCH_LIBRARY_IMPL(nurec_ops, CPU, m) { NUREC_REGISTER_RASTERIZE_RAYS(m) }
#ifdef NUREC_WITH_CUDA
STABLE_TORCH_LIBRARY_IMPL(nurec_ops, CUDA, m) { NUREC_REGISTER_RASTERIZE_RAYS(m) }
#endif
