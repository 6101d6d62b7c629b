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
``patch_gsplat_strategy_ops()`` swaps in the equivalents of
``nurec_ops.gsplat_strategy_ops`` (the relocation in PyTorch, the
covariances nurec_ops' fused op), for any device. What nurec_ops does not do, it refuses with an error naming the
argument, never silently: see ``rasterization``'s docstring.

Semantics are gsplat's classic path (SPEC section 3 is that convention:
the Jacobian clamp, 0.3 px^2 dilation (``eps2d``'s default; other values
are passed on), opacity-aware culling at alpha 1/255; images agree with gsplat's to 86-101 dB on its garden fixture,
``benchmarks/vs_gsplat.py``). One difference: the per-Gaussian alpha is
capped at 0.99 (the 3DGS original and SPEC 3) where gsplat caps at 0.999.
"""
import functools
import math
import warnings

import torch

from . import _checks as Ck
from ._gsplat_distributed import distributed_call
from ._meta import Meta
from .rasterize_camera import rasterize_camera

_OP = "gsplat.rasterization"
_MODES = ("RGB", "D", "ED", "RGB+D", "RGB+ED")


def _unsupported(name, value, why):
    raise NotImplementedError(f"nurec_ops.{_OP}: `{name}={value!r}` is not supported by nurec_ops ({why})")


_WARNED = []


def _warn_ewa():
    if not _WARNED:
        _WARNED.append(True)
        warnings.warn("nurec_ops.gsplat.rasterization: `with_ut` / `with_eval3d` are accepted, but nurec_ops "
                      "renders camera models and rolling shutter with EWA splatting (SPEC 6), not gsplat's "
                      "unscented transform: images differ for large Gaussians near the edge of a wide lens",
                      UserWarning, stacklevel=3)


def _camera(model, Ks, C, radial, tangential, thin_prism, ftheta, like):
    """gsplat's camera arguments as rasterize_camera's (kwargs, Ks)."""
    def per_camera(name, t, width):
        if t.dim() != 2 or t.shape[0] != C:
            _unsupported(name, f"shape {list(t.shape)}", f"pass [C, {width}] (behind means' batch dimensions where it has them)")
        return t
    if model == "pinhole":
        if radial is None and tangential is None and thin_prism is None:
            return {}, Ks
        r = like.new_zeros((C, 6)) if radial is None else per_camera("radial_coeffs", radial, 6)
        if r.shape[1] == 4:
            r = torch.cat((r, r.new_zeros((C, 2))), 1)
        t = like.new_zeros((C, 2)) if tangential is None else per_camera("tangential_coeffs", tangential, 2)
        s = like.new_zeros((C, 4)) if thin_prism is None else per_camera("thin_prism_coeffs", thin_prism, 4)
        return dict(camera_model="opencv", radial=r, tangential=t, thin_prism=s), Ks
    if model == "fisheye":
        r = like.new_zeros((C, 4)) if radial is None else per_camera("radial_coeffs", radial, 4)
        if r.shape[1] != 4:
            _unsupported("radial_coeffs", f"shape {list(r.shape)}", "a fisheye takes k1..k4: [C, 4]")
        return dict(camera_model="fisheye", radial=r, max_angle=like.new_full((C,), math.pi)), Ks
    if model == "ftheta":
        if ftheta is None:
            _unsupported("ftheta_coeffs", None, "camera_model='ftheta' needs gsplat's FThetaCameraDistortionParameters")
        f = lambda v: like.new_tensor([float(x) for x in v])[None].expand(C, -1).contiguous()  # noqa: E731
        ref = getattr(ftheta.reference_poly, "name", str(ftheta.reference_poly))
        return dict(camera_model="ftheta", principal_point=Ks[:, :2, 2] - 0.5,  # ours adds the half pixel
                    angle_to_pixel=f(ftheta.angle_to_pixeldist_poly), pixel_to_angle=f(ftheta.pixeldist_to_angle_poly),
                    linear_cde=f(ftheta.linear_cde), max_angle=like.new_full((C,), float(ftheta.max_angle)),
                    reference_poly=1 if "PIXELDIST_TO_ANGLE" in ref else 2), None
    if model == "ortho":
        return dict(camera_model="ortho"), Ks
    _unsupported("camera_model", model, "pinhole (with or without distortion), ortho, fisheye and ftheta only")


_SHUTTERS = {"ROLLING_TOP_TO_BOTTOM": "top_to_bottom", "ROLLING_BOTTOM_TO_TOP": "bottom_to_top",
             "ROLLING_LEFT_TO_RIGHT": "left_to_right", "ROLLING_RIGHT_TO_LEFT": "right_to_left"}


def _shutter(rolling_shutter, viewmats_rs):
    name = getattr(rolling_shutter, "name", None if rolling_shutter is None else str(rolling_shutter))
    if name in (None, "GLOBAL"):
        return {}
    if name not in _SHUTTERS:
        _unsupported("rolling_shutter", rolling_shutter, f"one of {sorted(_SHUTTERS)} or GLOBAL")
    if viewmats_rs is None:
        _unsupported("viewmats_rs", None, "a rolling shutter needs the end poses [C, 4, 4]")
    return dict(viewmats_end=viewmats_rs, shutter=_SHUTTERS[name])


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
    ED, RGB+D, RGB+ED, ``rasterize_mode`` "classic" and "antialiased"
    (each item's opacity times gsplat's compensation, sqrt(det(Sigma_2d) /
    det(Sigma_2d + eps2d I)); gsplat's ``meta["opacities"]``, the
    compensated [C, N], is left out of meta in that mode rather than given
    uncompensated). ``tile_size``, ``channel_chunk`` and ``segmented``
    are accepted and ignored (nurec_ops' images do not depend on tiling,
    chunking or gsplat's sort).

    Batch dimensions as gsplat's (means [..., N, 3], viewmats [..., C, 4,
    4], every per-Gaussian and per-camera input behind the same leading
    dimensions): each batch element renders in a call of its own, and the
    outputs and meta are stacked as gsplat's ([..., C, H, W, X]; meta's
    ``n_batches``, and with ``packed=True`` ``batch_ids``).

    ``packed=True`` (gsplat's default) gives gsplat's packed meta
    (``camera_ids``, ``gaussian_ids``, and ``means2d``, ``radii``,
    ``depths``, ``opacities`` of the kept items, the ``means2d`` gradient
    and absgrad gathered from the unpacked one): the images are the same
    and packing costs one host sync, as in gsplat; ``packed=False`` is
    sync-free.

    ``sparse_grad=True`` (with ``packed=True`` and no batch dimensions, as
    in gsplat): means, quats and scales get their gradients as COO tensors
    of the Gaussians some camera kept (for torch.optim.SparseAdam), at a
    second host sync.

    ``radius_clip`` drops, as gsplat does, the (camera, Gaussian) items
    whose two radii are both <= it, the radii being those ``meta["radii"]``
    reports (gsplat's up to the footprint's 0.01 margin and its 3.33-sigma
    cap); <= 0 drops none.

    ``distributed=True`` (what gsplat's trainers pass when ``world_size >
    1``): each rank renders its own cameras with the Gaussians of every
    rank, the Gaussians' gradients summed over all ranks' cameras, and meta
    laid out as gsplat's, per (world camera, local Gaussian)
    (``nurec_ops._gsplat_distributed``); as in gsplat, per-Gaussian colors,
    no batch dimensions and no absgrad.

    Refused with an error naming the argument: ``absgrad=True`` with colors
    of more than 4 channels, and ``covars``.

    Per-camera colors [C, N, D] (``sh_degree=None``; what gsplat's trainer
    passes with its appearance module, ``app_opt``) are the op's features
    per camera: one call, as for [N, D]. Per-camera SH coefficients
    [C, N, K, 3] (with ``sh_degree``) are rendered one camera a call (one
    call for a trainer's batch of one camera; for C > 1 each call bins its
    camera alone: benchmarks/RESULTS.md measured 1.3-2.8x the fwd+bwd of
    shared colours at C = 3 that way).

    ``camera_model="ortho"`` is gsplat's orthographic camera (its classic
    path too): pixel ``(fx x + cx, fy y + cy)``, as gsplat projects it.

    Camera models and rolling shutter, which gsplat renders only with
    ``with_ut=True``: ``camera_model="pinhole"`` with ``radial_coeffs`` [C, 6]
    (or [C, 4]), ``tangential_coeffs`` [C, 2], ``thin_prism_coeffs`` [C, 4]
    is SPEC 6's "opencv"; ``"fisheye"`` with ``radial_coeffs`` [C, 4] its
    "fisheye" (no field limit but the hemisphere and beyond: max angle pi);
    ``"ftheta"`` with ``ftheta_coeffs`` (one set for all cameras) its
    "ftheta", the principal point from ``Ks`` as gsplat places it;
    ``rolling_shutter`` (gsplat's ``RollingShutterType``) with ``viewmats_rs``
    (the end poses) SPEC 7's shutter. nurec_ops renders these with EWA (SPEC
    6), not the unscented transform: ``with_ut`` / ``with_eval3d`` are
    accepted, with a warning once, and the images differ from gsplat's 3DGUT
    for large Gaussians near the edge of a wide lens (benchmarks/RESULTS.md: 42.8 dB on
    a 120-degree FTheta street, 48.6 on a pinhole).
    """
    if rasterize_mode not in ("classic", "antialiased"):
        _unsupported("rasterize_mode", rasterize_mode, "the classic and antialiased modes")
    if covars is not None:
        _unsupported("covars", type(covars).__name__, "Gaussians are quats and scales")
    if sparse_grad and (not packed or means.dim() != 2):  # as gsplat asserts
        _unsupported("sparse_grad", sparse_grad, "with packed=True and no batch dimensions only, as in gsplat")
    if with_ut or with_eval3d:
        _warn_ewa()
    if distributed:  # every rank's cameras with every rank's Gaussians (nurec_ops._gsplat_distributed)
        return distributed_call(dict(locals()))
    if means.dim() != 2:
        if means.dim() < 2 or means.shape[-1] != 3:
            Ck.fail(_OP, f"`means` must have shape [..., N, 3], got {list(means.shape)}")
        return _batched(dict(locals()))  # the call's arguments (nothing else is bound yet), per element
    cam_kw, Ks = _camera(camera_model, Ks, viewmats.shape[0], radial_coeffs, tangential_coeffs, thin_prism_coeffs,
                         ftheta_coeffs, means)
    cam_kw.update(_shutter(rolling_shutter, viewmats_rs))
    if render_mode not in _MODES:
        Ck.fail(_OP, f"`render_mode` must be one of {_MODES}, got {render_mode!r}")
    N = means.shape[0]
    C = viewmats.shape[0]
    sh = sh_degree is not None
    # the two layouts: per Gaussian [N, D] (SH [N, K, 3]) or per camera [C, N, D] (SH [C, N, K, 3]); with
    # sh_degree, [N, D] is neither (gsplat too refuses it)
    per_camera = colors.dim() == (4 if sh else 3)
    if (not per_camera and colors.dim() != (3 if sh else 2)) or (per_camera and colors.shape[:2] != (C, N)):
        _unsupported("colors", f"shape {list(colors.shape)}", "colors [N, D], per camera [C, N, D], or SH "
                     "[N, K, 3] (per camera [C, N, K, 3]) with sh_degree")
    if not per_camera and colors.shape[0] != N:
        _unsupported("colors", f"shape {list(colors.shape)}", "N rows: colors [N, D] or SH [N, K, 3]")
    want_color = render_mode in ("RGB", "RGB+D", "RGB+ED")
    feats = colors
    if not want_color:  # depth only: one dummy channel keeps the op's feature path
        feats = means.new_zeros((N, 1))
        sh = per_camera = False
    bg = backgrounds if want_color else None
    grad = torch.is_grad_enabled() and any(
        t.requires_grad for t in (means, quats, scales, opacities, colors) if isinstance(t, torch.Tensor))
    rows = {}  # sparse_grad: the rows some camera kept, once packing has found them
    if sparse_grad and grad:
        means, quats, scales = _SparseRows.apply(rows, means, quats, scales)
    render_one = functools.partial(
        rasterize_camera, means, quats, scales, opacities, width=int(width), height=int(height), near=near_plane,
        far=far_plane, sh_degree=sh_degree if sh else None, return_meta=True, means2d_grad=grad,
        absgrad=bool(absgrad) and grad, antialiased=rasterize_mode == "antialiased", eps2d=float(eps2d),
        radius_clip=max(float(radius_clip), 0.0))  # gsplat: a clip <= 0 drops none
    if per_camera and sh:  # SH coefficients per camera: the op evaluates one set per Gaussian, so a call a camera
        render, depth, alpha, m = _per_camera(render_one, feats, viewmats, Ks, bg, cam_kw, bool(absgrad) and grad)
    else:
        render, depth, alpha, m = render_one(feats, viewmats, Ks, backgrounds=bg, **cam_kw)
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
        "n_batches": 1, "n_cameras": C, "batch_ids": None, "gaussian_ids": None, "camera_ids": None,
        "tile_size": tile_size,
    }
    if rasterize_mode == "classic":  # antialiased: compensated per item, which the op keeps inside
        meta["opacities"] = opacities.expand(C, N)
    if packed:
        _pack(meta, bool(absgrad) and grad)
    if sparse_grad and grad:
        rows["ids"] = torch.unique(meta["gaussian_ids"])  # a second host sync (nnz again), as packed's first
    return out, alpha, meta


