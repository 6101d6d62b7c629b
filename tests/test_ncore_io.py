"""nurec_ops.io.ncore on a clip written here with NCore's own v4 writer API.

The clip (0.5 s): an ego rig driving a gentle curve; four 64 x 48 cameras,
one per NCore model (FTheta with a rolling shutter, OpenCV pinhole with
distortion, OpenCV fisheye, ideal pinhole), their images ray-cast with
NCore's own camera models; two 8 x 90 row-offset spinning lidars with per-ray
timestamps measuring a ground plane, a building and two cars (one stores
NCore's per-ray model elements, shuffled, misses left out; the other no
elements and its misses as NaN); the two cars as cuboid tracks (one labelled
in the lidar's frame, one in the world's). The reader must give back what
was written (intrinsics exactly, poses to 1e-5, tracks, lidar grids), and
nurec_ops' camera models must project where NCore's do (float64, 1e-6 px).
"""
import io
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

ncore = pytest.importorskip("ncore")
import PIL.Image  # noqa: E402  (an NCore dependency)
from ncore.data import v4  # noqa: E402
import ncore.data as ncd  # noqa: E402
import ncore.sensors as ncs  # noqa: E402
from ncore.impl.common.transformations import HalfClosedInterval  # noqa: E402
from scipy.spatial.transform import Rotation  # noqa: E402  (an NCore dependency)
from upath import UPath  # noqa: E402  (an NCore dependency)

from nurec_ops.io import ncore as nio  # noqa: E402
from nurec_ops.reference import camera_models as cm  # noqa: E402
from nurec_ops.reference.quat import to_rotmat  # noqa: E402

T0 = 1_700_000_000_000_000
DURATION_US = 500_000
W_IMG, H_IMG = 64, 48
ROWS, COLS = 8, 90
SWEEP_US = 100_000
READOUT_US = 30_000  # the FTheta camera's rolling shutter
MAX_RANGE = 80.0

# the world: x along the road, y left, z up; a building and two cars on the ground z = 0
BUILDING = (np.array([8.0, 4.0, 0.0]), np.array([12.0, 7.0, 3.0]))
CAR_BODY = np.array([4.2, 1.8, 1.4])  # what the lidar sees: a box from z = 0.3 to 1.7
CUBOID = CAR_BODY + 0.2  # the labels are a little larger, as real ones
CARS = ("car_a", "car_b")


def _sec(t_us):
    return (np.asarray(t_us, dtype=np.int64) - T0) * 1e-6


def car_pose(k, t_us):
    """Centre [..., 3] and yaw [...] of car k at t: car_a drives ahead of the
    ego, car_b comes the other way, turning slowly (key poses 10 Hz apart
    interpolate these exactly: linear motion, a yaw linear in time)."""
    s = _sec(t_us)
    if k == 0:
        c = np.stack([6.0 + 3.0 * s, np.full_like(s, -3.5), np.full_like(s, 1.0)], -1)
        return c, np.zeros_like(s)
    c = np.stack([25.0 - 4.0 * s, 3.0 + 0.1 * s, np.full_like(s, 1.0)], -1)
    return c, math.pi + 0.05 * s


def _rz(yaw):
    c, s = np.cos(yaw), np.sin(yaw)
    R = np.zeros(np.shape(yaw) + (3, 3))
    R[..., 0, 0], R[..., 0, 1], R[..., 1, 0], R[..., 1, 1], R[..., 2, 2] = c, -s, s, c, 1.0
    return R


def _se3(R, t):
    T = np.zeros(np.shape(t)[:-1] + (4, 4))
    T[..., :3, :3], T[..., :3, 3], T[..., 3, 3] = R, t, 1.0
    return T


# --------------------------------------------------------------- ego motion

POSE_US = T0 + np.arange(0, DURATION_US + 1, 10_000)  # the stored rig trajectory, 100 Hz
V_EGO, YAW_RATE = 5.0, 0.1
R_TILT = Rotation.from_euler("yx", [0.02, 0.01]).as_matrix()  # a constant pitch and roll of the rig


def _rig_samples():
    s = _sec(POSE_US)
    yaw = YAW_RATE * s
    t = np.stack([V_EGO / YAW_RATE * np.sin(yaw), V_EGO / YAW_RATE * (1 - np.cos(yaw)), np.zeros_like(s)], -1)
    return t, yaw


