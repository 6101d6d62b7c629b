"""Synthetic NCore v4 clips, written with NCore's own writer API.

A known world (a ground plane z = 0 with a checker, axis-aligned boxes as
buildings, cars as boxes moving along known tracks), an ego rig driving an
arc, cameras ray-cast through NCore's own camera models (each pixel row at
its rolling-shutter time), row-offset spinning lidars with per-ray
timestamps (each column from the sensor's pose at its firing time), and
the cars as cuboid tracks. ``tests/test_ncore_io.py`` writes a 0.5 s clip
of every camera model with it and checks the reader against the truth it
returns; ``benchmarks/make_ncore_clip.py`` writes a 30 s five-camera rig.

Needs nvidia-ncore (its writer) and scipy (an NCore dependency).
"""
import dataclasses
import io
import json
import math
import multiprocessing
import os
from typing import List, Optional

import numpy as np
import torch

T0 = 1_700_000_000_000_000  # the clips' first timestamp, us


def rz(yaw):
    """Rotations about z [..., 3, 3]."""
    c, s = np.cos(yaw), np.sin(yaw)
    R = np.zeros(np.shape(yaw) + (3, 3))
    R[..., 0, 0], R[..., 0, 1], R[..., 1, 0], R[..., 1, 1], R[..., 2, 2] = c, -s, s, c, 1.0
    return R


def se3(R, t):
    T = np.zeros(np.shape(t)[:-1] + (4, 4))
    T[..., :3, :3], T[..., :3, 3], T[..., 3, 3] = R, t, 1.0
    return T


def camera_mount(yaw, pitch, t):
    """Camera -> rig: OpenCV axes (x right, y down, z forward) turned by yaw
    (left) and pitched down."""
    from scipy.spatial.transform import Rotation

    axes = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])  # columns: camera x, y, z in the rig
    return se3(rz(yaw) @ Rotation.from_euler("y", pitch).as_matrix() @ axes, np.array(t))


def ftheta_backward(fw, max_angle):
    """A pixeldist_to_angle polynomial fitted to the forward one (c0 = 0)."""
    th = np.linspace(0, max_angle, 200)
    delta = np.polyval(fw[::-1], th)
    A = np.stack([delta ** i for i in range(1, 6)], -1)
    return np.concatenate([[0.0], np.linalg.lstsq(A, th, rcond=None)[0]]).astype(np.float32)


# --------------------------------------------------------------- the world

class Ego:
    """The rig's trajectory: an arc at ``speed`` m/s turning at ``yaw_rate``
    rad/s from the origin along x, a constant pitch and roll ``tilt``,
    stored as samples every ``pose_period_us``. ``T_rig_world`` is the pose
    as NCore interpolates the samples (linear translation; slerp of
    Rz(yaw) R_tilt is linear in yaw)."""

    def __init__(self, duration_us, speed=5.0, yaw_rate=0.1, tilt=(0.02, 0.01), pose_period_us=10_000, t0=T0):
        from scipy.spatial.transform import Rotation

        self.t0, self.duration_us, self.speed, self.yaw_rate = t0, duration_us, speed, yaw_rate
        self.R_tilt = Rotation.from_euler("yx", list(tilt)).as_matrix()
        self.pose_us = t0 + np.arange(0, duration_us + 1, pose_period_us)
        s = self.seconds(self.pose_us)
        self._t, self._yaw = self.road(self.speed * s, 0.0), self.yaw_rate * s

    def seconds(self, t_us):
        return (np.asarray(t_us, dtype=np.int64) - self.t0) * 1e-6

    def road(self, a, lane):
        """The point [..., 3] of the ego's road at arc length ``a`` [...],
        ``lane`` metres to its left (z = 0)."""
        a = np.asarray(a, dtype=np.float64)
        if self.yaw_rate == 0:
            return np.stack([a, np.full_like(a, lane), np.zeros_like(a)], -1)
        R, h = self.speed / self.yaw_rate, a * self.yaw_rate / self.speed
        return np.stack([(R - lane) * np.sin(h), R - (R - lane) * np.cos(h), np.zeros_like(a)], -1)

    def heading(self, a):
        return np.asarray(a, dtype=np.float64) * self.yaw_rate / self.speed

    def T_rig_world(self, t_us):
        t = np.asarray(t_us, dtype=np.int64)
        x = np.stack([np.interp(t, self.pose_us, self._t[:, i]) for i in range(3)], -1)
        return se3(rz(np.interp(t, self.pose_us, self._yaw)) @ self.R_tilt, x)


