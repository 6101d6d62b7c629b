"""A drop-in for ``gsplat.rasterization`` on nurec_ops' camera rasterizer.

A trainer written against gsplat changes one import::

    from gsplat import rasterization            # before
    from nurec_ops.gsplat import rasterization  # after

``rasterization`` takes gsplat's arguments with gsplat's defaults and
returns what gsplat returns: ``(render_colors, render_alphas, meta)``, with
``meta`` holding what gsplat's densification strategies read (``means2d``
with a usable ``.grad`` after ``backward()``, ``radii``, ``depths``,
``width``, ``height``, ``n_cameras``, ``gaussian_ids=None``,
``camera_ids=None``; with ``absgrad=True`` also ``means2d.absgrad``), so
``gsplat.strategy.DefaultStrategy`` runs on it unchanged. gsplat's
``MCMCStrategy`` does too; it calls two CUDA kernels of gsplat's own
(relocation, covariances) that do not run on the CPU:
``patch_gsplat_strategy_ops()`` swaps in the pure-PyTorch equivalents of
``nurec_ops.gsplat_strategy_ops``, for any device. What nurec_ops does not do, it refuses with an error naming the
argument, never silently: see ``rasterization``'s docstring.

Semantics are gsplat's classic path (SPEC section 3 is that convention:
the Jacobian clamp, 0.3 px^2 dilation, opacity-aware culling at alpha
1/255; images agree with gsplat's to 86-101 dB on its garden fixture,
``benchmarks/vs_gsplat.py``). One difference: the per-Gaussian alpha is
capped at 0.99 (the 3DGS original and SPEC 3) where gsplat caps at 0.999.
"""
import torch

from . import _checks as Ck
from .rasterize_camera import rasterize_camera

_OP = "gsplat.rasterization"
_MODES = ("RGB", "D", "ED", "RGB+D", "RGB+ED")


def _unsupported(name, value, why):
    raise NotImplementedError(f"nurec_ops.{_OP}: `{name}={value!r}` is not supported by nurec_ops ({why})")


