"""SPEC section 6's camera models (and gsplat's orthographic camera) for the fused camera op: each model's
per-camera arguments (as nurec_ops.reference.rasterize_camera takes them)
packed into the op's ``model_params [C, 20]`` (the layout of
csrc/sensors/camera_models.h), on the device, without a host sync. The
projections themselves are C (csrc/sensors/camera_<model>_generic.h)."""
import torch

from . import _checks as Ck
from ._cache import cached

CODES = {"pinhole": 0, "opencv": 1, "fisheye": 2, "ftheta": 3, "ortho": 4}
PARAMS = 20  # NUREC_CAM_PARAMS
# the model's arguments and their widths, in packing order (slot offsets in camera_models.h)
ARGS = {
    "pinhole": (),
    "opencv": (("radial", 6, 0), ("tangential", 2, 6), ("thin_prism", 4, 8)),
    "fisheye": (("radial", 4, 0), ("max_angle", 1, 4)),
    "ftheta": (("principal_point", 2, 0), ("angle_to_pixel", 6, 2), ("linear_cde", 3, 8), ("max_angle", 1, 11)),
    "ortho": (),  # Ks only; its params are all 0, but present: the op's model path takes them
}
OPTIONAL = {"ftheta": ("pixel_to_angle", "reference_poly"), "opencv": (), "fisheye": (), "pinhole": (), "ortho": ()}


def _max_radius(radial):
    from .reference.camera_models import opencv_max_radius

    with torch.no_grad():
        return opencv_max_radius(radial)


def pack(op, model, C, like, Ks, model_args):
    """(code, model_params [C, 20] or None, Ks) for the op; Ks may be None
    for FTheta (then a placeholder: the model does not read it)."""
    if model not in CODES:
        Ck.fail(op, f"`camera_model` must be one of {tuple(CODES)}, got {model!r}")
    known = {name for name, _, _ in ARGS[model]} | set(OPTIONAL[model])
    extra = sorted(set(model_args) - known)
    if extra:
        Ck.fail(op, f"camera_model={model!r} takes no `{extra[0]}` (it takes {sorted(known) or 'none'})")
    if model == "pinhole":
        return 0, None, Ks
    if Ks is None:
        if model != "ftheta":
            Ck.fail(op, f"camera_model={model!r} needs `Ks`")
        Ks = torch.eye(3, dtype=like.dtype, device=like.device).expand(C, 3, 3)
    cols = like.new_zeros((C, PARAMS))
    for name, width, at in ARGS[model]:
        v = model_args.get(name)
        if v is None:
            Ck.fail(op, f"camera_model={model!r} needs `{name}` ([C, {width}])")
        v = torch.as_tensor(v, dtype=like.dtype, device=like.device) if not isinstance(v, torch.Tensor) else v
        want = (C,) if width == 1 else (C, width)
        if tuple(v.shape) != want and not (width == 1 and tuple(v.shape) == (C, 1)):
            Ck.fail(op, f"`{name}` must have shape {list(want)} for camera_model={model!r}, got {list(v.shape)}")
        Ck.real(op, name, v, like, "means")
        Ck.device(op, name, v, like, "means")
        cols[:, at:at + width] = v.detach().reshape(C, width)
    if model == "opencv":
        cols[:, 12] = cached("opencv_max_radius", (model_args["radial"],), _max_radius).to(like.dtype)
    if model == "ftheta":
        ref = model_args.get("reference_poly", 2)
        if isinstance(ref, torch.Tensor):
            cols[:, 12] = ref.detach().to(like.dtype).reshape(-1).expand(C)
        else:
            if int(ref) not in (1, 2):
                Ck.fail(op, f"`reference_poly` must be 1 or 2, got {ref!r}")
            cols[:, 12] = float(int(ref))
        p2a = model_args.get("pixel_to_angle")
        if p2a is not None:
            if tuple(p2a.shape) != (C, 6):
                Ck.fail(op, f"`pixel_to_angle` must have shape [{C}, 6], got {list(p2a.shape)}")
            cols[:, 13:19] = p2a.detach().to(like.dtype)
        elif not isinstance(ref, torch.Tensor) and int(ref) == 1:
            Ck.fail(op, "reference_poly=1 (the backward polynomial is the reference) needs `pixel_to_angle`")
    return CODES[model], cols, Ks
