"""rasterize_lidar (SPEC section 4): fused op, fake kernels, autograd, and
the same sync-free binning capacity policy as the camera rasterizer (see
nurec_ops/_binning.py)."""
import math
import os

import torch

from . import _binning
from . import _median
from . import _checks as Ck
from ._lidar_table import canonical_columns, cell_size, row_search, row_search_levels
from ._library import AutogradOp, named_outputs, ops
from ._meta import (absgrad_of, check_meta_cell, grad_records_width, means2d_grad_function, means2d_grad_shape,
                    meta_shapes, op_backward, run_with_meta)
from .nvtx import ranged

_OP = "rasterize_lidar"
_TILE_ROWS = 1  # csrc/rasterize_lidar/rasterize_lidar.h: NUREC_RL_TILE_ROWS / _COLS
_TILE_COLS = 256
_POLICY = _binning.policy(_OP)
# Long lists on CUDA: cut into up to _SEGMENTS parts of at least _SEGMENT_MIN
# entries, composited by blocks of their own and chained per ray (exact up to
# rounding; see csrc/rasterize_lidar/rasterize_lidar_cuda_generic.cuh). Their
# per-ray state costs _SEGMENTS x rays x (D + 2) reals and one int per part
# and ray (zeroed each call: ~118 MB and ~35 us per street sweep on the H200);
# _SEGMENTS = 0 turns the cutting off. Environment variables
# override the defaults, for measuring.
_SEGMENTS = int(os.environ.get("NUREC_OPS_RL_SEGMENTS", "16"))
_SEGMENT_MIN = int(os.environ.get("NUREC_OPS_RL_SEGMENT_MIN", "512"))


def default_eps2d(num_columns):
    """SPEC default: ``0.3 * (2 pi / W)^2`` rad^2 (0 for a sensor without columns)."""
    W = int(num_columns)
    return 0.3 * (2.0 * math.pi / W) ** 2 if W > 0 else 0.0


