"""Real inputs (issue "real inputs render right"): what a new user brings
instead of our synthetic street.

- Camera: Gaussians near the camera and outside the frustum project through
  the Jacobian clamp of SPEC section 3 (3DGS / gsplat convention); parity
  with the reference, gradcheck away from the bound, and the projection of
  gsplat's garden fixture against gsplat's own pure-PyTorch projection.
- Lidar: real column tables (SPEC section 4): wrapped anywhere, either spin,
  a sector (less than a turn), uneven columns, a wrap inside a tile.
- The first call of a configuration on CUDA never returns NaN, and later
  calls do not synchronize.
"""
import importlib
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import nurec_ops
from nurec_ops import reference as ref
from nurec_ops._lidar_table import canonical_columns

import shared_data
import test_rasterize_camera as tc
import test_rasterize_lidar as tl
from conftest import DEVICES, DTYPES, gpu
from near_cuts import gradcheck_inputs
from random_scenes import random_quats
from tolerances import assert_close

ref_camera = importlib.import_module("nurec_ops.reference.rasterize_camera")  # the module, not the function

# --------------------------------------------------------- camera: the clamp


def near_camera_scene(W=40, H=30):
    """Camera 0 with Gaussians close to it (z 0.05-0.6 m) far outside its
    frustum (|x / z| up to 6, the bound is ~1.5 here), most large enough to
    reach into the image; plus ordinary ones in view. Without the clamp each
    of the close ones projects to an ellipse larger than the image."""
    g = torch.Generator().manual_seed(int(torch.initial_seed() % (1 << 31)))
    n_out, n_in = 30, 40
    z = 0.05 + 0.55 * torch.rand(n_out, generator=g, dtype=torch.float64)
    ang = torch.rand(n_out, generator=g, dtype=torch.float64) * 2 * math.pi
    ratio = 2.0 + 4.0 * torch.rand(n_out, generator=g, dtype=torch.float64)  # |(x, y)| / z
    p_out = torch.stack((ratio * z * torch.cos(ang), ratio * z * torch.sin(ang), z), -1)
    s_out = (0.05 + 0.4 * torch.rand(n_out, 1, generator=g, dtype=torch.float64)) * z[:, None] * ratio[:, None]
    s_out = s_out * torch.exp(0.3 * torch.randn(n_out, 3, generator=g, dtype=torch.float64))
    p_in = torch.stack((torch.randn(n_in, generator=g, dtype=torch.float64) * 0.6,
                        torch.randn(n_in, generator=g, dtype=torch.float64) * 0.4,
                        3 + torch.rand(n_in, generator=g, dtype=torch.float64) * 2), -1)
    s_in = torch.exp(torch.randn(n_in, 3, generator=g, dtype=torch.float64) * 0.4 - 2.5)
    pc, s = torch.cat((p_out, p_in)), torch.cat((s_out, s_in))
    V, K = tc.cameras(2, W, H)
    V[0] = tc.look_at((0.0, 0.0, -4.0))
    R, t = V[0, :3, :3], V[0, :3, 3]
    n = pc.shape[0]
    return dict(means=(pc - t) @ R, quats=random_quats(n), scales=s,
                opacities=0.3 + 0.6 * torch.rand(n, generator=g, dtype=torch.float64),
                features=torch.rand(n, 3, generator=g, dtype=torch.float64), viewmats=V, Ks=K, width=W,
                height=H, sh_degree=None, near=0.01)


def _clamped_fraction(scene):
    V, K, W, H = scene["viewmats"][:1], scene["Ks"][:1], scene["width"], scene["height"]
    p = scene["means"] @ V[0, :3, :3].T + V[0, :3, 3]
    lo_x, hi_x, lo_y, hi_y = (float(v) for v in ref_camera.jacobian_limits(K, W, H))
    u, v = p[:, 0] / p[:, 2], p[:, 1] / p[:, 2]
    return ((u < lo_x) | (u > hi_x) | (v < lo_y) | (v > hi_y)).double().mean().item()


@pytest.mark.sanitize
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_parity_near_camera_outside_frustum(device, dtype):
    scene = near_camera_scene()
    assert _clamped_fraction(scene) > 0.3  # the clamp is taken by many Gaussians
    tc.check_parity(scene, device, dtype)