class _SparseRows(torch.autograd.Function):
    """gsplat's ``sparse_grad``: the identity on (means, quats, scales),
    whose backward hands each its gradient as a coalesced COO tensor of the
    rows ``rows["ids"]`` lists (the Gaussians some camera kept: every other
    row's gradient is zero), for optimizers such as torch.optim.SparseAdam.
    gsplat lists a row once per camera that kept it; the sum is the same."""

    @staticmethod
    def forward(ctx, rows, *tensors):
        ctx.rows = rows
        return tuple(t.view_as(t) for t in tensors)

    @staticmethod
    def backward(ctx, *grads):
        ids = ctx.rows["ids"]
        # the indices are sorted, unique and in range by construction: no invariant check
        return (None,) + tuple(None if g is None else torch.sparse_coo_tensor(
            ids[None], g[ids], g.shape, is_coalesced=True, check_invariants=False) for g in grads)


def _pack(meta, absgrad):
    """gsplat's packed meta from the unpacked one ([..., C, N, ...]), in
    place: the items the binning kept (radii > 0) as ``batch_ids`` (into the
    batch dimensions flattened; all 0 without them), ``camera_ids``,
    ``gaussian_ids`` [nnz] and ``means2d`` [nnz, 2], ``radii`` [nnz, 2],
    ``depths`` [nnz] (and ``opacities`` [nnz]) of those items. nnz is data:
    finding it is one host sync, as in gsplat's own packed mode
    (packed=False is sync-free). The packed ``means2d`` is a leaf of its
    own; its ``.grad`` (and ``.absgrad``) are the unpacked leaf's rows,
    gathered by a post-accumulate hook when that gradient lands."""
    C, N = meta["radii"].shape[-3:-1]
    lead = meta["radii"].dim() - 1  # the batch dimensions and C, N

    def flat(t):  # [..., C, N, tail] as [B, C, N, tail]
        return t.reshape((-1, C, N) + tuple(t.shape[lead:]))
    keep = (meta["radii"] > 0).all(-1).reshape(-1, C, N)
    batch_ids, camera_ids, gaussian_ids = keep.nonzero(as_tuple=True)  # the host sync
    full = meta["means2d"]
    means2d = flat(full.detach())[batch_ids, camera_ids, gaussian_ids]
    if full.requires_grad:
        means2d.requires_grad_(True)
        _relay_grads(full, means2d, absgrad, lambda _, g: flat(g)[batch_ids, camera_ids, gaussian_ids])
    meta.update(means2d=means2d, radii=flat(meta["radii"])[keep], depths=flat(meta["depths"])[keep],
                batch_ids=batch_ids, camera_ids=camera_ids, gaussian_ids=gaussian_ids)
    if "opacities" in meta:
        meta["opacities"] = flat(meta["opacities"])[keep]


