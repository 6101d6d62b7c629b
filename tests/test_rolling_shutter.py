"""SPEC section 7's rolling shutter on the camera rasterizer: the fused op
(C on the CPU, CUDA) against the reference twin for every shutter
direction, pinhole and SPEC 6 models, float32 and float64, gradients
included; a global shutter (or no end pose) is exactly today's result; each
Gaussian's own time is a fixed point of its pixel's time (how far from it
after the SPEC's 10 steps, on the real rigs moving at 15 m/s and yawing at
3 rad/s); and at that speed the global-shutter render is measurably wrong.
"""
import importlib
import math

import pytest
import torch

import nurec_ops
import shared_data
import test_camera_models_fused as tm
import test_rasterize_camera as tc
from conftest import DEVICES, DTYPES
from nurec_ops import _rolling_shutter as RS
from nurec_ops import sensors

refcam = importlib.import_module("nurec_ops.reference.rasterize_camera")

SHUTTERS = ["top_to_bottom", "bottom_to_top", "left_to_right", "right_to_left"]


def moved(V, dx=(0.3, 0.0, 0.2), yaw=0.05):
    """World -> camera poses after the camera moved by dx (world) and
    turned by yaw about its y axis: the frame's end poses."""
    c, s = math.cos(yaw), math.sin(yaw)
    Ry = torch.tensor([[c, 0, s], [0, 1, 0], [-s, 0, c]], dtype=V.dtype)
    out = V.clone()
    R, t = V[:, :3, :3], V[:, :3, 3]
    centre = -torch.einsum("cji,cj->ci", R, t) + torch.tensor(dx, dtype=V.dtype)
    R1 = Ry @ R
    out[:, :3, :3] = R1
    out[:, :3, 3] = -torch.einsum("cij,cj->ci", R1, centre)
    return out


def rolling_scene(shutter, model=None, **kw):
    """A scene seen by moving cameras. Gaussians whose pixel lies within
    1e-3 px of a row (column) boundary at their own time are dropped: there
    float32 may round the pixel to the other row than the float64
    reference, which gives that Gaussian another time and pose (a jump the
    SPEC's floor makes, not an error)."""
    s = tm.model_scene(model, **kw) if model else tc.random_scene(N=150, C=2)
    s["viewmats_end"] = moved(s["viewmats"])
    s["shutter"] = shutter
    m = s.get("camera_model", "pinhole")
    cam = {k: v for k, v in s.items() if k in ("Ks", "radial", "tangential", "thin_prism", "max_angle",
                                                 "principal_point", "angle_to_pixel", "linear_cde",
                                                 "pixel_to_angle", "reference_poly")}
    code, sp = RS.pack("test", s["viewmats"], s["viewmats_end"], shutter)
    C, N = s["viewmats"].shape[0], s["means"].shape[0]
    tau = refcam.own_times(m, s["means"], s["viewmats"], sp, code, cam, 0.01, 1e10, s["width"], s["height"])
    uv, ok = refcam.mean_pixels(m, s["means"], RS.pose_at(sp[:, None, :].expand(C, N, RS.PARAMS), tau), cam,
                                0.01, 1e10)
    c = uv[..., 1] if shutter in ("top_to_bottom", "bottom_to_top") else uv[..., 0]
    near_edge = (ok & ((c - c.round()).abs() < 1e-3)).any(0)
    keep = ~near_edge
    for k in ("means", "quats", "scales", "opacities", "features"):
        s[k] = s[k][keep]
    return s


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shutter", SHUTTERS)
def test_parity_pinhole(device, dtype, shutter):
    tc.check_parity(rolling_scene(shutter), device, dtype, bg=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,shutter", [("ftheta", "top_to_bottom"), ("opencv", "left_to_right"),
                                          ("fisheye", "bottom_to_top")])
def test_parity_models(device, name, shutter):
    tc.check_parity(rolling_scene(shutter, name), device, torch.float64)


