"""The two gsplat CUDA kernels that gsplat's ``MCMCStrategy`` calls, with
gsplat's signatures, for any device (CPU included) and without a host sync:
the MCMC relocation of Kheradmand et al., "3D Gaussian Splatting as Markov
Chain Monte Carlo" (2024), eq. 9, in PyTorch (called once per refinement),
and the covariance / precision of quaternions and scales, nurec_ops' fused
op (nurec_ops.covariance: called every step, where dozens of small tensor
ops cost ~1.5 ms of host time; its PyTorch formula is
nurec_ops.reference.quat_scale_to_covar_preci).
``nurec_ops.gsplat.patch_gsplat_strategy_ops()`` installs them where the
strategy finds them."""
import torch

from .covariance import quat_scale_to_covar_preci  # noqa: F401  (gsplat's name, installed by the patch)


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