def test_clamp_changes_the_image(monkeypatch):
    """The scene above is one where the clamp matters: without it (bounds at
    infinity) the reference image differs a lot, so the parity test fails on
    a rasterizer without the clamp."""
    scene = tc.to(near_camera_scene(), "cpu", torch.float64, grad=False)
    with_clamp = tc.run(ref.rasterize_camera, scene)
    inf = torch.tensor(float("inf"), dtype=torch.float64)
    monkeypatch.setattr(ref_camera, "jacobian_limits", lambda Ks, W, H: (-inf, inf, -inf, inf))
    without = tc.run(ref.rasterize_camera, scene)
    diff = (with_clamp[0][0] - without[0][0]).abs()
    # (seen: mean 0.10 and max 0.20-0.5 of colours in [0, 1] over the whole image)
    assert diff.max() > 0.1 and diff.mean() > 0.02, (diff.max(), diff.mean())


def test_gradcheck_outside_frustum():
    """Gradients through the clamped Jacobian (float64, CPU), for Gaussians
    well past the bound (where the clamp is constant) and well inside."""
    scene = near_camera_scene(W=12, H=10)
    keep = torch.cat((torch.arange(0, 30, 6), torch.arange(30, 70, 8)))
    s = {k: (v[keep] if isinstance(v, torch.Tensor) and v.shape[0] == 70 else v) for k, v in scene.items()}
    s["viewmats"], s["Ks"] = s["viewmats"][:1], s["Ks"][:1]
    s = tc.to(s, "cpu", torch.float64)
    keys = ("means", "scales")
    assert gradcheck_inputs(lambda x: tc.run(nurec_ops.rasterize_camera, x), s, keys)


def _garden(n=None, seed=0):
    """gsplat's garden fixture with gsplat's recipe for the Gaussians
    (gsplat/_helper.py), float64; a random subset of n points (None: all)."""
    d = np.load(shared_data.require(shared_data.GARDEN))
    g = torch.Generator().manual_seed(seed)
    means = torch.from_numpy(d["means3d"]).double()
    means = means[(means.abs() <= 2).all(-1)]
    if n is not None:
        means = means[torch.randperm(means.shape[0], generator=g)[:n]]
    N = means.shape[0]
    quats = torch.randn(N, 4, generator=g, dtype=torch.float64)
    return dict(means=means, quats=quats / quats.norm(dim=-1, keepdim=True),
                scales=torch.rand(N, 3, generator=g, dtype=torch.float64) * 0.02,
                opacities=torch.rand(N, generator=g, dtype=torch.float64),
                viewmats=torch.from_numpy(d["viewmats"]).double(), Ks=torch.from_numpy(d["Ks"]).double(),
                width=int(d["width"]), height=int(d["height"]))


def test_garden_projection_matches_gsplat():
    """Our projection (CPU kernels) of gsplat's garden fixture against
    gsplat's own pure-PyTorch projection (gsplat.cuda._torch_impl, which
    runs on the CPU): the same projected means and conics, to 1e-9, for
    every Gaussian in front of a camera, a quarter of which lie outside its
    frustum (where the clamp decides the conic)."""
    impl = pytest.importorskip("gsplat.cuda._torch_impl")
    s = _garden(n=None)
    C, N, W, H = s["viewmats"].shape[0], s["means"].shape[0], s["width"], s["height"]
    feats = torch.rand(N, 3, dtype=torch.float64)
    out = torch.ops.nurec_ops.rasterize_camera_fwd(s["means"], s["quats"], s["scales"], s["opacities"], feats,
                                                   s["viewmats"], s["Ks"], None, W, H, 0.01, 1e10, -1, 0, 1, 0)
    rec = out[3]  # [C, N, 8]: u, v, A, B, C, opacity, depth, threshold
    covars, _ = impl._quat_scale_to_covar_preci(s["quats"], s["scales"], compute_preci=False, triu=False)
    radii, means2d, depths, conics, _ = impl._fully_fused_projection(
        s["means"], covars, s["viewmats"], s["Ks"], W, H, eps2d=0.3, near_plane=0.01, far_plane=1e10)
    # every Gaussian in front of the camera with a conic (gsplat computes it
    # for all; its radii then cull most of those off the image, which our
    # binning does by its own bounds): our threshold >= 0 marks ours
    both = (depths > 0.01) & (rec[..., 7] >= 0)
    assert both.sum() > 0.5 * C * N
    p = torch.einsum("cij,nj->cni", s["viewmats"][:, :3, :3], s["means"]) + s["viewmats"][:, None, :3, 3]
    lo_x, hi_x, lo_y, hi_y = ref_camera.jacobian_limits(s["Ks"], W, H)
    u = p[..., 0] / p[..., 2]
    v = p[..., 1] / p[..., 2]
    outside = both & ((u < lo_x) | (u > hi_x) | (v < lo_y) | (v > hi_y))
    assert outside.sum() > 10_000  # the fixture's off-frustum Gaussians (a quarter of each view)
    torch.testing.assert_close(rec[..., :2][both], means2d[both], rtol=1e-9, atol=1e-9)
    scale = conics[both].abs().max(-1, keepdim=True).values
    torch.testing.assert_close(rec[..., 2:5][both] / scale, conics[both] / scale, rtol=1e-9, atol=1e-9)


