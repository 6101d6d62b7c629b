// What the rasterizers' glue shares (camera and lidar registration files):
// the Gaussians' checks, the binning's buffers and launches, the long
// lists' parts, the gradients' outputs.
#ifndef NUREC_SPLAT_GLUE_H
#define NUREC_SPLAT_GLUE_H

#include <algorithm>
#include <optional>

#include "glue_launch.h"

extern "C" {
#include "tiles/splat.h"
#include "tiles/splat_math.h"
#include "tiles/tiles.h"
}

namespace nurec {

// ========================================================== rasterize_camera
// Camera Gaussian rasterizer: validation, allocation of outputs and
// intermediates (sizes from shapes and the host-chosen `capacity` only), and
// the CPU / CUDA launchers of csrc/rasterize_camera and csrc/tiles.


// ----------------------------------------------- what the rasterizers share
// The camera and lidar rasterizers bin the same way (csrc/tiles) and keep the
// same intermediates for their backward; their params structs use the same
// field names for them, so these helpers serve both.

inline void splat_check_status(const char* op, int status) {
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

// A cotangent of a [C, rows, cols, 1] output that may be absent (None: the
// loss did not read that output; the kernels take it as zero, so no zero
// image is allocated and filled each step): checked, made dense in place
// (it must outlive the launch) and its data, or NULL.
inline const void* splat_optional_cotangent(const char* op, const char* name, std::optional<Tensor>& t,
                                            int64_t images, int64_t rows, int64_t cols, const char* shape,
                                            const Tensor& means) {
    if (!t.has_value()) return nullptr;
    check_shape(op, name, *t, {images, rows, cols, 1}, shape);
    check_real(op, name, *t, means, "means");
    check_device(op, "saved tensors and gradients", *t, means, "means");
    t = dense(*t);
    return t->data_ptr();
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

// The forward's `taus` ([C, N]: each Gaussian's time in its image's
// shutter), which a rolling-shutter backward takes back instead of solving
// them again: checked against means, made dense into `keep`, and its data.
// `when` ends the message for an absent one (e.g. "for shutter 1").
inline void* splat_saved_taus(const char* op, const std::optional<Tensor>& taus, int64_t C, int64_t N,
                              const Tensor& means, Tensor& keep, const std::string& when) {
    NUREC_CHECK(taus.has_value(), "nurec_ops.", op, ": `taus` (the forward's output) is needed ", when);
    check_shape(op, "taus", *taus, {C, N}, "[C, N] (the forward's taus)");
    check_real(op, "taus", *taus, means, "means");
    check_device(op, "taus", *taus, means, "means");
    keep = dense(*taus);
    return keep.data_ptr();
}

// The Gaussians both rasterizers take. splat_gaussian_shapes checks means
// ([N, 3], real) and quats, scales, opacities against it, returns N;
// check_like_means checks named tensors' dtype and device against means
// (every dtype first, then every device); splat_gaussians makes the six
// inputs dense and binds them to p (features' shape is the rasterizer's,
// checked by it).
inline int64_t splat_gaussian_shapes(const char* op, const Tensor& means, const Tensor& quats,
                              const Tensor& scales, const Tensor& opacities) {
    check_shape(op, "means", means, {-1, 3}, "[N, 3]");
    check_real(op, "means", means, means, "means");
    const int64_t N = means.size(0);
    check_shape(op, "quats", quats, {N, 4}, "[N, 4] (N = means.shape[0])");
    check_shape(op, "scales", scales, {N, 3}, "[N, 3] (N = means.shape[0])");
    check_shape(op, "opacities", opacities, {N}, "[N] (N = means.shape[0])");
    return N;
}

inline void check_like_means(const char* op, const Tensor& means, std::initializer_list<NamedTensor> named) {
    check_like(op, means, "means", named);
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

// SPEC 8's means2d gradient as an output of its own, [C, N, 2] contiguous
// (the projection backward copies it from the records' rows it reads), so
// that autograd takes it as the leaf's .grad without cloning a strided view
// of the records; [0] and NULL where not asked for.
template <class Params>
Tensor splat_means2d_grad_output(const Tensor& like, Params& p, int64_t C, bool want) {
    Tensor out = empty_like_shape(like, {want ? C : 0, want ? p.num_gaussians : 0, 2});
    p.grad_means2d = want && C * p.num_gaussians > 0 ? out.data_ptr() : nullptr;
    return out;
}

// SPEC section 8's meta of a forward, written by its projection
// (tiles/splat_project_generic.h) where asked for: means2d [C, N, 2], radii
// [C, N, 2] int32, depths [C, N]; each [0, 0, ...] and the params' pointers
// NULL where not. A cell's size for the radii: `cell` [2] on the device
// (the lidar's, cached per table: no host copy) or cell_u x cell_v.
struct SplatMeta {
    Tensor means2d, radii, depths, cell;
};

template <class Params>
SplatMeta splat_meta_outputs(const char* op, const Tensor& like, Params& p, int64_t C, bool want,
                             const std::optional<Tensor>& cell, double cell_u, double cell_v) {
    const int64_t c = want ? C : 0, n = want ? p.num_gaussians : 0;
    SplatMeta m{empty_like_shape(like, {c, n, 2}), empty_dense(like, {c, n, 2}, aoti_torch_dtype_int32()),
                empty_like_shape(like, {c, n}), Tensor()};
    p.meta_means2d = nullptr;
    p.meta_radii = nullptr;
    p.meta_depths = nullptr;
    p.meta_cell = nullptr;
    p.meta_cell_u = cell_u;
    p.meta_cell_v = cell_v;
    if (!want) return m;
    if (cell.has_value()) {
        check_shape(op, "meta_cell", *cell, {2}, "[2] (a cell's size)");
        check_real(op, "meta_cell", *cell, like, "means");
        check_device(op, "meta_cell", *cell, like, "means");
        m.cell = dense(*cell);
        p.meta_cell = m.cell.data_ptr();
    }
    if (c * n > 0) {
        p.meta_means2d = m.means2d.data_ptr();
        p.meta_radii = (int32_t*)m.radii.data_ptr();
        p.meta_depths = m.depths.data_ptr();
    }
    return m;
}

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

// The parts' per-cell state of a forward: [S, X, cells per tile, D + 2]
// reals and [S, X, cells per tile] int32, S = 0 without parts (the CPU;
// segments <= 1). Its S x X slots (tiles/splat_math.h, indexed over the
// first two dimensions together) are the fewest that S divides, at least
// what nurec_splat_part_layout needs (X >= 1): the backward reads S back
// from the shape. Allocated and bound; zeroed by the forward launcher.
template <class Params>
void splat_segment_buffers(const Tensor& like, Params& p, int64_t capacity, int64_t tiles,
                           int64_t cells_per_tile, int64_t channels, Tensor& state, Tensor& last) {
    const int64_t S = p.segments > 1 && !like.is_cpu() ? p.segments : 0;
    const int64_t slots = S > 0 ? nurec_splat_part_layout(capacity, p.segment_min, (int)S, tiles, &p.seg_shift) : 0;
    /* X >= 1: two empty dimensions gave torch's schema check a negative storage size */
    const int64_t X = S > 0 ? std::max<int64_t>((slots + S - 1) / S, 1) : 1;
    state = empty_like_shape(like, {S, X, cells_per_tile, channels + 2});
    last = empty_dense(like, {S, X, cells_per_tile}, aoti_torch_dtype_int32());
    p.seg_slots = S * X;
    p.seg_state = state.data_ptr();
    p.seg_last = (int32_t*)last.data_ptr();
}

// The backward's part state from its forward: checked, made dense, bound
// (p.capacity: the forward's, from its intersection list).
template <class Params>
void splat_segments_saved(const char* op, const Tensor& means, Params& p, int64_t tiles, int64_t cells_per_tile,
                          int64_t channels, Tensor& seg_state, Tensor& seg_last, int64_t segment_min) {
    check_shape(op, "seg_state", seg_state, {-1, -1, cells_per_tile, channels + 2},
                "[S, slots / S, cells per tile, D + 2]");
    check_real(op, "seg_state", seg_state, means, "means");
    const int64_t S = seg_state.size(0), X = seg_state.size(1);
    check_shape(op, "seg_last", seg_last, {S, X, cells_per_tile},
                "[S, slots / S, cells per tile] (as seg_state's)");
    check_dtype(op, "seg_last", seg_last, ScalarType::Int);
    check_device(op, "saved tensors and gradients", seg_state, means, "means");
    check_device(op, "saved tensors and gradients", seg_last, means, "means");
    NUREC_CHECK(S != 1 && (S == 0 || !means.is_cpu()), "nurec_ops.", op,
                ": `seg_state` must come from the forward (0 parts, or 2 and more on CUDA), got ", S);
    splat_segments(op, p, S, segment_min);
    const int64_t need = S > 0 ? nurec_splat_part_layout(p.capacity, segment_min, (int)S, tiles, &p.seg_shift) : 0;
    NUREC_CHECK(S * X >= need, "nurec_ops.", op, ": `seg_state` must come from the forward: ", S * X,
                " part slots, its capacity and tiles need ", need);
    p.seg_slots = S * X;
    seg_state = dense(seg_state);
    seg_last = dense(seg_last);
    p.seg_state = seg_state.data_ptr();
    p.seg_last = (int32_t*)seg_last.data_ptr();
}

// The later parts' list (CUDA, where lists are cut: the walks' grid,
// tiles/splat_parts_grid_cuda.cuh): [chunks] int64, chunks =
// nurec_splat_part_chunks (0 on the CPU and where no list is cut). The
// forward fills it and returns it; its backward takes it back and does not
// build it again (a memset and a launch less per step). Bound to p after
// splat_segments.
template <class Params>
Tensor splat_later_parts_output(const Tensor& like, Params& p, int64_t capacity) {
    const int64_t chunks = like.is_cpu() ? 0 : nurec_splat_part_chunks(p.segments, capacity, p.segment_min);
    Tensor later = empty_dense(like, {chunks}, aoti_torch_dtype_int64());
    p.seg_later = chunks > 0 ? (int64_t*)later.data_ptr() : nullptr;
    p.seg_later_filled = 0;
    return later;
}

// The backward's list: the forward's output where the caller passes it
// (checked against the saved state's parts and capacity), else built again
// into a buffer of its own (a caller of the op that keeps only the older
// outputs); nothing where none is needed. After splat_segments_saved (p's
// segments and capacity are the forward's). What it returns must outlive
// the launch.
template <class Params>
std::optional<Tensor> splat_later_parts_saved(const char* op, const Tensor& like, Params& p,
                                              std::optional<Tensor>& given) {
    const int64_t chunks = like.is_cpu() ? 0 : nurec_splat_part_chunks(p.segments, p.capacity, p.segment_min);
    p.seg_later = nullptr;
    p.seg_later_filled = 0;
    if (given.has_value()) {
        check_shape(op, "seg_later", *given, {chunks}, "[chunks] (the forward's seg_later)");
        check_dtype(op, "seg_later", *given, ScalarType::Long);
        check_device(op, "saved tensors and gradients", *given, like, "means");
        if (chunks == 0) return std::nullopt;
        given = dense(*given);
        p.seg_later = (int64_t*)given->data_ptr();
        p.seg_later_filled = 1;
        return std::nullopt;
    }
    if (chunks == 0) return std::nullopt;
    Tensor later = empty_dense(like, {chunks}, aoti_torch_dtype_int64());
    p.seg_later = (int64_t*)later.data_ptr();
    return later;
}

// A median op's inputs (rasterize_*_median): a forward's records [C, N, 8],
// isect_items, tile_ranges [C, tiles_y, tiles_x, 2], status and final_T
// [C, rows, cols] (its cells' order: the lidar's canonical columns), checked
// (shapes from records and p's tiles), made dense and bound to p (its dtype,
// C is `images`, N), and the output median_items [C, rows, cols] int32
// allocated and bound. The walks clamp each tile's range to the list and
// skip items outside [0, C N): a saved list whose values are not a
// forward's reads nothing out of bounds. Returns the output; `keep` holds
// the dense inputs until the launch.
template <class Params>
Tensor splat_median_inputs(const char* op, Params& p, int64_t& images, SplatBuffers& keep, const Tensor& records,
                           const Tensor& isect_items, const Tensor& tile_ranges, const Tensor& status,
                           const Tensor& final_T, int64_t rows, int64_t cols) {
    check_shape(op, "records", records, {-1, -1, NUREC_TREC_SIZE}, "[C, N, 8] (a forward's records)");
    check_real(op, "records", records, records, "records");
    const int64_t C = records.size(0), N = records.size(1);
    NUREC_CHECK(C * N < ((int64_t)1 << 31), "nurec_ops.", op, ": sensors x Gaussians must be < 2^31, got ", C,
                " x ", N);
    check_shape(op, "isect_items", isect_items, {-1}, "[M]");
    check_dtype(op, "isect_items", isect_items, ScalarType::Int);
    check_shape(op, "tile_ranges", tile_ranges, {C, p.tiles_y, p.tiles_x, 2},
                "[C, tiles_y, tiles_x, 2] (C = records.shape[0])");
    check_dtype(op, "tile_ranges", tile_ranges, ScalarType::Long);
    check_shape(op, "status", status, {2}, "[2]");
    check_dtype(op, "status", status, ScalarType::Long);
    check_device(op, "isect_items", isect_items, records, "records");
    check_device(op, "tile_ranges", tile_ranges, records, "records");
    check_device(op, "status", status, records, "records");
    check_shape(op, "final_T", final_T, {C, rows, cols}, "[C, cells] (the forward's final_T)");
    check_real(op, "final_T", final_T, records, "records");
    check_device(op, "final_T", final_T, records, "records");
    images = C;
    p.dtype = dtype_code(records);
    p.num_gaussians = N;
    keep.records = dense(records);
    keep.isect = dense(isect_items);
    keep.tile_ranges = dense(tile_ranges);
    keep.status = dense(status);
    keep.final_T = dense(final_T);
    p.final_T = keep.final_T.data_ptr();
    p.records = keep.records.data_ptr();
    p.isect_items = (int32_t*)keep.isect.data_ptr();
    p.capacity = keep.isect.size(0);
    p.tile_ranges = (int64_t*)keep.tile_ranges.data_ptr();
    p.status = (int64_t*)keep.status.data_ptr();
    Tensor out = empty_dense(records, {C, rows, cols}, aoti_torch_dtype_int32());
    p.median_items = (int32_t*)out.data_ptr();
    return out;
}

// A median op's part state from its forward (seg_state, seg_last; [0, ...]
// without parts), checked and bound as a backward's (splat_segments_saved;
// D from seg_state's last dimension): where the forward cut a list, each
// cell starts its walk at the part its median lies in. After
// splat_median_inputs (p.capacity is the forward's). `seg_state` and
// `seg_last` are made dense in place (they must outlive the launch).
template <class Params>
void splat_median_parts(const char* op, Params& p, const Tensor& records, int64_t tiles, int64_t cells_per_tile,
                        Tensor& seg_state, Tensor& seg_last, int64_t segment_min) {
    const int64_t D = seg_state.dim() == 4 ? seg_state.size(3) - 2 : 0;
    NUREC_CHECK(D >= 0, "nurec_ops.", op, ": `seg_state` must have shape [S, slots / S, cells per tile, D + 2], got ",
                shape_str(seg_state));
    p.channels = D;
    splat_segments_saved(op, records, p, tiles, cells_per_tile, D, seg_state, seg_last, segment_min);
    if (p.segments <= 1) p.seg_state = nullptr;
}

}  // namespace nurec

#endif  // NUREC_SPLAT_GLUE_H