@pytest.mark.parametrize("device", DEVICES)
def test_parity_sh(device):
    s = rolling_scene("top_to_bottom")
    s["sh_degree"] = 2
    s["features"] = torch.randn(s["means"].shape[0], 9, 3, dtype=torch.float64) * 0.3
    tc.check_parity(s, device, torch.float64)


@pytest.mark.parametrize("device", DEVICES)
def test_global_is_todays_result(device):
    s = tc.to(tc.random_scene(N=100, C=2), device, torch.float64, grad=False)
    base = tc.run(nurec_ops.rasterize_camera, s)
    for kw in (dict(viewmats_end=moved(s["viewmats"].cpu()).to(device), shutter="global"),
               dict(viewmats_end=None, shutter="top_to_bottom")):
        out = tc.run(nurec_ops.rasterize_camera, dict(s, **kw))
        for a, b in zip(out, base):
            assert torch.equal(a, b)


def test_gradcheck():
    """Gradients with a rolling shutter (tau* held constant, as SPEC 7 says).
    The render is discontinuous where a mean's pixel crosses a row boundary
    (its time, and so its pose, jumps): a finite difference there is not a
    derivative. The scene is fixed (seed 16) and checked to keep every mean
    in view at least 0.05 px from a row boundary at its own time (a random
    scene had one 0.006 px away, and gradcheck saw the jump)."""
    torch.manual_seed(16)
    s = tc.to(tc.random_scene(N=6, C=1, W=10, H=8), "cpu", torch.float64, grad=False)
    s["viewmats_end"] = moved(s["viewmats"])
    s["shutter"] = "top_to_bottom"
    code, sp = RS.pack("test", s["viewmats"], s["viewmats_end"], "top_to_bottom")
    tau = refcam.own_times("pinhole", s["means"], s["viewmats"], sp, code, dict(Ks=s["Ks"]), 0.01, 1e10, 10, 8)
    uv, ok = refcam.mean_pixels("pinhole", s["means"], RS.pose_at(sp[:, None, :].expand(1, 6, RS.PARAMS), tau),
                                dict(Ks=s["Ks"]), 0.01, 1e10)
    v = uv[0, :, 1][ok[0] & (uv[0, :, 1] > 0) & (uv[0, :, 1] < 8)]
    assert v.numel() >= 2 and ((v - v.round()).abs() > 0.05).all(), v
    keys = ("means", "quats", "scales", "opacities")

    def f(*xs):
        return tc.run(nurec_ops.rasterize_camera, dict(s, **dict(zip(keys, xs))))

    xs = [s[k].clone().requires_grad_(True) for k in keys]
    assert torch.autograd.gradcheck(f, xs, eps=1e-6, atol=1e-5, rtol=1e-4)


def test_bad_shutter_arguments_name_them():
    s = tc.to(tc.random_scene(N=10, C=2), "cpu", torch.float64, grad=False)
    with pytest.raises(RuntimeError, match="`shutter`"):
        tc.run(nurec_ops.rasterize_camera, dict(s, viewmats_end=moved(s["viewmats"]), shutter="diagonal"))
    with pytest.raises(RuntimeError, match="`viewmats_end`"):
        tc.run(nurec_ops.rasterize_camera, dict(s, viewmats_end=s["viewmats"][:1], shutter="top_to_bottom"))


def drive(V, dt, speed=15.0, yaw_rate=3.0):
    """End poses of cameras V on a car moving forward (world +x) at `speed`
    and yawing at `yaw_rate` about world z for `dt` seconds."""
    a = yaw_rate * dt
    Rz = torch.tensor([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]], dtype=V.dtype)
    out = V.clone()
    R, t = V[:, :3, :3], V[:, :3, 3]
    centre = -torch.einsum("cji,cj->ci", R, t)
    centre = centre @ Rz.T + torch.tensor([speed * dt, 0.0, 0.0], dtype=V.dtype)
    R1 = R @ Rz.T  # world -> camera after the rig turned by Rz
    out[:, :3, :3] = R1
    out[:, :3, 3] = -torch.einsum("cij,cj->ci", R1, centre)
    return out


