"""Reference rasterize_lidar (SPEC section 4): dense pure PyTorch. Every
Gaussian is evaluated at every ray of every sweep, sorted by range and
composited by the SPEC rules; autograd gives the gradients. Memory is
O(C * R * W * N): the parity oracle for small sensors, not a renderer."""
import math

import torch

from . import composite

MAX_ELEVATION = math.pi / 2 - math.radians(5.0)


def wrap(x):
    """x wrapped to (-pi, pi] (the same expression as the fused op: the
    product with 1 / (2 pi), csrc/rasterize_lidar/rasterize_lidar_math.h)."""
    return x - 2 * math.pi * torch.ceil((x - math.pi) * (1 / (2 * math.pi)))


def project(means, quats, scales, viewmats, eps2d, near, far):
    """Spherical projection of N Gaussians into C lidars: (azimuth, elevation)
    [C,N,2], conic [C,N,3], range [C,N], valid [C,N]. Invalid items get a
    harmless stand-in position so that nothing (value or gradient) is NaN."""
    R = viewmats[..., :3, :3]
    t = viewmats[..., :3, 3]
    if viewmats.dim() == 4:  # a pose per (sweep, Gaussian): SPEC 7's rolling shutter
        p = torch.einsum("cnij,nj->cni", R, means) + t
    else:
        p = torch.einsum("cij,nj->cni", R, means) + t[:, None, :]
    with torch.no_grad():
        rd = torch.linalg.vector_norm(p, dim=-1)
        rhod = torch.hypot(p[..., 0], p[..., 1])
        eld = torch.atan2(p[..., 2], rhod)
        valid = (rd > near) & (rd < far) & (eld.abs() <= MAX_ELEVATION) & (rhod > 0)
    stand_in = torch.tensor([1.0, 0.0, 0.0], dtype=p.dtype, device=p.device)
    p = torch.where(valid[..., None], p, stand_in)
    x, y, z = p.unbind(-1)
    rho2 = x * x + y * y
    rho = torch.sqrt(rho2)
    r2 = rho2 + z * z
    r = torch.sqrt(r2)
    az = torch.atan2(y, x)
    el = torch.atan2(z, rho)
    zero = torch.zeros_like(x)
    J = torch.stack((torch.stack((-y / rho2, x / rho2, zero), -1),
                     torch.stack((-x * z / (r2 * rho), -y * z / (r2 * rho), rho / r2), -1)), -2)  # [C,N,2,3]
    a, b, c, det = composite.ewa_cov2d(J, R, quats, scales, eps2d)
    valid = valid & (det > 0).detach()
    det = torch.where(valid, det, torch.ones_like(det))
    conic = torch.stack((c / det, -b / det, a / det), -1)
    return torch.stack((az, el), -1), conic, r, valid


def own_times(means, viewmats, sp, column_azimuths, column_times, near, far):
    """SPEC 7 for a spinning lidar: each (sweep, Gaussian)'s own time tau*
    [C,N]: from the start pose, _rolling_shutter.STEPS steps of tau <- the
    firing time of the column nearest to the mean's azimuth (the smallest
    wrapped difference; row offsets ignored) and the azimuth again at the pose
    of tau (a step whose mean is outside the field keeps tau). No gradient."""
    from .. import _rolling_shutter as RS

    with torch.no_grad():
        C, N = viewmats.shape[0], means.shape[0]
        spn = sp[:, None, :].expand(C, N, sp.shape[-1])

        def azimuths(tau):
            V = RS.pose_at(spn, tau)
            p = torch.einsum("cnij,nj->cni", V[..., :3, :3], means) + V[..., :3, 3]
            rho = torch.hypot(p[..., 0], p[..., 1])
            r = torch.linalg.vector_norm(p, dim=-1)
            ok = (r > near) & (r < far) & (rho > 0) & (torch.atan2(p[..., 2], rho).abs() <= MAX_ELEVATION)
            return torch.atan2(p[..., 1], p[..., 0]), ok

        tau = means.new_zeros((C, N))
        az, ok = azimuths(tau)
        for k in range(RS.STEPS):
            nearest = wrap(az[..., None] - column_azimuths).abs().argmin(-1)
            tau = torch.where(ok, column_times[nearest], tau)
            if k + 1 < RS.STEPS:
                az, ok = azimuths(tau)
        return tau


def rasterize_lidar(means, quats, scales, opacities, features, viewmats, row_elevations, column_azimuths,
                    row_azimuth_offsets, near=0.5, far=200.0, eps2d=None, *, viewmats_end=None,
                    column_times=None, median_depth=False):
    """Pure-PyTorch twin of :func:`nurec_ops.rasterize_lidar`, with SPEC 7's
    rolling shutter (``viewmats_end``, ``column_times``: each Gaussian
    rendered with the pose at its own time, by own_times) and
    ``median_depth`` (a fourth output: composite.median of the range)."""
    C, N = viewmats.shape[0], means.shape[0]
    R, W = row_elevations.shape[0], column_azimuths.shape[0]
    if eps2d is None:
        eps2d = 0.3 * (2 * math.pi / W) ** 2 if W > 0 else 0.0
    if viewmats_end is not None:
        from .. import _rolling_shutter as RS
        from ..rasterize_lidar import default_column_times

        _, sp = RS.pack("rasterize_lidar", viewmats, viewmats_end, "top_to_bottom")
        times = default_column_times(column_azimuths) if column_times is None else column_times
        tau = own_times(means.detach(), viewmats, sp, column_azimuths, times, near, far)
        viewmats = RS.pose_at(sp[:, None, :].expand(C, N, sp.shape[-1]), tau)
    ae, conic, r, valid = project(means, quats, scales, viewmats, float(eps2d), near, far)
    D = features.shape[-1]
    col = features[None].expand(C, N, D)
    o, valid, ae, conic, r, col = composite.sort_front_to_back(r, valid, opacities, ae, conic, r, col)
    ray_az = column_azimuths[None, :] + row_azimuth_offsets[:, None]  # [R,W]
    ray_el = row_elevations[:, None].expand(R, W)
    dx = wrap(ray_az[None, :, :, None] - ae[:, None, None, :, 0])  # [C,R,W,N]
    dy = ray_el[None, :, :, None] - ae[:, None, None, :, 1]
    w, T_final = composite.weights(dx, dy, conic, o, valid)
    out = torch.einsum("crwn,cnd->crwd", w, col)
    rng = torch.einsum("crwn,cn->crw", w, r)[..., None]
    if median_depth:
        return out, rng, 1 - T_final, composite.median(dx, dy, conic, o, valid, r)
    return out, rng, 1 - T_final
