/* Programmatic dependent launch (Hopper and newer): lets a kernel start while
 * the kernel before it in the stream is still running, and wait for it only
 * where it reads that kernel's output. Both calls are no-ops on older
 * architectures and when the kernel was launched without the attribute. */
#ifndef NUREC_MATH_CUDA_PDL_CUH
#define NUREC_MATH_CUDA_PDL_CUH

#include <cuda_runtime.h>

/* In the earlier kernel: allow the next one (launched with PDL) to start. */
__device__ __forceinline__ void nurec_pdl_allow_next(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;");
#endif
}

/* In the later kernel: wait until the earlier grid has completed and its
 * writes are visible. */
__device__ __forceinline__ void nurec_pdl_wait_prev(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Launch configuration with the programmatic-serialization attribute set
 * when `pdl` is true (the caller guarantees that the previous launch on the
 * stream produced only what the kernel reads after nurec_pdl_wait_prev). */
typedef struct nurec_launch {
    cudaLaunchConfig_t config;
    cudaLaunchAttribute attr[1];
} nurec_launch;

static inline void nurec_launch_init(nurec_launch* l, unsigned blocks, unsigned threads,
                                     cudaStream_t stream, int pdl) {
    l->config.gridDim = dim3(blocks);
    l->config.blockDim = dim3(threads);
    l->config.dynamicSmemBytes = 0;
    l->config.stream = stream;
    l->attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    l->attr[0].val.programmaticStreamSerializationAllowed = pdl ? 1 : 0;
    l->config.attrs = l->attr;
    l->config.numAttrs = 1;
}

#endif /* NUREC_MATH_CUDA_PDL_CUH */
