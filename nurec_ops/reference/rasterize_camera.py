"""Reference rasterize_camera (SPEC section 3): dense pure PyTorch. Every
Gaussian is evaluated at every pixel of every camera, sorted by camera depth
and composited by the SPEC rules; autograd gives the gradients. Memory is
O(C * H * W * N): the parity oracle for small scenes, not a renderer."""
import math

import torch

from . import camera_models, composite

EPS2D = 0.3
THR_MARGIN = 0.01  # the binning's rounding margin on the footprint (SPEC 3)

_SH_C0 = 0.28209479177387814
_SH_C1 = 0.4886025119029199
_SH_C2 = (1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792, 0.5462742152960396)
_SH_C3 = (-0.5900435899266435, 2.890611442640554, -0.4570457994644658, 0.3731763325901154,
          -0.4570457994644658, 1.445305721320277, -0.5900435899266435)


def sh_basis(deg, d):
    """Real SH basis (3DGS convention) at unit directions d [..., 3] -> [..., (deg+1)^2]."""
    x, y, z = d.unbind(-1)
    b = [torch.full_like(x, _SH_C0)]
    if deg >= 1:
        b += [-_SH_C1 * y, _SH_C1 * z, -_SH_C1 * x]
    if deg >= 2:
        xx, yy, zz = x * x, y * y, z * z
        c = _SH_C2
        b += [c[0] * x * y, c[1] * y * z, c[2] * (2 * zz - xx - yy), c[3] * x * z, c[4] * (xx - yy)]
    if deg >= 3:
        c = _SH_C3
        b += [c[0] * y * (3 * xx - yy), c[1] * x * y * z, c[2] * y * (4 * zz - xx - yy),
              c[3] * z * (2 * zz - 3 * xx - 3 * yy), c[4] * x * (4 * zz - xx - yy),
              c[5] * z * (xx - yy), c[6] * x * (xx - 3 * yy)]
    return torch.stack(b, -1)


def jacobian_limits(Ks, width, height):
    """Bounds of x / z and y / z at which the pinhole Jacobian is evaluated
    (SPEC section 3, the 3DGS / gsplat convention): 30% of the half field of
    view past each image border. Returns (lo_x, hi_x, lo_y, hi_y), each [C, 1]."""
    fx, fy = Ks[:, 0, 0, None], Ks[:, 1, 1, None]
    cx, cy = Ks[:, 0, 2, None], Ks[:, 1, 2, None]
    tan_x, tan_y = 0.5 * width / fx, 0.5 * height / fy
    return (-(cx / fx + 0.3 * tan_x), (width - cx) / fx + 0.3 * tan_x,
            -(cy / fy + 0.3 * tan_y), (height - cy) / fy + 0.3 * tan_y)


def camera_points(viewmats, means):
    """Camera-space means [C,N,3] for viewmats [C,4,4], or [C,N,4,4] (a pose
    per Gaussian: SPEC 7's rolling shutter)."""
    R, t = viewmats[..., :3, :3], viewmats[..., :3, 3]
    if viewmats.dim() == 4:
        return torch.einsum("cnij,nj->cni", R, means) + t
    return torch.einsum("cij,nj->cni", R, means) + t[:, None, :]


def camera_centres(viewmats):
    """Camera centres in the world, [C,3] or [C,N,3]."""
    R, t = viewmats[..., :3, :3], viewmats[..., :3, 3]
    return -torch.einsum("...ji,...j->...i", R, t)