def T_rig_world(t_us):
    """The rig's pose at t as NCore interpolates the stored samples: linear
    translation; slerp of Rz(yaw) R_TILT is linear in yaw."""
    tr, yaw = _rig_samples()
    t = np.asarray(t_us, dtype=np.int64)
    x = np.stack([np.interp(t, POSE_US, tr[:, i]) for i in range(3)], -1)
    return _se3(_rz(np.interp(t, POSE_US, yaw)) @ R_TILT, x)


def _camera_mount(yaw, pitch, t):
    """Camera -> rig: OpenCV axes (x right, y down, z forward) turned by yaw
    (left) and pitched down."""
    axes = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])  # columns: camera x, y, z in the rig
    return _se3(_rz(yaw) @ Rotation.from_euler("y", pitch).as_matrix() @ axes, np.array(t))


MOUNTS = {"cam_ftheta": _camera_mount(0.0, 0.08, [1.6, 0.0, 1.5]),
          "cam_opencv": _camera_mount(0.6, 0.10, [1.5, 0.4, 1.5]),
          "cam_fisheye": _camera_mount(-1.5708, 0.15, [1.0, -0.9, 1.2]),
          "cam_ideal": _camera_mount(math.pi, 0.05, [-0.8, 0.0, 1.4])}
LIDAR_MOUNTS = {"lidar_top": _se3(_rz(0.03), np.array([0.2, 0.0, 1.9])),
                "lidar_plain": _se3(_rz(-0.02), np.array([0.0, 0.3, 1.8]))}


# ------------------------------------------------------------------- sensors

def _ftheta_backward(fw, max_angle):
    """A pixeldist_to_angle polynomial fitted to the forward one (c0 = 0)."""
    th = np.linspace(0, max_angle, 200)
    delta = np.polyval(fw[::-1], th)
    A = np.stack([delta ** i for i in range(1, 6)], -1)
    return np.concatenate([[0.0], np.linalg.lstsq(A, th, rcond=None)[0]]).astype(np.float32)


def camera_parameters():
    res = np.array([W_IMG, H_IMG], dtype=np.uint64)
    f32 = lambda *v: np.array(v, dtype=np.float32)  # noqa: E731
    fw = f32(0.0, 38.0, 0.4, -1.2, 0.15, -0.01)
    P = ncd.FThetaCameraModelParameters
    return {
        "cam_ftheta": P(resolution=res, shutter_type=ncd.ShutterType.ROLLING_TOP_TO_BOTTOM,
                        principal_point=f32(31.2, 23.7), reference_poly=P.PolynomialType.ANGLE_TO_PIXELDIST,
                        pixeldist_to_angle_poly=_ftheta_backward(fw.astype(np.float64), 1.25),
                        angle_to_pixeldist_poly=fw, max_angle=1.25, linear_cde=f32(1.0008, 0.0004, -0.0003)),
        "cam_opencv": ncd.OpenCVPinholeCameraModelParameters(
            resolution=res, shutter_type=ncd.ShutterType.GLOBAL, principal_point=f32(32.3, 23.8),
            focal_length=f32(40.0, 41.0), radial_coeffs=f32(0.03, -0.01, 0.002, 0.001, 0.0, 0.0),
            tangential_coeffs=f32(0.0008, -0.0005), thin_prism_coeffs=f32(0.0004, 0.0001, -0.0003, 0.0001)),
        "cam_fisheye": ncd.OpenCVFisheyeCameraModelParameters(
            resolution=res, shutter_type=ncd.ShutterType.GLOBAL, principal_point=f32(31.8, 24.2),
            focal_length=f32(20.0, 20.5), radial_coeffs=f32(0.01, -0.002, 0.0005, -0.0001), max_angle=1.4),
        "cam_ideal": ncd.IdealPinholeCameraModelParameters(
            resolution=res, shutter_type=ncd.ShutterType.GLOBAL, principal_point=f32(32.0, 24.0),
            focal_length=f32(45.0, 45.0)),
    }


