"""A small synthetic dynamic street for examples/train_street.py: the ground
truth a NuRec-style trainer reconstructs.

A static background (road, sidewalks, two rows of facades) and a few cars on
keyframed tracks, packed into one set of Gaussians (``track_ids == -1`` for
the background), an ego vehicle driving down the street with a pinhole camera
and a spinning lidar, and the frame times at which they sample the scene.

World frame: x along the road (the ego drives towards +x), y to the left,
z up, metres. Times: int64 epoch microseconds. Self-contained: only torch and
nurec_ops.lidar_model (the synthetic lidar, or a real calibration JSON).
"""
import math

import torch

from nurec_ops.lidar_model import load_lidar_model, synthetic_lidar_model

EPOCH_US = 1_700_000_000_000_000
FRAME_PERIOD_US = 100_000  # 10 Hz sensor frames
KEY_PERIOD_US = 500_000  # 2 Hz actor key poses

# Scene sizes. "small" runs on 2 CPU cores in about two minutes with the dense
# reference rasterizers; "tiny" is for the tests; "large" is a realistic GPU
# size (the dense reference rasterizers cannot run it: use --fused or
# --fused raster there).
SIZES = {
    "tiny": dict(static=300, cars=2, per_car=24, width=40, height=24, lidar_rows=8, lidar_cols=90,
                 frames=6, length=40.0),
    "small": dict(static=700, cars=3, per_car=50, width=64, height=40, lidar_rows=16, lidar_cols=120,
                  frames=20, length=55.0),
    "large": dict(static=300_000, cars=12, per_car=4_000, width=1920, height=1080, lidar_rows=128,
                  lidar_cols=3600, frames=100, length=160.0),
}

EGO_Y = -1.5  # the ego drives in the right-hand lane
EGO_SPEED = 4.0  # m/s
CAMERA_HEIGHT = 1.5
LIDAR_HEIGHT = 1.9
STREET_HALF_WIDTH = 9.0  # facades at y = +-9
SKY = (0.62, 0.75, 0.9)


def _rand(g, *shape):
    return torch.rand(*shape, generator=g, dtype=torch.float64)


def _randn(g, *shape):
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def _yaw_quat(yaw):
    yaw = torch.as_tensor(yaw, dtype=torch.float64)
    z = torch.zeros_like(yaw)
    return torch.stack([torch.cos(yaw / 2), z, z, torch.sin(yaw / 2)], -1)


def lidar_model(rows, cols, device="cpu", dtype=torch.float32, calibration=None):
    """The spinning lidar, reduced to ``rows`` x ``cols`` (evenly strided rows
    and columns, each row keeping its own elevation and azimuth offset) so
    that a dense reference rasterizer can run it on the CPU: the synthetic
    128 x 3600 model of nurec_ops.lidar_model (uneven rows, per-row azimuth
    offsets), or a real calibration JSON (``calibration``: NCore's row-offset
    spinning-lidar intrinsics, e.g. ../shared/data/gsplat/). Returns
    (row_elevations [R], column_azimuths [W], row_azimuth_offsets [R])."""
    if calibration is None:
        el, az, off = synthetic_lidar_model(dtype=torch.float64)
    else:
        el, az, off = load_lidar_model(calibration, dtype=torch.float64)
    ri = torch.linspace(0, el.shape[0] - 1, rows).round().long()
    ci = torch.linspace(0, az.shape[0], cols + 1)[:-1].floor().long()
    f = lambda t: t.to(device=device, dtype=dtype)  # noqa: E731
    return f(el[ri]), f(az[ci]), f(off[ri])


