"""SPEC section 6's camera models in the fused op (C on the CPU, CUDA; the
projection of each model in csrc/sensors/, its Jacobian and the
Jacobian's VJP by jets): images and gradients against the reference twin
for every model, with the real calibrations of ../shared/data/gsplat/
(resized to small images), float32 and float64; the projected means
(SPEC 8's meta) against OpenCV's projectPoints and NCore's camera models
to 1e-6 px on each real camera's field; gradcheck in float64.

A model is a row of MODELS: the calibration file, which camera, the scale,
and overrides of its parameters; a model no real calibration has (gsplat's
"ortho") gives its own parameters instead of a file."""
import importlib
import math

import numpy as np
import pytest
import torch

import nurec_ops
import shared_data
import test_rasterize_camera as tc
from conftest import DEVICES, DTYPES
from nurec_ops import sensors

cm = importlib.import_module("nurec_ops.reference.camera_models")
tcm = importlib.import_module("test_camera_models")

# name -> (file, camera, scale, parameter overrides)
MODELS = {
    "opencv": (shared_data.PINHOLE_RIG, "camera_front", 1 / 40, {}),
    "opencv-side": (shared_data.PINHOLE_RIG, "camera_side_left", 1 / 40, {}),
    "fisheye": (shared_data.FISHEYE, "camera_front_fisheye_140fov", 1 / 80, {}),
    "fisheye-mild": (shared_data.FISHEYE, "camera_left_fisheye_mild", 1 / 13, {}),
    "ftheta": (shared_data.FTHETA, "camera_front_wide_120fov", 1 / 80, {}),
    "ftheta-backward-poly": (shared_data.FTHETA, "camera_cross_left_120fov", 1 / 80,
                             {"reference_poly": torch.tensor(1)}),
    # no file: (None, the model, scale unused, its parameters and image "size"); a 48 x 36 image over 6 x 4.5 m
    # (8 px a metre), the centre off the middle
    "ortho": (None, "ortho", 1, {"Ks": torch.tensor([[8.0, 0, 23.0], [0, 8.0, 18.5], [0, 0, 1]],
                                                    dtype=torch.float64), "size": (48, 36)}),
}


def calibration(name, C=2):
    """(camera_model, per-camera arguments [C, ...], Ks [C, 3, 3], W, H) of a
    MODELS row, the camera repeated C times."""
    f, cam, scale, over = MODELS[name]
    if f is None:  # a model of no real calibration: its own parameters
        model, p, (W, H) = cam, {k: v for k, v in over.items() if k != "size"}, over["size"]
    else:
        rec = sensors.read_cameras(shared_data.require(f))[cam]
        model, p, (W, H) = sensors.camera_params(rec, scale=scale)
        p.update(over)
    K = p.pop("Ks", None)
    if K is None:
        K = torch.eye(3, dtype=torch.float64)
    args = {k: (v.expand(C, *v.shape) if v.dim() > 0 else v.expand(C)).clone() for k, v in p.items()}
    return model, args, K.expand(C, 3, 3).clone(), W, H


def _small_rotation(g, angle):
    axis = torch.randn(3, generator=g, dtype=torch.float64)
    axis = axis / axis.norm()
    a = angle * float(torch.rand((), generator=g, dtype=torch.float64) * 2 - 1)
    Kx = torch.tensor([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]], dtype=torch.float64)
    return torch.eye(3, dtype=torch.float64) + math.sin(a) * Kx + (1 - math.cos(a)) * Kx @ Kx


