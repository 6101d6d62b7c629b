"""rasterize_camera (SPEC section 3): fused op, fake kernels, autograd, and
the sync-free binning capacity policy (see nurec_ops/_binning.py)."""
import os

import torch

from . import _binning
from . import _camera_models
from . import _median
from . import _checks as Ck
from . import _rolling_shutter
from ._library import AutogradOp, named_outputs, ops
from ._meta import Meta  # noqa: F401  (the return_meta type)
from ._meta import (absgrad_of, grad_records_width, means2d_grad_function, means2d_grad_shape, meta_shapes,
                    op_backward, run_with_meta)
from .nvtx import ranged

_OP = "rasterize_camera"
_TILE = 16
_POLICY = _binning.policy(_OP)
# Long lists on CUDA: cut into up to _SEGMENTS parts of at least _SEGMENT_MIN
# entries, composited by blocks of their own and chained per pixel (exact up
# to rounding; see csrc/rasterize_camera/rasterize_camera_cuda_generic.cuh),
# as the lidar's. The parts' state kept until the backward is one slot per
# part that a tile has (csrc/tiles/splat_math.h), and the walks launch a
# block per later part that exists (csrc/tiles/splat_parts_grid_cuda.cuh),
# so neither grows with _SEGMENTS. What the cut costs grows with the image:
# the combine's two passes over every pixel and the clearing of the state.
# A call cuts its lists where one part's state over the whole image,
# pixels x ((D + 2) reals + one int), is at most _SEGMENT_BYTES: measured on
# the H200, 16 parts took the 1080p street from 2.55 ms (the 5
# parts the earlier per-part budget allowed) to 2.02, and the small garden
# (3 x 648x420) held at 1.28, while three 1944x1260 cameras (176 MB; short
# lists) ran 4.43 ms cut against 4.22 uncut. _SEGMENTS = 0 turns the cutting
# off. Environment variables override the defaults, for measuring.
_SEGMENTS = int(os.environ.get("NUREC_OPS_RC_SEGMENTS", "16"))
_SEGMENT_MIN = int(os.environ.get("NUREC_OPS_RC_SEGMENT_MIN", "512"))
_SEGMENT_BYTES = int(os.environ.get("NUREC_OPS_RC_SEGMENT_BYTES", str(128 << 20)))


def _segments_for(device, dtype, C, H, W, D):
    """Parts per long list for a call (0: none): _SEGMENTS where the cut's
    cost, which grows with the image, stays within _SEGMENT_BYTES (above);
    the CPU walks every list whole."""
    if device.type != "cuda" or _SEGMENTS <= 1:
        return 0
    itemsize = 8 if dtype == torch.float64 else 4
    image_part = C * H * W * ((D + 2) * itemsize + 4)
    return _SEGMENTS if image_part <= _SEGMENT_BYTES else 0


