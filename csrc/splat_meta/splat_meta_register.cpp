// splat_meta: SPEC section 8's per-Gaussian outputs of either rasterizer.
// The glue from PyTorch tensors to the family's plain C params struct
// (validate, make dense, allocate outputs, call the CPU or CUDA launcher on
// the current stream), and the family's schemas and kernels, registered
// beside it (a fragment of the nurec_ops library, csrc/register.cpp). Only
// PyTorch's stable ABI is used here.
#include "glue_launch.h"
#include "glue_launch.h"

#include <cstdlib>
#include <initializer_list>
#include <utility>

extern "C" {
#include "splat_meta/splat_meta.h"
#include "tiles/tiles.h"
}

using namespace nurec;

namespace {
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

STABLE_TORCH_LIBRARY_FRAGMENT(nurec_ops, m) {
    m.def("splat_meta(Tensor records, Tensor counts, Tensor? cell, float cell_u, float cell_v) "
          "-> (Tensor means2d, Tensor radii, Tensor depths)");
}

// One function serves both dispatch keys: it branches on the device itself.
#define NUREC_REGISTER_SPLAT_META(m) \
    m.impl("splat_meta", TORCH_BOX(&splat_meta));

STABLE_TORCH_LIBRARY_IMPL(nurec_ops, CPU, m) { NUREC_REGISTER_SPLAT_META(m) }
#ifdef NUREC_WITH_CUDA
STABLE_TORCH_LIBRARY_IMPL(nurec_ops, CUDA, m) { NUREC_REGISTER_SPLAT_META(m) }
#endif
