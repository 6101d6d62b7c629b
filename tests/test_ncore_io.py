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
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

ncore = pytest.importorskip("ncore")
from ncore.data import v4  # noqa: E402
import ncore.data as ncd  # noqa: E402
import ncore.sensors as ncs  # noqa: E402
from scipy.spatial.transform import Rotation  # noqa: E402  (an NCore dependency)

from conftest import gpu  # noqa: E402
from nurec_ops.io import ncore as nio  # noqa: E402
from nurec_ops.reference import camera_models as cm  # noqa: E402
from nurec_ops.reference.quat import to_rotmat  # noqa: E402

from nurec_ops.io import ncore_synth as synth  # noqa: E402
from nurec_ops.io.ncore_synth import T0, camera_mount, rz as _rz  # noqa: E402

DURATION_US = 500_000
W_IMG, H_IMG = 64, 48
ROWS, COLS = 8, 90
SWEEP_US = 100_000
READOUT_US = 30_000  # the FTheta camera's rolling shutter

# the world: x along the road, y left, z up; a building and two cars on the ground z = 0
EGO = synth.Ego(DURATION_US, speed=5.0, yaw_rate=0.1)  # a gentle curve, a constant pitch and roll
T_rig_world = EGO.T_rig_world
# car_a drives ahead of the ego (labelled in the lidar's frame), car_b comes the other way, turning slowly
# (key poses 10 Hz apart interpolate these exactly: linear motion, a yaw linear in time)
STREET = synth.Street(EGO, buildings=[((8.0, 4.0, 0.0), (12.0, 7.0, 3.0))], cars=[
    synth.LinearCar("car_a", (6.0, -3.5, 1.0), (3.0, 0.0, 0.0), label_frame="lidar_top"),
    synth.LinearCar("car_b", (25.0, 3.0, 1.0), (-4.0, 0.1, 0.0), yaw=math.pi, yaw_rate=0.05)])
CAR_BODY = STREET.car_body  # what the lidar sees: a box from z = 0.3 to 1.7
CUBOID = STREET.cuboid  # the labels are a little larger, as real ones
CARS = ("car_a", "car_b")
car_pose = STREET.car_pose

MOUNTS = {"cam_ftheta": camera_mount(0.0, 0.08, [1.6, 0.0, 1.5]),
          "cam_opencv": camera_mount(0.6, 0.10, [1.5, 0.4, 1.5]),
          "cam_fisheye": camera_mount(-1.5708, 0.15, [1.0, -0.9, 1.2]),
          "cam_ideal": camera_mount(math.pi, 0.05, [-0.8, 0.0, 1.4])}
LIDAR_MOUNTS = {"lidar_top": synth.se3(_rz(0.03), np.array([0.2, 0.0, 1.9])),
                "lidar_plain": synth.se3(_rz(-0.02), np.array([0.0, 0.3, 1.8]))}


# ------------------------------------------------------------------- sensors