def model_scene(name, N=150, C=2, seed=0):
    """Gaussians 2-9 m in front of C cameras of a MODELS row (slightly
    rotated from the world axes), spread over the model's field and a bit
    past it (dropped there), some near the image edge (the opencv Jacobian
    clamp)."""
    g = torch.Generator().manual_seed(seed)
    model, args, K, W, H = calibration(name, C)
    r = 2 + 7 * torch.rand(N, generator=g, dtype=torch.float64)
    if model == "ortho":  # over the image and a bit past it, at depths 2-9 m
        extent = torch.tensor([W / K[0, 0, 0], H / K[0, 1, 1]], dtype=torch.float64)  # the image in metres
        xy = (torch.rand(N, 2, generator=g, dtype=torch.float64) * 1.3 - 0.15) * extent - K[0, :2, 2] / K[0, [0, 1], [0, 1]]
        dirs = torch.cat((xy / r[:, None], torch.ones(N, 1, dtype=torch.float64)), -1)  # r dirs: (x, y, r)
    elif model in ("fisheye", "ftheta"):
        th = 1.05 * float(args["max_angle"][0]) * torch.sqrt(torch.rand(N, generator=g, dtype=torch.float64))
        ph = 2 * math.pi * torch.rand(N, generator=g, dtype=torch.float64)
        dirs = torch.stack((th.sin() * ph.cos(), th.sin() * ph.sin(), th.cos()), -1)
    else:
        ax, ay = float(K[0, 0, 2] / K[0, 0, 0]), float(K[0, 1, 2] / K[0, 1, 1])
        a = (torch.rand(N, generator=g, dtype=torch.float64) * 2 - 1) * 1.4 * ax
        b = (torch.rand(N, generator=g, dtype=torch.float64) * 2 - 1) * 1.4 * ay
        dirs = torch.stack((a, b, torch.ones_like(a)), -1)
        dirs = dirs / dirs.norm(dim=-1, keepdim=True)
    means = r[:, None] * dirs
    V = torch.eye(4, dtype=torch.float64).repeat(C, 1, 1)
    for c in range(C):
        V[c, :3, :3] = _small_rotation(g, 0.1)
        V[c, :3, 3] = torch.randn(3, generator=g, dtype=torch.float64) * 0.05
    quats = tc.random_quats(N)
    # a footprint of a few pixels: perspective sizes grow with the depth, orthographic ones do not
    size = torch.full_like(r, 10.0) if model == "ortho" else r
    scales = torch.exp(torch.randn(N, 3, generator=g, dtype=torch.float64) * 0.4 - 2.6) * size[:, None] / 4
    return dict(means=means, quats=quats, scales=scales, opacities=torch.rand(N, generator=g, dtype=torch.float64) * 0.9,
                features=torch.rand(N, 3, generator=g, dtype=torch.float64), viewmats=V, Ks=K, width=W, height=H,
                sh_degree=None, camera_model=model, **args)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(MODELS))
def test_parity_with_reference(device, dtype, name):
    tc.check_parity(model_scene(name), device, dtype, bg=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["opencv", "fisheye", "ftheta"])
def test_parity_sh(device, name):
    s = model_scene(name, N=120)
    s["sh_degree"] = 2
    s["features"] = torch.randn(120, 9, 3, dtype=torch.float64) * 0.3
    tc.check_parity(s, device, torch.float64)


def _independent(model, rec, pts):
    """The pixels of camera-space points by an implementation that is not
    ours: OpenCV for the OpenCV models, NCore for FTheta (None where it
    cannot say: NCore drops points outside the image)."""
    it = rec["intrinsics"]
    if model == "ftheta":
        ncam, _ = tcm._ncore_model("ftheta", rec)
        out = ncam.camera_rays_to_image_points(pts.clone())
        return out.image_points, out.valid_flag.bool()
    cv2 = pytest.importorskip("cv2")
    K = np.array([[it["focal_length"][0], 0, it["principal_point"][0]],
                  [0, it["focal_length"][1], it["principal_point"][1]], [0, 0, 1]], dtype=np.float64)
    if model == "fisheye":
        D = np.array(it["forward_poly"], dtype=np.float64).reshape(4, 1)
        uv, _ = cv2.fisheye.projectPoints(pts.numpy()[:, None, :], np.zeros(3), np.zeros(3), K, D)
    else:
        k, t, s = it["radial_coeffs"], it["tangential_coeffs"], it["thin_prism_coeffs"]
        dist = np.array([k[0], k[1], t[0], t[1], k[2], k[3], k[4], k[5], s[0], s[1], s[2], s[3]], dtype=np.float64)
        uv, _ = cv2.projectPoints(pts.numpy()[:, None, :], np.zeros(3), np.zeros(3), K, dist)
    return torch.from_numpy(uv[:, 0, :]), torch.ones(pts.shape[0], dtype=torch.bool)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("model", ["opencv", "fisheye", "ftheta"])
