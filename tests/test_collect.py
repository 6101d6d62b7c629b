"""nurec_ops.collect_gaussian_parameters and nurec_ops.collect against
nurec_ops.reference (SPEC section 2).

Float64 results must match the float64 reference to 1e-9; float32 results
are compared with the float64 reference run on the upcast inputs, to 2e-5
relative to each tensor's largest magnitude (5x that for the pose gradient,
a sum over up to thousands of Gaussians). Exactly-zero requirements (forced
opacities and their gradients, unused pose / key rows) are checked with ==.
"""
import pytest
import torch

import nurec_ops
from nurec_ops import reference as ref

from conftest import DEVICES, DTYPES, INDEX_DTYPES
from poison import assert_all_finite, poison_allocator
from random_scenes import make_gaussians, make_track_poses, make_tracks, query_times_for, upcast
from tolerances import assert_close, assert_same_sum

OPS = torch.ops.nurec_ops
G_NAMES = ["means", "quats", "log_scales", "opacity_logits"]
OUT_NAMES = ["means_w", "quats_w", "scales", "opacities"]
POSE_GRAD_FACTOR = 5.0


def _forced(ids, inside, T):
    ids = ids.long().cpu()
    valid = (ids >= 0) & (ids < T)
    ins = torch.zeros_like(valid)
    if T:
        ins = valid & inside.cpu()[ids.clamp(0, T - 1)]
    return (ids != -1) & ~ins


def _zero(t):
    return torch.equal(t, torch.zeros_like(t))


def check_collect_params(g, track_poses, track_inside, cots=None, factor=1.0):
    """Runs collect_gaussian_parameters and the float64 CPU reference on the
    same inputs, forward and backward (random cotangents), compares them,
    checks the exact-zero rules and the raw backward op. Returns (outputs,
    grads dict)."""
    dtype, device = g["means"].dtype, g["means"].device
    leaves = {k: g[k].detach().clone().requires_grad_() for k in G_NAMES}
    tp = track_poses.detach().clone().requires_grad_()
    N, T = g["means"].shape[0], track_poses.shape[0]
    poison_allocator(device)
    outs = nurec_ops.collect_gaussian_parameters(*[leaves[k] for k in G_NAMES], g["track_ids"], tp, track_inside)
    assert len(outs) == 4
    for o, shp, name in zip(outs, [(N, 3), (N, 4), (N, 3), (N,)], OUT_NAMES):
        assert o.shape == shp and o.dtype == dtype and o.device == device, name
    assert_all_finite(*outs, msg="collect outputs")

    l64 = {k: upcast(v).cpu().detach().requires_grad_() for k, v in leaves.items()}
    tp64 = upcast(tp).cpu().detach().requires_grad_()
    outs64 = ref.collect_gaussian_parameters(*[l64[k] for k in G_NAMES], g["track_ids"].cpu(), tp64,
                                             track_inside.cpu())
    for o, e, name in zip(outs, outs64, OUT_NAMES):
        assert_close(o, e, dtype, factor, name)

    forced = _forced(g["track_ids"], track_inside, T)
    assert _zero(outs[3].cpu()[forced]), "forced opacities must be exactly 0"
    static = g["track_ids"].cpu() == -1
    assert torch.equal(outs[0].cpu()[static], g["means"].cpu()[static]), "static means_w must equal means"

    if cots is None:
        cots = [torch.randn_like(o) for o in outs]
    poison_allocator(device)
    grads = torch.autograd.grad(outs, [leaves[k] for k in G_NAMES] + [tp], cots, allow_unused=True)
    grads = [torch.zeros_like(x) if gr is None else gr for gr, x in zip(grads, [leaves[k] for k in G_NAMES] + [tp])]
    assert_all_finite(*grads, msg="collect grads")
    grads64 = torch.autograd.grad([o for o in outs64], [l64[k] for k in G_NAMES] + [tp64],
                                  [upcast(c).cpu() for c in cots], allow_unused=True)
    grads64 = [torch.zeros_like(x) if gr is None else gr for gr, x in zip(grads64, [l64[k] for k in G_NAMES] + [tp64])]
    for gr, e, name in zip(grads, grads64, G_NAMES + ["track_poses"]):
        f = factor * (POSE_GRAD_FACTOR if name == "track_poses" else 1.0)
        if name == "track_poses":
            assert_close(gr[:, :3], e[:, :3], dtype, f, "grad track_poses translation")
            assert_close(gr[:, 3:], e[:, 3:], dtype, f, "grad track_poses quaternion")
        else:
            assert_close(gr, e, dtype, f, f"grad {name}")

    # exactly zero gradient for every input of a forced Gaussian ...
    for gr, name in zip(grads[:4], G_NAMES):
        assert _zero(gr.cpu()[forced]), f"grad {name} of forced Gaussians must be exactly 0"
    # ... and no pose gradient for tracks without a contributing Gaussian
    contrib = torch.zeros(T, dtype=torch.bool)
    ids = g["track_ids"].long().cpu()
    ok = ~forced & (ids >= 0)
    if T:
        contrib[ids[ok]] = True
    assert _zero(grads[4].cpu()[~contrib]), "tracks with no contributing Gaussian must get exactly 0 pose grad"

    poison_allocator(device)
    raw = OPS.collect_gaussian_parameters_backward(*cots, *[g[k] for k in G_NAMES], g["track_ids"], track_poses,
                                                   track_inside)
    assert len(raw) == 5
    for r, gr, name in zip(raw, grads, G_NAMES + ["track_poses"]):
        if device.type == "cpu" or name != "track_poses":
            assert torch.equal(r, gr), f"raw backward op differs from autograd's gradient for {name}"
        else:  # CUDA: the pose reduction may combine partial sums in any order
            assert_close(r, gr.double(), dtype, POSE_GRAD_FACTOR, "raw backward op vs autograd, track_poses")
    return [o.detach() for o in outs], dict(zip(G_NAMES + ["track_poses"], grads))


