"""Reference interpolate_track_poses: vectorized over tracks, no host sync."""
import math

import torch

from . import quat


def _locate(key_times, start, count, t, mode):
    """Per track: number of keys used (0, 1, 2), left key l, fraction a
    (float64), inside; as nurec_track_locate in csrc/track_poses."""
    P = key_times.shape[0]
    valid = (count > 0) & (start >= 0) & (start <= P - count)
    last = start + count - 1
    safe = lambda i: i.clamp(0, max(P - 1, 0))  # noqa: E731
    if P == 0:
        z = torch.zeros_like(start)
        return z, z, torch.zeros(start.shape, dtype=torch.float64, device=start.device), z.bool()
    t_first = key_times[safe(start)]
    t_last = key_times[safe(last)]
    before = t < t_first
    after = t > t_last
    inside = valid & ~before & ~after
    # binary search for the last key with time <= t, fixed trip count
    lo, hi = start.clone(), last.clone()
    for _ in range(max(1, math.ceil(math.log2(P + 1)))):
        mid = lo + torch.div(hi - lo + 1, 2, rounding_mode="floor")
        le = key_times[safe(mid)] <= t
        go = (lo < hi) & le
        stay = (lo < hi) & ~le
        lo = torch.where(go, mid, lo)
        hi = torch.where(stay, mid - 1, hi)
    at_last = lo == last
    t_l = key_times[safe(lo)]
    t_r = key_times[safe(lo + 1)]
    if mode == "nearest":
        l = torch.where(inside & ~at_last & (t - t_l > t_r - t), lo + 1, lo)
        two = torch.zeros_like(inside)
    else:
        l = lo
        two = inside & ~at_last
    l = torch.where(before, start, torch.where(after, last, l))
    dt = (t_r - t_l).to(torch.float64)
    a = torch.where(two & (t_r != t_l), (t - t_l).to(torch.float64) / torch.where(dt == 0, 1.0, dt), 0.0)
    nk = torch.where(valid, torch.where(two, 2, 1), 0)
    return nk, l, a, inside


def interpolate_track_poses(key_poses, key_times, track_ranges, query_times, mode="slerp"):
    """Pure-PyTorch twin of :func:`nurec_ops.interpolate_track_poses` (same
    signature, semantics and choices)."""
    if mode not in ("slerp", "nearest"):
        raise RuntimeError(f'nurec_ops.reference.interpolate_track_poses: `mode` must be "slerp" or "nearest", got "{mode}"')
    T = track_ranges.shape[0]
    P = key_poses.shape[0]
    ranges = track_ranges.to(torch.int64)
    start, count = ranges[:, 0], ranges[:, 1]
    t = query_times.expand(T) if query_times.shape[0] == 1 else query_times
    nk, l, a64, inside = _locate(key_times, start, count, t, mode)
    dtype = key_poses.dtype
    ident = torch.zeros(T, 7, dtype=dtype, device=key_poses.device)
    ident[:, 3] = 1
    if P == 0:
        return ident, inside
    li = l.clamp(0, P - 1)
    ri = (l + 1).clamp(0, P - 1)
    kl, kr = key_poses[li], key_poses[ri]
    a = a64.to(dtype)[:, None]
    ql, qr = quat.normalize(kl[:, 3:]), quat.normalize(kr[:, 3:])
    qr = torch.where((ql * qr).sum(-1, keepdim=True) < 0, -qr, qr)
    two = (nk == 2)[:, None]
    trans = torch.where(two, (1 - a) * kl[:, :3] + a * kr[:, :3], kl[:, :3])
    rot = torch.where(two, quat.normalize(quat.slerp(ql, qr, a[:, 0])), ql)
    pose = torch.cat((trans, rot), -1)
    return torch.where((nk == 0)[:, None], ident, pose), inside