def test_garden_antialiased_opacity_matches_gsplat():
    """gsplat's antialiased mode on its garden fixture: each item's record
    opacity (CPU kernels) equals gsplat's opacity times its compensation
    (gsplat.cuda._torch_impl on the CPU) for every item we keep."""
    impl = pytest.importorskip("gsplat.cuda._torch_impl")
    s = _garden(n=None)
    W, H = s["width"], s["height"]
    feats = torch.rand(s["means"].shape[0], 3, dtype=torch.float64)
    out = torch.ops.nurec_ops.rasterize_camera_fwd(s["means"], s["quats"], s["scales"], s["opacities"], feats,
                                                   s["viewmats"], s["Ks"], None, W, H, 0.01, 1e10, -1, 0, 1, 0,
                                                   antialiased=True)
    covars, _ = impl._quat_scale_to_covar_preci(s["quats"], s["scales"], compute_preci=False, triu=False)
    comp = impl._fully_fused_projection(s["means"], covars, s["viewmats"], s["Ks"], W, H, eps2d=0.3,
                                        near_plane=0.01, far_plane=1e10, calc_compensations=True)[4]
    kept = out[4] > 0
    assert kept.sum() > 10_000 and comp[kept].min() < 0.2
    torch.testing.assert_close(out[3][..., 5][kept], (s["opacities"][None] * comp)[kept], rtol=1e-9, atol=1e-12)