def test_projected_means_match_opencv_and_ncore(device, model):
    """Every real camera of the model, at full resolution: the fused op's
    projected means (meta.means2d, float64) are the reference's and
    OpenCV's / NCore's pixels to 1e-6 px over the camera's valid field."""
    for name, rec in tcm._records(model).items():
        if model == "ftheta":
            rec = tcm._as_float32(rec)  # NCore keeps float32 intrinsics
        _, p, (W, H) = sensors.camera_params(rec)
        pts = tcm._field_points(model, p, n=600)
        if model == "fisheye":
            pts = pts[cm.ray_angle(pts) < 0.49 * math.pi]  # OpenCV divides by z
        K = p.get("Ks", torch.eye(3, dtype=torch.float64))
        n = pts.shape[0]
        kw = {k: v[None].to(device) for k, v in p.items() if k != "Ks"}
        dev = dict(dtype=torch.float64, device=device)
        out = nurec_ops.rasterize_camera(pts.to(device), torch.tensor([[1.0, 0, 0, 0]], **dev).expand(n, 4),
                                         torch.full((n, 3), 1e-3, **dev), torch.full((n,), 0.5, **dev),
                                         torch.ones(n, 1, **dev), torch.eye(4, **dev)[None], K[None].to(device), W, H,
                                         camera_model=model, return_meta=True, **kw)
        ours = out.meta.means2d[0].cpu()
        expect, valid = cm.project(model, pts, p)
        assert valid.all(), name
        torch.testing.assert_close(ours, expect, rtol=0, atol=1e-6, msg=f"{name}: fused vs reference")
        theirs, ok = _independent(model, rec, pts)
        assert ok.float().mean() > 0.3, name
        torch.testing.assert_close(ours[ok], theirs[ok].to(ours.dtype), rtol=0, atol=1e-6,
                                   msg=f"{name}: fused vs {'NCore' if model == 'ftheta' else 'OpenCV'}")