def _background(g, n, length):
    """Ground (road + sidewalks) and two facades, flat Gaussians with
    per-Gaussian colour texture. Returns means, quats, log_scales, colours."""
    x0, x1 = -15.0, length
    n_ground = int(n * 0.55)
    n_facade = n - n_ground
    area_g = (x1 - x0) * 2 * STREET_HALF_WIDTH
    area_f = (x1 - x0) * 10.0 * 2
    s_g = min(math.sqrt(area_g / n_ground) * 0.7, 0.8)
    s_f = min(math.sqrt(area_f / max(n_facade, 1)) * 0.7, 0.5)
    gx = x0 + (x1 - x0) * _rand(g, n_ground)
    gy = (2 * _rand(g, n_ground) - 1) * STREET_HALF_WIDTH
    ground = torch.stack([gx, gy, torch.zeros_like(gx)], -1)
    sidewalk = gy.abs() > 6.0
    marking = (gy.abs() < 0.25) & (torch.remainder(gx, 6.0) < 3.0)
    c_ground = torch.where(sidewalk[:, None], torch.tensor([0.62, 0.6, 0.56], dtype=torch.float64),
                           torch.tensor([0.3, 0.3, 0.32], dtype=torch.float64))
    c_ground = torch.where(marking[:, None], torch.tensor([0.95, 0.95, 0.9], dtype=torch.float64), c_ground)
    q_ground = _yaw_quat(2 * math.pi * _rand(g, n_ground))
    ls_ground = torch.log(torch.tensor([s_g, s_g, 0.05], dtype=torch.float64)).expand(n_ground, 3)
    fx = x0 + (x1 - x0) * _rand(g, n_facade)
    side = torch.where(_rand(g, n_facade) < 0.5, -1.0, 1.0).double()
    fz = 10.0 * _rand(g, n_facade)
    facade = torch.stack([fx, side * STREET_HALF_WIDTH, fz], -1)
    block = torch.floor(fx / 12.0) * 2 + (side > 0).double()  # a building every 12 m per side
    hue = torch.stack([torch.sin(block * 1.7), torch.sin(block * 2.3 + 1), torch.sin(block * 3.1 + 2)], -1)
    c_facade = 0.55 + 0.3 * hue
    window = (torch.remainder(fz, 3.0) > 1.2) & (torch.remainder(fx, 4.0) < 2.0)
    c_facade = torch.where(window[:, None], 0.25 * c_facade, c_facade)
    # facade Gaussians lie in the x-z plane: rotate by 90 deg about x so their thin axis is y
    q_facade = torch.tensor([math.cos(math.pi / 4), math.sin(math.pi / 4), 0.0, 0.0], dtype=torch.float64)
    q_facade = q_facade.expand(n_facade, 4)
    ls_facade = torch.log(torch.tensor([s_f, s_f, 0.05], dtype=torch.float64)).expand(n_facade, 3)
    colours = torch.cat([c_ground, c_facade]) + 0.04 * _randn(g, n, 3)
    return (torch.cat([ground, facade]), torch.cat([q_ground, q_facade]),
            torch.cat([ls_ground, ls_facade]).clone(), colours.clamp(0, 1))


def _car(g, n):
    """Gaussians on the faces of a 4.5 x 1.9 x 1.5 m box, in the car frame
    (x forward, origin on the ground under the centre), darker windows."""
    size = torch.tensor([4.5, 1.9, 1.5], dtype=torch.float64)
    p = (_rand(g, n, 3) - 0.5) * size
    face = torch.randint(0, 3, (n,), generator=g)
    side = torch.where(_rand(g, n) < 0.5, -0.5, 0.5).double()
    p[torch.arange(n), face] = side * size[face]
    p[:, 2] += 0.75
    s = math.sqrt(2 * (4.5 * 1.9 + 4.5 * 1.5 + 1.9 * 1.5) / n) * 0.6
    log_scales = torch.log(torch.full((n, 3), s, dtype=torch.float64))
    log_scales[torch.arange(n), face] = math.log(0.04)  # flat on its face
    glass = p[:, 2] > 1.05
    return p, log_scales, glass


# (lane y, start x relative to the ego, speed m/s, first frame inside the track)
_CAR_PLANS = [(-1.5, 12.0, 3.0, 0), (1.5, 40.0, -6.0, 0), (-4.5, 4.0, 7.0, 0), (4.5, 25.0, -3.0, 0.3)]


