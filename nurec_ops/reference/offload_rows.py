"""gather_rows, adam_rows_ and put_rows_ in PyTorch, with the fused ops' signatures
(nurec_ops.offload_rows): the parity oracle of their tests. The gather is
differentiated by autograd; the Adam step is torch.optim.Adam's
single-tensor update in its order of operations, on the listed rows only.
Unlike the fused ops these may synchronize (a reference's business is to be
plainly right): a bad index raises here on every device."""
import math

import torch


def gather_rows(table, index):
    """``rows[k] = table[index[k]]`` on ``index``'s device: zeros for -1,
    NaN for any other entry outside ``[0, N)``."""
    N, D = table.shape
    table = table.to(index.device)
    padded = torch.cat((table, table.new_zeros(1, D)))  # row N: what padding and bad entries read
    valid = (index >= 0) & (index < N)
    rows = padded[torch.where(valid, index, N)]
    return torch.where((valid | (index == -1))[:, None], rows, float("nan"))


def bad_entries(index, num_rows):
    """adam_rows_'s status: [1] int64, the entries that are neither a row
    nor -1, plus the rows not above the nearest row listed before them."""
    index = index.cpu()
    bad, prev = 0, -1
    for r in index.tolist():
        if r == -1:
            continue
        if not 0 <= r < num_rows:
            bad += 1
            continue
        bad += r <= prev
        prev = r
    return torch.tensor([bad], dtype=torch.int64)


def adam_rows_(param, exp_avg, exp_avg_sq, index, grad, step, lr, beta1=0.9, beta2=0.999, eps=1e-15,
               weight_decay=0.0):
    """torch.optim.Adam's step on the rows ``index`` lists (-1 skipped), in
    place; returns the status ``[1]`` int64 on index's device (0). A bad
    index raises (see bad_entries) and changes nothing."""
    N = param.shape[0]
    status = bad_entries(index, N)
    if int(status[0]):
        raise RuntimeError(f"nurec_ops.adam_rows_: `index` has {int(status[0])} bad entries")
    with torch.no_grad():
        keep = index >= 0
        rows = index[keep].to(param.device)
        g = grad[keep].to(param.device)
        p, m, v = param[rows], exp_avg[rows], exp_avg_sq[rows]
        t = float(step)
        if weight_decay != 0:
            g = g.add(p, alpha=weight_decay)
        m.lerp_(g, 1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        step_size = lr / (1 - beta1 ** t)
        denom = (v.sqrt() / math.sqrt(1 - beta2 ** t)).add_(eps)
        p.addcdiv_(m, denom, value=-step_size)
        param.index_copy_(0, rows, p)
        exp_avg.index_copy_(0, rows, m)
        exp_avg_sq.index_copy_(0, rows, v)
    return status.to(index.device)


def put_rows_(table, index, rows):
    """``table[index[k]] = rows[k]`` (-1 skipped), in place; returns the
    status ``[1]`` int64 on index's device (0). A bad index raises (see
    bad_entries) and changes nothing."""
    status = bad_entries(index, table.shape[0])
    if int(status[0]):
        raise RuntimeError(f"nurec_ops.put_rows_: `index` has {int(status[0])} bad entries")
    with torch.no_grad():
        keep = index >= 0
        table.index_copy_(0, index[keep].to(table.device), rows[keep].to(table.device))
    return status.to(index.device)
