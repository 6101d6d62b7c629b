"""Real camera calibrations into the arguments of the camera models (SPEC
section 6): NCore's camera intrinsics JSON (the shape of gsplat's test
calibrations in ../shared/data/gsplat/: ``ftheta``, ``opencv-fisheye``,
``opencv-pinhole``, ``ideal-pinhole``), per camera, stacked into ``[C, k]``
tensors.

Pixel origin. nurec_ops (SPEC section 3, gsplat's rasterizers) puts the
image origin at the top-left corner of the first pixel, pixel centres at
x + 0.5, and so do NCore's image coordinates. NCore stores an OpenCV
model's principal point in those coordinates already (used as it is), and
an FTheta one in NVIDIA's pixel-centre convention (SPEC 6's formula adds
the half pixel, as NCore does inside): the same calibration gives the same
pixels as NCore's camera models (tests/test_camera_models.py, to 1e-6 px).

``scale`` resizes a calibration to an image ``scale`` times as large on each
side (e.g. 0.1 for CPU-sized tests): pixel coordinates measured from the
top-left corner scale exactly.
"""
import collections
import json

import torch

_MODEL_OF = {"ftheta": "ftheta", "opencv-fisheye": "fisheye", "opencv-pinhole": "opencv",
             "ideal-pinhole": "pinhole", "pinhole": "pinhole"}

CameraRig = collections.namedtuple("CameraRig", ["names", "camera_model", "width", "height", "params",
                                                 "T_sensor_rig", "shutter_type"])
CameraRig.__doc__ = """Cameras of one model: ``names`` [C], ``camera_model`` (the
op's name), ``width``, ``height`` (ints; one image size for the rig),
``params`` (dict of [C, k] tensors, the op's model arguments), ``T_sensor_rig``
[C, 4, 4] (sensor -> rig), ``shutter_type`` (NCore's codes, per camera)."""


def read_cameras(path):
    """{name: NCore camera record} of an intrinsics JSON."""
    with open(path) as f:
        d = json.load(f)
    return {k.split("@")[0]: v for k, v in d.items()}


def _K(fx, fy, cx, cy):
    return torch.tensor([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]], dtype=torch.float64)


def camera_params(record, scale=1.0):
    """(camera_model, {name: tensor}, (width, height)) of one NCore camera
    record, in nurec_ops' pixel convention, resized by ``scale``."""
    kind = record["camera_model_type"]
    if kind not in _MODEL_OF:
        raise ValueError(f"unsupported camera model {kind!r} (supported: {sorted(_MODEL_OF)})")
    model = _MODEL_OF[kind]
    it = record["intrinsics"]
    W, H = (int(round(v * scale)) for v in record["resolution"])
    pp = [float(v) for v in it["principal_point"]]
    f64 = dict(dtype=torch.float64)
    if model == "ftheta":
        c = torch.tensor(it["angle_to_pixeldist_poly"], **f64)
        b = torch.tensor(it["pixeldist_to_angle_poly"], **f64)
        if b.numel() < 6:
            b = torch.cat((b, b.new_zeros(6 - b.numel())))
        if c.numel() < 6:
            c = torch.cat((c, c.new_zeros(6 - c.numel())))
        ref = 1 if str(it.get("reference_poly", "2")) in ("1", "PIXELDIST_TO_ANGLE") else 2
        # pixel = s (X + cx + 1/2) = s X + (s cx + (s - 1) / 2) + 1/2; distances scale by s,
        # the backward polynomial's argument too: theta = b(delta / s) -> b_i / s^i
        p = dict(principal_point=torch.tensor([scale * pp[0] + 0.5 * (scale - 1), scale * pp[1] + 0.5 * (scale - 1)],
                                              **f64),
                 angle_to_pixel=c * scale, pixel_to_angle=b / torch.tensor([scale ** i for i in range(6)], **f64),
                 linear_cde=torch.tensor(it["linear_cde"], **f64), max_angle=torch.tensor(float(it["max_angle_rad"]), **f64),
                 reference_poly=torch.tensor(ref))
        return model, p, (W, H)
    fl = [float(v) for v in it.get("focal_length", [it.get("fx", 0.0), it.get("fy", 0.0)])]
    K = _K(scale * fl[0], scale * fl[1], scale * pp[0], scale * pp[1])
    if model == "pinhole":
        return model, dict(Ks=K), (W, H)
    if model == "fisheye":
        k = torch.tensor(it.get("forward_poly", it.get("radial_coeffs")), **f64)
        return model, dict(Ks=K, radial=k, max_angle=torch.tensor(float(it["max_angle_rad"]), **f64)), (W, H)
    radial = torch.tensor(it.get("radial_coeffs", [0.0] * 6), **f64)
    radial = torch.cat((radial, radial.new_zeros(6 - radial.numel()))) if radial.numel() < 6 else radial
    return model, dict(Ks=K, radial=radial, tangential=torch.tensor(it.get("tangential_coeffs", [0.0, 0.0]), **f64),
                       thin_prism=torch.tensor(it.get("thin_prism_coeffs", [0.0] * 4), **f64)), (W, H)


def load_camera_rig(path, names=None, scale=1.0, dtype=torch.float32, device="cpu"):
    """The cameras ``names`` (default: all) of an NCore intrinsics JSON, of
    one camera model and image size, as a CameraRig of ``dtype`` on
    ``device``; ``scale`` resizes them (see the module docstring)."""
    recs = read_cameras(path)
    names = list(recs) if names is None else list(names)
    models, params, sizes = zip(*(camera_params(recs[n], scale) for n in names))
    if len(set(models)) != 1 or len(set(sizes)) != 1:
        raise ValueError(f"{path}: cameras {names} mix models {set(models)} or image sizes {set(sizes)}: "
                         "load them as separate rigs")
    stacked = {}
    for k in params[0]:
        t = torch.stack([p[k] for p in params])
        stacked[k] = t.to(device=device) if not t.is_floating_point() else t.to(device=device, dtype=dtype)
    T = torch.tensor([recs[n].get("T_sensor_rig", torch.eye(4).tolist()) for n in names], dtype=dtype, device=device)
    return CameraRig(names, models[0], sizes[0][0], sizes[0][1], stacked, T,
                     [str(recs[n].get("shutter_type", "")) for n in names])