def check_collect(g, tracks, query_times, mode="slerp", factor=1.0, cots=None):
    """nurec_ops.collect vs the reference, forward and backward (the four
    Gaussian inputs and key_poses)."""
    dtype, device = g["means"].dtype, g["means"].device
    leaves = {k: g[k].detach().clone().requires_grad_() for k in G_NAMES}
    kp = tracks["key_poses"].detach().clone().requires_grad_()
    args = (g["track_ids"], kp, tracks["key_times"], tracks["track_ranges"], query_times)
    poison_allocator(device)
    outs = nurec_ops.collect(*[leaves[k] for k in G_NAMES], *args, mode=mode)
    assert_all_finite(*outs, msg="collect outputs")
    l64 = {k: upcast(v).cpu().detach().requires_grad_() for k, v in leaves.items()}
    kp64 = upcast(kp).cpu().detach().requires_grad_()
    cpu = [x.cpu() for x in (tracks["key_times"], tracks["track_ranges"], query_times)]
    outs64 = ref.collect(*[l64[k] for k in G_NAMES], g["track_ids"].cpu(), kp64, *cpu, mode=mode)
    for o, e, name in zip(outs, outs64, OUT_NAMES):
        assert_close(o, e, dtype, factor, name)
    if cots is None:
        cots = [torch.randn_like(o) for o in outs]
    inputs = [leaves[k] for k in G_NAMES] + [kp]
    grads = torch.autograd.grad(outs, inputs, cots, allow_unused=True)
    grads = [torch.zeros_like(x) if gr is None else gr for gr, x in zip(grads, inputs)]
    assert_all_finite(*grads, msg="collect grads")
    inputs64 = [l64[k] for k in G_NAMES] + [kp64]
    grads64 = torch.autograd.grad(outs64, inputs64, [upcast(c).cpu() for c in cots], allow_unused=True)
    grads64 = [torch.zeros_like(x) if gr is None else gr for gr, x in zip(grads64, inputs64)]
    for gr, e, name in zip(grads, grads64, G_NAMES + ["key_poses"]):
        if name == "key_poses":
            f = factor * POSE_GRAD_FACTOR
            assert_close(gr[:, :3], e[:, :3], dtype, f, "grad key_poses translation")
            assert_close(gr[:, 3:], e[:, 3:], dtype, f, "grad key_poses quaternion")
        else:
            assert_close(gr, e, dtype, factor, f"grad {name}")
    return [o.detach() for o in outs], dict(zip(G_NAMES + ["key_poses"], grads))