def lidar_parameters():
    f32 = lambda v: np.asarray(v, dtype=np.float32)  # noqa: E731
    return ncd.RowOffsetStructuredSpinningLidarModelParameters(
        spinning_frequency_hz=10.0, spinning_direction="cw", n_rows=ROWS, n_columns=COLS,
        row_elevations_rad=f32(np.radians([3.0, 0.0, -3.0, -6.0, -9.0, -13.0, -18.0, -24.0])),
        column_azimuths_rad=f32(math.pi - (np.arange(COLS) + 0.5) * 2 * math.pi / COLS),
        row_azimuth_offsets_rad=f32(np.radians([0.5, -0.5, 1.0, -1.0, 0.25, -0.25, 0.75, -0.75])))


CAMERA_FRAMES = [(T0 + k * 100_000 + 5_000) for k in range(5)]  # frame starts
SWEEPS = [(T0 + s * SWEEP_US, T0 + (s + 1) * SWEEP_US) for s in range(5)]
OBS_US = [T0 + k * 100_000 for k in range(6)]  # cuboid observations, 10 Hz


def _frame_span(name, start):
    return (start, start + READOUT_US) if name == "cam_ftheta" else (start, start)


# --------------------------------------------------------------- ray casting

def _slab(o, d, lo, hi):
    with np.errstate(divide="ignore", invalid="ignore"):
        a, b = (lo - o) / d, (hi - o) / d
    tmin, tmax = np.minimum(a, b).max(-1), np.maximum(a, b).min(-1)
    return np.where((tmax >= tmin) & (tmin > 1e-9), tmin, np.inf)


def cast(o, d, t_us):
    """Nearest hit of world rays o + s d at times t_us with the scene:
    (distance, what: -1 none, 0 ground, 1 building, 2 car_a, 3 car_b)."""
    best = np.full(o.shape[0], np.inf)
    what = np.full(o.shape[0], -1)

    def take(s, k):
        better = s < best
        best[better], what[better] = s[better], k

    with np.errstate(divide="ignore", invalid="ignore"):
        take(np.where(d[:, 2] < 0, -o[:, 2] / d[:, 2], np.inf), 0)
    take(_slab(o, d, *BUILDING), 1)
    for k in range(2):
        c, yaw = car_pose(k, t_us)
        Rt = np.swapaxes(_rz(yaw), -1, -2)
        take(_slab(np.einsum("nij,nj->ni", Rt, o - c), np.einsum("nij,nj->ni", Rt, d), -CAR_BODY / 2, CAR_BODY / 2),
             2 + k)
    far = best > MAX_RANGE
    best[far], what[far] = np.inf, -1
    return best, what


COLOURS = {-1: (150, 190, 235), 1: (220, 120, 40), 2: (200, 30, 30), 3: (30, 60, 200)}


def render_image(name, model, start, end):
    """The camera's image (uint8 [H, W, 3]), each pixel row from the camera
    pose at its rolling-shutter time (NCore's rays per pixel centre)."""
    v, u = np.meshgrid(np.arange(H_IMG), np.arange(W_IMG), indexing="ij")
    pix = np.stack([u.ravel(), v.ravel()], -1)
    rays = model.pixels_to_camera_rays(torch.from_numpy(pix)).double().numpy()
    tau = pix[:, 1] / (H_IMG - 1) if end > start else np.zeros(len(pix))
    t_us = (start + np.round(tau * (end - start))).astype(np.int64)
    T = T_rig_world(t_us) @ MOUNTS[name]
    o, d = T[:, :3, 3], np.einsum("nij,nj->ni", T[:, :3, :3], rays)
    dist, what = cast(o, d, t_us)
    img = np.array([COLOURS.get(w, (0, 0, 0)) for w in what], dtype=np.uint8)
    p = o + np.nan_to_num(dist, posinf=0.0)[:, None] * d
    ground = what == 0
    checker = (np.floor(p[:, 0]) + np.floor(p[:, 1])) % 2 == 0
    img[ground] = np.where(checker[ground, None], (90, 90, 95), (160, 160, 150))
    return img.reshape(H_IMG, W_IMG, 3)


