"""Median depth beside the expected depth (gsplat issue 930), camera and
lidar: ``median_depth=True`` adds the depth (camera z, lidar range) of each
cell's median Gaussian, the first in compositing order after which the
cell's transmittance is at most one half. The registry rows
(tests/op_cases.py: camera-median-*, lidar-median-*) give parity with the
reference, opcheck, compile, graphs, no sync, poison and overflow; here:
hand-built scenes whose median is known exactly, its gradient, real data
(gsplat's garden fixture, real lidar tables), the raw ops' bad inputs and
lists that are not a forward's."""
import importlib
import math
import warnings

import pytest
import torch

import nurec_ops
from nurec_ops import reference as ref

import test_rasterize_camera as tc
import test_rasterize_lidar as tl
from conftest import DEVICES, DTYPES, gpu
from poison import poison_allocator
from test_real_inputs import _garden, _real_like_tables
from tolerances import assert_close

OPS = torch.ops.nurec_ops


# ------------------------------------------------------------ exact scenes

def _camera_pair(o_front, o_back, device, dtype):
    """Two wide Gaussians on the optical axis of one 16 x 16 camera at
    z = 2 and z = 5 (alpha at the centre pixel within 1e-3 of the
    opacity)."""
    t = dict(device=device, dtype=dtype)
    means = torch.tensor([[0.0, 0.0, 2.0], [0.0, 0.0, 5.0]], **t).requires_grad_(True)
    quats = torch.tensor([[1.0, 0, 0, 0]] * 2, **t)
    scales = torch.tensor([[50.0] * 3] * 2, **t)
    opacities = torch.tensor([o_front, o_back], **t)
    feats = torch.rand(2, 3, **t)
    K = torch.tensor([[[20.0, 0, 8], [0, 20.0, 8], [0, 0, 1]]], **t)
    return means, (means, quats, scales, opacities, feats, torch.eye(4, **t)[None], K, 16, 16)


@pytest.mark.sanitize
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("o_front, o_back, expect", [
    (0.3, 0.6, 5.0),   # T: 0.7, then 0.28: the back one crosses one half
    (0.6, 0.6, 2.0),   # the front one alone takes T to 0.4
    (0.2, 0.2, 0.0),   # T = 0.64 at the end: no median (alpha < 0.5)
    (0.45, 0.2, 5.0),  # T: 0.55, then 0.44: a faint Gaussian behind crosses
])
def test_camera_median_of_two(device, dtype, o_front, o_back, expect):
    means, args = _camera_pair(o_front, o_back, device, dtype)
    out = nurec_ops.rasterize_camera(*args, median_depth=True)
    assert out._fields == ("render", "depth", "alpha", "median_depth")
    m = out.median_depth
    assert m.shape == (1, 16, 16, 1) and m.dtype == dtype
    centre = m[0, 7:9, 7:9, 0]
    assert torch.equal(centre, torch.full_like(centre, expect))
    if expect == 0.0:
        return
    # the median's gradient is its Gaussian's depth's: d z / d mean = (0, 0, 1) per pixel choosing it
    (g,) = torch.autograd.grad(m.sum(), means)
    chosen = 0 if expect == 2.0 else 1
    count = float((m == expect).sum())
    want = torch.zeros_like(g)
    want[chosen, 2] = count
    assert count > 100
    assert torch.equal(g, want)


def _lidar_pair(o_front, o_back, device, dtype):
    """Two wide Gaussians straight ahead of one lidar at ranges 3 and 7."""
    t = dict(device=device, dtype=dtype)
    means = torch.tensor([[3.0, 0.0, 0.0], [7.0, 0.0, 0.0]], **t).requires_grad_(True)
    el = torch.linspace(-0.1, 0.1, 5, **t)
    az = torch.linspace(-math.pi, math.pi, 361, **t)[:-1]
    return means, (means, torch.tensor([[1.0, 0, 0, 0]] * 2, **t), torch.tensor([[30.0] * 3] * 2, **t),
                   torch.tensor([o_front, o_back], **t), torch.rand(2, 2, **t), torch.eye(4, **t)[None], el, az,
                   torch.zeros(5, **t))