@dataclasses.dataclass
class LinearCar:
    """A car whose centre moves linearly and whose yaw is linear in time
    (key poses then interpolate it exactly): at ``s`` seconds, centre
    ``centre + velocity s``, yaw ``yaw + yaw_rate s``. Labelled in
    ``label_frame`` ("world" or a sensor's frame at the label's time),
    observed while its time lies in ``[start_s, stop_s]``."""
    name: str
    centre: tuple
    velocity: tuple
    yaw: float = 0.0
    yaw_rate: float = 0.0
    label_frame: str = "world"
    start_s: float = -math.inf
    stop_s: float = math.inf

    def pose(self, s):
        s = np.asarray(s, dtype=np.float64)
        c = np.stack([c0 + v * s for c0, v in zip(self.centre, self.velocity)], -1)
        return c, self.yaw + self.yaw_rate * s


@dataclasses.dataclass
class RoadCar:
    """A car driving the ego's road (``Ego.road``): in lane ``lane`` metres
    left of the ego's path, at arc length ``a0 + speed s`` (a negative
    speed drives the other way), present in ``[start_s, stop_s]``."""
    name: str
    ego: Ego
    lane: float
    a0: float
    speed: float
    label_frame: str = "world"
    start_s: float = -math.inf
    stop_s: float = math.inf
    height: float = 1.0

    def pose(self, s):
        a = self.a0 + self.speed * np.asarray(s, dtype=np.float64)
        c = self.ego.road(a, self.lane)
        c[..., 2] = self.height
        return c, self.ego.heading(a) + (0.0 if self.speed >= 0 else math.pi)


def _slab(o, d, lo, hi):
    """Entry distance of rays o + s d [n, 3] into the box [lo, hi] (inf:
    none). The three axes are combined pairwise: numpy's reductions over a
    length-3 axis were most of a lidar sweep's ray cast."""
    with np.errstate(divide="ignore", invalid="ignore"):
        a, b = (lo - o) / d, (hi - o) / d
    near, far = np.minimum(a, b), np.maximum(a, b)
    tmin = np.maximum(np.maximum(near[:, 0], near[:, 1]), near[:, 2])
    tmax = np.minimum(np.minimum(far[:, 0], far[:, 1]), far[:, 2])
    return np.where((tmax >= tmin) & (tmin > 1e-9), tmin, np.inf)


def _rays_toward(az_sorted, order, olo, ohi, lo, hi, pad=1e-7):
    """Indices of the rays that can meet the box [lo, hi] from an origin in
    the box [olo, ohi], by x and y alone (``az_sorted``: the rays' direction
    azimuths sorted, ``order`` their indices): a hit point lies along its
    ray's azimuth from the ray's origin, so within the azimuths of the box
    minus the origins' box (a box too, the Minkowski difference): one or two
    runs of the sorted azimuths. None where that box holds x = y = 0 (an
    origin could lie under or inside it: every ray). ``pad`` (radians)
    covers rounding. Lets a ray cast test only the rays facing a building or
    car (most of a sweep's rays face none of them), with the same hits."""
    mlo, mhi = lo[:2] - ohi[:2], hi[:2] - olo[:2]
    if (mlo <= 0).all() and (mhi >= 0).all():
        return None
    mid = math.atan2((mlo[1] + mhi[1]) / 2, (mlo[0] + mhi[0]) / 2)
    # a box that excludes the origin spans less than pi: its corners' angles around mid do not wrap
    corners = np.arctan2([mlo[1], mlo[1], mhi[1], mhi[1]], [mlo[0], mhi[0], mlo[0], mhi[0]]) - mid
    corners = (corners + math.pi) % (2 * math.pi) - math.pi
    a_lo, a_hi = mid + corners.min() - pad, mid + corners.max() + pad
    runs = [(a_lo, a_hi)]
    if a_lo < -math.pi:
        runs = [(a_lo + 2 * math.pi, math.pi), (-math.pi, a_hi)]
    elif a_hi > math.pi:
        runs = [(a_lo, math.pi), (-math.pi, a_hi - 2 * math.pi)]
    return np.concatenate([order[np.searchsorted(az_sorted, x, "left"):np.searchsorted(az_sorted, y, "right")]
                           for x, y in runs])


