"""gather_rows, adam_rows_ and put_rows_: the rows of tables that may live in pinned
host memory (issue 51, the CLM paper's offloading), read and updated in
place by CUDA kernels through unified addressing, with no host sync. A
scene too big for the GPU keeps its geometry there and its appearance rows
(SH coefficients) and their Adam moments on the host: each step gathers the
visible Gaussians' rows (a compaction's fixed-capacity index: ascending
rows, then -1 padding), and after the backward applies Adam to those rows
where they are; put_rows_ writes rows back (a GPU cache of rows evicting
into the host table). Fake kernels, the gather's autograd, and the
asynchronous report of a bad index on CUDA."""

import torch

from . import _checks as C
from ._async_read import AsyncReads
from ._library import AutogradOp, _BelowAutograd, ops
from .nvtx import ranged

_GATHER_OP = "gather_rows"
_ADAM_OP = "adam_rows_"
_PUT_OP = "put_rows_"


@ranged("nurec_ops.gather_rows")
def gather_rows(table, index):
    """``rows[k] = table[index[k]]``, read in place from the device or from
    pinned host memory.

    Args:
        table: ``[N, D]`` float32/float64 (``N >= 0``, ``D >= 1``), on
            ``index``'s device, any strides; or, with ``index`` on CUDA, a
            contiguous CPU tensor in pinned memory (``Tensor.pin_memory()``,
            a view into one included), which the kernel reads over PCIe
            where it is (no copy).
        index: ``[K]`` int64 on the compute device: an entry in ``[0, N)``
            is that row, ``-1`` is padding (a row of zeros), any other entry
            gives a row of NaN (never an out-of-bounds read, and no host
            sync to find it).

    Returns:
        ``rows [K, D]``, ``table``'s dtype, on ``index``'s device.
        Differentiable with respect to ``table``: its gradient is
        ``grad_rows`` added at the listed rows (padding and bad entries add
        nothing), on ``table``'s device.
    """
    return _GATHER(table, index)


def _host_table(op, name, t, index):
    """The glue's check of where a table lives (csrc/offload/
    offload_register.cpp): index's device, or pinned host memory for a CUDA
    index (pinning itself is a property of the data, checked by the real
    kernel). Returns whether it is on the host for a CUDA index."""
    if t.device.type == "cpu" and index.device.type == "cuda":
        return True
    if t.device != index.device:
        C.fail(op, f"`{name}` is on {t.device} but `index` is on {index.device}; `{name}` must be on `index`'s "
                   f"device or, with `index` on CUDA, in pinned host memory")
    return False


def _check_table(op, name, t):
    C.shape(op, name, t, (-1, -1), "[N, D]")
    if t.shape[1] < 1:
        C.fail(op, f"`{name}` must have at least one column (D >= 1), got {list(t.shape)}")
    C.real(op, name, t, t, name)


def _check_index(op, index):
    C.shape(op, "index", index, (-1,), "[K]")
    C.dtype(op, "index", index, torch.int64)


def _check_entry_rows(op, name, t, index, table, table_name):
    """A row per index entry: [K, D], the table's dtype, on index's device
    (adam_rows_' grad, put_rows_' rows)."""
    C.shape(op, name, t, (index.shape[0], table.shape[1]), f"[K, D] (K = index.shape[0], D = {table_name}.shape[1])")
    C.real(op, name, t, table, table_name)
    C.device(op, name, t, index, "index")


def _check_gather(table, index):
    """The glue's checks, in its order."""
    op = _GATHER_OP
    _check_table(op, "table", table)
    _check_index(op, index)
    if _host_table(op, "table", table, index) and not table.is_contiguous():
        C.fail(op, f"`table` in host memory must be contiguous (it is read in place: a copy would defeat that), "
                   f"got a non-contiguous tensor of shape {list(table.shape)}")


@torch.library.register_fake("nurec_ops::gather_rows")
def _fake_gather(table, index):
    _check_gather(table, index)
    return index.new_empty((index.shape[0], table.shape[1]), dtype=table.dtype)


def _gather_setup(ctx, inputs, output):
    table, index = inputs
    ctx.save_for_backward(index)
    ctx.table_shape = table.shape
    ctx.table_device = table.device


def scatter_rows(grad_rows, index, num_rows, device=None):
    """The gradient of ``gather_rows`` with respect to its table:
    ``[num_rows, D]`` zeros with ``grad_rows`` added at the rows ``index``
    names (padding and bad entries add nothing, even a NaN cotangent), on
    ``device`` (default: ``grad_rows``'s). Torch ops, no host sync."""
    grad = grad_rows.new_zeros((num_rows, grad_rows.shape[1]))
    if num_rows > 0 and index.numel() > 0:
        valid = (index >= 0) & (index < num_rows)
        src = torch.where(valid[:, None], grad_rows, 0)
        grad.index_add_(0, index.clamp(0, num_rows - 1), src)
    return grad if device is None else grad.to(device)


