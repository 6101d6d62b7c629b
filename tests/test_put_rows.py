"""nurec_ops.put_rows_ (a GPU cache of offloaded rows writing back what it
evicts into the host table): against the reference twin, rows not listed
untouched (bit for bit), padding anywhere, K = 0, N = 0, D = 1 / 5 / 48; a
bad index (adam_rows_'s rule) writes nothing, the CPU raises at once and
CUDA at a later call naming put_rows_; and on CUDA (GPU-marked) the
zero-copy write into pinned host tables, a view with an offset, and no
host sync. The registry's row (tests/op_cases.py) covers opcheck, compile,
poison, graphs and the current stream with device tables; bad arguments are
rows of tests/test_errors.py."""
import pytest
import torch

import nurec_ops
from nurec_ops import offload_rows
from nurec_ops import reference as ref
from nurec_ops.reference.offload_rows import bad_entries

from bad_inputs import changed, raises_real_and_fake
from conftest import DEVICES, DTYPES, gpu, no_host_sync
from test_offload_rows import BAD_INDEXES, N_BAD, compaction_index, pinned, random_table, unlisted_mask

OPS = torch.ops.nurec_ops
SHAPES = [(50, 40, 48), (50, 40, 1), (300, 257, 5), (7, 0, 48), (0, 0, 3), (0, 4, 2), (1, 1, 2)]


def _inputs(N, K, D, dtype, device, gen, mixed):
    table = random_table(N, D, dtype, device, gen)
    index = compaction_index(N, K, gen, mixed=mixed).to(device) if N else torch.full((K,), -1, device=device)
    rows = random_table(K, D, dtype, device, gen)
    return table, index, rows


@pytest.mark.parametrize("mixed", [False, True], ids=["rows-then-padding", "padding-mixed"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "N{}-K{}-D{}".format(*s))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_put_matches_reference(device, dtype, shape, mixed, seed):
    gen = torch.Generator().manual_seed(seed)
    N, K, D = shape
    table, index, rows = _inputs(N, K, D, dtype, device, gen, mixed)
    expect = table.clone()
    ref.put_rows_(expect, index, rows)
    before = table.clone()
    status = nurec_ops.put_rows_(table, index, rows)
    assert status.device == index.device and status.tolist() == [0]
    assert torch.equal(table, expect)  # a copy: the same bits
    free = unlisted_mask(index, N).to(device)
    assert torch.equal(table[free], before[free])
    listed = index >= 0
    if bool(listed.any()):
        assert torch.equal(table[index[listed]], rows[listed])


@pytest.mark.parametrize("entries,count", BAD_INDEXES, ids=[str(b[0]) for b in BAD_INDEXES])
@pytest.mark.parametrize("device", DEVICES)
def test_put_bad_index_writes_nothing(device, entries, count, seed):
    gen = torch.Generator().manual_seed(seed)
    table = random_table(N_BAD, 3, torch.float64, device, gen)
    index = torch.tensor(entries, device=device)
    rows = random_table(len(entries), 3, torch.float64, device, gen)
    before = table.clone()
    assert bad_entries(index, N_BAD).tolist() == [count]
    assert OPS.put_rows_(table, index, rows).tolist() == [count]
    assert torch.equal(table, before)
    if device == "cpu":
        with pytest.raises(RuntimeError, match=f"nurec_ops.put_rows_: `index` has {count} bad entries.*"
                                               "nothing was written"):
            nurec_ops.put_rows_(table, index, rows)
    else:
        offload_rows.check_pending(wait=True)
        nurec_ops.put_rows_(table, index, rows)  # queued, not raised
        with pytest.raises(RuntimeError, match=rf"put_rows_: call #\d+ on cuda:\d+ had {count} bad entries in "
                                               r"`index`.*wrote nothing"):
            offload_rows.check_pending(wait=True)
    assert torch.equal(table, before)


@gpu
@pytest.mark.parametrize("D", [48, 5])
@pytest.mark.parametrize("dtype", DTYPES)
def test_put_into_pinned_host_table(dtype, D, seed):
    """Written in place over PCIe: the CPU op's result on a copy, bit for bit."""
    gen = torch.Generator().manual_seed(seed)
    N, K = 20_000, 9_001
    cpu = random_table(N, D, dtype, "cpu", gen)
    host = pinned(cpu)
    for mixed in (False, True):
        index = compaction_index(N, K, gen, mixed=mixed)
        rows = random_table(K, D, dtype, "cpu", gen)
        status = nurec_ops.put_rows_(host, index.cuda(), rows.cuda())
        nurec_ops.put_rows_(cpu, index, rows)
        torch.cuda.synchronize()
        assert status.tolist() == [0] and host.is_pinned()
        assert torch.equal(host, cpu)
    offload_rows.check_pending(wait=True)


@gpu
def test_put_pinned_view(seed):
    gen = torch.Generator().manual_seed(seed)
    full = pinned(random_table(103, 4, torch.float32, "cpu", gen))
    head = full[:3].clone()
    view = full[3:]
    expect = view.clone()
    index = compaction_index(100, 60, gen)
    rows = random_table(60, 4, torch.float32, "cpu", gen)
    nurec_ops.put_rows_(view, index.cuda(), rows.cuda())
    ref.put_rows_(expect, index, rows)
    torch.cuda.synchronize()
    assert torch.equal(view, expect) and torch.equal(full[:3], head)


@gpu
def test_put_no_host_sync(seed):
    gen = torch.Generator().manual_seed(seed)
    host = pinned(random_table(30_000, 48, torch.float32, "cpu", gen))
    index = compaction_index(30_000, 12_001, gen, mixed=True).cuda()
    rows = random_table(12_001, 48, torch.float32, "cuda", gen)
    for _ in range(3):
        nurec_ops.put_rows_(host, index, rows)
        torch.cuda.synchronize()
    offload_rows.check_pending()
    with no_host_sync():
        for _ in range(2):
            status = nurec_ops.put_rows_(host, index, rows)
    torch.cuda.synchronize()
    offload_rows.check_pending(wait=True)
    assert status.tolist() == [0]
    listed = index >= 0
    assert torch.equal(host[index[listed].cpu()], rows[listed].cpu())


def _host_put_inputs():
    return dict(table=pinned(torch.ones(6, 3)), index=torch.tensor([0, 2, -1], device="cuda"),
                rows=torch.ones(3, 3, device="cuda"))


# as test_offload_rows.HOST_ERRORS: what the fake kernel sees too
HOST_PUT_ERRORS = [
    ("table", changed(table=lambda s: pinned(torch.ones(3, 6)).t())),  # pinned, not contiguous
    ("table", changed(table=lambda s: s["table"].cuda(), index=lambda s: s["index"].cpu(),
                      rows=lambda s: s["rows"].cpu())),
    ("rows", changed(rows=lambda s: s["rows"].cpu())),
]


@gpu
@pytest.mark.parametrize("name,make", HOST_PUT_ERRORS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(HOST_PUT_ERRORS)])
def test_put_bad_input_with_host_table(name, make):
    nurec_ops.put_rows_(**_host_put_inputs())
    raises_real_and_fake(lambda x: nurec_ops.put_rows_(**x), make(_host_put_inputs()), name)
    torch.cuda.synchronize()
    offload_rows.check_pending(wait=True)


@gpu
def test_put_host_table_must_be_pinned():
    table = torch.ones(4, 3)
    with pytest.raises(RuntimeError, match=r"`table` on the CPU must be in pinned memory"):
        nurec_ops.put_rows_(table, torch.tensor([0, 2, -1], device="cuda"), torch.zeros(3, 3, device="cuda"))
    assert (table == 1).all()
