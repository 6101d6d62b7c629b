/* CUDA kernels of rasterize_lidar. Forward: projection with tile rectangles
 * (1 launch, a call of its own: nurec_rasterize_lidar_project_cuda) -> tile
 * binning (tiles.cu, boxes mode: scan, emit, radix sort, ranges) ->
 * per-tile compositing (1 launch; its grid: tiles/splat_parts_grid_cuda.cuh)
 * -> when lists may be cut: the later parts' list (an output of the op: a
 * memset and 1 launch) before, and after it combining the parts per ray, a
 * second walk of the later parts where rays reach the cut-off, and the end
 * of the combining (3 launches). Backward: two memsets (the later parts'
 * list is the forward's, not built again), the lidar's own per-tile sweep kernel (register budget, warp-level list walk
 * without shared memory and carveout of its own, not the camera's) and the
 * per-Gaussian projection VJP. All on the
 * caller's stream, no host synchronization; an overflowed binning
 * (status[1]) turns the outputs into NaN and the gradients into zeros.
 *
 * Register budget (ptxas, nvcc 13, sm_90): with RL_CH = 2 channels per pass
 * (lidar features: intensity, ray-drop logit), the float32 walks are held
 * to 64 registers (NuRec's lidar budget): RL_BWD_MIN_BLOCKS_F32 =
 * RL_FWD_MIN_BLOCKS_F32 = 4 blocks of 256 threads per SM, 50% theoretical
 * occupancy. That spills (backward 48 B, second walk 28 B, forward 4 B),
 * and still measured faster on the H200 than the compiler's own budget
 * (80 registers, 37.5%): backward 1.14 -> 1.07 ms, forward walk 0.66 ->
 * 0.59, second walk 0.28 -> 0.26. The camera backward's
 * configuration (104 registers, 4 channels per pass) takes 1.48 ms there.
 * Measured on the H200 (street scene, benchmarks/RESULTS.md): blocks of 32
 * to 256 threads alike; cutting the long lists into 16 parts 5.65 -> 4.25
 * ms forward + backward; culling by the row's slice of each ellipse (walks)
 * and cutting the tile rectangles the same way (binning) 3.71 -> 3.06 ms.
 * See NUREC_OPS_PTXAS_VERBOSE=1. */
#include <cuda_runtime.h>
#include <stdlib.h>

extern "C" {
#include "rasterize_lidar/rasterize_lidar_math.h"
}

#define NUREC_HD_DEV static __device__ __forceinline__
#define RL_PROJ_THREADS 256
#define RL_BLOCK (NUREC_RL_TILE_ROWS * NUREC_RL_TILE_COLS) /* one thread per ray of a tile */
#if RL_BLOCK % 32 != 0
#error "a lidar tile must be a whole number of warps (warp shuffles in the backward)"
#endif
#ifndef RL_CH
#define RL_CH NUREC_RL_CHANNELS_PER_PASS    /* channels per pass */
#endif
/* 256 x 4 blocks: <= 64 registers (spills 48 B; 3 blocks, 80 registers,
   measured 6% slower) */
#ifndef RL_BWD_MIN_BLOCKS_F32
#define RL_BWD_MIN_BLOCKS_F32 4
#endif
#define RL_BWD_MIN_BLOCKS_F64 1
/* The forward walks likewise (0 leaves the budget to the compiler: 80
   registers, measured 12% slower) */
#ifndef RL_FWD_MIN_BLOCKS_F32
#define RL_FWD_MIN_BLOCKS_F32 4
#endif
#if RL_FWD_MIN_BLOCKS_F32 > 0
#define RL_FWD_BOUNDS __launch_bounds__(RL_BLOCK, sizeof(real_t) == 4 ? RL_FWD_MIN_BLOCKS_F32 : 1)
#else
#define RL_FWD_BOUNDS __launch_bounds__(RL_BLOCK)
#endif
#ifndef RL_BWD_DIRECT_LANES
/* up to this many contributing lanes: direct atomics (4 was 2.5% slower, 12 and 16
   slower still: H200) */
#define RL_BWD_DIRECT_LANES 8
#endif
/* the same with SPEC 8's absgrad: its own knob. Swept on the H200
   (benchmarks/RESULTS.md): absgrad's cost on the street camera / lidar was
   +4.6% / +4.4% at 4 lanes, +7.1% / +7.1% at 2, +2.0% / +1.7% at 8 */