def _gather_backward(ctx, grad_rows):
    if not ctx.needs_input_grad[0]:
        return None, None
    (index,) = ctx.saved_tensors
    # a pinned host table's gradient is made on the compute device and
    # copied to the host (not the offload trainer's path: it gathers from a
    # table that needs no gradient)
    return scatter_rows(grad_rows, index, ctx.table_shape[0], ctx.table_device), None


_GATHER = AutogradOp(_GATHER_OP, _gather_backward, _gather_setup)


# ------------------------------------------------------------ adam_rows_

@ranged("nurec_ops.adam_rows_")
def adam_rows_(param, exp_avg, exp_avg_sq, index, grad, step, lr, beta1=0.9, beta2=0.999, eps=1e-15,
               weight_decay=0.0):
    """torch.optim.Adam's step (amsgrad off, L2 ``weight_decay``) on the
    rows ``index`` lists, in place where they live (gsplat's SelectiveAdam:
    rows not listed keep their values and moments).

    Args:
        param, exp_avg, exp_avg_sq: ``[N, D]`` of one float dtype,
            contiguous, on one device: ``index``'s, or (``index`` on CUDA)
            pinned host memory, updated in place through unified addressing.
        index: ``[K]`` int64 on the compute device: rows strictly
            increasing (no row twice), ``-1`` entries skipped wherever they
            are.
        grad: ``[K, D]`` on ``index``'s device, ``param``'s dtype: row ``k``
            is the gradient of row ``index[k]``.
        step: a 0-dim (or 1-element) float32/float64 tensor on ``index``'s
            device, Adam's step count ``t >= 1`` already incremented by the
            caller (a tensor: no host value, so the call can be captured in
            a CUDA graph). Not checked (a device value): ``t = 0`` divides
            by zero.
        lr, beta1, beta2, eps, weight_decay: as torch.optim.Adam's
            (``eps > 0``).

    Returns:
        ``status``, int64 ``[1]`` on ``index``'s device: the number of bad
        entries of ``index`` (< -1 or >= N, or a row not above the row
        listed before it), 0 when the rows were updated. With a bad index
        nothing is updated, and: on the CPU this raises a RuntimeError at
        once; on CUDA the status is read back without a sync (a copy into
        a reused pinned buffer and an event) and a later call, or
        ``check_pending()``, raises naming the call. Under CUDA-graph
        capture and torch.compile only the returned status tells.

    An optimizer step: no autograd (it runs below autograd, as
    torch.optim's steps run under ``torch.no_grad()``; call
    ``torch.ops.nurec_ops.adam_rows_`` itself under ``torch.no_grad()``).
    """
    if torch.compiler.is_compiling():
        return ops.adam_rows_(param, exp_avg, exp_avg_sq, index, grad, step, lr, beta1, beta2, eps, weight_decay)
    _REPORTS.poll()
    with _BelowAutograd():
        status = _ADAM_ENTRY(param, exp_avg, exp_avg_sq, index, grad, step, lr, beta1, beta2, eps, weight_decay)
    return _reported(_ADAM_OP, status, index, param.shape[0])


def _reported(op, status, index, num_rows):
    """A checked call's status: raised at once on the CPU, queued for the
    asynchronous report on CUDA."""
    if index.device.type == "cpu":
        bad = int(status[0])
        if bad:
            C.fail(op, f"`index` has {bad} bad entries {_BAD_ENTRIES.format(N=num_rows)}; {_NOTHING[op][0]}")
    elif index.device.type == "cuda":
        _REPORTS.record(op, status, num_rows)
    return status


_ADAM_ENTRY = ops.adam_rows_.default._op  # the dispatcher entry (as _library.AutogradOp calls it)
_NOTHING = {_ADAM_OP: ("nothing was updated", "updated nothing"), _PUT_OP: ("nothing was written", "wrote nothing")}
_BAD_ENTRIES = ("(entries < -1 or >= N = {N}, or rows not above the row listed before them: the rows must be "
                "strictly increasing)")


def check_pending(wait=False):
    """Reads the status of every earlier CUDA call of ``adam_rows_`` and
    ``put_rows_`` whose
    asynchronous copy has arrived (all of them with ``wait=True``, which
    waits for their events) and raises a RuntimeError for the first one
    that had a bad index. The next call of either does this too (without
    waiting)."""
    _REPORTS.poll(wait)


