// C++ helpers for the PyTorch registration glue (csrc/<family>/<family>_register.cpp): argument
// validation with messages that name the argument, dtype mapping, devices
// and streams. Built on PyTorch's stable ABI only, so the library compiled
// against one torch release loads on later ones (TORCH_TARGET_VERSION).
#pragma once

#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/util/Exception.h>

#include <cstdio>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

extern "C" {
#include "math/defs.h"
}

namespace nurec {
namespace detail {

// Error messages are built by appending to a std::string, never through
// iostreams (std::ostringstream, which torch's STD_TORCH_CHECK uses): a
// toolchain that links its own static copy of libstdc++ into the library
// (the H200 image's /opt/gcc/bin/g++ does) crashed in that copy's locale
// facets at the first `<<` of an integer, so every bad argument killed the
// process instead of raising. Integers go through std::to_string, reals
// through snprintf: neither touches a locale object.
inline void append(std::string& s, const char* v) { s += v ? v : "(null)"; }
inline void append(std::string& s, const std::string& v) { s += v; }
inline void append(std::string& s, char v) { s += v; }
inline void append(std::string& s, double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%g", v);
    s += buf;
}
template <class T>
typename std::enable_if<std::is_integral<T>::value>::type append(std::string& s, T v) {
    s += std::to_string(v);
}

template <class... A>
std::string cat(const A&... a) {
    std::string s;
    (append(s, a), ...);
    return s;
}

}  // namespace detail
}  // namespace nurec

// A failed argument check: throws std::runtime_error with only what the
// user needs (the op, the argument and what was expected), without a C++
// file and line. It reaches Python as a RuntimeError.
#define NUREC_CHECK(cond, ...)                                                  \
    do {                                                                        \
        if (!(cond)) throw std::runtime_error(::nurec::detail::cat(__VA_ARGS__)); \
    } while (0)

