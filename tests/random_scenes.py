"""Fresh random inputs for the collection ops' tests: actor tracks (keyframed
poses), query times, packed Gaussians, actor poses; and ``upcast`` for the
float64 reference runs."""
import torch

EPOCH_US = 1_700_000_000_000_000  # ~2023-11 in microseconds since 1970


def random_quats(n, dtype=torch.float64, device="cpu", unnormalized=True):
    """Random quaternions, [n, 4]; unnormalized: norms spread over 1e-2..1e2."""
    q = torch.randn(n, 4, dtype=torch.float64)
    q = q / q.norm(dim=-1, keepdim=True)
    if unnormalized:
        q = q * torch.exp(torch.empty(n, 1, dtype=torch.float64).uniform_(-4.6, 4.6))
    return q.to(dtype=dtype, device=device)


def _axis_angle_quat(axis, angle):
    axis = axis / axis.norm(dim=-1, keepdim=True)
    h = angle[:, None] / 2
    return torch.cat((torch.cos(h), torch.sin(h) * axis), -1)


def quat_mul(a, b):
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack((
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ), -1)


def make_tracks(num_tracks=8, min_keys=1, max_keys=12, dtype=torch.float64, device="cpu",
                range_dtype=torch.int64, base_time=EPOCH_US, step_us=100_000, jitter_us=20_000,
                min_angle=0.05, max_angle=1.0, random_sign=True, gap=True, shuffle=True):
    """Keyframed actor tracks, packed as the ops take them.

    Ragged lengths in [min_keys, max_keys]; key times ascending within each
    track at about 10 Hz (``step_us`` +- ``jitter_us``, strictly increasing)
    from a random start near ``base_time``; consecutive key rotations differ
    by an angle in [min_angle, max_angle] rad (well away from the slerp
    threshold and from the 180 degree flip); quaternions unnormalized with
    a random sign (q and -q are the same rotation) when ``random_sign``.
    ``gap`` leaves unused key rows between tracks; ``shuffle`` stores the
    tracks in the key arrays in random order.

    Returns dict(key_poses [P,7], key_times [P] int64, track_ranges [T,2],
    counts list, starts list).
    """
    T = num_tracks
    counts = torch.randint(min_keys, max_keys + 1, (T,)).tolist() if T else []
    poses, times, blocks = [], [], []
    for k in range(T):
        c = counts[k]
        t0 = base_time + int(torch.randint(-step_us * 5, step_us * 5, ()).item())
        dts = step_us + torch.randint(-jitter_us, jitter_us + 1, (max(c - 1, 0),), dtype=torch.int64)
        tt = torch.cat((torch.tensor([t0], dtype=torch.int64), t0 + torch.cumsum(dts, 0)))[:c]
        q = [random_quats(1, unnormalized=False)[0]]
        for _ in range(c - 1):
            ang = torch.empty(1, dtype=torch.float64).uniform_(min_angle, max_angle)
            dq = _axis_angle_quat(torch.randn(1, 3, dtype=torch.float64), ang)[0]
            q.append(quat_mul(q[-1][None], dq[None])[0])
        q = torch.stack(q) if c else torch.zeros(0, 4, dtype=torch.float64)
        if c:
            q = q * torch.exp(torch.empty(c, 1, dtype=torch.float64).uniform_(-2.0, 2.0))
            if random_sign:
                q = q * (torch.randint(0, 2, (c, 1)) * 2 - 1).to(torch.float64)
        tr = torch.randn(c, 3, dtype=torch.float64) * 20 + torch.randn(1, 3, dtype=torch.float64) * 50
        blk = torch.cat((tr, q), -1)
        if gap and torch.rand(()) < 0.5:
            pad = int(torch.randint(1, 3, ()).item())
            blk = torch.cat((blk, torch.randn(pad, 7, dtype=torch.float64)), 0)
            tt = torch.cat((tt, tt[-1:].expand(pad) + 1 if c else torch.full((pad,), base_time))) if pad else tt
        blocks.append((k, blk, tt))
    order = torch.randperm(T).tolist() if shuffle else list(range(T))
    starts = [0] * T
    row = 0
    for k in order:
        _, blk, tt = blocks[k]
        starts[k] = row
        poses.append(blk)
        times.append(tt)
        row += blk.shape[0]
    key_poses = torch.cat(poses, 0) if poses else torch.zeros(0, 7, dtype=torch.float64)
    key_times = torch.cat(times, 0) if times else torch.zeros(0, dtype=torch.int64)
    ranges = torch.tensor([[starts[k], counts[k]] for k in range(T)], dtype=torch.int64).reshape(T, 2)
    return dict(
        key_poses=key_poses.to(dtype=dtype, device=device),
        key_times=key_times.to(device),
        track_ranges=ranges.to(dtype=range_dtype, device=device),
        counts=counts,
        starts=starts,
    )


