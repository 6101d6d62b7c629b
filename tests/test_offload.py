"""nurec_ops.offload: the visibility tests are conservative (the images and
gradients of the visible subset are those of the whole scene), the
compaction is exact and flags overflow, and HostRows' steps are Adam on the
visible rows only (SelectiveAdam), on CPU and, from pinned host memory,
on CUDA."""

import pytest
import torch

import nurec_ops
from nurec_ops import offload

from conftest import DEVICES, gpu, no_host_sync
from random_scenes import random_quats
import test_rasterize_camera as tc
import test_rasterize_lidar as tl


def spread_scene(N=400, W=40, H=30):
    """Gaussians in a 16 m box around 3 cameras that look at its middle:
    many behind a camera, beside its image or past its far plane, some
    straddling an image's border, a few huge, transparent or faint."""
    means = (torch.rand(N, 3, dtype=torch.float64) - 0.5) * 16
    scales = torch.exp(torch.randn(N, 3, dtype=torch.float64) * 0.8 - 2.0)
    scales[:8] *= 30  # huge: reach in from far outside
    opac = torch.rand(N, dtype=torch.float64)
    opac[8:16] = 1.0 / 300  # never 1/255
    V, K = tc.cameras(3, W, H, dist=4.0)
    return dict(means=means, quats=random_quats(N), scales=scales, opacities=opac,
                features=torch.rand(N, 3, dtype=torch.float64), viewmats=V, Ks=K, width=W, height=H)


def _camera(s, idx=None, far=1e10):
    keys = ("means", "quats", "scales", "opacities", "features")
    g = [s[k] if idx is None else s[k][idx] for k in keys]
    return nurec_ops.rasterize_camera(*g, s["viewmats"], s["Ks"], s["width"], s["height"], near=0.3, far=far)


@pytest.mark.parametrize("far", [1e10, 6.0])
def test_pinhole_visible_subset_renders_the_whole_scene(far, seed):
    """Rendering only pinhole_visible's Gaussians gives the whole scene's
    images (float64) and its gradients; every Gaussian left out has zero
    gradient in the whole render; and the test leaves out many (a mask of
    all True would pass the first check vacuously)."""
    torch.manual_seed(seed)
    for _ in range(20):  # at far = 6 m about one draw in 20 keeps under a tenth: drawn again, never judged
        s = spread_scene()
        seen = offload.pinhole_visible(s["means"], s["scales"], s["opacities"], s["viewmats"], s["Ks"], s["width"],
                                       s["height"], near=0.3, far=far)
        if 0.1 * seen.numel() < seen.sum() < 0.8 * seen.numel():
            break
    for k in ("means", "quats", "scales", "opacities", "features"):
        s[k].requires_grad_(True)
    idx = seen.nonzero()[:, 0]
    assert 0.1 * seen.numel() < idx.numel() < 0.8 * seen.numel()
    full = _camera(s, far=far)
    part = _camera(s, idx, far=far)
    for a, b in zip(full, part):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    cot = [torch.randn_like(o) for o in full]
    keys = ("means", "quats", "scales", "opacities", "features")
    g_full = torch.autograd.grad(full, [s[k] for k in keys], cot)
    g_part = torch.autograd.grad(part, [s[k] for k in keys], cot)
    for k, a, b in zip(keys, g_full, g_part):
        assert (a[~seen] == 0).all(), k
        torch.testing.assert_close(a[idx], b[idx], rtol=1e-10, atol=1e-12)


