// The glue's launch helpers shared by every family's registration file:
// run a family's CPU or CUDA launcher on the device of a tensor, with that
// device current and its current CUDA stream.
#ifndef NUREC_GLUE_LAUNCH_H
#define NUREC_GLUE_LAUNCH_H

#include "torch_glue.h"

#ifdef NUREC_WITH_CUDA
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#endif

extern "C" {
#include "math/defs.h"
}

namespace nurec {


// Calls run_cuda(stream) with the device of `ref` current and its current
// CUDA stream; raises in a build without CUDA kernels.
template <class F>
int on_device(const char* op, const Tensor& ref, F&& run_cuda) {
#ifdef NUREC_WITH_CUDA
    torch::stable::accelerator::DeviceGuard guard(ref.get_device_index());
    void* stream = nullptr;
    NUREC_CHECK(aoti_torch_get_current_cuda_stream(ref.get_device_index(), &stream) ==
                        AOTI_TORCH_SUCCESS,
                    "nurec_ops.", op, ": could not get the current CUDA stream");
    return run_cuda(stream);
#else
    (void)ref;
    (void)run_cuda;
    NUREC_CHECK(false, "nurec_ops.", op,
                    ": this build of nurec_ops has no CUDA kernels (built without nvcc, "
                    "or with NUREC_OPS_CUDA=0)");
    return NUREC_ERR_CUDA;
#endif
}

// A CUDA launcher of params P (its type is not deduced from the argument,
// so that a build without CUDA may pass NUREC_CUDA_ONLY's nullptr).
template <class P>
struct CudaLauncher {
    using type = int (*)(const P*, void*);
};

// Runs `cpu` or `cuda` (a launcher taking the current stream) on the
// device of `ref`, with that device current.
template <class P>
int launch(const char* op, const Tensor& ref, const P& params,
           int (*cpu)(const P*), typename CudaLauncher<P>::type cuda) {
    if (ref.is_cpu()) return cpu(&params);
    return on_device(op, ref, [&](void* stream) { return cuda(&params, stream); });
}

// Two launchers back to back on one device guard and one stream query (the
// fused collection: its host time per call is what back-to-back calls see).
// Returns the first failure.
template <class P1, class P2>
int launch2(const char* op, const Tensor& ref, const P1& p1, int (*cpu1)(const P1*),
            int (*cuda1)(const P1*, void*), const P2& p2, int (*cpu2)(const P2*),
            int (*cuda2)(const P2*, void*)) {
    if (ref.is_cpu()) {
        int st = cpu1(&p1);
        return st != NUREC_OK ? st : cpu2(&p2);
    }
    return on_device(op, ref, [&](void* stream) {
        int st = cuda1(&p1, stream);
        return st != NUREC_OK ? st : cuda2(&p2, stream);
    });
}

#ifdef NUREC_WITH_CUDA
#define NUREC_CUDA_ONLY(f) (f)
#else
#define NUREC_CUDA_ONLY(f) nullptr /* not compiled, and never called without CUDA */
#endif

}  // namespace nurec

#endif  // NUREC_GLUE_LAUNCH_H
