"""nurec_ops.gather_rows and nurec_ops.adam_rows_ (issue 51: appearance
rows and their Adam moments in pinned host memory, read and updated in
place by CUDA kernels): against the reference twins
(nurec_ops.reference.gather_rows, adam_rows_) and against torch.optim.Adam
itself; padding, bad entries (NaN rows; Adam's check: nothing updated, the
status, the raise on the CPU at once and on CUDA later, naming the call),
K = 0, N = 0, D = 1 and 48, the check's scan across thread blocks (and the
CUDA check's algorithm ported to Python, so that the CPU suite runs it),
poisoned memory, the gather's gradient; and, on CUDA (GPU-marked), the zero-copy
path from pinned host tables, its errors, no host sync, CUDA-graph capture
and the current stream with host tables.

gather_rows is a row of tests/op_cases.py (parity, opcheck, compile, both
autograd paths, poison and on CUDA no sync, graphs, the current stream,
all with device tables). adam_rows_ is there too, through a functional
wrapper (clones of the three tables updated and returned): the registry's
generic tests compare outputs, which a mutating op has none of. Its
in-place semantics (rows not listed untouched, state carried across steps,
the status) are tested here. Bad arguments are rows of tests/test_errors.py's
table."""
import pytest
import torch

import nurec_ops
from nurec_ops import offload_rows
from nurec_ops import reference as ref
from nurec_ops.reference.offload_rows import bad_entries

from bad_inputs import changed, raises_real_and_fake
from conftest import DEVICES, DTYPES, gpu, no_host_sync
from poison import assert_all_finite, poison_allocator
from tolerances import assert_close

F32, F64 = torch.float32, torch.float64
OPS = torch.ops.nurec_ops
BAD_VALUES = (-2, -7, "N", "N+5", 1 << 40)  # entries that name no row ("N": the table's row count)


# ------------------------------------------------------------------ inputs

