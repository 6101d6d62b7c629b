"""The benchmark street scene: a static background (road, sidewalks, facades,
poles) plus rigid cars driving along keyframed tracks, packed into one set of
Gaussians the way a NuRec-style model stores them.

Default size: 400,000 static Gaussians + 64 tracks x 1,000 Gaussians
= 464,000; tracks of 50-200 keys at 10 Hz with ragged lengths, one single-key
track, raw unnormalized quaternions, the query time inside most tracks.

World frame: x along the road, y to the left, z up (metres). Times: int64
epoch microseconds.
"""
import math

import torch

EPOCH_US = 1_700_000_000_000_000  # epoch-sized times: float32 cannot hold them
KEY_PERIOD_US = 100_000  # 10 Hz


def _surface_points(g, n, lo, hi):
    return lo + (hi - lo) * torch.rand(n, 3, generator=g, dtype=torch.float64)


def _static_background(g, n, length=160.0):
    """Road + sidewalks (z = 0), two facades (y = +-12), and poles, along
    x in [-length / 2, length / 2]."""
    h = length / 2
    n_ground, n_facade = int(n * 0.5), int(n * 0.4)
    n_pole = n - n_ground - n_facade
    ground = _surface_points(g, n_ground, torch.tensor([-h, -12.0, 0.0]), torch.tensor([h, 12.0, 0.0]))
    ground[:, 2] += 0.01 * torch.randn(n_ground, generator=g, dtype=torch.float64)
    facade = _surface_points(g, n_facade, torch.tensor([-h, 12.0, 0.0]), torch.tensor([h, 12.3, 14.0]))
    facade[: n_facade // 2, 1] *= -1
    pole = _surface_points(g, n_pole, torch.tensor([-h, -0.1, 0.0]), torch.tensor([h, 0.1, 6.0]))
    pole[:, 0] = torch.round(pole[:, 0] / 10) * 10 + 0.1 * torch.randn(n_pole, generator=g, dtype=torch.float64)
    pole[:, 1] += torch.where(torch.rand(n_pole, generator=g) < 0.5, -10.0, 10.0).double()
    means = torch.cat([ground, facade, pole])
    colour = torch.cat([
        torch.tensor([0.35, 0.35, 0.37]).expand(n_ground, 3),
        torch.tensor([0.65, 0.55, 0.45]).expand(n_facade, 3),
        torch.tensor([0.2, 0.25, 0.2]).expand(n_pole, 3),
    ]).double()
    return means, colour, 0.12


def _car(g, n):
    """Gaussians on the surface of a 4.5 x 1.9 x 1.5 m box, in the car frame
    (origin on the ground under its centre)."""
    size = torch.tensor([4.5, 1.9, 1.5], dtype=torch.float64)
    p = (torch.rand(n, 3, generator=g, dtype=torch.float64) - 0.5) * size
    face = torch.randint(0, 3, (n,), generator=g)
    side = torch.where(torch.rand(n, generator=g) < 0.5, -0.5, 0.5).double()
    p[torch.arange(n), face] = side * size[face]
    p[:, 2] += 0.75
    return p


def make_street_scene(device="cpu", dtype=torch.float32, seed=0, num_static=400_000, num_tracks=64,
                      per_track=1_000, keys_range=(50, 200), length=160.0):
    """Returns a dict of the packed Gaussians, the track keyframes and the
    query time (see module docstring); ``length``: the street's (metres)."""
    g = torch.Generator().manual_seed(seed)
    means_s, colour_s, spacing = _static_background(g, num_static, length)
    cars, colours, ids = [], [], []
    counts = torch.randint(keys_range[0], keys_range[1] + 1, (num_tracks,), generator=g)
    counts[num_tracks // 2] = 1  # one single-key track
    key_poses, key_times, ranges = [], [], []
    start = 0
    for k in range(num_tracks):
        cars.append(_car(g, per_track))
        colours.append(torch.rand(3, generator=g, dtype=torch.float64).expand(per_track, 3))
        ids.append(torch.full((per_track,), k, dtype=torch.int32))
        n = int(counts[k])
        lane = [-5.25, -1.75, 1.75, 5.25][k % 4]
        speed = (5 + 10 * torch.rand(1, generator=g, dtype=torch.float64)) * (1 if lane < 0 else -1)
        t0 = EPOCH_US + int(torch.randint(0, 40, (1,), generator=g)) * KEY_PERIOD_US
        t = torch.arange(n, dtype=torch.int64) * KEY_PERIOD_US + t0
        x = -60 * math.copysign(1, float(speed)) + speed * (t - EPOCH_US).double() * 1e-6
        yaw = (0.0 if speed > 0 else math.pi) + 0.05 * torch.sin(torch.arange(n, dtype=torch.float64) * 0.1 + k)
        quat = torch.stack([torch.cos(yaw / 2), torch.zeros(n), torch.zeros(n), torch.sin(yaw / 2)], -1)
        quat = quat * (0.5 + 2 * torch.rand(n, 1, generator=g, dtype=torch.float64))  # raw, unnormalized
        quat[1::2] *= -1  # q and -q keys alternate: interpolation must pick the short arc
        pose = torch.cat([x[:, None], torch.full((n, 1), lane, dtype=torch.float64), torch.zeros(n, 1, dtype=torch.float64), quat], -1)
        key_poses.append(pose)
        key_times.append(t)
        ranges.append([start, n])
        start += n
    means = torch.cat([means_s] + cars)
    N = means.shape[0]
    quats = torch.randn(N, 4, generator=g, dtype=torch.float64) * 3  # raw, unnormalized
    log_scales = torch.log(torch.full((N, 3), spacing, dtype=torch.float64)
                           * (0.5 + torch.rand(N, 3, generator=g, dtype=torch.float64)))
    log_scales[num_static:] = math.log(0.06)
    opacity_logits = torch.randn(N, generator=g, dtype=torch.float64) + 2
    track_ids = torch.cat([torch.full((num_static,), -1, dtype=torch.int32)] + ids)
    query = EPOCH_US + 4_230_000 + 17  # between keys, inside most tracks
    scene = dict(
        means=means, quats=quats, log_scales=log_scales, opacity_logits=opacity_logits,
        track_ids=track_ids, key_poses=torch.cat(key_poses), key_times=torch.cat(key_times),
        track_ranges=torch.tensor(ranges, dtype=torch.int32), query_times=torch.tensor([query], dtype=torch.int64),
        colors=torch.cat([colour_s] + colours),
    )
    out = {}
    for name, t in scene.items():
        out[name] = t.to(device=device, dtype=dtype if t.is_floating_point() else t.dtype)
    return out


def look_along_x(position, device="cpu", dtype=torch.float32, lidar=False):
    """World-to-sensor matrix [1,4,4] of a sensor at `position` looking along
    +x: OpenCV camera axes (x right, y down, z forward), or lidar axes (x
    forward, y left, z up)."""
    if lidar:
        R = torch.eye(3, dtype=torch.float64)
    else:
        R = torch.tensor([[0.0, -1.0, 0.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0]], dtype=torch.float64)
    c = torch.tensor(position, dtype=torch.float64)
    M = torch.eye(4, dtype=torch.float64)
    M[:3, :3] = R
    M[:3, 3] = -R @ c
    return M[None].to(device=device, dtype=dtype)


def street_camera(width=1920, height=1080, device="cpu", dtype=torch.float32):
    """(viewmat [1,4,4], K [1,3,3]) of a camera 1.5 m above the road, at the
    start of the street, looking down it."""
    f = 0.5 * width / math.tan(math.radians(45))  # 90 deg horizontal field of view
    K = torch.tensor([[f, 0, width / 2], [0, f, height / 2], [0, 0, 1]], dtype=torch.float64)
    return look_along_x((-40.0, 0.0, 1.5), device, dtype), K[None].to(device=device, dtype=dtype)


def street_lidar(device="cpu", dtype=torch.float32):
    """viewmat [1,4,4] of a lidar 1.8 m above the road, mid-street."""
    return look_along_x((0.0, 0.0, 1.8), device, dtype, lidar=True)