@ranged("nurec_ops.rasterize_lidar")
def rasterize_lidar(means, quats, scales, opacities, features, viewmats, row_elevations, column_azimuths,
                    row_azimuth_offsets, near=0.5, far=200.0, eps2d=None, *, binning="auto", capacity=None,
                    on_overflow="warn", return_meta=False, means2d_grad=False, absgrad=False, viewmats_end=None,
                    column_times=None, median_depth=False):
    """3D Gaussian splatting of world-space Gaussians into spinning lidars.

    Args:
        means ``[N, 3]``, quats ``[N, 4]`` (w, x, y, z; normalized here),
        scales ``[N, 3]``, opacities ``[N]`` (activated): the Gaussians.
        features: ``[N, D]``, any D >= 1 (intensity, ray-drop logit, ...).
        viewmats ``[C, 4, 4]``: world -> lidar (x forward, y left, z up), one
            per sweep.
        row_elevations ``[R]``, column_azimuths ``[W]``, row_azimuth_offsets
            ``[R]`` (radians): ray (i, j) points at azimuth
            ``column_azimuths[j] + row_azimuth_offsets[i]`` and elevation
            ``row_elevations[i]``. Rows may be unevenly spaced and in any
            order. Only the rays' directions matter, never the table's
            numeric order: a column table may start anywhere, run clockwise
            or counter-clockwise, wrap from -pi to pi anywhere inside, cover
            less than a full turn and be uneven, as real sensors' tables are
            (the kernels walk a canonical copy, derived on the device and
            cached per table: nurec_ops/_lidar_table.py; the outputs keep the
            caller's column order). See nurec_ops.lidar_model for the
            sensor models (a real calibration JSON, or a synthetic one).
        near, far: Gaussians whose mean's range is not in (near, far) metres
            are dropped.
        eps2d: rad^2 added to the projected covariance's diagonal; None:
            ``0.3 * (2 pi / W)^2`` (0.3 "column^2", as the camera's 0.3 px^2).
        binning, capacity, on_overflow: as for rasterize_camera (CUDA only;
            the CPU is always exact): ``"auto"`` is sync-free with the
            asynchronous capacity policy (an overflowing call returns NaN
            outputs and zero gradients and is reported at a later call),
            ``"exact"`` synchronizes once per call and re-runs on overflow;
            ``capacity=`` fixes the number of Gaussian-tile intersections
            (CUDA graphs, torch.compile).
        return_meta, means2d_grad, absgrad: as for rasterize_camera (SPEC
            section 8; absgrad with at most 2 feature channels):
            ``means2d`` in (azimuth, elevation) radians, ``radii`` in cells
            (the ellipse's half-extents over the table's mean column and row
            spacing), ``depths`` the ranges of the means.
        median_depth: also return ``median_range [C, R, W, 1]`` after alpha
            (gsplat issue 930): per ray the range of its median Gaussian, the
            first in compositing order after which the ray's transmittance
            is at most 0.5 (0 where alpha < 0.5; NaN for an overflowed
            call). Differentiable: its gradient flows into that Gaussian's
            mean (nurec_ops._median).

    Returns:
        a named tuple ``(features [C, R, W, D], range [C, R, W, 1], alpha
        [C, R, W, 1])`` (and ``meta`` with return_meta):
        ``features = sum w f``, ``range = sum w r`` (expected range of the
        means, not normalized by alpha), ``alpha = 1 - T``. Differentiable
        with respect to means, quats, scales, opacities and features.

    Semantics (SPEC section 4): a mean at lidar-space p maps to (azimuth,
    elevation) = (atan2(y, x), atan2(z, sqrt(x^2 + y^2))) and range |p|; its
    covariance is projected with the Jacobian of that map at the mean, plus
    eps2d on the diagonal. Means within 5 degrees of a pole are dropped. Per
    ray, d = (wrap(ray azimuth - azimuth), ray elevation - elevation) with
    wrap to (-pi, pi], then compositing exactly as the camera (SPEC 3):
    ascending range, ``alpha = min(0.99, o exp(-d^T Sigma^-1 d / 2))``,
    skipped below 1/255, stop before T < 1e-4. Tiles (1 row x 256 columns,
    circular in columns, so a Gaussian straddling the seam is binned on both
    sides) are only a schedule: each Gaussian's rectangle of tiles covers
    every ray inside its opacity-aware ellipse (plus a rounding margin), rows
    found by a scan of the real row elevations and columns by a search of the
    azimuths, less the tiles that the ellipse's slice at their row's
    elevation misses, so outputs do not depend on tiling. On CUDA a tile list
    longer than 512 entries is composited in up to 16 parts in parallel and
    chained per ray (the same result up to rounding; the parts' per-ray state,
    16 x rays x (D + 3) values, zeroed each call, is kept until the backward;
    ``NUREC_OPS_RL_SEGMENTS`` / ``NUREC_OPS_RL_SEGMENT_MIN`` at import change
    the cut, 0 parts turns it off). Choices where the SPEC is
    silent: the SPEC's exact range bounds are open (near < r < far, as the
    camera's z); a zero quaternion is the identity with zero gradient;
    gradients do not flow into viewmats or the sensor model.

    Rolling shutter (SPEC section 7): with ``viewmats_end [C, 4, 4]`` (the
    lidar's pose at the end of the sweep) each Gaussian is rendered with the
    pose at its own time, the firing time of the column nearest to its mean
    (10 fixed-point steps); ``column_times [W]`` in [0, 1] gives each of the
    user's columns its time (default: its angular distance from column 0
    along the spin, over the table's whole sweep).
    """
    W = column_azimuths.shape[0] if column_azimuths.dim() == 1 else 0
    e2 = default_eps2d(W) if eps2d is None else float(eps2d)
    if absgrad and features.dim() == 2 and features.shape[1] > 2:  # the glue's rule, before any work
        Ck.fail(_OP, f"`absgrad` supports at most 2 feature channels, got {features.shape[1]}")
    segments = _SEGMENTS if means.device.type == "cuda" else 0
    col_az, col_order = canonical_columns(column_azimuths)
    args = (means, quats, scales, opacities, features, viewmats, row_elevations, col_az, col_order,
            row_azimuth_offsets, float(near), float(far), e2, segments, _SEGMENT_MIN)
    C, N = _binning.leading(viewmats), _binning.leading(means)
    # SPEC 8's meta, written by the projection; its radii in cells of the
    # table's mean column and row spacing (a device tensor cached per table)
    meta_args = (True, cell_size(row_elevations, col_az)) if return_meta else (False, None)
    # the rows in elevation order, for the projection's search (cached per table)
    tail = (rolling_args(_OP, viewmats, viewmats_end, column_azimuths, col_order, column_times) + meta_args
            + (row_search(row_elevations, row_azimuth_offsets),))

    def run(forward):
        return _binning.run_binned(_OP, lambda *a: forward(*a, *tail), args, means.device,
                                   (C, _binning.leading(row_elevations), W), C * N, binning, capacity, on_overflow,
                                   report=9)

    median = None
    if median_depth:
        def median(out):  # the forward op's records, isect_items, tile_ranges, status, final_T and taus
            items = ops.rasterize_lidar_median(out[3].detach(), out[5], out[6], out[9], out[7].detach(),
                                               *_median.parts(out[10], out[11]), _SEGMENT_MIN,
                                               row_elevations.detach(), col_az, col_order,
                                               row_azimuth_offsets.detach())
            poses = _median.item_poses(_OP, viewmats, viewmats_end, "top_to_bottom", out[12], N)
            return _median.median_of(items, _median.lidar_ranges(poses, means))
    return run_with_meta(_OP, run, _FORWARD, _WITH_MEANS2D, means, C, N, return_meta, means2d_grad,
                         _OUTPUTS_MEDIAN if median_depth else _OUTPUTS, absgrad, median)