_PER_ELEMENT = (("means", ("N", 3)), ("quats", ("N", 4)), ("scales", ("N", 3)), ("opacities", ("N",)),
                ("viewmats", ("C", 4, 4)), ("Ks", ("C", 3, 3)))
_PER_ELEMENT_OPTIONAL = ("colors", "backgrounds", "radial_coeffs", "tangential_coeffs", "thin_prism_coeffs",
                         "viewmats_rs")


def _batched(given):
    """gsplat's batch dimensions: means [..., N, 3] and the rest of each
    batch element's inputs behind the same leading dimensions (viewmats
    [..., C, 4, 4], Ks [..., C, 3, 3], colors [..., N, D] or [..., C, N, D]
    or SH, backgrounds [..., C, D], a camera model's coefficients [..., C,
    k], viewmats_rs [..., C, 4, 4]; ftheta_coeffs one set for all). Each
    element renders in a call of its own (sync-free with packed=False: the
    elements' Gaussians never meet), and what they return is stacked as
    gsplat returns it: images [..., C, H, W, X], alphas [..., C, H, W, 1],
    meta's ``means2d`` a leaf [..., C, N, 2] whose ``.grad`` (and
    ``.absgrad``) each element's leaf fills in as its gradient lands,
    ``radii``, ``depths`` (``opacities``) [..., C, N, ...], ``n_batches``;
    packed: the kept items of every element, with ``batch_ids``."""
    means = given["means"]
    batch = tuple(means.shape[:-2])
    B, N, nb = math.prod(batch), means.shape[-2], len(batch)
    if B == 0:
        Ck.fail(_OP, f"batch dimensions {list(batch)} hold no element to render")
    views = given["viewmats"]
    C = views.shape[-3] if isinstance(views, torch.Tensor) and views.dim() == nb + 3 else 0
    sizes = {"N": N, "C": C}
    flat = {}
    for name, tail in _PER_ELEMENT:
        want = batch + tuple(sizes.get(d, d) for d in tail)
        t = given[name]
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != want:
            got = list(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            tail_s = ", ".join(str(d) for d in tail)
            Ck.fail(_OP, f"with batch dimensions {list(batch)} (from means [..., N, 3]) `{name}` must have shape "
                    f"[..., {tail_s}] behind the same dimensions, got {got}")
        flat[name] = t.reshape((B,) + t.shape[nb:])
    for name in _PER_ELEMENT_OPTIONAL:
        t = given[name]
        if t is None:
            continue
        if not isinstance(t, torch.Tensor) or t.dim() < nb + 1 or tuple(t.shape[:nb]) != batch:
            got = list(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            Ck.fail(_OP, f"with batch dimensions {list(batch)} `{name}` must lead with them, got {got}")
        flat[name] = t.reshape((B,) + t.shape[nb:])
    calls = [rasterization(**dict(given, packed=False, **{k: v[b] for k, v in flat.items()})) for b in range(B)]
    out, alpha = (torch.stack([c[k] for c in calls]).reshape(batch + calls[0][k].shape) for k in (0, 1))
    metas = [c[2] for c in calls]
    meta = dict(metas[0], n_batches=B)
    for key in ("radii", "depths", "opacities"):
        if key in meta:
            meta[key] = torch.stack([m[key] for m in metas]).reshape(batch + metas[0][key].shape)
    means2d = torch.stack([m["means2d"].detach() for m in metas]).reshape(batch + (C, N, 2))
    absgrad = bool(given["absgrad"]) and metas[0]["means2d"].requires_grad
    if metas[0]["means2d"].requires_grad:
        means2d.requires_grad_(True)

        def element(b):  # element b's [C, N, 2] into its place of the [..., C, N, 2] gradient
            def place(current, g):
                current = torch.zeros_like(means2d) if current is None else current
                current.view(B, C, N, 2)[b] = g
                return current
            return place
        for b, m in enumerate(metas):
            _relay_grads(m["means2d"], means2d, absgrad, element(b))
    meta["means2d"] = means2d
    if given["packed"]:
        _pack(meta, absgrad)
    return out, alpha, meta


def _relay_grads(source, target, absgrad, place):
    """Gives the leaf ``target`` its ``.grad`` (and with ``absgrad`` its
    ``.absgrad``) from the leaf ``source``'s when that lands: a
    post-accumulate hook on ``source`` sets each to ``place(current, g)``
    (current: target's value so far or None; g: source's). A source that is
    itself a relay's target (per-camera SH's stacked means2d, a batch
    element's) gets its gradient from a hook, which autograd's
    post-accumulate hooks never see: its relays run after each of its own
    (``_nurec_relays``), so that relays chain (packed meta of such a call)."""
    if not hasattr(target, "_nurec_relays"):
        target._nurec_relays = []

    def hook(leaf):
        target.grad = place(target.grad, leaf.grad)
        if absgrad:
            target.absgrad = place(getattr(target, "absgrad", None), leaf.absgrad)
        for onward in target._nurec_relays:
            onward(target)
    if hasattr(source, "_nurec_relays"):
        source._nurec_relays.append(hook)
    else:
        source.register_post_accumulate_grad_hook(hook)


def _per_camera(render_one, colors, viewmats, Ks, backgrounds, cam_kw, absgrad):
    """gsplat's per-camera SH coefficients [C, N, K, 3]: one call of the op
    per camera, each with its own [N, K, 3] coefficients (one call when
    C = 1, a trainer's usual batch), and the cameras' outputs and meta
    stacked. With a means2d gradient, meta's
    ``means2d`` is a leaf [C, N, 2] of its own whose ``.grad`` (and
    ``.absgrad``) each camera's leaf fills in as its gradient lands (a
    post-accumulate hook: no copy kernels until then, no host sync)."""
    C = viewmats.shape[0]

    def pick(v, c):  # a per-camera argument's row c (camera model, rolling shutter), as [1, ...]
        return v[c:c + 1] if isinstance(v, torch.Tensor) and v.dim() > 0 and v.shape[0] == C else v

    outs = [render_one(colors[c], viewmats[c:c + 1], pick(Ks, c), backgrounds=pick(backgrounds, c),
                       **{k: pick(v, c) for k, v in cam_kw.items()}) for c in range(C)]
    if C == 1:  # the call's own outputs: nothing stacked, no hook
        return outs[0]
    render, depth, alpha = (torch.cat([o[k] for o in outs]) for k in range(3))
    metas = [o[3] for o in outs]
    means2d = torch.cat([m.means2d.detach() for m in metas])
    if metas[0].means2d.requires_grad:
        means2d.requires_grad_(True)

        def row(c):  # camera c's [1, N, 2] into row c of the [C, N, 2] gradient
            def place(current, g):
                current = torch.zeros_like(means2d) if current is None else current
                current[c] = g[0]
                return current
            return place
        for c, m in enumerate(metas):
            _relay_grads(m.means2d, means2d, absgrad, row(c))
    return render, depth, alpha, Meta(means2d, torch.cat([m.radii for m in metas]),
                                      torch.cat([m.depths for m in metas]))


def patch_gsplat_strategy_ops():
    """Installs ``nurec_ops.gsplat_strategy_ops``' relocation (PyTorch)
    and covariance (the fused op) functions in ``gsplat.strategy.ops``
    (where gsplat's ``MCMCStrategy`` looks them up), so that the strategy runs on the CPU
    and needs no CUDA build of gsplat. Returns a function that puts gsplat's
    own back."""
    from gsplat.strategy import ops as gops

    from . import gsplat_strategy_ops as ours

    before = (gops.compute_relocation, gops.quat_scale_to_covar_preci)
    gops.compute_relocation, gops.quat_scale_to_covar_preci = ours.compute_relocation, ours.quat_scale_to_covar_preci

    def restore():
        gops.compute_relocation, gops.quat_scale_to_covar_preci = before
    return restore