#ifndef RL_BWD_DIRECT_LANES_ABS
#define RL_BWD_DIRECT_LANES_ABS 8
#endif
/* Percent of L1 as shared memory: the sweeps use none (each warp reads its
   list and shuffles), so all of it is cache for the records they gather. */
#ifndef RL_BWD_CARVEOUT
#define RL_BWD_CARVEOUT 0
#endif
#ifndef RL_FWD_CARVEOUT
#define RL_FWD_CARVEOUT 0
#endif

#if 9 + RL_CH > 16
#error "splat_warp_add sums at most 16 values: 7 record values + RL_CH channels + 2 absgrad"
#endif

/* tiles/splat_warp_cuda_generic.cuh's warp sums by recursive halving: off
   for the lidar (sm_90 SASS: its backward's loops one instruction longer
   with it, 16 bytes more spilled; the camera's 11 instructions shorter) */
#ifndef NUREC_SPLAT_HALVING
#define NUREC_SPLAT_HALVING 0
#endif

#include "tiles/splat_combine_cuda.cuh"
#include "tiles/splat_median_cuda.cuh"
#include "tiles/splat_parts_grid_cuda.cuh"
#define NUREC_GENERIC_FILE "rasterize_lidar/rasterize_lidar_cuda_generic.cuh"
#include "math/generic.h"

namespace {

int ok(void) { return cudaGetLastError() == cudaSuccess ? NUREC_OK : NUREC_ERR_CUDA; }

unsigned blocks_for(int64_t n, int t) { return (unsigned)((n + t - 1) / t); }

int num_passes(const nurec_rasterize_lidar_params* p) {
    return (int)((p->channels + RL_CH - 1) / RL_CH);
}

// Threads per block of the sweeps: a slice of a tile (see rl_place_of),
// whole warps dividing RL_BLOCK. NUREC_OPS_RL_SLICE_THREADS overrides the
// default, for measuring (read once; an invalid value keeps the default):
// 32, 64, 128 and 256 measured alike on the street scene (5.40-5.66 ms).
#ifndef RL_SLICE_THREADS
#define RL_SLICE_THREADS 64
#endif
#if RL_BLOCK % RL_SLICE_THREADS != 0 || RL_SLICE_THREADS % 32 != 0
#error "RL_SLICE_THREADS must be whole warps dividing a tile's rays"
#endif
int slice_threads(void) {
    static int t = 0;
    if (t == 0) {
        const char* e = getenv("NUREC_OPS_RL_SLICE_THREADS");
        int v = e ? atoi(e) : 0;
        t = v >= 32 && v <= RL_BLOCK && v % 32 == 0 && RL_BLOCK % v == 0 ? v : RL_SLICE_THREADS;
    }
    return t;
}

int64_t tiles_per_sweep(const nurec_rasterize_lidar_params* p) { return (int64_t)p->tiles_x * p->tiles_y; }
int slices(void) { return RL_BLOCK / slice_threads(); }

// Carveout preferences of the walks, each kernel on both grids (<kAbs, kList> for the backward).
void set_carveouts(void) {
    static bool done = false;
    static const void* const fwd[] = {NUREC_SPLAT_BOTH_GRIDS1(rl_forward_kernel_f32),
                                      NUREC_SPLAT_BOTH_GRIDS1(rl_forward_kernel_f64)};
    static const void* const bwd[] = {NUREC_SPLAT_BOTH_GRIDS(rl_backward_kernel_f32, false),
                                      NUREC_SPLAT_BOTH_GRIDS(rl_backward_kernel_f32, true),
                                      NUREC_SPLAT_BOTH_GRIDS(rl_backward_kernel_f64, false),
                                      NUREC_SPLAT_BOTH_GRIDS(rl_backward_kernel_f64, true)};
    nurec_splat_set_carveouts(&done, fwd, RL_FWD_CARVEOUT, bwd, RL_BWD_CARVEOUT);
}

}  // namespace

extern "C" size_t nurec_rasterize_lidar_workspace_bytes(const nurec_rasterize_lidar_params* p) {
    nurec_tiles_params t;
    nurec_rasterize_lidar_tiles(p, &t);
    return nurec_tiles_workspace_bytes(&t);
}