def lidar_sweep(name, model, start, end):
    """Every (row, column) ray of one sweep, fired at its column's relative
    time j / (W - 1) (NCore's), from the sensor pose at that time."""
    rows, cols = np.meshgrid(np.arange(ROWS), np.arange(COLS), indexing="ij")
    el = model.row_elevations_rad.astype(np.float64)[rows.ravel()]
    az = (model.column_azimuths_rad.astype(np.float64)[cols.ravel()]
          + model.row_azimuth_offsets_rad.astype(np.float64)[rows.ravel()])
    d = np.stack([np.cos(az) * np.cos(el), np.sin(az) * np.cos(el), np.sin(el)], -1).astype(np.float32)
    t_us = (start + np.round(cols.ravel() / (COLS - 1) * (end - start))).astype(np.uint64)
    T = T_rig_world(t_us.astype(np.int64)) @ LIDAR_MOUNTS[name]
    d64 = d.astype(np.float64)
    dist, what = cast(T[:, :3, 3], np.einsum("nij,nj->ni", T[:, :3, :3], d64), t_us.astype(np.int64))
    r32 = dist.astype(np.float32)
    r64 = np.nan_to_num(r32.astype(np.float64), posinf=0.0)  # misses: no point
    world = np.einsum("nij,nj->ni", T[:, :3, :3], d64 * r64[:, None]) + T[:, :3, 3]
    return dict(rows=rows.ravel(), cols=cols.ravel(), direction=d, t_us=t_us, dist=r32, what=what, world=world)


# ------------------------------------------------------------------ writing

def write_clip(folder):
    """Writes the clip with NCore's v4 writer (two stores: sensors and
    lidars) and its sequence meta JSON; returns (meta JSON path, truth)."""
    writer = v4.SequenceComponentGroupsWriter(
        output_dir_path=UPath(folder), store_base_name="clip", sequence_id="nurec-ops-test-clip",
        sequence_timestamp_interval_us=HalfClosedInterval(T0, T0 + DURATION_US + 1), generic_meta_data={})
    poses = writer.register_component_writer(v4.PosesComponent.Writer, "default")
    poses.store_dynamic_pose("rig", "world", T_rig_world(POSE_US), POSE_US.astype(np.uint64))
    for name, T in {**MOUNTS, **LIDAR_MOUNTS}.items():
        poses.store_static_pose(name, "rig", T)
    intrinsics = writer.register_component_writer(v4.IntrinsicsComponent.Writer, "default")
    truth = dict(cameras=camera_parameters(), lidar=lidar_parameters(), images={}, sweeps={})
    for name, params in truth["cameras"].items():
        intrinsics.store_camera_intrinsics(name, params)
        model = ncs.camera_model_from_parameters(params, device="cpu", dtype=torch.float64)
        cam = writer.register_component_writer(v4.CameraSensorComponent.Writer, name)
        truth["images"][name] = []
        for start in CAMERA_FRAMES:
            s, e = _frame_span(name, start)
            img = render_image(name, model, s, e)
            buf = io.BytesIO()
            PIL.Image.fromarray(img).save(buf, format="png")
            cam.store_frame(buf.getvalue(), "png", np.array([s, e], dtype=np.uint64), {}, {})
            truth["images"][name].append(img)
    rng = np.random.default_rng(0)
    for name in LIDAR_MOUNTS:
        intrinsics.store_lidar_intrinsics(name, truth["lidar"])
        lid = writer.register_component_writer(v4.LidarSensorComponent.Writer, name, group_name="lidars")
        truth["sweeps"][name] = []
        for s, e in SWEEPS:
            sw = lidar_sweep(name, truth["lidar"], s, e)
            hit = np.isfinite(sw["dist"])
            if name == "lidar_top":  # what a real sensor stores: returns only, in its own order, with elements
                keep = rng.permutation(np.nonzero(hit)[0])
                elements = np.stack([sw["rows"], sw["cols"]], -1).astype(np.uint16)[keep]
                dist, inten = sw["dist"][keep][None], np.full((1, keep.size), 0.5, dtype=np.float32)
            else:  # every ray, no elements, misses as NaN
                keep = np.arange(sw["dist"].size)
                elements = None
                dist = np.where(hit, sw["dist"], np.nan).astype(np.float32)[None]
                inten = np.where(hit, 0.25 + 0.2 * sw["what"], np.nan).astype(np.float32)[None]
            lid.store_frame(direction=sw["direction"][keep], timestamp_us=sw["t_us"][keep], model_element=elements,
                            distance_m=dist, intensity=inten, frame_timestamps_us=np.array([s, e], dtype=np.uint64),
                            generic_data={}, generic_meta_data={})
            sw["stored"] = keep[hit[keep]]  # the valid returns, in stored order
            truth["sweeps"][name].append(sw)
    cuboids = writer.register_component_writer(v4.CuboidsComponent.Writer, "default")
    obs = []
    for k, track in enumerate(CARS):
        for t in OBS_US:
            c, yaw = car_pose(k, t)
            T_box = _se3(_rz(yaw), c)
            ref = "lidar_top" if k == 0 else "world"  # car_a labelled in the lidar's frame at its time
            if ref != "world":
                T_box = np.linalg.inv(T_rig_world(t) @ LIDAR_MOUNTS[ref]) @ T_box
            euler = Rotation.from_matrix(T_box[:3, :3]).as_euler("xyz")
            obs.append(ncd.CuboidTrackObservation(
                track_id=track, class_id="automobile", timestamp_us=int(t), reference_frame_id=ref,
                reference_frame_timestamp_us=int(t),
                bbox3=ncd.BBox3(centroid=tuple(float(v) for v in T_box[:3, 3]),
                                dim=tuple(float(v) for v in CUBOID), rot=tuple(float(v) for v in euler)),
                source=ncd.LabelSource.GT_SYNTHETIC))
    cuboids.store_observations(obs[::-1])  # any order
    paths = writer.finalize()
    meta = v4.SequenceComponentGroupsReader(paths).get_sequence_meta().to_dict()
    meta_path = os.path.join(folder, "clip.json")
    with open(meta_path, "w") as f:
        json.dump(meta, f)
    return meta_path, truth


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    return write_clip(str(tmp_path_factory.mktemp("ncore_clip")))