def project(means, quats, scales, viewmats, Ks, valid, width, height, antialiased=False, eps2d=EPS2D):
    """EWA projection of N Gaussians into C cameras: (u, v) [C,N,2], conic
    (A, B, C) [C,N,3], camera z [C,N] (and, with ``antialiased``, gsplat's
    opacity compensation [C,N]: composite.compensation). The Jacobian is
    evaluated at the mean with x / z and y / z clamped to
    ``jacobian_limits`` (the mean's own projection is not clamped). Where
    ``valid`` [C,N] is False the depth is replaced by 1 so that nothing
    (value or gradient) is NaN."""
    R = viewmats[..., :3, :3]
    p = camera_points(viewmats, means)
    x, y, z = p.unbind(-1)
    z = torch.where(valid, z, torch.ones_like(z))
    fx, fy = Ks[:, 0, 0, None], Ks[:, 1, 1, None]
    cx, cy = Ks[:, 0, 2, None], Ks[:, 1, 2, None]
    iz = 1 / z
    zero = torch.zeros_like(z)
    lo_x, hi_x, lo_y, hi_y = jacobian_limits(Ks, width, height)
    tx = z * torch.clamp(x * iz, lo_x, hi_x)
    ty = z * torch.clamp(y * iz, lo_y, hi_y)
    J = torch.stack((torch.stack((fx * iz, zero, -fx * tx * iz * iz), -1),
                     torch.stack((zero, fy * iz, -fy * ty * iz * iz), -1)), -2)  # [C,N,2,3]
    T = composite.ewa_factor(J, R, quats, scales)
    a, b, c, det = composite.ewa_cov2d(J, R, quats, scales, eps2d, factor=T)
    conic = torch.stack((c / det, -b / det, a / det), -1)
    uv = torch.stack((fx * x * iz + cx, fy * y * iz + cy), -1)
    if antialiased:
        return uv, conic, z, composite.compensation(T, det)
    return uv, conic, z


_MODEL_ARGS = {"pinhole": ("Ks",), "opencv": ("Ks", "radial", "tangential", "thin_prism"),
               "fisheye": ("Ks", "radial", "max_angle"),
               "ftheta": ("principal_point", "angle_to_pixel", "linear_cde", "max_angle"), "ortho": ("Ks",)}
_Z_LIMITED = ("opencv", "ortho")  # near / far on the camera z (the radial models: on the distance)


def project_model(model, means, quats, scales, viewmats, cam, near, far, width, height, antialiased=False,
                  eps2d=EPS2D):
    """EWA projection through camera model ``model`` (SPEC section 6): the
    mean exactly through the model, the covariance through the model's
    Jacobian at the mean (by autograd, so gradients flow through it), plus
    eps2d. ``cam``: the model's per-camera arguments ([C, k] tensors).
    Returns (u, v) [C,N,2], conic [C,N,3], camera z [C,N], valid [C,N]
    (and with ``antialiased`` the opacity compensation [C,N])."""
    R = viewmats[..., :3, :3]
    p = camera_points(viewmats, means)  # [C,N,3]
    ref_poly = int(cam["reference_poly"].reshape(-1)[0]) if "reference_poly" in cam else 2
    batched = {k: cam[k] for k in _MODEL_ARGS[model] + (("pixel_to_angle",) if ref_poly == 1 else ())}
    with torch.no_grad():
        dist = torch.linalg.vector_norm(p, dim=-1)
        if model in _Z_LIMITED:
            z = p[..., 2]
            valid = (z > near) & (z < far)
        else:
            valid = (dist > near) & (dist < far)
        _, ok = torch.func.vmap(lambda q, c: camera_models.project(model, q, dict(c, reference_poly=ref_poly)))(
            p, batched)
        valid = valid & ok
    # a dropped Gaussian's stand-in point: off the optical axis, where the
    # radial models' angle has a finite derivative (on it, sqrt's is not, and
    # the dropped Gaussian's zero gradients became NaN)
    stand_in = torch.tensor([0.1, 0.1, 1.0], dtype=p.dtype, device=p.device)
    p = torch.where(valid[..., None], p, stand_in)
    # the Jacobian's point: for the pinhole models its (x/z, y/z) clamped as in SPEC 3
    q = p
    if model in ("opencv",):
        lo_x, hi_x, lo_y, hi_y = jacobian_limits(cam["Ks"], width, height)
        zc = p[..., 2]
        q = torch.stack((zc * torch.clamp(p[..., 0] / zc, lo_x, hi_x), zc * torch.clamp(p[..., 1] / zc, lo_y, hi_y),
                         zc), -1)

    def one_camera(pts, qts, c):
        c = dict(c, reference_poly=ref_poly)
        f = lambda x: camera_models.project(model, x, c)[0]  # noqa: E731
        return torch.func.vmap(f)(pts), torch.func.vmap(torch.func.jacrev(f))(qts)

    uv, J = torch.func.vmap(one_camera)(p, q, batched)  # [C,N,2], [C,N,2,3]
    T = composite.ewa_factor(J, R, quats, scales)
    a, b, c, det = composite.ewa_cov2d(J, R, quats, scales, eps2d, factor=T)
    conic = torch.stack((c / det, -b / det, a / det), -1)
    if antialiased:
        return uv, conic, p[..., 2], valid, composite.compensation(T, det)
    return uv, conic, p[..., 2], valid