def default_column_times(column_azimuths):
    """SPEC 7's default firing times of a table's columns [W] (the user's
    order): each column's angular distance from column 0 along the spin
    (the direction from column 0 to column 1), over the largest such
    distance. No host sync."""
    az = column_azimuths.detach()
    W = az.shape[0]
    if W < 2:
        return torch.zeros_like(az)
    two_pi = 2 * math.pi
    step = torch.remainder(az[1] - az[0] + math.pi, two_pi) - math.pi
    spin = torch.where(step < 0, -1.0, 1.0).to(az.dtype)
    d = torch.remainder((az - az[0]) * spin, two_pi)
    total = d.max()
    return torch.where(total > 0, d / torch.where(total > 0, total, torch.ones_like(total)), torch.zeros_like(d))


def rolling_args(op, viewmats, viewmats_end, column_azimuths, col_order, column_times):
    """The op's (viewmats_end, canonical column times), or (None, None)
    for a global shutter."""
    if viewmats_end is None:
        return (None, None)
    from . import _rolling_shutter

    _, end = _rolling_shutter.op_args(op, viewmats, viewmats_end, "top_to_bottom")  # the spin: any rolling code
    if column_times is None:
        column_times = _cached_times(column_azimuths)
    else:
        _check_column_times(op, column_times, column_azimuths.shape[0], viewmats, "viewmats")
    from ._cache import cached

    return (end, cached("canonical_column_times", (column_times, col_order),
                        lambda t, o: t.detach().index_select(0, o.long()).contiguous()))


def _cached_times(column_azimuths):
    from ._cache import cached

    return cached("column_times", (column_azimuths,), default_column_times)


def check_overflow():
    """Reads the binning reports that have arrived (never waits) and warns or
    raises for any overflowed call, as the next call would."""
    _POLICY.poll()


def _check(op, means, quats, scales, opacities, features, viewmats, row_elevations, column_azimuths,
           column_order, row_azimuth_offsets, near, far, eps2d):
    N = Ck.gaussians(op, means, quats, scales, opacities)
    Ck.shape(op, "features", features, (N, -1), "[N, D] (N = means.shape[0])")
    D = features.shape[1]
    if D < 1:
        Ck.fail(op, f"`features` must have at least one channel, got {list(features.shape)}")
    Ck.shape(op, "viewmats", viewmats, (-1, 4, 4), "[C, 4, 4]")
    C = viewmats.shape[0]
    Ck.shape(op, "row_elevations", row_elevations, (-1,), "[R]")
    R = row_elevations.shape[0]
    Ck.shape(op, "column_azimuths", column_azimuths, (-1,), "[W]")
    W = column_azimuths.shape[0]
    Ck.shape(op, "row_azimuth_offsets", row_azimuth_offsets, (R,), "[R] (R = row_elevations.shape[0])")
    Ck.shape(op, "column_order", column_order, (W,), "[W] (W = column_azimuths.shape[0])")
    Ck.dtype(op, "column_order", column_order, torch.int32)
    Ck.device(op, "column_order", column_order, means, "means")
    named = [("quats", quats), ("scales", scales), ("opacities", opacities), ("features", features),
             ("viewmats", viewmats), ("row_elevations", row_elevations), ("column_azimuths", column_azimuths),
             ("row_azimuth_offsets", row_azimuth_offsets)]
    Ck.like_means(op, named, means)
    if R > (1 << 20):
        Ck.fail(op, f"`row_elevations` may have at most 2^20 rows, got {R}")
    if W > (1 << 24):
        Ck.fail(op, f"`column_azimuths` may have at most 2^24 columns, got {W}")
    Ck.near_far(op, near, far)
    if not (eps2d >= 0 and eps2d < 1e30):
        Ck.fail(op, f"`eps2d` must be finite and >= 0, got {eps2d}")
    return C, N, D, R, W