@pytest.fixture(scope="module")
def clip(written):
    return nio.load_clip(written[0], dtype=torch.float64)


# -------------------------------------------------------------------- tests

def test_cameras_intrinsics(clip, written):
    truth = written[1]["cameras"]
    assert sorted(clip.cameras) == sorted(truth)
    want = {"cam_ftheta": "ftheta", "cam_opencv": "opencv", "cam_fisheye": "fisheye", "cam_ideal": "pinhole"}
    for name, p in truth.items():
        cam = clip.cameras[name]
        assert cam.camera_model == want[name] and (cam.width, cam.height) == (W_IMG, H_IMG)
        assert cam.shutter == ("top_to_bottom" if name == "cam_ftheta" else "global")
        t = lambda a: torch.tensor(np.asarray(a, dtype=np.float64))  # noqa: E731  (float32 values, exactly)
        if name == "cam_ftheta":
            assert torch.equal(cam.params["principal_point"], t(p.principal_point))  # NCore's convention, kept
            assert torch.equal(cam.params["angle_to_pixel"], t(p.angle_to_pixeldist_poly))
            assert torch.equal(cam.params["pixel_to_angle"], t(p.pixeldist_to_angle_poly))
            assert torch.equal(cam.params["linear_cde"], t(p.linear_cde))
            assert float(cam.params["max_angle"]) == p.max_angle and int(cam.params["reference_poly"]) == 2
            assert torch.equal(cam.Ks, torch.eye(3, dtype=torch.float64))
            continue
        fx, fy = p.focal_length.astype(np.float64)
        cx, cy = p.principal_point.astype(np.float64)
        assert torch.equal(cam.Ks, torch.tensor([[fx, 0, cx], [0, fy, cy], [0, 0, 1.0]], dtype=torch.float64))
        if name == "cam_opencv":
            assert torch.equal(cam.params["radial"], t(p.radial_coeffs))
            assert torch.equal(cam.params["tangential"], t(p.tangential_coeffs))
            assert torch.equal(cam.params["thin_prism"], t(p.thin_prism_coeffs))
        if name == "cam_fisheye":
            assert torch.equal(cam.params["radial"], t(p.radial_coeffs))
            assert float(cam.params["max_angle"]) == p.max_angle
        kw = cam.model_kwargs(C=2)
        assert kw["camera_model"] == want[name] and all(v.shape[0] == 2 for k, v in kw.items() if k != "camera_model")