@ranged("nurec_ops.rasterize_camera")
def rasterize_camera(means, quats, scales, opacities, features, viewmats, Ks, width, height,
                     near=0.01, far=1e10, backgrounds=None, sh_degree=None, *, binning="auto",
                     capacity=None, on_overflow="warn", return_meta=False, means2d_grad=False,
                     absgrad=False, camera_model="pinhole", viewmats_end=None, shutter="global", antialiased=False,
                     eps2d=0.3, radius_clip=0.0, median_depth=False, **model_args):
    """3D Gaussian splatting of world-space Gaussians into pinhole cameras.

    Args:
        means ``[N, 3]``, quats ``[N, 4]`` (w, x, y, z; normalized here),
        scales ``[N, 3]``, opacities ``[N]`` (activated): the Gaussians.
        features: ``[N, D]`` (any D >= 1), per camera ``[C, N, D]`` (each
            (camera, Gaussian) item its own row: gsplat's per-camera colours;
            their gradient is ``[C, N, D]``) or, with ``sh_degree`` 0..3, SH
            coefficients ``[N, K, 3]`` (K >= (sh_degree + 1)^2; the first
            (sh_degree + 1)^2 are used), evaluated per camera as
            ``SH(normalize(mean - camera centre)) + 0.5`` clamped at 0.
        viewmats ``[C, 4, 4]`` world -> camera (OpenCV: x right, y down,
        z forward), Ks ``[C, 3, 3]`` (fx = K[0,0], fy = K[1,1], cx = K[0,2],
        cy = K[1,2]; skew is ignored), ``width``, ``height`` in pixels.
        near, far: Gaussians whose mean has camera z <= near or >= far are
            dropped (near > 0).
        backgrounds: ``[C, D]`` or None (black).
        binning: ``"auto"`` (default): no host synchronization; the binning
            capacity follows the asynchronous policy of nurec_ops._binning:
            counts reported by earlier calls, 25% headroom; a call that
            overflows returns NaN render/depth/alpha and zero gradients (never
            a wrong image) and is reported by a RuntimeWarning (or
            RuntimeError with ``on_overflow="raise"``) at the latest at the
            first later call that finds its report arrived, and the capacity
            grows. ``"exact"``: one host synchronization per call; an
            overflowing call is re-run with the needed capacity (gsplat's
            behaviour). Ignored on the CPU, which is always exact.
        capacity: fixed number of Gaussian-tile intersections to allocate
            (CUDA; e.g. for CUDA graphs or torch.compile); overrides the
            policy's choice.
        return_meta: also return a ``nurec_ops._meta.Meta`` (SPEC section 8):
            ``means2d`` [C, N, 2] pixels, ``radii`` [C, N, 2] int32 pixels,
            ``depths`` [C, N], computed on the device without a host sync.
        means2d_grad: with return_meta, ``meta.means2d`` is a leaf whose
            ``.grad`` after ``backward()`` holds the loss's gradient with
            respect to each projected mean (what densification reads, e.g.
            gsplat's DefaultStrategy).
        absgrad: with means2d_grad, ``meta.means2d.absgrad`` after
            ``backward()`` holds, per camera and Gaussian, the sum over
            pixels of the absolute value of each pixel's means2d gradient
            (gsplat's ``absgrad``, what ``DefaultStrategy(absgrad=True)``
            reads); features of at most 4 channels (RGB or SH).
        camera_model: "pinhole" (SPEC section 3), or SPEC section 6's
            "opencv" (``radial [C, 6]``, ``tangential [C, 2]``,
            ``thin_prism [C, 4]``), "fisheye" (``radial [C, 4]``,
            ``max_angle [C]``) or "ftheta" (``principal_point [C, 2]``,
            ``angle_to_pixel [C, 6]``, ``linear_cde [C, 3]``, ``max_angle
            [C]``, optionally ``pixel_to_angle [C, 6]`` and
            ``reference_poly``; ``Ks`` may be None), passed as keywords
            (``nurec_ops.sensors`` reads them from NCore calibrations);
            or gsplat's "ortho" (``Ks`` only: pixel ``(fx x + cx, fy y +
            cy)``, fx, fy in pixels per metre, near / far on z; e.g. a
            bird's-eye view from a camera above the scene).
        viewmats_end, shutter: SPEC section 7's rolling shutter: the
            cameras' poses at the end of the readout ``[C, 4, 4]`` and its
            direction ("top_to_bottom", "bottom_to_top", "left_to_right",
            "right_to_left"; "global" or no end pose: a global shutter).
            Each Gaussian is rendered with the pose at its own time.
        antialiased: gsplat's ``rasterize_mode="antialiased"`` (Mip-Splatting's
            compensated 2D filter): each (camera, Gaussian)'s opacity is
            multiplied by ``sqrt(det(Sigma_2d) / det(Sigma_2d + eps2d I))``, its
            2D covariance before and after the dilation, so that the
            dilation does not brighten small or distant Gaussians; the
            1/255 cut and the footprint follow the compensated opacity.
            Differentiable through the compensation too.
        eps2d: the dilation added to each 2D covariance's diagonal, px^2
            (SPEC 3's 0.3; gsplat's ``eps2d``), in [0, 1e6].
        radius_clip: gsplat's ``radius_clip``, >= 0 px: a (camera,
            Gaussian) item whose radii (``meta.radii``, the half-extents in
            whole pixels of its footprint's box) are both <= radius_clip is
            dropped, as if it reached no pixel (no entries, radii 0, no
            gradient): small, distant Gaussians skipped for speed. 0 (the
            default, gsplat's too) drops none.
        median_depth: also return ``median_depth [C, H, W, 1]`` after
            alpha (gsplat issue 930): per pixel the camera z of its median
            Gaussian, the first in compositing order after which the
            pixel's transmittance is at most 0.5 (0 where alpha < 0.5; NaN
            for an overflowed call). Differentiable: its gradient flows into
            that Gaussian's mean (nurec_ops._median).

    Returns:
        a named tuple ``(render [C, H, W, D], depth [C, H, W, 1], alpha
        [C, H, W, 1])`` (and ``meta`` with return_meta):
        ``render = sum w f + T background``, ``depth = sum w z`` (expected
        camera z, not normalized), ``alpha = 1 - T``. Differentiable with
        respect to means, quats, scales, opacities, features (or SH
        coefficients) and backgrounds.

    Semantics (SPEC section 3): EWA projection with the pinhole Jacobian at
    the mean and 0.3 px^2 on the diagonal; per pixel centre (x + 0.5,
    y + 0.5), Gaussians in ascending camera z of the mean (ties in Gaussian
    order), ``alpha = min(0.99, o exp(-sigma))``, skipped when sigma < 0 or
    alpha < 1/255, stopping before the Gaussian that would take T below
    1e-4. Tiles (16 x 16) are only a schedule: each Gaussian is binned into
    every tile its opacity-aware ellipse ``d^T Sigma^-1 d <= 2 ln(255 o)``
    (plus a 0.01 rounding margin) crosses, row by row, so images do not
    depend on tiling. The Jacobian is evaluated with x / z and y / z clamped
    to 30% of the half field of view past the image borders (the 3DGS code's
    and gsplat's convention, so that scenes trained there render the same;
    the mean's own projection is not clamped; no gradient past the bound for
    the clamped coordinate). Choices where the SPEC is silent: a zero
    quaternion is the identity with zero gradient; gradients do not flow
    into viewmats, Ks, near or far.
    """
    sh = -1 if sh_degree is None else int(sh_degree)
    width, height = int(width), int(height)
    C, N = _binning.leading(viewmats), _binning.leading(means)
    if sh < 0 and features.dim() == 3 and tuple(features.shape[:2]) != (C, N):
        Ck.fail(_OP, f"`features` is {list(features.shape)}: SH coefficients [N, K, 3] need `sh_degree`; "
                f"features per camera are [C, N, D] (C = {C} cameras, N = {N} Gaussians)")
    D = 3 if sh >= 0 else (features.shape[-1] if features.dim() > 0 else 0)
    if absgrad and D > 4:  # the glue's rule (one CUDA pass of channels), checked before any work
        Ck.fail(_OP, f"`absgrad` supports at most 4 feature channels (RGB or SH), got {D}")
    segments = _segments_for(means.device, means.dtype, C, height, width, D)
    code, model_params, Ks = _camera_models.pack(_OP, camera_model, C, means, Ks, model_args)
    rs_code, rs_end = _rolling_shutter.op_args(_OP, viewmats, viewmats_end, shutter)
    args = (means, quats, scales, opacities, features, viewmats, Ks, backgrounds, width, height,
            float(near), float(far), sh, segments, _SEGMENT_MIN)
    # meta: by the projection
    tail = (code, model_params, rs_code, rs_end, bool(return_meta), bool(antialiased), float(eps2d),
            float(radius_clip))

    def run(forward):
        return _binning.run_binned(_OP, lambda *a: forward(*a, *tail), args, means.device, (C, width, height),
                                   C * N, binning, capacity, on_overflow, report=10)

    median = None
    if median_depth:
        def median(out):  # the forward op's records, isect_items, tile_ranges, status, final_T and taus
            items = ops.rasterize_camera_median(out[3].detach(), out[6], out[7], out[10], out[8].detach(),
                                                *_median.parts(out[11], out[12]), _SEGMENT_MIN, width, height)
            poses = _median.item_poses(_OP, viewmats, viewmats_end, shutter, out[13], N)
            return _median.median_of(items, _median.camera_depths(poses, means))
    return run_with_meta(_OP, run, _FORWARD, _WITH_MEANS2D, means, C, N, return_meta, means2d_grad,
                         _OUTPUTS_MEDIAN if median_depth else _OUTPUTS, absgrad, median)