extern "C" int nurec_rasterize_lidar_project_cuda(const nurec_rasterize_lidar_params* p, void* stream) {
    if (p->dtype != NUREC_F32 && p->dtype != NUREC_F64) return NUREC_ERR_DTYPE;
    const int64_t P = p->num_sweeps * p->num_gaussians;
    if (P == 0) return NUREC_OK;
    unsigned b = blocks_for(P, RL_PROJ_THREADS);
    cudaStream_t s = (cudaStream_t)stream;
    const bool rolling = p->viewmats_end != NULL;
    if (p->dtype == NUREC_F64) {
        if (rolling) rl_project_kernel_f64<true><<<b, RL_PROJ_THREADS, 0, s>>>(*p);
        else rl_project_kernel_f64<false><<<b, RL_PROJ_THREADS, 0, s>>>(*p);
    } else {
        if (rolling) rl_project_kernel_f32<true><<<b, RL_PROJ_THREADS, 0, s>>>(*p);
        else rl_project_kernel_f32<false><<<b, RL_PROJ_THREADS, 0, s>>>(*p);
    }
    return ok();
}

extern "C" int nurec_rasterize_lidar_forward_cuda(const nurec_rasterize_lidar_params* p_in, void* stream) {
    if (p_in->dtype != NUREC_F32 && p_in->dtype != NUREC_F64) return NUREC_ERR_DTYPE;
    cudaStream_t s = (cudaStream_t)stream;
    const bool f64 = p_in->dtype == NUREC_F64;
    set_carveouts();
    nurec_tiles_params t;
    nurec_rasterize_lidar_tiles(p_in, &t);
    int st = nurec_tiles_bin_cuda(&t, stream);
    if (st != NUREC_OK) return st;
    /* an output of the op: filled whatever follows (its backward takes it back) */
    if (nurec_splat_later_parts(*p_in, p_in->num_sweeps * tiles_per_sweep(p_in), s) != cudaSuccess)
        return NUREC_ERR_CUDA;
    if (p_in->num_sweeps == 0 || p_in->rows == 0 || p_in->cols == 0 || p_in->channels == 0) return NUREC_OK;
    const nurec_rasterize_lidar_params q =
        nurec_splat_with_parts_grid(p_in, p_in->num_sweeps * num_passes(p_in));
    const nurec_rasterize_lidar_params* p = &q;
    int passes = num_passes(p);
    const int64_t C = p->num_sweeps;
    const int sl = slices();
    const unsigned th = (unsigned)slice_threads();
    if (p->segments > 1) {
        const size_t rays = (size_t)(p->num_sweeps * p->rows * (int64_t)p->cols);
        const size_t cells = (size_t)p->seg_slots * RL_BLOCK; /* the slots' cells */
        /* parts publish where they stop a ray in p.last (rl_forward_body): start high */
        if (cudaMemsetAsync(p->last, 0x7f, sizeof(int32_t) * rays, s) != cudaSuccess) return NUREC_ERR_CUDA;
        /* the parts' state is an output of the op (for the backward), and some
           of its slots belong to no part (tiles/splat_math.h): zeros there,
           so that every output is defined and the same call to call */
        if (cudaMemsetAsync(p->seg_state, 0, (f64 ? 8 : 4) * (size_t)(p->channels + 2) * cells, s) != cudaSuccess ||
            cudaMemsetAsync(p->seg_last, 0, sizeof(int32_t) * cells, s) != cudaSuccess)
            return NUREC_ERR_CUDA;
    }
    if (f64)
        nurec_splat_walk(rl_forward_kernel_f64<false>, rl_forward_kernel_f64<true>,
                         q, C, passes, sl, th, s, false, passes);
    else
        nurec_splat_walk(rl_forward_kernel_f32<false>, rl_forward_kernel_f32<true>,
                         q, C, passes, sl, th, s, false, passes);
    if (p->segments > 1) { /* chain the parts of the long lists; walk again where the cut-off falls */
        unsigned b = blocks_for(p->num_sweeps * p->rows * (int64_t)p->cols, RL_PROJ_THREADS);
        for (int phase = 0; phase < 2; ++phase) {
            if (ok() != NUREC_OK) return NUREC_ERR_CUDA;
            if (f64) rl_combine_kernel_f64<<<b, RL_PROJ_THREADS, 0, s>>>(*p, phase);
            else rl_combine_kernel_f32<<<b, RL_PROJ_THREADS, 0, s>>>(*p, phase);
            if (phase == 1) break;
            /* the second walk: later parts only (a first part is never walked again) */
            if (f64)
                nurec_splat_walk(rl_forward_fixup_kernel_f64<false>, rl_forward_fixup_kernel_f64<true>,
                                 q, C, passes, sl, th, s, true, passes);
            else
                nurec_splat_walk(rl_forward_fixup_kernel_f32<false>, rl_forward_fixup_kernel_f32<true>,
                                 q, C, passes, sl, th, s, true, passes);
        }
    }
    return ok();
}