def test_garden_radius_clip_drops_what_meta_reports():
    """gsplat's radius_clip on its garden fixture (CPU kernels): with a clip
    at the kept items' median radius the items dropped are exactly those
    whose unclipped radii are both at or under it, every other item's radii
    unchanged, and each view the image of the kept items."""
    s = _garden(n=20000)
    W, H = s["width"], s["height"]
    feats = torch.rand(s["means"].shape[0], 3, dtype=torch.float64)
    args = (s["means"], s["quats"], s["scales"], s["opacities"], feats, s["viewmats"], s["Ks"], W, H)
    plain = nurec_ops.rasterize_camera(*args, return_meta=True)
    radii = plain.meta.radii
    kept = (radii > 0).all(-1)
    clip = float(radii.amax(-1)[kept].double().median()) + 0.5  # half past a whole radius: no rounding at the cut
    clipped = nurec_ops.rasterize_camera(*args, return_meta=True, radius_clip=clip)
    dropped = kept & (radii <= clip).all(-1)
    assert dropped.sum() > 0.05 * kept.sum() and (kept & ~dropped).sum() > 0.05 * kept.sum()
    assert torch.equal(clipped.meta.radii, torch.where(dropped[..., None], 0, radii))
    for c in range(radii.shape[0]):
        keep = ~dropped[c]
        alone = nurec_ops.rasterize_camera(*(a[keep] for a in args[:5]), s["viewmats"][c:c + 1], s["Ks"][c:c + 1],
                                           W, H)
        torch.testing.assert_close(clipped.render[c:c + 1], alone.render, rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------ lidar: tables


def _wrap(a):
    """Azimuths as a real sensor writes them: in (-pi, pi]."""
    return a - 2 * math.pi * torch.ceil((a - math.pi) / (2 * math.pi))


def _real_like_tables(col_step=10):
    """Column tables made from ours (every col_step-th of 3600 columns: 360),
    each as a real sensor might write it; every one is a different order or
    subset of rays."""
    el, az, off = tl.sensor(col_step=col_step)
    W = az.shape[0]
    g = torch.Generator().manual_seed(3)
    uneven = az + (torch.rand(W, generator=g, dtype=torch.float64) - 0.5) * 0.8 * (2 * math.pi / W)
    # spacing that varies ~30x round the turn: an evenly spaced guess lands up to ~0.024 W columns
    # off (9 of 360, 86 of 3600), past the column search's 4 steps, so its binary search finishes
    t = torch.arange(W, dtype=torch.float64) / W
    warped = az[0] + (az[-1] - az[0]) * W / (W - 1) * (t + 0.15 * torch.sin(2 * math.pi * t))
    return {
        "rotated-wrapped": _wrap(torch.roll(az, 137)),  # starts mid-sweep, wraps from -pi to pi inside
        "counter-clockwise": _wrap(torch.roll(az, 50).flip(0)),
        "sector": _wrap(torch.roll(az, 200 * W // 360))[:250 * W // 360],  # 250 of 360 parts: a gap
        "uneven": _wrap(torch.roll(uneven, 11)),
        "warped": _wrap(torch.roll(warped, 29)),
        # the table's seam (its jump round the circle, the last column to the first included: the
        # synthetic model's table has no jump inside) moved to column 127, inside the first tile
        "wrap-mid-tile": torch.roll(_wrap(az), 127 - int((torch.roll(_wrap(az), -1) - _wrap(az)).abs().argmax())),
    }


@pytest.mark.sanitize
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("table", list(_real_like_tables()))
def test_lidar_real_table_parity(device, dtype, table):
    """Outputs and gradients against the reference on each table (the
    reference evaluates every ray of the table as given)."""
    az = _real_like_tables()[table]
    scene = tl.random_scene(N=150, C=2, D=2)
    scene["column_azimuths"] = az
    if table == "wrap-mid-tile":  # the wrap from -pi to pi lies inside the first tile of 256 columns
        jump = (az.diff().abs() > math.pi).nonzero()
        assert jump.numel() == 1 and 0 < int(jump) < 255
    tl.check_parity(scene, device, dtype)


def _box_bounds(rec, el, az, off, tile_cols=256, rel=1e-3, pad=1e-5):
    """Per item (records [N, 8], float64; the canonical table az): the
    (row, tile) cells that some ray's alpha can reach (inside the ellipse
    d^T Q d <= thr: the fewest the binning may keep) and the cells of the
    rectangle of the rows and columns the widened ellipse spans (rl_box
    before its cut: the most). Brute force over every ray."""
    W = az.shape[0]
    tiles_x = -(-W // tile_cols)
    two_pi = 2 * math.pi
    col = az + (az < az[0]).to(az.dtype) * two_pi  # rl_canon_az: ascending
    lo_n, hi_n = [], []
    for r in rec.tolist():
        u, v, A, B, C, _, _, thr = r
        det = A * C - B * B
        if thr < 0 or not det > 0:
            lo_n.append(0)
            hi_n.append(0)
            continue
        dx = torch.remainder(col[None, :] + off[:, None] - u + math.pi, two_pi) - math.pi  # [R, W]
        dy = (el - v)[:, None]
        inside = A * dx * dx + 2 * B * dx * dy + C * dy * dy <= thr
        lo_n.append(len({(i, j // tile_cols) for i, j in inside.nonzero().tolist()}))
        e_az = math.sqrt(thr * C / det) * (1 + rel) + pad
        e_el = math.sqrt(thr * A / det) * (1 + rel) + pad
        rows = ((el - v).abs() <= e_el).nonzero().flatten()
        if rows.numel() == 0:
            hi_n.append(0)
            continue
        i0, i1 = int(rows.min()), int(rows.max())
        lo = u - float(off[rows].max()) - e_az
        L = (u - float(off[rows].min()) + e_az) - lo + 1e-9
        if L >= two_pi:
            ntx = tiles_x
        else:
            J = (torch.remainder(col - lo, two_pi) <= L).nonzero().flatten().tolist()
            if not J:
                hi_n.append(0)
                continue
            # the shortest run of columns round the table's end that holds J
            gaps = [(J[k + 1] - J[k], k) for k in range(len(J) - 1)] + [(J[0] + W - J[-1], len(J) - 1)]
            g, k = max(gaps)
            ja, jb = (J[0], J[-1]) if k == len(J) - 1 else (J[k + 1], J[k])
            t0, t1 = ja // tile_cols, jb // tile_cols
            ntx = min(tiles_x, t1 - t0 + 1 if ja <= jb else tiles_x - t0 + t1 + 1)
        hi_n.append((i1 - i0 + 1) * ntx)
    return torch.tensor(lo_n), torch.tensor(hi_n)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("table", list(_real_like_tables()))
def test_lidar_tile_boxes_on_real_tables(device, table):
    """Each Gaussian's count of tile entries on each real-like table lies
    between the cells its rays reach (fewer: a ray's alpha lost) and the
    rectangle of the rows and columns its widened ellipse spans (more: a
    column search that ran past its range). Brute force over every ray."""
    scene = tl.random_scene(N=80, C=1, D=1, col_step=1)  # 16 rows x 3600 columns: 15 tiles a row
    scene["scales"] = scene["scales"] * 2
    scene["scales"][:10] *= 3  # rectangles past the cut's 64 cells too
    scene["column_azimuths"] = az = _real_like_tables(col_step=1)[table]
    # those ten in front of the table's middle column (azimuth atan2(y, x) from the identity sweep), so
    # that a sector's gap cannot hide them all (seed 222 did: no rectangle past 64 cells was drawn)
    m = scene["means"][:10]
    r, a = m[:, :2].norm(dim=-1), az[az.shape[0] // 2] + (torch.rand(10, dtype=torch.float64) - 0.5) * 0.2
    scene["means"][:10, 0], scene["means"][:10, 1] = r * torch.cos(a), r * torch.sin(a)
    s = tl.to(scene, device, torch.float64, grad=False)
    out = tl.OPS.rasterize_lidar_fwd(*tl.fwd_op_args(s, 0, 512, 1 << 16))
    rec, counts = out[3][0].cpu(), out[4][0].cpu()
    el, az, _, off = (t.cpu() for t in tl.sensor_op_args(*[s[k] for k in tl.SENSOR_KEYS]))
    fewest, most = _box_bounds(rec, el, az, off)
    assert int((fewest > 0).sum()) > 20
    assert (counts >= fewest).all(), (counts - fewest).min()
    assert (counts <= most).all(), (counts - most).max()
    assert (counts < most).any()  # the cut
    assert (most > 64).any()  # cells the cut does not reach (tiles.h): an excess column shows there


def _widest_step_at(az, k):
    """Table az (one turn, ascending) with the step before column k widened
    by 1% at the expense of the others: the canonical table starts there."""
    W = az.shape[0]
    step = (az[-1] - az[0]) / (W - 1)
    a = az[0] + step * 0.99 * torch.arange(W, dtype=az.dtype)
    a[k:] += step * 0.01 * (W - 1)
    return _wrap(a)


@pytest.mark.parametrize("device", DEVICES)
def test_lidar_float32_keeps_the_tables_precision(device):
    """float32 rays as precise as the user's table wherever the canonical
    table starts: the widest step mid-circle puts the start at 0.56 rad, and
    lifting the columns after the wrap by 2 pi (in float32: values up to
    6.8, twice the ulp past 4) moved rays by up to 5e-7 rad, 1e-4 of a far,
    narrow Gaussian's alpha, 4x the float32 reference's error on the same
    rays (each ray's own float32 rounding). Fails with the lifted values
    stored."""
    el, az, off = tl.sensor()
    az = _widest_step_at(torch.linspace(0.56, 0.56 + 2 * math.pi, 361, dtype=torch.float64)[:-1], 0)
    assert int(canonical_columns(az)[1][0]) == 0  # the canonical table starts at 0.56
    g = torch.Generator().manual_seed(5)
    N = 240
    yaw = torch.rand(N, generator=g, dtype=torch.float64) * 2 * math.pi - math.pi
    pitch = el.min() + (el.max() - el.min()) * torch.rand(N, generator=g, dtype=torch.float64)
    r = 60 + 90 * torch.rand(N, generator=g, dtype=torch.float64)
    means = torch.stack((r * torch.cos(pitch) * torch.cos(yaw), r * torch.cos(pitch) * torch.sin(yaw),
                         r * torch.sin(pitch)), -1)
    scene = dict(means=means, quats=random_quats(N), scales=torch.full((N, 3), 0.05, dtype=torch.float64),
                 opacities=torch.full((N,), 0.6, dtype=torch.float64),
                 features=torch.rand(N, 1, generator=g, dtype=torch.float64),
                 viewmats=torch.eye(4, dtype=torch.float64)[None], row_elevations=el, column_azimuths=az,
                 row_azimuth_offsets=off)
    ours = tl.run(nurec_ops.rasterize_lidar, tl.to(scene, device, torch.float32, grad=False))[2].double().cpu()
    r32 = tl.run(ref.rasterize_lidar, tl.to(scene, "cpu", torch.float32, grad=False))[2].double()
    r64 = tl.run(ref.rasterize_lidar, tl.to(scene, "cpu", torch.float64, grad=False))[2]
    hit = r64 > 0.05
    assert int(hit.sum()) > 100
    rel = lambda a: ((a - r64).abs() / r64)[hit].max().item()  # noqa: E731
    assert rel(ours) < 1.5 * rel(r32) + 1e-6, (rel(ours), rel(r32))  # stored lifted: 1.7e-4 vs 4.1e-5


@pytest.mark.sanitize
@pytest.mark.parametrize("device", DEVICES)
def test_lidar_table_order_does_not_matter(device):
    """The same rays in another order give the same rays' outputs: rotating
    the table (and wrapping its values) or reversing it permutes the output
    columns and nothing else."""
    scene = tl.to(tl.random_scene(N=150, C=2, D=2), device, torch.float64, grad=False)
    base = tl.run(nurec_ops.rasterize_lidar, scene)
    W = scene["column_azimuths"].shape[0]
    perm = torch.roll(torch.arange(W, device=device), 137).flip(0)
    s2 = dict(scene, column_azimuths=_wrap(scene["column_azimuths"][perm]))
    for a, b in zip(tl.run(nurec_ops.rasterize_lidar, s2), base):
        assert_close(a, b[:, :, perm], torch.float64)


@pytest.mark.sanitize
@pytest.mark.parametrize("device", DEVICES)
def test_lidar_table_cache_follows_changes(device):
    """The canonical table is cached per table tensor: an in-place change of
    the table, or a new table in the freed memory, is seen."""
    scene = tl.to(tl.random_scene(N=120, C=1, D=1), device, torch.float64, grad=False)
    az = scene["column_azimuths"].clone()
    s = dict(scene, column_azimuths=az)
    first = tl.run(nurec_ops.rasterize_lidar, s)[1]
    az.copy_(_wrap(torch.roll(az, 91)))  # the same tensor, new values
    second = tl.run(nurec_ops.rasterize_lidar, s)[1]
    expect = tl.run(ref.rasterize_lidar, tl.to(dict(scene, column_azimuths=az), "cpu", torch.float64, grad=False))[1]
    assert_close(second, expect, torch.float64)
    assert not torch.allclose(first, second)


# ------------------------------------------------- the first call on CUDA

_FIRST_CALL = r"""
import sys, warnings, torch, nurec_ops
sys.path.insert(0, sys.argv[1])
import test_rasterize_camera as tc, test_rasterize_lidar as tl
warnings.simplefilter("error", RuntimeWarning)  # an overflow report would fail the run
torch.manual_seed(0)
cam = tc.random_scene(N=3000, C=2, W=320, H=240)
cam["scales"] = cam["scales"] * 8  # many more intersections than the first guess (8 per item)
cam = tc.to(cam, "cuda", torch.float32, grad=False)
lid = tl.random_scene(N=3000, C=2, D=1, row_step=2, col_step=2)
lid["scales"] = lid["scales"] * 4
lid = tl.to(lid, "cuda", torch.float32, grad=False)
for name, fn, s in (("camera", tc.run, cam), ("lidar", tl.run, lid)):
    mod = nurec_ops.rasterize_camera if name == "camera" else nurec_ops.rasterize_lidar
    out = fn(mod, s)
    assert all(torch.isfinite(o).all() for o in out), name + ": the first call returned NaN"
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    for _ in range(3):
        again = fn(mod, s)
    torch.cuda.set_sync_debug_mode(0)
    assert all(torch.isfinite(o).all() for o in again), name
    for a, b in zip(out, again):
        assert torch.allclose(a, b, atol=1e-5), name
    print(name, "ok")
"""


@gpu
def test_first_call_is_never_nan():
    """A fresh process's first call of a configuration sizes its binning
    exactly (one host sync) and renders right, for the camera and the lidar,
    with far more intersections than the first guess; later calls make no
    host sync."""
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, "-c", _FIRST_CALL, here], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "camera ok" in r.stdout and "lidar ok" in r.stdout, r.stdout


@gpu
def test_first_call_inside_capture_needs_capacity():
    """Inside CUDA-graph capture no sync can size a first call: it raises,
    naming `capacity`, instead of guessing."""
    s = tc.to(tc.random_scene(N=50, C=1, W=23, H=17), "cuda", torch.float32, grad=False)
    s["width"] = 29  # a configuration no earlier test used
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        with pytest.raises(RuntimeError, match="`capacity=`"):
            with torch.cuda.graph(graph):
                tc.run(nurec_ops.rasterize_camera, s)