# ------------------------------------------------------------------ parity

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("id_dtype", INDEX_DTYPES)
def test_collect_params_parity(device, dtype, id_dtype):
    T = 7
    g = make_gaussians(600, T, dtype, device, id_dtype)
    poses, inside = make_track_poses(T, dtype, device)
    check_collect_params(g, poses, inside)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_collect_params_parity_big_tracks(device, dtype):
    """Many Gaussians per track: the pose-gradient reduction."""
    T = 3
    g = make_gaussians(20000, T, dtype, device, p_static=0.1, p_invalid=0.05)
    poses, inside = make_track_poses(T, dtype, device)
    inside[:] = True
    inside[1] = False
    check_collect_params(g, poses, inside)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["slerp", "nearest"])
@pytest.mark.parametrize("id_dtype", INDEX_DTYPES)
def test_collect_parity(device, dtype, mode, id_dtype):
    T = 9
    tr = make_tracks(T, 1, 10, dtype=dtype, device=device, range_dtype=id_dtype)
    g = make_gaussians(500, T, dtype, device, id_dtype)
    qt = query_times_for(tr, "mixed", avoid_keys=False)
    check_collect(g, tr, qt, mode)
    check_collect(g, tr, query_times_for(tr, broadcast=True), mode)


# --------------------------------------------------------------- gradcheck

@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_collect_params(device):
    """Only Gaussians that are not forced to opacity 0 (those get zero
    gradient by contract, not the derivative)."""
    T = 3
    g = make_gaussians(24, T, torch.float64, device, p_static=0.25, p_invalid=0.0)
    poses, inside = make_track_poses(T, torch.float64, device)
    inside[:] = True
    inputs = [g[k].clone().requires_grad_() for k in G_NAMES] + [poses.clone().requires_grad_()]
    f = lambda m, q, s, o, p: nurec_ops.collect_gaussian_parameters(m, q, s, o, g["track_ids"], p, inside)  # noqa
    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["slerp", "nearest"])
def test_gradcheck_collect(device, mode):
    T = 4
    tr = make_tracks(T, 2, 4, dtype=torch.float64, device=device)
    qt = query_times_for(tr, "inside", avoid_keys=True, avoid_midpoints=True)
    g = make_gaussians(20, T, torch.float64, device, p_invalid=0.0)
    inputs = [g[k].clone().requires_grad_() for k in G_NAMES] + [tr["key_poses"].clone().requires_grad_()]
    f = lambda m, q, s, o, kp: nurec_ops.collect(m, q, s, o, g["track_ids"], kp, tr["key_times"],  # noqa
                                                 tr["track_ranges"], qt, mode)
    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-6, rtol=1e-5)