extern "C" int nurec_rasterize_lidar_backward_cuda(const nurec_rasterize_lidar_params* p_in, void* stream) {
    if (p_in->dtype != NUREC_F32 && p_in->dtype != NUREC_F64) return NUREC_ERR_DTYPE;
    const nurec_rasterize_lidar_params q =
        nurec_splat_with_parts_grid(p_in, p_in->num_sweeps * num_passes(p_in));
    const nurec_rasterize_lidar_params* p = &q;
    cudaStream_t s = (cudaStream_t)stream;
    const bool f64 = p->dtype == NUREC_F64;
    const size_t el = f64 ? sizeof(double) : sizeof(float);
    const int64_t C = p->num_sweeps, N = p->num_gaussians, P = C * N;
    set_carveouts();
    /* the records' rows, with absgrad's slots when asked for */
    if (P > 0 && cudaMemsetAsync(p->grad_records, 0, el * NUREC_SPLAT_GREC_ROW(p->absgrad) * (size_t)P, s) !=
                     cudaSuccess)
        return NUREC_ERR_CUDA;
    size_t gf = el * (size_t)(p->channels * N);
    if (gf > 0 && cudaMemsetAsync(p->grad_features, 0, gf, s) != cudaSuccess) return NUREC_ERR_CUDA;
    if (C > 0 && p->rows > 0 && p->cols > 0 && p->channels > 0) {
        int passes = num_passes(p);
        const bool ab = p->absgrad != 0;
        const int sl = slices();
        const unsigned th = (unsigned)slice_threads();
        if (nurec_splat_later_parts(*p_in, C * tiles_per_sweep(p), s) != cudaSuccess) return NUREC_ERR_CUDA;
        if (f64) {
            if (ab)
                nurec_splat_walk(rl_backward_kernel_f64<true, false>, rl_backward_kernel_f64<true, true>,
                                 q, C, passes, sl, th, s, false, passes);
            else
                nurec_splat_walk(rl_backward_kernel_f64<false, false>, rl_backward_kernel_f64<false, true>,
                                 q, C, passes, sl, th, s, false, passes);
        } else {
            if (ab)
                nurec_splat_walk(rl_backward_kernel_f32<true, false>, rl_backward_kernel_f32<true, true>,
                                 q, C, passes, sl, th, s, false, passes);
            else
                nurec_splat_walk(rl_backward_kernel_f32<false, false>, rl_backward_kernel_f32<false, true>,
                                 q, C, passes, sl, th, s, false, passes);
        }
        if (ok() != NUREC_OK) return NUREC_ERR_CUDA;
    }
    if (N > 0) {
        unsigned b = blocks_for(N, RL_PROJ_THREADS);
        if (f64) rl_project_backward_kernel_f64<<<b, RL_PROJ_THREADS, 0, s>>>(*p);
        else rl_project_backward_kernel_f32<<<b, RL_PROJ_THREADS, 0, s>>>(*p);
    }
    return ok();
}

extern "C" int nurec_rasterize_lidar_median_cuda(const nurec_rasterize_lidar_params* p, void* stream) {
    if (p->dtype != NUREC_F32 && p->dtype != NUREC_F64) return NUREC_ERR_DTYPE;
    const int64_t tiles = p->num_sweeps * (int64_t)p->tiles_x * p->tiles_y;
    if (tiles == 0) return NUREC_OK;
    cudaStream_t s = (cudaStream_t)stream;
    if (p->dtype == NUREC_F64) rl_median_kernel_f64<<<(unsigned)tiles, RL_BLOCK, 0, s>>>(*p);
    else rl_median_kernel_f32<<<(unsigned)tiles, RL_BLOCK, 0, s>>>(*p);
    return ok();
}
