"""Spinning-lidar sensor models for rasterize_lidar: loading the row-offset
calibration JSON (the real 128-row x 3600-column sensor of
data/row-offset-spinning-lidar-model-parameters.json, see data/ORIGIN.md)
into the tensors rasterize_lidar takes, and reducing a model (every k-th row
and column) for CPU-sized runs and tests."""
import collections
import json
import os

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PATH = os.path.join(os.path.dirname(_HERE), "data", "row-offset-spinning-lidar-model-parameters.json")

LidarModel = collections.namedtuple("LidarModel", ["row_elevations", "column_azimuths", "row_azimuth_offsets"])
LidarModel.__doc__ = """A spinning lidar: ray (i, j) points at azimuth
``column_azimuths[j] + row_azimuth_offsets[i]`` and elevation
``row_elevations[i]`` (radians; lidar frame x forward, y left, z up).
Unpack it into rasterize_lidar: ``rasterize_lidar(..., viewmats, *model)``."""


def load_lidar_model(path=None, dtype=torch.float32, device="cpu"):
    """Reads a row-offset spinning-lidar calibration JSON (keys n_rows,
    n_columns, row_elevations_rad, column_azimuths_rad,
    row_azimuth_offsets_rad) into a LidarModel of ``dtype`` on ``device``.
    ``path`` defaults to the real 128 x 3600 calibration shipped in data/."""
    path = DEFAULT_PATH if path is None else path
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