def check_overflow():
    """Reads the binning reports that have arrived (never waits) and warns or
    raises for any overflowed call, as the next call would."""
    _POLICY.poll()


def _check(op, means, quats, scales, opacities, features, viewmats, Ks, backgrounds, width, height,
           near, far, sh_degree):
    N = Ck.gaussians(op, means, quats, scales, opacities)
    if not -1 <= sh_degree <= 3:
        Ck.fail(op, f"`sh_degree` must be None or 0..3, got {sh_degree}")
    Ck.shape(op, "viewmats", viewmats, (-1, 4, 4), "[C, 4, 4]")
    C = viewmats.shape[0]
    if sh_degree < 0 and features.dim() == 3:  # per (camera, Gaussian) item
        Ck.shape(op, "features", features, (C, N, -1),
                 "[C, N, D] per camera (C = viewmats.shape[0], N = means.shape[0]), [N, D], or SH [N, K, 3] "
                 "with `sh_degree`")
        D, K = features.shape[2], 0
        if D < 1:
            Ck.fail(op, f"`features` must have at least one channel, got {list(features.shape)}")
    elif sh_degree < 0:
        Ck.shape(op, "features", features, (N, -1),
                 "[N, D] (N = means.shape[0]), [C, N, D] per camera, or SH [N, K, 3] with sh_degree")
        D, K = features.shape[1], 0
        if D < 1:
            Ck.fail(op, f"`features` must have at least one channel, got {list(features.shape)}")
    else:
        Ck.shape(op, "features", features, (N, -1, 3), "[N, K, 3] SH coefficients (N = means.shape[0])")
        D, K = 3, features.shape[1]
        need = (sh_degree + 1) ** 2
        if K < need:
            Ck.fail(op, f"`features` has K = {K} SH coefficients but sh_degree = {sh_degree} needs at least {need}")
    Ck.shape(op, "Ks", Ks, (C, 3, 3), "[C, 3, 3] (C = viewmats.shape[0])")
    named = [("quats", quats), ("scales", scales), ("opacities", opacities), ("features", features),
             ("viewmats", viewmats), ("Ks", Ks)]
    if backgrounds is not None:
        Ck.shape(op, "backgrounds", backgrounds, (C, D), "[C, D] (C cameras, D feature channels)")
        named.append(("backgrounds", backgrounds))
    Ck.like_means(op, named, means)
    if not (0 <= width <= (1 << 24)):
        Ck.fail(op, f"`width` must be in [0, 2^24], got {width}")
    if not (0 <= height <= (1 << 24)):
        Ck.fail(op, f"`height` must be in [0, 2^24], got {height}")
    Ck.near_far(op, near, far)
    return C, N, D, K


