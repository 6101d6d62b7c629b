"""rasterize_rays: 3D Gaussian splatting into a sensor given by arbitrary
rays (gsplat issue 1009): a lidar of any scan pattern (non-repetitive,
non-separable), or any sensor as a ray bundle. Fused op, fake kernels,
autograd, and the sync-free binning capacity policy of the other
rasterizers (nurec_ops/_binning.py). The rays are posed and grouped into
tiles in PyTorch (reference.rasterize_rays.world_rays, _ray_layout)."""
import torch

from . import _binning
from . import _checks as Ck
from . import _ray_layout
from ._library import AutogradOp, named_outputs, ops
from .nvtx import ranged
from .reference.rasterize_rays import world_rays

_OP = "rasterize_rays"
_POLICY = _binning.policy(_OP)
MAX_CUDA_CHANNELS = 4 * (65535 // 8)  # csrc/rasterize_rays/rasterize_rays.h: NUREC_RAYS_MAX_CHANNELS


@ranged("nurec_ops.rasterize_rays")
def rasterize_rays(means, quats, scales, opacities, features, viewmats, ray_origins, ray_directions, near=0.0,
                   far=1e10, *, ray_times=None, viewmats_end=None, grid=None, binning="auto", capacity=None,
                   on_overflow="warn"):
    """Renders Gaussians into sensors given by their rays.

    Args:
        means, quats, scales, opacities: world-space Gaussians ``[N, 3]``,
            ``[N, 4]`` (w, x, y, z), ``[N, 3]``, ``[N]`` (activated).
        features ``[N, D]``: what each ray composites (intensity, ray-drop
            logit, colour, ...), any D >= 1.
        viewmats ``[C, 4, 4]``: world -> sensor, one per sensor.
        ray_origins, ray_directions ``[C, M, 3]`` (or ``[M, 3]``, shared by
            the sensors): each ray in its sensor's frame; directions need not
            be unit. A ray with a non-finite origin or direction, or a zero
            direction, gets NaN outputs.
        near, far: a Gaussian reaches a ray only where its peak along the
            ray lies at a distance t* in (near, far) (near >= 0).
        ray_times ``[C, M]`` (or ``[M]``) in [0, 1], with ``viewmats_end``
            ``[C, 4, 4]`` (the pose at the end of the frame): rolling
            shutter, each ray cast from the pose at its own time (SPEC 7's
            interpolation). Without ``viewmats_end`` the times are unused.
        grid: ``(GE, GA)`` bands of the direction grid the rays are tiled
            by (elevation, azimuth); default chosen once per configuration
            from the rays' extents (one host sync; required under
            torch.compile / CUDA-graph capture before an eager call). The
            result does not depend on it.
        binning, capacity, on_overflow: as in :func:`rasterize_camera`.

    Returns ``(features [C, M, D], range [C, M, 1], alpha [C, M, 1])`` in
    the caller's ray order: per ray SPEC 3's compositing of the exact 3D
    response (sigma the ray's smallest Mahalanobis half-distance to the
    mean, range the expected t*), the Gaussians in ascending distance from
    the sensor's centre. Gradients flow to the Gaussians, not to the poses
    or rays.
    """
    C = _binning.leading(viewmats)
    Ck.shape(_OP, "viewmats", viewmats, (-1, 4, 4), "[C, 4, 4]")
    Ck.real(_OP, "viewmats", viewmats, means, "means")
    Ck.device(_OP, "viewmats", viewmats, means, "means")
    for name, t in (("ray_origins", ray_origins), ("ray_directions", ray_directions)):
        if not (t.dim() in (2, 3) and t.shape[-1] == 3 and (t.dim() == 2 or t.shape[0] == C)):
            Ck.fail(_OP, f"`{name}` must have shape [C, M, 3] or [M, 3] (C = viewmats.shape[0]), got {list(t.shape)}")
        Ck.real(_OP, name, t, means, "means")
        Ck.device(_OP, name, t, means, "means")
    M = ray_origins.shape[-2]
    if ray_directions.shape[-2] != M:
        Ck.fail(_OP, f"`ray_directions` must have as many rays as `ray_origins` ({M}), got {list(ray_directions.shape)}")
    if viewmats_end is not None:
        Ck.shape(_OP, "viewmats_end", viewmats_end, (C, 4, 4), "[C, 4, 4] (C = viewmats.shape[0])")
        Ck.real(_OP, "viewmats_end", viewmats_end, means, "means")
        Ck.device(_OP, "viewmats_end", viewmats_end, means, "means")
        if ray_times is None:
            Ck.fail(_OP, "`ray_times` is needed with `viewmats_end`")
        if not (ray_times.shape == (C, M) or ray_times.shape == (M,)):
            Ck.fail(_OP, f"`ray_times` must have shape [C, M] or [M] (M = {M} rays), got {list(ray_times.shape)}")
        Ck.real(_OP, "ray_times", ray_times, means, "means")
        Ck.device(_OP, "ray_times", ray_times, means, "means")
    if means.device.type == "cuda" and features.dim() == 2 and features.shape[1] > MAX_CUDA_CHANNELS:
        Ck.fail(_OP, f"at most {MAX_CUDA_CHANNELS} feature channels a call on CUDA (its launch grid), got "
                     f"{features.shape[1]}")
    if not float(near) >= 0:
        Ck.fail(_OP, f"`near` must be >= 0, got {near}")
    if not float(far) > float(near):
        Ck.fail(_OP, f"`far` must be > `near`, got near = {near}, far = {far}")
    o_w, d_w, ok = world_rays(viewmats, ray_origins, ray_directions, ray_times, viewmats_end)
    ge, ga = _ray_layout.choose_grid(_OP, viewmats, d_w, ok, grid)
    tables = _ray_layout.layout(viewmats, o_w, d_w, ok, ge, ga)
    o_w, d_w = o_w.to(means.dtype).contiguous(), d_w.to(means.dtype).contiguous()
    args = (means, quats, scales, opacities, features, o_w, d_w) + tables + (float(near), float(far))
    N = _binning.leading(means)
    out = _binning.run_binned(_OP, lambda *a: _FORWARD(*a), args, means.device, ("rays", C, M), C * N,
                              binning, capacity, on_overflow, report=10)
    return _OUTPUTS(*out[:3])


def suggest_ray_grid(viewmats, ray_directions, ray_origins=None):
    """The ``grid=(GE, GA)`` that ``rasterize_rays(grid=None)`` would choose
    for these rays (about one cell per 128 rays, in the ratio of their
    elevation and azimuth extents), computed now at one host sync and not
    cached. ``grid=None`` caches its choice per (device, sensors, rays):
    a program rendering several ray patterns of one size passes each the
    grid suggested for it once; so does a first call under torch.compile or
    CUDA-graph capture."""
    C = _binning.leading(viewmats)
    Ck.shape("suggest_ray_grid", "viewmats", viewmats, (-1, 4, 4), "[C, 4, 4]")
    if not (ray_directions.dim() in (2, 3) and ray_directions.shape[-1] == 3
            and (ray_directions.dim() == 2 or ray_directions.shape[0] == C)):
        Ck.fail("suggest_ray_grid", f"`ray_directions` must have shape [C, M, 3] or [M, 3], got {list(ray_directions.shape)}")
    o = torch.zeros_like(ray_directions) if ray_origins is None else ray_origins
    with torch.no_grad():
        _, d_w, ok = world_rays(viewmats.detach(), o.detach(), ray_directions.detach(), None, None)
        return _ray_layout.grid_of(viewmats.detach(), d_w, ok)


@torch.library.register_fake("nurec_ops::rasterize_rays_fwd")
def _fake(means, quats, scales, opacities, features, ray_origins, ray_directions, ray_order, cell_rays, cells,
          el_edges, az_edges, sensor, near, far, capacity):
    N = Ck.gaussians(_OP, means, quats, scales, opacities)
    Ck.shape(_OP, "features", features, (N, -1), "[N, D] (N = means.shape[0])")
    Ck.shape(_OP, "ray_origins", ray_origins, (-1, -1, 3), "[C, M, 3]")
    C, M = ray_origins.shape[:2]
    Ck.shape(_OP, "ray_directions", ray_directions, (C, M, 3), "[C, M, 3] (as ray_origins)")
    Ck.like_means(_OP, [("quats", quats), ("scales", scales), ("opacities", opacities), ("features", features),
                        ("ray_origins", ray_origins), ("ray_directions", ray_directions)], means)
    ge, ga = el_edges.shape[-1] - 1, az_edges.shape[-1] - 1
    for name, t, want in (("ray_order", ray_order, (C, M)), ("cell_rays", cell_rays, (C, ge * ga + 1, 2)),
                          ("cells", cells, (C, ge * ga, 8)), ("sensor", sensor, (C, 16))):
        Ck.shape(_OP, name, t, want, str(list(want)))
    D = features.shape[1]
    e = means.new_empty
    i64, i32 = torch.int64, torch.int32
    K = _binning.fake_intersections(means.device, capacity)
    return (e((C, M, D)), e((C, M, 1)), e((C, M, 1)), e((N, 16)), e((C, N, 8)), e((C, N), dtype=i64),
            e((K,), dtype=i32), e((C, ge, ga, 2), dtype=i64), e((C, M)), e((C, M), dtype=i32), e((2,), dtype=i64))


@torch.library.register_fake("nurec_ops::rasterize_rays_bwd")
def _fake_backward(grad_features, grad_range, grad_alpha, means, quats, scales, opacities, features, ray_origins,
                   ray_directions, ray_order, cell_rays, gauss, isect_items, tile_ranges, final_T, last, status,
                   near, far):
    N = Ck.gaussians(_OP + "_backward", means, quats, scales, opacities)
    C, M = ray_origins.shape[:2]
    D = features.shape[1]
    Ck.shape(_OP + "_backward", "grad_features", grad_features, (C, M, D), "[C, M, D]")
    e = means.new_empty
    return e((N, 3)), e((N, 4)), e((N, 3)), e((N,)), e((N, D))


def _setup_context(ctx, inputs, output):
    (means, quats, scales, opacities, features, o_w, d_w, order, cell_rays, _cells, _el, _az, _sensor, near,
     far, _capacity) = inputs
    _, _, _, gauss, _records, _counts, isect, ranges, final_T, last, status = output
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(means, quats, scales, opacities, features, o_w, d_w, order, cell_rays, gauss, isect,
                          ranges, final_T, last, status)
    ctx.cfg = (near, far)


def _backward(ctx, g_feat, g_range, g_alpha, *_unused):
    (means, quats, scales, opacities, features, o_w, d_w, order, cell_rays, gauss, isect, ranges, final_T, last,
     status) = ctx.saved_tensors
    if g_feat is None:
        g_feat = means.new_zeros((o_w.shape[0], o_w.shape[1], features.shape[1]))
    gm, gq, gs, go, gf = ops.rasterize_rays_bwd(g_feat, g_range, g_alpha, means, quats, scales, opacities, features,
                                                o_w, d_w, order, cell_rays, gauss, isect, ranges, final_T, last,
                                                status, *ctx.cfg)
    return (gm, gq, gs, go, gf) + (None,) * 11


_FORWARD = AutogradOp("rasterize_rays_fwd", _backward, _setup_context)
_OUTPUTS = named_outputs("rasterize_rays_fwd", 3, {"features_out": "features"})
