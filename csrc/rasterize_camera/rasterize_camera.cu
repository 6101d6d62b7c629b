/* CUDA kernels of rasterize_camera. Forward: projection (1 launch, a call of
 * its own: nurec_rasterize_camera_project_cuda) ->
 * tile binning (tiles.cu: scan, emit, radix sort, ranges) -> per-tile
 * compositing (1 launch; its grid: tiles/splat_parts_grid_cuda.cuh) ->
 * when lists may be cut: the later parts' list (an output of the op: a
 * memset and 1 launch) and two memsets before, and after it combining the
 * parts per pixel, a second walk of the later parts where pixels reach the
 * cut-off, and the end of the combining (3 launches). Backward: two
 * memsets (the later parts' list is the forward's, not built again), the
 * per-tile sweep (per part; its own kernel: register budget, batch size
 * and shared-memory carveout of its own)
 * and the per-Gaussian projection VJP. All on the caller's stream, no host
 * synchronization; an overflowed binning (status[1]) turns the outputs and
 * gradients into NaN instead of silently wrong values. */
#include <cuda_runtime.h>

extern "C" {
#include "rasterize_camera/rasterize_camera_math.h"
}
#include "tiles/footprint_warp_cuda.cuh"

#define NUREC_HD_DEV static __device__ __forceinline__
#define RC_PROJ_THREADS 256
/* the pinhole projection's blocks per SM: 3 holds it to 80 registers (8
 * bytes of spills) where it would take 86 and leave room for only 2 */
#ifndef RC_PROJ_MIN_BLOCKS
#define RC_PROJ_MIN_BLOCKS 3
#endif
#define RC_PROJ_BWD_THREADS 128 /* 3 x 16 SH gradients per thread in shared memory: 48 KB in float64 */
#define RC_SH_MAX 48            /* 3 x 16: SH degree 3 */
#define RC_BLOCK (NUREC_TILE * NUREC_TILE) /* one thread per pixel of a tile */
#define RC_CH NUREC_RC_CHANNELS_PER_PASS
#define RC_ENTRY (NUREC_TREC_SIZE + RC_CH) /* a staged entry of the forward: record, features */
#ifndef RC_FWD_MIN_BLOCKS_F32
#define RC_FWD_MIN_BLOCKS_F32 8 /* 256 x 8 blocks: 32 registers, no spills (rc_forward_kernel) */
#endif
/* Pixels per thread of the backward (rc_bwd_cell): a warp's gradient per
   entry is summed over 8 x 4 RC_BWD_PIX pixels, so the entry's costs that do
   not depend on its pixels (the ballot, the VJP's finish, the warp's sums,
   the atomics: ~157 of the loop's SASS instructions against ~54 a pixel)
   are paid once per 32 RC_BWD_PIX pixels. 4 since a pixel's state is
   small (one suffix sum, splat_composite_vjp's P). H100, fwd+bwd against 2
   pixels a thread at 8 blocks of 128 (64 registers), alternating
   processes: 1944 garden x3 3.128-3.135 -> 2.777-2.789 ms, garden 648 x3
   1.098-1.133 -> 1.091-1.111, street 1.620-1.628 -> 1.663-1.664 (its
   Gaussians are small: a warp of twice the pixels meets about as many
   entries and tests more blocks of each); 12 blocks of 64 (80 registers,
   no spills) 2.881 / 1.110 / 1.692; 8 x 16 pixels a warp
   (RC_BWD_WARP_W 16) 2.99 on the 1944 garden. 1 gives back one pixel a
   thread. */
#ifndef RC_BWD_PIX
#define RC_BWD_PIX 4
#endif
#define RC_BWD_THREADS (RC_BLOCK / RC_BWD_PIX)
#if RC_BWD_PIX == 1
#ifndef RC_BWD_MIN_BLOCKS_F32
#define RC_BWD_MIN_BLOCKS_F32 5            /* 256 x 5 blocks: 48 registers, no spills, 62.5% occupancy (4: 56 regs, 50%; 6: spills) */
#endif
#define RC_BWD_MIN_BLOCKS_F64 2
#elif RC_BWD_PIX == 2
#ifndef RC_BWD_MIN_BLOCKS_F32
/* 128 x 8 blocks: 64 registers, no spills, 50% occupancy, since a pixel's
   state holds one suffix sum (splat_composite_vjp's P) where it held one a
   channel (7 blocks took 72 registers then, and 8 spilled); H100, fwd+bwd
   against 7 blocks of the same tree: 1944 garden x3 3.19-3.21 -> 3.13 ms,
   street 1.64-1.67 -> 1.63-1.66 */