def test_pinhole_visible_edges(seed):
    """The camera test's edge scene (behind, before near, straddling near,
    off-screen reaching in, huge, tiny, transparent, faint): the visible
    subset renders it exactly, and the clearly unseen are left out."""
    torch.manual_seed(seed)
    s = tc.edge_scene()
    near = s["near"]
    seen = offload.pinhole_visible(s["means"], s["scales"], s["opacities"], s["viewmats"], s["Ks"], s["width"],
                                   s["height"], near=near)
    idx = seen.nonzero()[:, 0]
    keys = ("means", "quats", "scales", "opacities", "features")
    run = lambda sel: nurec_ops.rasterize_camera(*[s[k][sel] for k in keys], s["viewmats"], s["Ks"], s["width"],
                                                 s["height"], near=near)
    for a, b in zip(run(slice(None)), run(idx)):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    V0 = s["viewmats"][0]
    z = (s["means"] @ V0[:3, :3].T + V0[:3, 3])[:, 2]
    # the first is behind camera 0; camera 1 looks from elsewhere, so ask
    # only about what no camera can see: opacity 0 and below 1/255
    assert not seen[s["opacities"] <= 1.0 / 255].any()
    assert z[0] < 0


def test_lidar_visible_subset_renders_the_whole_sweep(seed):
    torch.manual_seed(seed)
    s = tl.random_scene(N=300, C=2)
    s["means"] = s["means"] * torch.where(torch.rand(300, 1, dtype=torch.float64) < 0.4, 30.0, 1.0)  # many past far
    far = 40.0
    seen = offload.lidar_visible(s["means"], s["scales"], s["opacities"], s["viewmats"], near=0.5, far=far)
    idx = seen.nonzero()[:, 0]
    assert idx.numel() < 0.9 * seen.numel()
    keys = ("means", "quats", "scales", "opacities", "features")
    run = lambda sel: nurec_ops.rasterize_lidar(*[s[k][sel] for k in keys], s["viewmats"], s["row_elevations"],
                                                s["column_azimuths"], s["row_azimuth_offsets"], near=0.5, far=far)
    for a, b in zip(run(slice(None)), run(idx)):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("device", DEVICES)
def test_compact_is_nonzero_in_a_fixed_buffer(device, seed):
    torch.manual_seed(seed)
    for N, p in ((0, 0.5), (1, 1.0), (1000, 0.3), (5000, 0.0), (777, 1.0)):
        mask = torch.rand(N, device=device) < p
        want = mask.nonzero()[:, 0]
        for cap in (0, want.numel(), want.numel() + 17, max(want.numel() - 5, 0)):
            index, count = offload.compact(mask, cap)
            assert index.shape == (cap,) and index.dtype == torch.int64
            assert int(count) == want.numel()
            k = min(cap, want.numel())
            assert torch.equal(index[:k], want[:k])
            assert (index[k:] == -1).all()


def test_compact_bad_input():
    with pytest.raises(RuntimeError, match="mask"):
        offload.compact(torch.zeros(3), 4)
    with pytest.raises(RuntimeError, match="capacity"):
        offload.compact(torch.zeros(3, dtype=torch.bool), -1)


def test_subset_pads_transparent_and_poisons(seed):
    torch.manual_seed(seed)
    N = 10
    m, q, s, o = torch.randn(N, 3), torch.randn(N, 4), torch.rand(N, 3), torch.rand(N)
    index = torch.tensor([1, 4, 9, -1, -1])
    mm, qq, ss, oo = offload.subset(index, m, q, s, o)
    assert torch.equal(mm[:3], m[[1, 4, 9]]) and torch.equal(oo[:3], o[[1, 4, 9]])
    assert (oo[3:] == 0).all()
    _, _, _, bad = offload.subset(index, m, q, s, o, poison=torch.tensor(True))
    assert bad.isnan().all()
    _, _, _, good = offload.subset(index, m, q, s, o, poison=torch.tensor(False))
    assert torch.equal(good, oo)