namespace nurec {

// The most dimensions of a tensor the glue allocates (a batch of any
// leading shape plus an item's own).
constexpr int64_t kMaxDims = 16;

using torch::stable::Tensor;
using torch::headeronly::ScalarType;

inline std::string shape_str(const Tensor& t) {
    std::string s = "[";
    for (int64_t d = 0; d < t.dim(); ++d) {
        if (d) s += ", ";
        s += std::to_string(t.size(d));
    }
    return s + "]";
}

inline const char* dtype_str(ScalarType t) {
    switch (t) {
        case ScalarType::Float: return "float32";
        case ScalarType::Double: return "float64";
        case ScalarType::Half: return "float16";
        case ScalarType::BFloat16: return "bfloat16";
        case ScalarType::Int: return "int32";
        case ScalarType::Long: return "int64";
        case ScalarType::Bool: return "bool";
        case ScalarType::Byte: return "uint8";
        default: return "another dtype";
    }
}

// Checks t's shape against `want` (-1: any size). `desc` is how the message
// writes the expected shape, e.g. "[N, 4]".
inline void check_shape(const char* op, const char* name, const Tensor& t,
                        std::initializer_list<int64_t> want, const char* desc) {
    bool ok = t.dim() == (int64_t)want.size();
    int64_t d = 0;
    for (int64_t w : want) {
        if (ok && w >= 0 && t.size(d) != w) ok = false;
        ++d;
    }
    NUREC_CHECK(ok, "nurec_ops.", op, ": `", name, "` must have shape ", desc,
                    ", got ", shape_str(t));
}

inline void check_dtype(const char* op, const char* name, const Tensor& t,
                        ScalarType want) {
    NUREC_CHECK(t.scalar_type() == want, "nurec_ops.", op, ": `", name,
                    "` must be ", dtype_str(want), ", got ", dtype_str(t.scalar_type()));
}

// Floating tensors: float32 or float64, all of one op's alike (`ref`).
inline void check_real(const char* op, const char* name, const Tensor& t,
                       const Tensor& ref, const char* ref_name) {
    ScalarType s = t.scalar_type();
    NUREC_CHECK(s == ScalarType::Float || s == ScalarType::Double, "nurec_ops.", op,
                    ": `", name, "` must be float32 or float64, got ", dtype_str(s));
    NUREC_CHECK(s == ref.scalar_type(), "nurec_ops.", op, ": `", name, "` is ",
                    dtype_str(s), " but `", ref_name, "` is ", dtype_str(ref.scalar_type()),
                    "; all floating inputs must share one dtype");
}

inline bool check_index(const char* op, const char* name, const Tensor& t) {
    ScalarType s = t.scalar_type();
    NUREC_CHECK(s == ScalarType::Int || s == ScalarType::Long, "nurec_ops.", op, ": `",
                    name, "` must be int32 or int64, got ", dtype_str(s));
    return s == ScalarType::Long;
}

inline void check_device(const char* op, const char* name, const Tensor& t,
                         const Tensor& ref, const char* ref_name) {
    NUREC_CHECK(t.is_cpu() || t.is_cuda(), "nurec_ops.", op, ": `", name,
                    "` must be on the CPU or a CUDA device");
    bool same = t.is_cuda() == ref.is_cuda() &&
                (!t.is_cuda() || t.get_device_index() == ref.get_device_index());
    NUREC_CHECK(same, "nurec_ops.", op, ": `", name, "` is on ",
                    t.is_cuda() ? "cuda:" + std::to_string(t.get_device_index()) : "cpu",
                    " but `", ref_name, "` is on ",
                    ref.is_cuda() ? "cuda:" + std::to_string(ref.get_device_index()) : "cpu",
                    "; all inputs must be on one device");
}

// Floating tensors checked against one of the op's (`ref`): every one's
// dtype (check_real) first, then every one's device, so that a call with
// one wrong input names it whatever its place in the list.
using NamedTensor = std::pair<const char*, const Tensor*>;
inline void check_like(const char* op, const Tensor& ref, const char* ref_name,
                       std::initializer_list<NamedTensor> named) {
    for (const NamedTensor& nt : named) check_real(op, nt.first, *nt.second, ref, ref_name);
    for (const NamedTensor& nt : named) check_device(op, nt.first, *nt.second, ref, ref_name);
}

inline int dtype_code(const Tensor& t) {
    return t.scalar_type() == ScalarType::Double ? NUREC_F64 : NUREC_F32;
}

// Kernels read dense row-major memory: non-contiguous or expanded inputs are
// copied once. The is_contiguous test is a direct shim call; going through
// the dispatcher for contiguous inputs would cost microseconds per argument.
inline Tensor dense(const Tensor& t) {
    return t.is_contiguous() ? t : torch::stable::contiguous(t);
}

// t made dense in place (so that its copy, if one was made, lives as long
// as t) and its data, for a params struct's pointer.
inline void* dense_data(Tensor& t) {
    t = dense(t);
    return t.data_ptr();
}

// A new dense tensor of shape sizes[0..ndim) and dtype `dtype` (an aoti
// dtype code) on `like`'s device. Calls the allocator shim directly (not
// aten::empty through the boxed dispatcher): host overhead per op call
// matters for ops that run in microseconds.
inline Tensor empty_dense(const Tensor& like, const int64_t* sizes, int64_t ndim, int32_t dtype) {
    int64_t strides[kMaxDims];
    NUREC_CHECK(ndim <= kMaxDims, "nurec_ops: an output of ", ndim, " dimensions (at most ",
                kMaxDims, ")");
    int64_t st = 1;
    for (int64_t d = ndim - 1; d >= 0; --d) {
        strides[d] = st;
        st *= sizes[d] > 1 ? sizes[d] : 1;
    }
    int32_t dev_type, dev_index;
    AtenTensorHandle h = like.get();
    NUREC_CHECK(aoti_torch_get_device_type(h, &dev_type) == AOTI_TORCH_SUCCESS &&
                    aoti_torch_get_device_index(h, &dev_index) == AOTI_TORCH_SUCCESS,
                "nurec_ops: could not read a tensor's device");
    AtenTensorHandle out = nullptr;
    NUREC_CHECK(aoti_torch_empty_strided(ndim, sizes, strides, dtype, dev_type, dev_index, &out) ==
                    AOTI_TORCH_SUCCESS,
                "nurec_ops: allocation of an output failed");
    return Tensor(out);
}

inline Tensor empty_dense(const Tensor& like, std::initializer_list<int64_t> shape,
                          int32_t dtype) {
    return empty_dense(like, shape.begin(), (int64_t)shape.size(), dtype);
}

// A new dense tensor of shape sizes[0..ndim) on `like`'s device, of
// `like`'s dtype or bool.
inline Tensor empty_like_shape(const Tensor& like, const int64_t* sizes, int64_t ndim, bool as_bool = false) {
    int32_t dtype;
    NUREC_CHECK(aoti_torch_get_dtype(like.get(), &dtype) == AOTI_TORCH_SUCCESS,
                "nurec_ops: could not read a tensor's dtype");
    return empty_dense(like, sizes, ndim, as_bool ? aoti_torch_dtype_bool() : dtype);
}

inline Tensor empty_like_shape(const Tensor& like, std::initializer_list<int64_t> shape,
                               bool as_bool = false) {
    return empty_like_shape(like, shape.begin(), (int64_t)shape.size(), as_bool);
}

inline void check_status(const char* op, int status) {
    NUREC_CHECK(status != NUREC_ERR_DTYPE, "nurec_ops.", op, ": unsupported dtype");
    NUREC_CHECK(status == NUREC_OK, "nurec_ops.", op,
                    ": a CUDA kernel launch failed (status ", status, ")");
}

}  // namespace nurec