# ------------------------------------------------------------- edge cases

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("id_dtype", INDEX_DTYPES)
def test_static_and_invalid_ids(device, dtype, id_dtype):
    """-1: static; any other id outside [0, T) (-2, T, huge, most negative) is
    static with opacity exactly 0 and exactly zero gradients."""
    T = 4
    info = torch.iinfo(id_dtype)
    bad = [-2, -3, T, T + 1, info.max, info.min, info.min + 1, info.max - 1]
    ids = torch.tensor([-1, 0, 1, 2, 3] + bad + [-1, 3], dtype=id_dtype)
    N = ids.shape[0]
    g = make_gaussians(N, T, dtype, device, id_dtype)
    g["track_ids"] = ids.to(device)
    poses, inside = make_track_poses(T, dtype, device)
    inside[:] = True
    outs, grads = check_collect_params(g, poses, inside)
    nb = slice(5, 5 + len(bad))
    assert _zero(outs[3][nb])
    assert torch.equal(outs[0][nb], g["means"][nb]), "invalid ids keep their means (treated as static)"
    qn = g["quats"][nb].double() / g["quats"][nb].double().norm(dim=-1, keepdim=True)
    assert_close(outs[1][nb], qn, dtype)
    assert_close(outs[2], g["log_scales"].double().exp(), dtype)
    st = g["track_ids"] == -1
    assert_close(outs[3][st], torch.sigmoid(g["opacity_logits"][st].double()), dtype)
    for k in G_NAMES:
        assert _zero(grads[k][nb]), k


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_tracks_outside_time_range(device, dtype):
    """Gaussians of a track with inside == False: opacity exactly 0, exactly zero
    gradients, and exactly zero pose gradient for that track."""
    T = 5
    g = make_gaussians(300, T, dtype, device, p_static=0.2, p_invalid=0.0)
    poses, inside = make_track_poses(T, dtype, device)
    inside[:] = torch.tensor([True, False, True, False, False])
    outs, grads = check_collect_params(g, poses, inside)
    for k in (1, 3, 4):
        m = g["track_ids"] == k
        assert m.any()
        assert _zero(outs[3][m])
        for name in G_NAMES:
            assert _zero(grads[name][m]), name
        assert _zero(grads["track_poses"][k])
    for k in (0, 2):
        assert (grads["track_poses"][k] != 0).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("id_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("N,T", [(0, 0), (0, 3), (5, 0), (1, 1)])
def test_empty(device, dtype, id_dtype, N, T):
    """N = 0 and / or T = 0 (ids 0..2 are then invalid: static, opacity 0)."""
    g = make_gaussians(N, T, dtype, device, id_dtype)
    if T == 0 and N:
        g["track_ids"] = torch.tensor([-1, 0, 1, -1, 2][:N], dtype=id_dtype, device=device)
    poses, inside = make_track_poses(T, dtype, device)
    outs, grads = check_collect_params(g, poses, inside)
    assert grads["track_poses"].shape == (T, 7)
    # and through collect, with an empty key set
    tr = make_tracks(T, 1, 3, dtype=dtype, device=device, range_dtype=id_dtype)
    check_collect(g, tr, query_times_for(tr, broadcast=True))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_non_contiguous_and_expanded(device, dtype):
    T = 4
    g = make_gaussians(200, T, dtype, device)
    poses, inside = make_track_poses(T, dtype, device)
    cots = [torch.randn(200, 3, dtype=dtype, device=device), torch.randn(200, 4, dtype=dtype, device=device),
            torch.randn(200, 3, dtype=dtype, device=device), torch.randn(200, dtype=dtype, device=device)]
    o0, g0 = check_collect_params(g, poses, inside, cots)
    nc = dict(
        means=g["means"].t().contiguous().t(),
        quats=torch.cat((g["quats"], g["quats"]), 1)[:, 4:],
        log_scales=g["log_scales"].t().contiguous().t(),
        opacity_logits=torch.stack((g["opacity_logits"], g["opacity_logits"]), 1)[:, 0],
        track_ids=torch.stack((g["track_ids"], g["track_ids"]), 1)[:, 1],
    )
    for k, v in nc.items():
        assert not v.is_contiguous(), k
    poses_nc = poses.t().contiguous().t()
    inside_nc = torch.stack((inside, ~inside), 1)[:, 0]
    o1, g1 = check_collect_params(nc, poses_nc, inside_nc, [c.t().contiguous().t() if c.dim() == 2 else c
                                                            for c in cots])
    for a, b in zip(o0, o1):
        assert torch.equal(a, b)
    for k in g0:
        assert_same_sum(g0[k], g1[k], k)
    # stride 0: one quaternion / scale / logit shared by all Gaussians, one track
    ex = dict(g)
    ex["quats"] = g["quats"][:1].expand(200, 4)
    ex["log_scales"] = g["log_scales"][:1].expand(200, 3)
    ex["opacity_logits"] = g["opacity_logits"][:1].expand(200)
    ex["track_ids"] = torch.zeros(1, dtype=g["track_ids"].dtype, device=device).expand(200)
    check_collect_params(ex, poses, torch.ones(1, dtype=torch.bool, device=device).expand(T),
                         [c[:1].expand_as(c) for c in cots])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_expanded_leaf_gradient(device, dtype):
    """An expanded (stride-0) leaf gets the summed gradient."""
    T = 2
    g = make_gaussians(50, T, dtype, device)
    poses, inside = make_track_poses(T, dtype, device)
    inside[:] = True
    q = g["quats"][:1].clone().requires_grad_()
    outs = nurec_ops.collect_gaussian_parameters(g["means"], q.expand(50, 4), g["log_scales"],
                                                 g["opacity_logits"], g["track_ids"], poses, inside)
    cot = torch.randn_like(outs[1])
    (gq,) = torch.autograd.grad(outs[1], q, cot)
    q64 = upcast(q).cpu().detach().requires_grad_()
    o64 = ref.collect_gaussian_parameters(upcast(g["means"]).cpu(), q64.expand(50, 4), upcast(g["log_scales"]).cpu(),
                                          upcast(g["opacity_logits"]).cpu(), g["track_ids"].cpu(),
                                          upcast(poses).cpu(), inside.cpu())
    (gq64,) = torch.autograd.grad(o64[1], q64, upcast(cot).cpu())
    assert_close(gq, gq64, dtype, 5.0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("scale", [1e30, 1e-30, 1e18, 1e-18])
@pytest.mark.parametrize("which", ["gaussians", "tracks"])
def test_huge_tiny_quaternion_norms_f32(device, scale, which):
    dtype = torch.float32
    T = 3
    g = make_gaussians(200, T, dtype, device, p_invalid=0.05)
    g["quats"] = g["quats"] / g["quats"].norm(dim=-1, keepdim=True)
    poses, inside = make_track_poses(T, dtype, device)
    inside[:] = True
    poses[:, 3:] = poses[:, 3:] / poses[:, 3:].norm(dim=-1, keepdim=True)
    cots = [torch.randn(200, n, dtype=dtype, device=device) for n in (3, 4, 3)] + [torch.randn(200, dtype=dtype,
                                                                                              device=device)]
    o1, g1 = check_collect_params(g, poses, inside, cots)
    gs, ps = dict(g), poses.clone()
    if which == "gaussians":
        gs["quats"] = g["quats"] * scale
    else:
        ps[:, 3:] *= scale
    os_, g_s = check_collect_params(gs, ps, inside, cots)
    for a, b in zip(os_, o1):
        assert_close(a, b.double(), dtype, 4)
    if which == "gaussians":
        assert_close(g_s["quats"].double() * scale, g1["quats"].double(), dtype, 4)
    else:
        assert_close(g_s["track_poses"][:, 3:].double() * scale, g1["track_poses"][:, 3:].double(), dtype, 20)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_zero_quaternion(device, dtype):
    """A zero Gaussian or track quaternion normalizes to the identity, with
    exactly zero gradient."""
    T = 2
    g = make_gaussians(8, T, dtype, device, p_invalid=0)
    g["track_ids"] = torch.tensor([-1, 0, 1, 1, -1, 0, 1, 0], device=device)
    g["quats"][:3] = 0
    poses, inside = make_track_poses(T, dtype, device)
    inside[:] = True
    poses[1, 3:] = 0
    outs, grads = check_collect_params(g, poses, inside)
    e = torch.tensor([1.0, 0, 0, 0], dtype=torch.float64)
    assert_close(outs[1][0], e, dtype)
    assert _zero(grads["quats"][:3])
    assert _zero(grads["track_poses"][1, 3:])
    # track 1 has the identity rotation: means_w = means + t
    m1 = g["track_ids"] == 1
    assert_close(outs[0][m1], (g["means"][m1] + poses[1, :3]).double(), dtype)
    # Gaussian 2 (zero quat) on track 1 (zero quat): identity
    assert_close(outs[1][2], e, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_saturated_logits(device, dtype):
    T = 2
    g = make_gaussians(6, T, dtype, device, p_invalid=0)
    g["track_ids"] = torch.tensor([-1, -1, 0, 0, 1, 1], device=device)
    g["opacity_logits"] = torch.tensor([-200.0, 200.0, -1e4, 1e4, -50.0, 50.0], dtype=dtype, device=device)
    poses, inside = make_track_poses(T, dtype, device)
    inside[:] = True
    outs, grads = check_collect_params(g, poses, inside)
    assert ((outs[3] >= 0) & (outs[3] <= 1)).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_pose_semantics(device, dtype):
    """Explicit check of the formulas: a 90 degree turn about z plus a shift."""
    g = make_gaussians(2, 1, dtype, device, p_invalid=0)
    g["means"] = torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]], dtype=dtype, device=device)
    g["quats"] = torch.tensor([[2.0, 0, 0, 0], [2.0, 0, 0, 0]], dtype=dtype, device=device)
    g["track_ids"] = torch.tensor([-1, 0], device=device)
    h = 2 ** -0.5
    poses = torch.tensor([[10.0, 20.0, 30.0, 3 * h, 0, 0, 3 * h]], dtype=dtype, device=device)
    inside = torch.tensor([True], device=device)
    outs, _ = check_collect_params(g, poses, inside)
    assert_close(outs[0], torch.tensor([[1.0, 2.0, 3.0], [8.0, 21.0, 33.0]], dtype=torch.float64), dtype)
    assert_close(outs[1], torch.tensor([[1.0, 0, 0, 0], [h, 0, 0, h]], dtype=torch.float64), dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["slerp", "nearest"])