def _selective_adam_reference(values, steps, lr, betas=(0.9, 0.999), eps=1e-15):
    """torch.optim.Adam stepped on each step's visible rows only (their
    moments carried per row; the others untouched): SelectiveAdam."""
    p = values.clone()
    m, v = torch.zeros_like(p), torch.zeros_like(p)
    for t, (rows, g) in enumerate(steps, 1):
        q = p[rows].clone().requires_grad_(True)
        opt = torch.optim.Adam([q], lr=lr, betas=betas, eps=eps)
        opt.step()  # creates the state at step 0 with zero gradient... replaced below
        st = opt.state[q]
        with torch.no_grad():
            q.copy_(p[rows])
        st["step"] = torch.tensor(float(t - 1))
        st["exp_avg"], st["exp_avg_sq"] = m[rows].clone(), v[rows].clone()
        q.grad = g.clone()
        opt.step()
        p[rows], m[rows], v[rows] = q.detach(), st["exp_avg"], st["exp_avg_sq"]
    return p


@pytest.mark.parametrize("cache", [False, True], ids=["host", "cache"])
@pytest.mark.parametrize("device", DEVICES)
def test_host_rows_steps_are_selective_adam(device, cache, seed):
    """Three steps of HostRows (compact -> gather -> step) on different
    visible sets equal torch.optim.Adam on each step's rows (float64); the
    gathered rows are the host values, padding rows zero; on CUDA the rows
    live in pinned host memory."""
    torch.manual_seed(seed)
    N, D = 300, 12
    values = torch.randn(N, 4, 3, dtype=torch.float64)
    rows = offload.HostRows(values.to(device), device, lr=0.01, cache=cache)
    if device == "cuda":
        assert rows.param.device.type == "cpu" and rows.param.is_pinned()
    steps = []
    for _ in range(3):
        mask = torch.rand(N) < 0.4
        index, poison = rows.visible_index(mask.to(device))
        assert not bool(poison)
        got = rows.gather(index)
        k = int(mask.sum())
        assert got.shape == (index.shape[0], 4, 3) and got.requires_grad
        want_rows = mask.nonzero()[:, 0]
        torch.testing.assert_close(got[:k].detach().cpu(), rows.values()[want_rows].cpu(), rtol=0, atol=0)
        assert (got[k:] == 0).all()
        g = torch.randn(index.shape[0], 4, 3, dtype=torch.float64, device=device)
        rows.step(index, g)
        steps.append((want_rows, g[:k].reshape(k, D).cpu()))
    if device == "cuda":
        torch.cuda.synchronize()
    want = _selective_adam_reference(values.reshape(N, D), steps, lr=0.01)
    torch.testing.assert_close(rows.values().reshape(N, D).cpu(), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_host_rows_overflow_poisons_and_grows(device):
    """A visible set larger than the capacity: the step's poison flag is
    True (its opacities NaN through subset), a warning names the count, and
    the capacity grows to hold it."""
    N = 5000
    rows = offload.HostRows(torch.zeros(N, 2, device=device), device, lr=0.1, capacity=10)
    mask = torch.zeros(N, dtype=torch.bool, device=device)
    mask[:100] = True
    with pytest.warns(RuntimeWarning, match="100 visible rows"):
        index, poison = rows.visible_index(mask)
        assert bool(poison) and index.shape == (10,)
        if device == "cuda":  # a report is read at the first call after it landed
            torch.cuda.synchronize()
            rows.visible_index(mask)
    index, poison = rows.visible_index(mask)
    assert rows.capacity >= 100 and not bool(poison) and (index[:100] == torch.arange(100, device=device)).all()


@gpu
@pytest.mark.parametrize("cache", [False, True], ids=["host", "cache"])
def test_host_rows_step_has_no_host_sync(cache, seed):
    """After the first (sized) call, a whole HostRows step on CUDA, the
    compaction, gather and Adam, makes no host synchronization."""
    torch.manual_seed(seed)
    N = 4000
    rows = offload.HostRows(torch.randn(N, 48, device="cuda"), "cuda", lr=0.01, cache=cache)
    mask = torch.rand(N, device="cuda") < 0.3
    index, _ = rows.visible_index(mask)
    torch.cuda.synchronize()
    with no_host_sync():
        for _ in range(3):
            index, poison = rows.visible_index(mask)
            r = rows.gather(index)
            rows.step(index, torch.ones_like(r))
    torch.cuda.synchronize()


def _drifting_masks(N, steps, gen):
    """Visible sets of a sensor moving along the rows: a window of ~40% of
    them shifted by ~5% a step, some rows flickering, one empty step, one
    step seeing everything (the capacity grows and shrinks)."""
    out = []
    for t in range(steps):
        lo = int(0.05 * N * t)
        m = torch.zeros(N, dtype=torch.bool)
        m[lo: lo + int(0.4 * N)] = True
        m ^= torch.rand(N, generator=gen) < 0.03
        out.append(m)
    out[3] = torch.zeros(N, dtype=torch.bool)
    out[5] = torch.ones(N, dtype=torch.bool)
    return out


@pytest.mark.parametrize("device", DEVICES)
def test_host_rows_cache_same_bits_as_host_rows(device, seed):
    """HostRows with the GPU cache against without, step by step on drifting
    visible sets: the same gathered rows, and after values() the same
    values and moments, bit for bit (the same Adam kernel on the same
    numbers); before it, a row that left the view is on the host already
    (written back), and a row still in the cache is not (no traffic for it)."""
    gen = torch.Generator().manual_seed(seed)
    N, steps = 400, 8
    init = torch.randn(N, 6, generator=gen, dtype=torch.float32)
    plain = offload.HostRows(init.to(device), device, lr=0.05)
    cached = offload.HostRows(init.to(device), device, lr=0.05, cache=True)
    masks = _drifting_masks(N, steps, gen)
    for t, mask in enumerate(masks):
        grads = torch.randn(N, 6, generator=gen).to(device)
        for r in (plain, cached):
            index, poison = r.visible_index(mask.to(device))
            assert not bool(poison)
            got = r.gather(index).detach().clone()  # (with the cache, Adam then updates those rows in place)
            g = torch.where(index[:, None] >= 0, grads[index.clamp(min=0)], 0)
            r.step(index, g)
            if r is plain:
                want = got
            else:
                assert torch.equal(got, want), f"step {t}"
        if device == "cuda":
            torch.cuda.synchronize()
        if t >= 1:
            left = masks[t - 1] & ~mask
            stayed = masks[t - 1] & mask
            assert torch.equal(cached.param[left], plain.param[left]), f"step {t}: rows that left, on the host"
            if t not in (4, 6) and bool(stayed.any()):  # (after the empty step every row came from the host)
                assert not torch.equal(cached.param[stayed], plain.param[stayed]), f"step {t}: cached rows read"
    assert torch.equal(cached.values(), plain.values())
    assert torch.equal(cached.exp_avg, plain.exp_avg) and torch.equal(cached.exp_avg_sq, plain.exp_avg_sq)
    cached.values()  # a second flush changes nothing
    assert torch.equal(cached.param, plain.param)


@pytest.mark.parametrize("device", DEVICES)
def test_host_rows_cache_step_needs_the_gathered_index(device):
    """With the cache, a step's rows are the last gather's, in its order: a
    step before any gather, or with another index, is refused by name."""
    rows = offload.HostRows(torch.zeros(50, 2, device=device), device, lr=0.1, cache=True)
    mask = torch.arange(50, device=device) % 3 == 0
    index, _ = rows.visible_index(mask)
    with pytest.raises(RuntimeError, match=r"needs the index its last gather\(\) was given"):
        rows.step(index, None)
    got = rows.gather(index)
    with pytest.raises(RuntimeError, match="needs the index its last gather"):
        rows.step(index.clone(), None)
    rows.step(index, torch.ones_like(got))
    v, m = rows.values(), mask.cpu()
    assert (v[m] != 0).all() and (v[~m] == 0).all()
