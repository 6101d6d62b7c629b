"""quat_scale_to_covar_preci in PyTorch (gsplat's function of that name),
with the fused op's signature (nurec_ops.covariance): the parity oracle of
its tests, differentiated by autograd. The quaternion is normalized as
csrc/math/quat_generic.h does (reference/quat.py: a zero quaternion is the
identity, with zero gradient)."""
import torch

from . import quat as Q


def _triu(m):
    return torch.stack((m[..., 0, 0], m[..., 0, 1], m[..., 0, 2], m[..., 1, 1], m[..., 1, 2], m[..., 2, 2]), -1)


def quat_scale_to_covar_preci(quats, scales, compute_covar=True, compute_preci=True, triu=False):
    """Covariances ``R S S R^T`` and precisions ``R S^-1 S^-1 R^T`` of
    quaternions (w, x, y, z; normalized here) and scales, [..., 3, 3] (or
    their upper triangles (00, 01, 02, 11, 12, 22) [..., 6] with ``triu``);
    None for one not computed."""
    R = Q.to_rotmat(Q.normalize(quats))
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