def _check_packed(op, C, means, name, code, codes, params, params_name, shape, what):
    """A code (0: none) and, for the others, its parameters [C, *shape]
    (the glue's rc_model / rc_shutter checks)."""
    if not 0 <= code < len(codes):
        Ck.fail(op, f"`{name}` must be 0..{len(codes) - 1} ({', '.join(codes)}), got {code}")
    if code == 0:
        return
    if params is None:
        Ck.fail(op, f"`{params_name}` is needed for {name} {code}")
    dims = ", ".join(str(d) for d in shape)
    Ck.shape(op, params_name, params, (C,) + tuple(shape), f"[C, {dims}] (C = viewmats.shape[0]{what})")
    Ck.real(op, params_name, params, means, "means")
    Ck.device(op, params_name, params, means, "means")


def _check_filter(op, eps2d, radius_clip=0.0):
    """The glue's rc_filter checks: gsplat's eps2d and radius_clip."""
    if not 0 <= eps2d <= 1e6:  # NaN fails too
        Ck.fail(op, f"`eps2d` must be in [0, 1e6] px^2, got {eps2d}")
    if not radius_clip >= 0:
        Ck.fail(op, f"`radius_clip` must be >= 0 px, got {radius_clip}")


def _check_model(op, C, means, camera_model, model_params):
    _check_packed(op, C, means, "camera_model", camera_model, tuple(_camera_models.CODES), model_params,
                  "model_params", (_camera_models.PARAMS,), "; packed by nurec_ops._camera_models")


