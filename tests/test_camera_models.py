"""The camera models of SPEC section 6 (reference twins, nurec_ops.reference
.camera_models) on the real calibrations of ../shared/data/gsplat/, loaded
by nurec_ops.sensors, against independent implementations: OpenCV's
``projectPoints`` and ``fisheye.projectPoints``, and NCore's camera models
(``nvidia-ncore``, NVIDIA's own FTheta), to 1e-6 px in float64 over each
camera's valid field, Jacobians included."""
import importlib
import math

import numpy as np
import pytest
import torch

import shared_data
from nurec_ops import sensors

cm = importlib.import_module("nurec_ops.reference.camera_models")

FILES = {"ftheta": shared_data.FTHETA, "fisheye": shared_data.FISHEYE, "opencv": shared_data.PINHOLE_RIG}


def _records(model):
    return sensors.read_cameras(shared_data.require(FILES[model]))


def _one(params, i):
    return {k: v[i] for k, v in params.items()}


def _field_points(model, p, n=4000, seed=0):
    """Camera-space points inside a camera's valid field, 1-60 m away: angles
    up to 98% of max_angle (fisheye, ftheta), or within the image's field and
    the monotone part of the radial map (opencv)."""
    g = torch.Generator().manual_seed(seed)
    r = 1 + 59 * torch.rand(n, generator=g, dtype=torch.float64)
    if model in ("fisheye", "ftheta"):
        th = 0.98 * float(p["max_angle"]) * torch.sqrt(torch.rand(n, generator=g, dtype=torch.float64))
        ph = 2 * math.pi * torch.rand(n, generator=g, dtype=torch.float64)
        return r[:, None] * torch.stack((th.sin() * ph.cos(), th.sin() * ph.sin(), th.cos()), -1)
    K = p["Ks"]
    lim = 0.9 * float(cm.opencv_max_radius(p["radial"]))
    ax, ay = float(K[0, 2] / K[0, 0]), float(K[1, 2] / K[1, 1])
    a = (torch.rand(n, generator=g, dtype=torch.float64) * 2 - 1) * min(1.2 * ax, lim)
    b = (torch.rand(n, generator=g, dtype=torch.float64) * 2 - 1) * min(1.2 * ay, lim)
    keep = a * a + b * b < lim * lim
    a, b, r = a[keep], b[keep], r[keep]
    return torch.stack((a * r, b * r, r), -1)


def test_loader_reads_every_real_camera():
    for model, f in FILES.items():
        for name, rec in _records(model).items():
            got, params, (W, H) = sensors.camera_params(rec)
            assert got == model and W > 0 and H > 0, name
    rig = sensors.load_camera_rig(shared_data.require(shared_data.FTHETA))
    assert rig.camera_model == "ftheta" and len(rig.names) == 6
    assert rig.params["angle_to_pixel"].shape == (6, 6) and rig.T_sensor_rig.shape == (6, 4, 4)


def test_opencv_matches_cv2():
    cv2 = pytest.importorskip("cv2")
    for name, rec in _records("opencv").items():
        _, p, _ = sensors.camera_params(rec)
        pts = _field_points("opencv", p)
        ours, valid = cm.project("opencv", pts, p)
        assert valid.all()
        it = rec["intrinsics"]
        K = np.array([[it["focal_length"][0], 0, it["principal_point"][0]], [0, it["focal_length"][1],
                      it["principal_point"][1]], [0, 0, 1]], dtype=np.float64)
        k, t, s = it["radial_coeffs"], it["tangential_coeffs"], it["thin_prism_coeffs"]
        dist = np.array([k[0], k[1], t[0], t[1], k[2], k[3], k[4], k[5], s[0], s[1], s[2], s[3]], dtype=np.float64)
        theirs, _ = cv2.projectPoints(pts.numpy()[:, None, :], np.zeros(3), np.zeros(3), K, dist)
        theirs = torch.from_numpy(theirs[:, 0, :])  # the same function of the same principal point
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6, msg=name)


def test_fisheye_matches_cv2():
    cv2 = pytest.importorskip("cv2")
    for name, rec in _records("fisheye").items():
        _, p, _ = sensors.camera_params(rec)
        pts = _field_points("fisheye", p)
        pts = pts[cm.ray_angle(pts) < 0.49 * math.pi]  # OpenCV divides by z: its field ends before 90 degrees
        ours, valid = cm.project("fisheye", pts, p)
        assert valid.all()
        it = rec["intrinsics"]
        K = np.array([[it["focal_length"][0], 0, it["principal_point"][0]], [0, it["focal_length"][1],
                      it["principal_point"][1]], [0, 0, 1]], dtype=np.float64)
        D = np.array(it["forward_poly"], dtype=np.float64).reshape(4, 1)
        theirs, _ = cv2.fisheye.projectPoints(pts.numpy()[:, None, :], np.zeros(3), np.zeros(3), K, D)
        theirs = torch.from_numpy(theirs[:, 0, :])
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6, msg=name)