def _check_rolling(op, C, W, means, viewmats_end, column_times):
    """The glue's rl_shutter checks: the sweeps' end poses and the canonical
    column times, both or neither."""
    if viewmats_end is None:
        return
    Ck.shape(op, "viewmats_end", viewmats_end, (C, 4, 4), "[C, 4, 4] (C = viewmats.shape[0])")
    Ck.real(op, "viewmats_end", viewmats_end, means, "means")
    Ck.device(op, "viewmats_end", viewmats_end, means, "means")
    if column_times is None:
        Ck.fail(op, "`column_times` is needed with `viewmats_end`")
    _check_column_times(op, column_times, W, means, "means")


def _check_column_times(op, column_times, W, ref, ref_name):
    """column_times [W], real and on ref's device (and dtype)."""
    Ck.shape(op, "column_times", column_times, (W,), "[W] (W = column_azimuths.shape[0])")
    Ck.real(op, "column_times", column_times, ref, ref_name)
    Ck.device(op, "column_times", column_times, ref, ref_name)


@torch.library.register_fake("nurec_ops::rasterize_lidar_fwd")
def _fake(means, quats, scales, opacities, features, viewmats, row_elevations, column_azimuths, column_order,
          row_azimuth_offsets, near, far, eps2d, segments, segment_min, capacity, viewmats_end=None,
          column_times=None, meta=False, meta_cell=None, row_search=None):
    C, N, D, R, W = _check(_OP, means, quats, scales, opacities, features, viewmats, row_elevations,
                           column_azimuths, column_order, row_azimuth_offsets, near, far, eps2d)
    _check_rolling(_OP, C, W, means, viewmats_end, column_times)
    check_meta_cell(_OP, meta, meta_cell, means)
    if row_search is not None and R > 0:
        Ck.shape(_OP, "row_search", row_search, (1 + 4 * row_search_levels(R), R),
                 "[1 + 4 L, R] (nurec_ops._lidar_table.row_search of the rows' table)")
        Ck.like_means(_OP, [("row_search", row_search)], means)
    Ck.segments(_OP, segments, segment_min)
    ty, tx = (R + _TILE_ROWS - 1) // _TILE_ROWS, (W + _TILE_COLS - 1) // _TILE_COLS
    M = _binning.fake_intersections(means.device, capacity)
    S = segments if segments > 1 and means.device.type != "cpu" else 0
    X = _binning.part_slots(S, capacity, segment_min, C * ty * tx)
    e = means.new_empty
    i64, i32 = torch.int64, torch.int32
    return (e((C, R, W, D)), e((C, R, W, 1)), e((C, R, W, 1)), e((C, N, 8)), e((C, N), dtype=i64),
            e((M,), dtype=i32), e((C, ty, tx, 2), dtype=i64), e((C, R, W)), e((C, R, W), dtype=i32),
            e((2,), dtype=i64), e((S, X, _TILE_ROWS * _TILE_COLS, D + 2)),
            e((S, X, _TILE_ROWS * _TILE_COLS), dtype=i32),
            e((C if viewmats_end is not None else 0, N)),
            e((_binning.part_chunks(S, capacity, segment_min),), dtype=i64)) + meta_shapes(e, meta, C, N)


@torch.library.register_fake("nurec_ops::rasterize_lidar_bwd")
def _fake_backward(grad_features, grad_range, grad_alpha, means, quats, scales, opacities, features, viewmats,
                   row_elevations, column_azimuths, column_order, row_azimuth_offsets, records, counts,
                   isect_items, tile_ranges, final_T, last, status, seg_state, seg_last, near, far, eps2d,
                   segment_min, viewmats_end=None, column_times=None, taus=None, absgrad=False, seg_later=None,
                   means2d_grad=False):
    C, N, D, R, W = _check(_OP + "_backward", means, quats, scales, opacities, features, viewmats,
                           row_elevations, column_azimuths, column_order, row_azimuth_offsets, near, far, eps2d)
    _check_rolling(_OP + "_backward", C, W, means, viewmats_end, column_times)
    Ck.shape(_OP + "_backward", "grad_features", grad_features, (C, R, W, D), "[C, R, W, D]")
    for name, g in (("grad_range", grad_range), ("grad_alpha", grad_alpha)):
        if g is not None:  # None: zero (a loss that did not read it)
            Ck.shape(_OP + "_backward", name, g, (C, R, W, 1), "[C, R, W, 1]")
    e = means.new_empty
    return (e((N, 3)), e((N, 4)), e((N, 3)), e((N,)), e((N, D)), e((C * N, grad_records_width(absgrad))),
            e(means2d_grad_shape(means2d_grad, C, N)))


