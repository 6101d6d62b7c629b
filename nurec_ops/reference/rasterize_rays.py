"""Pure-PyTorch twin of nurec_ops.rasterize_rays: 3D Gaussian splatting into
a sensor given by its rays (docs/api.md, "Ray bundles"). Every Gaussian
against every ray, no tiles, autograd for the gradients.

Per (ray, Gaussian) the response is exact in 3D (3DGRT's, gsplat eval3d's):
with A = S^-1 R^T, a = A (o - mu), b = A d (d unit), the ray's closest
approach in the Gaussian's frame is p = a + t* b at t* = -(a.b)/(b.b), and
sigma = |p|^2 / 2. Compositing is SPEC 3's, with alpha = min(0.99,
o exp(-sigma)), a pair skipped where t* is outside (near, far) or alpha <
1/255, the Gaussians of a sensor in ascending distance of their means from
the sensor's centre (the mean of its rays' world origins)."""
import torch

from . import composite
from . import quat as Q


def world_rays(viewmats, ray_origins, ray_directions, ray_times=None, viewmats_end=None):
    """Each ray in world space at its own time (no gradient: sensor poses
    are constants, as in the other rasterizers): origins [C, M, 3], unit
    directions [C, M, 3] and whether the ray is usable [C, M] (finite, with
    a direction of non-zero length). ray_origins / ray_directions are
    [C, M, 3] or [M, 3] in the sensor frame of ``viewmats`` (world ->
    sensor); with ``viewmats_end`` and ``ray_times`` ([C, M] or [M], in
    [0, 1]) a ray's pose is SPEC 7's pose at its time (rotation by slerp,
    centre linearly)."""
    from .. import _rolling_shutter as RS

    C = viewmats.shape[0]
    with torch.no_grad():
        o = ray_origins.detach().to(viewmats.dtype)
        d = ray_directions.detach().to(viewmats.dtype)
        M = o.shape[-2]
        o = o.expand(C, M, 3) if o.dim() == 2 else o
        d = d.expand(C, M, 3) if d.dim() == 2 else d
        if viewmats_end is None:
            R = viewmats.detach()[:, :3, :3]
            t = viewmats.detach()[:, :3, 3]
            Rw = R.transpose(-1, -2)[:, None]  # sensor -> world
            centre = -torch.einsum("cji,cj->ci", R, t)[:, None]
        else:
            _, sp = RS.pack("rasterize_rays", viewmats, viewmats_end, "top_to_bottom")
            tau = ray_times.detach().to(viewmats.dtype)
            tau = tau.expand(C, M) if tau.dim() == 1 else tau
            spr = sp[:, None, :].expand(C, M, sp.shape[-1])
            Rw = Q.to_rotmat(Q.normalize(Q.slerp(spr[..., 0:4], spr[..., 4:8], tau)))
            centre = (1 - tau)[..., None] * spr[..., 8:11] + tau[..., None] * spr[..., 11:14]
        o_w = torch.einsum("cmij,cmj->cmi", Rw.expand(C, M, 3, 3), o) + centre
        d_w = torch.einsum("cmij,cmj->cmi", Rw.expand(C, M, 3, 3), d)
        n = torch.linalg.vector_norm(d_w, dim=-1, keepdim=True)
        ok = torch.isfinite(o_w).all(-1) & torch.isfinite(d_w).all(-1) & (n[..., 0] > 0)
        d_w = d_w / torch.where(n > 0, n, torch.ones_like(n))
        zero = torch.zeros_like(o_w)
        return torch.where(ok[..., None], o_w, zero), torch.where(ok[..., None], d_w, zero), ok


def sensor_centres(o_w, ok):
    """[C, 3]: the mean of each sensor's usable world origins (0 for none),
    in float64: the point the Gaussians' depth order is measured from."""
    w = ok.to(torch.float64)[..., None]
    s = (o_w.to(torch.float64) * w).sum(1)
    n = w.sum(1)
    return s / torch.where(n > 0, n, torch.ones_like(n))