def mean_pixels(model, means, viewmats, cam, near, far):
    """The pixels [C,N,2] of the means and whether each lies in the camera's
    field [C,N] (SPEC 3's near / far, SPEC 6's models); viewmats [C,4,4] or
    [C,N,4,4]. No gradient."""
    with torch.no_grad():
        p = camera_points(viewmats, means)
        if model == "pinhole":
            K = cam["Ks"]
            z = p[..., 2]
            ok = (z > near) & (z < far)
            zs = torch.where(ok, z, torch.ones_like(z))
            uv = torch.stack((K[:, 0, 0, None] * p[..., 0] / zs + K[:, 0, 2, None],
                              K[:, 1, 1, None] * p[..., 1] / zs + K[:, 1, 2, None]), -1)
            return uv, ok
        ref_poly = int(cam["reference_poly"].reshape(-1)[0]) if "reference_poly" in cam else 2
        batched = {k: cam[k] for k in _MODEL_ARGS[model] + (("pixel_to_angle",) if ref_poly == 1 else ())}
        uv, ok = torch.func.vmap(lambda q, c: camera_models.project(model, q, dict(c, reference_poly=ref_poly)))(
            p, batched)
        lim = p[..., 2] if model in _Z_LIMITED else torch.linalg.vector_norm(p, dim=-1)
        return uv, ok & (lim > near) & (lim < far)


def own_times(model, means, viewmats, sp, shutter, cam, near, far, width, height):
    """SPEC 7: each (camera, Gaussian)'s own time tau* [C,N], from the start
    pose's projection of the mean, _rolling_shutter.STEPS steps of tau <- the
    time of the mean's pixel and the mean projected again at the pose of
    tau (a step whose mean is outside the field keeps tau). No gradient."""
    from .. import _rolling_shutter as RS

    with torch.no_grad():
        C, N = viewmats.shape[0], means.shape[0]
        tau = means.new_zeros((C, N))
        spn = sp[:, None, :].expand(C, N, sp.shape[-1])
        uv, ok = mean_pixels(model, means, RS.pose_at(spn, tau), cam, near, far)
        for k in range(RS.STEPS):
            tau = torch.where(ok, RS.tau_of_pixel(shutter, uv, width, height), tau)
            if k + 1 < RS.STEPS:
                uv, ok = mean_pixels(model, means, RS.pose_at(spn, tau), cam, near, far)
        return tau


def radius_clipped(conic, o, radius_clip):
    """[C, N] bool: gsplat's ``radius_clip`` as the op applies it: the
    items whose SPEC 8 radii, ceil(sqrt(thr Sigma_xx)) and ceil(sqrt(thr
    Sigma_yy)) in pixels for thr = 2 ln(255 o) + THR_MARGIN (the footprint
    box's half-extents, from the conic), are both <= radius_clip."""
    with torch.no_grad():
        A, B, Cc = conic.unbind(-1)
        thr = 2.0 * torch.log(torch.clamp_min(255.0 * o, 1.0)) + THR_MARGIN
        det = A * Cc - B * B
        lim = math.floor(min(radius_clip, 2147483647.0))  # the op's int32 clip (inf: every radius)
        rx = torch.ceil(torch.sqrt(torch.clamp_min(thr * Cc / det, 0.0)))
        ry = torch.ceil(torch.sqrt(torch.clamp_min(thr * A / det, 0.0)))
        return (rx <= lim) & (ry <= lim)


