#!/usr/bin/env python3
"""Writes a realistic NCore v4 clip with NCore's own writer (nurec_ops.io.ncore_synth):
a five-camera rig and a spinning lidar driving a street for --seconds.

    python3 benchmarks/make_ncore_clip.py --out /tmp/clip30 --seconds 30 --cameras 5 --image-scale 0.25

The rig is the five OpenCV-pinhole cameras of tests' synthetic AV rig
(gsplat's test_pinhole_camera_params.json: front-left, front, front-right at
1920x1280, side-left and side-right at 1920x886; rolling shutter top to
bottom, 15 ms readout) at --camera-hz (30 as the rig; 10 keeps writing
practical), stored as JPEG at --image-scale of their resolution (the
calibrations scaled alike); their images are ray-cast every --render-step
pixels (each cast pixel fills its block: decoding costs what a real image
of that size does, writing stays cheap). One row-offset spinning lidar at
10 Hz (--lidar-rows x --lidar-cols, 128 x 3600 by default; per-ray times,
returns only with their model elements, as a real sensor stores them). The
ego drives an 8 m/s arc between rows of buildings; five cars (a lead and a
following car in the ego's lane, two oncoming, one parked) are cuboid
tracks labelled at 10 Hz. Frames render in --workers forked processes.
"""
import argparse
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from nurec_ops.io import ncore_synth as synth  # noqa: E402

# the synthetic AV rig (gsplat's test_pinhole_camera_params.json): name, resolution, T_sensor_rig rows 0-2,
# principal point, focal length, radial (k1, k2), tangential
_FRONT = ((960.0, 640.0), (2050.0, 2050.0), (0.04, -0.3), (0.001, 0.001))
_SIDE = ((960.0, 443.0), (2060.0, 2060.0), (0.045, -0.32), (0.0005, -0.0005))
RIG = [
    ("camera_front_left", (1920, 1280), [[0.70710678, 0.0, 0.70710678, 1.49], [-0.70710678, 0.0, 0.70710678, 0.09],
                                         [0.0, -1.0, 0.0, 2.12]], _FRONT),
    ("camera_front", (1920, 1280), [[0.0, 0.0, 1.0, 1.54], [-1.0, 0.0, 0.0, 0.0], [0.0, -1.0, 0.0, 2.12]], _FRONT),
    ("camera_front_right", (1920, 1280), [[-0.70710678, 0.0, 0.70710678, 1.49],
                                          [-0.70710678, 0.0, -0.70710678, -0.09], [0.0, -1.0, 0.0, 2.12]], _FRONT),
    ("camera_side_left", (1920, 886), [[1.0, 0.0, 0.0, 1.43], [0.0, 0.0, 1.0, 0.11], [0.0, -1.0, 0.0, 2.12]], _SIDE),
    ("camera_side_right", (1920, 886), [[-1.0, 0.0, 0.0, 1.43], [0.0, 0.0, -1.0, -0.11], [0.0, -1.0, 0.0, 2.12]],
     _SIDE),
]
READOUT_US = 15_000
SWEEP_US = 100_000  # 10 Hz
SPEED, YAW_RATE = 8.0, 0.02


def rig_cameras(n, duration_us, camera_hz, image_scale, render_step=None, t0=synth.T0):
    import ncore.data as ncd

    cams = []
    period = int(round(1e6 / camera_hz))
    for c, (name, (W, H), T, (pp, fl, radial, tangential)) in enumerate(RIG[:n]):
        w, h = max(8, round(W * image_scale)), max(8, round(H * image_scale))
        f32 = lambda *v: np.array(v, dtype=np.float32)  # noqa: E731
        params = ncd.OpenCVPinholeCameraModelParameters(
            resolution=np.array([w, h], dtype=np.uint64), shutter_type=ncd.ShutterType.ROLLING_TOP_TO_BOTTOM,
            principal_point=f32(pp[0] * w / W, pp[1] * h / H), focal_length=f32(fl[0] * w / W, fl[1] * h / H),
            radial_coeffs=f32(*radial, 0, 0, 0, 0), tangential_coeffs=f32(*tangential), thin_prism_coeffs=f32(0, 0, 0, 0))
        starts = t0 + 1000 * c + np.arange(0, duration_us - READOUT_US - 1000 * c + 1, period)
        spans = [(int(s), int(s) + READOUT_US) for s in starts]
        mount = np.vstack([np.array(T), [0.0, 0.0, 0.0, 1.0]])
        step = render_step or max(1, round(w / 240))
        cams.append(synth.SynthCamera(name, params, mount, spans, image_format="jpeg", render_step=step))
    return cams