@pytest.mark.sanitize
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("o_front, o_back, expect", [(0.3, 0.6, 7.0), (0.6, 0.6, 3.0), (0.2, 0.2, 0.0)])
def test_lidar_median_of_two(device, dtype, o_front, o_back, expect):
    means, args = _lidar_pair(o_front, o_back, device, dtype)
    out = nurec_ops.rasterize_lidar(*args, median_depth=True)
    assert out._fields == ("features", "range", "alpha", "median_range")
    ahead = out.median_range[0, :, 180, 0]  # azimuth 0, every row
    torch.testing.assert_close(ahead, torch.full_like(ahead, expect), rtol=1e-6, atol=1e-6)
    if expect:
        (g,) = torch.autograd.grad(out.median_range.sum(), means)
        chosen = 0 if expect == 3.0 else 1
        assert g[1 - chosen].abs().max() == 0 and g[chosen, 0] > 0  # d range / d mean: the unit ray, summed


@pytest.mark.parametrize("device", DEVICES)
def test_outputs_without_median_are_unchanged(device):
    """Asking for the median changes no other output, and a call with
    return_meta returns the median before meta."""
    s = tc.to(tc.random_scene(N=80, C=2, W=24, H=16), device, torch.float64, grad=False)
    plain = tc.run(nurec_ops.rasterize_camera, s)
    both = tc.run(nurec_ops.rasterize_camera, dict(s, median_depth=True, return_meta=True))
    assert both._fields == ("render", "depth", "alpha", "median_depth", "meta")
    for a, b in zip(plain, both[:3]):
        assert torch.equal(a, b)
    has = both.median_depth > 0
    assert has.any() and not has.all()
    if device == "cpu":  # the same walk in the same arithmetic: a median exactly where alpha >= 0.5
        assert torch.equal(has, both.alpha >= 0.5)


# --------------------------------------------------------------- real data

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_garden_median_matches_reference(device, dtype):
    """gsplat's garden fixture (a subset of its points, its 3 cameras at a
    tenth of their resolution): the median against the reference, and
    against the expected depth where alpha is near one (where both are
    the surface's depth)."""
    s = _garden(n=1500, seed=1)
    s["Ks"] = s["Ks"].clone()
    s["Ks"][:, :2] /= 10
    W, H = s["width"] // 10, s["height"] // 10
    s["scales"] = s["scales"] * 4  # the fixture's Gaussians cover the coarser pixels
    C, N = s["viewmats"].shape[0], s["means"].shape[0]
    feats = torch.rand(N, 3, dtype=torch.float64)
    args = [s["means"], s["quats"], s["scales"], s["opacities"], feats, s["viewmats"], s["Ks"]]
    r = ref.rasterize_camera(*args, W, H, median_depth=True)
    dev = [a.to(device, dtype) for a in args]
    poison_allocator(device)
    out = nurec_ops.rasterize_camera(*dev, W, H, median_depth=True)
    m, e = out.median_depth.double().cpu(), r[3]
    has = e > 0
    assert has.float().mean() > 0.05, "the scene tests nothing"
    if dtype == torch.float64:
        assert_close(m, e, torch.float64)
    else:  # a float32 alpha next to the one-half cut may pick the neighbouring Gaussian
        off = ((m - e).abs() > 1e-4 * e.abs().clamp_min(1)).float().mean()
        assert off < 2e-3, f"{float(off):.4f} of the pixels differ"


@pytest.mark.sanitize
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("table", ["rotated-wrapped", "counter-clockwise", "sector", "wrap-mid-tile"])
def test_lidar_median_on_real_tables(device, table):
    """The median range on real column tables (wrapped anywhere, either
    spin, a sector) against the reference, in the user's column order; its
    gradient too."""
    scene = tl.random_scene(N=150, C=2, D=2)
    scene["column_azimuths"] = _real_like_tables()[table]
    s = tl.to(scene, device, torch.float64)
    r = tl.to(scene, "cpu", torch.float64)
    out = tl.run(nurec_ops.rasterize_lidar, dict(s, median_depth=True))
    expect = tl.run(ref.rasterize_lidar, dict(r, median_depth=True))
    assert (expect[3] > 0).sum() > 20, "the scene tests nothing"
    assert_close(out[3], expect[3], torch.float64, msg="median_range")
    cot = torch.randn_like(expect[3])
    g = torch.autograd.grad(out[3], s["means"], cot.to(device))[0]
    ge = torch.autograd.grad(expect[3], r["means"], cot)[0]
    assert ge.abs().max() > 0
    assert_close(g, ge, torch.float64, msg="grad means")