def make_street(size="small", seed=0, device="cpu", dtype=torch.float32, lidar_calibration=None):
    """The ground-truth scene and sensor rig. Returns a dict:

    - Gaussians (packed): ``means [N,3]``, ``quats [N,4]``, ``log_scales
      [N,3]``, ``opacity_logits [N]``, ``colors [N,3]``, ``track_ids [N]``
      int32 (-1 static).
    - Actor tracks: ``key_poses [P,7]``, ``key_times [P]`` int64,
      ``track_ranges [T,2]`` int32.
    - Frames: ``times [F]`` int64; ``cam_viewmats [F,4,4]`` (OpenCV),
      ``Ks [F,3,3]``, ``width``, ``height``, ``backgrounds [1,3]`` (sky);
      ``lidar_viewmats [F,4,4]`` (x forward, y left, z up) and the reduced
      lidar model ``row_elevations [R]``, ``column_azimuths [W]``,
      ``row_azimuth_offsets [R]`` (synthetic, or from ``lidar_calibration``,
      a real calibration JSON).
    """
    cfg = SIZES[size]
    g = torch.Generator().manual_seed(seed)
    means, quats, log_scales, colours = _background(g, cfg["static"], cfg["length"])
    ids = [torch.full((cfg["static"],), -1, dtype=torch.int32)]
    F = cfg["frames"]
    t0 = EPOCH_US
    times = t0 + torch.arange(F, dtype=torch.int64) * FRAME_PERIOD_US
    t_end = int(times[-1])
    key_poses, key_times, ranges = [], [], []
    all_m, all_q, all_ls, all_c = [means], [quats], [log_scales], [colours]
    for k in range(cfg["cars"]):
        lane, x_rel, speed, late = _CAR_PLANS[k % len(_CAR_PLANS)]
        x_rel += 6.0 * (k // len(_CAR_PLANS))
        p, ls, glass = _car(g, cfg["per_car"])
        body = _rand(g, 3) * 0.8 + 0.1
        c = torch.where(glass[:, None], torch.tensor([0.1, 0.12, 0.15], dtype=torch.float64), body)
        c = (c + 0.03 * _randn(g, cfg["per_car"], 3)).clamp(0, 1)
        all_m.append(p)
        all_q.append(torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64).expand(cfg["per_car"], 4))
        all_ls.append(ls)
        all_c.append(c)
        ids.append(torch.full((cfg["per_car"],), k, dtype=torch.int32))
        # keys every 0.5 s from (a little before) its first frame to after the last
        first = t0 + int(late * (t_end - t0))
        kt = torch.arange(first - KEY_PERIOD_US, t_end + 2 * KEY_PERIOD_US, KEY_PERIOD_US, dtype=torch.int64)
        if late > 0:
            kt = kt[1:]  # starts mid-sequence: outside its track before that
        sec = (kt - t0).double() * 1e-6
        x = x_rel + speed * sec
        yaw = (0.0 if speed > 0 else math.pi) + 0.04 * torch.sin(1.3 * sec + k)
        y = lane + 0.15 * torch.sin(0.9 * sec + 2 * k)
        pose = torch.cat([torch.stack([x, y, torch.zeros_like(x)], -1), _yaw_quat(yaw)], -1)
        ranges.append([sum(t.shape[0] for t in key_times), kt.shape[0]])
        key_poses.append(pose)
        key_times.append(kt)
    N = sum(m.shape[0] for m in all_m)
    ego_x = EGO_SPEED * (times - t0).double() * 1e-6
    R_cam = torch.tensor([[0.0, -1.0, 0.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0]], dtype=torch.float64)
    cam, lid = [], []
    for x in ego_x.tolist():
        for R, h, out in ((R_cam, CAMERA_HEIGHT, cam), (torch.eye(3, dtype=torch.float64), LIDAR_HEIGHT, lid)):
            c = torch.tensor([x, EGO_Y, h], dtype=torch.float64)
            M = torch.eye(4, dtype=torch.float64)
            M[:3, :3] = R
            M[:3, 3] = -R @ c
            out.append(M)
    W, H = cfg["width"], cfg["height"]
    f = 0.5 * W / math.tan(math.radians(40))  # 80 degree horizontal field of view
    K = torch.tensor([[f, 0, W / 2], [0, f, H / 2 - 0.12 * H], [0, 0, 1]], dtype=torch.float64)
    el, az, off = lidar_model(cfg["lidar_rows"], cfg["lidar_cols"], dtype=torch.float64,
                              calibration=lidar_calibration)
    scene = dict(
        means=torch.cat(all_m), quats=torch.cat(all_q), log_scales=torch.cat(all_ls),
        opacity_logits=torch.full((N,), 3.0, dtype=torch.float64) + 0.5 * _randn(g, N),
        colors=torch.cat(all_c), track_ids=torch.cat(ids),
        key_poses=torch.cat(key_poses), key_times=torch.cat(key_times),
        track_ranges=torch.tensor(ranges, dtype=torch.int32).reshape(-1, 2),
        times=times, cam_viewmats=torch.stack(cam), Ks=K[None].expand(F, 3, 3).clone(),
        lidar_viewmats=torch.stack(lid), backgrounds=torch.tensor([SKY], dtype=torch.float64),
        row_elevations=el, column_azimuths=az, row_azimuth_offsets=off,
    )
    out = {k: v.to(device=device, dtype=dtype if v.is_floating_point() else v.dtype) for k, v in scene.items()}
    out.update(width=W, height=H)
    return out


