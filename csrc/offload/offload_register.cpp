// offload: rows of tables that may live in pinned host memory (issue 51),
// gathered, Adam-updated and written in place by CUDA kernels through unified
// addressing. The glue from PyTorch tensors to the family's plain C params
// structs (validate, make dense what is on the compute device, resolve the
// host tables' device addresses, allocate outputs, call the CPU or CUDA
// launcher on the current stream), and the family's schemas and kernels,
// registered beside it (a fragment of the nurec_ops library,
// csrc/register.cpp). Only PyTorch's stable ABI is used here.
#include "glue_launch.h"

#include <string>

extern "C" {
#include "offload/offload.h"
}

using namespace nurec;

namespace {
// =================================================================== offload

std::string device_str(const Tensor& t) {
    return t.is_cuda() ? "cuda:" + std::to_string(t.get_device_index()) : "cpu";
}

// Where a table (gather_rows' table; adam_rows_' param and its moments)
// may be: on index's device, or, with index on CUDA, in pinned host memory
// (read in place). Returns whether it is on the host for a CUDA index.
bool check_table_device(const char* op, const char* name, const Tensor& t, const Tensor& index) {
    NUREC_CHECK(t.is_cpu() || t.is_cuda(), "nurec_ops.", op, ": `", name, "` must be on the CPU or a CUDA device");
    if (t.is_cpu() && index.is_cuda()) return true;
    NUREC_CHECK(t.is_cuda() == index.is_cuda() && t.get_device_index() == index.get_device_index(), "nurec_ops.",
                op, ": `", name, "` is on ", device_str(t), " but `index` is on ", device_str(index), "; `", name,
                "` must be on `index`'s device or, with `index` on CUDA, in pinned host memory");
    return false;
}

// A host table is read where it is: no copy of it is made.
void check_host_dense(const char* op, const char* name, const Tensor& t) {
    NUREC_CHECK(t.is_contiguous(), "nurec_ops.", op, ": `", name,
                "` in host memory must be contiguous (it is read in place: a copy would defeat that), got a "
                "non-contiguous tensor of shape ", shape_str(t));
}

// [N, D] real with D >= 1.
void check_table(const char* op, const char* name, const Tensor& t) {
    check_shape(op, name, t, {-1, -1}, "[N, D]");
    NUREC_CHECK(t.size(1) >= 1, "nurec_ops.", op, ": `", name, "` must have at least one column (D >= 1), got ",
                shape_str(t));
    check_real(op, name, t, t, name);
}

// index [K] int64 on the CPU or a CUDA device: the compute device.
void check_index_arg(const char* op, const Tensor& index) {
    check_shape(op, "index", index, {-1}, "[K]");
    check_dtype(op, "index", index, ScalarType::Long);
    NUREC_CHECK(index.is_cpu() || index.is_cuda(), "nurec_ops.", op,
                ": `index` must be on the CPU or a CUDA device");
}

// A new dense [K, D] tensor of `dtype_of`'s dtype on index's device.
Tensor new_rows(const Tensor& index, const Tensor& dtype_of, int64_t K, int64_t D) {
    int32_t dtype;
    NUREC_CHECK(aoti_torch_get_dtype(dtype_of.get(), &dtype) == AOTI_TORCH_SUCCESS,
                "nurec_ops: could not read a tensor's dtype");
    return empty_dense(index, {K, D}, dtype);
}

// The address at which kernels on the current device (on_device's) reach
// host tensor t's data in place; `name` is named where t is not pinned. An
// empty table is never read (and may have no address).
void* host_address(const char* op, const char* name, const Tensor& t) {
    int (*const resolve)(const void*, void**) = NUREC_CUDA_ONLY(nurec_offload_device_pointer_cuda);
    void* device = t.data_ptr();
    if (t.numel() == 0) return device;
    const int st = resolve(t.data_ptr(), &device);
    NUREC_CHECK(st != NUREC_ERR_NOT_PINNED, "nurec_ops.", op, ": `", name,
                "` on the CPU must be in pinned memory (Tensor.pin_memory()) when `index` is on CUDA");
    check_status(op, st);
    return device;
}

// Runs an offload op's launcher on index's device and raises on a failed
// status. On CUDA, `rebind` first swaps the host tables' addresses in p for
// the ones the device reaches them at (host_address), which needs that
// device current.
template <class P, class Rebind>
void launch_rows(const char* op, const Tensor& index, P& p, int (*cpu)(const P*),
                 typename CudaLauncher<P>::type cuda, Rebind&& rebind) {
    const int st = index.is_cpu() ? cpu(&p) : on_device(op, index, [&](void* stream) {
        rebind();
        return cuda(&p, stream);
    });
    check_status(op, st);
}

// rows[k] = table[index[k]]: zeros for -1, NaN for any other entry outside
// [0, N).
Tensor gather_rows(Tensor table, Tensor index) {
    const char* op = "gather_rows";
    check_table(op, "table", table);
    check_index_arg(op, index);
    const bool host = check_table_device(op, "table", table, index);
    if (host) check_host_dense(op, "table", table);
    else table = dense(table);
    index = dense(index);
    nurec_gather_rows_params p = {};
    p.dtype = dtype_code(table);
    p.num_rows = table.size(0);
    p.dim = table.size(1);
    p.num_index = index.size(0);
    Tensor rows = new_rows(index, table, p.num_index, p.dim);
    p.table = table.data_ptr();
    p.index = (const int64_t*)index.data_ptr();
    p.rows = rows.data_ptr();
    launch_rows(op, index, p, nurec_gather_rows_cpu, NUREC_CUDA_ONLY(nurec_gather_rows_cuda), [&] {
        if (host) p.table = host_address(op, "table", table);
    });
    return rows;
}

// param, exp_avg, exp_avg_sq: [N, D] of one real dtype and device (index's,
// or pinned host memory), contiguous: updated in place.
void check_adam_tables(const char* op, const Tensor& param, const Tensor& exp_avg, const Tensor& exp_avg_sq) {
    check_table(op, "param", param);
    const std::string want = "[N, D] = " + shape_str(param) + " (param's shape)";
    auto check_moment = [&](const char* name, const Tensor& t) {
        check_shape(op, name, t, {param.size(0), param.size(1)}, want.c_str());
        check_real(op, name, t, param, "param");
    };
    check_moment("exp_avg", exp_avg);
    check_moment("exp_avg_sq", exp_avg_sq);
}

// A row per index entry: [K, D] (K = index.shape[0], D = the table's
// columns), the table's dtype, on index's device (adam_rows_' grad,
// put_rows_' rows).
void check_entry_rows(const char* op, const char* name, const Tensor& t, const Tensor& index, const Tensor& table,
                      const char* table_name) {
    const std::string want = std::string("[K, D] (K = index.shape[0], D = ") + table_name + ".shape[1])";
    check_shape(op, name, t, {index.size(0), table.size(1)}, want.c_str());
    check_real(op, name, t, table, table_name);
    check_device(op, name, t, index, "index");
}

void check_in_place(const char* op, const char* name, const Tensor& t) {
    NUREC_CHECK(t.is_contiguous(), "nurec_ops.", op, ": `", name,
                "` must be contiguous (it is updated in place), got a non-contiguous tensor of shape ",
                shape_str(t));
}

// torch.optim.Adam's checks of its hyperparameters (eps > 0: with eps = 0 a
// row of zero moments would divide 0 by 0). NaN fails every one.
void check_adam_scalars(const char* op, double lr, double beta1, double beta2, double eps, double weight_decay) {
    NUREC_CHECK(lr >= 0, "nurec_ops.", op, ": `lr` must be >= 0, got ", lr);
    NUREC_CHECK(beta1 >= 0 && beta1 < 1, "nurec_ops.", op, ": `beta1` must be in [0, 1), got ", beta1);
    NUREC_CHECK(beta2 >= 0 && beta2 < 1, "nurec_ops.", op, ": `beta2` must be in [0, 1), got ", beta2);
    NUREC_CHECK(eps > 0, "nurec_ops.", op, ": `eps` must be > 0, got ", eps);
    NUREC_CHECK(weight_decay >= 0, "nurec_ops.", op, ": `weight_decay` must be >= 0, got ", weight_decay);
}

// torch.optim.Adam's step on the rows index lists (gsplat's SelectiveAdam),
// in place. Returns the status [1] int64 on index's device: index's bad
// entries, 0 when the rows were updated (else nothing was).
Tensor adam_rows_(Tensor param, Tensor exp_avg, Tensor exp_avg_sq, Tensor index, Tensor grad, Tensor step,
                  double lr, double beta1, double beta2, double eps, double weight_decay) {
    const char* op = "adam_rows_";
    check_adam_tables(op, param, exp_avg, exp_avg_sq);
    check_index_arg(op, index);
    const bool host = check_table_device(op, "param", param, index);
    check_device(op, "exp_avg", exp_avg, param, "param");
    check_device(op, "exp_avg_sq", exp_avg_sq, param, "param");
    check_in_place(op, "param", param);
    check_in_place(op, "exp_avg", exp_avg);
    check_in_place(op, "exp_avg_sq", exp_avg_sq);
    const int64_t K = index.size(0), D = param.size(1);
    check_entry_rows(op, "grad", grad, index, param, "param");
    NUREC_CHECK(step.numel() == 1 && step.dim() <= 1, "nurec_ops.", op,
                ": `step` must be a 0-dim or 1-element tensor (Adam's step count t), got shape ", shape_str(step));
    check_real(op, "step", step, step, "step");
    check_device(op, "step", step, index, "index");
    check_adam_scalars(op, lr, beta1, beta2, eps, weight_decay);
    index = dense(index);
    grad = dense(grad);
    nurec_adam_rows_params p = {};
    p.dtype = dtype_code(param);
    p.num_rows = param.size(0);
    p.dim = D;
    p.num_index = K;
    p.param = param.data_ptr();
    p.exp_avg = exp_avg.data_ptr();
    p.exp_avg_sq = exp_avg_sq.data_ptr();
    p.index = (const int64_t*)index.data_ptr();
    p.grad = grad.data_ptr();
    p.step = step.data_ptr();
    p.step_is_f64 = step.scalar_type() == ScalarType::Double;
    p.lr = lr;
    p.beta1 = beta1;
    p.beta2 = beta2;
    p.eps = eps;
    p.weight_decay = weight_decay;
    Tensor status = empty_dense(index, {1}, aoti_torch_dtype_int64());
    p.status = (int64_t*)status.data_ptr();
    launch_rows(op, index, p, nurec_adam_rows_cpu, NUREC_CUDA_ONLY(nurec_adam_rows_cuda), [&] {
        if (!host) return;
        p.param = host_address(op, "param", param);
        p.exp_avg = host_address(op, "exp_avg", exp_avg);
        p.exp_avg_sq = host_address(op, "exp_avg_sq", exp_avg_sq);
    });
    return status;
}
// table[index[k]] = rows[k], in place (a cache's write-back). Returns the
// status [1] int64 on index's device: index's bad entries (adam_rows_'s
// rule), 0 when the rows were written (else nothing was).
Tensor put_rows_(Tensor table, Tensor index, Tensor rows) {
    const char* op = "put_rows_";
    check_table(op, "table", table);
    check_index_arg(op, index);
    const bool host = check_table_device(op, "table", table, index);
    check_in_place(op, "table", table);
    const int64_t K = index.size(0), D = table.size(1);
    check_entry_rows(op, "rows", rows, index, table, "table");
    index = dense(index);
    rows = dense(rows);
    nurec_put_rows_params p = {};
    p.dtype = dtype_code(table);
    p.num_rows = table.size(0);
    p.dim = D;
    p.num_index = K;
    p.table = table.data_ptr();
    p.index = (const int64_t*)index.data_ptr();
    p.rows = rows.data_ptr();
    Tensor status = empty_dense(index, {1}, aoti_torch_dtype_int64());
    p.status = (int64_t*)status.data_ptr();
    launch_rows(op, index, p, nurec_put_rows_cpu, NUREC_CUDA_ONLY(nurec_put_rows_cuda), [&] {
        if (host) p.table = host_address(op, "table", table);
    });
    return status;
}
// =============================================================== end offload

}  // namespace

STABLE_TORCH_LIBRARY_FRAGMENT(nurec_ops, m) {
    m.def("gather_rows(Tensor table, Tensor index) -> Tensor rows");
    m.def("adam_rows_(Tensor(a!) param, Tensor(b!) exp_avg, Tensor(c!) exp_avg_sq, Tensor index, Tensor grad, "
          "Tensor step, float lr, float beta1, float beta2, float eps, float weight_decay) -> Tensor status");
    m.def("put_rows_(Tensor(a!) table, Tensor index, Tensor rows) -> Tensor status");
}

// One function per op serves both dispatch keys: it branches on the device itself.
#define NUREC_REGISTER_OFFLOAD(m)                          \
    m.impl("gather_rows", TORCH_BOX(&gather_rows));        \
    m.impl("adam_rows_", TORCH_BOX(&adam_rows_));          \
    m.impl("put_rows_", TORCH_BOX(&put_rows_));

STABLE_TORCH_LIBRARY_IMPL(nurec_ops, CPU, m) { NUREC_REGISTER_OFFLOAD(m) }
#ifdef NUREC_WITH_CUDA
STABLE_TORCH_LIBRARY_IMPL(nurec_ops, CUDA, m) { NUREC_REGISTER_OFFLOAD(m) }
#endif