# ------------------------------------------------------- the raw ops' inputs

SEGMENT_MIN = 2  # the forward below cuts its CUDA lists into parts of at least 2 entries


def _camera_forward(device, dtype=torch.float64):
    s = tc.to(tc.random_scene(N=80, C=2, W=24, H=16), device, dtype, grad=False)
    parts = 16 if device == "cuda" else 0
    out = OPS.rasterize_camera_fwd(s["means"], s["quats"], s["scales"], s["opacities"], s["features"],
                                   s["viewmats"], s["Ks"], None, 24, 16, 0.01, 1e10, -1, parts, SEGMENT_MIN, 1 << 14)
    return out[3], out[6], out[7], out[10], out[8], out[11], out[12]


@pytest.mark.parametrize("device", DEVICES)
def test_median_op_bad_inputs_raise(device):
    rec, isect, ranges, status, T, ss, sl = _camera_forward(device)
    P = (ss, sl, SEGMENT_MIN)
    bad = [
        ((rec[..., :7], isect, ranges, status, T, *P, 24, 16), "`records` must have shape"),
        ((rec.float(), isect, ranges, status, T.float(), ss.float(), sl, SEGMENT_MIN, 24, 16), None),  # float32 throughout
        ((rec, isect.long(), ranges, status, T, *P, 24, 16), "`isect_items` must be int32"),
        ((rec, isect, ranges, status, T, *P, 40, 16), "`tile_ranges` must have shape"),
        ((rec, isect, ranges, status[:1], T, *P, 24, 16), "`status` must have shape"),
        ((rec, isect, ranges.int(), status, T, *P, 24, 16), "`tile_ranges` must be int64"),
        ((rec, isect, ranges, status, T[:, :8], *P, 24, 16), "`final_T` must have shape"),
        ((rec, isect, ranges, status, T.float(), *P, 24, 16), "`final_T` is float32 but `records` is float64"),
        ((rec, isect, ranges, status, T, ss[..., :1, :], sl, SEGMENT_MIN, 24, 16), "`seg_state` must have shape"),
        ((rec, isect, ranges, status, T, ss, sl.long(), SEGMENT_MIN, 24, 16), "`seg_last` must be int32"),
        ((rec, isect, ranges, status, T, ss, sl, 0, 24, 16), "`segment_min` must be >= 1"),
        ((rec, isect, ranges, status, T, *P, -1, 16), "`width` must be in"),
    ]
    for args, msg in bad:
        if msg is None:
            OPS.rasterize_camera_median(*args)
            continue
        with pytest.raises(RuntimeError, match=msg):
            OPS.rasterize_camera_median(*args)
    if device == "cuda":
        with pytest.raises(RuntimeError, match="`isect_items` is on"):
            OPS.rasterize_camera_median(rec, isect.cpu(), ranges, status, T, *P, 24, 16)