def gaussian_factors(quats, scales, opacities):
    """A = S^-1 R^T [N, 3, 3] (Sigma^-1 = A^T A) and which Gaussians can be
    drawn at all (opacity >= 1/255, scales > 0, all finite)."""
    R = Q.to_rotmat(Q.normalize(quats))
    ok = ((opacities >= composite.ALPHA_MIN) & torch.isfinite(opacities) & (scales > 0).all(-1)
          & torch.isfinite(scales).all(-1) & torch.isfinite(quats).all(-1) & (quats != 0).any(-1))
    safe = torch.where(ok[:, None], scales, torch.ones_like(scales))
    return (R / safe[:, None, :]).transpose(-1, -2), ok


def rasterize_rays(means, quats, scales, opacities, features, viewmats, ray_origins, ray_directions, near=0.0,
                   far=1e10, *, ray_times=None, viewmats_end=None):
    """Pure-PyTorch twin of :func:`nurec_ops.rasterize_rays`. Returns
    features [C, M, D], range [C, M, 1] (expected t* along the unit ray) and
    alpha [C, M, 1]; NaN for a ray that is not usable."""
    o_w, d_w, ray_ok = world_rays(viewmats, ray_origins, ray_directions, ray_times, viewmats_end)
    o_w, d_w = o_w.to(means.dtype), d_w.to(means.dtype)
    A, g_ok = gaussian_factors(quats, scales, opacities)
    g_ok = g_ok & torch.isfinite(means).all(-1)
    C, N, D = viewmats.shape[0], means.shape[0], features.shape[-1]
    key = torch.linalg.vector_norm(means.detach().to(torch.float64)[None] - sensor_centres(o_w, ray_ok)[:, None],
                                   dim=-1)  # [C, N]
    valid = g_ok[None].expand(C, N)
    o, valid, mu, Ac, col = composite.sort_front_to_back(key, valid, opacities, means[None].expand(C, N, 3),
                                                         A[None].expand(C, N, 3, 3),
                                                         features[None].expand(C, N, D))
    a = torch.einsum("cnkj,cmnj->cmnk", Ac, o_w[:, :, None, :] - mu[:, None])  # [C, M, N, 3]
    b = torch.einsum("cnkj,cmj->cmnk", Ac, d_w)
    t = -(a * b).sum(-1) / (b * b).sum(-1)
    p = a + t[..., None] * b
    sigma = 0.5 * (p * p).sum(-1)
    alpha = torch.clamp(o[:, None, :] * torch.exp(-sigma), max=composite.ALPHA_MAX)
    keep = valid[:, None, :] & (t > near) & (t < far) & (alpha >= composite.ALPHA_MIN)
    with torch.no_grad():
        T_incl = torch.cumprod(1 - torch.where(keep, alpha, torch.zeros_like(alpha)), dim=-1)
    used = keep & (T_incl >= composite.T_MIN)
    a_used = torch.where(used, alpha, torch.zeros_like(alpha))
    T_all = torch.cumprod(1 - a_used, dim=-1)
    T_excl = torch.cat((torch.ones_like(T_all[..., :1]), T_all[..., :-1]), -1)
    w = a_used * T_excl  # [C, M, N]
    T_final = T_all[..., -1:] if N > 0 else torch.ones(C, o_w.shape[1], 1, dtype=means.dtype, device=means.device)
    out = torch.einsum("cmn,cnd->cmd", w, col)
    rng = torch.einsum("cmn,cmn->cm", w, torch.where(used, t, torch.zeros_like(t)))[..., None]
    alpha_out = 1 - T_final
    bad = ~ray_ok[..., None]
    nan = torch.full((), float("nan"), dtype=means.dtype, device=means.device)
    return torch.where(bad, nan, out), torch.where(bad, nan, rng), torch.where(bad, nan, alpha_out)
