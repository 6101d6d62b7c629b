/* CUDA kernels of rasterize_rays. Forward: per-Gaussian records and the
 * items' boxes (2 launches, nurec_rasterize_rays_project_cuda) -> tile
 * binning (tiles.cu, boxes mode) -> per-tile compositing (1 launch; its
 * grid: cells + 1 tiles (the last: the rays in no cell, written NaN) x
 * sensors x channel passes x NUREC_RAYS_CHUNK_SPLIT). Backward: two memsets, the per-tile walk and
 * the per-Gaussian chain to quats and scales. All on the caller's stream,
 * no host synchronization; an overflowed binning (status[1]) turns the
 * outputs into NaN and the gradients into zeros. */
#include <cuda_runtime.h>

extern "C" {
#include "rasterize_rays/rasterize_rays_math.h"
}

#define RAYS_THREADS 128 /* rays of a chunk, Gaussians of a batch */
#define RAYS_BWD_DIRECT_LANES 8 /* backward: at most this many contributing lanes add directly (as the lidar's) */

#define NUREC_GENERIC_FILE "rasterize_rays/rasterize_rays_cuda_generic.cuh"
#include "math/generic.h"

namespace {

int ok(void) { return cudaGetLastError() == cudaSuccess ? NUREC_OK : NUREC_ERR_CUDA; }

unsigned blocks_for(int64_t n, int t) { return (unsigned)((n + t - 1) / t); }

}  // namespace

extern "C" size_t nurec_rasterize_rays_workspace_bytes(const nurec_rasterize_rays_params* p) {
    const nurec_tiles_params t = nurec_rasterize_rays_tiles(p);
    return nurec_tiles_workspace_bytes(&t);
}

extern "C" int nurec_rasterize_rays_project_cuda(const nurec_rasterize_rays_params* p, void* stream) {
    if (p->dtype != NUREC_F32 && p->dtype != NUREC_F64) return NUREC_ERR_DTYPE;
    cudaStream_t s = (cudaStream_t)stream;
    const int64_t N = p->num_gaussians, P = p->num_sensors * N;
    if (N == 0) return NUREC_OK;
    if (p->dtype == NUREC_F64) rays_gauss_kernel_f64<<<blocks_for(N, 256), 256, 0, s>>>(*p);
    else rays_gauss_kernel_f32<<<blocks_for(N, 256), 256, 0, s>>>(*p);
    if (P > 0) {
        if (p->dtype == NUREC_F64) rays_item_kernel_f64<<<blocks_for(P, 128), 128, 0, s>>>(*p);
        else rays_item_kernel_f32<<<blocks_for(P, 128), 128, 0, s>>>(*p);
    }
    return ok();
}

extern "C" int nurec_rasterize_rays_forward_cuda(const nurec_rasterize_rays_params* p, void* stream) {
    if (p->dtype != NUREC_F32 && p->dtype != NUREC_F64) return NUREC_ERR_DTYPE;
    cudaStream_t s = (cudaStream_t)stream;
    const nurec_tiles_params t = nurec_rasterize_rays_tiles(p);
    int st = nurec_tiles_bin_cuda(&t, stream);
    if (st != NUREC_OK) return st;
    if (p->num_sensors == 0 || p->num_rays == 0 || p->channels == 0) return NUREC_OK;
    const int64_t cells = (int64_t)p->tiles_x * p->tiles_y;
    const unsigned passes =
        (unsigned)((p->channels + NUREC_RAYS_CHANNELS_PER_PASS - 1) / NUREC_RAYS_CHANNELS_PER_PASS);
    if (passes * NUREC_RAYS_CHUNK_SPLIT > 65535) return NUREC_ERR_CUDA; /* the glue refuses it first, by name */
    const dim3 grid((unsigned)(cells + 1), (unsigned)p->num_sensors, passes * NUREC_RAYS_CHUNK_SPLIT);
    if (p->dtype == NUREC_F64) rays_forward_kernel_f64<<<grid, RAYS_THREADS, 0, s>>>(*p);
    else rays_forward_kernel_f32<<<grid, RAYS_THREADS, 0, s>>>(*p);
    return ok();
}

extern "C" int nurec_rasterize_rays_backward_cuda(const nurec_rasterize_rays_params* p, void* stream) {
    if (p->dtype != NUREC_F32 && p->dtype != NUREC_F64) return NUREC_ERR_DTYPE;
    cudaStream_t s = (cudaStream_t)stream;
    const size_t rs = p->dtype == NUREC_F64 ? sizeof(double) : sizeof(float);
    const int64_t N = p->num_gaussians;
    if (N == 0) return NUREC_OK;
    if (cudaMemsetAsync(p->grad_gauss, 0, rs * NUREC_RAYS_GG_SIZE * (size_t)N, s) != cudaSuccess ||
        (p->channels > 0 && cudaMemsetAsync(p->grad_features, 0, rs * (size_t)(N * p->channels), s) != cudaSuccess))
        return NUREC_ERR_CUDA;
    const int64_t cells = (int64_t)p->tiles_x * p->tiles_y;
    /* the walk reads status on the device: an overflowed forward has no list */
    if (p->num_sensors > 0 && p->num_rays > 0 && cells > 0) {
        const dim3 grid((unsigned)cells, (unsigned)p->num_sensors, NUREC_RAYS_CHUNK_SPLIT);
        if (p->dtype == NUREC_F64) rays_backward_kernel_f64<<<grid, RAYS_THREADS, 0, s>>>(*p);
        else rays_backward_kernel_f32<<<grid, RAYS_THREADS, 0, s>>>(*p);
    }
    if (p->dtype == NUREC_F64) rays_gauss_vjp_kernel_f64<<<blocks_for(N, 256), 256, 0, s>>>(*p);
    else rays_gauss_vjp_kernel_f32<<<blocks_for(N, 256), 256, 0, s>>>(*p);
    return ok();
}