def _check_shutter(op, C, means, shutter, viewmats_end):
    _check_packed(op, C, means, "shutter", shutter, tuple(_rolling_shutter.SHUTTERS), viewmats_end,
                  "viewmats_end", (4, 4), "")


@torch.library.register_fake("nurec_ops::rasterize_camera_fwd")
def _fake(means, quats, scales, opacities, features, viewmats, Ks, backgrounds, width, height, near, far,
          sh_degree, segments, segment_min, capacity, camera_model=0, model_params=None, shutter=0,
          viewmats_end=None, meta=False, antialiased=False, eps2d=0.3, radius_clip=0.0):
    C, N, D, K = _check(_OP, means, quats, scales, opacities, features, viewmats, Ks, backgrounds, width,
                        height, near, far, sh_degree)
    _check_filter(_OP, eps2d, radius_clip)
    _check_model(_OP, C, means, camera_model, model_params)
    _check_shutter(_OP, C, means, shutter, viewmats_end)
    Ck.segments(_OP, segments, segment_min)
    S = segments if segments > 1 and means.device.type != "cpu" else 0
    H, W = height, width
    ty, tx = (H + _TILE - 1) // _TILE, (W + _TILE - 1) // _TILE
    X = _binning.part_slots(S, capacity, segment_min, C * ty * tx)
    M = _binning.fake_intersections(means.device, capacity)
    e = means.new_empty
    i64, i32 = torch.int64, torch.int32
    return (e((C, H, W, D)), e((C, H, W, 1)), e((C, H, W, 1)), e((C, N, 8)), e((C, N), dtype=i64),
            e((C * N * 3 if sh_degree >= 0 else 0,)), e((M,), dtype=i32), e((C, ty, tx, 2), dtype=i64),
            e((C, H, W)), e((C, H, W), dtype=i32), e((2,), dtype=i64), e((S, X, _TILE * _TILE, D + 2)),
            e((S, X, _TILE * _TILE), dtype=i32), e((C if shutter else 0, N)),
            e((_binning.part_chunks(S, capacity, segment_min),), dtype=i64)) + meta_shapes(e, meta, C, N)


@torch.library.register_fake("nurec_ops::rasterize_camera_bwd")
def _fake_backward(grad_render, grad_depth, grad_alpha, means, quats, scales, opacities, features, viewmats,
                   Ks, backgrounds, records, counts, colors, isect_items, tile_ranges, final_T, last, status,
                   seg_state, seg_last, width, height, near, far, sh_degree, segment_min, camera_model=0,
                   model_params=None, shutter=0, viewmats_end=None, taus=None, absgrad=False, seg_later=None,
                   means2d_grad=False, antialiased=False, eps2d=0.3):
    C, N, D, K = _check(_OP + "_backward", means, quats, scales, opacities, features, viewmats, Ks,
                        backgrounds, width, height, near, far, sh_degree)
    _check_filter(_OP + "_backward", eps2d)
    _check_model(_OP + "_backward", C, means, camera_model, model_params)
    _check_shutter(_OP + "_backward", C, means, shutter, viewmats_end)
    e = means.new_empty
    return (e((N, 3)), e((N, 4)), e((N, 3)), e((N,)), e(features.shape), e((C * N, grad_records_width(absgrad))),
            e(means2d_grad_shape(means2d_grad, C, N)))


