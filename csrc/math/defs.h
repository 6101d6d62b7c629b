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

#define NUREC_PASTE_(a, b) a##_##b
#define NUREC_PASTE(a, b) NUREC_PASTE_(a, b)

/* Status codes returned by every C launcher (CPU and CUDA). */
enum nurec_status {
    NUREC_OK = 0,
    NUREC_ERR_DTYPE = 1,  /* unsupported floating dtype */
    NUREC_ERR_CUDA = 2    /* a CUDA call failed; see nurec_last_cuda_error */
};

/* Floating dtype of a params struct's real-valued tensors. */
enum nurec_dtype { NUREC_F32 = 0, NUREC_F64 = 1 };

/* Reads element i of an index tensor that is int32 or int64: index tensors of
 * either width are accepted without a conversion kernel. */
NUREC_HD int64_t nurec_load_index(const void* p, int is64, int64_t i) {
    return is64 ? ((const int64_t*)p)[i] : (int64_t)((const int32_t*)p)[i];
}

#endif /* NUREC_MATH_DEFS_H */
