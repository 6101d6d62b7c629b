"""rasterize_rays (a sensor given by its rays, gsplat issue 1009): parity of
the C CPU and CUDA kernels with the float64 reference, forward and
backward, on random Gaussians and ray patterns (a non-repetitive rosette,
a spinning lidar's table from a real calibration, narrow bundles across the
azimuth seam, rolling shutter); the image's independence from the direction
grid; unusable rays; bad inputs. The generic behaviour (opcheck, compile,
graphs, syncs, poisoned memory, overflow) is the op registry's
(tests/op_cases.py rows rays-*)."""
import math

import pytest
import torch

import nurec_ops
from nurec_ops import reference as ref
from nurec_ops.lidar_model import lidar_model_rays, load_lidar_model, reduce_lidar_model

import shared_data
from bad_inputs import GAUSSIAN_ERRORS
from conftest import DEVICES, DTYPES, gpu
from test_rasterize_lidar import GRAD_KEYS, to  # the same Gaussians' keys
from tolerances import assert_close, assert_close_flips

F64 = torch.float64


def rosette(M, fov=math.radians(70.0), petals=7, turns=11.0):
    """A Livox-like non-repetitive rosette of M unit directions around +x
    (a pattern no rows x columns table describes)."""
    t = torch.linspace(0, 1, M, dtype=F64)
    r = 0.5 * fov * torch.abs(torch.sin(petals * math.pi * t * turns))
    phi = 2 * math.pi * turns * t
    d = torch.stack((torch.cos(r), torch.sin(r) * torch.cos(phi), torch.sin(r) * torch.sin(phi)), -1)
    return d


def random_gaussians(N, D=2, spread=6.0, centre=(8.0, 0.0, 0.0)):
    means = torch.randn(N, 3, dtype=F64) * spread + torch.tensor(centre, dtype=F64)
    quats = torch.randn(N, 4, dtype=F64)
    scales = torch.exp(torch.randn(N, 3, dtype=F64) * 0.4 - 1.0)
    opacities = torch.rand(N, dtype=F64) * 0.95 + 0.02
    features = torch.rand(N, D, dtype=F64)
    return dict(means=means, quats=quats, scales=scales, opacities=opacities, features=features)


def sensor_poses(C, jitter=0.3):
    """World -> sensor matrices of C sensors near the origin, slightly turned."""
    V = torch.eye(4, dtype=F64).repeat(C, 1, 1)
    for c in range(C):
        a = (torch.rand(()) - 0.5).item() * jitter
        R = torch.tensor([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]], dtype=F64)
        V[c, :3, :3] = R
        V[c, :3, 3] = torch.randn(3, dtype=F64) * jitter
    return V


def random_scene(N=120, C=2, M=600, D=2, pattern="rosette", rolling=False, origins=0.05):
    """Gaussians, C sensors and M rays each (``pattern``: "rosette", "sphere"
    (directions anywhere), "rear" (a narrow bundle around -x, across the
    azimuth seam)), per-ray origin offsets of up to ``origins`` metres."""
    s = random_gaussians(N, D)
    if pattern == "rosette":
        d = rosette(M)[None].expand(C, M, 3).clone()
        d = d + torch.randn(C, M, 3, dtype=F64) * 1e-3
    elif pattern == "sphere":
        d = torch.randn(C, M, 3, dtype=F64)
        s["means"] = torch.randn(N, 3, dtype=F64) * 6
    elif pattern == "rear":
        d = rosette(M, fov=math.radians(40.0))[None].expand(C, M, 3).clone() * torch.tensor([-1.0, 1, 1], dtype=F64)
        s["means"] = s["means"] * torch.tensor([-1.0, 1, 1], dtype=F64)
    else:
        raise ValueError(pattern)
    s["viewmats"] = sensor_poses(C)
    s["ray_origins"] = torch.randn(C, M, 3, dtype=F64) * origins
    s["ray_directions"] = d * (0.5 + torch.rand(C, M, 1, dtype=F64))  # not unit: the op normalizes
    if rolling:
        s["viewmats_end"] = moved(s["viewmats"])
        s["ray_times"] = torch.rand(C, M, dtype=F64)
    return s


def moved(V, dx=1.5, yaw=0.2):
    """End poses of sensors V driven dx metres along world x and turned by yaw."""
    T = torch.eye(4, dtype=F64).repeat(V.shape[0], 1, 1)
    T[:, :3, :3] = torch.tensor([[math.cos(yaw), -math.sin(yaw), 0], [math.sin(yaw), math.cos(yaw), 0], [0, 0, 1]],
                                dtype=F64)
    T[:, 0, 3] = dx
    # world -> sensor at the end: the sensor's pose moved by T (sensor -> world composed)
    return torch.linalg.inv(T @ torch.linalg.inv(V))