@pytest.mark.sanitize
@pytest.mark.parametrize("device", DEVICES)
def test_median_op_on_lists_not_from_a_forward(device):
    """Ranges past the list, negative ranges and items out of range read
    nothing out of bounds: every answer is an item in range or none (and
    compute-sanitizer's memcheck runs this file on the GPU). Every cell
    walks (final_T zero)."""
    rec, isect, ranges, status, T, ss, sl = _camera_forward(device)
    T = torch.zeros_like(T)
    C, N = rec.shape[:2]
    g = torch.Generator().manual_seed(0)
    wild = torch.randint(-5, isect.numel() + 1000, ranges.shape, generator=g).to(ranges)
    junk = torch.randint(-(1 << 30), 1 << 30, isect.shape, generator=g, dtype=torch.int32).to(isect)
    for r, i in ((wild, isect), (ranges, junk), (wild, junk)):
        m = OPS.rasterize_camera_median(rec, i, r, status, T, ss, sl, SEGMENT_MIN, 24, 16)
        assert ((m == -1) | ((m >= 0) & (m < C * N))).all()
    el, az, off = (t.to(device, torch.float64) for t in tl.sensor(col_step=30))
    order = torch.arange(az.numel(), dtype=torch.int32, device=device)
    lrec = torch.zeros(1, 4, 8, dtype=torch.float64, device=device)
    tiles = torch.randint(-3, 50, (1, el.numel(), (az.numel() + 255) // 256, 2), generator=g).to(device)
    items = torch.randint(-9, 9, (40,), generator=g, dtype=torch.int32).to(device)
    lT = torch.zeros(1, el.numel(), az.numel(), dtype=torch.float64, device=device)
    none = torch.zeros(0, 1, 256, 4, dtype=torch.float64, device=device)
    m = OPS.rasterize_lidar_median(lrec, items, tiles, status, lT, none, none[..., 0].int(), 64, el, az, order, off)
    assert m.shape == (1, el.numel(), az.numel()) and ((m >= -1) & (m < 4)).all()


@pytest.mark.parametrize("device", DEVICES)
def test_median_ops_opcheck(device):
    """The raw ops against their fake kernels and schemas."""
    rec, isect, ranges, status, T, ss, sl = _camera_forward(device)
    torch.library.opcheck(OPS.rasterize_camera_median, (rec, isect, ranges, status, T, ss, sl, SEGMENT_MIN, 24, 16))
    s = tl.to(tl.random_scene(N=60, C=2, D=2, row_step=16, col_step=30), device, torch.float64, grad=False)
    order = torch.arange(s["column_azimuths"].numel(), dtype=torch.int32, device=device)
    out = OPS.rasterize_lidar_fwd(s["means"], s["quats"], s["scales"], s["opacities"], s["features"], s["viewmats"],
                                  s["row_elevations"], s["column_azimuths"], order, s["row_azimuth_offsets"], 0.5,
                                  200.0, 1e-4, 0, 1, 1 << 14)
    torch.library.opcheck(OPS.rasterize_lidar_median, (out[3], out[5], out[6], out[9], out[7], out[10], out[11], 512,
                                                       s["row_elevations"],
                                                       s["column_azimuths"], order, s["row_azimuth_offsets"]))


@gpu
def test_median_of_an_overflowed_call_is_nan():
    """A forward whose binning overflows (a fixed capacity too small, no
    sync) gives a NaN median, as its other outputs, never a wrong one."""
    s = tc.to(tc.random_scene(N=200, C=1, W=32, H=32), "cuda", torch.float32, grad=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the overflow's report
        out = tc.run(nurec_ops.rasterize_camera, dict(s, median_depth=True, capacity=4))
        torch.cuda.synchronize()
    assert torch.isnan(out.depth).all() and torch.isnan(out.median_depth).all()


@gpu
@pytest.mark.sanitize
@pytest.mark.parametrize("sensor", ["camera", "lidar"])
def test_median_from_the_parts_equals_the_whole_walk(monkeypatch, sensor):
    """Lists cut into parts (CUDA): a cell's walk that starts at the part
    its median lies in, from the forward's transmittance there, picks the
    Gaussian a walk of the whole list picks (float64: up to a transmittance
    within rounding of one half)."""
    import op_cases
    from nurec_ops import _median

    module = nurec_ops.rasterize_camera if sensor == "camera" else nurec_ops.rasterize_lidar
    monkeypatch.setattr(importlib.import_module(module.__module__), "_SEGMENT_MIN", 32 if sensor == "camera" else 64)
    s = op_cases._camera_long("cuda", torch.float64) if sensor == "camera" else op_cases._lidar_long("cuda", torch.float64)
    run = tc.run if sensor == "camera" else tl.run
    with torch.no_grad():
        cut = run(module, dict(s, median_depth=True))[3]
        monkeypatch.setattr(_median, "USE_PARTS", False)
        whole = run(module, dict(s, median_depth=True))[3]
    assert (whole > 0).float().mean() > 0.05
    assert (cut != whole).float().mean() < 1e-3
