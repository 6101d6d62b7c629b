"""SPEC section 8 (per-Gaussian outputs for densification) on the camera
rasterizer, and the gsplat drop-in front end (nurec_ops.gsplat): the meta
values, the means2d gradient against the reference, gsplat's own
DefaultStrategy densifying and pruning on our meta in a short training loop
(CPU, gsplat from PyPI), actors' track ids following their Gaussians
through split, clone and prune, and clear errors for what we do not do."""
import math

import pytest
import torch

import nurec_ops
from nurec_ops.gsplat import rasterization
from nurec_ops.reference import composite

import importlib

import test_rasterize_camera as tc
from conftest import DEVICES, gpu
from tolerances import assert_close
from op_cases import meta_formula

ref_camera = importlib.import_module("nurec_ops.reference.rasterize_camera")


def _scene(N=120, C=2, W=32, H=24):
    s = tc.random_scene(N=N, C=C, W=W, H=H, D=3)
    return tc.to(s, "cpu", torch.float64)


@pytest.mark.parametrize("device", DEVICES)
def test_meta_values(device):
    """means2d = the projected means, depths = camera z, radii > 0 exactly
    for the Gaussians the binning keeps, covering their opacity-aware ellipse."""
    s = tc.to(tc.random_scene(N=150, C=2, W=32, H=24), device, torch.float64, grad=False)
    r, d, a, meta = tc.run(lambda *x, **k: nurec_ops.rasterize_camera(*x, **k, return_meta=True), s)
    V, K = s["viewmats"], s["Ks"]
    p = torch.einsum("cij,nj->cni", V[:, :3, :3], s["means"]) + V[:, None, :3, 3]
    uv = torch.stack((K[:, 0, 0, None] * p[..., 0] / p[..., 2] + K[:, 0, 2, None],
                      K[:, 1, 1, None] * p[..., 1] / p[..., 2] + K[:, 1, 2, None]), -1)
    front = p[..., 2] > 0.01
    assert_close(meta.means2d[front], uv[front], torch.float64)
    assert_close(meta.depths, p[..., 2], torch.float64)
    assert meta.radii.dtype == torch.int32 and meta.radii.shape == (2, 150, 2)
    kept = (meta.radii > 0).all(-1)
    assert kept.any() and not kept.all()
    assert not kept[~front].any()
    # every pixel a kept Gaussian reaches lies within its radii of its mean
    out = torch.ops.nurec_ops.rasterize_camera_fwd(s["means"], s["quats"], s["scales"], s["opacities"],
                                                   s["features"], V, K, None, 32, 24, 0.01, 1e10, -1, 0, 1, 0)
    assert torch.equal(kept, out[4] > 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("tensor_cell", [False, True])
def test_splat_meta_op(device, dtype, tensor_cell):
    """nurec_ops::splat_meta (one pass over a forward's records) against the
    formula, with dropped items, cells of a lidar's size, and an extent
    past int32 (saturates); opcheck clean."""
    g = torch.Generator().manual_seed(0)
    C, N = 2, 300
    rec = torch.rand(C, N, 8, generator=g, dtype=torch.float64)
    rec[..., 2] += 0.1
    rec[..., 4] += 0.1
    rec[..., 3] = (rec[..., 3] - 0.5) * 0.1
    rec[..., 7] = rec[..., 7] * 10
    rec[0, 0, 2:5] = torch.tensor([1e-20, 0.0, 1e-20], dtype=torch.float64)  # a huge ellipse
    counts = torch.randint(0, 3, (C, N), generator=g)
    counts[0, 0] = 1
    cell = torch.tensor([0.0017, 0.006], dtype=torch.float64) if tensor_cell else torch.tensor([1.0, 1.0])
    rec, counts, cellt = rec.to(device, dtype), counts.to(device), cell.to(device, dtype)
    args = (rec, counts, cellt, 1.0, 1.0) if tensor_cell else (rec, counts, None, 1.0, 1.0)
    m2d, radii, depths = torch.ops.nurec_ops.splat_meta(*args)
    em, er, ed = meta_formula(rec, counts, cellt)
    assert torch.equal(m2d, em) and torch.equal(depths, ed)
    assert radii.dtype == torch.int32 and radii[0, 0, 0] == 2 ** 31 - 1
    close = (radii - er).abs() <= 1  # float32 rounding may move a ceil by one
    assert close.all() and (radii == er).float().mean() > 0.99
    assert (radii[counts == 0] == 0).all()
    torch.library.opcheck(torch.ops.nurec_ops.splat_meta.default, args)


def _meta_scene(sensor, device, dtype):
    """A small scene in which some Gaussians are kept and, whatever the
    draw, one is dropped by every sensor (opacity 0, below 1/255)."""
    if sensor == "camera":
        s = tc.to(tc.random_scene(N=150, C=2, W=40, H=24), device, dtype, grad=False)
    else:
        s = tl.to(tl.random_scene(N=120, C=2, D=2), device, dtype, grad=False)
    s["opacities"] = s["opacities"].detach().clone()
    s["opacities"][0] = 0.0
    return s


def _forward_with_meta(sensor, s, meta):
    """A small scene's forward op outputs with or without meta, the cell
    size its radii are in (None: the camera's pixel; the lidar's mean
    spacing), and the op overload and arguments that gave them."""
    from nurec_ops._lidar_table import cell_size

    if sensor == "camera":
        op, cell = torch.ops.nurec_ops.rasterize_camera_fwd.default, None
        args = (s["means"], s["quats"], s["scales"], s["opacities"], s["features"], s["viewmats"], s["Ks"], None,
                40, 24, 0.01, 1e10, -1, 0, 1, 1 << 18, 0, None, 0, None, meta)
    else:
        op, args = torch.ops.nurec_ops.rasterize_lidar_fwd.default, tl.fwd_op_args(s, 0, 1, 1 << 18)
        cell = cell_size(args[6], args[7])  # the canonical table's rows and columns
        args = args + (None, None, meta, cell if meta else None)
    return op(*args), cell, op, args


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("sensor", ["camera", "lidar"])
def test_forward_meta_is_splat_meta_of_its_records(sensor, device, dtype):
    """The forward ops' meta=True (their projection writes SPEC 8's meta)
    is bit for bit nurec_ops::splat_meta of the forward's own records and
    counts, for both rasterizers and precisions; meta=False gives none of
    it (no rows), and asking for it changes no other output."""
    s = _meta_scene(sensor, device, dtype)
    with_meta, cell, op, args = _forward_with_meta(sensor, s, True)
    plain = _forward_with_meta(sensor, s, False)[0]
    records, counts = with_meta[3], with_meta[4]
    expect = torch.ops.nurec_ops.splat_meta(records, counts, cell, 1.0, 1.0)
    assert (counts > 0).any() and (counts == 0).any()
    for name, got, want in zip(("means2d", "radii", "depths"), with_meta[-3:], expect):
        assert got.shape == want.shape and got.dtype == want.dtype, name
        assert torch.equal(got, want), name
    assert [tuple(t.shape) for t in plain[-3:]] == [(0, 0, 2), (0, 0, 2), (0, 0)]
    assert len(plain) == len(with_meta)
    for k in range(5):  # the images, the records and the counts
        assert torch.equal(plain[k], with_meta[k]), k
    if dtype == torch.float64:  # the schema, fake kernel and autograd registration with meta
        torch.library.opcheck(op, args)


def test_lidar_forward_meta_needs_its_cell():
    s = tl.to(tl.random_scene(N=20, C=1, D=2), "cpu", torch.float64, grad=False)
    with pytest.raises(RuntimeError, match="`meta` needs `meta_cell`"):
        torch.ops.nurec_ops.rasterize_lidar_fwd(*tl.fwd_op_args(s, 0, 1, 1 << 16), None, None, True, None)


def _means2d_grad_reference(s, cot, absgrad=False):
    """d loss / d (projected means) of the reference render, with the 2D
    means as free variables (conics, depths and colours held); with absgrad
    also SPEC 8's absgrad: the sum over pixels of |d loss_pixel / d means2d|,
    one backward per pixel."""
    C, N = s["viewmats"].shape[0], s["means"].shape[0]
    W, H = s["width"], s["height"]
    R, t = s["viewmats"][:, :3, :3], s["viewmats"][:, :3, 3]
    z_all = (torch.einsum("cij,nj->cni", R, s["means"]) + t[:, None, :])[..., 2]
    valid = (z_all > 0.01) & (z_all < 1e10)
    with torch.no_grad():
        uv, conic, z = ref_camera.project(s["means"], s["quats"], s["scales"], s["viewmats"], s["Ks"], valid, W, H)
    uv = uv.clone().requires_grad_(True)
    col = s["features"][None].expand(C, N, 3)
    idx = torch.arange(N, dtype=torch.float64)[None].expand(C, N)
    o, v2, uv_s, conic_s, z_s, col_s, idx_s = composite.sort_front_to_back(z, valid, s["opacities"].detach(), uv,
                                                                           conic, z, col, idx)
    px = torch.arange(W, dtype=torch.float64) + 0.5
    py = torch.arange(H, dtype=torch.float64) + 0.5
    dx = px[None, None, :, None] - uv_s[:, None, None, :, 0]
    dy = py[None, :, None, None] - uv_s[:, None, None, :, 1]
    w, T = composite.weights(dx, dy, conic_s, o, v2)
    render = torch.einsum("chwn,cnd->chwd", w, col_s)
    if s.get("backgrounds") is not None:
        render = render + T * s["backgrounds"].detach()[:, None, None, :]
    depth = torch.einsum("chwn,cn->chw", w, z_s)[..., None]
    per_pixel = ((render * cot[0]).sum(-1) + (depth * cot[1]).sum(-1) + ((1 - T) * cot[2]).sum(-1)).flatten()
    return _grad_and_absgrad(per_pixel, uv, absgrad)


def _grad_and_absgrad(per_cell, leaf, absgrad):
    """The gradient of per_cell.sum() with respect to leaf, and with absgrad
    the sum over cells of each cell's |gradient|."""
    (g,) = torch.autograd.grad(per_cell.sum(), leaf, retain_graph=absgrad)
    if not absgrad:
        return g
    ab = torch.zeros_like(leaf)
    for k in range(per_cell.numel()):
        (gk,) = torch.autograd.grad(per_cell[k], leaf, retain_graph=True)
        ab += gk.abs()
    return g, ab


def test_means2d_grad_matches_reference():
    s = _scene()
    s["backgrounds"] = torch.rand(2, 3, dtype=torch.float64, requires_grad=True)
    r, d, a, meta = tc.run(lambda *x, **k: nurec_ops.rasterize_camera(*x, **k, return_meta=True,
                                                                      means2d_grad=True), s)
    cot = [torch.randn_like(r), torch.randn_like(d) * 0.1, torch.randn_like(a)]
    torch.autograd.backward([r, d, a], cot)
    assert meta.means2d.grad is not None and meta.means2d.grad.shape == (2, 120, 2)
    expect = _means2d_grad_reference(s, cot)
    kept = (meta.radii > 0).all(-1)
    assert_close(meta.means2d.grad[kept], expect[kept], torch.float64, factor=10)
    assert (meta.means2d.grad[~kept] == 0).all()
    # the leaf holds the projected means, as without means2d_grad
    with torch.no_grad():
        plain = tc.run(lambda *x, **k: nurec_ops.rasterize_camera(*x, **k, return_meta=True), s).meta
    assert meta.means2d.is_leaf and torch.equal(meta.means2d.detach(), plain.means2d)
    # the other gradients are the op's usual ones
    s2 = dict(s)
    for k in tc.GRAD_KEYS + ("backgrounds",):
        s2[k] = s[k].detach().clone().requires_grad_(True)
    out = tc.run(nurec_ops.rasterize_camera, s2)
    torch.autograd.backward(list(out), cot)
    for k in tc.GRAD_KEYS + ("backgrounds",):
        assert s[k].grad is not None and torch.allclose(s[k].grad, s2[k].grad), k


@pytest.mark.parametrize("device", DEVICES)
def test_absgrad_matches_reference(device):
    """SPEC 8's absgrad (gsplat's): per camera and Gaussian, the sum over
    pixels of |d loss_pixel / d means2d|, against the reference pixel by
    pixel; it bounds |means2d.grad| and differs from it where pixels pull a
    mean both ways. The means2d gradient is unchanged by asking for it."""
    s = tc.to(tc.random_scene(N=40, C=2, W=16, H=12, D=3), "cpu", torch.float64)
    cpu_s = {k: (v.detach().clone() if isinstance(v, torch.Tensor) else v) for k, v in s.items()}
    s = tc.to({k: (v.detach().clone() if isinstance(v, torch.Tensor) else v) for k, v in s.items()}, device,
              torch.float64)
    r, d, a, meta = tc.run(lambda *x, **k: nurec_ops.rasterize_camera(*x, **k, return_meta=True, means2d_grad=True,
                                                                      absgrad=True), s)
    g = torch.Generator().manual_seed(1)
    cot = [torch.randn(r.shape, generator=g, dtype=r.dtype), torch.randn(d.shape, generator=g, dtype=r.dtype) * 0.1,
           torch.randn(a.shape, generator=g, dtype=r.dtype)]
    torch.autograd.backward([r, d, a], [c.to(device) for c in cot])
    ab = meta.means2d.absgrad
    assert ab is not None and ab.shape == (2, 40, 2) and ab.dtype == torch.float64
    expect_g, expect_ab = _means2d_grad_reference(cpu_s, cot, absgrad=True)
    kept = (meta.radii > 0).all(-1).cpu()
    assert_close(meta.means2d.grad.cpu()[kept], expect_g[kept], torch.float64, factor=10)
    assert_close(ab.cpu()[kept], expect_ab[kept], torch.float64, factor=10)
    assert (ab.cpu()[~kept] == 0).all()
    assert (ab >= meta.means2d.grad.abs() - 1e-12).all()
    assert (ab > meta.means2d.grad.abs() * 1.01 + 1e-9).any()  # a sum of |.| is not |sum|


def test_absgrad_needs_means2d_grad_and_one_pass():
    s = _scene(N=20)
    with pytest.raises(RuntimeError, match="`absgrad=True` needs `means2d_grad=True`"):
        tc.run(lambda *x, **k: nurec_ops.rasterize_camera(*x, **k, return_meta=True, absgrad=True), s)
    s5 = dict(s, features=torch.rand(20, 5, dtype=torch.float64, requires_grad=True), backgrounds=None)
    with pytest.raises(RuntimeError, match="absgrad.*at most 4 feature channels"):
        tc.run(lambda *x, **k: nurec_ops.rasterize_camera(*x, **k, return_meta=True, means2d_grad=True,
                                                          absgrad=True), s5)


def test_front_end_modes_and_meta():
    s = _scene()
    args = (s["means"], s["quats"], s["scales"], s["opacities"], s["features"], s["viewmats"], s["Ks"],
            s["width"], s["height"])
    r, d, a = tc.run(nurec_ops.rasterize_camera, s)
    for mode, expect in (("RGB", r), ("D", d), ("ED", d / a.clamp(min=1e-10)), ("RGB+D", torch.cat((r, d), -1)),
                         ("RGB+ED", torch.cat((r, d / a.clamp(min=1e-10)), -1))):
        out, alpha, meta = rasterization(*args, packed=False, render_mode=mode)
        assert_close(out, expect, torch.float64, msg=mode)
        assert_close(alpha, a, torch.float64)
    for key in ("means2d", "radii", "depths", "width", "height", "n_cameras", "gaussian_ids"):
        assert key in meta
    assert meta["n_cameras"] == 2 and meta["gaussian_ids"] is None and meta["width"] == s["width"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("C", [1, 3])
@pytest.mark.parametrize("absgrad,sh", [(False, None), (True, None), (False, 2), (True, 1)])
def test_front_end_per_camera_colors(absgrad, sh, C, device):
    """gsplat's per-camera colors [C, N, 3] (its appearance module's) or
    SH coefficients [C, N, K, 3]: the images, alphas and gradients of each
    camera rendered with its own colours, and meta.means2d a [C, N, 2] leaf
    whose .grad (and .absgrad) are each camera's, as DefaultStrategy reads
    them."""
    s = tc.to(_scene(N=120, C=C), device, torch.float64, grad=False)
    N = 120
    shape = (C, N, 3) if sh is None else (C, N, (sh + 1) ** 2, 3)
    colors = (torch.rand(shape, dtype=torch.float64, device=device) - 0.3).requires_grad_(True)
    leaves = {k: s[k].detach().clone().requires_grad_(True) for k in ("means", "quats", "scales", "opacities")}
    bg = torch.rand(C, 3, dtype=torch.float64, device=device)
    cot = torch.randn(C, s["height"], s["width"], 3, dtype=torch.float64, device=device)
    out, alpha, meta = rasterization(leaves["means"], leaves["quats"], leaves["scales"], leaves["opacities"],
                                     colors, s["viewmats"], s["Ks"], s["width"], s["height"], packed=False,
                                     backgrounds=bg, absgrad=absgrad, sh_degree=sh)
    assert out.shape == (C, s["height"], s["width"], 3) and meta["means2d"].shape == (C, N, 2)
    (out * cot).sum().backward()
    grads = {k: v.grad for k, v in leaves.items()}
    for c in range(C):  # camera c alone, with its own colours, through the op
        one = {k: v.detach().clone().requires_grad_(True) for k, v in leaves.items()}
        col = colors[c].detach().clone().requires_grad_(True)
        r, d, a, m = nurec_ops.rasterize_camera(one["means"], one["quats"], one["scales"], one["opacities"], col,
                                                s["viewmats"][c:c + 1], s["Ks"][c:c + 1], s["width"], s["height"],
                                                backgrounds=bg[c:c + 1], return_meta=True, means2d_grad=True,
                                                absgrad=absgrad, sh_degree=sh)
        (r * cot[c:c + 1]).sum().backward()
        assert_close(out[c:c + 1], r, torch.float64, msg=f"camera {c}")
        assert_close(alpha[c:c + 1], a, torch.float64)
        assert_close(colors.grad[c], col.grad, torch.float64)
        assert_close(meta["means2d"][c], m.means2d[0].detach(), torch.float64)
        assert_close(meta["means2d"].grad[c], m.means2d.grad[0], torch.float64)
        if absgrad:
            assert_close(meta["means2d"].absgrad[c], m.means2d.absgrad[0], torch.float64)
        assert torch.equal(meta["radii"][c], m.radii[0])
        for k in grads:
            grads[k] = grads[k] - one[k].grad
    for k, g in grads.items():  # the Gaussians' gradients are the cameras' sums
        assert_close(g, torch.zeros_like(g), torch.float64, msg=k)


def test_default_strategy_on_per_camera_colors():
    """DefaultStrategy grows and prunes on the meta of per-camera colors
    (an appearance module's [C, N, 3]), as on [N, 3]."""
    strategy_mod = pytest.importorskip("gsplat.strategy")
    params = _actor_params()
    strategy = strategy_mod.DefaultStrategy(refine_start_iter=2, refine_stop_iter=10, refine_every=3,
                                            reset_every=1000, grow_grad2d=1e-6, prune_opa=0.05, verbose=False)
    counts = _train_with(strategy, params, 20, dict(packed=False), per_camera=True)
    assert max(counts) > counts[0], counts


def test_front_end_antialiased():
    """rasterize_mode="antialiased" is the op's antialiased mode (which
    renders differently from the classic one), and meta leaves out gsplat's
    compensated opacities rather than give them uncompensated."""
    s = _scene()
    args = (s["means"], s["quats"], s["scales"], s["opacities"], s["features"], s["viewmats"], s["Ks"],
            s["width"], s["height"])
    r, d, a = tc.run(lambda *x, **k: nurec_ops.rasterize_camera(*x, **k, antialiased=True), s)
    r0 = tc.run(nurec_ops.rasterize_camera, s)[0]
    assert (r - r0).abs().max() > 1e-2  # the compensation darkens small Gaussians
    out, alpha, meta = rasterization(*args, packed=False, rasterize_mode="antialiased")
    assert_close(out, r, torch.float64)
    assert_close(alpha, a, torch.float64)
    assert "opacities" not in meta
    assert "opacities" in rasterization(*args, packed=False)[2]


def test_front_end_eps2d_is_the_ops():
    """gsplat's eps2d reaches the op: the front end's images with
    eps2d = 0.1 are rasterize_camera's with eps2d = 0.1, and not its 0.3's."""
    s = _scene(N=120, C=2)
    args = (s["means"], s["quats"], s["scales"], s["opacities"], s["features"], s["viewmats"], s["Ks"], s["width"],
            s["height"])
    out = rasterization(*args, packed=False, eps2d=0.1)[0]
    assert_close(out, nurec_ops.rasterize_camera(*args, eps2d=0.1)[0], torch.float64)
    assert (out - nurec_ops.rasterize_camera(*args)[0]).abs().max() > 1e-3


@pytest.mark.parametrize("eps2d", [0.3, 0.1, 1.0])
def test_antialiased_opacity_is_gsplats(eps2d):
    """The antialiased records' opacity against gsplat's own compensation
    (its pure-PyTorch projection, gsplat.cuda._torch_impl, on the CPU):
    o sqrt(det(Sigma_2d) / det(Sigma_2d + eps2d I)) for every item kept,
    Gaussians from tiny (compensation ~0) to large (~1); and the records'
    conic gsplat's, for gsplat's eps2d (0.3, its default, and others)."""
    ti = pytest.importorskip("gsplat.cuda._torch_impl")
    s = tc.to(tc.random_scene(N=300, C=2, W=48, H=32), "cpu", torch.float64, grad=False)
    s["scales"] = s["scales"] * torch.exp(torch.empty(300, 1, dtype=torch.float64).uniform_(-4, 1))
    covars = nurec_ops.quat_scale_to_covar_preci(s["quats"], s["scales"], compute_preci=False, triu=False)[0]
    _, _, _, _, comp = ti._fully_fused_projection(s["means"], covars, s["viewmats"], s["Ks"], s["width"],
                                                  s["height"], eps2d=eps2d, calc_compensations=True)
    conics = ti._fully_fused_projection(s["means"], covars, s["viewmats"], s["Ks"], s["width"], s["height"],
                                        eps2d=eps2d)[3]
    out = torch.ops.nurec_ops.rasterize_camera_fwd(s["means"], s["quats"], s["scales"], s["opacities"],
                                                   s["features"], s["viewmats"], s["Ks"], None, s["width"],
                                                   s["height"], 0.01, 1e10, -1, 0, 1, 0, antialiased=True,
                                                   eps2d=eps2d)
    records, counts = out[3], out[4]
    kept = counts > 0
    assert kept.sum() > 50 and comp[kept].min() < 0.1 and comp[kept].max() > 0.5
    assert_close(records[..., 5][kept], (s["opacities"][None] * comp)[kept], torch.float64)
    assert_close(records[..., 2:5][kept], conics[kept], torch.float64)
    # the 1/255 cut follows the compensated opacity: items kept without it
    # whose o rho falls below 1/255 are dropped
    classic = torch.ops.nurec_ops.rasterize_camera_fwd(s["means"], s["quats"], s["scales"], s["opacities"],
                                                       s["features"], s["viewmats"], s["Ks"], None, s["width"],
                                                       s["height"], 0.01, 1e10, -1, 0, 1, 0, eps2d=eps2d)[4] > 0
    cut = classic & (s["opacities"][None] * comp < 1 / 255)
    assert cut.any() and not kept[cut].any()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("packed", [False, True])
def test_front_end_radius_clip(device, packed):
    """gsplat's radius_clip: the (camera, Gaussian) items whose radii without
    the clip are both <= it are dropped (radii 0, no means2d gradient); every
    other item keeps its meta; and each camera's image is the one its kept
    Gaussians alone render. A clip <= 0 drops none, as in gsplat."""
    s = tc.to(tc.random_scene(N=200, C=2, W=48, H=32), device, torch.float64, grad=False)
    s["scales"] = s["scales"] * torch.exp(torch.empty(200, 1, dtype=torch.float64).uniform_(-3, 1)).to(device)
    args = [s[k] for k in ("means", "quats", "scales", "opacities", "features", "viewmats", "Ks")]
    W, H = s["width"], s["height"]
    full = rasterization(*args, W, H, packed=False)
    radii = full[2]["radii"]
    big = radii.amax(-1)[(radii > 0).all(-1)]
    clip = float(big.double().median()) + 0.5  # a whole radius and a half: no rounding at the cut
    dropped = (radii > 0).all(-1) & (radii <= clip).all(-1)
    assert dropped.sum() > 20 and ((radii > clip).any(-1)).sum() > 20
    leaf = [a.clone().requires_grad_() for a in args[:5]]
    out, alpha, meta = rasterization(*leaf, *args[5:], W, H, packed=packed, radius_clip=clip)
    out.sum().backward()
    if packed:  # the packed items are the unclipped call's kept items less the dropped ones
        kept = (radii > 0).all(-1) & ~dropped
        assert torch.equal(meta["camera_ids"] * 200 + meta["gaussian_ids"], kept.flatten().nonzero()[:, 0])
        assert torch.equal(meta["radii"], radii[kept])
    else:
        assert torch.equal(meta["radii"], torch.where(dropped[..., None], 0, radii))
        assert (meta["means2d"].grad[dropped] == 0).all()
    for c in range(2):  # each camera's image from its kept Gaussians alone
        keep = ~dropped[c]
        alone = nurec_ops.rasterize_camera(*[a[keep] for a in args[:5]], args[5][c:c + 1], args[6][c:c + 1], W, H)
        assert_close(out[c:c + 1], alone[0], torch.float64)
        assert_close(alpha[c:c + 1], alone[2], torch.float64)
    for none in (0.0, -1.0):
        assert torch.equal(rasterization(*args, W, H, packed=False, radius_clip=none)[0], full[0])


@pytest.mark.parametrize("kw,name", [(dict(packed=False, rasterize_mode="mip"), "rasterize_mode"),
                                     (dict(packed=False, camera_model="kannala"), "camera_model"),
                                     (dict(packed=False, sparse_grad=True), "sparse_grad")])
def test_front_end_refuses_what_it_does_not_do(kw, name):
    s = _scene(N=10)
    with pytest.raises(NotImplementedError, match=f"`{name}="):
        rasterization(s["means"], s["quats"], s["scales"], s["opacities"], s["features"], s["viewmats"], s["Ks"],
                      s["width"], s["height"], **kw)


@pytest.mark.parametrize("shape,sh", [((2, 10, 3), None), ((2, 10, 4, 3), 1), ((3, 10, 4, 3), None),
                                      ((2, 10, 3), 1), ((2, 9, 4, 3), 1), ((9, 3), None), ((10,), None),
                                      ((10, 3), 0)])
def test_front_end_refuses_colors_it_cannot_place(shape, sh):
    """colors whose rows are neither the N Gaussians nor the C cameras' N
    (scene: C = 3, N = 10), a 4-D colors without sh_degree, or [N, D]
    colours with sh_degree (gsplat asserts SH [N, K, 3] there): an error
    naming `colors`, never a silent broadcast or an ignored sh_degree."""
    s = _scene(N=10, C=3)
    with pytest.raises(NotImplementedError, match="`colors="):
        rasterization(s["means"], s["quats"], s["scales"], s["opacities"], torch.rand(shape, dtype=torch.float64),
                      s["viewmats"], s["Ks"], s["width"], s["height"], packed=False, sh_degree=sh)


def _same_sums(got, want, device, name):
    """Two runs' sums: bit for bit on the CPU; on CUDA the tiles' and
    cameras' float atomics add in any order, so to the float64 tolerance."""
    if device == "cpu":
        assert torch.equal(got, want), name
    else:
        assert_close(got, want, torch.float64, msg=name)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("absgrad", [False, True])
@pytest.mark.parametrize("colors", ["shared", "sh_per_camera"])
def test_packed_meta_is_the_kept_items_of_the_unpacked(absgrad, colors, device):
    """packed=True (gsplat's default): the same images, and meta packed as
    gsplat packs it: camera_ids, gaussian_ids the items with radii > 0 (in
    camera-major order), batch_ids 0, means2d, radii, depths, opacities
    their rows of the unpacked meta, and means2d.grad (absgrad) the unpacked
    gradient's rows; also for SH coefficients per camera, a call of the op a
    camera whose means2d gradients reach the packed leaf through two relays."""
    s = tc.to(_scene(N=120, C=3), device, torch.float64, grad=False)
    s["opacities"] = s["opacities"].detach().clone()
    s["opacities"][0] = 0.0  # below 1/255: dropped by every camera, so that packing leaves items out
    sh = None
    if colors == "sh_per_camera":
        sh = 1
        s["features"] = torch.rand(3, 120, 4, 3, dtype=torch.float64, device=device)
    cot = torch.randn(3, s["height"], s["width"], 3, dtype=torch.float64, device=device)
    got = {}
    for packed in (False, True):
        leaves = {k: s[k].detach().clone().requires_grad_(True) for k in ("means", "quats", "scales", "opacities",
                                                                           "features")}
        out, alpha, meta = rasterization(leaves["means"], leaves["quats"], leaves["scales"], leaves["opacities"],
                                         leaves["features"], s["viewmats"], s["Ks"], s["width"], s["height"],
                                         packed=packed, absgrad=absgrad, sh_degree=sh)
        (out * cot).sum().backward()
        got[packed] = out, alpha, meta, {k: v.grad for k, v in leaves.items()}
    (out0, alpha0, m0, g0), (out1, alpha1, m1, g1) = got[False], got[True]
    assert torch.equal(out0, out1) and torch.equal(alpha0, alpha1)
    def same(got, want, name):
        _same_sums(got, want, device, name)

    for k in g0:
        same(g1[k], g0[k], k)
    keep = (m0["radii"] > 0).all(-1)
    cam, gid = keep.nonzero(as_tuple=True)
    assert 0 < cam.numel() < keep.numel() and torch.equal(m1["camera_ids"], cam) and torch.equal(m1["gaussian_ids"], gid)
    for k in ("radii", "depths", "opacities"):
        assert torch.equal(m1[k], m0[k][cam, gid]), k
    assert torch.equal(m1["means2d"], m0["means2d"].detach()[cam, gid])
    assert torch.equal(m1["batch_ids"], torch.zeros_like(cam)) and m0["batch_ids"] is None
    assert m1["means2d"].is_leaf
    same(m1["means2d"].grad, m0["means2d"].grad[cam, gid], "means2d.grad")
    if absgrad:
        same(m1["means2d"].absgrad, m0["means2d"].absgrad[cam, gid], "means2d.absgrad")
    assert m1["n_cameras"] == 3 and m0["gaussian_ids"] is None


_G_KEYS = ("means", "quats", "scales", "opacities", "features")


def _batch_of_scenes(batch, device, C=2, N=50, colors="shared"):
    """prod(batch) scenes of their own (Gaussians and cameras), stacked behind
    the batch dimensions as gsplat takes them."""
    B = math.prod(batch)
    scenes = [tc.to(tc.random_scene(N=N, C=C, W=20, H=14, D=3), device, torch.float64, grad=False) for _ in range(B)]
    for sc in scenes:
        sc["opacities"] = sc["opacities"].detach().clone()
        sc["opacities"][0] = 0.0  # dropped by every camera: packing leaves items out
        if colors == "sh_per_camera":
            sc["features"] = torch.rand(C, N, 4, 3, dtype=torch.float64, device=device)
    stacked = {k: torch.stack([sc[k].detach() for sc in scenes]).reshape(batch + scenes[0][k].shape)
               for k in _G_KEYS + ("viewmats", "Ks")}
    return scenes, stacked


def _render(inputs, packed, absgrad, sh, cot):
    """rasterization of `inputs` with fresh leaves, its loss backpropagated:
    outputs, meta and the leaves' gradients."""
    leaves = {k: inputs[k].detach().clone().requires_grad_(True) for k in _G_KEYS}
    out, alpha, meta = rasterization(*(leaves[k] for k in _G_KEYS), inputs["viewmats"], inputs["Ks"], 20, 14,
                                     packed=packed, absgrad=absgrad, sh_degree=sh,
                                     backgrounds=inputs.get("backgrounds"))
    ((out * cot).sum() + alpha.square().sum()).backward()
    return out, alpha, meta, {k: v.grad for k, v in leaves.items()}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("batch", [(2,), (2, 2)])
@pytest.mark.parametrize("absgrad,colors", [(False, "shared"), (True, "shared"), (True, "sh_per_camera")])
def test_front_end_batch_dims_are_each_elements_call(batch, absgrad, colors, device):
    """gsplat's batch dimensions: means [..., N, 3], viewmats [..., C, 4, 4]
    and every other per-element input (here backgrounds too) behind them
    render as each element alone: images [..., C, H, W, 3], alphas, meta's
    radii, depths, opacities [..., C, N, ...] and means2d [..., C, N, 2] a
    leaf whose .grad (and .absgrad) are each element's, the inputs'
    gradients each element's; meta's n_batches is prod(batch). Packed:
    batch_ids, camera_ids, gaussian_ids are the kept items over the
    flattened batch, their rows and gradients the unpacked ones'."""
    scenes, stacked = _batch_of_scenes(batch, device, colors=colors)
    B, C = len(scenes), 2
    for sc in scenes:
        sc["backgrounds"] = torch.rand(C, 3, dtype=torch.float64, device=device)
    stacked["backgrounds"] = torch.stack([sc["backgrounds"] for sc in scenes]).reshape(batch + (C, 3))
    sh = 1 if colors == "sh_per_camera" else None
    g = torch.Generator().manual_seed(5)
    cots = torch.randn((B, C, 14, 20, 3), generator=g, dtype=torch.float64).to(device)
    out, alpha, meta, grads = _render(stacked, False, absgrad, sh, cots.reshape(batch + (C, 14, 20, 3)))
    assert out.shape == batch + (C, 14, 20, 3) and alpha.shape == batch + (C, 14, 20, 1)
    assert meta["n_batches"] == B and meta["n_cameras"] == C and meta["batch_ids"] is None
    m2d = meta["means2d"]
    assert m2d.is_leaf and m2d.shape == batch + (C, 50, 2) and meta["radii"].shape == batch + (C, 50, 2)

    def same(got, want, name):
        _same_sums(got, want, device, name)
    flat = lambda t: t.reshape((B,) + t.shape[len(batch):])  # noqa: E731
    for b, sc in enumerate(scenes):
        o, a, m, gr = _render(sc, False, absgrad, sh, cots[b])
        assert torch.equal(flat(out)[b], o) and torch.equal(flat(alpha)[b], a)
        for k in ("radii", "depths", "opacities"):
            assert torch.equal(flat(meta[k])[b], m[k]), k
        assert torch.equal(flat(m2d.detach())[b], m["means2d"].detach())
        same(flat(m2d.grad)[b], m["means2d"].grad, "means2d.grad")
        if absgrad:
            same(flat(m2d.absgrad)[b], m["means2d"].absgrad, "means2d.absgrad")
        for k in _G_KEYS:
            same(flat(grads[k])[b], gr[k], k)
    _, _, pm, pgrads = _render(stacked, True, absgrad, sh, cots.reshape(batch + (C, 14, 20, 3)))
    keep = (flat(meta["radii"]) > 0).all(-1)
    ids = keep.nonzero(as_tuple=True)
    assert 0 < ids[0].numel() < keep.numel() and (ids[0] > 0).any()
    for name, want in zip(("batch_ids", "camera_ids", "gaussian_ids"), ids):
        assert torch.equal(pm[name], want), name
    for k in ("radii", "depths", "opacities"):
        assert torch.equal(pm[k], flat(meta[k])[keep]), k
    assert pm["means2d"].is_leaf and torch.equal(pm["means2d"], flat(m2d.detach())[keep])
    same(pm["means2d"].grad, flat(m2d.grad)[keep], "packed means2d.grad")
    if absgrad:
        same(pm["means2d"].absgrad, flat(m2d.absgrad)[keep], "packed means2d.absgrad")
    for k in _G_KEYS:
        same(pgrads[k], grads[k], k)


@pytest.mark.parametrize("name,arg,bad", [("viewmats", "viewmats", lambda v: v[0]), ("Ks", "Ks", lambda v: v[:1]),
                                          ("quats", "quats", lambda v: v[0]), ("features", "colors", lambda v: v[0])])
def test_front_end_batch_dims_must_agree(name, arg, bad):
    """An input without the batch dimensions means has (or with others): an
    error naming the argument, never a broadcast."""
    _, st = _batch_of_scenes((2,), "cpu")
    st[name] = bad(st[name])
    with pytest.raises(RuntimeError, match=f"`{arg}`"):
        rasterization(*(st[k] for k in _G_KEYS), st["viewmats"], st["Ks"], 20, 14)
    _, st = _batch_of_scenes((2,), "cpu")
    with pytest.raises(RuntimeError, match="no element"):  # an empty batch: nothing to stack, said so
        rasterization(*(st[k][:0] for k in _G_KEYS), st["viewmats"][:0], st["Ks"][:0], 20, 14)


@pytest.mark.parametrize("device", DEVICES)
def test_front_end_sparse_grad(device):
    """gsplat's sparse_grad (packed): means, quats and scales get COO
    gradients of one entry per Gaussian some camera kept, whose dense form is
    the dense call's gradient; opacities' and colours' stay dense and equal;
    torch.optim.SparseAdam steps on them and moves only those rows."""
    s = tc.to(_scene(N=80), device, torch.float64, grad=False)
    s["opacities"] = s["opacities"].detach().clone()
    s["opacities"][:5] = 0.0  # dropped by every camera: rows with no gradient
    keys = ("means", "quats", "scales", "opacities", "features")
    cot = torch.randn(2, s["height"], s["width"], 3, dtype=torch.float64, device=device)
    got = {}
    for sparse in (False, True):
        leaves = {k: s[k].detach().clone().requires_grad_(True) for k in keys}
        out, _, meta = rasterization(*(leaves[k] for k in keys), s["viewmats"], s["Ks"], s["width"], s["height"],
                                     sparse_grad=sparse)
        (out * cot).sum().backward()
        got[sparse] = leaves, meta
    (dense, _), (sparse, meta) = got[False], got[True]
    kept = torch.unique(meta["gaussian_ids"])
    assert 0 < kept.numel() <= 75
    for k in keys:
        g = sparse[k].grad
        if k in ("means", "quats", "scales"):
            assert g.is_sparse and g._nnz() == kept.numel(), k  # one row each (.grad may drop the flag)
            assert torch.equal(g.coalesce().indices()[0], kept), k
            g = g.to_dense()
        else:
            assert not g.is_sparse, k
        _same_sums(g, dense[k].grad, device, k)
    before = sparse["means"].detach().clone()
    torch.optim.SparseAdam([sparse["means"]], lr=1e-2).step()
    moved = (sparse["means"].detach() != before).any(-1)
    assert moved[kept].any() and not moved[~torch.isin(torch.arange(80, device=device), kept)].any()


def test_front_end_segmented_is_ignored():
    """gsplat's `segmented` picks its radix sort: nothing to do here, the same
    images and meta."""
    s = _scene(N=40)
    args = (s["means"], s["quats"], s["scales"], s["opacities"], s["features"], s["viewmats"], s["Ks"], s["width"],
            s["height"])
    (o0, a0, m0), (o1, a1, m1) = (rasterization(*args, packed=False, segmented=v) for v in (False, True))
    assert torch.equal(o0, o1) and torch.equal(a0, a1) and torch.equal(m0["radii"], m1["radii"])


def test_packed_with_colors_per_camera():
    """colors [C, N, D] are one op call (features per camera): packed=True
    packs its meta as for [N, D] colours."""
    s = _scene(N=40, C=2)
    colors = torch.rand(2, 40, 3, dtype=torch.float64)
    args = (s["means"], s["quats"], s["scales"], s["opacities"], colors, s["viewmats"], s["Ks"], s["width"],
            s["height"])
    out0, _, m0 = rasterization(*args, packed=False)
    out1, _, m1 = rasterization(*args)
    keep = (m0["radii"] > 0).all(-1)
    assert torch.equal(out0, out1) and torch.equal(m1["gaussian_ids"], keep.nonzero(as_tuple=True)[1])


@pytest.mark.parametrize("absgrad", [False, True])
def test_default_strategy_packed_decides_as_unpacked(absgrad):
    """gsplat's DefaultStrategy told packed=True (its packed branch reads
    gaussian_ids and the packed means2d gradient) grows and prunes exactly
    as told packed=False on the unpacked meta: the same state (each
    Gaussian's accumulated gradient norm, visibility count and radius)
    after every step, and the same Gaussians, bit for bit, after a
    densifying run."""
    strategy_mod = pytest.importorskip("gsplat.strategy")
    runs, states = [], ([], [])
    for packed in (False, True):
        params = _actor_params()
        strategy = strategy_mod.DefaultStrategy(refine_start_iter=2, refine_stop_iter=10, refine_every=3,
                                                reset_every=1000, grow_grad2d=1e-6 if not absgrad else 1e-5,
                                                prune_opa=0.05, absgrad=absgrad, verbose=False)
        counts = _train_with(strategy, params, 14, dict(packed=packed), absgrad=absgrad, states=states[packed])
        runs.append((counts, {k: v.detach().clone() for k, v in params.items()}))
    (c0, p0), (c1, p1) = runs
    assert c0 == c1 and max(c0) > c0[0], (c0, c1)
    assert any(s["grad2d"].unique().numel() > 1 for s in states[0])  # per Gaussian: a wrong id would show
    for step, (s0, s1) in enumerate(zip(*states)):
        for k in s0:
            assert torch.equal(s0[k], s1[k]), (step, k)
    for k in p0:
        assert torch.equal(p0[k], p1[k]), k


def _camera_cases(s, C):
    """(name, gsplat's camera arguments, the fused op's SPEC 6 / 7 arguments
    that mean the same) for a scene's cameras: OpenCV distortion, fisheye,
    FTheta, a rolling shutter, and an FTheta rig with a rolling shutter."""
    w = pytest.importorskip("gsplat.cuda._wrapper")
    dt = torch.float64
    radial = torch.tensor([[0.05, -0.01, 0.0, 0.001, 0.0, 0.0]] * C, dtype=dt)
    tang = torch.tensor([[1e-3, -2e-3]] * C, dtype=dt)
    cases = [
        ("opencv", dict(radial_coeffs=radial, tangential_coeffs=tang, with_ut=True),
         dict(camera_model="opencv", radial=radial, tangential=tang, thin_prism=torch.zeros(C, 4, dtype=dt))),
        ("fisheye", dict(camera_model="fisheye", radial_coeffs=radial[:, :4], with_ut=True),
         dict(camera_model="fisheye", radial=radial[:, :4], max_angle=torch.full((C,), math.pi, dtype=dt))),
    ]
    f = float(s["Ks"][0, 0, 0])
    ft = w.FThetaCameraDistortionParameters(
        reference_poly=w.FThetaPolynomialType.ANGLE_TO_PIXELDIST, pixeldist_to_angle_poly=(0.0, 1 / f, 0, 0, 0, 0),
        angle_to_pixeldist_poly=(0.0, f, -0.5, 0.1, 0.0, 0.0), max_angle=1.3, linear_cde=(1.0, 1e-3, 2e-3))
    ftheta = dict(camera_model="ftheta", principal_point=s["Ks"][:, :2, 2].to(dt) - 0.5,
                  angle_to_pixel=torch.tensor([[0.0, f, -0.5, 0.1, 0.0, 0.0]] * C, dtype=dt),
                  linear_cde=torch.tensor([[1.0, 1e-3, 2e-3]] * C, dtype=dt),
                  max_angle=torch.full((C,), 1.3, dtype=dt))
    cases.append(("ftheta", dict(camera_model="ftheta", ftheta_coeffs=ft, with_ut=True), ftheta))
    V1 = s["viewmats"].clone()
    V1[:, :3, 3] += torch.tensor([0.2, 0.0, 0.1], dtype=V1.dtype)
    rs = w.RollingShutterType.ROLLING_LEFT_TO_RIGHT
    cases.append(("rolling", dict(rolling_shutter=rs, viewmats_rs=V1, with_ut=True),
                  dict(viewmats_end=V1, shutter="left_to_right")))
    V2 = s["viewmats"].clone()
    V2[:, :3, 3] += torch.tensor([0.0, 0.3, -0.2], dtype=V2.dtype)
    cases.append(("ftheta_rolling",
                  dict(camera_model="ftheta", ftheta_coeffs=ft, rolling_shutter=w.RollingShutterType.ROLLING_TOP_TO_BOTTOM,
                       viewmats_rs=V2, with_ut=True),
                  dict(ftheta, viewmats_end=V2, shutter="top_to_bottom")))
    return cases


def _front_end_quietly(*args, **kw):
    """The front end's call, its one EWA warning (SPEC 6) allowed."""
    with pytest.warns(UserWarning, match="EWA") if not nurec_ops.gsplat._WARNED else _nothing():
        return rasterization(*args, **kw)


def test_front_end_camera_models_and_rolling_shutter():
    """gsplat's camera arguments (distortion, fisheye, FTheta, rolling
    shutter; gsplat's own FThetaCameraDistortionParameters and
    RollingShutterType) mean what the fused op's SPEC 6 / 7 arguments mean:
    the front end's images equal direct calls, with colours [N, D] and
    the same given per camera [C, N, D]."""
    s = _scene(N=60)
    C = 2
    args = (s["means"], s["quats"], s["scales"], s["opacities"], s["features"], s["viewmats"], s["Ks"],
            s["width"], s["height"])
    d = lambda *a, **k: tc.run(lambda *x, **kk: nurec_ops.rasterize_camera(*x, **kk, **k), s)  # noqa: E731
    for name, theirs, ours in _camera_cases(s, C):
        out, alpha, meta = _front_end_quietly(*args, packed=False, **theirs)
        expect = d(**ours)
        assert_close(out, expect[0], torch.float64, msg=name)
        assert_close(alpha, expect[2], torch.float64)
        assert not torch.equal(out, d()[0])  # the camera arguments changed the image
        # the same colours given per camera: each camera's arguments taken from its own row
        per_camera = args[:4] + (s["features"][None].expand(C, -1, -1).contiguous(),) + args[5:]
        assert_close(rasterization(*per_camera, packed=False, **theirs)[0], out, torch.float64)


def _reference_means2d_grad(s, cot, ours, monkeypatch):
    """d loss / d means2d from the reference twin under any camera model and
    shutter: the projected means it composites (SPEC 7: each at its
    Gaussian's own time) kept with their gradient, as gsplat keeps its
    means2d, by a spy on the reference's depth sort, which receives them
    in Gaussian order."""
    seen = {}
    real = composite.sort_front_to_back

    def spy(z, valid, o, uv, *rest):
        uv.retain_grad()
        seen["uv"] = uv
        return real(z, valid, o, uv, *rest)

    leaf = {k: s[k].detach().clone().requires_grad_(True) for k in ("means", "quats", "scales", "opacities")}
    monkeypatch.setattr(composite, "sort_front_to_back", spy)
    r, _, a = ref_camera.rasterize_camera(leaf["means"], leaf["quats"], leaf["scales"], leaf["opacities"],
                                          s["features"].detach(), s["viewmats"], s["Ks"], s["width"], s["height"],
                                          **ours)
    monkeypatch.undo()
    ((r * cot[0]).sum() + (a * cot[1]).sum()).backward()
    return seen["uv"].grad


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", ["opencv", "fisheye", "ftheta", "rolling", "ftheta_rolling"])
def test_means2d_grad_under_camera_models_and_rolling_shutter(case, device, monkeypatch):
    """What a densifying strategy reads (meta["means2d"].grad, SPEC 8)
    through the front end under distorted cameras and rolling shutter
    (gsplat#726): each Gaussian's gradient with respect to its projected
    mean under the camera model, at its own time under a rolling shutter,
    equals the reference twin's; a Gaussian no camera keeps has none."""
    pytest.importorskip("gsplat")
    s = _scene(N=80, C=3, W=40, H=28)
    name, theirs, ours = next(c for c in _camera_cases(s, 3) if c[0] == case)
    g = torch.Generator().manual_seed(7)
    cot = [torch.randn(3, 28, 40, 3, generator=g, dtype=torch.float64),
           torch.randn(3, 28, 40, 1, generator=g, dtype=torch.float64)]
    dev = lambda t: t.to(device) if isinstance(t, torch.Tensor) else t  # noqa: E731
    mv = lambda v: {k: dev(x) for k, x in v.items()}  # noqa: E731
    args = [dev(s[k].detach()) for k in ("means", "quats", "scales", "opacities", "features", "viewmats", "Ks")]
    for t in args[:5]:
        t.requires_grad_(True)
    out, alpha, meta = _front_end_quietly(*args, s["width"], s["height"], packed=False, **mv(theirs))
    ((out * dev(cot[0])).sum() + (alpha * dev(cot[1])).sum()).backward()
    got = meta["means2d"].grad
    assert got is not None and got.shape == (3, 80, 2)
    expect = _reference_means2d_grad(s, cot, ours, monkeypatch)
    kept = (meta["radii"] > 0).all(-1).cpu()
    assert kept.any(), "a scene whose cameras keep nothing tests nothing"
    assert_close(got.cpu()[kept], expect[kept], torch.float64, factor=10, msg=name)
    assert (got.cpu()[~kept] == 0).all()
    assert expect[kept].abs().max() > 1e-6  # the loss reaches the kept means


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


# --------------------------------------- gsplat's DefaultStrategy on our meta

def _actor_scene(g, n_per=60, tracks=3):
    """Gaussians in disjoint boxes, one per track id (-1: the background box
    and tracks 0..tracks-1), 3 m apart: a Gaussian's id must match its box."""
    means, ids = [], []
    for k in range(-1, tracks):
        c = torch.tensor([3.0 * k, 0.0, 0.0], dtype=torch.float64)
        means.append(c + (torch.rand(n_per, 3, generator=g, dtype=torch.float64) - 0.5) * 0.8)
        ids.append(torch.full((n_per,), k, dtype=torch.int64))
    return torch.cat(means), torch.cat(ids)


def _box_of(means):
    return torch.round(means[:, 0] / 3.0).long()


def _actor_params(N_per=60, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    means, ids = _actor_scene(g, n_per=N_per)
    N = means.shape[0]
    torch.manual_seed(seed)
    values = {"means": means.float(), "scales": torch.full((N, 3), math.log(0.08)), "quats": torch.randn(N, 4),
              "opacities": torch.logit(torch.rand(N) * 0.5 + 0.3), "colors": torch.rand(N, 3), "track_ids": ids}
    return torch.nn.ParameterDict({k: torch.nn.Parameter(v.to(device), requires_grad=k != "track_ids")
                                   for k, v in values.items()})


def _train_with(strategy, params, steps, post_kw, absgrad=False, per_camera=False, states=None, rig=None):
    """A short loop on nurec_ops.gsplat's rasterization with a gsplat
    strategy; checks shapes and track ids after every step; returns the
    Gaussian counts (and appends the strategy's state after each step to
    ``states``, if given). per_camera: the colours per camera ([C, N, 3],
    two tints of the Gaussians' own, as an appearance module would give).
    rig: (viewmats, Ks, the front end's camera arguments) in place of two
    plain pinholes."""
    optimizers = {k: torch.optim.Adam([params[k]], lr=1e-2) for k in ("means", "scales", "quats", "opacities",
                                                                       "colors")}
    strategy.check_sanity(params, optimizers)
    state = strategy.initialize_state()
    dev = params["means"].device
    if rig is None:
        V, K = tc.cameras(2, 48, 32, f=40.0, dist=9.0)
        rig = (V.float(), K.float(), {})
    V, K, cam = (rig[0].to(dev), rig[1].to(dev), rig[2])
    target = torch.rand(V.shape[0], 32, 48, 3, generator=torch.Generator().manual_seed(3)).to(dev)
    counts = [params["means"].shape[0]]
    for step in range(steps):
        colors = params["colors"]
        if per_camera:
            colors = colors[None] * torch.tensor([[[1.0, 0.9, 0.8]], [[0.8, 0.9, 1.0]]], device=dev)
        out, alpha, info = rasterization(params["means"], params["quats"], torch.exp(params["scales"]),
                                         torch.sigmoid(params["opacities"]), colors, V, K, 48, 32,
                                         packed=post_kw.get("packed", False), absgrad=absgrad, **cam)
        loss = (out - target).abs().mean()
        strategy.step_pre_backward(params, optimizers, state, step, info)
        loss.backward()
        if absgrad:
            assert info["means2d"].absgrad.shape == info["means2d"].grad.shape
        strategy.step_post_backward(params, optimizers, state, step, info, **post_kw)
        if states is not None:
            states.append({k: v.clone() for k, v in state.items() if isinstance(v, torch.Tensor)})
        for opt in optimizers.values():
            opt.step()
            opt.zero_grad(set_to_none=True)
        n = params["means"].shape[0]
        counts.append(n)
        assert all(v.shape[0] == n for v in params.values())
        for k, v in state.items():
            if isinstance(v, torch.Tensor) and k != "binoms":  # MCMC's binomial table is not per Gaussian
                assert v.shape[0] == n, (k, v.shape)
        assert torch.equal(params["track_ids"].data, _box_of(params["means"].data)), f"ids desynchronised at {step}"
    return counts


def test_default_strategy_densifies_on_our_meta():
    """gsplat's DefaultStrategy (pure Python, CPU) runs its pre/post backward
    steps on nurec_ops.gsplat's meta in a training loop: Gaussians are split
    or cloned and pruned as it decides, its state keeps one entry per
    Gaussian, and actors' track ids (a non-trainable parameter, as a
    NuRec-style model keeps them) follow their Gaussians: every Gaussian's
    id still names the box it lies in."""
    strategy_mod = pytest.importorskip("gsplat.strategy")
    params = _actor_params()
    N = params["means"].shape[0]
    params["faint"] = torch.nn.Parameter(torch.arange(N) % 6 == 0, requires_grad=False)  # to be pruned
    with torch.no_grad():
        params["opacities"][params["faint"]] = math.log(0.01 / 0.99)  # below prune_opa
    strategy = strategy_mod.DefaultStrategy(refine_start_iter=2, refine_stop_iter=10, refine_every=3,
                                            reset_every=1000, grow_grad2d=1e-6, prune_opa=0.05, verbose=False)
    counts = _train_with(strategy, params, 30, dict(packed=False))
    assert max(counts) > N, counts  # it grew (split / clone)
    assert not params["faint"].any() and N // 6 > 0  # and pruned the faint ones


def test_default_strategy_with_absgrad():
    """DefaultStrategy(absgrad=True) reads meta.means2d.absgrad (SPEC 8),
    grows on it, and actors keep their ids."""
    strategy_mod = pytest.importorskip("gsplat.strategy")
    params = _actor_params()
    strategy = strategy_mod.DefaultStrategy(refine_start_iter=2, refine_stop_iter=10, refine_every=3,
                                            reset_every=1000, grow_grad2d=1e-5, absgrad=True, verbose=False)
    counts = _train_with(strategy, params, 20, dict(packed=False), absgrad=True)
    assert max(counts) > counts[0], counts


def test_mcmc_strategy_relocates_and_adds_on_our_meta():
    """gsplat's MCMCStrategy on nurec_ops (CPU, with the pure-PyTorch
    relocation installed by patch_gsplat_strategy_ops): dead Gaussians are
    relocated onto live ones and new ones added up to the cap; a relocated
    or added Gaussian takes the track id of the Gaussian it copies (every
    Gaussian's id still names the box it lies in)."""
    strategy_mod = pytest.importorskip("gsplat.strategy")
    from nurec_ops.gsplat import patch_gsplat_strategy_ops
    restore = patch_gsplat_strategy_ops()
    try:
        params = _actor_params()
        N = params["means"].shape[0]
        dead = torch.arange(N) % 5 == 0
        with torch.no_grad():
            params["opacities"][dead] = math.log(0.001 / 0.999)  # below min_opacity: relocated
        strategy = strategy_mod.MCMCStrategy(cap_max=N + 30, refine_start_iter=1, refine_stop_iter=20,
                                             refine_every=3, min_opacity=0.005, verbose=False)
        counts = _train_with(strategy, params, 16, dict(lr=1e-5))
        assert counts[-1] == N + 30 and counts[4] == int(N * 1.05), counts  # 5% per refinement, up to the cap
        assert (torch.sigmoid(params["opacities"].data) > 0.005).all()  # the dead were relocated
    finally:
        restore()


def _ftheta_rolling_rig(C=3):
    """A rig of C FTheta cameras (one polynomial, gsplat's
    FThetaCameraDistortionParameters, strongly distorted at the rim) around
    the actors' boxes, each with a top-to-bottom rolling shutter whose end
    pose has moved 0.4 m: (viewmats, Ks, the front end's camera arguments)."""
    w = pytest.importorskip("gsplat.cuda._wrapper")
    V, K = tc.cameras(C, 48, 32, f=40.0, dist=9.0)
    V, K = V.float(), K.float()
    V_end = V.clone()
    V_end[:, :3, 3] += torch.tensor([0.4, 0.0, 0.0])
    ft = w.FThetaCameraDistortionParameters(
        reference_poly=w.FThetaPolynomialType.ANGLE_TO_PIXELDIST, pixeldist_to_angle_poly=(0.0, 1 / 40.0, 0, 0, 0, 0),
        angle_to_pixeldist_poly=(0.0, 40.0, -4.0, 0.5, 0.0, 0.0), max_angle=1.4, linear_cde=(1.0, 0.0, 0.0))
    return V, K, dict(camera_model="ftheta", ftheta_coeffs=ft, with_ut=True, viewmats_rs=V_end,
                      rolling_shutter=w.RollingShutterType.ROLLING_TOP_TO_BOTTOM)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["default", "default_absgrad", "mcmc"])
def test_strategies_on_ftheta_rolling_rig(kind, device):
    """gsplat's DefaultStrategy (with and without absgrad) and MCMCStrategy
    densify through the front end on an FTheta rig with rolling shutter
    (gsplat#726): the statistics they gather from meta (means2d.grad or
    .absgrad, radii, width, height, n_cameras) under the camera model make
    them grow, prune and relocate as on pinholes, the state keeps one row a
    Gaussian, and actors keep their track ids."""
    strategy_mod = pytest.importorskip("gsplat.strategy")
    V, K, cam = _ftheta_rolling_rig()
    cam = dict(cam, viewmats_rs=cam["viewmats_rs"].to(device))
    params = _actor_params(device=device)
    N = params["means"].shape[0]
    states = []
    if kind == "mcmc":
        from nurec_ops.gsplat import patch_gsplat_strategy_ops
        restore = patch_gsplat_strategy_ops()
        try:
            dead = torch.arange(N, device=device) % 5 == 0
            with torch.no_grad():
                params["opacities"][dead] = math.log(0.001 / 0.999)
            strategy = strategy_mod.MCMCStrategy(cap_max=N + 30, refine_start_iter=1, refine_stop_iter=20,
                                                 refine_every=3, min_opacity=0.005, verbose=False)
            counts = _train_with(strategy, params, 16, dict(lr=1e-5), rig=(V, K, cam))
        finally:
            restore()
        assert counts[-1] == N + 30, counts
        assert (torch.sigmoid(params["opacities"].data) > 0.005).all()
        return
    absgrad = kind == "default_absgrad"
    params["faint"] = torch.nn.Parameter(torch.arange(N, device=device) % 6 == 0, requires_grad=False)
    with torch.no_grad():
        params["opacities"][params["faint"]] = math.log(0.01 / 0.99)
    strategy = strategy_mod.DefaultStrategy(refine_start_iter=2, refine_stop_iter=10, refine_every=3,
                                            reset_every=1000, grow_grad2d=1e-5 if absgrad else 1e-6, prune_opa=0.05,
                                            absgrad=absgrad, verbose=False)
    counts = _train_with(strategy, params, 12, dict(packed=False), absgrad=absgrad, states=states, rig=(V, K, cam))
    assert max(counts) > N, counts  # it grew on the distorted, rolling cameras' gradients
    assert not params["faint"].any()  # and pruned the faint ones
    first = states[0]
    assert first["count"].max() <= V.shape[0] and (first["count"] > 0).any()  # seen by up to C cameras
    assert (first["grad2d"] > 0).any()


def test_patch_installs_fused_covariance(seed):
    """patch_gsplat_strategy_ops installs nurec_ops' fused covariance op
    where MCMCStrategy's noise injection finds it (gsplat.strategy.ops,
    called as gsplat calls it): the reference's values, every flag and
    triu, float64; restore() puts gsplat's own back."""
    gops = pytest.importorskip("gsplat.strategy.ops")
    from nurec_ops.gsplat import patch_gsplat_strategy_ops
    from nurec_ops.reference import quat_scale_to_covar_preci as reference
    own = gops.quat_scale_to_covar_preci
    restore = patch_gsplat_strategy_ops()
    try:
        assert gops.quat_scale_to_covar_preci is nurec_ops.quat_scale_to_covar_preci
        g = torch.Generator().manual_seed(seed)
        quats = torch.randn(50, 4, generator=g, dtype=torch.float64)
        scales = torch.rand(50, 3, generator=g, dtype=torch.float64) + 0.01
        for covar, preci in ((True, False), (False, True), (True, True)):
            for triu in (False, True):
                got = gops.quat_scale_to_covar_preci(quats, scales, compute_covar=covar, compute_preci=preci, triu=triu)
                want = reference(quats, scales, covar, preci, triu)
                for a, e in zip(got, want):
                    assert (a is None) == (e is None)
                    if e is not None:
                        assert_close(a, e, torch.float64)
    finally:
        restore()
    assert gops.quat_scale_to_covar_preci is own


def test_relocation_equals_eq9():
    """compute_relocation against eq. 9 of the MCMC paper summed term by term
    (float64), and n = 1 keeps the Gaussian as it is."""
    from math import comb, sqrt

    from nurec_ops.gsplat_strategy_ops import compute_relocation
    g = torch.Generator().manual_seed(0)
    o = torch.rand(40, generator=g, dtype=torch.float64) * 0.98 + 0.01
    s = torch.rand(40, 3, generator=g, dtype=torch.float64) + 0.1
    n = torch.randint(1, 52, (40,), generator=g)
    n[0] = 1
    new_o, new_s = compute_relocation(o, s, n, torch.zeros(51, 51))
    for i in range(40):
        k_n = int(n[i])
        on = 1 - (1 - float(o[i])) ** (1 / k_n)
        den = sum(comb(a - 1, k) * (-1) ** k * on ** (k + 1) / sqrt(k + 1) for a in range(1, k_n + 1) for k in range(a))
        assert abs(float(new_o[i]) - on) < 1e-12
        assert torch.allclose(new_s[i], s[i] * float(o[i]) / den, rtol=1e-9)
    assert torch.allclose(new_o[0], o[0]) and torch.allclose(new_s[0], s[0])


# ------------------------------------------------------------ the lidar's meta

import test_rasterize_lidar as tl  # noqa: E402
from nurec_ops.rasterize_lidar import default_eps2d  # noqa: E402

ref_lidar = importlib.import_module("nurec_ops.reference.rasterize_lidar")


def test_lidar_meta_and_means2d_grad():
    """The lidar's meta: means2d = (azimuth, elevation) of the means, depths =
    ranges, radii > 0 exactly for the kept Gaussians; means2d.grad against the
    reference with the 2D means as free variables (conics, ranges and
    features held), azimuth differences wrapped as the op wraps them; and
    the absgrad, ray by ray."""
    s = tl.to(tl.random_scene(N=60, C=1, D=2, row_step=16, col_step=30), "cpu", torch.float64)
    out = tl.run(lambda *a, **k: nurec_ops.rasterize_lidar(*a, **k, return_meta=True, means2d_grad=True,
                                                           absgrad=True), s)
    f, rng, a, meta = out
    cot = [torch.randn_like(f), torch.randn_like(rng) * 0.1, torch.randn_like(a)]
    torch.autograd.backward([f, rng, a], cot)
    eps2d = default_eps2d(s["column_azimuths"].shape[0])
    with torch.no_grad():
        ae, conic, r, valid = ref_lidar.project(s["means"], s["quats"], s["scales"], s["viewmats"], eps2d, 0.5, 200.0)
    kept = (meta.radii > 0).all(-1)
    assert kept.any() and not kept[~valid].any()
    assert_close(meta.means2d[valid], ae[valid], torch.float64)
    assert_close(meta.depths[valid], r[valid], torch.float64)
    ae = ae.clone().requires_grad_(True)
    C, N = ae.shape[:2]
    col = s["features"].detach()[None].expand(C, N, 2)
    o, v2, ae_s, conic_s, r_s, col_s = composite.sort_front_to_back(r, valid, s["opacities"].detach(), ae, conic, r,
                                                                    col)
    R, W = s["row_elevations"].shape[0], s["column_azimuths"].shape[0]
    ray_az = s["column_azimuths"][None, :] + s["row_azimuth_offsets"][:, None]
    ray_el = s["row_elevations"][:, None].expand(R, W)
    dx = ref_lidar.wrap(ray_az[None, :, :, None] - ae_s[:, None, None, :, 0])
    dy = ray_el[None, :, :, None] - ae_s[:, None, None, :, 1]
    w, T = composite.weights(dx, dy, conic_s, o, v2)
    per_ray = ((torch.einsum("crwn,cnd->crwd", w, col_s) * cot[0]).sum(-1)
               + (torch.einsum("crwn,cn->crw", w, r_s)[..., None] * cot[1]).sum(-1) + ((1 - T) * cot[2]).sum(-1))
    reached = per_ray.flatten() != 0  # rays no Gaussian reaches add nothing (and cost one backward each)
    expect, expect_ab = _grad_and_absgrad(per_ray.flatten()[reached], ae, absgrad=True)
    assert_close(meta.means2d.grad[kept], expect[kept], torch.float64, factor=10)
    assert_close(meta.means2d.absgrad[kept], expect_ab[kept], torch.float64, factor=10)
    assert (meta.means2d.absgrad > meta.means2d.grad.abs() * 1.01 + 1e-9).any()


@gpu
@pytest.mark.parametrize("sensor", ["camera", "lidar"])
def test_cuda_meta_matches_cpu(sensor):
    """Meta, the means2d gradient and its absgrad on CUDA (with lists cut
    into parts where they are long) equal the CPU's, for both rasterizers,
    with no host sync."""
    mod = tc if sensor == "camera" else tl
    fn = nurec_ops.rasterize_camera if sensor == "camera" else nurec_ops.rasterize_lidar
    scene = tc.random_scene(N=400, C=2, W=64, H=48) if sensor == "camera" else tl.random_scene(N=300, C=2, D=2)
    res = []
    for dev in ("cpu", "cuda"):
        # copies: on the CPU, .to() would return the scene's own tensors and make them the leaves
        s = mod.to({k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in scene.items()}, dev,
                   torch.float64)
        if dev == "cuda":
            mod.run(fn, s)  # the first call of a configuration sizes its binning (one sync)
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
        try:
            out = mod.run(lambda *a, **k: fn(*a, **k, return_meta=True, means2d_grad=True, absgrad=True), s)
            cot = [torch.ones_like(o) for o in out[:3]]
            torch.autograd.backward(list(out[:3]), cot)
        finally:
            if dev == "cuda":
                torch.cuda.set_sync_debug_mode(0)
        m = out[3]
        res.append([m.means2d.detach(), m.radii, m.depths, m.means2d.grad, m.means2d.absgrad])
    for name, a, b in zip(("means2d", "radii", "depths", "means2d.grad", "means2d.absgrad"), *res):
        if name == "radii":
            assert torch.equal(a, b.cpu()), name
        else:
            assert_close(b, a, torch.float64, factor=10, msg=name)


@gpu
def test_cuda_front_end_with_default_strategy():
    """The drop-in on CUDA: gsplat's DefaultStrategy reads our meta there too."""
    strategy_mod = pytest.importorskip("gsplat.strategy")
    s = tc.to(tc.random_scene(N=300, C=2, W=64, H=48), "cuda", torch.float32, grad=False)
    N = 300
    params = torch.nn.ParameterDict({
        "means": torch.nn.Parameter(s["means"]), "scales": torch.nn.Parameter(torch.log(s["scales"])),
        "quats": torch.nn.Parameter(s["quats"]), "opacities": torch.nn.Parameter(torch.logit(s["opacities"] * 0.9 + 0.05)),
        "colors": torch.nn.Parameter(s["features"])})
    optimizers = {k: torch.optim.Adam([v], lr=1e-3) for k, v in params.items()}
    strategy = strategy_mod.DefaultStrategy(refine_start_iter=1, refine_stop_iter=10, refine_every=2, grow_grad2d=1e-7,
                                            verbose=False)
    state = strategy.initialize_state()
    for step in range(5):
        out, alpha, info = rasterization(params["means"], params["quats"], torch.exp(params["scales"]),
                                         torch.sigmoid(params["opacities"]), params["colors"], s["viewmats"],
                                         s["Ks"], 64, 48, packed=False)
        strategy.step_pre_backward(params, optimizers, state, step, info)
        out.mean().backward()
        strategy.step_post_backward(params, optimizers, state, step, info, packed=False)
        assert info["means2d"].grad is not None and torch.isfinite(info["means2d"].grad).all()
    assert params["means"].shape[0] > N


def test_gsplat_trainer_swap_example_trains():
    """examples/gsplat_trainer_swap.py (CPU: the nurec_ops run): gsplat's
    DefaultStrategy densifies and the images get closer to the targets."""
    pytest.importorskip("gsplat.strategy")
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
    import gsplat_trainer_swap
    r = gsplat_trainer_swap.main(["--steps", "100", "--n", "200", "--width", "40", "--height", "30", "--cameras",
                                  "4", "--device", "cpu"])["nurec_ops"]
    assert r["psnr"] > r["psnr_start"] + 1.0, r
    assert r["gaussians"] != 300, r


def test_rasterizers_return_named_outputs():
    """The rasterizers' outputs are named as their op schemas name them, in
    the same positional order (render, depth, alpha / features, range,
    alpha), with meta last when asked for."""
    s = _scene(N=30)
    out = tc.run(nurec_ops.rasterize_camera, s)
    assert out._fields == ("render", "depth", "alpha")
    assert out.render is out[0] and out.depth is out[1] and out.alpha is out[2]
    out = tc.run(lambda *a, **k: nurec_ops.rasterize_camera(*a, **k, return_meta=True), s)
    assert out._fields == ("render", "depth", "alpha", "meta") and out.meta.radii.dtype == torch.int32
    sl = tl.to(tl.random_scene(N=30, C=1), "cpu", torch.float64, grad=False)
    out = tl.run(nurec_ops.rasterize_lidar, sl)
    assert out._fields == ("features", "range", "alpha") and out.features is out[0]


@gpu
@pytest.mark.parametrize("sensor,footprint", [("camera", 2.0), ("camera", 0.5), ("lidar", 1.0)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_absgrad_cuda_matches_cpu_dense(sensor, footprint, dtype):
    """absgrad where many lanes of a warp share a Gaussian (the CUDA
    backward's warp sums and vector atomics, which the small reference test
    above never reaches), on both rasterizers, float32 and float64: the CUDA
    means2d gradient and absgrad against the CPU kernel's in float64 (which
    sums each pixel's |.| one by one). The camera's scenes hold tile lists
    of several of the backward's batches of staged entries, with wide
    footprints (the warps' sums) and small ones (the few lanes' own
    atomics)."""
    import test_rasterize_lidar as tl
    from op_cases import CASES
    from test_op_registry import longest_list  # the CPU binning's longest list: the CUDA one's tiles
    torch.manual_seed(torch.initial_seed() % (1 << 31))
    if sensor == "camera":
        m, s = tc, tc.random_scene(N=6000, C=2, W=160, H=96, D=3)
        s["scales"] = s["scales"] * footprint  # 2: footprints of many pixels; 0.5: of few
        op = nurec_ops.rasterize_camera
        pinhole = next(c for c in CASES if c.name == "camera-pinhole")
        assert longest_list(pinhole, s) > 3 * 256  # the backward's batches are RC_BWD_BATCH = 256 entries
    else:
        m, s = tl, tl.random_scene(N=3000, C=2, D=2, row_step=2, col_step=3)
        op = nurec_ops.rasterize_lidar
    out, cot = {}, None
    for dev, dt in (("cuda", dtype), ("cpu", torch.float64)):
        sd = m.to(s, dev, dt)
        res = m.run(lambda *x, **k: op(*x, **k, return_meta=True, means2d_grad=True, absgrad=True), sd)
        outs, meta = res[:-1], res[-1]
        if cot is None:  # the same cotangents on both devices
            g = torch.Generator().manual_seed(2)
            cot = [torch.randn(o.shape, generator=g, dtype=torch.float64) for o in outs]
        torch.autograd.backward(list(outs), [c.to(dev, dt) for c in cot])
        out[dev] = (meta.means2d.grad.double().cpu(), meta.means2d.absgrad.double().cpu(), meta.radii.cpu())
    (gc, ac, rc), (gp, ap, rp) = out["cuda"], out["cpu"]
    kept = (rc > 0).all(-1) & (rp > 0).all(-1)
    assert kept.sum() > 1000, "the scene keeps too few Gaussians to test the warp sums"
    tol = 1e-9 if dtype == torch.float64 else 2e-3
    for name, a, b in (("means2d.grad", gc, gp), ("absgrad", ac, ap)):
        err = (a[kept] - b[kept]).norm() / b[kept].norm().clamp_min(1e-12)
        assert err < tol, (name, err.item())
    assert (ac[kept] >= gc[kept].abs() * (1 - tol) - 1e-7).all()


@pytest.mark.parametrize("absgrad", [False, True])
def test_means2d_grad_output_is_the_records_first_two(absgrad):
    """The camera backward op's grad_means2d (SPEC 8's means2d gradient,
    written [C, N, 2] contiguous by the projection backward, so that the
    leaf's AccumulateGrad takes it without copying a strided view of the
    records) is the first two values of each item's gradient record, bit
    for bit, with or without absgrad's wider rows; [0, 0, 2] where not
    asked for, the other outputs unchanged."""
    torch.manual_seed(torch.initial_seed() % (1 << 31))
    s = tc.to(tc.random_scene(N=300, C=2, W=48, H=32), "cpu", torch.float64, grad=False)
    s["opacities"][0] = 1e-3  # below 1/255: dropped by every camera (a scene drew none in ~1 of 300 seeds)
    fwd = torch.ops.nurec_ops.rasterize_camera_fwd.default
    out = fwd(s["means"], s["quats"], s["scales"], s["opacities"], s["features"], s["viewmats"], s["Ks"], None,
              48, 32, 0.01, 1e10, -1, 0, 1, 1 << 20)
    o = dict(zip([a.name for a in fwd._schema.returns], out))
    C, N = s["viewmats"].shape[0], s["means"].shape[0]
    g = torch.Generator().manual_seed(3)
    cot = [torch.randn(o[k].shape, generator=g, dtype=torch.float64) for k in ("render", "depth", "alpha")]

    def bwd(m2d):
        return torch.ops.nurec_ops.rasterize_camera_bwd(
            *cot, s["means"], s["quats"], s["scales"], s["opacities"], s["features"], s["viewmats"], s["Ks"], None,
            o["records"], o["counts"], o["colors"], o["isect_items"], o["tile_ranges"], o["final_T"], o["last"],
            o["status"], o["seg_state"], o["seg_last"], 48, 32, 0.01, 1e10, -1, 1, absgrad=absgrad,
            seg_later=o["seg_later"], means2d_grad=m2d)
    with_m2d, without = bwd(True), bwd(False)
    gm2d, grec = with_m2d[-1], with_m2d[-2]
    assert gm2d.shape == (C, N, 2) and gm2d.is_contiguous() and without[-1].shape == (0, 0, 2)
    assert torch.equal(gm2d, grec.view(C, N, -1)[..., :2])
    dropped = o["counts"] <= 0
    assert dropped.any() and (~dropped).any() and (gm2d[dropped] == 0).all() and (gm2d[~dropped] != 0).any()
    for a, b in zip(with_m2d[:-1], without[:-1]):
        assert torch.equal(a, b)


@pytest.mark.parametrize("sensor", ["camera", "lidar"])
def test_means2d_grad_costs_no_copy(sensor):
    """meta.means2d.grad after backward is the op's own contiguous [C, N, 2]
    (both rasterizers, CPU): the backward with means2d_grad runs no more
    copies than the plain one (a strided view of the records made the
    leaf's AccumulateGrad copy it)."""
    from torch.profiler import ProfilerActivity, profile
    import test_rasterize_lidar as tl
    mod = tc if sensor == "camera" else tl
    fn = nurec_ops.rasterize_camera if sensor == "camera" else nurec_ops.rasterize_lidar
    s = mod.to(tc.random_scene(N=200, C=2, W=40, H=30) if sensor == "camera" else tl.random_scene(N=200, C=2, D=2),
               "cpu", torch.float64)
    copies = []
    for flags in ({}, dict(return_meta=True, means2d_grad=True)):
        out = mod.run(lambda *a, **k: fn(*a, **k, **flags), s)
        loss = sum(o.sum() for o in out[:3])
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            loss.backward()
        copies.append(sum(e.name == "aten::copy_" for e in prof.events()))
    g = out[3].means2d.grad
    assert g is not None and g.is_contiguous() and g.shape == out[3].means2d.shape
    assert copies[1] == copies[0], copies