def rig_scene(path, scale, N=3000, seed=0, names=None):
    rig = sensors.load_camera_rig(shared_data.require(path), names=names, scale=scale, dtype=torch.float64)
    g = torch.Generator().manual_seed(seed)
    ang = torch.rand(N, generator=g, dtype=torch.float64) * 2 * math.pi
    r = 3 + 30 * torch.rand(N, generator=g, dtype=torch.float64)
    means = torch.stack((r * ang.cos(), r * ang.sin(), 2 * torch.rand(N, generator=g, dtype=torch.float64) - 0.5), -1)
    V = torch.linalg.inv(rig.T_sensor_rig)
    return rig, means, V


@pytest.mark.parametrize("path,names", [(shared_data.FTHETA, None),
                                        (shared_data.PINHOLE_RIG, ["camera_front_left", "camera_front",
                                                                   "camera_front_right"])])
def test_own_times_are_fixed_points_on_real_rigs(path, names):
    """At 15 m/s and 3 rad/s with a 30 ms readout, after the SPEC's 10 steps
    the own time of (nearly) every Gaussian in view is a fixed point: its
    pixel at its own time lies in the row whose time it is. Returns the
    fraction that is not (reported in benchmarks/RESULTS.md)."""
    rig, means, V = rig_scene(path, scale=1 / 4, names=names)
    V1 = drive(V, 0.030)
    code, sp = RS.pack("test", V, V1, "top_to_bottom")
    params = {k: v for k, v in rig.params.items() if k != "Ks"}
    K = rig.params.get("Ks", torch.eye(3, dtype=torch.float64).expand(V.shape[0], 3, 3))
    cam = dict(params, Ks=K)
    model = rig.camera_model
    tau = refcam.own_times(model, means, V, sp, code, cam, 0.01, 1e10, rig.width, rig.height)
    Vt = RS.pose_at(sp[:, None, :].expand(V.shape[0], means.shape[0], RS.PARAMS), tau)
    uv, ok = refcam.mean_pixels(model, means, Vt, cam, 0.01, 1e10)
    inside = ok & (uv[..., 0] >= 0) & (uv[..., 0] < rig.width) & (uv[..., 1] >= 0) & (uv[..., 1] < rig.height)
    resid = (RS.tau_of_pixel(code, uv, rig.width, rig.height) - tau).abs()[inside]
    assert inside.sum() > 100
    row = 1.0 / (rig.height - 1)
    not_fixed = (resid > 1e-9).double().mean().item()
    assert not_fixed < 0.01, not_fixed
    assert resid.max().item() <= 2 * row + 1e-12  # a two-cycle between neighbouring rows at worst


def test_global_shutter_is_measurably_wrong_at_speed():
    """The FTheta rig at 15 m/s, 30 ms readout: the rolling render puts the
    Gaussians where the reference's does (fused meta.means2d against the
    reference's pixel at each own time); the global render misplaces those
    read out late by many pixels."""
    rig, means, V = rig_scene(shared_data.FTHETA, scale=1 / 8, N=1500)
    V1 = drive(V, 0.030)
    N = means.shape[0]
    f64 = dict(dtype=torch.float64)
    args = (means, torch.tensor([[1.0, 0, 0, 0]], **f64).expand(N, 4), torch.full((N, 3), 0.02, **f64),
            torch.full((N,), 0.7, **f64), torch.ones(N, 3, **f64), V, torch.eye(3, **f64).expand(6, 3, 3),
            rig.width, rig.height)
    params = {k: v for k, v in rig.params.items() if k != "Ks"}
    g = nurec_ops.rasterize_camera(*args, camera_model="ftheta", return_meta=True, **params)
    r = nurec_ops.rasterize_camera(*args, camera_model="ftheta", return_meta=True, viewmats_end=V1,
                                   shutter="top_to_bottom", **params)
    code, sp = RS.pack("test", V, V1, "top_to_bottom")
    cam = dict(params, Ks=torch.eye(3, **f64).expand(6, 3, 3))
    tau = refcam.own_times("ftheta", means, V, sp, code, cam, 0.01, 1e10, rig.width, rig.height)
    uv, ok = refcam.mean_pixels("ftheta", means, RS.pose_at(sp[:, None, :].expand(6, N, RS.PARAMS), tau), cam,
                                0.01, 1e10)
    seen = (r.meta.radii > 0).all(-1) & ok
    torch.testing.assert_close(r.meta.means2d[seen], uv[seen], rtol=0, atol=1e-6)
    shift = (g.meta.means2d - r.meta.means2d).norm(dim=-1)[seen]
    late = tau[seen] > 0.5
    # at 1/8 scale (480 x 270): ~0.45 m of travel and 5 degrees of yaw over the frame
    assert shift[late].median() > 2.0, shift[late].median()
    assert r.alpha.shape == g.alpha.shape and not torch.equal(r.render, g.render)