def rig_lidar(duration_us, rows, cols, t0=synth.T0):
    import ncore.data as ncd

    f32 = lambda v: np.asarray(v, dtype=np.float32)  # noqa: E731
    params = ncd.RowOffsetStructuredSpinningLidarModelParameters(
        spinning_frequency_hz=1e6 / SWEEP_US, spinning_direction="cw", n_rows=rows, n_columns=cols,
        row_elevations_rad=f32(np.radians(np.linspace(15.0, -25.0, rows))),
        column_azimuths_rad=f32(math.pi - (np.arange(cols) + 0.5) * 2 * math.pi / cols),
        row_azimuth_offsets_rad=f32(np.radians(((np.arange(rows) % 4) - 1.5) * 0.2)))
    sweeps = [(t0 + s, t0 + s + SWEEP_US) for s in range(0, duration_us - SWEEP_US + 1, SWEEP_US)]
    return synth.SynthLidar("lidar_top", params, synth.se3(np.eye(3), np.array([1.2, 0.0, 2.4])), sweeps)


def street(ego, seconds, seed=0):
    """Rows of buildings along the ego's road (12 m either side of its
    path) and five cars on it."""
    rng = np.random.default_rng(seed)
    length = SPEED * seconds
    buildings = []
    for side in (-1, 1):
        for a in np.arange(-40.0, length + 100.0, 14.0):
            half = rng.uniform([4.0, 3.0, 4.0], [6.0, 5.0, 14.0])
            c = ego.road(a, side * (12.0 + half[1]))
            buildings.append((c - [half[0], half[0], 0.0], c + [half[0], half[0], 2 * half[2]]))
    cars = [synth.RoadCar("car_lead", ego, 0.0, 14.0, 0.9 * SPEED, label_frame="lidar_top"),
            synth.RoadCar("car_follow", ego, 0.0, -12.0, SPEED),
            synth.RoadCar("car_oncoming_a", ego, 3.5, 120.0, -9.0),
            synth.RoadCar("car_oncoming_b", ego, 3.5, 0.6 * length + 60.0, -7.0),
            synth.RoadCar("car_parked", ego, -4.2, 0.5 * length, 0.0)]
    return synth.Street(ego, buildings, cars)


def make_clip(out, seconds=30.0, cameras=5, image_scale=0.25, camera_hz=10.0, lidar_rows=128, lidar_cols=3600,
              render_step=None, workers=None, quiet=False):
    """Writes the clip into ``out``; returns (meta JSON path, seconds taken)."""
    t = time.perf_counter()
    os.makedirs(out, exist_ok=True)
    duration_us = int(round(seconds * 1e6))
    ego = synth.Ego(duration_us, speed=SPEED, yaw_rate=YAW_RATE)
    cams = rig_cameras(cameras, duration_us, camera_hz, image_scale, render_step)
    lid = rig_lidar(duration_us, lidar_rows, lidar_cols)
    obs = list(range(synth.T0, synth.T0 + duration_us + 1, 100_000))
    meta, _ = synth.write_clip(out, street(ego, seconds), cams, [lid], obs, sequence_id=f"nurec-ops-rig-{seconds:g}s",
                               keep_truth=False, workers=workers or os.cpu_count() or 1,
                               progress=None if quiet else (lambda line: print(line, flush=True)))
    dt = time.perf_counter() - t
    if not quiet:
        size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
        print(f"make_ncore_clip: {meta}: {seconds:g} s, {len(cams)} cameras "
              + ", ".join(f"{int(c.params.resolution[0])}x{int(c.params.resolution[1])}" for c in cams)
              + f" at {camera_hz:g} Hz ({sum(len(c.spans) for c in cams)} JPEG frames), lidar {lidar_rows}x{lidar_cols}"
              f" at 10 Hz ({len(lid.sweeps)} sweeps), 5 cars; {size / 2 ** 20:.0f} MiB written in {dt:.1f} s",
              flush=True)
    return meta, dt


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="folder for the stores and clip.json")
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--cameras", type=int, default=5, choices=range(1, 6))
    p.add_argument("--image-scale", type=float, default=0.25, help="stored images' scale of the rig's 1920x1280/886")
    p.add_argument("--camera-hz", type=float, default=10.0, help="camera frame rate (the rig's: 30)")
    p.add_argument("--lidar-rows", type=int, default=128)
    p.add_argument("--lidar-cols", type=int, default=3600)
    p.add_argument("--render-step", type=int, default=None, help="ray-cast every this many pixels (default ~240 wide)")
    p.add_argument("--workers", type=int, default=None, help="render processes (default: every core)")
    a = p.parse_args(argv)
    return make_clip(a.out, a.seconds, a.cameras, a.image_scale, a.camera_hz, a.lidar_rows, a.lidar_cols,
                     a.render_step, a.workers)[0]


if __name__ == "__main__":
    main()