def test_camera_poses_and_images(clip, written):
    for name, cam in clip.cameras.items():
        spans = np.array([_frame_span(name, s) for s in CAMERA_FRAMES])
        assert torch.equal(cam.timestamps_us, torch.tensor(spans, dtype=torch.int64))
        for i, (s, e) in enumerate(spans):
            for V, t in ((cam.viewmats[i], s), (cam.viewmats_end[i], e)):
                want = np.linalg.inv(T_rig_world(t) @ MOUNTS[name])
                torch.testing.assert_close(V, torch.from_numpy(want), rtol=0, atol=1e-5)
        torch.testing.assert_close(cam.T_sensor_rig, torch.from_numpy(MOUNTS[name]), rtol=0, atol=1e-12)
        imgs = torch.from_numpy(np.stack(written[1]["images"][name])).double() / 255
        assert cam.images.shape == (len(CAMERA_FRAMES), H_IMG, W_IMG, 3)
        assert torch.equal(cam.images, imgs)  # PNG is lossless
        assert (cam.images[..., 2] > 0.85).any() and cam.images.std() > 0.1  # sky and a scene, not a blank


def _image_field_points(model, params, n=3000, seed=0):
    """Camera-space points that NCore sees inside its image: rays of random
    image points, at random depths; for the wide models also random
    directions up to 95% of their max angle."""
    g = np.random.default_rng(seed)
    uv = g.uniform([0.5, 0.5], [W_IMG - 0.5, H_IMG - 0.5], size=(n, 2))
    rays = model.image_points_to_camera_rays(torch.from_numpy(uv)).double()
    pts = rays * torch.from_numpy(g.uniform(0.5, 60.0, size=(n, 1)))
    if hasattr(params, "max_angle"):
        th = 0.95 * params.max_angle * np.sqrt(g.uniform(size=n))
        ph = g.uniform(0, 2 * math.pi, size=n)
        dirs = np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], -1)
        pts = torch.cat((pts, torch.from_numpy(dirs * g.uniform(0.5, 60.0, size=(n, 1)))))
    return pts


@pytest.mark.parametrize("name", ["cam_ftheta", "cam_opencv", "cam_fisheye", "cam_ideal"])
def test_projection_matches_ncore(clip, written, name):
    params = written[1]["cameras"][name]
    model = ncs.camera_model_from_parameters(params, device="cpu", dtype=torch.float64)
    cam = clip.cameras[name]
    pts = _image_field_points(model, params)
    ours, ok = cm.project(cam.camera_model, pts, cam.params)
    theirs = model.camera_rays_to_image_points(pts.clone())
    both = ok & theirs.valid_flag.bool()
    assert both.float().mean() > 0.45  # the wide models' extra directions partly fall outside the image
    torch.testing.assert_close(ours[both], theirs.image_points[both], rtol=0, atol=1e-6)


def test_lidar_model_and_grids(clip, written):
    truth = written[1]
    p = truth["lidar"]
    assert sorted(clip.lidars) == sorted(LIDAR_MOUNTS)
    for name, lid in clip.lidars.items():
        assert torch.equal(lid.row_elevations, torch.from_numpy(p.row_elevations_rad.astype(np.float64)))
        assert torch.equal(lid.column_azimuths, torch.from_numpy(p.column_azimuths_rad.astype(np.float64)))
        assert torch.equal(lid.row_azimuth_offsets, torch.from_numpy(p.row_azimuth_offsets_rad.astype(np.float64)))
        torch.testing.assert_close(lid.column_times, torch.arange(COLS, dtype=torch.float64) / (COLS - 1))
        assert lid.spinning_frequency_hz == 10.0 and lid.spinning_direction == "cw"
        assert torch.equal(lid.timestamps_us, torch.tensor(SWEEPS, dtype=torch.int64))
        for s, (t0, t1) in enumerate(SWEEPS):
            for V, t in ((lid.viewmats[s], t0), (lid.viewmats_end[s], t1)):
                want = np.linalg.inv(T_rig_world(t) @ LIDAR_MOUNTS[name])
                torch.testing.assert_close(V, torch.from_numpy(want), rtol=0, atol=1e-5)
            sw = truth["sweeps"][name][s]
            hit = np.isfinite(sw["dist"]).reshape(ROWS, COLS)
            assert 0.3 < hit.mean() < 1.0  # the sky rows miss
            assert torch.equal(lid.valid[s], torch.from_numpy(hit))
            want = np.where(hit, sw["dist"].reshape(ROWS, COLS).astype(np.float64), 0.0)
            assert torch.equal(lid.ranges[s], torch.from_numpy(want))
            if name == "lidar_plain":
                w = sw["what"].reshape(ROWS, COLS)
                torch.testing.assert_close(lid.intensity[s][hit], torch.from_numpy(
                    (0.25 + 0.2 * w[hit]).astype(np.float32).astype(np.float64)))
        # every valid return as a world point, each from the sensor's pose at its own time
        world = np.concatenate([sw["world"][sw["stored"]] for sw in truth["sweeps"][name]])
        torch.testing.assert_close(lid.points, torch.from_numpy(world), rtol=0, atol=1e-6)
        times = np.concatenate([sw["t_us"][sw["stored"]] for sw in truth["sweeps"][name]]).astype(np.int64)
        assert torch.equal(lid.point_times_us, torch.from_numpy(times))
        lid.model  # unpacks into rasterize_lidar


