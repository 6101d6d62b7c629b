"""Pure-PyTorch versions of the two gsplat CUDA kernels that gsplat's
``MCMCStrategy`` calls, with gsplat's signatures, for any device (CPU
included) and without a host sync: the MCMC relocation of Kheradmand et
al., "3D Gaussian Splatting as Markov Chain Monte Carlo" (2024), eq. 9,
and the covariance / precision of quaternions and scales.
``nurec_ops.gsplat.patch_gsplat_strategy_ops()`` installs them where the
strategy finds them."""
import torch


def compute_relocation(opacities, scales, ratios, binoms):
    """Opacity and scales of a Gaussian split into ``ratios`` copies so that
    their sum renders as the original (eq. 9): ``o' = 1 - (1 - o)^(1/n)`` and
    ``s' = s o / sum_{i=1..n} sum_{k<i} C(i-1, k) (-1)^k o'^(k+1) / sqrt(k+1)``.

    Args (gsplat's): opacities [N], scales [N, 3], ratios [N] (copies n,
    clamped to 1..n_max), binoms [n_max, n_max] (only its size is used: the
    double sum is C(n, k+1) summed over k by the hockey-stick identity,
    evaluated in float64 from log-gamma, so no table row limits n).
    Returns (new_opacities [N], new_scales [N, 3]) in the inputs' dtype.
    """
    n_max = binoms.shape[0]
    n = ratios.clamp(1, n_max).to(torch.float64)
    o = opacities.to(torch.float64)
    o_new = 1 - torch.pow(1 - o, 1 / n)
    j = torch.arange(1, n_max + 1, dtype=torch.float64, device=o.device)  # j = k + 1
    lg = torch.lgamma
    log_c = lg(n[:, None] + 1) - lg(j[None] + 1) - lg((n[:, None] - j[None]).clamp_min(0) + 1)
    c = torch.where(j[None] <= n[:, None], torch.exp(log_c), torch.zeros_like(log_c))
    sign = torch.where(j.remainder(2) == 1, 1.0, -1.0).to(torch.float64)
    terms = c * sign[None] * torch.pow(o_new[:, None], j[None]) / torch.sqrt(j)[None]
    denom = terms.sum(-1)
    new_scales = scales.to(torch.float64) * (o / denom)[:, None]
    return o_new.to(opacities.dtype), new_scales.to(scales.dtype)


def _rotmat(quats):
    q = quats / quats.norm(dim=-1, keepdim=True)
    w, x, y, z = q.unbind(-1)
    return torch.stack((1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
                        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
                        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)), -1).unflatten(-1, (3, 3))


def _triu(m):
    return torch.stack((m[..., 0, 0], m[..., 0, 1], m[..., 0, 2], m[..., 1, 1], m[..., 1, 2], m[..., 2, 2]), -1)


def quat_scale_to_covar_preci(quats, scales, compute_covar=True, compute_preci=True, triu=False):
    """Covariances ``R S S R^T`` and precisions ``R S^-1 S^-1 R^T`` of
    quaternions (w, x, y, z; normalized here) and scales, [..., 3, 3] (or
    their upper triangles [..., 6] with ``triu``): gsplat's function, in
    PyTorch, differentiable."""
    R = _rotmat(quats)
    covar = preci = None
    if compute_covar:
        M = R * scales[..., None, :]
        covar = M @ M.transpose(-1, -2)
        covar = _triu(covar) if triu else covar
    if compute_preci:
        M = R / scales[..., None, :]
        preci = M @ M.transpose(-1, -2)
        preci = _triu(preci) if triu else preci
    return covar, preci
