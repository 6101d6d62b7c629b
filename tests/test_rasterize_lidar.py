"""rasterize_lidar (SPEC section 4): parity of the fused op (C CPU and CUDA)
with the dense pure-PyTorch reference, forward and backward, on small
sensors cut from the real 128 x 3600 calibration (uneven rows, row azimuth
offsets, azimuths past -pi); edge Gaussians (seam, poles, near, far,
elongated, cut-off); tiling independence; a reference-free geometric check;
gradcheck; CUDA vs CPU on the full sensor; errors. The behaviours every op
shares (opcheck, torch.compile, both autograd paths, no host sync, CUDA
graphs, the binning overflow policy, poisoned memory) are
tests/test_op_registry.py's, over the lidar rows of tests/op_cases.py."""
import math

import pytest
import torch

import nurec_ops
from nurec_ops import reference as ref
from nurec_ops.lidar_model import load_lidar_model, reduce_lidar_model, synthetic_lidar_model
from nurec_ops._lidar_table import sensor_op_args
from nurec_ops.rasterize_lidar import default_eps2d

from conftest import DEVICES, DTYPES, gpu
from bad_inputs import GAUSSIAN_ERRORS, changed, raises_real_and_fake
from near_cuts import away_from_cuts, gradcheck_inputs, rows_near_cuts
from poison import poison_allocator
from random_scenes import quat_mul, random_quats
from tolerances import assert_close, assert_close_flips
import shared_data

OPS = torch.ops.nurec_ops
GRAD_KEYS = ("means", "quats", "scales", "opacities", "features")
SENSOR_KEYS = ("row_elevations", "column_azimuths", "row_azimuth_offsets")


# ---------------------------------------------------------------- scenes

def full_model(dtype=torch.float64, device="cpu"):
    """The real 128 x 3600 calibration of ../shared/data/gsplat/ (its table
    runs from 3.09 down to -3.19 rad), or where it is absent the synthetic
    model of the same shape (uneven rows, per-row offsets, spinning
    clockwise from pi): the tests below hold for either."""
    path = shared_data.find(shared_data.LIDAR)
    if path is None:
        return synthetic_lidar_model(dtype=dtype, device=device)
    return load_lidar_model(path, dtype=dtype, device=device)


def sensor(row_step=8, col_step=10):
    """The full model (full_model), every row_step-th row and col_step-th
    column (float64): (8, 10) gives 16 uneven rows x 360 columns."""
    return reduce_lidar_model(full_model(), row_step, col_step)