def forward_backward(fn, s, seed=0, **kw):
    out = fn(**s, **kw)
    gen = torch.Generator().manual_seed(seed)
    cots = [torch.randn(o.shape, generator=gen, dtype=F64).to(o) for o in out]
    loss = sum((torch.nan_to_num(o) * w).sum() for o, w in zip(out, cots))
    grads = torch.autograd.grad(loss, [s[k] for k in GRAD_KEYS])
    return [o.detach() for o in out], dict(zip(GRAD_KEYS, grads))


def check_parity(s64, device, dtype, seed, **kw):
    ref_out, ref_g = forward_backward(ref.rasterize_rays, to(s64, "cpu", F64), seed)
    out, g = forward_backward(nurec_ops.rasterize_rays, to(s64, device, dtype), seed, **kw)
    names = ("features", "range", "alpha")
    if dtype == F64:
        for n, a, e in zip(names, out, ref_out):
            assert_close(a, e, msg=n)
        for k in GRAD_KEYS:
            assert_close(g[k], ref_g[k], factor=100, msg=f"grad {k}")
    else:  # float32: an alpha may round to the other side of 1/255
        for n, a, e in zip(names, out, ref_out):
            assert_close_flips(a, e, dtype, msg=n, max_frac=2e-3, bound=0.02)
        for k in GRAD_KEYS:
            assert_close_flips(g[k], ref_g[k], dtype, factor=10, msg=f"grad {k}", max_frac=0.03, bound=0.05)
    assert ref_out[2].max() > 0.3, "a scene nothing reaches tests nothing"
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pattern", ["rosette", "sphere", "rear"])
def test_parity(device, dtype, pattern, seed):
    torch.manual_seed(seed)
    check_parity(random_scene(pattern=pattern), device, dtype, seed)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_parity_rolling_shutter(device, dtype, seed):
    """Each ray from the pose at its own time (1.5 m and 0.2 rad over the
    frame): the origins' ball is metres wide, the binning still exact."""
    torch.manual_seed(seed)
    check_parity(random_scene(rolling=True), device, dtype, seed)


@pytest.mark.parametrize("device", DEVICES)
def test_image_does_not_depend_on_the_grid(device, seed):
    """The direction grid only decides which rays test which Gaussians: a
    Gaussian binned away cannot reach alpha >= 1/255 there, so every grid
    composites the same pairs in the same order (bitwise on the CPU, where
    the walk is one thread's)."""
    torch.manual_seed(seed)
    s = to(random_scene(M=900, pattern="sphere"), device, F64, grad=False)
    base = nurec_ops.rasterize_rays(**s, grid=(1, 1))
    for grid in [(2, 3), (7, 5), (30, 30), (1, 64)]:
        out = nurec_ops.rasterize_rays(**s, grid=grid)
        for a, b in zip(out, base):
            if device == "cpu":
                assert torch.equal(torch.nan_to_num(a, 7.0), torch.nan_to_num(b, 7.0)), grid
            else:
                torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_parity_one_crowded_cell(device, dtype, seed):
    """Every ray in one cell (grid (1, 1), 3000 rays: 24 chunks of 128): on
    CUDA the cell's chunks are dealt round robin to NUREC_RAYS_CHUNK_SPLIT
    blocks, each walking several; the result is still the reference's."""
    torch.manual_seed(seed)
    check_parity(random_scene(N=80, C=1, M=3000), device, dtype, seed, grid=(1, 1))