def test_nearest_cells_recover_elements(written):
    """Directions perturbed by under half a cell map back to their cells,
    whatever the table's order (here reversed, as a ccw table's)."""
    p = written[1]["lidar"]
    el, az, off = (torch.from_numpy(a.astype(np.float64)) for a in
                   (p.row_elevations_rad, p.column_azimuths_rad, p.row_azimuth_offsets_rad))
    g = torch.Generator().manual_seed(1)
    rows = torch.randint(0, ROWS, (5000,), generator=g)
    cols = torch.randint(0, COLS, (5000,), generator=g)
    e = el[rows] + (torch.rand(5000, generator=g, dtype=torch.float64) - 0.5) * math.radians(2.5)
    a = az[cols] + off[rows] + (torch.rand(5000, generator=g, dtype=torch.float64) - 0.5) * math.radians(3.9)
    d = torch.stack([a.cos() * e.cos(), a.sin() * e.cos(), e.sin()], -1) * 7.0
    r, c = nio.nearest_cells(d, el, az.flip(0), off)
    assert torch.equal(r, rows) and torch.equal(c, COLS - 1 - cols)


def test_tracks(clip):
    tr = clip.tracks
    assert tr.names == list(CARS) and tr.class_ids == ["automobile"] * 2
    assert torch.equal(tr.track_ranges, torch.tensor([[0, 6], [6, 6]]))
    assert torch.equal(tr.key_times, torch.tensor(OBS_US * 2, dtype=torch.int64))
    for k in range(2):
        c, yaw = car_pose(k, np.array(OBS_US))
        keys = tr.key_poses[6 * k:6 * k + 6]
        torch.testing.assert_close(keys[:, :3], torch.from_numpy(c), rtol=0, atol=1e-5)
        torch.testing.assert_close(to_rotmat(keys[:, 3:]), torch.from_numpy(_rz(yaw)), rtol=0, atol=1e-6)
        assert ((keys[1:, 3:] * keys[:-1, 3:]).sum(-1) > 0).all()  # one hemisphere along the track
    torch.testing.assert_close(tr.dims, torch.from_numpy(np.stack([CUBOID, CUBOID])), rtol=0, atol=1e-6)


def test_initial_gaussians(clip, written):
    init = clip.initial_gaussians()
    truth = written[1]["sweeps"]
    what = np.concatenate([sw["what"][sw["stored"]] for n in clip.lidars for sw in truth[n]])
    want_ids = np.where(what >= 2, what - 2, -1)
    assert torch.equal(init.track_ids, torch.from_numpy(want_ids))
    assert (init.track_ids == 0).sum() > 20 and (init.track_ids == 1).sum() > 5
    static = init.track_ids < 0
    points = torch.cat([clip.lidars[n].points for n in clip.lidars])
    assert torch.equal(init.means[static], points[static])
    for k in range(2):  # actor points in the car's frame: on the surface of its body
        on = init.track_ids == k
        c, yaw = car_pose(k, init.times_us[on].numpy())
        local = np.einsum("nji,nj->ni", _rz(yaw), points[on].numpy() - c)
        torch.testing.assert_close(init.means[on], torch.from_numpy(local), rtol=0, atol=1e-6)
        excess = (init.means[on].abs() - torch.from_numpy(CAR_BODY / 2)).amax(-1)
        assert excess.abs().max() < 1e-4
    n_actor = int((init.track_ids >= 0).sum())
    small = clip.initial_gaussians(max_points=n_actor + 100)
    assert small.means.shape[0] == n_actor + 100
    assert (small.track_ids >= 0).sum() == (init.track_ids >= 0).sum()  # every actor point kept