def compaction_index(N, K, gen, rows=None, mixed=False):
    """A compaction's index [K] int64 (CPU): `rows` (default 4 K / 5, at
    most N) distinct rows of [0, N), ascending, then -1 padding; with
    `mixed` the padding spread among the rows (still ascending)."""
    n = min(N, K * 4 // 5 if rows is None else rows)
    r = torch.randperm(N, generator=gen)[:n].sort().values
    idx = torch.full((K,), -1, dtype=torch.int64)
    if mixed:
        idx[torch.randperm(K, generator=gen)[:n].sort().values] = r
    else:
        idx[:n] = r
    return idx


def gather_index(N, K, gen, bad=True):
    """Any order, repeated rows, -1 padding (a fifth) and, with `bad`,
    entries < -1 or >= N (a tenth); entries 0, 1, 2 (where K has them) are
    padding, bad (or padding) and a row (where N > 0)."""
    idx = torch.randint(0, max(N, 1), (K,), generator=gen) if N > 0 else torch.full((K,), -1, dtype=torch.int64)
    u = torch.rand(K, generator=gen)
    u[:2] = torch.tensor([0.1, 0.25])[:K]
    u[2:3] = 0.5
    idx[u < 0.2] = -1
    pick = (u >= 0.2) & (u < 0.3)
    if bad:
        values = torch.tensor([N if v == "N" else N + 5 if v == "N+5" else v for v in BAD_VALUES])
        idx[pick] = values[torch.randint(0, len(values), (int(pick.sum()),), generator=gen)]
    else:
        idx[pick] = -1
    return idx


def random_table(N, D, dtype, device, gen):
    return torch.randn(N, D, generator=gen, dtype=F64).to(device, dtype)


def adam_state(N, D, dtype, device, gen, fresh=False):
    """param, exp_avg, exp_avg_sq [N, D]: random values and (unless fresh:
    zeros, as Adam starts) random moments, the second positive and spread
    over decades (small ones test eps)."""
    p = torch.randn(N, D, generator=gen, dtype=F64)
    if fresh:
        m, v = torch.zeros_like(p), torch.zeros_like(p)
    else:
        m = torch.randn(N, D, generator=gen, dtype=F64) * 0.1
        v = torch.rand(N, D, generator=gen, dtype=F64) * 10 ** torch.empty(N, D, dtype=F64).uniform_(-8, 0,
                                                                                                     generator=gen)
    return [t.to(device, dtype) for t in (p, m, v)]


def adam_step_inputs(N, K, D, dtype, device, gen, mixed=False):
    """index (a compaction's), grad [K, D] (padding rows too: they must be
    ignored) on `device`."""
    index = compaction_index(N, K, gen, mixed=mixed).to(device)
    grad = torch.randn(K, D, generator=gen, dtype=F64).to(device, dtype)
    return index, grad


def step_tensor(t, device, dtype=F32):
    return torch.tensor(float(t), dtype=dtype, device=device)


def same_bits(a, b):
    """Equal, NaN where the other is NaN."""
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(torch.isnan(a), torch.isnan(b)) and \
        torch.equal(torch.nan_to_num(a), torch.nan_to_num(b))


def unlisted_mask(index, N):
    """The rows of [0, N) an index does not list (CPU)."""
    mask = torch.ones(N, dtype=torch.bool)
    mask[index[index >= 0].cpu()] = False
    return mask


# ------------------------------------------------------------ gather_rows

GATHER_SHAPES = [(50, 40, 48), (50, 40, 1), (300, 257, 5), (1000, 700, 3), (7, 0, 48), (0, 5, 48), (0, 0, 3),
                 (1, 9, 2)]


@pytest.mark.parametrize("shape", GATHER_SHAPES, ids=lambda s: "N{}-K{}-D{}".format(*s))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_gather_matches_reference(device, dtype, shape, seed):
    """Rows, zeros for padding and NaN for bad entries, exactly the
    reference's (a copy: the same bits), written over poisoned memory."""
    N, K, D = shape
    gen = torch.Generator().manual_seed(seed)
    table = random_table(N, D, dtype, device, gen)
    index = gather_index(N, K, gen).to(device)
    poison_allocator(device)
    rows = nurec_ops.gather_rows(table, index)
    assert rows.shape == (K, D) and rows.dtype == dtype and rows.device == index.device
    assert same_bits(rows, ref.gather_rows(table, index))
    # and explicitly: every kind of entry where it is
    i = index.cpu()
    r = rows.cpu()
    ok = (i >= 0) & (i < N)
    assert torch.equal(r[ok], table.cpu()[i[ok]])
    assert (r[i == -1] == 0).all() and not torch.signbit(r[i == -1]).any()
    assert torch.isnan(r[~ok & (i != -1)]).all()
    if K >= 3:
        assert (i == -1).any() and (~ok & (i != -1)).any() and (ok.any() or N == 0), "gather_index drew too little"


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_large_cuda_vs_cpu(dtype, seed):
    """Many thread blocks (vector and scalar kernels): CUDA's rows are the
    CPU's."""
    gen = torch.Generator().manual_seed(seed)
    for N, K, D in ((200_000, 150_001, 48), (50_000, 40_003, 3)):
        table = random_table(N, D, dtype, "cpu", gen)
        index = gather_index(N, K, gen)
        poison_allocator("cuda")
        assert same_bits(nurec_ops.gather_rows(table.cuda(), index.cuda()).cpu(), nurec_ops.gather_rows(table, index))


@pytest.mark.parametrize("device", DEVICES)
def test_gather_strided_table(device, seed):
    """A table of any strides on the compute device (a transposed or a
    column-sliced view) gives the rows of its dense copy."""
    gen = torch.Generator().manual_seed(seed)
    base = random_table(64, 40, F64, device, gen)
    index = gather_index(40, 33, gen).to(device)
    for view in (base.t(), base[:40, ::2], base[3:43, 1:33]):
        assert not view.is_contiguous()
        assert same_bits(nurec_ops.gather_rows(view, index), nurec_ops.gather_rows(view.contiguous(), index))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_gather_backward(device, dtype, seed):
    """The table's gradient: the cotangent added at the listed rows (a row
    listed twice gets both), nothing from padding or bad entries even where
    their cotangent is NaN; the reference's autograd gives the same."""
    gen = torch.Generator().manual_seed(seed)
    N, K, D = 60, 200, 7  # K > N: rows repeat
    table = random_table(N, D, dtype, device, gen).requires_grad_(True)
    index = gather_index(N, K, gen).to(device)
    cot = torch.randn(K, D, generator=gen, dtype=F64).to(device, dtype)
    named = (index >= 0) & (index < N)
    cot[~named] = float("nan")
    poison_allocator(device)
    (g,) = torch.autograd.grad(nurec_ops.gather_rows(table, index), table, cot)
    t64 = table.detach().cpu().double().requires_grad_(True)
    (e,) = torch.autograd.grad(ref.gather_rows(t64, index.cpu()), t64, cot.cpu().double())
    assert g.shape == table.shape and g.device == table.device and g.dtype == dtype
    assert_all_finite(g, msg="gradient")
    assert_close(g, e, dtype)
    # by hand: row sums of the cotangent over its entries
    by_hand = torch.zeros(N, D, dtype=F64)
    for k in torch.nonzero(named.cpu()).flatten().tolist():
        by_hand[int(index[k])] += cot[k].cpu().double()
    assert_close(g, by_hand, dtype)
    assert (by_hand != 0).any()


@pytest.mark.parametrize("device", DEVICES)
def test_gather_gradcheck(device, seed):
    gen = torch.Generator().manual_seed(seed)
    table = random_table(9, 4, F64, device, gen).requires_grad_(True)
    index = torch.tensor([3, -1, 0, 3, 8, -1], device=device)
    assert torch.autograd.gradcheck(lambda t: nurec_ops.gather_rows(t, index), (table,))


@pytest.mark.parametrize("device", DEVICES)
def test_gather_empty_table_gradient(device):
    """N = 0 (every entry padding or bad): zero rows and NaN rows, and an
    empty gradient (no index_add into an empty table)."""
    table = torch.zeros(0, 3, dtype=F64, device=device, requires_grad=True)
    index = torch.tensor([-1, 0, -1, 5], device=device)
    rows = nurec_ops.gather_rows(table, index)
    assert (rows[[0, 2]] == 0).all() and torch.isnan(rows[[1, 3]]).all()
    (g,) = torch.autograd.grad(rows, table, torch.ones_like(rows))
    assert g.shape == (0, 3)


def test_gather_compile_fullgraph(seed):
    """torch.compile(fullgraph=True), values and gradient, with bad entries
    (the registry's row has none: its poison test wants finite outputs)."""
    gen = torch.Generator().manual_seed(seed)
    table = random_table(30, 5, F64, "cpu", gen).requires_grad_(True)
    index = gather_index(30, 50, gen)

    def f(t, i):
        rows = nurec_ops.gather_rows(t, i)
        return torch.nan_to_num(rows, nan=0.5).sum(), rows

    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    (le, re_), (lc, rc) = f(table, index), compiled(table, index)
    assert same_bits(rc.detach(), re_.detach())
    torch.testing.assert_close(torch.autograd.grad(lc, table)[0], torch.autograd.grad(le, table)[0])


# ------------------------------------------------------------ adam_rows_

def torch_adam_rows(param, exp_avg, exp_avg_sq, index, grad, t, lr, betas, eps, weight_decay):
    """torch.optim.Adam (single-tensor path) stepped on a dense copy of the
    listed rows, their moments as its state at step t - 1: the listed
    rows' new (param, exp_avg, exp_avg_sq), CPU."""
    keep = (index >= 0).cpu()
    rows = index.cpu()[keep]
    x = param.detach().cpu()[rows].clone().requires_grad_(True)
    opt = torch.optim.Adam([x], lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=False)
    opt.state[x] = {"step": torch.tensor(float(t - 1)), "exp_avg": exp_avg.cpu()[rows].clone(),
                    "exp_avg_sq": exp_avg_sq.cpu()[rows].clone()}
    x.grad = grad.detach().cpu()[keep].clone()
    opt.step()
    st = opt.state[x]
    assert float(st["step"]) == t
    return rows, x.detach(), st["exp_avg"], st["exp_avg_sq"]


@pytest.mark.parametrize("weight_decay", [0.0, 0.05], ids=["no-wd", "wd"])
@pytest.mark.parametrize("mixed", [False, True], ids=["rows-then-padding", "padding-mixed"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_adam_matches_torch_adam(device, dtype, mixed, weight_decay, seed):
    """Three steps (t = 1, 2, 3), each on another set of visible rows, the
    state carried in the tables: the listed rows are torch.optim.Adam's step
    on a dense copy of them with their moments as its state (float64 to
    rounding, float32 to float32's), and every row not listed is the same
    bits as before, its moments too."""
    gen = torch.Generator().manual_seed(seed)
    N, K, D = 200, 90, 48
    lr, betas, eps = 1e-2, (0.9, 0.999), 1e-15
    tables = adam_state(N, D, dtype, device, gen, fresh=True)
    for t in (1, 2, 3):
        index, grad = adam_step_inputs(N, K, D, dtype, device, gen, mixed=mixed)
        before = [x.cpu().clone() for x in tables]
        rows, *expect = torch_adam_rows(*tables, index, grad, t, lr, betas, eps, weight_decay)
        poison_allocator(device)
        status = nurec_ops.adam_rows_(*tables, index, grad, step_tensor(t, device), lr, *betas, eps, weight_decay)
        assert status.shape == (1,) and status.dtype == torch.int64 and status.device == index.device
        assert int(status[0]) == 0
        free = unlisted_mask(index, N)
        for name, x, b, e in zip(("param", "exp_avg", "exp_avg_sq"), tables, before, expect):
            x = x.cpu()
            assert torch.equal(x[free], b[free]), f"step {t}: an unlisted row of {name} changed"
            assert_close(x[rows], e, dtype, msg=f"step {t}: {name}")
            assert not torch.equal(x[rows], b[rows]), f"step {t}: {name} was not updated"


@pytest.mark.parametrize("step_dtype", [F32, F64], ids=["step-f32", "step-f64"])
@pytest.mark.parametrize("device", DEVICES)
def test_adam_later_step_with_moments(device, step_dtype, seed):
    """A late step (t = 7) from random moments (the second spread over
    decades: eps = 1e-8 matters for the small ones), beta1 < 0.5 (torch's
    lerp takes its other formula), weight decay: torch.optim.Adam's rows, in
    float64, and the reference's."""
    gen = torch.Generator().manual_seed(seed)
    N, K, D = 500, 300, 6
    kw = dict(lr=3e-3, beta1=0.3, beta2=0.99, eps=1e-8, weight_decay=0.2)
    tables = adam_state(N, D, F64, device, gen)
    index, grad = adam_step_inputs(N, K, D, F64, device, gen, mixed=True)
    rows, *expect = torch_adam_rows(*tables, index, grad, 7, kw["lr"], (kw["beta1"], kw["beta2"]), kw["eps"],
                                    kw["weight_decay"])
    twin = [x.cpu().clone() for x in tables]
    ref.adam_rows_(*twin, index.cpu(), grad.cpu(), step_tensor(7, "cpu", step_dtype), **kw)
    nurec_ops.adam_rows_(*tables, index, grad, step_tensor(7, device, step_dtype), **kw)
    for x, e, w in zip(tables, expect, twin):
        assert_close(x.cpu()[rows], e, F64)
        assert_close(x, w, F64)


ADAM_SHAPES = [(200, 90, 48), (200, 90, 1), (50, 64, 5), (10, 0, 48), (0, 7, 48), (0, 0, 2), (3, 3, 3)]


@pytest.mark.parametrize("shape", ADAM_SHAPES, ids=lambda s: "N{}-K{}-D{}".format(*s))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_adam_matches_reference(device, dtype, shape, seed):
    """The reference twin's update (float64 on the CPU) on random state,
    with padding among the rows, K = 0, N = 0 (every entry padding), D = 1;
    the status (over poisoned memory) 0."""
    N, K, D = shape
    gen = torch.Generator().manual_seed(seed)
    tables = adam_state(N, D, dtype, device, gen)
    index, grad = adam_step_inputs(N, K, D, dtype, device, gen, mixed=True)
    if N == 0:
        assert (index == -1).all()
    kw = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-15, weight_decay=0.01)
    twin = [x.cpu().double() for x in tables]
    ref.adam_rows_(*twin, index.cpu(), grad.cpu().double(), step_tensor(3, "cpu", F64), **kw)
    before = [x.clone() for x in tables]
    poison_allocator(device)
    status = nurec_ops.adam_rows_(*tables, index, grad, step_tensor(3, device), **kw)
    assert status.tolist() == [0]
    for x, w, b in zip(tables, twin, before):
        assert_close(x, w, dtype)
        if (index >= 0).any():
            assert not torch.equal(x, b)


@pytest.mark.parametrize("device", DEVICES)
def test_adam_under_autograd(device, seed):
    """An optimizer step: a param that requires grad is updated in place
    with grad mode on (below autograd, as torch.optim under no_grad), stays
    a leaf, and the status carries no graph."""
    gen = torch.Generator().manual_seed(seed)
    p, m, v = adam_state(20, 4, F64, device, gen)
    p.requires_grad_(True)
    index, grad = adam_step_inputs(20, 10, 4, F64, device, gen)
    before = p.detach().clone()
    status = nurec_ops.adam_rows_(p, m, v, index, grad, step_tensor(1, device), 0.1)
    assert status.grad_fn is None and p.is_leaf and p.grad_fn is None
    assert not torch.equal(p.detach(), before)


def test_adam_compile_in_place(seed):
    """torch.compile(fullgraph=True) of the in-place call on the caller's
    tables (functionalized, written back): eager's values and status."""
    gen = torch.Generator().manual_seed(seed)
    tables = adam_state(40, 6, F64, "cpu", gen)
    index, grad = adam_step_inputs(40, 25, 6, F64, "cpu", gen, mixed=True)
    copies = [x.clone() for x in tables]

    def f(p, m, v, i, g, s):
        return nurec_ops.adam_rows_(p, m, v, i, g, s, 1e-2, 0.9, 0.999, 1e-15, 0.01)

    torch._dynamo.reset()
    st = torch.compile(f, fullgraph=True, backend="aot_eager")(*copies, index, grad, step_tensor(2, "cpu"))
    se = f(*tables, index, grad, step_tensor(2, "cpu"))
    assert torch.equal(st, se) and st.tolist() == [0]
    for a, b in zip(copies, tables):
        assert torch.equal(a, b)


# ------------------------------------------------------- a bad adam index

N_BAD = 10
BAD_INDEXES = [([3, 1], 1), ([2, 2], 1), ([0, N_BAD], 1), ([-2, 0], 1), ([1, -1, 1], 1), ([5, -1, 3, 4], 1),
               ([0, 1, 11, -3, 2], 2), ([9, 8, 7], 2), ([-1, 1 << 40, -1, -5], 2), ([4, 3, 2, 1, 0], 4)]


@pytest.mark.parametrize("entries,count", BAD_INDEXES, ids=[str(b[0]) for b in BAD_INDEXES])
@pytest.mark.parametrize("device", DEVICES)
def test_adam_bad_index_updates_nothing(device, entries, count, seed):
    """A bad index (an entry < -1 or >= N, a row not above the row listed
    before it): nothing changes, the status counts the bad entries (the
    reference's count); through the wrapper the CPU raises at once, CUDA at
    check_pending or the next call, naming the call."""
    gen = torch.Generator().manual_seed(seed)
    tables = adam_state(N_BAD, 3, F64, device, gen)
    index = torch.tensor(entries, device=device)
    grad = torch.randn(len(entries), 3, generator=gen, dtype=F64).to(device)
    before = [x.clone() for x in tables]
    assert bad_entries(index, N_BAD).tolist() == [count]
    args = (index, grad, step_tensor(1, device), 0.1, 0.9, 0.999, 1e-15, 0.0)
    status = OPS.adam_rows_(*tables, *args)
    assert status.tolist() == [count]
    for x, b in zip(tables, before):
        assert torch.equal(x, b)
    if device == "cpu":
        with pytest.raises(RuntimeError, match=f"nurec_ops.adam_rows_: `index` has {count} bad entries"):
            nurec_ops.adam_rows_(*tables, *args)
    else:
        offload_rows.check_pending(wait=True)  # nothing earlier pending
        nurec_ops.adam_rows_(*tables, *args)  # queued, not raised
        with pytest.raises(RuntimeError, match=rf"adam_rows_: call #\d+ on cuda:\d+ had {count} bad entries in "
                                               r"`index`.*updated nothing"):
            offload_rows.check_pending(wait=True)
        # the next call raises for an earlier bad one (before running)
        nurec_ops.adam_rows_(*tables, *args)
        torch.cuda.synchronize()
        good = torch.full((len(entries),), -1, device=device)
        with pytest.raises(RuntimeError, match=f"had {count} bad entries"):
            nurec_ops.adam_rows_(*tables, good, *args[1:])
        offload_rows.check_pending(wait=True)  # consumed: nothing left
    for x, b in zip(tables, before):
        assert torch.equal(x, b)


def check_cases(gen, B=256):
    """Indexes across several thread blocks of the CUDA check (B entries a
    block): (index, N)."""
    N = 1 << 20
    K = 6 * B + 17
    rows = torch.randperm(N, generator=gen)[:K].sort().values
    sorted_then_padding = torch.cat((rows[: 5 * B], torch.full((B + 17,), -1)))
    yield sorted_then_padding, N
    dup_at_edge = rows.clone()
    dup_at_edge[B] = dup_at_edge[B - 1]  # the first entry of block 1 repeats block 0's last
    yield dup_at_edge, N
    yield rows.flip(0)[: 2 * B + 5], N  # all decreasing
    # a row after a long stretch of padding: the block looks back over empty blocks
    for later in (int(rows[9]) - 1, int(rows[9]), int(rows[9]) + 1):
        gap = torch.full((K,), -1)
        gap[:10] = rows[:10]
        gap[4 * B + 3] = later
        yield gap, N
    gap = torch.full((K,), -1)
    gap[5 * B] = 7  # the first row of all, far in
    yield gap, N
    for trial in range(8):  # mostly sorted, with swaps, padding and bad values at random
        idx = rows.clone()
        u = torch.rand(K, generator=gen)
        idx[u < 0.3] = -1
        swap = torch.nonzero(u > 0.995).flatten()
        idx[swap] = idx[(swap + 1) % K]
        idx[(u > 0.99) & (u <= 0.995)] = N + trial
        idx[(u > 0.985) & (u <= 0.99)] = -3
        yield idx, N


@pytest.mark.parametrize("device", DEVICES)
def test_adam_check_counts_as_reference(device, seed):
    """The status of indexes across thread blocks (sorted; a repeat at a
    block's edge; decreasing; rows after long stretches of padding; random
    slips) is the reference's count of bad entries; where it is 0 the rows
    were updated, else nothing was."""
    gen = torch.Generator().manual_seed(seed)
    seen = set()
    for index, N in check_cases(gen):
        D = 2
        tables = [torch.zeros(N, D, dtype=F32, device=device) for _ in range(3)]
        index = index.to(device)
        grad = torch.ones(index.shape[0], D, dtype=F32, device=device)
        status = OPS.adam_rows_(*tables, index, grad, step_tensor(1, device), 0.1, 0.9, 0.999, 1e-15, 0.0)
        want = int(bad_entries(index, N)[0])
        assert int(status[0]) == want, f"index {index.tolist()[:20]}...: status {int(status[0])}, want {want}"
        changed = int((tables[0] != 0).any(-1).sum())
        assert changed == (int((index >= 0).sum()) if want == 0 else 0)
        seen.add(want == 0)
    assert seen == {True, False}


def _last_row(a, b):
    return b if b >= 0 else a  # offload_math.h: nurec_offload_last_row


def _block_scan_port(values):
    """offload.cu's offload_scan_last_row, ported (lanes of 32, a warp's
    shfl_up steps, then the warps' last rows): (inclusive scan, total)."""
    x = list(values)
    for d in (1, 2, 4, 8, 16):
        x = [_last_row(x[t - d], x[t]) if t % 32 >= d else x[t] for t in range(len(x))]
    warp_last = x[31::32]
    before = [-1]
    for w in warp_last[:-1]:
        before.append(_last_row(before[-1], w))
    total = _last_row(before[-1], warp_last[-1])
    return [_last_row(before[t // 32], x[t]) for t in range(len(x))], total


def _check_kernel_port(index, N, B):
    """offload.cu's offload_check_kernel, ported, with blocks of B threads:
    the status it writes."""
    K = len(index)
    row = [r if 0 <= r < N else -1 for r in index]
    bad = 0
    for start in range(0, K, B):
        incl, block_last = _block_scan_port(row[start:start + B] + [-1] * (start + B - K))
        carry, s = -1, start
        while block_last >= 0 and s > 0 and carry < 0:  # the look-back, a block at a time
            _, carry = _block_scan_port(row[s - B:s])
            s -= B
        for t in range(min(B, K - start)):
            prev = incl[t - 1] if t > 0 else -1
            if block_last >= 0:
                prev = _last_row(carry, prev)
            r = index[start + t]
            bad += r != -1 and (not 0 <= r < N or r <= prev)
    return bad


def test_cuda_check_ported(seed):
    """The CUDA check's algorithm (its block scan and look-back over blocks,
    ported to Python; blocks of 32 and 64 threads for more of them) counts
    the reference's bad entries, on the indexes of check_cases and random
    ones: a CPU run of what only a GPU runs otherwise."""
    gen = torch.Generator().manual_seed(seed)
    cases = list(check_cases(gen, B=32))
    for _ in range(30):
        N, K = int(torch.randint(1, 60, (1,), generator=gen)), int(torch.randint(0, 200, (1,), generator=gen))
        idx = compaction_index(N, K, gen, mixed=True)
        slips = torch.rand(K, generator=gen) < 0.05
        idx[slips] = torch.randint(-3, N + 3, (int(slips.sum()),), generator=gen)
        cases.append((idx, N))
    for idx, N in cases:
        want = int(bad_entries(idx, N)[0])
        for B in (32, 64):
            assert _check_kernel_port(idx.tolist(), N, B) == want, (idx.tolist(), N, B)


# ------------------------------------------------- CUDA: pinned host tables

def pinned(t):
    p = t.cpu().pin_memory()
    assert p.is_pinned()
    return p


@gpu
@pytest.mark.parametrize("D", [48, 3, 1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_from_pinned_host_table(dtype, D, seed):
    """A pinned host table read in place with a CUDA index: the CPU's rows,
    for the whole table and for a view into it (rows 7 on: an offset
    pointer, 16-byte aligned or not); and the host table's values at the
    call, not a copy made earlier."""
    gen = torch.Generator().manual_seed(seed)
    N, K = 5000, 3001
    host = pinned(random_table(N, D, dtype, "cpu", gen))
    index = gather_index(N - 7, K, gen)
    for table in (host, host[7:]):
        assert table.is_pinned() and table.is_contiguous()
        poison_allocator("cuda")
        rows = nurec_ops.gather_rows(table, index.cuda())
        assert rows.device.type == "cuda"
        assert same_bits(rows.cpu(), nurec_ops.gather_rows(table, index))
    torch.cuda.synchronize()
    host.mul_(2)  # in place, on the host
    assert same_bits(nurec_ops.gather_rows(host, index.cuda()).cpu(), nurec_ops.gather_rows(host, index))


@gpu
def test_gather_pinned_host_table_gradient(seed):
    """The gradient of a pinned host table (made on the GPU, on the table's
    device): the CPU op's."""
    gen = torch.Generator().manual_seed(seed)
    table = pinned(random_table(80, 6, F64, "cpu", gen)).requires_grad_(True)
    index = gather_index(80, 120, gen)
    cot = torch.randn(120, 6, generator=gen, dtype=F64)
    (g,) = torch.autograd.grad(nurec_ops.gather_rows(table, index.cuda()), table, cot.cuda())
    (e,) = torch.autograd.grad(nurec_ops.gather_rows(table, index), table, cot)
    assert g.device.type == "cpu"
    assert_close(g, e, F64)


@gpu
def test_host_tables_must_be_pinned():
    """A pageable CPU table with a CUDA index is refused, naming it (never
    read: a kernel cannot reach pageable memory), and nothing is updated;
    an empty one is accepted (never read)."""
    index = torch.tensor([0, 2, -1], device="cuda")
    with pytest.raises(RuntimeError, match=r"`table` on the CPU must be in pinned memory \(Tensor.pin_memory\(\)\) "
                                           r"when `index` is on CUDA"):
        nurec_ops.gather_rows(torch.ones(4, 3), index)
    rows = nurec_ops.gather_rows(torch.ones(0, 3), torch.tensor([-1, 0], device="cuda"))
    assert (rows[0] == 0).all() and torch.isnan(rows[1]).all()
    grad = torch.ones(3, 3, device="cuda")
    step = step_tensor(1, "cuda")
    tables = {"param": torch.ones(4, 3), "exp_avg": torch.zeros(4, 3), "exp_avg_sq": torch.zeros(4, 3)}
    for name in tables:
        bad = {k: (v if k == name else pinned(v)) for k, v in tables.items()}
        with pytest.raises(RuntimeError, match=f"`{name}` on the CPU must be in pinned memory"):
            nurec_ops.adam_rows_(*bad.values(), index, grad, step, 0.1)
        assert (bad["param"] == 1).all() and (bad["exp_avg"] == 0).all()
    torch.cuda.synchronize()


def _host_gather_inputs():
    return dict(table=pinned(torch.ones(6, 4)), index=torch.tensor([0, 2, -1], device="cuda"))


def _host_adam_inputs():
    return dict(param=pinned(torch.ones(6, 3)), exp_avg=pinned(torch.zeros(6, 3)), exp_avg_sq=pinned(torch.zeros(6, 3)),
                index=torch.tensor([0, 2, -1], device="cuda"), grad=torch.ones(3, 3, device="cuda"),
                step=step_tensor(1, "cuda"), lr=0.1)


def _pinned_transposed(s, name):
    return pinned(torch.ones(s[name].shape[::-1])).t()


# Bad arguments with pinned host tables that the fake kernels see too (not
# whether memory is pinned: a property of the memory, for the real kernel
# alone: test_host_tables_must_be_pinned).
HOST_ERRORS = [
    ("gather", "table", changed(table=lambda s: s["table"][:, ::2])),  # pinned, not contiguous
    ("gather", "table", changed(table=lambda s: s["table"].cuda(), index=lambda s: s["index"].cpu())),
    ("adam", "param", changed(param=lambda s: _pinned_transposed(s, "param"))),
    ("adam", "exp_avg_sq", changed(exp_avg_sq=lambda s: _pinned_transposed(s, "exp_avg_sq"))),
    ("adam", "exp_avg", changed(exp_avg=lambda s: s["exp_avg"].cuda())),
    ("adam", "grad", changed(grad=lambda s: s["grad"].cpu())),
    ("adam", "step", changed(step=lambda s: s["step"].cpu())),
]


@gpu
@pytest.mark.parametrize("op,name,make", HOST_ERRORS, ids=[f"{o}-{n}-{i}" for i, (o, n, _) in enumerate(HOST_ERRORS)])
def test_bad_input_with_host_tables(op, name, make):
    """Each raises naming the argument, in the real and the fake kernel; the
    valid inputs pass."""
    inputs, call = (_host_gather_inputs, nurec_ops.gather_rows) if op == "gather" else \
        (_host_adam_inputs, nurec_ops.adam_rows_)
    call(**inputs())
    raises_real_and_fake(lambda x: call(**x), make(inputs()), name)
    torch.cuda.synchronize()
    offload_rows.check_pending(wait=True)


@gpu
@pytest.mark.parametrize("D", [48, 5])
@pytest.mark.parametrize("dtype", DTYPES)
def test_adam_on_pinned_host_tables(dtype, D, seed):
    """Three steps updating pinned host tables in place from CUDA: the CPU
    op's values on copies (up to the GPU's fused multiply-adds), rows not
    listed the same bits, the state carried."""
    gen = torch.Generator().manual_seed(seed)
    N, K = 20_000, 9_001
    cpu = adam_state(N, D, dtype, "cpu", gen)
    host = [pinned(x) for x in cpu]
    for t in (1, 2, 3):
        index, grad = adam_step_inputs(N, K, D, dtype, "cpu", gen, mixed=t == 2)
        before = [x.clone() for x in host]
        status = nurec_ops.adam_rows_(*host, index.cuda(), grad.cuda(), step_tensor(t, "cuda"), 1e-2, 0.9, 0.999,
                                      1e-15, 0.01)
        nurec_ops.adam_rows_(*cpu, index, grad, step_tensor(t, "cpu"), 1e-2, 0.9, 0.999, 1e-15, 0.01)
        torch.cuda.synchronize()
        assert status.device.type == "cuda" and status.tolist() == [0]
        free = unlisted_mask(index, N)
        for x, c, b in zip(host, cpu, before):
            assert x.is_pinned()
            assert torch.equal(x[free], b[free])
            assert_close(x, c.double(), dtype, msg=f"step {t}")
            assert not torch.equal(x, b)
    offload_rows.check_pending(wait=True)


@gpu
def test_adam_pinned_view(seed):
    """Pinned tables given as views with an offset (rows 3 on) are updated
    where they are: the rows before the view untouched."""
    gen = torch.Generator().manual_seed(seed)
    full = [pinned(x) for x in adam_state(103, 4, F32, "cpu", gen)]
    views = [x[3:] for x in full]
    cpu = [x.clone() for x in views]
    head = [x[:3].clone() for x in full]
    index, grad = adam_step_inputs(100, 60, 4, F32, "cpu", gen)
    nurec_ops.adam_rows_(*views, index.cuda(), grad.cuda(), step_tensor(2, "cuda"), 0.1)
    nurec_ops.adam_rows_(*cpu, index, grad, step_tensor(2, "cpu"), 0.1)
    torch.cuda.synchronize()
    for v, c, f, h in zip(views, cpu, full, head):
        assert_close(v, c.double(), F32)
        assert torch.equal(f[:3], h)


def _pinned_scene(gen, dtype=F32, N=30_000, K=12_001, D=48):
    """A pinned SH table and its Adam state, a CUDA index, grad and step."""
    table = pinned(random_table(N, D, dtype, "cpu", gen))
    state = [pinned(x) for x in adam_state(N, D, dtype, "cpu", gen)]
    index, grad = adam_step_inputs(N, K, D, dtype, "cuda", gen, mixed=True)
    return table, state, index, grad


@gpu
def test_no_host_sync_with_pinned_tables(seed):
    """The gather from a pinned table and the Adam step on pinned tables
    (with the status's asynchronous report) never synchronize with the host,
    after a warm-up (reports read, buffers reused)."""
    gen = torch.Generator().manual_seed(seed)
    table, state, index, grad = _pinned_scene(gen)
    step = step_tensor(1, "cuda")
    for _ in range(3):
        nurec_ops.gather_rows(table, index)
        nurec_ops.adam_rows_(*state, index, grad, step, 1e-3)
        torch.cuda.synchronize()
    offload_rows.check_pending()
    with no_host_sync():
        for _ in range(2):
            rows = nurec_ops.gather_rows(table, index)
            status = nurec_ops.adam_rows_(*state, index, grad, step, 1e-3)
            step.add_(1)
    torch.cuda.synchronize()
    offload_rows.check_pending(wait=True)
    assert status.tolist() == [0]
    assert same_bits(rows.cpu(), nurec_ops.gather_rows(table, index.cpu()))


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_graph_with_pinned_tables(dtype, seed):
    """A gather from a pinned table and an Adam step on pinned tables with a
    device step count, captured in one CUDA graph and replayed with new
    index, grad and step values and new host values: each replay is the
    eager result on copies (the graph reads the host tables as they are at
    replay, and the step from the device)."""
    gen = torch.Generator().manual_seed(seed)
    N, K, D = 20_000, 8_001, 48
    table, state, index, grad = _pinned_scene(gen, dtype, N, K, D)
    step = step_tensor(1, "cuda")

    def run():
        rows = nurec_ops.gather_rows(table, index)
        status = nurec_ops.adam_rows_(*state, index, grad, step, 1e-2, 0.9, 0.999, 1e-15, 0.01)
        return rows, status

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            run()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    offload_rows.check_pending(wait=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        g_rows, g_status = run()
    for trial in range(3):
        new_index, new_grad = adam_step_inputs(N, K, D, dtype, "cuda", gen, mixed=trial != 1)
        index.copy_(new_index)
        grad.copy_(new_grad)
        step.fill_(2 + trial)
        torch.cuda.synchronize()
        table.copy_(random_table(N, D, dtype, "cpu", gen))
        expect_state = [x.clone() for x in state]
        expect_rows = nurec_ops.gather_rows(table, index.cpu())
        nurec_ops.adam_rows_(*expect_state, index.cpu(), grad.cpu(), step.cpu(), 1e-2, 0.9, 0.999, 1e-15, 0.01)
        graph.replay()
        torch.cuda.synchronize()
        assert g_status.tolist() == [0]
        assert same_bits(g_rows.cpu(), expect_rows)
        for x, e in zip(state, expect_state):
            assert_close(x, e.double(), dtype, msg=f"replay {trial}")
    offload_rows.check_pending(wait=True)


@gpu
def test_pinned_tables_on_current_stream(seed):
    """With pinned tables the ops still launch on the current stream: on a
    side stream whose index, grad and step are written after a long sleep,
    a kernel on any other stream would read the stale zeros (an index of
    zeros is a bad one: nothing updated)."""
    gen = torch.Generator().manual_seed(seed)
    table, state, index, grad = _pinned_scene(gen)
    step = step_tensor(3, "cuda")
    expect_state = [x.clone() for x in state]
    expect_rows = nurec_ops.gather_rows(table, index.cpu())
    nurec_ops.adam_rows_(*expect_state, index.cpu(), grad.cpu(), step.cpu(), 1e-2)
    stale = [torch.zeros_like(x) for x in (index, grad, step)]
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)
        for s, x in zip(stale, (index, grad, step)):
            s.copy_(x)
        rows = nurec_ops.gather_rows(table, stale[0])
        status = nurec_ops.adam_rows_(*state, *stale, 1e-2)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    offload_rows.check_pending(wait=True)
    assert status.tolist() == [0]
    assert same_bits(rows.cpu(), expect_rows)
    for x, e in zip(state, expect_state):
        assert_close(x, e.double(), F32)