def _setup_context(ctx, inputs, output):
    (means, quats, scales, opacities, features, viewmats, row_el, col_az, col_order, row_off, near, far, eps2d,
     _segments, segment_min, _capacity) = inputs[:16]
    viewmats_end = inputs[16] if len(inputs) > 16 else None
    column_times = inputs[17] if len(inputs) > 17 else None
    # then SPEC 8's meta (means2d, radii, depths): no gradient
    _, _, _, records, counts, isect, ranges, final_T, last, status, seg_state, seg_last, taus, seg_later = output[:14]
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(means, quats, scales, opacities, features, viewmats, row_el, col_az, col_order,
                          row_off, records, counts, isect, ranges, final_T, last, status, seg_state, seg_last,
                          taus, seg_later)
    ctx.cfg = (near, far, eps2d, segment_min)
    ctx.rolling = (viewmats_end, column_times)  # inputs: constants, never differentiated
    ctx.n_inputs = len(inputs)


def _backward_with_records(ctx, g_feat, g_range, g_alpha, absgrad=False, means2d_grad=False):
    """The op's backward and its extras (_meta.split_grads)."""
    (means, quats, scales, opacities, features, viewmats, row_el, col_az, col_order, row_off, records, counts,
     isect, ranges, final_T, last, status, seg_state, seg_last, taus, seg_later) = ctx.saved_tensors
    near, far, eps2d, segment_min = ctx.cfg
    C, D, R, W = viewmats.shape[0], features.shape[1], row_el.shape[0], col_az.shape[0]
    if g_feat is None:
        g_feat = means.new_zeros((C, R, W, D))
    # g_range, g_alpha stay None where the loss did not read them (the op
    # takes them as zero)
    gm, gq, gs, go, gf, grec, gm2d = ops.rasterize_lidar_bwd(
        g_feat, g_range, g_alpha, means, quats, scales, opacities, features, viewmats, row_el, col_az, col_order,
        row_off, records, counts, isect, ranges, final_T, last, status, seg_state, seg_last, near, far, eps2d,
        segment_min, *ctx.rolling, taus if ctx.rolling[0] is not None else None, absgrad, seg_later, means2d_grad)
    return (gm, gq, gs, go, gf) + (None,) * (ctx.n_inputs - 5) + (grec, absgrad_of(grec, absgrad),
                                                                  gm2d if means2d_grad else None)


_FORWARD = AutogradOp("rasterize_lidar_fwd", op_backward(_backward_with_records), _setup_context)
_WITH_MEANS2D = means2d_grad_function(_FORWARD, _setup_context, _backward_with_records)
# (features, range, alpha) and (..., meta), named as the op's schema names them
_RENAME = {"features_out": "features"}
_OUTPUTS = (named_outputs("rasterize_lidar_fwd", 3, _RENAME),
            named_outputs("rasterize_lidar_fwd", 3, _RENAME, extra=("meta",)))
_OUTPUTS_MEDIAN = (named_outputs("rasterize_lidar_fwd", 3, _RENAME, extra=("median_range",)),
                   named_outputs("rasterize_lidar_fwd", 3, _RENAME, extra=("median_range", "meta")))


@torch.library.register_fake("nurec_ops::rasterize_lidar_median")
def _fake_median(records, isect_items, tile_ranges, status, final_T, seg_state, seg_last, segment_min,
                 row_elevations, column_azimuths, column_order, row_azimuth_offsets):
    op = _OP + "_median"
    Ck.shape(op, "row_elevations", row_elevations, (-1,), "[R]")
    Ck.shape(op, "column_azimuths", column_azimuths, (-1,), "[W]")
    R, W = row_elevations.shape[0], column_azimuths.shape[0]
    if R > (1 << 20):
        Ck.fail(op, f"`row_elevations` may have at most 2^20 rows, got {R}")
    Ck.shape(op, "row_azimuth_offsets", row_azimuth_offsets, (R,), "[R] (R = row_elevations.shape[0])")
    Ck.shape(op, "column_order", column_order, (W,), "[W] (W = column_azimuths.shape[0])")
    Ck.dtype(op, "column_order", column_order, torch.int32)
    Ck.device(op, "column_order", column_order, records, "records")
    for name, t in (("row_elevations", row_elevations), ("column_azimuths", column_azimuths),
                    ("row_azimuth_offsets", row_azimuth_offsets)):
        Ck.real(op, name, t, records, "records")
        Ck.device(op, name, t, records, "records")
    return _median.fake_median(op, records, isect_items, tile_ranges, status, final_T, seg_state, seg_last,
                               segment_min, R, W, _TILE_ROWS, _TILE_COLS)