#define RC_BWD_MIN_BLOCKS_F32 8
#endif
#define RC_BWD_MIN_BLOCKS_F64 4
#else
#ifndef RC_BWD_MIN_BLOCKS_F32
/* 64 x 14 blocks: 72 registers, 4-16 bytes spilled (ptxas), 43.75%
   occupancy: faster on every scene than 12 blocks without spills (above) */
#define RC_BWD_MIN_BLOCKS_F32 14
#endif
#define RC_BWD_MIN_BLOCKS_F64 6 /* 64 x 6 blocks: no spills (8 spilled 24-72 bytes) */
#endif
#ifndef RC_BWD_BATCH
/* Gaussians staged per batch in the backward (a thread stages two): fewer
   barriers and stagings per entry. H200, fwd+bwd ms, 2 rounds:
   batch 64 (25% carveout) street 1.997-2.006, small garden 1.275-1.282,
   1944 garden 4.126-4.131; 128 (50%) 1.964-1.974, 1.239-1.246,
   4.056-4.065; 192 (50%) 1.944-1.956, 1.227-1.235, 3.926-3.928; 256 (60%)
   1.947-1.948, 1.212-1.232, 3.919-3.923; 32 slower than 64 on all three.
   The carveout must hold 7 blocks' batches (+ 1 KB each): 128 at 25% fit
   only 6 (1.262-1.272 on the small garden). A second run: 256 (60%)
   1.946, 1.215-1.222, 3.926-3.929 against 64's 1.999-2.005, 1.272-1.281,
   4.126-4.135; the absgrad call takes the same time at 128 and 256 */
#if RC_BWD_PIX >= 4
#define RC_BWD_BATCH 128 /* two a thread, as 256 with 2 pixels a thread */
#else
#define RC_BWD_BATCH 256
#endif
#endif
#ifndef RC_BWD_DIRECT_LANES
/* up to this many contributing lanes: direct atomics (4 was 2% slower, 12 and 16
   slower still: H200) */
#define RC_BWD_DIRECT_LANES 8
#endif
/* the same with SPEC 8's absgrad: its own knob. Swept on the H200
   (benchmarks/RESULTS.md): absgrad's cost on the street camera / lidar was
   +4.6% / +4.4% at 4 lanes, +7.1% / +7.1% at 2, +2.0% / +1.7% at 8; with
   two pixels a thread the street's +4.6% at 8, +4.0% at 12 */
#ifndef RC_BWD_DIRECT_LANES_ABS
#define RC_BWD_DIRECT_LANES_ABS 12
#endif
#ifndef RC_BWD_CARVEOUT
/* percent of L1 as shared memory: with 4 pixels a thread 14 blocks'
   batches (RC_BWD_BATCH entries of RC_ENTRY values, their ul, vl, item and
   colour row: 9 KB in float32) and 1 KB each, 140 KB (float64: 6 blocks of
   17 KB, 108 KB); with 2, 8 blocks of 18 + 1 KB, 152 KB: 70% of sm_90's
   228 KB */
#define RC_BWD_CARVEOUT 70
#endif
#ifndef RC_FWD_CARVEOUT
#define RC_FWD_CARVEOUT 50
#endif

#if NUREC_SPLAT_LDL_SIZE > NUREC_TREC_DEPTH
#error "a staged entry's exponent terms (splat_stage_ldl) must leave its depth and threshold slots"
#endif
#if 9 + RC_CH > 16
#error "splat_warp_add sums at most 16 values: 7 record values + RC_CH channels + 2 absgrad"
#endif

/* 1: an absgrad call of exactly 3 channels (RGB, SH colours) runs the
   backward kernel built for 3 (kCh = 3: no fourth, zero channel in every
   pixel's VJP and the warp's sums); 0: the RC_CH one. H100, fwd+bwd of the
   street camera with absgrad: 1.803-1.808 ms against 1.823-1.825. The
   plain backward keeps RC_CH: there its 3-channel build (SASS loop 344 ->
   328 instructions) was slower, street 1.740 -> 1.790 ms, 1944 garden x3
   3.52 -> 3.53-3.65 (benchmarks/RESULTS.md, "Tried and not kept"). */
#ifndef RC_BWD_CH3
#define RC_BWD_CH3 1
#endif

/* tiles/splat_warp_cuda_generic.cuh's atomics switches, the camera's own
   defaults: off (H200, fwd+bwd with two pixels a thread: off /
   on, street 2.669 / 2.677 ms, garden 648 x3 1.370 / 1.387, garden 1944 x3
   4.197 / 4.306; the lidar keeps them on: 2.247 on / 2.260 off) */
