"""Spinning-lidar sensor models for rasterize_lidar: a synthetic 128-row x
3600-column model generated here (the default: it needs no file), loading
a real row-offset calibration JSON (NCore's lidar intrinsics format: keys
n_rows, n_columns, row_elevations_rad, column_azimuths_rad,
row_azimuth_offsets_rad), and reducing a model (every k-th row and column)
for CPU-sized runs and tests."""
import collections
import json
import math

import torch

LidarModel = collections.namedtuple("LidarModel", ["row_elevations", "column_azimuths", "row_azimuth_offsets"])
LidarModel.__doc__ = """A spinning lidar: ray (i, j) points at azimuth
``column_azimuths[j] + row_azimuth_offsets[i]`` and elevation
``row_elevations[i]`` (radians; lidar frame x forward, y left, z up).
Unpack it into rasterize_lidar: ``rasterize_lidar(..., viewmats, *model)``."""


def synthetic_lidar_model(rows=128, cols=3600, dtype=torch.float32, device="cpu"):
    """A spinning lidar shaped like a real 128-beam automotive one, made up
    here: rows from +15 to -25 degrees, unevenly spaced (densest near the
    horizon, where such sensors put their beams), each row fired with its own
    azimuth offset (a repeating pattern of -4.5 to +11 degrees, so that
    neighbouring rows jump by degrees as on real sensors), and ``cols``
    columns spinning clockwise from +pi over a full turn (decreasing
    azimuths, as a real table's). Deterministic: no random numbers."""
    i = torch.arange(rows, dtype=torch.float64)
    u = (i + 0.5) / rows * 2 - 1  # (-1, 1), top row first
    top, bottom = math.radians(15.0), math.radians(-25.0)
    mid, half = 0.5 * (top + bottom), 0.5 * (top - bottom)
    el = mid - half * (0.35 * u + 0.65 * u ** 3)  # denser near the middle
    pattern = torch.tensor([-4.5, 1.5, 7.0, -1.0, 11.0, 3.0, -3.0, 5.5], dtype=torch.float64)
    off = torch.deg2rad(pattern[(torch.arange(rows) * 3) % pattern.numel()])
    az = math.pi - (torch.arange(cols, dtype=torch.float64) + 0.5) * (2 * math.pi / cols)
    return LidarModel(el.to(device=device, dtype=dtype), az.to(device=device, dtype=dtype),
                      off.to(device=device, dtype=dtype))


def load_lidar_model(path, dtype=torch.float32, device="cpu"):
    """Reads a row-offset spinning-lidar calibration JSON (NCore's lidar
    intrinsics: keys n_rows, n_columns, row_elevations_rad,
    column_azimuths_rad, row_azimuth_offsets_rad) into a LidarModel of
    ``dtype`` on ``device``. Its column table is taken as it is, whatever
    azimuth it starts at and whichever way it spins (rasterize_lidar needs
    only the rays' directions)."""
    with open(path) as f:
        d = json.load(f)
    R, W = int(d["n_rows"]), int(d["n_columns"])
    el = torch.tensor(d["row_elevations_rad"], dtype=torch.float64)
    az = torch.tensor(d["column_azimuths_rad"], dtype=torch.float64)
    off = torch.tensor(d.get("row_azimuth_offsets_rad", [0.0] * R), dtype=torch.float64)
    if el.shape != (R,) or off.shape != (R,) or az.shape != (W,):
        raise ValueError(f"{path}: expected {R} row elevations and offsets and {W} column azimuths, got "
                         f"{tuple(el.shape)}, {tuple(off.shape)}, {tuple(az.shape)}")
    return LidarModel(el.to(device=device, dtype=dtype), az.to(device=device, dtype=dtype),
                      off.to(device=device, dtype=dtype))


def reduce_lidar_model(model, row_step=1, col_step=1, row_start=0, col_start=0):
    """Every ``row_step``-th row and ``col_step``-th column of ``model`` (from
    ``row_start`` / ``col_start``): a smaller sensor over the same field of
    view, with the real uneven rows and row offsets. E.g. steps (8, 10) turn
    the 128 x 3600 sensor into 16 x 360."""
    if row_step < 1 or col_step < 1:
        raise ValueError(f"row_step and col_step must be >= 1, got {row_step}, {col_step}")
    el, az, off = model
    return LidarModel(el[row_start::row_step].contiguous(), az[col_start::col_step].contiguous(),
                      off[row_start::row_step].contiguous())


def lidar_model_rays(model):
    """The model's rays as unit directions ``[R * W, 3]`` in the lidar frame,
    row-major (ray (i, j) at ``i * W + j``, the order of rasterize_lidar's
    ``[R, W]`` images), in the model's dtype: the sensor as a ray bundle for
    ``rasterize_rays(..., ray_origins=zeros, ray_directions=rays)``."""
    el, az, off = model
    R, W = el.shape[0], az.shape[0]
    ray_az = (az[None, :] + off[:, None]).reshape(-1)
    ray_el = el[:, None].expand(R, W).reshape(-1)
    return torch.stack((torch.cos(ray_el) * torch.cos(ray_az), torch.cos(ray_el) * torch.sin(ray_az),
                        torch.sin(ray_el)), -1)
