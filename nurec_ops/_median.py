"""Median depth (gsplat issue 930), shared by the camera and lidar
rasterizers: per cell the depth (camera z, lidar range) of its median
Gaussian, the first in compositing order after which the cell's
transmittance is at most one half.

The kernels choose the Gaussian (``nurec_ops::rasterize_camera_median`` /
``rasterize_lidar_median`` walk the forward's own lists, stopping at each
cell's median); its depth and the gradient into its mean are computed here,
for the chosen items only, from the same pose the forward used (SPEC 7's
pose at the item's own time under a rolling shutter): a choice is piecewise
constant, so the median's gradient is its depth's, as 2DGS's median depth
does. No host sync; a cell without a median (alpha < 0.5) is 0, one of an
overflowed call NaN."""
import os

import torch

from . import _rolling_shutter as RS

NONE = -1  # NUREC_SPLAT_MEDIAN_NONE (csrc/tiles/splat.h)
OVERFLOW = -2  # NUREC_SPLAT_MEDIAN_OVERFLOW


def item_poses(op, viewmats, viewmats_end, shutter, taus, N):
    """World -> sensor poses of the forward's items: ``viewmats`` [C, 4, 4]
    for a global shutter, else the pose at each item's own time ``taus``
    [C, N] (the forward's output) [C, N, 4, 4]. Constants (never
    differentiated)."""
    code, sp = RS.pack(op, viewmats.detach(), None if viewmats_end is None else viewmats_end.detach(), shutter)
    if not code:
        return viewmats.detach()
    C = viewmats.shape[0]
    return RS.pose_at(sp[:, None, :].expand(C, N, sp.shape[-1]), taus.detach())


def sensor_points(poses, means):
    """The means in each sensor's frame [C, N, 3] (poses [C, 4, 4] or a pose
    per item [C, N, 4, 4])."""
    R, t = poses[..., :3, :3], poses[..., :3, 3]
    if poses.dim() == 4:
        return torch.einsum("cnij,nj->cni", R, means) + t
    return torch.einsum("cij,nj->cni", R, means) + t[:, None, :]


def camera_depths(poses, means):
    """Camera z of every item [C, N] (the camera's depth and sort key)."""
    return sensor_points(poses, means)[..., 2]


def lidar_ranges(poses, means):
    """Range of every item [C, N] (the lidar's depth and sort key)."""
    return torch.linalg.vector_norm(sensor_points(poses, means), dim=-1)


def median_of(items, depths):
    """The median depth [C, A, B, 1] from the kernels' median items [C, A,
    B] (sensor x N + Gaussian, or NONE / OVERFLOW) and every item's depth
    [C, N]: 0 where a cell has no median, NaN where its call overflowed (and
    for an item out of range, which only a list not from a forward gives)."""
    flat = depths.reshape(-1)
    P = flat.shape[0]
    ids = items.long()
    ok = (ids >= 0) & (ids < P)
    # an extra slot for the cells without an item: one gather, no branch on data
    padded = torch.cat((flat, flat.new_zeros(1)))
    # gather, not advanced indexing: its backward is a scatter-add, where
    # indexing's (index_put with accumulate) sorts the indices and adds each
    # run of duplicates serially, and every pixel of a surface picks one
    # Gaussian (H100: garden 1944 x3 fwd+bwd 196 ms that way)
    idx = torch.where(ok, ids, torch.full_like(ids, P))
    picked = torch.gather(padded, 0, idx.reshape(-1)).reshape(ids.shape)
    missing = torch.where(ids == NONE, torch.zeros_like(picked), torch.full_like(picked, float("nan")))
    return torch.where(ok, picked, missing)[..., None]


# The walks start each cell at the part of a cut list its median lies in
# (csrc/tiles/splat_median_cuda.cuh); False walks every list from its start
# (the same medians up to rounding: for measuring; NUREC_OPS_MEDIAN_PARTS=0
# at import).
USE_PARTS = os.environ.get("NUREC_OPS_MEDIAN_PARTS", "1") != "0"


def parts(seg_state, seg_last):
    """The forward's part state for a median op (none: no rows)."""
    if USE_PARTS:
        return seg_state.detach(), seg_last
    return seg_state.detach()[:0], seg_last[:0]


def fake_median(op, records, isect_items, tile_ranges, status, final_T, seg_state, seg_last, segment_min, rows, cols,
                tile_rows, tile_cols):
    """The median ops' fake kernel: the glue's checks (tiles/splat_glue.h,
    splat_median_inputs) and the output [C, rows, cols] int32."""
    from . import _checks as Ck

    if not (0 <= rows <= (1 << 24) and 0 <= cols <= (1 << 24)):
        Ck.fail(op, f"the cell grid must be at most 2^24 x 2^24, got {rows} x {cols}")
    Ck.shape(op, "records", records, (-1, -1, 8), "[C, N, 8] (a forward's records)")
    Ck.real(op, "records", records, records, "records")
    C = records.shape[0]
    ty, tx = -(-rows // tile_rows), -(-cols // tile_cols)
    Ck.shape(op, "isect_items", isect_items, (-1,), "[M]")
    Ck.dtype(op, "isect_items", isect_items, torch.int32)
    Ck.shape(op, "tile_ranges", tile_ranges, (C, ty, tx, 2), "[C, tiles_y, tiles_x, 2] (C = records.shape[0])")
    Ck.dtype(op, "tile_ranges", tile_ranges, torch.int64)
    Ck.shape(op, "status", status, (2,), "[2]")
    Ck.dtype(op, "status", status, torch.int64)
    for name, t in (("isect_items", isect_items), ("tile_ranges", tile_ranges), ("status", status)):
        Ck.device(op, name, t, records, "records")
    Ck.shape(op, "final_T", final_T, (C, rows, cols), "[C, cells] (the forward's final_T)")
    Ck.real(op, "final_T", final_T, records, "records")
    Ck.device(op, "final_T", final_T, records, "records")
    Ck.shape(op, "seg_state", seg_state, (-1, -1, tile_rows * tile_cols, -1), "[S, slots / S, cells per tile, D + 2]")
    Ck.real(op, "seg_state", seg_state, records, "records")
    S, X = seg_state.shape[:2]
    Ck.shape(op, "seg_last", seg_last, (S, X, tile_rows * tile_cols), "[S, slots / S, cells per tile] (as seg_state's)")
    Ck.dtype(op, "seg_last", seg_last, torch.int32)
    Ck.segments(op, S, segment_min)
    if S == 1 or (S > 0 and records.device.type == "cpu"):
        Ck.fail(op, f"`seg_state` must come from the forward (0 parts, or 2 and more on CUDA), got {S}")
    return records.new_empty((C, rows, cols), dtype=torch.int32)