def test_collect_outside_tracks_zero_key_grad(device, dtype, mode):
    """Through collect: keys of tracks queried outside their time range, and
    keys no query uses, get exactly zero gradient."""
    T = 6
    tr = make_tracks(T, 2, 6, dtype=dtype, device=device, gap=True)
    qt = query_times_for(tr, "inside", avoid_keys=True)
    kt = tr["key_times"].cpu()
    for k in (1, 4):
        s, c = tr["starts"][k], tr["counts"][k]
        qt[k] = int(kt[s]) - 5 if k == 1 else int(kt[s + c - 1]) + 5
    g = make_gaussians(400, T, dtype, device, p_static=0.1, p_invalid=0.05)
    outs, grads = check_collect(g, tr, qt, mode)
    gk = grads["key_poses"]
    used = torch.zeros(gk.shape[0], dtype=torch.bool)
    for k in range(T):
        if k in (1, 4):
            continue
        s, c = tr["starts"][k], tr["counts"][k]
        used[s:s + c] = True
    assert _zero(gk.cpu()[~used]), "keys of tracks outside their range / unused keys must get exactly 0"
    for k in (1, 4):
        m = g["track_ids"] == k
        assert _zero(outs[3][m])
        for name in G_NAMES:
            assert _zero(grads[name][m])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_gradients_accumulate_camera_plus_lidar(device, dtype):
    """Two collects of the same leaves at two query times (camera + lidar);
    the summed loss's gradients match the reference's."""
    T = 5
    tr = make_tracks(T, 1, 8, dtype=dtype, device=device)
    g = make_gaussians(300, T, dtype, device)
    q_cam = query_times_for(tr, "mixed", avoid_keys=False)
    q_lid = query_times_for(tr, "mixed", avoid_keys=False)
    leaves = {k: g[k].clone().requires_grad_() for k in G_NAMES}
    kp = tr["key_poses"].clone().requires_grad_()
    rest = (tr["key_times"], tr["track_ranges"])
    w = [torch.randn(300, n, dtype=dtype, device=device) for n in (3, 4, 3, 1)]
    v = [torch.randn(300, n, dtype=dtype, device=device) for n in (3, 4, 3, 1)]

    def loss(fn, L, k, ids, times, q1, q2, w, v):
        a = fn(*[L[n] for n in G_NAMES], ids, k, *times, q1)
        b = fn(*[L[n] for n in G_NAMES], ids, k, *times, q2)
        return sum((x.reshape(300, -1) * c).sum() for x, c in zip(a, w)) + \
            sum((x.reshape(300, -1) * c).sum() ** 2 * 1e-3 for x, c in zip(b, v))

    loss(nurec_ops.collect, leaves, kp, g["track_ids"], rest, q_cam, q_lid, w, v).backward()
    L64 = {k: upcast(x).cpu().detach().requires_grad_() for k, x in leaves.items()}
    kp64 = upcast(kp).cpu().detach().requires_grad_()
    loss(ref.collect, L64, kp64, g["track_ids"].cpu(), [x.cpu() for x in rest], q_cam.cpu(), q_lid.cpu(),
         [upcast(c).cpu() for c in w], [upcast(c).cpu() for c in v]).backward()
    for k in G_NAMES:
        assert_close(leaves[k].grad, L64[k].grad, dtype, 5.0, k)
    assert_close(kp.grad, kp64.grad, dtype, 20.0, "key_poses")


@pytest.mark.parametrize("device", DEVICES)
def test_keyword_arguments(device):
    T = 3
    tr = make_tracks(T, 1, 4, device=device)
    g = make_gaussians(20, T, device=device)
    qt = query_times_for(tr)
    a = nurec_ops.collect(means=g["means"], quats=g["quats"], log_scales=g["log_scales"],
                          opacity_logits=g["opacity_logits"], track_ids=g["track_ids"], key_poses=tr["key_poses"],
                          key_times=tr["key_times"], track_ranges=tr["track_ranges"], query_times=qt, mode="slerp")
    poses, inside = nurec_ops.interpolate_track_poses(tr["key_poses"], tr["key_times"], tr["track_ranges"], qt)
    b = torch.ops.nurec_ops.collect_gaussian_parameters(
        means=g["means"], quats=g["quats"], log_scales=g["log_scales"], opacity_logits=g["opacity_logits"],
        track_ids=g["track_ids"], track_poses=poses, track_inside=inside)
    for x, y in zip(a, b):
        assert torch.equal(x, y)