class Street:
    """The world: ground z = 0, ``buildings`` [(lo, hi)] boxes, ``cars``
    (LinearCar / RoadCar) whose bodies are ``car_body`` boxes (their labels
    ``label_margin`` larger per axis, as real ones), nothing past
    ``max_range`` metres."""

    def __init__(self, ego, buildings, cars, car_body=(4.2, 1.8, 1.4), label_margin=0.2, max_range=80.0):
        self.ego, self.cars = ego, list(cars)
        self.buildings = [(np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)) for lo, hi in buildings]
        self.car_body = np.asarray(car_body, dtype=np.float64)
        self.cuboid = self.car_body + label_margin
        self.max_range = max_range

    def car_pose(self, k, t_us):
        """Centre [..., 3] and yaw [...] of car k at t."""
        return self.cars[k].pose(self.ego.seconds(t_us))

    def cast(self, o, d, t_us):
        """Nearest hit of world rays o + s d at times t_us: (distance, what:
        -1 none, 0 ground, 1 a building, 2 + k car k). Boxes farther than
        the range from every origin are skipped."""
        best = np.full(o.shape[0], np.inf)
        what = np.full(o.shape[0], -1)

        def take(s, k):
            better = s < best
            best[better], what[better] = s[better], k

        def take_at(rays, s, k):  # take for the rays `rays` only (None: all)
            if rays is None:
                return take(s, k)
            better = s < best[rays]
            best[rays[better]], what[rays[better]] = s[better], k

        with np.errstate(divide="ignore", invalid="ignore"):
            take(np.where(d[:, 2] < 0, -o[:, 2] / d[:, 2], np.inf), 0)
        olo, ohi = o.min(0), o.max(0)
        near = lambda lo, hi: np.linalg.norm(np.maximum(0, np.maximum(lo - ohi, olo - hi))) <= self.max_range  # noqa
        azimuth = np.arctan2(d[:, 1], d[:, 0])
        order = np.argsort(azimuth, kind="stable")
        az_sorted = azimuth[order]
        for lo, hi in self.buildings:
            if near(lo, hi):
                rays = _rays_toward(az_sorted, order, olo, ohi, lo, hi)
                take_at(rays, _slab(o, d, lo, hi) if rays is None else _slab(o[rays], d[rays], lo, hi), 1)
        s = self.ego.seconds(t_us)
        times = np.unique(s)  # a sweep's columns (or an image's rows) share their times
        reach = np.hypot(*self.car_body[:2]) / 2  # a car's body within this of its centre in x, y, whatever its yaw
        for k, car in enumerate(self.cars):
            at = times[(times >= car.start_s) & (times <= car.stop_s)]
            if not at.size:
                continue
            c, _ = car.pose(at)
            rays = _rays_toward(az_sorted, order, olo, ohi, c.min(0) - reach, c.max(0) + reach)
            rays = np.arange(s.shape[0]) if rays is None else rays
            rays = rays[(s[rays] >= car.start_s) & (s[rays] <= car.stop_s)]
            c, yaw = car.pose(s[rays])
            Rt = np.swapaxes(rz(yaw), -1, -2)
            hit = _slab(np.einsum("nij,nj->ni", Rt, o[rays] - c), np.einsum("nij,nj->ni", Rt, d[rays]),
                        -self.car_body / 2, self.car_body / 2)
            take_at(rays, hit, 2 + k)
        far = best > self.max_range
        best[far], what[far] = np.inf, -1
        return best, what


COLOURS = {-1: (150, 190, 235), 1: (220, 120, 40)}
CAR_COLOURS = [(200, 30, 30), (30, 60, 200), (40, 160, 60), (230, 200, 40), (120, 40, 160)]


# ----------------------------------------------------------------- sensors

