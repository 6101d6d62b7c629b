/* Shared definitions for code that is compiled both as C99 (CPU kernels)
 * and as CUDA (device kernels). Every per-element formula of nurec_ops lives
 * in a header under csrc/math/ and is written once, against the generic
 * scalar type `real_t` (see generic.h), so the CPU and CUDA paths agree by
 * construction. */
#ifndef NUREC_MATH_DEFS_H
#define NUREC_MATH_DEFS_H

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define NUREC_HD static __host__ __device__ __forceinline__
#else
#define NUREC_HD static inline
#endif

/* Before a loop with a constant bound whose arrays must stay in registers
 * (a run-time bound puts them on the stack); the C compiler unrolls alone. */
#if defined(__CUDACC__)
#define NUREC_UNROLL _Pragma("unroll")
#else
#define NUREC_UNROLL
#endif

/* floor(log2 n) for n >= 1 (0 for n <= 1): the lidar's row-search levels,
 * in its projection and in the glue's check of the table's shape. */
NUREC_HD int nurec_floor_log2(int n) {
    int l = 0;
    while ((n >> (l + 1)) != 0) ++l;
    return l;
}

/* The Gaussian's falloff exp(-sigma) in float32 on the GPU: the hardware's
 * base-2 exponential (a multiply and MUFU.EX2, flushing to zero below
 * 2^-126), 2 instructions where expf takes 11 (software range reduction)
 * and __expf 5 (its denormal path), in the walks' innermost loop. Its error
 * is ~2 ulp plus the rounding of x log2(e): ~5e-7 relative over the sigma
 * that can reach alpha >= 1/255 (sigma < ln 255 = 5.5), far inside the
 * float32 tolerance and the footprint's margin (tiles/splat.h); what it
 * flushes to zero is below alpha's cut anyway. The CPU keeps expf; float64
 * keeps exp everywhere. */
#if defined(__CUDA_ARCH__)
static __device__ __forceinline__ float nurec_expf_falloff(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f));
    return y;
}
#define NUREC_EXPF_FALLOFF nurec_expf_falloff
#else
#define NUREC_EXPF_FALLOFF expf
#endif

/* The walks' staged falloff (tiles/splat_math_generic.h, splat_stage_record):
 * the kernels keep a record's conic scaled so that the exponent is one
 * quadratic form q = -sigma x NUREC_STAGED_SCALE_F32 and the falloff is
 * ex2(q) on the GPU: the scale by log2(e) and the 1/2 of sigma are paid once
 * per staged entry instead of at every pixel. The CPU keeps expf (scale 1);
 * float64 keeps exp everywhere. */
#if defined(__CUDA_ARCH__)
static __device__ __forceinline__ float nurec_expf_staged(float q) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(q));
    return y;
}
#define NUREC_EXPF_STAGED nurec_expf_staged
#define NUREC_STAGED_SCALE_F32 1.4426950408889634
#else
#define NUREC_EXPF_STAGED expf
#define NUREC_STAGED_SCALE_F32 1.0
#endif

/* 1 / x in float32 on the GPU for a normal x (no zero, infinity or
 * denormal: the backward's 1 / (1 - alpha), alpha <= 0.99): the hardware
 * reciprocal and one Newton step, within 1 ulp, 3 instructions; IEEE
 * division adds a range test, a branch and a slow path around the same. */
#if defined(__CUDA_ARCH__)
static __device__ __forceinline__ float nurec_rcpf_normal(float x) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return fmaf(r, fmaf(-x, r, 1.0f), r);
}
#define NUREC_RCPF_NORMAL nurec_rcpf_normal
#else
#define NUREC_RCPF_NORMAL(x) (1.0f / (x))
#endif

#define NUREC_PASTE_(a, b) a##_##b
#define NUREC_PASTE(a, b) NUREC_PASTE_(a, b)

/* Status codes returned by every C launcher (CPU and CUDA). */
enum nurec_status {
    NUREC_OK = 0,
    NUREC_ERR_DTYPE = 1,  /* unsupported floating dtype */
    NUREC_ERR_CUDA = 2,   /* a CUDA call failed; see nurec_last_cuda_error */
    NUREC_ERR_NOT_PINNED = 3 /* host memory handed to a CUDA kernel is not
                                page-locked, so no kernel can reach it (the
                                glue names the tensor) */
};

/* Floating dtype of a params struct's real-valued tensors. */
enum nurec_dtype { NUREC_F32 = 0, NUREC_F64 = 1 };

/* Reads element i of an index tensor that is int32 or int64: index tensors of
 * either width are accepted without a conversion kernel. */
NUREC_HD int64_t nurec_load_index(const void* p, int is64, int64_t i) {
    return is64 ? ((const int64_t*)p)[i] : (int64_t)((const int32_t*)p)[i];
}

#endif /* NUREC_MATH_DEFS_H */