def perturb(scene, seed=1, noise=1.0):
    """The starting point of training: noisy Gaussians (positions, rotations,
    scales, opacities, colours) and actor key poses offset per track (a
    shift of about half a metre and a few degrees of yaw, plus per-key
    jitter). Returns a dict of fresh leaf tensors (the parameters)."""
    g = torch.Generator().manual_seed(seed)
    dev, dt = scene["means"].device, scene["means"].dtype
    N = scene["means"].shape[0]
    f = lambda t: t.to(device=dev, dtype=dt)  # noqa: E731
    d = lambda name: scene[name].detach().cpu().double()  # noqa: E731
    p = dict(
        means=d("means") + noise * 0.15 * _randn(g, N, 3),
        quats=d("quats") + noise * 0.1 * _randn(g, N, 4),
        log_scales=d("log_scales") + noise * 0.2 * _randn(g, N, 3),
        opacity_logits=d("opacity_logits") * 0 + 1.0 + noise * 0.5 * _randn(g, N),
        colors=(d("colors") + noise * 0.2 * _randn(g, N, 3)).clamp(0, 1),
    )
    kp = d("key_poses").clone()
    ranges = scene["track_ranges"].cpu().tolist()
    for s, c in ranges:
        shift = noise * torch.tensor([0.5, 0.3, 0.05], dtype=torch.float64) * _randn(g, 3)
        yaw = noise * math.radians(4.0) * float(_randn(g, 1))
        kp[s:s + c, :3] += shift + noise * 0.05 * _randn(g, c, 3)
        dq = _yaw_quat(torch.tensor(yaw))
        kp[s:s + c, 3:] = _quat_mul(dq.expand(c, 4), kp[s:s + c, 3:])
    p["key_poses"] = kp
    return {k: f(v).requires_grad_(True) for k, v in p.items()}


def _quat_mul(a, b):
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack((aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                        aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw), -1)


def observed_keys(scene):
    """[P] bool: the key poses some frame interpolates from (keys within one
    key period of the frame times); the others get no gradient."""
    t, kt = scene["times"], scene["key_times"]
    return (kt > t.min() - KEY_PERIOD_US) & (kt < t.max() + KEY_PERIOD_US)


def pose_error(key_poses, key_poses_gt, mask=None):
    """Mean translation error (m) and mean rotation error (degrees) over the
    actor key poses (those where ``mask`` is True)."""
    a, b = key_poses.detach().double().cpu(), key_poses_gt.detach().double().cpu()
    if mask is not None:
        a, b = a[mask.cpu()], b[mask.cpu()]
    dt = (a[:, :3] - b[:, :3]).norm(dim=-1).mean().item()
    qa = a[:, 3:] / a[:, 3:].norm(dim=-1, keepdim=True)
    qb = b[:, 3:] / b[:, 3:].norm(dim=-1, keepdim=True)
    dot = (qa * qb).sum(-1).abs().clamp(max=1.0)
    return dt, math.degrees((2 * torch.acos(dot)).mean().item())


def relative_pose_error(key_poses, key_poses_gt, track_ranges, mask=None):
    """Mean translation (m) and rotation (degrees) error of the motion between
    consecutive key poses of each track (keys k and k+1 both in ``mask``):
    the part of a pose that images can pin down. A constant offset of a whole
    track is not: moving all of a car's Gaussians by the inverse offset in its
    own frame renders the same images for a car that keeps its heading, so
    the absolute error of ``pose_error`` can stay or drift while the motion,
    measured here, is recovered."""
    from nurec_ops.reference import quat

    a, b = key_poses.detach().double().cpu(), key_poses_gt.detach().double().cpu()
    keep = torch.ones(a.shape[0], dtype=torch.bool) if mask is None else mask.cpu()
    first, second = [], []
    for s, c in track_ranges.cpu().tolist():
        for k in range(s, s + c - 1):
            if keep[k] and keep[k + 1]:
                first.append(k)
                second.append(k + 1)
    if not first:
        return 0.0, 0.0
    i, j = torch.tensor(first), torch.tensor(second)

    def motion(p):
        q0 = quat.normalize(p[i, 3:])
        q1 = quat.normalize(p[j, 3:])
        inv = q0 * torch.tensor([1.0, -1.0, -1.0, -1.0], dtype=p.dtype)
        R = quat.to_rotmat(inv)
        dt = torch.einsum("nij,nj->ni", R, p[j, :3] - p[i, :3])
        return dt, quat.mul(inv, q1)

    ta, qa = motion(a)
    tb, qb = motion(b)
    dt = (ta - tb).norm(dim=-1).mean().item()
    dot = (qa * qb).sum(-1).abs().clamp(max=1.0)
    return dt, math.degrees((2 * torch.acos(dot)).mean().item())