def _setup_context(ctx, inputs, output):
    (means, quats, scales, opacities, features, viewmats, Ks, backgrounds, width, height, near, far,
     sh_degree, _segments, segment_min, capacity) = inputs[:16]
    camera_model = inputs[16] if len(inputs) > 16 else 0
    model_params = inputs[17] if len(inputs) > 17 else None
    shutter = inputs[18] if len(inputs) > 18 else 0
    viewmats_end = inputs[19] if len(inputs) > 19 else None
    ctx.antialiased = bool(inputs[21]) if len(inputs) > 21 else False  # the backward recomputes the projection
    ctx.eps2d = float(inputs[22]) if len(inputs) > 22 else 0.3
    (_, _, _, records, counts, colors, isect, ranges, final_T, last, status, seg_state, seg_last, taus,
     seg_later) = output[:15]  # then SPEC 8's meta (means2d, radii, depths): no gradient
    ctx.set_materialize_grads(False)
    ctx.has_bg = backgrounds is not None
    saved = [means, quats, scales, opacities, features, viewmats, Ks, records, counts, colors, isect,
             ranges, final_T, last, status, seg_state, seg_last]
    if ctx.has_bg:
        saved.append(backgrounds)
    saved.append(taus)  # each item's own time (SPEC 7; empty for a global shutter)
    saved.append(seg_later)  # the later parts' list: the backward does not build it again
    ctx.save_for_backward(*saved)
    ctx.cfg = (width, height, near, far, sh_degree, segment_min)
    # the packed camera model and shutter: inputs, constants, never differentiated
    ctx.model = (camera_model, model_params, shutter, viewmats_end)
    ctx.n_inputs = len(inputs)


def _backward_with_records(ctx, g_render, g_depth, g_alpha, absgrad=False, means2d_grad=False):
    """The op's backward and its extras (_meta.split_grads)."""
    saved = ctx.saved_tensors
    (means, quats, scales, opacities, features, viewmats, Ks, records, counts, colors, isect, ranges,
     final_T, last, status, seg_state, seg_last) = saved[:17]
    backgrounds = saved[17] if ctx.has_bg else None
    taus = saved[-2] if ctx.model[2] else None
    seg_later = saved[-1]
    width, height, near, far, sh_degree, segment_min = ctx.cfg
    C, D = viewmats.shape[0], (3 if sh_degree >= 0 else features.shape[-1])
    shape = (C, height, width)
    if g_render is None:
        g_render = means.new_zeros(shape + (D,))
    # g_depth, g_alpha stay None where the loss did not read them: the op
    # takes them as zero, without zero images to allocate and fill each step
    gm, gq, gs, go, gf, grec, gm2d = ops.rasterize_camera_bwd(
        g_render, g_depth, g_alpha, means, quats, scales, opacities, features, viewmats, Ks, backgrounds,
        records, counts, colors, isect, ranges, final_T, last, status, seg_state, seg_last, width, height, near,
        far, sh_degree, segment_min, *ctx.model, taus, absgrad, seg_later, means2d_grad, ctx.antialiased, ctx.eps2d)
    g_bg = None
    if ctx.has_bg and ctx.needs_input_grad[7 + getattr(ctx, "input_offset", 0)]:  # backgrounds
        ok = (status[1] == 0).to(g_render.dtype)
        g_bg = (g_render * final_T[..., None]).sum((1, 2)) * ok
        g_bg = torch.nan_to_num(g_bg, nan=0.0)
    n_model = ctx.n_inputs - 16  # camera_model, model_params when the call passed them
    return (gm, gq, gs, go, gf, None, None, g_bg, None, None, None, None, None, None, None, None) + (None,) * n_model + (
        grec, absgrad_of(grec, absgrad), gm2d if means2d_grad else None)


