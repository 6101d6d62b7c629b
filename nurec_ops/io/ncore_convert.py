"""NCore's calibrations and geometry in nurec_ops' terms: an NCore camera
model's parameters as the record nurec_ops.sensors.camera_params reads,
Euler angles as rotations, ray directions as a lidar model's cells, and
NCore's shutter names as rasterize_camera's."""
import math

import torch

# NCore's ShutterType names -> rasterize_camera's `shutter` (SPEC 7). Both
# time a pixel row (column) alike: NCore's floor(y) / (H - 1) top to bottom,
# (H - ceil(y)) / (H - 1) bottom to top, which at pixel centres are SPEC 7's.
SHUTTER_OF = {"ROLLING_TOP_TO_BOTTOM": "top_to_bottom", "ROLLING_BOTTOM_TO_TOP": "bottom_to_top",
              "ROLLING_LEFT_TO_RIGHT": "left_to_right", "ROLLING_RIGHT_TO_LEFT": "right_to_left",
              "GLOBAL": "global"}


def _floats(a):
    return [float(v) for v in a]


def camera_record(params):
    """An NCore camera-model parameters dataclass (ncore.data's
    FTheta / OpenCVPinhole / OpenCVFisheye / IdealPinhole...Parameters) as
    the intrinsics record ``nurec_ops.sensors.camera_params`` reads (the
    shape of NCore's intrinsics JSON), values unchanged (float32 -> exact
    float)."""
    kind = params.type()
    if kind == "ftheta":
        it = dict(principal_point=_floats(params.principal_point),
                  pixeldist_to_angle_poly=_floats(params.pixeldist_to_angle_poly),
                  angle_to_pixeldist_poly=_floats(params.angle_to_pixeldist_poly),
                  reference_poly=str(int(params.reference_poly)),  # 1: backward is the reference, 2: forward
                  max_angle_rad=float(params.max_angle), linear_cde=_floats(params.linear_cde))
    elif kind in ("opencv-pinhole", "opencv-fisheye", "ideal-pinhole"):
        it = dict(principal_point=_floats(params.principal_point), focal_length=_floats(params.focal_length))
        if kind == "opencv-pinhole":
            it.update(radial_coeffs=_floats(params.radial_coeffs), tangential_coeffs=_floats(params.tangential_coeffs),
                      thin_prism_coeffs=_floats(params.thin_prism_coeffs))
        elif kind == "opencv-fisheye":
            it.update(radial_coeffs=_floats(params.radial_coeffs), max_angle_rad=float(params.max_angle))
    else:
        raise ValueError(f"NCore camera model {kind!r} has no nurec_ops counterpart "
                         "(supported: ftheta, opencv-pinhole, opencv-fisheye, ideal-pinhole)")
    return {"camera_model_type": kind, "resolution": [int(v) for v in params.resolution],
            "shutter_type": str(int(params.shutter_type)), "intrinsics": it}


# ------------------------------------------------------------- geometry

def euler_xyz_to_rotmat(rot):
    """NCore's cuboid orientation, 'xyz' Euler angles [..., 3] (rotations
    about the fixed x, then y, then z axes, as scipy's ``from_euler("xyz")``
    that NCore uses): ``Rz(c) Ry(b) Rx(a)`` [..., 3, 3]."""
    a, b, c = rot.unbind(-1)
    ca, sa, cb, sb, cc, sc = a.cos(), a.sin(), b.cos(), b.sin(), c.cos(), c.sin()
    return torch.stack((cc * cb, cc * sb * sa - sc * ca, cc * sb * ca + sc * sa,
                        sc * cb, sc * sb * sa + cc * ca, sc * sb * ca - cc * sa,
                        -sb, cb * sa, cb * ca), -1).reshape(rot.shape[:-1] + (3, 3))


def _wrap(a):
    """Angles to [-pi, pi)."""
    return torch.remainder(a + math.pi, 2 * math.pi) - math.pi


def nearest_cells(directions, row_elevations, column_azimuths, row_azimuth_offsets, chunk=1 << 16):
    """(rows, columns) int64 [N] of the model rays nearest to sensor-frame
    ``directions [N, 3]``: the row of the nearest elevation (a row's
    elevation does not depend on the column), then in that row the column
    whose azimuth (plus the row's offset) is nearest, differences wrapped
    around the circle. Any column table order works (it is sorted here)."""
    d = directions.double()
    d = d / torch.linalg.vector_norm(d, dim=-1, keepdim=True).clamp_min(1e-300)
    el = torch.asin(d[:, 2].clamp(-1, 1))
    az = torch.atan2(d[:, 1], d[:, 0])
    re = row_elevations.double().to(d.device)
    rows = torch.empty(d.shape[0], dtype=torch.int64, device=d.device)
    for s in range(0, d.shape[0], chunk):
        rows[s:s + chunk] = (el[s:s + chunk, None] - re[None]).abs().argmin(1)
    want = _wrap(az - row_azimuth_offsets.double().to(d.device)[rows])
    table, order = torch.sort(_wrap(column_azimuths.double().to(d.device)))
    W = table.shape[0]
    k = torch.searchsorted(table, want)
    lo, hi = (k - 1) % W, k % W  # the neighbours on either side, around the circle
    closer_hi = _wrap(want - table[hi]).abs() < _wrap(want - table[lo]).abs()
    return rows, order[torch.where(closer_hi, hi, lo)]