def _ncore_model(model, rec):
    ncd = pytest.importorskip("ncore.data")
    ncs = pytest.importorskip("ncore.sensors")
    it = rec["intrinsics"]
    common = dict(resolution=np.array(rec["resolution"], dtype=np.uint64),
                  shutter_type=ncd.ShutterType(int(rec.get("shutter_type", 5))))
    if model == "ftheta":
        P = ncd.FThetaCameraModelParameters
        params = P(principal_point=np.array(it["principal_point"], dtype=np.float32),
                   reference_poly=P.PolynomialType(int(it["reference_poly"])),
                   pixeldist_to_angle_poly=np.array(it["pixeldist_to_angle_poly"], dtype=np.float32),
                   angle_to_pixeldist_poly=np.array(it["angle_to_pixeldist_poly"], dtype=np.float32),
                   max_angle=float(it["max_angle_rad"]), linear_cde=np.array(it["linear_cde"], dtype=np.float32),
                   **common)
    elif model == "fisheye":
        params = ncd.OpenCVFisheyeCameraModelParameters(
            principal_point=np.array(it["principal_point"], dtype=np.float32),
            focal_length=np.array(it["focal_length"], dtype=np.float32),
            radial_coeffs=np.array(it["forward_poly"], dtype=np.float32), max_angle=float(it["max_angle_rad"]),
            **common)
    else:
        params = ncd.OpenCVPinholeCameraModelParameters(
            principal_point=np.array(it["principal_point"], dtype=np.float32),
            focal_length=np.array(it["focal_length"], dtype=np.float32),
            radial_coeffs=np.array(it["radial_coeffs"], dtype=np.float32),
            tangential_coeffs=np.array(it["tangential_coeffs"], dtype=np.float32),
            thin_prism_coeffs=np.array(it["thin_prism_coeffs"], dtype=np.float32), **common)
    return ncs.camera_model_from_parameters(params, device="cpu", dtype=torch.float64), params


def _as_float32(rec):
    """The record with its intrinsics rounded to float32, as NCore stores them."""
    it = dict(rec["intrinsics"])
    for k, v in it.items():
        if isinstance(v, list):
            it[k] = [float(np.float32(x)) for x in v]
        elif isinstance(v, float):
            it[k] = float(np.float32(v)) if k != "max_angle_rad" else v
    return dict(rec, intrinsics=it)


@pytest.mark.parametrize("model", ["ftheta", "fisheye", "opencv"])
def test_models_match_ncore(model):
    """The same calibration means the same rays: our pixels (origin at the
    first pixel's top-left corner) are NCore's image points, and our
    Jacobians NCore's, wherever both call a point valid."""
    for name, rec in _records(model).items():
        rec32 = _as_float32(rec)
        _, p, _ = sensors.camera_params(rec32)
        ncam, _ = _ncore_model(model, rec32)
        pts = _field_points(model, p, n=1500)
        ours, valid = cm.project(model, pts, p)
        out = ncam.camera_rays_to_image_points(pts.clone(), return_jacobians=True)
        both = valid & out.valid_flag.bool()
        assert both.float().mean() > 0.3, name  # NCore also drops points outside the image
        torch.testing.assert_close(ours[both], out.image_points[both], rtol=0, atol=1e-6, msg=name)
        J = cm.jacobian(model, pts[both], p)
        torch.testing.assert_close(J, out.jacobians[both], rtol=1e-6, atol=1e-8, msg=f"{name} Jacobian")


@pytest.mark.parametrize("model", ["ftheta", "fisheye", "opencv"])
def test_scaled_calibration_scales_pixels(model):
    """A calibration resized by s maps every ray to s times its pixel
    (pixels measured from the top-left corner)."""
    rec = next(iter(_records(model).values()))
    _, p1, (W1, H1) = sensors.camera_params(rec)
    _, ps, (Ws, Hs) = sensors.camera_params(rec, scale=0.25)
    pts = _field_points(model, p1, n=500)
    a, _ = cm.project(model, pts, p1)
    b, _ = cm.project(model, pts, ps)
    torch.testing.assert_close(b, 0.25 * a, rtol=0, atol=1e-9)
    assert (Ws, Hs) == (round(W1 * 0.25), round(H1 * 0.25))


def test_ftheta_backward_reference_inverts():
    """With the backward polynomial as reference (reference_poly 1), the
    projection inverts it (Newton steps): theta = pixel_to_angle(delta)."""
    rec = _records("ftheta")["camera_front_wide_120fov"]
    _, p, _ = sensors.camera_params(rec)
    p = dict(p, reference_poly=torch.tensor(1))
    pts = _field_points("ftheta", p, n=800)
    uv, _ = cm.project("ftheta", pts, p)
    theta = cm.ray_angle(pts)
    c, d, e = p["linear_cde"]
    du = uv - p["principal_point"] - 0.5  # (c u0 + d v0, e u0 + v0)
    v0 = (du[:, 1] - e * du[:, 0] / c) / (1 - e * d / c)
    u0 = (du[:, 0] - d * v0) / c
    delta = torch.sqrt(u0 * u0 + v0 * v0)
    back = sum(p["pixel_to_angle"][i] * delta ** i for i in range(6))
    torch.testing.assert_close(back, theta, rtol=0, atol=1e-9)


