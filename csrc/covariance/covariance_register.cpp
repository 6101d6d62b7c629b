// covariance: gsplat's quat_scale_to_covar_preci (covariances and
// precisions of quaternions and scales) and its backward. The glue from
// PyTorch tensors to the family's plain C params struct (validate, make
// dense, allocate outputs, call the CPU or CUDA launcher on the current
// stream), and the family's schemas and kernels, registered beside it (a
// fragment of the nurec_ops library, csrc/register.cpp). Only PyTorch's
// stable ABI is used here.
#include "glue_launch.h"

#include <string>
#include <tuple>

extern "C" {
#include "covariance/covariance.h"
}

using namespace nurec;

namespace {
// ================================================================ covariance

// A shape written as the messages write them: the batch shape of `quats`
// followed by `tail`, e.g. "[2, 5, 3, 3]".
std::string batch_shape_str(const Tensor& quats, std::initializer_list<int64_t> tail) {
    std::string s = "[";
    for (int64_t d = 0; d + 1 < quats.dim(); ++d) s += std::to_string(quats.size(d)) + ", ";
    for (int64_t v : tail) s += std::to_string(v) + ", ";
    return s.substr(0, s.size() - 2) + "]";
}

// t has the batch shape of `quats` followed by `tail`.
void check_batch_shape(const char* op, const char* name, const Tensor& t, const Tensor& quats,
                       std::initializer_list<int64_t> tail) {
    const int64_t lead = quats.dim() - 1;
    bool ok = t.dim() == lead + (int64_t)tail.size();
    for (int64_t d = 0; ok && d < lead; ++d) ok = t.size(d) == quats.size(d);
    int64_t d = lead;
    for (int64_t v : tail) ok = ok && t.size(d++) == v;
    NUREC_CHECK(ok, "nurec_ops.", op, ": `", name, "` must have shape ", batch_shape_str(quats, tail),
                " (the batch shape of `quats`), got ", shape_str(t));
}

// Checks a real tensor of quats' dtype and device, of its batch shape
// followed by `tail`.
void check_batch_real(const char* op, const char* name, const Tensor& t, const Tensor& quats,
                      std::initializer_list<int64_t> tail) {
    check_batch_shape(op, name, t, quats, tail);
    check_real(op, name, t, quats, "quats");
    check_device(op, name, t, quats, "quats");
}

// quats [..., 4] and scales [..., 3] of one batch shape, one real dtype and
// device. Returns the number of items (the batch shape flattened).
int64_t check_inputs(const char* op, const Tensor& quats, const Tensor& scales) {
    NUREC_CHECK(quats.dim() >= 1 && quats.size(quats.dim() - 1) == 4, "nurec_ops.", op,
                ": `quats` must have shape [..., 4], got ", shape_str(quats));
    // an output has the batch dimensions and two more
    NUREC_CHECK(quats.dim() + 1 <= kMaxDims, "nurec_ops.", op, ": `quats` must have at most ", kMaxDims - 1,
                " dimensions, got ", quats.dim());
    check_real(op, "quats", quats, quats, "quats");
    check_batch_real(op, "scales", scales, quats, {3});
    return quats.numel() / 4;
}

// An output or its gradient: [..., 3, 3], or with triu [..., 6].
void check_matrices(const char* op, const char* name, const Tensor& t, const Tensor& quats, bool triu) {
    if (triu) check_batch_real(op, name, t, quats, {NUREC_COV_TRIU});
    else check_batch_real(op, name, t, quats, {3, 3});
}

// A new output of quats' batch shape, [..., 3, 3] or with triu [..., 6];
// one not computed is an empty tensor of shape [0].
Tensor new_matrices(const Tensor& quats, bool computed, bool triu) {
    int64_t sizes[kMaxDims];
    int64_t n = 0;
    if (!computed) {
        sizes[n++] = 0;
        return empty_like_shape(quats, sizes, n);
    }
    for (; n + 1 < quats.dim(); ++n) sizes[n] = quats.size(n);
    if (triu) {
        sizes[n++] = NUREC_COV_TRIU;
    } else {
        sizes[n++] = 3;
        sizes[n++] = 3;
    }
    return empty_like_shape(quats, sizes, n);
}

// A new dense tensor of t's shape, dtype and device.
Tensor new_like(const Tensor& t) {
    int64_t sizes[kMaxDims];
    for (int64_t d = 0; d < t.dim(); ++d) sizes[d] = t.size(d);
    return empty_like_shape(t, sizes, t.dim());
}

// gsplat's (covars, precis) of unnormalized quaternions and scales.
std::tuple<Tensor, Tensor> quat_scale_to_covar_preci(Tensor quats, Tensor scales, bool compute_covar,
                                                     bool compute_preci, bool triu) {
    const char* op = "quat_scale_to_covar_preci";
    nurec_covariance_params p = {};
    p.num_items = check_inputs(op, quats, scales);
    p.dtype = dtype_code(quats);
    p.compute_covar = compute_covar;
    p.compute_preci = compute_preci;
    p.triu = triu;
    quats = dense(quats);
    scales = dense(scales);
    p.quats = quats.data_ptr();
    p.scales = scales.data_ptr();
    Tensor covars = new_matrices(quats, compute_covar, triu);
    Tensor precis = new_matrices(quats, compute_preci, triu);
    p.covars = covars.data_ptr();
    p.precis = precis.data_ptr();
    if (compute_covar || compute_preci)
        check_status(op, launch(op, quats, p, nurec_covariance_forward_cpu,
                                NUREC_CUDA_ONLY(nurec_covariance_forward_cuda)));
    return {covars, precis};
}

// Gradients of quats and scales given those of covars and precis (None:
// zero, e.g. an output not computed), in the forward's layout.
std::tuple<Tensor, Tensor> quat_scale_to_covar_preci_bwd(Tensor quats, Tensor scales,
                                                         std::optional<Tensor> grad_covars,
                                                         std::optional<Tensor> grad_precis, bool triu) {
    const char* op = "quat_scale_to_covar_preci_bwd";
    nurec_covariance_params p = {};
    p.num_items = check_inputs(op, quats, scales);
    p.dtype = dtype_code(quats);
    p.compute_covar = grad_covars.has_value();
    p.compute_preci = grad_precis.has_value();
    p.triu = triu;
    Tensor gc, gp;
    if (grad_covars.has_value()) {
        check_matrices(op, "grad_covars", *grad_covars, quats, triu);
        gc = dense(*grad_covars);
        p.grad_covars = gc.data_ptr();
    }
    if (grad_precis.has_value()) {
        check_matrices(op, "grad_precis", *grad_precis, quats, triu);
        gp = dense(*grad_precis);
        p.grad_precis = gp.data_ptr();
    }
    quats = dense(quats);
    scales = dense(scales);
    p.quats = quats.data_ptr();
    p.scales = scales.data_ptr();
    Tensor grad_quats = new_like(quats);
    Tensor grad_scales = new_like(scales);
    p.grad_quats = grad_quats.data_ptr();
    p.grad_scales = grad_scales.data_ptr();
    check_status(op, launch(op, quats, p, nurec_covariance_backward_cpu,
                            NUREC_CUDA_ONLY(nurec_covariance_backward_cuda)));
    return {grad_quats, grad_scales};
}
// ============================================================ end covariance

}  // namespace

STABLE_TORCH_LIBRARY_FRAGMENT(nurec_ops, m) {
    m.def("quat_scale_to_covar_preci(Tensor quats, Tensor scales, bool compute_covar, bool compute_preci, "
          "bool triu) -> (Tensor covars, Tensor precis)");
    m.def("quat_scale_to_covar_preci_bwd(Tensor quats, Tensor scales, Tensor? grad_covars, Tensor? grad_precis, "
          "bool triu) -> (Tensor grad_quats, Tensor grad_scales)");
}

// One function per op serves both dispatch keys: it branches on the device itself.
#define NUREC_REGISTER_COVARIANCE(m)                                          \
    m.impl("quat_scale_to_covar_preci", TORCH_BOX(&quat_scale_to_covar_preci)); \
    m.impl("quat_scale_to_covar_preci_bwd", TORCH_BOX(&quat_scale_to_covar_preci_bwd));

STABLE_TORCH_LIBRARY_IMPL(nurec_ops, CPU, m) { NUREC_REGISTER_COVARIANCE(m) }
#ifdef NUREC_WITH_CUDA
STABLE_TORCH_LIBRARY_IMPL(nurec_ops, CUDA, m) { NUREC_REGISTER_COVARIANCE(m) }
#endif