# ------------------------------------------------------------------ the lidar

import test_rasterize_lidar as tl  # noqa: E402

lidar_ref = importlib.import_module("nurec_ops.reference.rasterize_lidar")


def lidar_end(V, speed=15.0, sweep=0.1, yaw=0.3):
    """End-of-sweep poses of lidars V on a car moving along world x at
    `speed` over a `sweep` of seconds, turning by `yaw` rad."""
    return drive(V, sweep, speed=speed, yaw_rate=yaw / sweep)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("times", ["default", "given"])
def test_lidar_parity(device, dtype, times):
    s = tl.random_scene(N=150, C=2, D=2)
    s["viewmats_end"] = lidar_end(s["viewmats"])
    if times == "given":
        W = s["column_azimuths"].shape[0]
        s["column_times"] = torch.rand(W, dtype=torch.float64).sort().values
    tl.check_parity(s, device, dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_lidar_parity_wrapped_table(device):
    """A real table's order (starts at 0.56 rad, clockwise, wraps inside):
    the firing times follow the user's columns."""
    s = tl.random_scene(N=150, C=2, D=1)
    az = s["column_azimuths"]
    s["column_azimuths"] = torch.remainder(-az + 0.56 + math.pi, 2 * math.pi) - math.pi
    s["viewmats_end"] = lidar_end(s["viewmats"])
    tl.check_parity(s, device, torch.float64)


@pytest.mark.parametrize("device", DEVICES)
def test_lidar_parity_uneven_table(device):
    """Columns bunched unevenly (gaps from 1e-4 to ~5 times the mean): the
    kernels' nearest-column search starts from an even table's guess, so
    here it walks and falls back to bisection; the own times must still be
    the reference's."""
    s = tl.random_scene(N=150, C=2, D=1)
    W = s["column_azimuths"].shape[0]
    gaps = torch.rand(W, dtype=torch.float64) ** 4 + 1e-4
    az = torch.cumsum(gaps, 0) - gaps[0]
    s["column_azimuths"] = az / az[-1] * (2 * math.pi * (W - 1) / W) - math.pi
    s["viewmats_end"] = lidar_end(s["viewmats"])
    tl.check_parity(s, device, torch.float64)


def test_lidar_default_column_times():
    from nurec_ops.rasterize_lidar import default_column_times
    az = torch.linspace(0.56, 0.56 - 2 * math.pi * 0.99, 100, dtype=torch.float64)  # clockwise, wraps
    az = torch.remainder(az + math.pi, 2 * math.pi) - math.pi
    t = default_column_times(az)
    assert t[0] == 0 and abs(float(t[-1]) - 1) < 1e-12
    assert (t[1:] > t[:-1]).all()  # the spin's order, across the wrap


def test_lidar_global_is_todays_result():
    s = tl.to(tl.random_scene(N=100, C=2), "cpu", torch.float64, grad=False)
    base = tl.run(nurec_ops.rasterize_lidar, s)
    out = tl.run(nurec_ops.rasterize_lidar, dict(s, viewmats_end=None))
    for a, b in zip(out, base):
        assert torch.equal(a, b)


def test_lidar_rolling_matters_at_speed():
    """A 0.1 s sweep from a car at 15 m/s: the global-shutter range image is
    metres off where the rolling one matches the reference."""
    s = tl.to(tl.random_scene(N=300, C=1, D=1), "cpu", torch.float64, grad=False)
    s["viewmats_end"] = lidar_end(s["viewmats"], yaw=0.0)
    roll = tl.run(nurec_ops.rasterize_lidar, s)
    glob = tl.run(nurec_ops.rasterize_lidar, dict(s, viewmats_end=None))
    ref = tl.run(lidar_ref.rasterize_lidar, s)
    hit = (ref[2] > 0.5) & (glob[2] > 0.5)
    r_ref = ref[1] / ref[2].clamp_min(1e-9)
    torch.testing.assert_close(roll[1], ref[1], rtol=1e-9, atol=1e-9)
    err = (glob[1] / glob[2].clamp_min(1e-9) - r_ref).abs()[hit]
    assert err.max() > 0.2, err.max()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model", ["ftheta", "opencv"])
def test_compile_fullgraph_with_model_and_rolling_shutter(device, model):
    """torch.compile(fullgraph=True) through a SPEC 6 model and SPEC 7's
    rolling shutter (their packing included) equals eager, values and
    gradients (float64)."""
    s = tc.to(rolling_scene("top_to_bottom", model, N=60), device, torch.float64)
    keys = ("means", "quats", "scales", "opacities", "features")
    extra = {k: v for k, v in s.items() if k not in keys + ("viewmats", "Ks", "width", "height", "sh_degree")}

    def f(m, q, sc, o, feat, V, K):
        r, d, a = nurec_ops.rasterize_camera(m, q, sc, o, feat, V, K, s["width"], s["height"], capacity=1 << 15,
                                             **extra)
        return r.sum() + 0.1 * d.sum() + a.sum()

    tc.check_compiled(f, [s[k] for k in keys] + [s["viewmats"], s["Ks"]], n_grad=5)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_rolling_shutter(device):
    """opcheck of the camera and lidar forwards with a rolling shutter (and
    a camera model): schemas, fake kernels, autograd registration."""
    from nurec_ops import _camera_models, _lidar_table
    from nurec_ops.rasterize_lidar import rolling_args
    s = tc.to(rolling_scene("left_to_right", "fisheye", N=30), device, torch.float64)
    code, mp, K = _camera_models.pack("rasterize_camera", "fisheye", 2, s["means"], s["Ks"],
                                      {"radial": s["radial"], "max_angle": s["max_angle"]})
    rs, end = RS.op_args("rasterize_camera", s["viewmats"], s["viewmats_end"], "left_to_right")
    args = (s["means"], s["quats"], s["scales"], s["opacities"], s["features"], s["viewmats"], K, None,
            s["width"], s["height"], 0.01, 1e10, -1, 0, 1, 1 << 14, code, mp, rs, end)
    torch.library.opcheck(torch.ops.nurec_ops.rasterize_camera_fwd.default, args)
    sl = tl.to(tl.random_scene(N=40, C=2, D=1), device, torch.float64)
    V1 = lidar_end(sl["viewmats"].cpu()).to(device)
    az, order = _lidar_table.canonical_columns(sl["column_azimuths"])
    sp_l, times = rolling_args("rasterize_lidar", sl["viewmats"], V1, sl["column_azimuths"], order, None)
    largs = (sl["means"], sl["quats"], sl["scales"], sl["opacities"], sl["features"], sl["viewmats"],
             sl["row_elevations"], az, order, sl["row_azimuth_offsets"], 0.5, 200.0, 1e-4, 0, 1, 1 << 15, sp_l,
             times)
    torch.library.opcheck(torch.ops.nurec_ops.rasterize_lidar_fwd.default, largs)