@dataclasses.dataclass
class SynthCamera:
    """A camera to write: NCore model ``params``, ``mount`` (camera -> rig),
    frame ``spans`` [(start, end)] us (a rolling shutter's rows from top to
    bottom between them), stored as ``image_format`` ("png" or "jpeg"),
    ray-cast every ``render_step`` pixels (each cast pixel fills its
    render_step^2 block: cheap images at full stored resolution)."""
    name: str
    params: object
    mount: np.ndarray
    spans: list
    image_format: str = "png"
    render_step: int = 1


@dataclasses.dataclass
class SynthLidar:
    """A lidar to write: its row-offset spinning ``params``, ``mount``,
    ``sweeps`` [(start, end)] us; ``stored`` "returns" (what a real sensor
    stores: the returns only, shuffled, with their model elements, intensity
    0.5) or "rays" (every ray, no elements, misses as NaN, intensity
    0.25 + 0.2 * what was hit); ``write_model=False`` stores no intrinsics
    (a lidar NCore knows only by its ray bundles, as a non-spinning one)."""
    name: str
    params: object
    mount: np.ndarray
    sweeps: list
    stored: str = "returns"
    group: str = "lidars"
    write_model: bool = True


def camera_rays(cam, model):
    """The cast pixels (u, v) [n, 2], their camera rays [n, 3] (float64)
    and the cast grid's (h, w)."""
    W, H = (int(v) for v in cam.params.resolution)
    k = cam.render_step
    v, u = np.meshgrid(np.arange(k // 2, H, k).clip(max=H - 1), np.arange(k // 2, W, k).clip(max=W - 1),
                       indexing="ij")
    pix = np.stack([u.ravel(), v.ravel()], -1)
    return pix, model.pixels_to_camera_rays(torch.from_numpy(pix)).double().numpy(), v.shape


def render_image(street, cam, model, start, end, rays=None):
    """The camera's image (uint8 [H, W, 3]), each pixel row from the camera
    pose at its rolling-shutter time (NCore's rays per pixel centre;
    ``rays``: camera_rays' result, computed when not given)."""
    W, H = (int(v) for v in cam.params.resolution)
    k = cam.render_step
    pix, rays, (h, w) = camera_rays(cam, model) if rays is None else rays
    tau = pix[:, 1] / (H - 1) if end > start else np.zeros(len(pix))
    t_us = (start + np.round(tau * (end - start))).astype(np.int64)
    T = street.ego.T_rig_world(t_us) @ cam.mount
    o, d = T[:, :3, 3], np.einsum("nij,nj->ni", T[:, :3, :3], rays)
    dist, what = street.cast(o, d, t_us)
    palette = np.array([COLOURS[-1], (0, 0, 0), COLOURS[1]] + CAR_COLOURS * (1 + len(street.cars) // 5), np.uint8)
    img = palette[what + 1]
    p = o + np.nan_to_num(dist, posinf=0.0)[:, None] * d
    ground = what == 0
    checker = (np.floor(p[:, 0]) + np.floor(p[:, 1])) % 2 == 0
    img[ground] = np.where(checker[ground, None], (90, 90, 95), (160, 160, 150))
    img = img.reshape(h, w, 3)
    if k > 1:
        img = np.repeat(np.repeat(img, k, 0), k, 1)[:H, :W]
    return img


def lidar_sweep(street, lid, start, end):
    """Every (row, column) ray of one sweep, fired at its column's relative
    time j / (W - 1) (NCore's), from the sensor pose at that time."""
    model = lid.params
    R, C = int(model.n_rows), int(model.n_columns)
    rows, cols = np.meshgrid(np.arange(R), np.arange(C), indexing="ij")
    el = model.row_elevations_rad.astype(np.float64)[rows.ravel()]
    az = (model.column_azimuths_rad.astype(np.float64)[cols.ravel()]
          + model.row_azimuth_offsets_rad.astype(np.float64)[rows.ravel()])
    d = np.stack([np.cos(az) * np.cos(el), np.sin(az) * np.cos(el), np.sin(el)], -1).astype(np.float32)
    t_us = (start + np.round(cols.ravel() / (C - 1) * (end - start))).astype(np.uint64)
    T = street.ego.T_rig_world(t_us.astype(np.int64)) @ lid.mount
    d64 = d.astype(np.float64)
    dist, what = street.cast(T[:, :3, 3], np.einsum("nij,nj->ni", T[:, :3, :3], d64), t_us.astype(np.int64))
    r32 = dist.astype(np.float32)
    r64 = np.nan_to_num(r32.astype(np.float64), posinf=0.0)  # misses: no point
    world = np.einsum("nij,nj->ni", T[:, :3, :3], d64 * r64[:, None]) + T[:, :3, 3]
    return dict(rows=rows.ravel(), cols=cols.ravel(), direction=d, t_us=t_us, dist=r32, what=what, world=world)


# ------------------------------------------------------------------ writing

_JOB = {}  # what forked render workers read (set before the pool starts)


def _camera_frame(args):
    c, f = args
    street, cam = _JOB["street"], _JOB["cameras"][c]
    import PIL.Image
    import ncore.sensors as ncs

    rays = _JOB.setdefault("rays", {})
    if c not in rays:  # once per camera and process
        if _JOB.get("forked"):
            torch.set_num_threads(1)  # one per process: N processes x N threads oversubscribed the cores
        rays[c] = camera_rays(cam, ncs.camera_model_from_parameters(cam.params, device="cpu", dtype=torch.float64))
    img = render_image(street, cam, None, *cam.spans[f], rays=rays[c])
    buf = io.BytesIO()
    PIL.Image.fromarray(img).save(buf, format=cam.image_format, **({"quality": 90} if cam.image_format == "jpeg" else {}))
    return buf.getvalue(), (img if _JOB["keep"] else None)


def _lidar_frame(args):
    l, s = args
    lid = _JOB["lidars"][l]
    sw = lidar_sweep(_JOB["street"], lid, *lid.sweeps[s])
    hit = np.isfinite(sw["dist"])
    if lid.stored == "returns":
        keep = np.random.default_rng([l, s]).permutation(np.nonzero(hit)[0])
        elements = np.stack([sw["rows"], sw["cols"]], -1).astype(np.uint16)[keep]
        dist, inten = sw["dist"][keep][None], np.full((1, keep.size), 0.5, dtype=np.float32)
    else:
        keep = np.arange(sw["dist"].size)
        elements = None
        dist = np.where(hit, sw["dist"], np.nan).astype(np.float32)[None]
        inten = np.where(hit, 0.25 + 0.2 * sw["what"], np.nan).astype(np.float32)[None]
    frame = dict(direction=sw["direction"][keep], timestamp_us=sw["t_us"][keep], model_element=elements,
                 distance_m=dist, intensity=inten)
    sw["stored"] = keep[hit[keep]]  # the valid returns, in stored order
    return frame, (sw if _JOB["keep"] else None)


def _ordered(fn, items, workers):
    """fn over items in order; with workers > 1 in forked processes, at
    most 2 * workers results in flight."""
    if workers <= 1:
        yield from map(fn, items)
        return
    import collections
    import concurrent.futures as cf

    _JOB["forked"] = True
    with cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        pending = collections.deque()
        for it in items:
            pending.append(pool.submit(fn, it))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def write_clip(folder, street, cameras: List[SynthCamera], lidars: List[SynthLidar], observation_us,
               sequence_id="nurec-ops-synthetic-clip", store_base_name="clip", keep_truth=True, workers=1,
               duration_us: Optional[int] = None, progress=None):
    """Writes the clip with NCore's v4 writer (a store for the poses,
    intrinsics, cameras and cuboids, one per lidar group) and its sequence
    meta JSON ``clip.json``; returns (meta JSON path, truth). The truth holds
    the intrinsics, and with ``keep_truth`` every image and sweep (see
    lidar_sweep; "stored" the valid returns' indices in stored order).
    ``observation_us``: the cuboid label times (each car while present).
    ``workers`` > 1 renders frames in forked processes. ``progress``: called
    with a line per sensor written (its frames and seconds), e.g. print."""
    from ncore.data import v4
    import ncore.data as ncd
    from ncore.impl.common.transformations import HalfClosedInterval
    from scipy.spatial.transform import Rotation
    from upath import UPath

    ego = street.ego
    duration_us = ego.duration_us if duration_us is None else duration_us
    writer = v4.SequenceComponentGroupsWriter(
        output_dir_path=UPath(folder), store_base_name=store_base_name, sequence_id=sequence_id,
        sequence_timestamp_interval_us=HalfClosedInterval(ego.t0, ego.t0 + duration_us + 1), generic_meta_data={})
    poses = writer.register_component_writer(v4.PosesComponent.Writer, "default")
    poses.store_dynamic_pose("rig", "world", ego.T_rig_world(ego.pose_us), ego.pose_us.astype(np.uint64))
    mounts = {s.name: s.mount for s in list(cameras) + list(lidars)}
    for name, T in mounts.items():
        poses.store_static_pose(name, "rig", T)
    intrinsics = writer.register_component_writer(v4.IntrinsicsComponent.Writer, "default")
    truth = dict(cameras={c.name: c.params for c in cameras}, lidars={l.name: l.params for l in lidars},
                 images={}, sweeps={})
    _JOB.update(street=street, cameras=list(cameras), lidars=list(lidars), keep=keep_truth)
    import time

    def done(name, n, t0):
        if progress is not None:
            progress(f"  {name}: {n} frames in {time.perf_counter() - t0:.1f} s")
    try:
        for c, cam in enumerate(cameras):
            t0 = time.perf_counter()
            intrinsics.store_camera_intrinsics(cam.name, cam.params)
            out = writer.register_component_writer(v4.CameraSensorComponent.Writer, cam.name)
            truth["images"][cam.name] = []
            for (data, img), (s, e) in zip(_ordered(_camera_frame, [(c, f) for f in range(len(cam.spans))], workers),
                                           cam.spans):
                out.store_frame(data, cam.image_format, np.array([s, e], dtype=np.uint64), {}, {})
                if keep_truth:
                    truth["images"][cam.name].append(img)
            done(cam.name, len(cam.spans), t0)
        for l, lid in enumerate(lidars):
            t0 = time.perf_counter()
            if lid.write_model:
                intrinsics.store_lidar_intrinsics(lid.name, lid.params)
            out = writer.register_component_writer(v4.LidarSensorComponent.Writer, lid.name, group_name=lid.group)
            truth["sweeps"][lid.name] = []
            for (frame, sw), (s, e) in zip(_ordered(_lidar_frame, [(l, s) for s in range(len(lid.sweeps))], workers),
                                           lid.sweeps):
                out.store_frame(**frame, frame_timestamps_us=np.array([s, e], dtype=np.uint64), generic_data={},
                                generic_meta_data={})
                if keep_truth:
                    truth["sweeps"][lid.name].append(sw)
            done(lid.name, len(lid.sweeps), t0)
    finally:
        _JOB.clear()
    cuboids = writer.register_component_writer(v4.CuboidsComponent.Writer, "default")
    obs = []
    for k, car in enumerate(street.cars):
        for t in observation_us:
            if not car.start_s <= ego.seconds(t) <= car.stop_s:
                continue
            c, yaw = street.car_pose(k, t)
            T_box = se3(rz(yaw), c)
            if car.label_frame != "world":  # labelled in a sensor's frame at its time
                T_box = np.linalg.inv(ego.T_rig_world(t) @ mounts[car.label_frame]) @ T_box
            euler = Rotation.from_matrix(T_box[:3, :3]).as_euler("xyz")
            obs.append(ncd.CuboidTrackObservation(
                track_id=car.name, class_id="automobile", timestamp_us=int(t), reference_frame_id=car.label_frame,
                reference_frame_timestamp_us=int(t),
                bbox3=ncd.BBox3(centroid=tuple(float(v) for v in T_box[:3, 3]),
                                dim=tuple(float(v) for v in street.cuboid), rot=tuple(float(v) for v in euler)),
                source=ncd.LabelSource.GT_SYNTHETIC))
    cuboids.store_observations(obs[::-1])  # any order
    paths = writer.finalize()
    meta = v4.SequenceComponentGroupsReader(paths).get_sequence_meta().to_dict()
    meta_path = os.path.join(folder, "clip.json")
    with open(meta_path, "w") as f:
        json.dump(meta, f)
    return meta_path, truth