def _projected(means, quats, scales, opacities, viewmats, Ks, W, H, near, far, camera_model, viewmats_end, shutter,
               antialiased, eps2d, model_args, radius_clip=0.0):
    """Every (camera, Gaussian) item projected as the op projects it: (the
    poses, [C, 4, 4] or [C, N, 4, 4] at each item's own time under a
    rolling shutter, uv [C, N, 2], conic [C, N, 3], z [C, N], valid [C, N]
    (False too for an item radius_clip drops), opacity [N] or [C, N] with
    antialiased)."""
    from .. import _rolling_shutter as RS

    C, N = viewmats.shape[0], means.shape[0]
    if camera_model not in _MODEL_ARGS:
        raise RuntimeError(f"nurec_ops.rasterize_camera: `camera_model` must be one of {tuple(_MODEL_ARGS)}, "
                           f"got {camera_model!r}")
    cam = dict(model_args, Ks=Ks)
    missing = [k for k in _MODEL_ARGS[camera_model] if cam.get(k) is None]
    if missing:
        raise RuntimeError(f"nurec_ops.rasterize_camera: camera_model={camera_model!r} needs `{missing[0]}`")
    code, sp = RS.pack("rasterize_camera", viewmats, viewmats_end, shutter)
    if code:
        tau = own_times(camera_model, means.detach(), viewmats, sp, code, cam, near, far, W, H)
        viewmats = RS.pose_at(sp[:, None, :].expand(C, N, sp.shape[-1]), tau)  # [C,N,4,4]
    if camera_model == "pinhole":
        z_all = camera_points(viewmats, means)[..., 2]
        valid = (z_all > near) & (z_all < far)  # [C,N]
        out = project(means, quats, scales, viewmats, Ks, valid, W, H, antialiased, eps2d)
        uv, conic, z = out[:3]
    else:
        out = project_model(camera_model, means, quats, scales, viewmats, cam, near, far, W, H, antialiased, eps2d)
        uv, conic, z, valid = out[:4]
    o = opacities[None] * out[-1] if antialiased else opacities  # [C,N] with antialiased
    if radius_clip >= 1:  # radii are whole pixels: a clip under 1 drops none
        valid = valid & ~radius_clipped(conic, o.expand(C, N), radius_clip)
    return viewmats, uv, conic, z, valid, o


def camera_visible(means, quats, scales, opacities, viewmats, Ks, width, height, near=0.01, far=1e10, *,
                   camera_model="pinhole", viewmats_end=None, shutter="global", antialiased=False, eps2d=EPS2D,
                   radius_clip=0.0, **model_args):
    """Pure-PyTorch twin of :func:`nurec_ops.camera_visible`, dense: a
    Gaussian is visible where, in some camera, a pixel centre lies in its
    footprint ``d^T conic d <= 2 ln(255 o) + THR_MARGIN`` (the binning's
    ellipse, SPEC section 3) and the item is valid."""
    C, N = viewmats.shape[0], means.shape[0]
    H, W = int(height), int(width)
    with torch.no_grad():
        _, uv, conic, _, valid, o = _projected(means, quats, scales, opacities, viewmats, Ks, W, H, near, far,
                                               camera_model, viewmats_end, shutter, antialiased, eps2d, model_args,
                                               radius_clip)
        o = o.expand(C, N)
        valid = valid & (255.0 * o >= 1.0)
        thr = 2.0 * torch.log(torch.where(valid, 255.0 * o, torch.ones_like(o))) + THR_MARGIN
        seen = torch.zeros(C, N, dtype=torch.bool, device=means.device)
        px = torch.arange(W, dtype=means.dtype, device=means.device) + 0.5
        dx = px[:, None] - uv[:, None, :, 0]  # [C, W, N]
        for y in range(H):  # a row of pixel centres at a time: [C, W, N], never [C, H, W, N]
            dy = (y + 0.5) - uv[:, None, :, 1]
            q = conic[:, None, :, 0] * dx * dx + 2 * conic[:, None, :, 1] * dx * dy + conic[:, None, :, 2] * dy * dy
            seen |= (q <= thr[:, None]).any(1)
        return (seen & valid).any(0)