def test_paths_ranges_and_dtype(written):
    meta, _ = written
    folder = os.path.dirname(meta)
    a = nio.load_clip(folder, cameras=["cam_opencv"], lidars=[], load_images=False,
                      time_range_us=(T0 + 100_000, T0 + 300_000))
    assert list(a.cameras) == ["cam_opencv"] and not a.lidars and a.cameras["cam_opencv"].images is None
    assert a.cameras["cam_opencv"].viewmats.shape == (2, 4, 4)
    assert a.cameras["cam_opencv"].viewmats.dtype == torch.float32 and a.tracks.key_times.dtype == torch.int64
    assert a.sequence_id == "nurec-ops-test-clip" and a.time_range_us == (T0, T0 + DURATION_US + 1)
    stores = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".zarr.itar"))
    assert len(stores) == 2
    b = nio.load_clip(stores, cameras=["cam_fisheye"], lidars=["lidar_top"], image_scale=0.5)
    cam = b.cameras["cam_fisheye"]
    assert cam.images.shape == (5, H_IMG // 2, W_IMG // 2, 3) and (cam.width, cam.height) == (32, 24)
    with pytest.raises(KeyError, match="no cameras"):
        nio.load_clip(meta, cameras=["nope"])


def test_euler_convention_is_ncores():
    rot = torch.tensor([[0.3, -0.7, 2.1], [1.2, 0.4, -3.0], [0.0, 0.0, math.pi]], dtype=torch.float64)
    want = Rotation.from_euler("xyz", rot.numpy()).as_matrix()
    torch.testing.assert_close(nio.euler_xyz_to_rotmat(rot), torch.from_numpy(want), rtol=0, atol=1e-12)


def test_missing_ncore_says_how_to_install(monkeypatch, written):
    monkeypatch.setitem(sys.modules, "ncore.data", None)  # as if nvidia-ncore were not installed
    with pytest.raises(ImportError, match=r"pip install nurec_ops\[ncore\]"):
        nio.load_clip(written[0])


def test_import_does_not_need_ncore():
    code = "import sys, nurec_ops.io; assert 'ncore' not in sys.modules, 'imported ncore'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_train_ncore_example_learns(written, tmp_path):
    """examples/train_ncore.py on this clip: every camera model and shutter,
    the lidar and the two tracks through the fused ops; the loss falls."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
    import train_ncore

    m = train_ncore.main(["--clip", written[0], "--steps", "30", "--device", "cpu", "--max-points", "3000",
                          "--quiet", "--out", str(tmp_path)])
    losses = torch.tensor(m["losses"])
    assert losses.shape == (30, 3) and torch.isfinite(losses).all()
    assert losses[-5:, 0].mean() < 0.8 * losses[:5, 0].mean()
    assert m["psnr_final"] > m["psnr_start"] + 2
    assert m["lidar_range_error_final"] < m["lidar_range_error_start"]
    assert os.path.exists(tmp_path / "metrics.json") and os.path.exists(tmp_path / "camera_cam_ftheta.png")


@pytest.mark.parametrize("strategy", ["default", "mcmc"])
def test_train_ncore_densifies(written, tmp_path, strategy):
    """--strategy: gsplat's strategy densifies the clip's Gaussians (actors'
    keep their track ids: examples/street_densify.py) and training still
    learns; the loss plot is written."""
    pytest.importorskip("gsplat.strategy")
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
    import train_ncore

    m = train_ncore.main(["--clip", written[0], "--steps", "30", "--device", "cpu", "--max-points", "3000",
                          "--quiet", "--strategy", strategy, "--out", str(tmp_path)])
    losses = torch.tensor(m["losses"])
    assert torch.isfinite(losses).all() and m["strategy"] == strategy
    assert m["gaussians_final"] != m["gaussians"]
    assert m["psnr_final"] > m["psnr_start"] + 1
    assert os.path.exists(tmp_path / "loss.png")
