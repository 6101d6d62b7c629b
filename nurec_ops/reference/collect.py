"""Reference collect_gaussian_parameters and collect: vectorized, no host sync,
no masking or concatenation that depends on data."""
import torch

from . import quat
from .track_poses import interpolate_track_poses


def collect_gaussian_parameters(means, quats, log_scales, opacity_logits, track_ids, track_poses, track_inside):
    """Pure-PyTorch twin of :func:`nurec_ops.collect_gaussian_parameters`."""
    T = track_poses.shape[0]
    ids = track_ids.to(torch.int64)
    static = ids == -1
    valid = (ids >= 0) & (ids < T)
    qn = quat.normalize(quats)
    if T > 0:
        k = ids.clamp(0, T - 1)
        pose = track_poses[k]
        inside = track_inside[k] & valid
        qk = quat.normalize(pose[:, 3:])
        mw_track = (quat.to_rotmat(qk) @ means[:, :, None])[:, :, 0] + pose[:, :3]
        qw_track = quat.normalize(quat.mul(qk, qn))
        means_w = torch.where(valid[:, None], mw_track, means)
        quats_w = torch.where(valid[:, None], qw_track, qn)
    else:
        inside = torch.zeros_like(static)
        means_w, quats_w = means, qn
    forced = ~static & ~inside
    scales = torch.exp(log_scales)
    opacities = torch.where(forced, torch.zeros_like(opacity_logits), torch.sigmoid(opacity_logits))
    # Gaussians forced to opacity 0 get exactly zero gradient in every input
    f = forced[:, None]
    means_w = torch.where(f, means_w.detach(), means_w)
    quats_w = torch.where(f, quats_w.detach(), quats_w)
    scales = torch.where(f, scales.detach(), scales)
    return means_w, quats_w, scales, opacities


def collect(means, quats, log_scales, opacity_logits, track_ids, key_poses, key_times, track_ranges, query_times, mode="slerp"):
    """Pure-PyTorch twin of :func:`nurec_ops.collect`."""
    poses, inside = interpolate_track_poses(key_poses, key_times, track_ranges, query_times, mode)
    return collect_gaussian_parameters(means, quats, log_scales, opacity_logits, track_ids, poses, inside)