def rasterization(means, quats, scales, opacities, colors, viewmats, Ks, width, height, near_plane=0.01,
                  far_plane=1e10, radius_clip=0.0, eps2d=0.3, sh_degree=None, packed=True, tile_size=16,
                  backgrounds=None, render_mode="RGB", sparse_grad=False, absgrad=False,
                  rasterize_mode="classic", channel_chunk=32, distributed=False, camera_model="pinhole",
                  segmented=False, covars=None, with_ut=False, with_eval3d=False, radial_coeffs=None,
                  tangential_coeffs=None, thin_prism_coeffs=None, ftheta_coeffs=None, rolling_shutter=None,
                  viewmats_rs=None):
    """gsplat's ``rasterization`` (1.5 signature and defaults) on nurec_ops.

    Supported as gsplat does them: means [N, 3], quats [N, 4], scales
    [N, 3] and opacities [N] (activated), colors [N, D] or SH coefficients
    [N, K, 3] with ``sh_degree``, viewmats [C, 4, 4], Ks [C, 3, 3], width,
    height, near_plane, far_plane, backgrounds [C, D], render modes RGB, D,
    ED, RGB+D, RGB+ED. ``tile_size`` and ``channel_chunk`` are accepted and
    ignored (nurec_ops' images do not depend on tiling).

    Refused with an error naming the argument: ``packed=True`` (gsplat's
    default: pass ``packed=False``; the packed layout needs a host sync to
    size), ``eps2d`` other than 0.3, ``radius_clip`` > 0,
    ``absgrad=True`` with colors of more than 4 channels,
    ``rasterize_mode="antialiased"``, camera models other than pinhole,
    distortion coefficients, rolling shutter, the unscented transform and 3D
    evaluation, ``distributed``, ``sparse_grad``, ``segmented``, ``covars``,
    per-camera colors [C, N, D] and batch dimensions.
    """
    if packed:
        _unsupported("packed", packed, "pass packed=False: nurec_ops renders [C, N] unpacked, sync-free")
    if float(eps2d) != 0.3:
        _unsupported("eps2d", eps2d, "the camera's dilation is SPEC 3's fixed 0.3 px^2")
    if radius_clip > 0:
        _unsupported("radius_clip", radius_clip, "every Gaussian that reaches alpha 1/255 is rendered")
    if rasterize_mode != "classic":
        _unsupported("rasterize_mode", rasterize_mode, "only the classic mode")
    if camera_model != "pinhole":
        _unsupported("camera_model", camera_model, "only pinhole cameras so far")
    for name, value in (("radial_coeffs", radial_coeffs), ("tangential_coeffs", tangential_coeffs),
                        ("thin_prism_coeffs", thin_prism_coeffs), ("ftheta_coeffs", ftheta_coeffs),
                        ("viewmats_rs", viewmats_rs), ("covars", covars)):
        if value is not None:
            _unsupported(name, type(value).__name__, "not implemented")
    if rolling_shutter is not None and getattr(rolling_shutter, "name", str(rolling_shutter)) != "GLOBAL":
        _unsupported("rolling_shutter", rolling_shutter, "only a global shutter so far")
    for name, value in (("with_ut", with_ut), ("with_eval3d", with_eval3d), ("distributed", distributed),
                        ("sparse_grad", sparse_grad), ("segmented", segmented)):
        if value:
            _unsupported(name, value, "not implemented")
    if render_mode not in _MODES:
        Ck.fail(_OP, f"`render_mode` must be one of {_MODES}, got {render_mode!r}")
    if means.dim() != 2:
        _unsupported("means", f"shape {list(means.shape)}", "no batch dimensions: means must be [N, 3]")
    N = means.shape[0]
    sh = colors.dim() == 3 and sh_degree is not None
    if not sh and colors.dim() != 2:
        _unsupported("colors", f"shape {list(colors.shape)}", "colors [N, D] or SH [N, K, 3] with sh_degree")
    if colors.shape[0] != N:
        _unsupported("colors", f"shape {list(colors.shape)}", "per-camera colors [C, N, D]: pass [N, D]")
    C = viewmats.shape[0]
    want_color = render_mode in ("RGB", "RGB+D", "RGB+ED")
    feats = colors
    if not want_color:  # depth only: one dummy channel keeps the op's feature path
        feats = means.new_zeros((N, 1))
        sh = False
    bg = backgrounds if want_color else None
    grad = torch.is_grad_enabled() and any(
        t.requires_grad for t in (means, quats, scales, opacities, colors) if isinstance(t, torch.Tensor))
    render, depth, alpha, m = rasterize_camera(
        means, quats, scales, opacities, feats, viewmats, Ks, int(width), int(height), near=near_plane,
        far=far_plane, backgrounds=bg, sh_degree=sh_degree if sh else None, return_meta=True, means2d_grad=grad,
        absgrad=bool(absgrad) and grad)
    if render_mode in ("ED", "RGB+ED"):
        depth = depth / alpha.clamp(min=1e-10)
    if render_mode == "RGB":
        out = render
    elif render_mode in ("D", "ED"):
        out = depth
    else:
        out = torch.cat((render, depth), -1)
    meta = {
        "means2d": m.means2d, "radii": m.radii, "depths": m.depths, "width": int(width), "height": int(height),
        "n_cameras": C, "gaussian_ids": None, "camera_ids": None, "tile_size": tile_size,
        "opacities": opacities[None].expand(C, N),
    }
    return out, alpha, meta


def patch_gsplat_strategy_ops():
    """Installs ``nurec_ops.gsplat_strategy_ops``' pure-PyTorch relocation
    and covariance functions in ``gsplat.strategy.ops`` (where gsplat's
    ``MCMCStrategy`` looks them up), so that the strategy runs on the CPU
    and needs no CUDA build of gsplat. Returns a function that puts gsplat's
    own back."""
    from gsplat.strategy import ops as gops

    from . import gsplat_strategy_ops as ours

    before = (gops.compute_relocation, gops.quat_scale_to_covar_preci)
    gops.compute_relocation, gops.quat_scale_to_covar_preci = ours.compute_relocation, ours.quat_scale_to_covar_preci

    def restore():
        gops.compute_relocation, gops.quat_scale_to_covar_preci = before
    return restore
