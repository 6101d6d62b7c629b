#!/usr/bin/env python3
"""The time to the first training step and the steady step on a five-camera
+ lidar NCore clip: examples/train_ncore.py --time-only in a fresh process
(its imports counted), its metrics.json read back and tabled.

    python3 benchmarks/bench_ncore_step.py --clip /tmp/clip30/clip.json --steps 300   # GPU
    python3 benchmarks/bench_ncore_step.py --smoke                                    # CPU, a tiny clip it writes

Without --clip a clip is written first (benchmarks/make_ncore_clip.py; --seconds,
--clip-scale, --camera-hz, --lidar-rows, --lidar-cols; --smoke: 0.6 s,
5 cameras at 96x64/96x44, a 16 x 180 lidar). The time to the first step is
split as train_ncore reports it: imports, CUDA context, the optimizer's
import (torch._dynamo, which torch.optim loads), metadata (open_clip:
calibrations, poses, tracks; the schedule; the read-ahead started), initial
Gaussians (the points of --point-sweeps sweeps, neighbour scales, the
optimizer), the first step's frames (what the loop waited for them) and the
first step (CUDA warm-up in it); then the steady step's median (CUDA events
on a GPU) and the time the loop waited for frames after the first.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PARTS = ("imports", "cuda_init", "optimizer_import", "metadata", "initial_gaussians", "first_frames", "first_step")


def run(clip, steps, device=None, image_scale=1.0, max_points=50_000, point_sweeps=8, read_ahead=8, extra=()):
    """train_ncore.py --time-only in a subprocess; its metrics."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, os.path.join(ROOT, "examples", "train_ncore.py"), "--clip", clip, "--time-only",
               str(steps), "--quiet", "--out", out, "--image-scale", str(image_scale), "--max-points", str(max_points),
               "--point-sweeps", str(point_sweeps), "--read-ahead", str(read_ahead), *extra]
        if device:
            cmd += ["--device", device]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
        subprocess.run(cmd, check=True, env=env)
        with open(os.path.join(out, "metrics.json")) as f:
            return json.load(f)


def table(m, clip_s=None):
    tt = m["time_to_first_step_s"]
    rows = [("clip", ", ".join(f"{n} {w}x{h} ({f} frames)" for n, (w, h, f) in m["cameras"].items())
             + (f"; lidar {m['lidar'][0]}x{m['lidar'][1]} ({m['lidar'][2]} sweeps)" if m["lidar"] else ""))]
    if clip_s is not None:
        rows.append(("clip written in", f"{clip_s:.1f} s"))
    rows += [("device", m["device"]), ("Gaussians", str(m["gaussians"]))]
    rows += [(f"  {k}", f"{tt[k]:.3f} s") for k in PARTS]
    sub = m.get("initial_gaussians_s") or {}
    if sub:
        at = [a for a, _ in rows].index("  initial_gaussians") + 1
        rows[at:at] = [(f"    {k}", f"{v:.3f} s") for k, v in sub.items()]
    rows += [("time to first step (total)", f"{tt['total']:.3f} s"),
             ("  without imports (the optimizer's too) and CUDA context",
              f"{tt['total'] - tt['imports'] - tt['cuda_init'] - tt['optimizer_import']:.3f} s"),
             (f"steady step, median of {m['steps'] - 1} ({m['step_ms_source']})", f"{m['step_ms_median']:.2f} ms"),
             ("steady step, mean wall", f"{m['step_ms']:.2f} ms"),
             ("waited for frames after the first step", f"{m['read_wait_s']:.3f} s"),
             ("frames decoded", str(m["frames_decoded"]))]
    w = max(len(a) for a, _ in rows)
    return "\n".join(f"| {a:<{w}} | {b} |" for a, b in rows)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clip", default=None, help="an NCore clip (default: write one)")
    p.add_argument("--smoke", action="store_true", help="a tiny clip and a few steps (CPU)")
    p.add_argument("--steps", type=int, default=None, help="steps to time (default 200; --smoke 6)")
    p.add_argument("--device", default=None)
    p.add_argument("--image-scale", type=float, default=1.0, help="train_ncore's --image-scale")
    p.add_argument("--max-points", type=int, default=50_000)
    p.add_argument("--point-sweeps", type=int, default=8)
    p.add_argument("--read-ahead", type=int, default=8)
    p.add_argument("--workdir", default=None, help="where a written clip goes (default: a temporary folder)")
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--clip-scale", type=float, default=0.25, help="the written clip's image scale")
    p.add_argument("--camera-hz", type=float, default=10.0)
    p.add_argument("--lidar-rows", type=int, default=128)
    p.add_argument("--lidar-cols", type=int, default=3600)
    p.add_argument("--json", default=None, help="write the metrics (and the clip's writing time) here")
    a = p.parse_args(argv)
    steps = a.steps or (6 if a.smoke else 200)
    clip, clip_s, tmp = a.clip, None, None
    if clip is None:
        sys.path.insert(0, HERE)
        import make_ncore_clip

        if a.workdir is None:
            tmp = tempfile.TemporaryDirectory()
        where = os.path.join(a.workdir or tmp.name, "smoke_clip" if a.smoke else "clip")
        kw = dict(seconds=0.6, cameras=5, image_scale=0.05, camera_hz=10.0, lidar_rows=16, lidar_cols=180,
                  workers=1) if a.smoke else dict(seconds=a.seconds, cameras=5, image_scale=a.clip_scale,
                                                  camera_hz=a.camera_hz, lidar_rows=a.lidar_rows,
                                                  lidar_cols=a.lidar_cols)
        t = time.perf_counter()
        clip, _ = make_ncore_clip.make_clip(where, **kw)
        clip_s = time.perf_counter() - t
    try:
        m = run(clip, steps, a.device or ("cpu" if a.smoke else None), a.image_scale,
                1000 if a.smoke else a.max_points, a.point_sweeps, a.read_ahead)
    finally:
        if tmp is not None:
            tmp.cleanup()
    m["clip_written_s"] = clip_s
    m.pop("losses", None)
    print(table(m, clip_s), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(m, f, indent=1)
    return m


if __name__ == "__main__":
    main()