class _StatusReports:
    """adam_rows_' and put_rows_' status of eager CUDA calls, read without a sync
    (nurec_ops/_async_read.py, as the binning's capacity reports)."""

    def __init__(self):
        self.reads = AsyncReads(1)  # payload: (call serial, device index, N)
        self.serial = 0

    def record(self, op, status, num_rows):
        self.serial += 1
        self.reads.record(status, (op, self.serial, status.device.index, num_rows))

    def poll(self, wait=False):
        bad_calls = [(payload, bad) for (bad,), payload in self.reads.ready(wait) if bad]
        if bad_calls:
            (op, serial, dev, num_rows), bad = bad_calls[0]
            C.fail(op, f"call #{serial} on cuda:{dev} had {bad} bad entries in `index` "
                       f"{_BAD_ENTRIES.format(N=num_rows)}; that call {_NOTHING[op][1]}")


_REPORTS = _StatusReports()


def _check_adam(param, exp_avg, exp_avg_sq, index, grad, step, lr, beta1, beta2, eps, weight_decay):
    """The glue's checks, in its order."""
    op = _ADAM_OP
    _check_table(op, "param", param)
    want = f"[N, D] = {list(param.shape)} (param's shape)"
    for name, t in (("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq)):
        C.shape(op, name, t, tuple(param.shape), want)
        C.real(op, name, t, param, "param")
    _check_index(op, index)
    _host_table(op, "param", param, index)
    C.device(op, "exp_avg", exp_avg, param, "param")
    C.device(op, "exp_avg_sq", exp_avg_sq, param, "param")
    for name, t in (("param", param), ("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq)):
        if not t.is_contiguous():
            C.fail(op, f"`{name}` must be contiguous (it is updated in place), got a non-contiguous tensor of "
                       f"shape {list(t.shape)}")
    _check_entry_rows(op, "grad", grad, index, param, "param")
    if not (step.numel() == 1 and step.dim() <= 1):
        C.fail(op, f"`step` must be a 0-dim or 1-element tensor (Adam's step count t), got shape {list(step.shape)}")
    C.real(op, "step", step, step, "step")
    C.device(op, "step", step, index, "index")
    if not lr >= 0:
        C.fail(op, f"`lr` must be >= 0, got {lr}")
    for name, b in (("beta1", beta1), ("beta2", beta2)):
        if not 0 <= b < 1:
            C.fail(op, f"`{name}` must be in [0, 1), got {b}")
    if not eps > 0:
        C.fail(op, f"`eps` must be > 0, got {eps}")
    if not weight_decay >= 0:
        C.fail(op, f"`weight_decay` must be >= 0, got {weight_decay}")


@torch.library.register_fake("nurec_ops::adam_rows_")
def _fake_adam(param, exp_avg, exp_avg_sq, index, grad, step, lr, beta1, beta2, eps, weight_decay):
    _check_adam(param, exp_avg, exp_avg_sq, index, grad, step, lr, beta1, beta2, eps, weight_decay)
    return index.new_empty((1,), dtype=torch.int64)


# ------------------------------------------------------------ put_rows_

@ranged("nurec_ops.put_rows_")
def put_rows_(table, index, rows):
    """``table[index[k]] = rows[k]``, written in place where ``table``
    lives: on the device, or in pinned host memory over PCIe (a GPU cache
    of rows writing back the rows it evicts).

    Args:
        table: ``[N, D]`` float32/float64, contiguous, on ``index``'s
            device or (``index`` on CUDA) in pinned host memory.
        index: ``[K]`` int64 on the compute device, adam_rows_'s rule: rows
            strictly increasing (no row twice: two writers of one row would
            race), ``-1`` entries skipped wherever they are.
        rows: ``[K, D]`` on ``index``'s device, ``table``'s dtype.

    Returns:
        ``status``, int64 ``[1]`` on ``index``'s device: index's bad
        entries, 0 when the rows were written. With a bad index nothing is
        written; it is reported as adam_rows_'s (a RuntimeError at once on
        the CPU; on CUDA a later call or ``check_pending()``).

    No autograd (a write into a table, as an optimizer's).
    """
    if torch.compiler.is_compiling():
        return ops.put_rows_(table, index, rows)
    _REPORTS.poll()
    with _BelowAutograd():
        status = _PUT_ENTRY(table, index, rows)
    return _reported(_PUT_OP, status, index, table.shape[0])


_PUT_ENTRY = ops.put_rows_.default._op


def _check_put(table, index, rows):
    """The glue's checks, in its order."""
    op = _PUT_OP
    _check_table(op, "table", table)
    _check_index(op, index)
    _host_table(op, "table", table, index)
    if not table.is_contiguous():
        C.fail(op, f"`table` must be contiguous (it is updated in place), got a non-contiguous tensor of shape "
                   f"{list(table.shape)}")
    _check_entry_rows(op, "rows", rows, index, table, "table")


@torch.library.register_fake("nurec_ops::put_rows_")
def _fake_put(table, index, rows):
    _check_put(table, index, rows)
    return index.new_empty((1,), dtype=torch.int64)