def yaw_pose(yaw, t):
    """World -> lidar viewmat of a lidar at t turned by yaw about z."""
    c, s = math.cos(yaw), math.sin(yaw)
    Rw = torch.tensor([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)  # lidar -> world
    V = torch.eye(4, dtype=torch.float64)
    V[:3, :3] = Rw.T
    V[:3, 3] = -Rw.T @ torch.as_tensor(t, dtype=torch.float64)
    return V


def sweeps(C):
    V = [yaw_pose(0.0, (0.0, 0.0, 0.0))]
    for _ in range(C - 1):
        V.append(yaw_pose(torch.rand(()).item() * 6.28, (torch.randn(3) * 0.3).tolist()))
    return torch.stack(V)


def shell_points(N, rmin=2.0, rmax=12.0, el_lo=-0.5, el_hi=0.3):
    az = torch.rand(N, dtype=torch.float64) * 2 * math.pi - math.pi
    el = torch.rand(N, dtype=torch.float64) * (el_hi - el_lo) + el_lo
    r = torch.rand(N, dtype=torch.float64) * (rmax - rmin) + rmin
    return torch.stack((r * torch.cos(el) * torch.cos(az), r * torch.cos(el) * torch.sin(az), r * torch.sin(el)), -1)


def random_scene(N=150, C=2, D=2, row_step=8, col_step=10):
    """Gaussians in a shell 2-12 m around the lidar, in its field of view;
    a few of them on the azimuth seam (behind the sensor)."""
    means = shell_points(N)
    k = max(N // 10, 1)
    means[:k, 0] = -means[:k, 0].abs() - 2.0  # behind: azimuth near +-pi
    means[:k, 1] = torch.randn(k, dtype=torch.float64) * 0.05
    quats = random_quats(N)
    scales = torch.exp(torch.randn(N, 3, dtype=torch.float64) * 0.5 - 1.6)
    opac = torch.rand(N, dtype=torch.float64) * 0.95
    feats = torch.rand(N, D, dtype=torch.float64)
    el, az, off = sensor(row_step, col_step)
    return dict(means=means, quats=quats, scales=scales, opacities=opac, features=feats, viewmats=sweeps(C),
                row_elevations=el, column_azimuths=az, row_azimuth_offsets=off)


def edge_scene(near=0.5, far=200.0):
    """Sweep 0 (identity pose) sees: Gaussians on the seam, near and at the
    poles, inside near, straddling near, beyond and just inside far, very
    elongated ones (one wrapping around the sensor), a huge close one, faint
    and clamped ones, and an opaque stack driving rays to the cut-off."""
    g = []

    def add(p, s, o, q=(1.0, 0.0, 0.0, 0.0)):
        g.append((p, s if isinstance(s, tuple) else (s, s, s), o, q))

    add((-6.0, 0.0, -0.5), 0.3, 0.9)              # on the seam
    add((-6.0, 0.02, 0.2), (0.05, 0.6, 0.1), 0.8) # seam, wide in azimuth
    add((-6.0, -0.03, -1.2), 0.15, 0.7)           # seam, lower rows
    add((0.1, 0.0, 5.0), 0.5, 0.9)                # within 5 deg of the pole: dropped
    add((0.6, 0.0, 5.0), 3.0, 0.9)                # 83 deg: kept, huge (reaches the top rows?)
    add((0.3, 0.2, 0.1), 0.2, 0.9)                # range 0.37 < near: dropped
    add((0.55, 0.1, -0.05), 0.3, 0.8)             # straddles near
    add((210.0, 0.0, 0.0), 30.0, 0.9)             # beyond far: dropped
    add((190.0, 5.0, -20.0), 8.0, 0.9)            # just inside far
    add((6.0, 2.0, -1.0), (8.0, 0.02, 0.02), 0.9, (0.9, 0.1, 0.3, 0.2))   # needle
    add((0.0, -3.0, -0.5), (6.0, 0.05, 0.05), 0.9)  # long along x beside the sensor: wide in azimuth
    add((-3.0, 0.0, -0.3), (0.05, 6.0, 0.05), 0.9)  # long along y behind: across the seam
    add((1.0, 0.5, -0.2), 2.5, 0.6)               # huge and close: every column
    add((4.0, -4.0, 0.0), 0.4, 0.003)             # below 1/255: culled
    add((4.0, 4.0, -0.3), 0.3, 0.999)             # above the 0.99 clamp
    for k in range(12):                           # opaque stack: T cut-off
        add((5.0 + 0.4 * k, -2.0, -0.8), 0.6, 0.9)
    means = torch.tensor([p for p, _, _, _ in g], dtype=torch.float64)
    scales = torch.tensor([s for _, s, _, _ in g], dtype=torch.float64)
    opac = torch.tensor([o for _, _, o, _ in g], dtype=torch.float64)
    quats = torch.tensor([q for _, _, _, q in g], dtype=torch.float64)
    N = means.shape[0]
    feats = torch.rand(N, 2, dtype=torch.float64)
    el, az, off = sensor()
    return dict(means=means, quats=quats, scales=scales, opacities=opac, features=feats, viewmats=sweeps(2),
                row_elevations=el, column_azimuths=az, row_azimuth_offsets=off, near=near, far=far)


def to(scene, device, dtype, grad=True):
    out = {}
    for k, v in scene.items():
        if isinstance(v, torch.Tensor):
            v = v.to(device=device, dtype=dtype)
            if grad and k in GRAD_KEYS:
                v = v.requires_grad_(True)
        out[k] = v
    return out


def run(fn, s):
    kw = dict(s)
    pos = [kw.pop(k) for k in GRAD_KEYS + ("viewmats",) + SENSOR_KEYS]
    return fn(*pos, **kw)


def grads(outs, s, cot):
    keys = [k for k in GRAD_KEYS if s[k].requires_grad]
    g = torch.autograd.grad(outs, [s[k] for k in keys], cot, allow_unused=True)
    return dict(zip(keys, g))


def check_parity(scene, device, dtype, factor=1.0):
    s = to(scene, device, dtype)
    r = to(scene, "cpu", torch.float64)
    for k in GRAD_KEYS + ("viewmats",) + SENSOR_KEYS:  # the reference sees the same (rounded) inputs
        r[k] = s[k].detach().to("cpu", torch.float64).requires_grad_(k in GRAD_KEYS)
    poison_allocator(device)
    out = run(nurec_ops.rasterize_lidar, s)
    expect = run(ref.rasterize_lidar, r)
    for name, a, e in zip(("features", "range", "alpha"), out, expect):
        assert a.dtype == dtype and a.device.type == torch.device(device).type
        # float32: angles are ~3 rad, so allow a larger relative factor
        assert_close_flips(a, e, dtype, factor=factor * (1 if dtype == torch.float64 else 5), msg=name)
    cot = [torch.randn_like(e) for e in expect]
    poison_allocator(device)
    g = grads(out, s, [c.to(device=device, dtype=dtype) for c in cot])
    ge = grads(expect, r, cot)
    near = rows_near_cuts(lambda: run(ref.rasterize_lidar, r))[0] if dtype == torch.float32 else set()
    for k in ge:
        assert g[k] is not None, k
        f = 10 * factor * (1 if dtype == torch.float64 else 10)
        assert_close_flips(g[k], ge[k], dtype, factor=f, msg=f"grad {k}", max_frac=0.03, free_rows=near)
    return out, expect


# ------------------------------------------------------------ parity tests

@pytest.mark.sanitize
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("D", [1, 2, 5])
def test_parity_random(device, dtype, D):
    check_parity(random_scene(N=150, C=2, D=D), device, dtype)


@pytest.mark.sanitize
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_parity_edge_gaussians(device, dtype):
    scene = edge_scene()
    _, _, alpha = run(ref.rasterize_lidar, to(scene, "cpu", torch.float64, grad=False))
    assert (alpha[0] > 1 - 2e-4).any()  # some rays hit the transmittance cut-off
    assert (alpha[0, :, :3] > 0.1).any() and (alpha[0, :, -3:] > 0.1).any()  # both sides of the seam
    check_parity(scene, device, dtype)


@pytest.mark.sanitize
@pytest.mark.parametrize("device", DEVICES)
def test_parity_other_sizes(device):
    # partial tiles in both directions, more sweeps, the real sensor's top rows
    scene = random_scene(N=120, C=3, D=3, row_step=5, col_step=17)  # 26 rows x 212 columns
    check_parity(scene, device, torch.float64)


@pytest.mark.parametrize("device", DEVICES)
def test_seam_symmetry(device):
    """A round Gaussian straight behind the sensor (azimuth pi) renders on
    both ends of the columns, mirror-symmetric in azimuth."""
    el, az, off = sensor()
    W = 360
    az = torch.linspace(math.pi, -math.pi, W + 1, dtype=torch.float64)[:-1] - math.pi / W  # symmetric about pi
    off = torch.zeros_like(off)
    s = dict(means=torch.tensor([[-5.0, 0.0, -0.4]]), quats=torch.tensor([[1.0, 0, 0, 0]]),
             scales=torch.full((1, 3), 0.3), opacities=torch.tensor([0.9]), features=torch.ones(1, 1),
             viewmats=torch.eye(4)[None], row_elevations=el, column_azimuths=az, row_azimuth_offsets=off)
    s = to(s, device, torch.float64, grad=False)
    _, rng, alpha = run(nurec_ops.rasterize_lidar, s)
    a = alpha[0, :, :, 0].cpu()
    assert (a[:, 0] > 0.3).any() and (a[:, -1] > 0.3).any()
    torch.testing.assert_close(a[:, :20], a[:, -20:].flip(-1), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_tiling_independence(device):
    """The image does not depend on where rows and columns fall in tiles:
    permuted rows and reversed columns (still monotone; the seam lands in
    other tiles) give the same rays exactly."""
    scene = to(edge_scene(), device, torch.float64, grad=False)
    base = run(nurec_ops.rasterize_lidar, scene)
    R = scene["row_elevations"].shape[0]
    perm = torch.randperm(R, device=device)
    s2 = dict(scene, row_elevations=scene["row_elevations"][perm], row_azimuth_offsets=scene["row_azimuth_offsets"][perm])
    for a, b in zip(run(nurec_ops.rasterize_lidar, s2), base):
        assert torch.equal(a, b[:, perm])
    s3 = dict(scene, column_azimuths=scene["column_azimuths"].flip(0))
    for a, b in zip(run(nurec_ops.rasterize_lidar, s3), base):
        assert torch.equal(a, b.flip(2))
    # the full 3600 columns cut the other way: every 10th column from column 5
    s4 = dict(scene, column_azimuths=full_model(device=device).column_azimuths[5::10])
    a = run(nurec_ops.rasterize_lidar, s4)
    e = run(ref.rasterize_lidar, s4)
    for x, y in zip(a, e):
        assert_close(x, y, torch.float64)


@pytest.mark.parametrize("device", DEVICES)
def test_binning_cuts_tiles_no_ray_reaches(device):
    """A Gaussian's tile rectangle spans its rows' whole spread of azimuth
    offsets; the binning keeps only the tiles its ellipse reaches on their
    own row (rl_box_cut). A thin Gaussian tilted 45 degrees in azimuth and
    elevation, on every 4th row of the real sensor (full width: 15 tiles
    per row): every (row, tile) that a ray with alpha > 0 lies in is binned,
    the rectangle is not (the real offsets move it between two tiles from
    row to row), and the image matches the reference."""
    el, az, off = reduce_lidar_model(full_model(device=device), 4, 1)
    c, s = math.cos(math.pi / 8), math.sin(math.pi / 8)
    f64 = dict(dtype=torch.float64, device=device)
    q = quat_mul(torch.tensor([c, s, 0.0, 0.0], **f64),
                 torch.tensor([math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4)], **f64))  # local x -> (0, 1, 1)/sqrt 2
    scene = dict(means=torch.tensor([[10.0, 0.0, 0.0]], **f64), quats=q[None],
                 scales=torch.tensor([[1.0, 0.02, 0.02]], **f64), opacities=torch.tensor([0.9], **f64),
                 features=torch.ones(1, 1, **f64), viewmats=torch.eye(4, **f64)[None],
                 row_elevations=el, column_azimuths=az, row_azimuth_offsets=off)
    out = OPS.rasterize_lidar_fwd(*fwd_op_args(scene, 0, 1, 1 << 16))
    alpha, ranges = out[2][0, :, :, 0].cpu(), out[6][0].cpu()
    tile_cols = 256  # NUREC_RL_TILE_COLS (csrc/rasterize_lidar/rasterize_lidar.h)
    assert ranges.shape[1] == -(-az.shape[0] // tile_cols)
    # tiles are runs of the canonical table's columns (nurec_ops/_lidar_table.py):
    # the user's column j is canonical column pos[j]
    order = sensor_op_args(el, az, off)[2].long().cpu()
    pos = torch.empty_like(order)
    pos[order] = torch.arange(order.shape[0])
    reached = {(i, int(pos[j]) // tile_cols) for i, j in (alpha > 0).nonzero().tolist()}
    binned = {(i, t) for i, t in ((ranges[..., 1] - ranges[..., 0]) > 0).nonzero().tolist()}
    rows, tiles = {i for i, _ in binned}, {t for _, t in binned}
    assert len(reached) > 10 and len(tiles) > 1
    assert reached <= binned
    assert len(binned) < len(rows) * len(tiles)  # the rectangle was cut
    for a, e in zip(run(nurec_ops.rasterize_lidar, scene), run(ref.rasterize_lidar, scene)):
        assert_close(a, e, torch.float64)


@pytest.mark.parametrize("device", DEVICES)
def test_geometric_sphere(device):
    """No reference: the lidar sits 1.5 m off the centre of an opaque sphere
    (radius 10 m) of 6000 flat Gaussians (discs of scale 0.4 m, opacity
    0.99). Every ray sees the sphere (alpha > 0.999) and range / alpha is
    the analytic distance to the sphere along the ray within 0.15 m (1.5%;
    0.074 m measured): the means are on the surface, so the only error is
    the spread of range over the few discs a ray blends (~0.5 m apart, the
    surface up to ~9 degrees off normal incidence)."""
    Rs, n = 10.0, 6000
    k = torch.arange(n, dtype=torch.float64) + 0.5
    z = 1 - 2 * k / n
    phi = k * math.pi * (3 - math.sqrt(5))
    nrm = torch.stack((torch.sqrt(1 - z * z) * torch.cos(phi), torch.sqrt(1 - z * z) * torch.sin(phi), z), -1)
    means = Rs * nrm
    # orient each disc: local z -> normal (quaternion from (0,0,1) to nrm)
    axis = torch.linalg.cross(torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64).expand(n, 3), nrm)
    w = 1 + nrm[:, 2]
    quats = torch.cat((w[:, None], axis), -1)
    quats[w < 1e-6] = torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=torch.float64)
    scales = torch.tensor([0.4, 0.4, 0.01], dtype=torch.float64).expand(n, 3).clone()
    centre = torch.tensor([1.0, -1.0, 0.5], dtype=torch.float64)  # sphere centre in the lidar frame, |c| = 1.5
    V = torch.eye(4, dtype=torch.float64)[None]
    V[0, :3, 3] = centre  # world (sphere frame) -> lidar: x_l = x_w + centre
    el, az, off = sensor(8, 10)
    s = dict(means=means, quats=quats, scales=scales, opacities=torch.full((n,), 0.99, dtype=torch.float64),
             features=torch.ones(n, 1, dtype=torch.float64), viewmats=V, row_elevations=el, column_azimuths=az,
             row_azimuth_offsets=off)
    for dtype in (torch.float64, torch.float32):
        _, rng, alpha = run(nurec_ops.rasterize_lidar, to(s, device, dtype, grad=False))
        rng, alpha = rng[0, ..., 0].cpu().double(), alpha[0, ..., 0].cpu().double()
        # analytic: |o + t d - c| = Rs with o = 0 (lidar), c = centre
        a_ray = az[None, :] + off[:, None]
        d = torch.stack((torch.cos(el)[:, None] * torch.cos(a_ray), torch.cos(el)[:, None] * torch.sin(a_ray),
                         torch.sin(el)[:, None].expand_as(a_ray)), -1)
        b = (d * centre).sum(-1)
        t = b + torch.sqrt(b * b - (centre @ centre - Rs * Rs))
        assert (alpha > 0.999).all(), alpha.min()
        err = (rng / alpha - t).abs()
        assert err.max() < 0.15, err.max()


def test_gradcheck_cpu():
    el, az, off = sensor(21, 90)  # 7 rows x 40 columns
    N = 5

    def draw():
        means = shell_points(N, 2.0, 4.0, -0.3, 0.1)
        s = dict(means=means, quats=random_quats(N), scales=torch.full((N, 3), 0.4, dtype=torch.float64) *
                 torch.exp(torch.randn(N, 3, dtype=torch.float64) * 0.2),
                 opacities=torch.rand(N, dtype=torch.float64) * 0.4 + 0.3,
                 features=torch.rand(N, 2, dtype=torch.float64),
                 viewmats=sweeps(2), row_elevations=el, column_azimuths=az, row_azimuth_offsets=off)
        return to(s, "cpu", torch.float64)
    s = away_from_cuts(draw, lambda s: run(ref.rasterize_lidar, s))
    keys = list(GRAD_KEYS)
    assert gradcheck_inputs(lambda x: run(nurec_ops.rasterize_lidar, x), s, keys)


@pytest.mark.parametrize("device", DEVICES)
def test_noncontiguous_and_empty(device):
    s = to(random_scene(N=60, C=2, D=2), device, torch.float64, grad=False)
    nc = dict(s)
    nc["means"] = torch.stack((s["means"], s["means"]), 2)[..., 0]
    nc["features"] = s["features"].t().contiguous().t()
    nc["column_azimuths"] = torch.stack((s["column_azimuths"], s["column_azimuths"]), 1)[:, 0]
    for x, y in zip(run(nurec_ops.rasterize_lidar, s), run(nurec_ops.rasterize_lidar, nc)):
        assert torch.equal(x, y)
    R, W = s["row_elevations"].shape[0], s["column_azimuths"].shape[0]
    e = dict(s)
    for k in GRAD_KEYS:
        e[k] = s[k][:0]
    f, r, a = run(nurec_ops.rasterize_lidar, e)
    assert f.shape == (2, R, W, 2) and (f == 0).all() and (r == 0).all() and (a == 0).all()
    e = dict(s, viewmats=s["viewmats"][:0])
    assert [tuple(t.shape) for t in run(nurec_ops.rasterize_lidar, e)] == [(0, R, W, 2), (0, R, W, 1), (0, R, W, 1)]
    e = dict(s, column_azimuths=s["column_azimuths"][:0])
    assert [tuple(t.shape) for t in run(nurec_ops.rasterize_lidar, e)] == [(2, R, 0, 2), (2, R, 0, 1), (2, R, 0, 1)]
    e = dict(s, row_elevations=s["row_elevations"][:0], row_azimuth_offsets=s["row_azimuth_offsets"][:0])
    assert [tuple(t.shape) for t in run(nurec_ops.rasterize_lidar, e)] == [(2, 0, W, 2), (2, 0, W, 1), (2, 0, W, 1)]


def test_eps2d_default_and_explicit():
    s = to(random_scene(N=40, C=1, D=1), "cpu", torch.float64, grad=False)
    W = s["column_azimuths"].shape[0]
    assert default_eps2d(W) == pytest.approx(0.3 * (2 * math.pi / W) ** 2)
    a = run(nurec_ops.rasterize_lidar, s)
    b = run(nurec_ops.rasterize_lidar, dict(s, eps2d=default_eps2d(W)))
    for x, y in zip(a, b):
        assert torch.equal(x, y)
    c = run(nurec_ops.rasterize_lidar, dict(s, eps2d=1e-3))
    e = run(ref.rasterize_lidar, dict(s, eps2d=1e-3))
    for x, y in zip(c, e):
        assert_close(x, y, torch.float64)


def test_lidar_model():
    m = load_lidar_model(shared_data.require(shared_data.LIDAR))
    assert [t.shape[0] for t in m] == [128, 3600, 128] and m.row_elevations.dtype == torch.float32
    assert m.column_azimuths[0] > 3.0 and m.column_azimuths[-1] < -3.1  # past -pi: only differences wrap
    assert (m.column_azimuths.diff() < 0).all()
    r = reduce_lidar_model(m, 8, 10)
    assert [t.shape[0] for t in r] == [16, 360, 16]
    assert torch.equal(r.row_azimuth_offsets, m.row_azimuth_offsets[::8])
    sp = m.row_elevations.double().diff().abs()
    assert sp.max() > 1.5 * sp.min()  # rows are unevenly spaced


def test_synthetic_lidar_model():
    """The default sensor needs no file: 128 uneven rows with offsets that jump
    by degrees between neighbours, 3600 columns spinning clockwise over a turn."""
    m = synthetic_lidar_model()
    assert [t.shape[0] for t in m] == [128, 3600, 128] and m.row_elevations.dtype == torch.float32
    az, el, off = m.column_azimuths.double(), m.row_elevations.double(), m.row_azimuth_offsets.double()
    assert (az.diff() < 0).all() and abs(az[0] - az[-1] - 2 * math.pi * 3599 / 3600) < 1e-5
    sp = el.diff().abs()
    assert (el.diff() < 0).all() and sp.max() > 1.5 * sp.min()
    assert off.diff().abs().max() > math.radians(5) and off.min() < 0 < off.max()


# ------------------------------------------------------------------ errors

ERRORS = GAUSSIAN_ERRORS + [  # the shared rows (tests/bad_inputs.py), then the op's own
    ("near", changed(near=0.0)),
    ("features", changed(features=lambda s: s["features"][:, :0])),
    ("features", changed(features=lambda s: s["features"][:, None])),
    ("row_elevations", changed(row_elevations=lambda s: s["row_elevations"][:, None])),
    ("row_azimuth_offsets", changed(row_azimuth_offsets=lambda s: s["row_azimuth_offsets"][:-1])),
    ("column_azimuths", changed(column_azimuths=lambda s: s["column_azimuths"].float())),
    ("far", changed(far=0.1)),
    ("eps2d", changed(eps2d=-1.0)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,make", ERRORS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(ERRORS)])
def test_bad_input(device, name, make):
    s = to(random_scene(N=10, C=2, D=2, row_step=16, col_step=100), device, torch.float64, grad=False)
    raises_real_and_fake(lambda x: run(nurec_ops.rasterize_lidar, x), make(s), name)


@gpu
def test_mixed_devices():
    s = to(random_scene(N=10, C=2), "cuda", torch.float64, grad=False)
    s["row_azimuth_offsets"] = s["row_azimuth_offsets"].cpu()
    with pytest.raises(RuntimeError, match="`row_azimuth_offsets`"):
        run(nurec_ops.rasterize_lidar, s)


@pytest.mark.sanitize
@pytest.mark.parametrize("device", DEVICES)
def test_parity_rectangles_past_64_cells(device):
    """Every row of the real sensor (128 rows, 2 tile columns) and Gaussians
    up to ~1 m across at 2-12 m: rectangles of more than 64 tiles, whose
    cells past the first 64 are never cut (tiles.h); the binning names those
    past the cut's reach by arithmetic, not by the cut's bits."""
    scene = random_scene(N=40, C=1, D=1, row_step=1, col_step=10)  # 128 rows x 360 columns
    scene["scales"] = scene["scales"] * 3
    s = to(scene, device, torch.float64, grad=False)
    counts = OPS.rasterize_lidar_fwd(*fwd_op_args(s, 0, 512, 1 << 16))[4]
    assert counts.max() > 64, counts.max()  # some Gaussian keeps more than 64 tiles
    check_parity(scene, device, torch.float64)


def fwd_op_args(s, segments, segment_min, capacity):
    """A scene's arguments of torch.ops.nurec_ops.rasterize_lidar_fwd."""
    W = s["column_azimuths"].shape[0]
    return (*[s[k] for k in GRAD_KEYS], s["viewmats"], *sensor_op_args(*[s[k] for k in SENSOR_KEYS]),
            s.get("near", 0.5), s.get("far", 200.0), default_eps2d(W), segments, segment_min, capacity)


# --------------------------------------------------------------- CUDA only

def full_sensor_scene(N=20_000):
    """The real 128 x 3600 sensor, N Gaussians around it, two sweeps (float64)."""
    torch.manual_seed(torch.initial_seed() % (1 << 31))
    el, az, off = full_model()
    return dict(means=shell_points(N, 1.0, 40.0), quats=random_quats(N),
                scales=torch.exp(torch.randn(N, 3, dtype=torch.float64) * 0.5 - 2.0),
                opacities=torch.rand(N, dtype=torch.float64), features=torch.rand(N, 2, dtype=torch.float64),
                viewmats=sweeps(2), row_elevations=el, column_azimuths=az, row_azimuth_offsets=off)


@gpu
def test_cuda_vs_cpu_full_sensor():
    """The real 128 x 3600 sensor, 20k Gaussians around it, two sweeps."""
    scene = full_sensor_scene()
    for dtype in (torch.float32, torch.float64):
        c = to(scene, "cuda", dtype)
        p = to(scene, "cpu", dtype)
        oc = run(lambda *a, **k: nurec_ops.rasterize_lidar(*a, **k, binning="exact"), c)
        op = run(nurec_ops.rasterize_lidar, p)
        cot = [torch.randn_like(o) for o in op]
        gc = grads(oc, c, [x.cuda() for x in cot])
        gp = grads(op, p, cot)
        for name, a, b in zip(("features", "range", "alpha"), oc, op):
            if dtype == torch.float64:
                assert_close(a, b, dtype, factor=10, msg=name)
            else:  # rare alpha-threshold flips from FMA rounding: judge per ray
                bad = ((a.cpu() - b).abs() > 1e-3 * max(1.0, b.abs().max().item())).sum().item()
                assert bad <= 1e-4 * b.numel(), (name, bad)
        for k in gp:
            a, b = gc[k].cpu().double(), gp[k].double()
            err = (a - b).norm() / b.norm().clamp_min(1e-12)
            assert err < (1e-9 if dtype == torch.float64 else 1e-2), (k, err.item())


# Long lists cut into parts (CUDA): tests/test_op_registry.py, over the registry's rows.


# ------------------------------------------------------- the rows by search

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("table", ["real", "shuffled", "full", "non-finite"])
def test_row_search_reaches_the_scanned_rows(device, dtype, table):
    """The projection finds the rows an item reaches by search over the
    rows in elevation order (row_search, which the wrapper always passes)
    or by a scan of every row: the same counts, lists and outputs bit for
    bit, for the real (uneven) table, the same rows shuffled (any real
    table), the full 128-row one, and one with NaN and infinite elevations
    and offsets."""
    from nurec_ops._lidar_table import row_search

    if table == "full":
        s = random_scene(N=300, C=2, D=2, row_step=1, col_step=20)
    else:
        s = random_scene(N=300, C=2, D=2)
    # one Gaussian that reaches no row (straight up, small), so that the
    # counts have zeros whatever the draw (a seed once had every item seen)
    s["means"][0] = torch.tensor([0.0, 0.0, 50.0], dtype=torch.float64)
    s["scales"][0] = 0.05
    if table in ("shuffled", "non-finite"):
        perm = torch.randperm(s["row_elevations"].shape[0])
        s["row_elevations"], s["row_azimuth_offsets"] = s["row_elevations"][perm], s["row_azimuth_offsets"][perm]
    if table == "non-finite":
        s["row_elevations"][[2, 5]] = torch.tensor([math.nan, math.inf], dtype=torch.float64)
        s["row_azimuth_offsets"][[3, 7, 9]] = torch.tensor([math.nan, -math.inf, math.nan], dtype=torch.float64)
    s = to(s, device, dtype, grad=False)
    args = fwd_op_args(s, 0, 1, 1 << 18)
    search = row_search(args[6], args[9])
    assert search is not None and search.shape == (1 + 4 * args[6].shape[0].bit_length(), args[6].shape[0])
    by_search = OPS.rasterize_lidar_fwd(*args, None, None, False, None, search)
    by_scan = OPS.rasterize_lidar_fwd(*args, None, None, False, None, None)
    counts = by_scan[4]
    assert (counts > 1).any() and (counts == 0).any()
    for k, (a, b) in enumerate(zip(by_search, by_scan)):
        assert a.shape == b.shape and torch.equal(a.nan_to_num(), b.nan_to_num()), k
    if table == "real" and dtype == torch.float64:  # the schema and fake kernel with row_search
        torch.library.opcheck(OPS.rasterize_lidar_fwd.default, (*args, None, None, False, None, search))