def rasterize_camera(means, quats, scales, opacities, features, viewmats, Ks, width, height,
                     near=0.01, far=1e10, backgrounds=None, sh_degree=None, *, camera_model="pinhole",
                     viewmats_end=None, shutter="global", antialiased=False, eps2d=EPS2D, radius_clip=0.0,
                     median_depth=False, **model_args):
    """Pure-PyTorch twin of :func:`nurec_ops.rasterize_camera`, with the
    camera models of SPEC section 6 (``camera_model`` and its per-camera
    arguments: radial, tangential, thin_prism for "opencv"; radial,
    max_angle for "fisheye"; principal_point, angle_to_pixel, linear_cde,
    max_angle, optionally pixel_to_angle and reference_poly, for "ftheta";
    none but Ks for gsplat's "ortho")
    and SPEC 7's rolling shutter (``viewmats_end``, ``shutter``: each
    Gaussian rendered with the pose at its own time, by own_times), and
    gsplat's antialiased mode (``antialiased``: each item's opacity times
    composite.compensation), ``eps2d``, the 2D dilation (SPEC 3's 0.3),
    ``radius_clip`` (radius_clipped: the items it drops are invalid),
    features ``[N, D]`` or per camera ``[C, N, D]``, and ``median_depth``
    (a fourth output: composite.median of the camera z)."""
    C, N = viewmats.shape[0], means.shape[0]
    H, W = int(height), int(width)
    viewmats, uv, conic, z, valid, o = _projected(means, quats, scales, opacities, viewmats, Ks, W, H, near, far,
                                                  camera_model, viewmats_end, shutter, antialiased, eps2d,
                                                  model_args, radius_clip)
    if sh_degree is not None:
        campos = camera_centres(viewmats)  # [C,3] or [C,N,3]
        d = means[None] - (campos[:, None] if campos.dim() == 2 else campos)
        d = torch.where(valid[..., None], d, torch.ones_like(d))  # a Gaussian at a camera centre is dropped
        d = d / torch.linalg.vector_norm(d, dim=-1, keepdim=True)
        n = (sh_degree + 1) ** 2
        col = torch.einsum("cnk,nkd->cnd", sh_basis(sh_degree, d), features[:, :n]) + 0.5
        col = torch.clamp_min(col, 0.0)
    else:
        col = features if features.dim() == 3 else features[None].expand(C, N, features.shape[-1])  # [C, N, D]
    # depth order per camera (stable: equal depths keep Gaussian order)
    o, valid, uv, conic, z, col = composite.sort_front_to_back(z, valid, o, uv, conic, z, col)
    px = torch.arange(W, dtype=means.dtype, device=means.device) + 0.5
    py = torch.arange(H, dtype=means.dtype, device=means.device) + 0.5
    dx = px[None, None, :, None] - uv[:, None, None, :, 0]  # [C,H,W,N]
    dy = py[None, :, None, None] - uv[:, None, None, :, 1]
    w, T_final = composite.weights(dx, dy, conic, o, valid)
    render = torch.einsum("chwn,cnd->chwd", w, col)
    if backgrounds is not None:
        render = render + T_final * backgrounds[:, None, None, :]
    depth = torch.einsum("chwn,cn->chw", w, z)[..., None]
    if median_depth:
        return render, depth, 1 - T_final, composite.median(dx, dy, conic, o, valid, z)
    return render, depth, 1 - T_final
