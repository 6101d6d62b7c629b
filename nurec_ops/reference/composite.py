"""Dense front-to-back compositing shared by the reference rasterizers (SPEC
section 3, used by section 4 too): every Gaussian at every pixel or ray,
no tiles, autograd for the gradients."""
import torch

from . import quat

ALPHA_MIN = 1.0 / 255.0
ALPHA_MAX = 0.99
T_MIN = 1e-4


def sort_front_to_back(key, valid, opacities, *per_camera):
    """Orders each camera's Gaussians by `key` [C,N] ascending (stable: equal
    keys keep Gaussian order; invalid ones last). Returns the per-camera
    opacities [C,N] (``opacities`` [N], or [C,N] per camera), `valid` and each of `per_camera` ([C,N,...]) in that
    order."""
    C, N = key.shape
    key = torch.where(valid, key, torch.full_like(key, float("inf")))
    order = torch.sort(key.detach(), dim=-1, stable=True).indices

    def gather(x):
        return torch.gather(x, 1, order.reshape(C, N, *([1] * (x.dim() - 2))).expand(C, N, *x.shape[2:]))

    o = torch.gather((opacities if opacities.dim() == 2 else opacities[None]).expand(C, N), 1, order)
    return (o, gather(valid)) + tuple(gather(x) for x in per_camera)


def falloff(dx, dy, conic, o):
    """sigma = (a dx^2 + c dy^2) / 2 + b dx dy and the unclamped alpha
    o exp(-sigma), [C,A,B,N], for offsets (dx, dy) from the (sorted)
    Gaussians' means, conics [C,N,3] and opacities [C,N]."""
    A, B, Cc = (conic[:, None, None, :, k] for k in range(3))
    sigma = 0.5 * (A * dx * dx + Cc * dy * dy) + B * dx * dy
    return sigma, o[:, None, None, :] * torch.exp(-sigma)


def cuts(sigma, alpha, valid):
    """SPEC 3's discrete decisions on the pairs of falloff(): alpha clamped
    at 0.99, which pairs are kept (valid, sigma >= 0, alpha >= 1/255) and
    the transmittance T_incl after each kept pair (no gradient: only
    decisions are taken from it)."""
    alpha = torch.clamp(alpha, max=ALPHA_MAX)
    keep = valid[:, None, None, :] & (sigma >= 0) & (alpha >= ALPHA_MIN)
    with torch.no_grad():
        T_incl = torch.cumprod(1 - torch.where(keep, alpha, torch.zeros_like(alpha)), dim=-1)
    return alpha, keep, T_incl


def weights(dx, dy, conic, o, valid):
    """Blend weights w [C,A,B,N] and final transmittance T [C,A,B,1] for
    offsets (dx, dy) (broadcasting to [C,A,B,N]) of pixels / rays from the (sorted) Gaussians'
    means, conics [C,N,3] (a, b, c of the inverse 2D covariance) and
    opacities [C,N]: sigma = (a dx^2 + c dy^2) / 2 + b dx dy,
    alpha = min(0.99, o exp(-sigma)), skipped when sigma < 0 or alpha < 1/255,
    stopping before the Gaussian that would take T below 1e-4."""
    alpha, keep, T_incl = cuts(*falloff(dx, dy, conic, o), valid)
    used = keep & (T_incl >= T_MIN)  # T only decreases: once below, all later are out
    a_used = torch.where(used, alpha, torch.zeros_like(alpha))
    T_all = torch.cumprod(1 - a_used, dim=-1)
    T_excl = torch.cat((torch.ones_like(T_all[..., :1]), T_all[..., :-1]), -1)
    w = a_used * T_excl
    if w.shape[-1] > 0:
        T_final = T_all[..., -1:]
    else:
        T_final = torch.ones(w.shape[:-1] + (1,), dtype=w.dtype, device=w.device)
    return w, T_final


def median(dx, dy, conic, o, valid, key):
    """The median depth [C,A,B,1] of each pixel / ray (gsplat issue 930):
    ``key`` [C,N] (the sorted Gaussians' depths) of the first pair, in
    compositing order, after which the transmittance is at most 0.5 (the
    walk of ``weights``: its skips and its stop); 0 where none is (alpha <
    0.5). Differentiable with respect to ``key`` only."""
    alpha, keep, T_incl = cuts(*falloff(dx, dy, conic, o), valid)
    crossing = keep & (T_incl >= T_MIN) & (T_incl <= 0.5)
    found = crossing.any(-1, keepdim=True)
    first = torch.argmax(crossing.to(torch.int8), dim=-1, keepdim=True)  # the first True (0 where none)
    C, N = key.shape
    keys = key[:, None, None, :].expand(crossing.shape)
    if N == 0:
        return keys.new_zeros(crossing.shape[:-1] + (1,))
    picked = torch.gather(keys, -1, first)
    return torch.where(found, picked, torch.zeros_like(picked))


def ewa_factor(J, R, quats, scales):
    """T = J R (R_q diag(s)) [C,N,2,3]: the 2D covariance's factor, T T^T,
    for N Gaussians through sensor rotations R [C,3,3] (or [C,N,3,3]: SPEC
    7's pose per item) and the projection's Jacobians J [C,N,2,3]."""
    M = quat.to_rotmat(quat.normalize(quats)) * scales[:, None, :]  # [N,3,3]
    if R.dim() == 4:  # a pose per (sensor, Gaussian): SPEC 7's rolling shutter
        return J @ torch.einsum("cnij,njk->cnik", R, M)
    return J @ torch.einsum("cij,njk->cnik", R, M)


def ewa_cov2d(J, R, quats, scales, eps2d, factor=None):
    """EWA projection of the 3D covariances (R_q diag(s))(.)^T of N Gaussians
    through sensor rotations R [C,3,3] and the projection's Jacobians J
    [C,N,2,3] (SPEC sections 3, 4, 6): the 2D covariance J R Sigma R^T J^T
    plus ``eps2d`` on the diagonal, as its entries (a, b, c) and det.
    ``factor``: ewa_factor's T, where the caller has it."""
    T = ewa_factor(J, R, quats, scales) if factor is None else factor
    S = T @ T.transpose(-1, -2)
    a = S[..., 0, 0] + eps2d
    b = S[..., 0, 1]
    c = S[..., 1, 1] + eps2d
    return a, b, c, a * c - b * b


def compensation(T, det):
    """gsplat's antialiased opacity factor sqrt(det(T T^T) / det), det the
    dilated covariance's [C,N]; det(T T^T) as |T_0 x T_1|^2 (Lagrange's
    identity: no cancellation for covariances small against the dilation).
    0, with zero gradient, where the covariance is degenerate."""
    x = torch.linalg.cross(T[..., 0, :], T[..., 1, :])
    ratio = (x * x).sum(-1) / det
    ok = ratio > 0
    return torch.sqrt(torch.where(ok, ratio, torch.ones_like(ratio))) * ok