#ifndef NUREC_SPLAT_ONE_ATOMIC
#define NUREC_SPLAT_ONE_ATOMIC 0
#endif
#ifndef NUREC_SPLAT_VEC_ATOMICS
#define NUREC_SPLAT_VEC_ATOMICS 0
#endif

#include "tiles/splat_combine_cuda.cuh"
#include "tiles/splat_median_cuda.cuh"
#include "tiles/splat_parts_grid_cuda.cuh"
#define NUREC_GENERIC_FILE "rasterize_camera/rasterize_camera_cuda_generic.cuh"
#include "math/generic.h"

namespace {

int ok(void) { return cudaGetLastError() == cudaSuccess ? NUREC_OK : NUREC_ERR_CUDA; }

unsigned blocks_for(int64_t n, int t) { return (unsigned)((n + t - 1) / t); }

int num_passes(const nurec_rasterize_camera_params* p) {
    return (int)((p->channels + RC_CH - 1) / RC_CH);
}

int64_t tiles_per_image(const nurec_rasterize_camera_params* p) { return (int64_t)p->tiles_x * p->tiles_y; }

// Carveout preferences of the walks, each kernel on both grids (<kAbs, kCh, kList> for the backward).
#define RC_BWD_KERNELS(kernel, kCh) NUREC_SPLAT_BOTH_GRIDS(kernel, false, kCh), NUREC_SPLAT_BOTH_GRIDS(kernel, true, kCh)
void set_carveouts(void) {
    static bool done = false;
    static const void* const fwd[] = {NUREC_SPLAT_BOTH_GRIDS(rc_forward_kernel_f32, false),
                                      NUREC_SPLAT_BOTH_GRIDS(rc_forward_kernel_f32, true),
                                      NUREC_SPLAT_BOTH_GRIDS(rc_forward_kernel_f64, false),
                                      NUREC_SPLAT_BOTH_GRIDS(rc_forward_kernel_f64, true)};
    static const void* const bwd[] = {RC_BWD_KERNELS(rc_backward_kernel_f32, RC_CH), NUREC_SPLAT_BOTH_GRIDS(rc_backward_kernel_f32, true, 3),
                                      RC_BWD_KERNELS(rc_backward_kernel_f64, RC_CH), NUREC_SPLAT_BOTH_GRIDS(rc_backward_kernel_f64, true, 3)};
    nurec_splat_set_carveouts(&done, fwd, RC_FWD_CARVEOUT, bwd, RC_BWD_CARVEOUT);
}

// The backward's walk in its kernel: precision, absgrad, kCh channels a pass.
template <bool kAbs, int kCh>
void backward_walk_as(const nurec_rasterize_camera_params& q, bool f64, int passes, cudaStream_t s) {
    const int64_t C = q.num_cameras;
    const unsigned th = RC_BWD_THREADS;
    if (f64)
        nurec_splat_walk(rc_backward_kernel_f64<kAbs, kCh, false>, rc_backward_kernel_f64<kAbs, kCh, true>, q, C,
                         passes, 1, th, s, false, passes);
    else
        nurec_splat_walk(rc_backward_kernel_f32<kAbs, kCh, false>, rc_backward_kernel_f32<kAbs, kCh, true>, q, C,
                         passes, 1, th, s, false, passes);
}

/* One of the forward's walks (fixup: the second, where a pixel's cut-off
 * falls in a later part) in its kernel: precision, packed depth, grid. */
template <bool kPack>
void forward_walk_as(const nurec_rasterize_camera_params& q, bool f64, bool fixup, int passes, cudaStream_t s) {
    const int64_t C = q.num_cameras;
    if (fixup && f64)
        nurec_splat_walk(rc_forward_fixup_kernel_f64<kPack, false>, rc_forward_fixup_kernel_f64<kPack, true>, q, C,
                         passes, 1, RC_BLOCK, s, true, passes);
    else if (fixup)
        nurec_splat_walk(rc_forward_fixup_kernel_f32<kPack, false>, rc_forward_fixup_kernel_f32<kPack, true>, q, C,
                         passes, 1, RC_BLOCK, s, true, passes);
    else if (f64)
        nurec_splat_walk(rc_forward_kernel_f64<kPack, false>, rc_forward_kernel_f64<kPack, true>, q, C, passes, 1,
                         RC_BLOCK, s, false, passes);
    else
        nurec_splat_walk(rc_forward_kernel_f32<kPack, false>, rc_forward_kernel_f32<kPack, true>, q, C, passes, 1,
                         RC_BLOCK, s, false, passes);
}

void forward_walk(const nurec_rasterize_camera_params& q, bool f64, bool pack, bool fixup, int passes,
                  cudaStream_t s) {
    if (pack) forward_walk_as<true>(q, f64, fixup, passes, s);
    else forward_walk_as<false>(q, f64, fixup, passes, s);
}

}  // namespace