@pytest.mark.parametrize("device", DEVICES)
def test_ortho_is_gsplats(device):
    """gsplat's orthographic camera, against gsplat's own pure-PyTorch
    projection (gsplat.cuda._torch_impl, camera_model="ortho", on the CPU):
    the fused op's records (pixel, conic) are gsplat's to 1e-9 for every
    item it keeps, and gsplat's front end with camera_model="ortho" renders
    the op's images."""
    ti = pytest.importorskip("gsplat.cuda._torch_impl")
    s = tc.to(model_scene("ortho", N=200), "cpu", torch.float64, grad=False)
    covars = nurec_ops.quat_scale_to_covar_preci(s["quats"], s["scales"], compute_preci=False, triu=False)[0]
    _, means2d, depths, conics, _ = ti._fully_fused_projection(s["means"], covars, s["viewmats"], s["Ks"],
                                                               s["width"], s["height"], eps2d=0.3,
                                                               camera_model="ortho")
    d = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in s.items()}
    code, mp, K = nurec_ops._camera_models.pack("t", "ortho", 2, d["means"], d["Ks"], {})
    out = torch.ops.nurec_ops.rasterize_camera_fwd(d["means"], d["quats"], d["scales"], d["opacities"], d["features"],
                                                   d["viewmats"], K, None, d["width"], d["height"], 0.01, 1e10, -1,
                                                   0, 1, 0, code, mp)
    rec, kept = out[3].cpu(), out[4].cpu() > 0
    assert 0.5 * kept.numel() < kept.sum() < kept.numel()  # most kept, those past the image's edge not
    torch.testing.assert_close(rec[..., :2][kept], means2d[kept], rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(rec[..., 6][kept], depths[kept], rtol=1e-12, atol=0)
    scale = conics[kept].abs().max(-1, keepdim=True).values
    torch.testing.assert_close(rec[..., 2:5][kept] / scale, conics[kept] / scale, rtol=1e-9, atol=1e-9)
    from nurec_ops.gsplat import rasterization
    img, alpha, _ = rasterization(d["means"], d["quats"], d["scales"], d["opacities"], d["features"], d["viewmats"],
                                  d["Ks"], d["width"], d["height"], camera_model="ortho", packed=False)
    r, _, a = tc.run(nurec_ops.rasterize_camera, d)
    assert torch.equal(img, r) and torch.equal(alpha, a) and (a > 0.5).float().mean() > 0.3


@pytest.mark.parametrize("name", ["opencv", "fisheye", "ftheta", "ftheta-backward-poly", "ortho"])
def test_gradcheck(name):
    """Float64 gradients of the fused op through each model (its Jacobian's
    dependence on the mean included), a few Gaussians."""
    s = model_scene(name, N=8, C=1, seed=3)
    s["width"], s["height"] = min(s["width"], 16), min(s["height"], 12)
    s = tc.to(s, "cpu", torch.float64, grad=False)
    keys = ("means", "quats", "scales")

    def f(*xs):
        return tc.run(nurec_ops.rasterize_camera, dict(s, **dict(zip(keys, xs))))

    xs = [s[k].clone().requires_grad_(True) for k in keys]
    assert torch.autograd.gradcheck(f, xs, eps=1e-6, atol=1e-5, rtol=1e-4)


def test_the_real_ftheta_rig_renders_as_the_reference():
    """The six real FTheta cameras at 1/40 (96 x 54) around the rig: the
    fused op's images are the reference's."""
    rig = sensors.load_camera_rig(shared_data.require(shared_data.FTHETA), scale=1 / 40, dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    N = 300
    ang = torch.rand(N, generator=g, dtype=torch.float64) * 2 * math.pi
    r = 4 + 10 * torch.rand(N, generator=g, dtype=torch.float64)
    s = dict(means=torch.stack((r * ang.cos(), r * ang.sin(), 1.5 * torch.rand(N, generator=g, dtype=torch.float64)),
                               -1),
             quats=torch.randn(N, 4, generator=g, dtype=torch.float64),
             scales=torch.full((N, 3), 0.4, dtype=torch.float64), opacities=torch.full((N,), 0.8, dtype=torch.float64),
             features=torch.rand(N, 3, generator=g, dtype=torch.float64), viewmats=torch.linalg.inv(rig.T_sensor_rig),
             Ks=torch.eye(3, dtype=torch.float64).expand(6, 3, 3), width=rig.width, height=rig.height,
             sh_degree=None, camera_model="ftheta", **rig.params)
    tc.check_parity(s, "cpu", torch.float64)


def test_bad_model_arguments_name_them():
    s = tc.to(model_scene("opencv", N=10), "cpu", torch.float64, grad=False)
    for change, arg in ((dict(radial=s["radial"][:, :4]), "radial"), (dict(tangential=None), "tangential"),
                        (dict(max_angle=torch.ones(2, dtype=torch.float64)), "max_angle"),
                        (dict(camera_model="kannala"), "camera_model")):
        bad = {k: v for k, v in dict(s, **change).items() if v is not None}
        with pytest.raises(RuntimeError, match=f"`{arg}"):
            tc.run(nurec_ops.rasterize_camera, bad)
    with pytest.raises(RuntimeError, match="`model_params`"):
        torch.ops.nurec_ops.rasterize_camera_fwd(s["means"], s["quats"], s["scales"], s["opacities"], s["features"],
                                                 s["viewmats"], s["Ks"], None, s["width"], s["height"], 0.01, 1e10,
                                                 -1, 0, 1, 0, 1, torch.zeros(2, 7, dtype=torch.float64))


def test_opcheck_models():
    s = tc.to(model_scene("ftheta", N=30), "cpu", torch.float64)
    model_args = {k: s[k] for k in ("principal_point", "angle_to_pixel", "linear_cde", "max_angle")}
    code, mp, K = nurec_ops._camera_models.pack("rasterize_camera", "ftheta", 2, s["means"], s["Ks"], model_args)
    args = (s["means"], s["quats"], s["scales"], s["opacities"], s["features"], s["viewmats"], K, None, s["width"],
            s["height"], 0.01, 1e10, -1, 0, 1, 0, code, mp)
    torch.library.opcheck(torch.ops.nurec_ops.rasterize_camera_fwd.default, args)