def test_suggested_grid_follows_the_pattern():
    """suggest_ray_grid: about one cell per 128 rays, shaped by the pattern's
    extents (a full spin is wide, a narrow rosette square-ish), uncached (two
    patterns of one size get their own grids), and what grid=None then
    caches for a fresh configuration."""
    from nurec_ops import _ray_layout

    M = 12800
    V = torch.eye(4, dtype=F64)[None]
    az = torch.linspace(-math.pi, math.pi, M // 32 + 1, dtype=F64)[:-1]
    el = torch.linspace(-0.3, 0.1, 32, dtype=F64)
    E, A = torch.meshgrid(el, az, indexing="ij")
    spin = torch.stack((E.cos() * A.cos(), E.cos() * A.sin(), E.sin()), -1).reshape(-1, 3)
    ge_s, ga_s = nurec_ops.suggest_ray_grid(V, spin)
    ge_r, ga_r = nurec_ops.suggest_ray_grid(V, rosette(M))
    for ge, ga in ((ge_s, ga_s), (ge_r, ga_r)):
        assert 0.7 * M / 128 <= ge * ga <= 1.3 * M / 128
    assert ga_s > 8 * ge_s  # 2 pi of azimuth against 0.4 rad of elevation
    assert 0.5 <= ga_r / ge_r <= 2  # a 70 degree cone
    _ray_layout._GRIDS.pop(("cpu", None, 1, M), None)
    s = random_gaussians(50)
    nurec_ops.rasterize_rays(**s, viewmats=V, ray_origins=torch.zeros(M, 3, dtype=F64), ray_directions=spin)
    assert _ray_layout._GRIDS[("cpu", None, 1, M)] == (ge_s, ga_s)
    with pytest.raises(RuntimeError, match="ray_directions"):
        nurec_ops.suggest_ray_grid(V, spin[:, :2])


@pytest.mark.parametrize("device", DEVICES)
def test_unusable_rays_are_nan(device, seed):
    """A ray with a non-finite origin or direction or a zero direction gets
    NaN outputs and no gradient; the other rays are those of the bundle
    without it."""
    torch.manual_seed(seed)
    s = random_scene(C=1, M=300)
    bad = torch.tensor([3, 50, 51, 299])
    s["ray_origins"][0, 3] = float("nan")
    s["ray_directions"][0, 50] = 0.0
    s["ray_directions"][0, 51, 1] = float("inf")
    s["ray_origins"][0, 299, 2] = float("-inf")
    out, g = forward_backward(nurec_ops.rasterize_rays, to(s, device, F64), seed)
    for o in out:
        assert torch.isnan(o[0, bad]).all()
        keep = torch.ones(300, dtype=torch.bool)
        keep[bad] = False
        assert torch.isfinite(o[0, keep]).all()
    assert all(torch.isfinite(v).all() for v in g.values())
    good = dict(s)
    keep = torch.ones(300, dtype=torch.bool)
    keep[bad] = False
    good["ray_origins"] = s["ray_origins"][:, keep]
    good["ray_directions"] = s["ray_directions"][:, keep]
    alone = nurec_ops.rasterize_rays(**to(good, device, F64, grad=False))
    for a, b in zip(out, alone):
        torch.testing.assert_close(a[:, keep], b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_shared_rays_broadcast(device, seed):
    """[M, 3] rays (and [M] times) serve every sensor as [C, M, 3] copies do."""
    torch.manual_seed(seed)
    s = random_scene(C=2, M=200, rolling=True)
    shared = dict(s, ray_origins=s["ray_origins"][0], ray_directions=s["ray_directions"][0],
                  ray_times=s["ray_times"][0])
    full = dict(s, ray_origins=s["ray_origins"][:1].expand(2, -1, -1), ray_directions=s["ray_directions"][:1].expand(2, -1, -1),
                ray_times=s["ray_times"][:1].expand(2, -1))
    a = nurec_ops.rasterize_rays(**to(shared, device, F64, grad=False))
    b = nurec_ops.rasterize_rays(**to(full, device, F64, grad=False))
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, rtol=0, atol=0, equal_nan=True)


def test_range_is_the_distance_to_an_opaque_surface():
    """A wall of flat opaque Gaussians 10 m ahead: every ray that hits it
    reads its distance along the ray (10 / cos of its angle) and alpha ~1."""
    g = torch.stack(torch.meshgrid(torch.linspace(-6, 6, 49, dtype=F64), torch.linspace(-6, 6, 49, dtype=F64),
                                   indexing="ij"), -1).reshape(-1, 2)
    N = g.shape[0]
    means = torch.cat((torch.full((N, 1), 10.0, dtype=F64), g), -1)
    quats = torch.tensor([[1.0, 0, 0, 0]], dtype=F64).expand(N, 4)
    scales = torch.tensor([[0.01, 0.25, 0.25]], dtype=F64).expand(N, 3)
    opac = torch.full((N,), 0.99, dtype=F64)
    d = rosette(400, fov=math.radians(40.0))
    out = nurec_ops.rasterize_rays(means, quats, scales, opac, torch.ones(N, 1, dtype=F64),
                                   torch.eye(4, dtype=F64)[None], torch.zeros(400, 3, dtype=F64), d)
    want = 10.0 / d[:, 0]
    assert (out.alpha[0, :, 0] > 0.999).all()
    torch.testing.assert_close(out.range[0, :, 0] / out.alpha[0, :, 0], want, rtol=2e-3, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_real_lidar_table_as_rays(device, seed):
    """A real spinning lidar (the 128-row calibration of shared data,
    reduced) as a ray bundle: its rays from the row-offset table, parity
    with the reference on the CPU and CUDA."""
    path = shared_data.require(shared_data.LIDAR)
    torch.manual_seed(seed)
    model = reduce_lidar_model(load_lidar_model(path, dtype=F64), row_step=8, col_step=30)
    d = lidar_model_rays(model)
    s = random_gaussians(200, centre=(0.0, 0.0, 0.0))
    s["means"] = s["means"] * torch.tensor([2.0, 2.0, 0.3], dtype=F64)
    s.update(viewmats=sensor_poses(1), ray_origins=torch.zeros(d.shape, dtype=F64), ray_directions=d)
    check_parity(s, device, F64, seed)


BAD = [
    (dict(ray_origins=torch.zeros(2, 5, 3)), "ray_origins"),
    (dict(ray_directions=torch.zeros(5, 2)), "ray_directions"),
    (dict(near=-1.0), "near"),
    (dict(far=0.0), "far"),
    (dict(grid=(0, 3)), "grid"),
    (dict(grid="big"), "grid"),
    (dict(viewmats_end=torch.eye(4, dtype=F64)[None]), "ray_times"),
    (dict(viewmats_end=torch.eye(4, dtype=F64)[None], ray_times=torch.zeros(7, dtype=F64)), "ray_times"),
    (dict(ray_origins=torch.zeros(1, 5, 3, dtype=torch.float32)), "ray_origins"),
    (dict(features=torch.zeros(3, 0, dtype=F64)), "features"),
    (dict(quats=torch.zeros(2, 4, dtype=F64)), "quats"),
] + [(make, name) for name, make in GAUSSIAN_ERRORS]  # the rasterizers' shared rows (tests/bad_inputs.py)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bad,name", BAD, ids=[f"{n}-{i}" for i, (_, n) in enumerate(BAD)])
def test_bad_inputs_raise(device, bad, name):
    s = dict(means=torch.zeros(3, 3, dtype=F64), quats=torch.ones(3, 4, dtype=F64), scales=torch.ones(3, 3, dtype=F64),
             opacities=torch.full((3,), 0.5, dtype=F64), features=torch.ones(3, 2, dtype=F64),
             viewmats=torch.eye(4, dtype=F64)[None], ray_origins=torch.zeros(1, 5, 3, dtype=F64),
             ray_directions=torch.ones(1, 5, 3, dtype=F64))
    s = bad(s) if callable(bad) else {**s, **bad}
    s = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in s.items()}
    with pytest.raises(RuntimeError, match=rf"nurec_ops\.rasterize_rays.*`?{name}"):
        nurec_ops.rasterize_rays(**s)


@pytest.mark.parametrize("device", DEVICES)
def test_bad_tables_raise_in_the_op(device):
    """The op itself (torch.ops.nurec_ops.rasterize_rays_fwd, past the
    wrapper) checks its tables' shapes and dtypes: an exception, never a
    crash."""
    s = to(random_scene(N=10, C=1, M=20), device, F64, grad=False)
    o_w, d_w, ok = ref.rasterize_rays.__globals__["world_rays"](s["viewmats"], s["ray_origins"], s["ray_directions"])
    from nurec_ops import _ray_layout

    tables = list(_ray_layout.layout(s["viewmats"], o_w, d_w, ok, 2, 3))
    base = [s["means"], s["quats"], s["scales"], s["opacities"], s["features"], o_w, d_w]
    op = torch.ops.nurec_ops.rasterize_rays_fwd
    op(*base, *tables, 0.0, 1e10, 1 << 16)  # the good call runs
    for k, bad in [(0, tables[0].long()), (1, tables[1][:, :-1]), (2, tables[2].float()), (3, tables[3][:, :1]),
                   (5, tables[5][:, :3])]:
        t = list(tables)
        t[k] = bad
        with pytest.raises(RuntimeError, match=r"nurec_ops\.rasterize_rays"):
            op(*base, *t, 0.0, 1e10, 1 << 16)


@gpu
def test_too_many_channels_for_the_cuda_grid_raise():
    """Past NUREC_RAYS_MAX_CHANNELS feature channels the CUDA forward's grid
    would not launch: the wrapper and the op itself refuse, by name (the
    CPU has no such bound)."""
    from nurec_ops.rasterize_rays import MAX_CUDA_CHANNELS

    s = to(random_scene(N=2, C=1, M=20), "cuda", torch.float32, grad=False)
    s["features"] = torch.ones(2, MAX_CUDA_CHANNELS + 1, device="cuda")
    with pytest.raises(RuntimeError, match="feature channels"):
        nurec_ops.rasterize_rays(**s)
    o_w, d_w, ok = ref.rasterize_rays.__globals__["world_rays"](s["viewmats"], s["ray_origins"], s["ray_directions"])
    from nurec_ops import _ray_layout

    tables = _ray_layout.layout(s["viewmats"], o_w, d_w, ok, 2, 3)
    base = [s["means"], s["quats"], s["scales"], s["opacities"], s["features"], o_w.float(), d_w.float()]
    with pytest.raises(RuntimeError, match="feature channels"):
        torch.ops.nurec_ops.rasterize_rays_fwd(*base, *tables, 0.0, 1e10, 1 << 16)


@gpu
@pytest.mark.sanitize
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_small_sanitized(dtype, seed):
    """A small rolling bundle on CUDA (the compute-sanitizer runs execute it)."""
    torch.manual_seed(seed)
    check_parity(random_scene(N=60, C=2, M=300, rolling=True), "cuda", dtype, seed)


@gpu
def test_cuda_large_bundle(seed):
    """Many cells and rays per cell past one block's chunk: CUDA against the
    CPU kernels (float64), forward and backward."""
    torch.manual_seed(seed)
    s = random_scene(N=2000, C=2, M=20000, rolling=True)
    a, ga = forward_backward(nurec_ops.rasterize_rays, to(s, "cpu", F64), seed, grid=(8, 6))
    b, gb = forward_backward(nurec_ops.rasterize_rays, to(s, "cuda", F64), seed, grid=(8, 6))
    for x, y in zip(a, b):
        assert_close(y, x)
    for k in GRAD_KEYS:
        assert_close(gb[k], ga[k], factor=100, msg=k)


@pytest.mark.parametrize("device", DEVICES)
def test_spinning_lidar_rays_agree_with_the_lidar_rasterizer(device, seed):
    """Two models of one sensor: a spinning lidar's own rays through the
    exact 3D response against rasterize_lidar's EWA projection into
    (azimuth, elevation). They differ by the projection's linearization and
    eps2d only, a small share of alpha and range (the street's 128 x 3600
    sweep: mean |d alpha| 0.001, range 0.7%), never a shifted or missing
    surface."""
    from nurec_ops.lidar_model import synthetic_lidar_model

    torch.manual_seed(seed)
    model = reduce_lidar_model(synthetic_lidar_model(dtype=F64), row_step=4, col_step=10)  # 32 x 360
    el, az, off = model
    R, W = el.shape[0], az.shape[0]
    d = lidar_model_rays(model)
    # a ring of opaque, rounded Gaussians 6-14 m around the sensor, within its elevations
    N = 3000
    ang = torch.rand(N, dtype=F64) * 2 * math.pi
    rad = 6 + 8 * torch.rand(N, dtype=F64)
    z = rad * torch.tan(torch.empty(N, dtype=F64).uniform_(-0.3, 0.15))
    means = torch.stack((rad * torch.cos(ang), rad * torch.sin(ang), z), -1)
    s = dict(means=means, quats=torch.randn(N, 4, dtype=F64), scales=torch.full((N, 3), 0.25, dtype=F64),
             opacities=torch.full((N,), 0.9, dtype=F64), features=torch.rand(N, 1, dtype=F64))
    s = {k: v.to(device) for k, v in s.items()}
    V = torch.eye(4, dtype=F64, device=device)[None]
    a = nurec_ops.rasterize_rays(**s, viewmats=V, ray_origins=torch.zeros_like(d).to(device),
                                 ray_directions=d.to(device), near=0.5, far=200.0)
    b = nurec_ops.rasterize_lidar(**s, viewmats=V, row_elevations=el.to(device), column_azimuths=az.to(device),
                                  row_azimuth_offsets=off.to(device))
    alpha_a, alpha_b = a.alpha[0, :, 0].reshape(R, W), b.alpha[0, :, :, 0]
    assert alpha_b.mean() > 0.3
    assert (alpha_a - alpha_b).abs().mean() < 0.02
    hit = (alpha_a > 0.9) & (alpha_b > 0.9)
    ra, rb = a.range[0, :, 0].reshape(R, W)[hit] / alpha_a[hit], b.range[0, :, :, 0][hit] / alpha_b[hit]
    assert hit.float().mean() > 0.2
    assert ((ra - rb).abs() / rb).mean() < 0.02