extern "C" size_t nurec_rasterize_camera_workspace_bytes(const nurec_rasterize_camera_params* p) {
    nurec_tiles_params t;
    nurec_rasterize_camera_tiles(p, &t);
    return nurec_tiles_workspace_bytes(&t);
}

namespace {

typedef void (*rc_item_kernel)(nurec_rasterize_camera_params);

/* A kernel of a thread per item in its four builds, [float64][models]:
 * the models' build for a SPEC 6 model or SPEC 7's rolling shutter, the
 * pinhole's with a global shutter otherwise (rc_project_kernel). */
int launch_built(const rc_item_kernel built[2][2], const nurec_rasterize_camera_params* p, int64_t n, void* stream) {
    if (p->dtype != NUREC_F32 && p->dtype != NUREC_F64) return NUREC_ERR_DTYPE;
    if (n == 0) return NUREC_OK;
    const bool models = p->camera_model != NUREC_CAM_PINHOLE ||
                        (p->shutter != NUREC_SHUTTER_GLOBAL && p->viewmats_end != NULL);
    built[p->dtype == NUREC_F64][models]<<<blocks_for(n, RC_PROJ_THREADS), RC_PROJ_THREADS, 0,
                                           (cudaStream_t)stream>>>(*p);
    return ok();
}

}  // namespace

extern "C" int nurec_rasterize_camera_project_cuda(const nurec_rasterize_camera_params* p, void* stream) {
    static const rc_item_kernel built[2][2] = {{rc_project_kernel_f32<false>, rc_project_kernel_f32<true>},
                                               {rc_project_kernel_f64<false>, rc_project_kernel_f64<true>}};
    return launch_built(built, p, p->num_cameras * p->num_gaussians, stream);
}

extern "C" int nurec_rasterize_camera_forward_cuda(const nurec_rasterize_camera_params* p_in, void* stream) {
    if (p_in->dtype != NUREC_F32 && p_in->dtype != NUREC_F64) return NUREC_ERR_DTYPE;
    cudaStream_t s = (cudaStream_t)stream;
    const bool f64 = p_in->dtype == NUREC_F64;
    set_carveouts();
    nurec_tiles_params t;
    nurec_rasterize_camera_tiles(p_in, &t);
    int st = nurec_tiles_bin_cuda(&t, stream);
    if (st != NUREC_OK) return st;
    /* an output of the op: filled whatever follows (its backward takes it back) */
    if (nurec_splat_later_parts(*p_in, p_in->num_cameras * tiles_per_image(p_in), s) != cudaSuccess)
        return NUREC_ERR_CUDA;
    if (p_in->num_cameras == 0 || p_in->width == 0 || p_in->height == 0 || p_in->channels == 0) return NUREC_OK;
    const nurec_rasterize_camera_params q =
        nurec_splat_with_parts_grid(p_in, p_in->num_cameras * num_passes(p_in));
    const nurec_rasterize_camera_params* p = &q;
    int passes = num_passes(p);
    if (p->segments > 1) {
        /* the parts' state is an output of the op (for the backward), and some
           of its slots belong to no part (tiles/splat_math.h): zeros there,
           so that every output is defined and the same call to call */
        const size_t pixels = (size_t)(p->num_cameras * p->height * (int64_t)p->width);
        const size_t cells = (size_t)p->seg_slots * RC_BLOCK; /* the slots' cells */
        /* parts publish where they stop a pixel in p.last (rc_forward_body): start high */
        if (cudaMemsetAsync(p->last, 0x7f, sizeof(int32_t) * pixels, s) != cudaSuccess) return NUREC_ERR_CUDA;
        if (cudaMemsetAsync(p->seg_state, 0, (f64 ? 8 : 4) * (size_t)(p->channels + 2) * cells, s) != cudaSuccess ||
            cudaMemsetAsync(p->seg_last, 0, sizeof(int32_t) * cells, s) != cudaSuccess)
            return NUREC_ERR_CUDA;
    }
    const bool pack = p->channels < RC_CH; /* the depth in the unused slot (rc_composite) */
    forward_walk(*p, f64, pack, false, passes, s);
    if (p->segments > 1) { /* chain the parts of the long lists; walk again where the cut-off falls */
        unsigned b = blocks_for(p->num_cameras * p->height * (int64_t)p->width, RC_PROJ_THREADS);
        for (int phase = 0; phase < 2; ++phase) {
            if (ok() != NUREC_OK) return NUREC_ERR_CUDA;
            if (f64) rc_combine_kernel_f64<<<b, RC_PROJ_THREADS, 0, s>>>(*p, phase);
            else rc_combine_kernel_f32<<<b, RC_PROJ_THREADS, 0, s>>>(*p, phase);
            if (phase == 1) break;
            /* the second walk: later parts only (a first part is never walked again) */
            forward_walk(*p, f64, pack, true, passes, s);
        }
    }
    return ok();
}