def camera_parameters():
    res = np.array([W_IMG, H_IMG], dtype=np.uint64)
    f32 = lambda *v: np.array(v, dtype=np.float32)  # noqa: E731
    fw = f32(0.0, 38.0, 0.4, -1.2, 0.15, -0.01)
    P = ncd.FThetaCameraModelParameters
    return {
        "cam_ftheta": P(resolution=res, shutter_type=ncd.ShutterType.ROLLING_TOP_TO_BOTTOM,
                        principal_point=f32(31.2, 23.7), reference_poly=P.PolynomialType.ANGLE_TO_PIXELDIST,
                        pixeldist_to_angle_poly=synth.ftheta_backward(fw.astype(np.float64), 1.25),
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


def write_clip(folder):
    """The clip through nurec_ops.io.ncore_synth (NCore's v4 writer; two
    stores: sensors and lidars): lidar_top stores what a real sensor does
    (returns only, shuffled, with elements), lidar_plain every ray (no
    elements, misses as NaN). Returns (meta JSON path, truth)."""
    cams = [synth.SynthCamera(n, p, MOUNTS[n], [_frame_span(n, s) for s in CAMERA_FRAMES])
            for n, p in camera_parameters().items()]
    lids = [synth.SynthLidar(n, lidar_parameters(), LIDAR_MOUNTS[n], SWEEPS,
                             stored="returns" if n == "lidar_top" else "rays") for n in LIDAR_MOUNTS]
    meta, truth = synth.write_clip(folder, STREET, cams, lids, OBS_US, sequence_id="nurec-ops-test-clip",
                                   duration_us=DURATION_US)
    truth["lidar"] = truth["lidars"]["lidar_top"]  # both lidars share one model
    return meta, truth


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


def test_lidar_sweeps_as_ray_bundles(written):
    """lidar_rays=True: each sweep's stored rays as a ray bundle. lidar_plain
    stores every ray (misses as NaN): its directions, validity, ranges and
    firing times are the written ones; lidar_top stores only its returns,
    shuffled, so its sweeps differ in length and the shorter ones are
    padded (NaN directions). Each ray posed at its own time by SPEC 7's
    interpolation of the sweep's start and end poses and stretched to its
    range lands on the world point NCore's per-timestamp pose gives (the
    ego turns at 0.1 rad/s: within 2 mm), and ray_bundle unpacks into
    rasterize_rays, NaN exactly on the padding."""
    import nurec_ops
    from nurec_ops.reference.rasterize_rays import world_rays

    truth = written[1]
    clip = nio.load_clip(written[0], cameras=[], load_images=False, dtype=torch.float64, lidar_rays=True)
    for name, lid in clip.lidars.items():
        S, K = lid.ray_valid.shape
        assert S == len(SWEEPS) and lid.ray_directions.shape == (S, K, 3)
        lens = []
        for s, sw in enumerate(truth["sweeps"][name]):
            hit = np.isfinite(sw["dist"])
            keep = np.arange(hit.size) if name == "lidar_plain" else None
            n = hit.size if name == "lidar_plain" else int(hit.sum())
            lens.append(n)
            pad = torch.arange(K) >= n
            assert torch.isnan(lid.ray_directions[s][pad]).all() and not lid.ray_valid[s][pad].any()
            d = lid.ray_directions[s][~pad]
            torch.testing.assert_close(d.norm(dim=-1), torch.ones(n, dtype=torch.float64))
            if keep is not None:
                want = torch.from_numpy(sw["direction"].astype(np.float64))
                torch.testing.assert_close(d, want / want.norm(dim=-1, keepdim=True))
                assert torch.equal(lid.ray_valid[s][:n], torch.from_numpy(hit))
                r = torch.from_numpy(sw["dist"].astype(np.float64))
                assert torch.equal(lid.ray_ranges[s][:n][hit], r[hit]) and torch.isnan(lid.ray_ranges[s][:n][~hit]).all()
                cols = torch.from_numpy(sw["cols"].astype(np.float64))
                torch.testing.assert_close(lid.ray_times[s][:n], cols / (COLS - 1), rtol=0, atol=1e-5)
            else:
                assert lid.ray_valid[s][:n].all()
        assert K == max(lens)
        ok = lid.ray_valid
        o_w, d_w, usable = world_rays(lid.viewmats, torch.zeros_like(lid.ray_directions), lid.ray_directions,
                                      lid.ray_times, lid.viewmats_end)
        assert torch.equal(usable, ~torch.isnan(lid.ray_directions[..., 0]))
        pts = (o_w + d_w * lid.ray_ranges[..., None])[ok]  # sweep by sweep, in stored order: as lid.points
        torch.testing.assert_close(pts, lid.points, rtol=0, atol=2e-3)
        g = torch.Generator().manual_seed(0)
        N = 64
        means = lid.points[torch.randint(0, lid.points.shape[0], (N,), generator=g)]
        out = nurec_ops.rasterize_rays(means, torch.randn(N, 4, generator=g, dtype=torch.float64),
                                       torch.full((N, 3), 0.3, dtype=torch.float64),
                                       torch.full((N,), 0.9, dtype=torch.float64), torch.rand(N, 2, generator=g,
                                                                                              dtype=torch.float64),
                                       **lid.ray_bundle(torch.tensor([0, 2])))
        nan = torch.isnan(out.alpha[..., 0])
        assert torch.equal(nan, ~usable[[0, 2]]) and out.alpha[~nan].max() > 0.5


def test_lidar_without_a_model_loads_as_ray_bundles(tmp_path):
    """A lidar with no spinning model (no intrinsics stored: known only by
    its rays, as a solid-state one) has no grids; by default
    (lidar_rays="auto") its sweeps come as ray bundles and points, while a
    row-offset lidar beside it keeps its grids and no bundles."""
    lids = [synth.SynthLidar("lidar_top", lidar_parameters(), LIDAR_MOUNTS["lidar_top"], SWEEPS[:2],
                             stored="returns", write_model=False),
            synth.SynthLidar("lidar_plain", lidar_parameters(), LIDAR_MOUNTS["lidar_plain"], SWEEPS[:2],
                             stored="rays", group="lidars2")]
    meta, truth = synth.write_clip(str(tmp_path), STREET, [], lids, OBS_US, sequence_id="nurec-ops-free-lidar",
                                   duration_us=DURATION_US)
    clip = nio.load_clip(meta, dtype=torch.float64)
    free, plain = clip.lidars["lidar_top"], clip.lidars["lidar_plain"]  # car_a is labelled in lidar_top's frame
    assert free.row_elevations is None and free.ranges is None
    assert free.ray_directions.shape[0] == 2 and free.ray_valid.any(-1).all()
    n = [int(np.isfinite(sw["dist"]).sum()) for sw in truth["sweeps"]["lidar_top"]]
    assert free.points.shape[0] == sum(n) and free.ray_directions.shape[1] == max(n)
    assert plain.ranges is not None and plain.ray_directions is None
    with pytest.raises(ValueError, match="lidar_rays=True"):
        plain.ray_bundle(0)
    with pytest.raises(ValueError, match="lidar_rays"):
        nio.load_clip(meta, lidar_rays="yes")


@pytest.mark.parametrize("duplicates", [False, True])
def test_grid_keeps_each_cells_nearest_return(duplicates):
    """_grid: with a ray per cell (the fast path, no sort) and with several
    rays in some cells (the sort), each cell holds its nearest ray's range
    and intensity; cells without a ray are invalid and zero."""
    g = np.random.default_rng(1)
    R, W = 6, 9
    cells = g.permutation(R * W)[:30]
    if duplicates:
        cells = np.concatenate([cells, cells[:12]])
    dist, inten = g.random(cells.size) + 1.0, g.random(cells.size)
    ranges, valid, intensity = nio._grid(cells // W, cells % W, dist, inten, R, W)
    want_r, want_i = np.zeros(R * W), np.zeros(R * W)
    for c in np.unique(cells):
        k = np.flatnonzero(cells == c)[np.argmin(dist[cells == c])]
        want_r[c], want_i[c] = dist[k], inten[k]
    assert (valid.ravel() == np.isin(np.arange(R * W), cells)).all()
    assert (ranges.ravel() == want_r).all() and (intensity.ravel() == want_i).all()


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


def test_cuboids_read_as_ncore_decodes_them(written, monkeypatch):
    """The cuboid observations read from the store's dicts equal NCore's
    own decoding field by field; a reader of another layout falls back to
    NCore's API and gives the same tracks."""
    loader = nio._open(written[0])
    fast = nio._cuboid_observations(loader)
    api = list(loader.get_cuboid_track_observations())
    assert len(fast) == len(api) == 12 and all(isinstance(o, nio._Obs) for o in fast)
    for a, b in zip(api, fast):
        assert tuple(getattr(a, f) for f in nio._OBS_FIELDS) == b[:5]
        assert (tuple(a.bbox3.centroid), tuple(a.bbox3.dim), tuple(a.bbox3.rot)) == tuple(b.bbox3)
    tracks = nio._load_tracks(loader, "world", "cpu", torch.float64)
    monkeypatch.setattr(loader, "_cuboids_reader", None, raising=False)  # no such reader: NCore's API (empty)
    assert nio._cuboid_observations(loader) == []
    monkeypatch.undo()
    loader = nio._open(written[0])
    monkeypatch.setattr(nio, "_as_obs", lambda d: (_ for _ in ()).throw(KeyError("bbox3")))  # another layout
    slow = nio._cuboid_observations(loader)
    assert not isinstance(slow[0], nio._Obs) and len(slow) == 12
    again = nio._load_tracks(loader, "world", "cpu", torch.float64)
    for k in ("key_poses", "key_times", "track_ranges", "dims"):
        assert torch.equal(getattr(tracks, k), getattr(again, k)), k


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
    # the time to the first step, by part, as saved; every step's frames came through the read-ahead
    import json

    tt = m["time_to_first_step_s"]
    assert json.load(open(tmp_path / "metrics.json"))["time_to_first_step_s"] == tt
    parts = ("imports", "cuda_init", "optimizer_import", "metadata", "initial_gaussians", "first_frames", "first_step")
    assert sorted(tt) == sorted(parts + ("total",)) and all(tt[k] >= 0 for k in parts)
    assert tt["metadata"] > 0 and tt["initial_gaussians"] > 0 and tt["first_step"] > 0 and m["eval_start_s"] > 0
    assert tt["total"] == pytest.approx(sum(tt[k] for k in parts))
    assert m["step_ms_median"] > 0 and m["step_ms_source"] == "host"
    assert m["frames_decoded"] == len({(c, f) for c in range(4) for f in range(5)}) + 5  # each frame once (cached)


@pytest.mark.parametrize("which", ["rays_of_a_spinning_lidar", "lidar_without_a_model"])
def test_train_ncore_trains_a_lidar_by_its_rays(written, tmp_path, which):
    """examples/train_ncore.py trains a lidar as its stored rays through
    rasterize_rays (each ray from the pose at its own time, the read-ahead's
    bundles padded to clip.frames.ray_count): forced with --lidar-rays on a
    row-offset lidar that stores only its returns, and by default on a
    lidar without a model; the loss falls and the range error shrinks."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
    import train_ncore

    if which == "lidar_without_a_model":
        cams = [synth.SynthCamera("cam_ideal", camera_parameters()["cam_ideal"], MOUNTS["cam_ideal"],
                                  [(s, s) for s in CAMERA_FRAMES[:3]])]
        lids = [synth.SynthLidar("lidar_top", lidar_parameters(), LIDAR_MOUNTS["lidar_top"], SWEEPS[:3],
                                 stored="returns", write_model=False)]
        clip, _ = synth.write_clip(str(tmp_path / "clip"), STREET, cams, lids, OBS_US,
                                   sequence_id="nurec-ops-free-lidar", duration_us=DURATION_US)
        extra = []
    else:
        clip, extra = written[0], ["--lidar", "lidar_top", "--lidar-rays"]
    m = train_ncore.main(["--clip", clip, "--steps", "30", "--device", "cpu", "--max-points", "3000", "--quiet",
                          "--out", str(tmp_path / "out")] + extra)
    assert m["lidar_rays"] and m["lidar"][0] > 0
    losses = torch.tensor(m["losses"])
    assert torch.isfinite(losses).all() and (losses[:, 2] > 0).all()
    assert losses[-5:, 0].mean() < 0.8 * losses[:5, 0].mean()
    assert m["lidar_range_error_final"] < m["lidar_range_error_start"]


@gpu
@pytest.mark.parametrize("lidar", ["grid", "rays"])
def test_train_ncore_steps_do_not_sync(written, lidar):
    """On CUDA every step after the first runs under
    set_sync_debug_mode('error') (the read-ahead's uploads included): a host
    sync in a step raises; the same with the lidar trained on its rays
    (rasterize_rays: its grid and capacity set by the first step)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
    import train_ncore

    extra = ["--lidar", "lidar_top", "--lidar-rays"] if lidar == "rays" else []
    m = train_ncore.main(["--clip", written[0], "--device", "cuda", "--max-points", "3000", "--quiet",
                          "--time-only", "12", "--check-syncs"] + extra)
    assert m["sync_checked_steps"] == 11 and m["step_ms_source"] == "cuda_events"
    assert torch.isfinite(torch.tensor(m["losses"])).all()
    assert torch.cuda.get_sync_debug_mode() == 0


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


@pytest.mark.parametrize("cache_bytes", [1 << 30, 1])
def test_read_ahead_equals_load_clip(clip, written, cache_bytes):
    """open_clip reads the metadata only (points of the sweeps it names);
    the read-ahead's frames, in a schedule with repeats, equal load_clip's
    (a cache of one frame re-decodes what it evicted, to the same values)."""
    from nurec_ops.io import open_clip

    lazy = open_clip(written[0], dtype=torch.float64, point_sweeps=2)
    for name, cam in lazy.cameras.items():
        assert cam.images is None and torch.equal(cam.viewmats_end, clip.cameras[name].viewmats_end)
    for name, lid in lazy.lidars.items():
        full = clip.lidars[name]
        assert lid.ranges is None and torch.equal(lid.viewmats, full.viewmats)
        assert torch.unique(lid.point_sweeps).tolist() == [0, 4]
        keep = (full.point_sweeps == 0) | (full.point_sweeps == 4)
        assert torch.equal(lid.points, full.points[keep]) and torch.equal(lid.point_times_us, full.point_times_us[keep])
    g = torch.Generator().manual_seed(3)
    names = sorted(clip.cameras)
    reqs = [(("camera", names[int(torch.randint(4, (1,), generator=g))], int(torch.randint(5, (1,), generator=g))),
             ("lidar", "lidar_top" if k % 2 else "lidar_plain", int(torch.randint(5, (1,), generator=g))))
            for k in range(24)]
    unique = len({key for r in reqs for key in r})
    with lazy.frames.read_ahead(reqs, "cpu", dtype=torch.float64, depth=3, workers=2, cache_bytes=cache_bytes) as ra:
        for k, ((_, cam, f), (_, lid, s)) in enumerate(reqs):
            image, (ranges, valid, intensity) = ra.get(k)
            assert torch.equal(image, clip.cameras[cam].images[f])
            full = clip.lidars[lid]
            assert torch.equal(ranges, full.ranges[s]) and torch.equal(valid, full.valid[s])
            assert torch.equal(intensity, full.intensity[s])
        assert len(ra.waits) == len(reqs) and ra.wait_s >= 0
        assert ra.decoded == unique if cache_bytes > 1 else ra.decoded > unique
        with pytest.raises(IndexError, match="in order"):
            ra.get(0)
    assert torch.equal(lazy.frames.image("cam_opencv", 2).double() / 255, clip.cameras["cam_opencv"].images[2])


def test_read_ahead_lidar_rays_equal_load_clip(written):
    """The read-ahead's ("lidar_rays", name, s, K) frames are load_clip's
    ray bundle rows, padded to the fixed K asked for (NaN directions past
    the sweep's own rays); a K below a sweep's ray count raises instead of
    cutting the sweep."""
    from nurec_ops.io import open_clip

    full = nio.load_clip(written[0], cameras=[], load_images=False, dtype=torch.float64, lidar_rays=True)
    lazy = open_clip(written[0], cameras=[], dtype=torch.float64, point_sweeps=0)
    K = ROWS * COLS + 5
    reqs = [(("lidar_rays", name, s, K),) for s in (3, 0, 3) for name in ("lidar_top", "lidar_plain")]
    with lazy.frames.read_ahead(reqs, "cpu", dtype=torch.float64, depth=2, workers=2) as ra:
        for k, ((_, name, s, _),) in enumerate(reqs):
            (d, t, r, v, i), = ra.get(k)
            lid = full.lidars[name]
            n = lid.ray_directions.shape[1]
            assert d.shape == (K, 3) and torch.isnan(d[n:]).all() and not v[n:].any()
            for a, b in ((d, lid.ray_directions), (t, lid.ray_times), (r, lid.ray_ranges), (v, lid.ray_valid),
                         (i, lid.ray_intensity)):
                assert torch.equal(a[:n].nan_to_num(7.0), b[s].nan_to_num(7.0)), name
    with pytest.raises(ValueError, match="more than K"):
        lazy.frames.lidar_rays("lidar_plain", 0, K=10)


def test_read_ahead_waits_for_start(written):
    """read_ahead(start=False) decodes nothing until start() (train_ncore
    builds its Gaussians meanwhile); start() again queues nothing twice."""
    import time

    from nurec_ops.io import open_clip

    lazy = open_clip(written[0], dtype=torch.float64, point_sweeps=0)
    name = sorted(lazy.cameras)[0]
    reqs = [(("camera", name, f),) for f in range(3)]
    with lazy.frames.read_ahead(reqs, "cpu", depth=3, workers=2, start=False) as ra:
        time.sleep(0.2)
        assert ra.decoded == 0
        ra.start()
        ra.start()
        frames = [ra.get(k)[0] for k in range(3)]
        assert ra.decoded == 3
    with lazy.frames.read_ahead(reqs, "cpu", depth=3, workers=2) as ra:
        assert all(torch.equal(ra.get(k)[0], frames[k]) for k in range(3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_neighbour_scales_kdtree_equals_brute_force(dtype):
    """train_ncore.neighbour_scales by scipy's KD-tree and by brute force:
    the same exact k-nearest distances per track (a duplicate point, a
    track of one Gaussian and one of two included)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
    import train_ncore

    g = torch.Generator().manual_seed(5)
    means = torch.randn(3000, 3, generator=g, dtype=dtype) * 3
    means[7] = means[8]
    ids = torch.randint(-1, 4, (3000,), generator=g)
    ids[100], ids[200:202] = 9, 10
    a = train_ncore.neighbour_scales(means, ids, kdtree=True)
    b = train_ncore.neighbour_scales(means, ids, kdtree=False)
    assert a.dtype == dtype and torch.isfinite(a).all()
    # float32: torch.cdist's |a|^2 + |b|^2 - 2 a.b carries ~1e-5 of relative error (seen 2.4e-5 in the log)
    torch.testing.assert_close(a, b, rtol=0, atol=1e-4 if dtype == torch.float32 else 1e-12)
    assert a[100] == 0.0 and a.unique().numel() > 1000  # a track of one: scale 1 (log 0)