def query_times_for(tracks, where="mixed", avoid_keys=True, avoid_midpoints=False, broadcast=False):
    """Query times [T] (or [1] when ``broadcast``) for ``make_tracks`` output.

    where: "inside" (strictly between first and last key where possible),
    "mixed" (about 70% inside, the rest before / after), "before", "after".
    avoid_keys: never exactly on a key time (for gradcheck: the pose is
    continuous but not differentiable there); avoid_midpoints: never within
    2 us of the midpoint between two keys (for "nearest" gradcheck).
    """
    kt = tracks["key_times"].cpu()
    out = []
    T = len(tracks["counts"])
    if broadcast:
        # one time: near the middle of the first non-empty track
        for k in range(T):
            s, c = tracks["starts"][k], tracks["counts"][k]
            if c >= 2:
                return (kt[s] + (kt[s + 1] - kt[s]) // 3 + 1).reshape(1).to(tracks["key_times"].device)
        return torch.tensor([EPOCH_US], dtype=torch.int64, device=tracks["key_times"].device)
    for k in range(T):
        s, c = tracks["starts"][k], tracks["counts"][k]
        if c == 0:
            out.append(EPOCH_US + 17)
            continue
        first, last = int(kt[s]), int(kt[s + c - 1])
        u = torch.rand(()).item()
        w = where
        if w == "mixed":
            w = "inside" if u < 0.7 else ("before" if u < 0.85 else "after")
        if w == "before":
            out.append(first - 1 - int(torch.randint(0, 300_000, ()).item()))
        elif w == "after":
            out.append(last + 1 + int(torch.randint(0, 300_000, ()).item()))
        elif c == 1:
            out.append(first if not avoid_keys else first + 7)
        else:
            i = int(torch.randint(0, c - 1, ()).item())
            tl, tr = int(kt[s + i]), int(kt[s + i + 1])
            while True:
                t = int(torch.randint(tl, tr + 1, ()).item())
                if avoid_keys and t in (tl, tr):
                    continue
                if avoid_midpoints and abs(2 * t - tl - tr) <= 4:
                    continue
                break
            out.append(t)
    return torch.tensor(out, dtype=torch.int64, device=tracks["key_times"].device)


def make_gaussians(n, num_tracks, dtype=torch.float64, device="cpu", id_dtype=torch.int64,
                   p_static=0.3, p_invalid=0.1):
    """Packed Gaussians: means [N,3], quats [N,4] (unnormalized), log_scales
    [N,3], opacity_logits [N], track_ids [N] (-1 static, 0..T-1 actors, and
    invalid ids -2, -7, T, T+3 with probability ``p_invalid``)."""
    T = num_tracks
    means = torch.randn(n, 3, dtype=torch.float64) * 5
    quats = random_quats(n)
    log_scales = torch.randn(n, 3, dtype=torch.float64) * 0.5 - 2
    logits = torch.randn(n, dtype=torch.float64) * 2
    u = torch.rand(n)
    ids = torch.randint(0, max(T, 1), (n,)) if T > 0 else torch.full((n,), -1)
    ids = torch.where(u < p_static, torch.full_like(ids, -1), ids)
    bad = torch.tensor([-2, -7, T, T + 3])[torch.randint(0, 4, (n,))]
    ids = torch.where((u >= p_static) & (u < p_static + p_invalid), bad, ids)
    f = lambda x: x.to(dtype=dtype, device=device)  # noqa: E731
    return dict(means=f(means), quats=f(quats), log_scales=f(log_scales), opacity_logits=f(logits),
                track_ids=ids.to(dtype=id_dtype, device=device))


def make_track_poses(num_tracks, dtype=torch.float64, device="cpu", p_inside=0.7):
    """Random actor poses [T,7] (unnormalized quats) and inside flags [T]."""
    T = num_tracks
    tr = torch.randn(T, 3, dtype=torch.float64) * 30
    q = random_quats(T)
    poses = torch.cat((tr, q), -1).to(dtype=dtype, device=device)
    inside = (torch.rand(T) < p_inside).to(device)
    return poses, inside


def upcast(x):
    """float64 detached copy (leaf, requires_grad as x) for reference runs."""
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.detach().to(torch.float64).requires_grad_(x.requires_grad)
    return x