extern "C" int nurec_rasterize_camera_backward_cuda(const nurec_rasterize_camera_params* p_in, void* stream) {
    if (p_in->dtype != NUREC_F32 && p_in->dtype != NUREC_F64) return NUREC_ERR_DTYPE;
    const nurec_rasterize_camera_params q =
        nurec_splat_with_parts_grid(p_in, p_in->num_cameras * num_passes(p_in));
    const nurec_rasterize_camera_params* p = &q;
    cudaStream_t s = (cudaStream_t)stream;
    const bool f64 = p->dtype == NUREC_F64;
    const size_t el = f64 ? sizeof(double) : sizeof(float);
    const int64_t C = p->num_cameras, N = p->num_gaussians, P = C * N;
    const bool sh = p->sh_degree >= 0;
    set_carveouts();
    /* the records' rows, with absgrad's slots when asked for */
    if (P > 0 && cudaMemsetAsync(p->grad_records, 0, el * NUREC_SPLAT_GREC_ROW(p->absgrad) * (size_t)P, s) !=
                     cudaSuccess)
        return NUREC_ERR_CUDA;
    size_t gcol = sh ? el * 3 * (size_t)P : el * (size_t)(p->channels * (p->features_per_camera ? P : N));
    void* gcol_ptr = sh ? p->grad_colors : p->grad_features;
    if (gcol > 0 && cudaMemsetAsync(gcol_ptr, 0, gcol, s) != cudaSuccess) return NUREC_ERR_CUDA;
    if (C > 0 && p->width > 0 && p->height > 0 && p->channels > 0) {
        int passes = num_passes(p);
        if (nurec_splat_later_parts(*p_in, C * tiles_per_image(p), s) != cudaSuccess) return NUREC_ERR_CUDA;
        if (!p->absgrad) backward_walk_as<false, RC_CH>(q, f64, passes, s);
        else if (RC_BWD_CH3 && p->channels == 3) backward_walk_as<true, 3>(q, f64, passes, s); /* RGB, SH colours */
        else backward_walk_as<true, RC_CH>(q, f64, passes, s);
        if (ok() != NUREC_OK) return NUREC_ERR_CUDA;
    }
    if (N > 0) {
        unsigned b = blocks_for(N, RC_PROJ_BWD_THREADS);
        const bool models = p->camera_model != NUREC_CAM_PINHOLE;
        if (f64) {
            if (models) rc_project_backward_kernel_f64<true><<<b, RC_PROJ_BWD_THREADS, 0, s>>>(*p);
            else rc_project_backward_kernel_f64<false><<<b, RC_PROJ_BWD_THREADS, 0, s>>>(*p);
        } else {
            if (models) rc_project_backward_kernel_f32<true><<<b, RC_PROJ_BWD_THREADS, 0, s>>>(*p);
            else rc_project_backward_kernel_f32<false><<<b, RC_PROJ_BWD_THREADS, 0, s>>>(*p);
        }
    }
    return ok();
}

extern "C" int nurec_rasterize_camera_visible_cuda(const nurec_rasterize_camera_params* p, void* stream) {
    static const rc_item_kernel built[2][2] = {{rc_visible_kernel_f32<false>, rc_visible_kernel_f32<true>},
                                               {rc_visible_kernel_f64<false>, rc_visible_kernel_f64<true>}};
    return launch_built(built, p, p->num_gaussians, stream);
}

extern "C" int nurec_rasterize_camera_median_cuda(const nurec_rasterize_camera_params* p, void* stream) {
    if (p->dtype != NUREC_F32 && p->dtype != NUREC_F64) return NUREC_ERR_DTYPE;
    const int64_t tiles = p->num_cameras * (int64_t)p->tiles_x * p->tiles_y;
    if (tiles == 0) return NUREC_OK;
    cudaStream_t s = (cudaStream_t)stream;
    if (p->dtype == NUREC_F64) rc_median_kernel_f64<<<(unsigned)tiles, RC_BLOCK, 0, s>>>(*p);
    else rc_median_kernel_f32<<<(unsigned)tiles, RC_BLOCK, 0, s>>>(*p);
    return ok();
}