_FORWARD = AutogradOp("rasterize_camera_fwd", op_backward(_backward_with_records), _setup_context)


_WITH_MEANS2D = means2d_grad_function(_FORWARD, _setup_context, _backward_with_records)
# (render, depth, alpha) and (render, depth, alpha, meta), named as the op's schema names them
_OUTPUTS = (named_outputs("rasterize_camera_fwd", 3), named_outputs("rasterize_camera_fwd", 3, extra=("meta",)))
_OUTPUTS_MEDIAN = (named_outputs("rasterize_camera_fwd", 3, extra=("median_depth",)),
                   named_outputs("rasterize_camera_fwd", 3, extra=("median_depth", "meta")))


@torch.library.register_fake("nurec_ops::rasterize_camera_median")
def _fake_median(records, isect_items, tile_ranges, status, final_T, seg_state, seg_last, segment_min, width,
                 height):
    return _median.fake_median(_OP + "_median", records, isect_items, tile_ranges, status, final_T, seg_state,
                               seg_last, segment_min, int(height), int(width), _TILE, _TILE)


# ----------------------------------------------------------- visibility

_VISIBLE_OP = "camera_visible"


@ranged("nurec_ops.camera_visible")
def camera_visible(means, quats, scales, opacities, viewmats, Ks, width, height, near=0.01, far=1e10, *,
                   camera_model="pinhole", viewmats_end=None, shutter="global", antialiased=False, eps2d=0.3,
                   radius_clip=0.0, **model_args):
    """``[N]`` bool: the Gaussians that ``rasterize_camera`` with the same
    arguments can draw: those with a pixel centre of at least one camera
    inside their footprint, SPEC section 3's ellipse ``d^T Sigma^-1 d <=
    2 ln(255 o) + 0.01`` (outside it alpha is below 1/255 everywhere). The
    forward's own projection runs for every (camera, Gaussian), nothing
    else: no records, no binning, memory ``O(N)``; any camera model of SPEC
    section 6 and SPEC section 7's rolling shutter (each Gaussian at its own
    time), so the set is exact where ``nurec_ops.offload.pinhole_visible``
    is a bound for pinholes only. A Gaussian outside it contributes nothing
    to any image or gradient: what an offloaded scene's step gathers
    (``nurec_ops.offload``). (The forward's binning lists a few more:
    its tile rows take the columns an ellipse crosses between two rows of
    pixel centres.) Arguments as ``rasterize_camera``'s (no features); not
    differentiable; no host sync."""
    width, height = int(width), int(height)
    C = _binning.leading(viewmats)
    code, model_params, Ks = _camera_models.pack(_VISIBLE_OP, camera_model, C, means, Ks, model_args)
    rs_code, rs_end = _rolling_shutter.op_args(_VISIBLE_OP, viewmats, viewmats_end, shutter)
    with torch.no_grad():
        return ops.rasterize_camera_visible(means, quats, scales, opacities, viewmats, Ks, width, height,
                                            float(near), float(far), code, model_params, rs_code, rs_end,
                                            bool(antialiased), float(eps2d), float(radius_clip))


@torch.library.register_fake("nurec_ops::rasterize_camera_visible")
def _fake_visible(means, quats, scales, opacities, viewmats, Ks, width, height, near, far, camera_model=0,
                  model_params=None, shutter=0, viewmats_end=None, antialiased=False, eps2d=0.3,
                  radius_clip=0.0):
    C, N, _, _ = _check(_VISIBLE_OP, means, quats, scales, opacities, means, viewmats, Ks, None, width, height,
                        near, far, -1)
    _check_filter(_VISIBLE_OP, eps2d, radius_clip)
    _check_model(_VISIBLE_OP, C, means, camera_model, model_params)
    _check_shutter(_VISIBLE_OP, C, means, shutter, viewmats_end)
    return means.new_empty((N,), dtype=torch.bool)