# ------------------------------------------- the reference rasterizer's models

import test_rasterize_camera as tc  # noqa: E402
from near_cuts import away_from_cuts, gradcheck_inputs  # noqa: E402
from nurec_ops import reference as ref  # noqa: E402


def _scene(C=2, N=60, W=24, H=18):
    return tc.to(tc.random_scene(N=N, C=C, W=W, H=H), "cpu", torch.float64, grad=False)


def _run_model(s, model, **kw):
    return tc.run(lambda *a, **k: ref.rasterize_camera(*a, **k, camera_model=model, **kw), s)


def test_reference_opencv_without_distortion_is_pinhole():
    s = _scene()
    z = lambda k: torch.zeros(2, k, dtype=torch.float64)  # noqa: E731
    for a, b in zip(tc.run(ref.rasterize_camera, s), _run_model(s, "opencv", radial=z(6), tangential=z(2),
                                                                 thin_prism=z(4))):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_reference_ftheta_linear_is_equidistant_fisheye():
    """FTheta with delta = f theta and no linear term is the equidistant
    fisheye with k = 0 (FTheta's principal point is a pixel centre: half a
    pixel less)."""
    s = _scene()
    K = s["Ks"]
    f = K[:, 0, 0]
    s["Ks"] = K.clone()
    s["Ks"][:, 1, 1] = f
    wide = torch.full((2,), 1.4, dtype=torch.float64)
    a = _run_model(s, "fisheye", radial=torch.zeros(2, 4, dtype=torch.float64), max_angle=wide)
    c = torch.zeros(2, 6, dtype=torch.float64)
    c[:, 1] = f
    b = _run_model(s, "ftheta", principal_point=K[:, :2, 2] - 0.5, angle_to_pixel=c,
                   linear_cde=torch.tensor([[1.0, 0.0, 0.0]] * 2, dtype=torch.float64), max_angle=wide)
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, rtol=0, atol=1e-10)


@pytest.mark.parametrize("model", ["opencv", "fisheye", "ftheta"])
def test_reference_models_gradcheck(model):
    """Gradients of the reference render through each model, the model's
    Jacobian included (float64; a few Gaussians, small image, drawn away
    from the 1/255 and 1e-4 cuts)."""
    draw = lambda: tc.to(tc.random_scene(N=6, C=1, W=10, H=8), "cpu", torch.float64)  # noqa: E731
    K = draw()["Ks"]  # the same cameras every draw
    kw = {"opencv": dict(radial=torch.tensor([[0.05, -0.02, 0.0, 0.0, 0.0, 0.0]], dtype=torch.float64),
                         tangential=torch.tensor([[1e-3, -1e-3]], dtype=torch.float64),
                         thin_prism=torch.zeros(1, 4, dtype=torch.float64)),
          "fisheye": dict(radial=torch.tensor([[0.02, 0.01, 0.0, 0.0]], dtype=torch.float64),
                          max_angle=torch.tensor([1.3], dtype=torch.float64)),
          "ftheta": dict(principal_point=K[:, :2, 2] - 0.5,
                         angle_to_pixel=torch.tensor([[0.0, float(K[0, 0, 0]), -1.0, 0.5, 0.0, 0.0]], dtype=torch.float64),
                         linear_cde=torch.tensor([[1.0, 1e-3, 2e-3]], dtype=torch.float64),
                         max_angle=torch.tensor([1.3], dtype=torch.float64))}[model]
    s = away_from_cuts(draw, lambda s: _run_model(s, model, **kw))
    keys = ("means", "scales")
    assert gradcheck_inputs(lambda x: _run_model(x, model, **kw), s, keys)


def test_reference_renders_through_the_real_ftheta_rig():
    """The six real FTheta cameras, resized to 1/40 (96 x 54), see Gaussians
    spread around the rig: finite images, each camera sees some."""
    rig = sensors.load_camera_rig(shared_data.require(shared_data.FTHETA), scale=1 / 40, dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    N = 300
    ang = torch.rand(N, generator=g, dtype=torch.float64) * 2 * math.pi
    r = 4 + 10 * torch.rand(N, generator=g, dtype=torch.float64)
    means = torch.stack((r * ang.cos(), r * ang.sin(), 1.5 * torch.rand(N, generator=g, dtype=torch.float64)), -1)
    V = torch.linalg.inv(rig.T_sensor_rig)  # rig -> camera (the rig frame is the world here)
    out = ref.rasterize_camera(means, torch.randn(N, 4, generator=g, dtype=torch.float64),
                               torch.full((N, 3), 0.4, dtype=torch.float64),
                               torch.full((N,), 0.8, dtype=torch.float64), torch.rand(N, 3, dtype=torch.float64),
                               V, torch.eye(3, dtype=torch.float64).expand(6, 3, 3), rig.width, rig.height,
                               camera_model="ftheta", **rig.params)
    assert all(torch.isfinite(o).all() for o in out)
    assert (out[2].flatten(1).amax(1) > 0.5).all()  # every camera sees Gaussians
