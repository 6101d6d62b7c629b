#!/usr/bin/env python3
"""Each hot camera and lidar kernel as a multiple of its floor.

The floor of a kernel is the time the chip needs for the work no
implementation can skip: max(its minimum bytes / memory bandwidth, its
floating-point operations / FP32 peak, its exponentials / the SFU rate). The
counts come from the scene itself, through the CPU op (the same binning and
stop rule as CUDA): intersections I (tile entries), visible items, and the
pixel-Gaussian evaluations E (the entries each pixel walks until its
transmittance cut-off, summed; the backward walks the same ones).

Per kernel (C cameras, N Gaussians, P pixels, D channels; float32):
- projection: read each Gaussian (11 values), write each item's record (8),
  count (int64); ~150 flops per item (rotation, covariance, its inverse,
  the footprint).
- binning: emit I keys (8 B) and values (4 B); one sort pass reads and
  writes both; the ranges read the keys once: 44 B per entry.
- forward walk: each tile reads its entries (id 4 B, record 32 B, D
  colours); writes the image, depth, alpha, final T and last entry per
  pixel; per evaluation ~15 + 2D flops and one exponential.
- backward walk: the forward's reads again plus each pixel's output
  gradients; writes one gradient record per item (32 B); per evaluation
  ~40 + 5D flops and one exponential.
- projection backward: reads each item's gradient record and the Gaussian,
  writes its gradients; ~400 flops per item.

The lidar (`--scenes lidar`: the street's 128 x 3600 sweep) counts the same
way through its CPU op (E: the ray-Gaussian evaluations). Its projection
also writes each item's tile box (24 B), ~250 flops per item; its walks
add the azimuth wrap (~4 flops) to each evaluation; each ray writes D + 4
values; the forward walk's row also holds the second walk of the parts and
the combine (tiles/splat_combine_cuda.cuh), whose work the floor does not
add (one walk over the whole list is the floor).

    python3 benchmarks/kernel_floors.py --scenes street          # CPU: counts and floors
    python3 benchmarks/kernel_floors.py --scenes lidar --lidar-cols 900   # the lidar, a quarter of its columns
    python3 benchmarks/kernel_floors.py --cuda                   # H200: also each kernel's duration
    python3 benchmarks/kernel_floors.py --scenes rig --cuda      # the rig step's 5 cameras (2 calls), 2M Gaussians

Peaks: --bandwidth GB/s (default: measured by a device copy with --cuda,
else the H200's measured 3,737 GB/s), --tflops (FP32 non-tensor; 67 for the
H200 SXM), --sfu (exponentials per second: 132 SMs x 16 per clock x 1.98 GHz).
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import bench_rasterize_camera as bc  # noqa: E402
import bench_rasterize_lidar as bl  # noqa: E402
import nurec_ops  # noqa: E402
from timing import copy_bandwidth_gbs, kernel_totals, table  # noqa: E402

OPS = torch.ops.nurec_ops
# kernel name fragments of each stage (as bench_rasterize_camera's STAGES, one row each)
KERNELS = [("projection", ("rc_project_kernel",)),
           ("binning", ("emit_kernel", "ranges_kernel", "depth_bits", "rank_scatter", "image_keys", "cub", "Radix",
                        "Scan", "Onesweep", "onesweep", "radix", "scan")),
           ("forward walk", ("rc_forward_kernel", "rc_forward_fixup", "rc_combine")),
           ("backward walk", ("rc_backward_kernel",)),
           ("projection backward", ("rc_project_backward_kernel",))]
KERNELS_LIDAR = [("projection", ("rl_project_kernel",)), KERNELS[1],
                 ("forward walk", ("rl_forward_kernel", "rl_forward_fixup", "rl_combine")),
                 ("backward walk", ("rl_backward_kernel",)),
                 ("projection backward", ("rl_project_backward_kernel",))]


def _on_cpu(sc):
    return {k: (v.detach().cpu().float() if isinstance(v, torch.Tensor) else v) for k, v in sc.items()}


def _tally(item_counts, status, last):
    return dict(I=int(status[0]), visible=int((item_counts > 0).sum()), E=int(last.clamp_min(0).long().sum()))


def counts(sc):
    """Intersections, visible items, pixel-Gaussian evaluations: the CPU op."""
    c = _on_cpu(sc)
    with torch.no_grad():
        out = OPS.rasterize_camera_fwd(c["means"], c["quats"], c["scales"], c["opacities"], c["features"],
                                       c["viewmats"], c["Ks"], None, c["width"], c["height"], 0.01, 1e10, -1, 0, 1,
                                       0)
    return _tally(out[4], out[10], out[9])


def counts_lidar(sc):
    """The same counts for a lidar scene (rays for pixels), by its CPU op."""
    from nurec_ops._lidar_table import sensor_op_args
    from nurec_ops.rasterize_lidar import default_eps2d

    c = _on_cpu(sc)
    m = [t.detach().cpu().float() for t in sc["model"]]
    with torch.no_grad():
        out = OPS.rasterize_lidar_fwd(c["means"], c["quats"], c["scales"], c["opacities"], c["features"],
                                      c["viewmats"], *sensor_op_args(*m), 0.5, 200.0, default_eps2d(m[1].shape[0]),
                                      0, 1, 0)
    return _tally(out[4], out[9], out[8])


def floors(sc, n, bw, tflops, sfu, lidar=False):
    C, N = sc["viewmats"].shape[0], sc["means"].shape[0]
    P = C * (sc["model"][0].shape[0] * sc["model"][1].shape[0] if lidar else sc["width"] * sc["height"])
    D = sc["features"].shape[1]
    I, E, V = n["I"], n["E"], n["visible"]
    box, proj, wrap = (24, 250, 4) if lidar else (0, 150, 0)  # the lidar's tile box, projection, azimuth wrap
    work = {  # (bytes, flops, exponentials)
        "projection": (N * 11 * 4 + C * N * (8 * 4 + 8 + box), proj * C * N, 0),
        "binning": (44 * I + 2 * 8 * C * N, 0, 0),
        "forward walk": (I * (4 + 32 + 4 * D) + P * (D + 4) * 4, (15 + wrap + 2 * D) * E, E),
        "backward walk": (I * (4 + 32 + 4 * D) + P * (D + 4) * 4 * 2 + V * 32, (40 + wrap + 5 * D) * E, E),
        "projection backward": (C * N * 32 + N * 11 * 4 * 2, 400 * V, 0),
    }
    out = {}
    for k, (b, f, x) in work.items():
        parts = {"bytes": b / (bw * 1e9), "flops": f / (tflops * 1e12), "exp": x / sfu}
        bound = max(parts, key=parts.get)
        out[k] = (parts[bound] * 1e6, bound, b, f)
    return out


def durations(sc, lidar=False):
    """Device time (us) per stage of one forward+backward on CUDA: each
    stage's kernels, every launch (a per-name median of one launch would
    count the sort's 9 passes as one, and the parts' combine's two launches
    as one)."""
    step = (bl if lidar else bc).make_step(sc, True)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    per = kernel_totals(step, calls=10, warmup=2)  # every launch counted (the sort's passes)
    return {stage: sum(us for name, us in per.items() if any(f in name for f in frags))
            for stage, frags in (KERNELS_LIDAR if lidar else KERNELS)}


def rig_scenes(device, N):
    """The cameras of benchmarks/bench_rig_step.py's step as camera scenes,
    one per call (image size: 3 x 1920x1280, 2 x 1920x886), on its N
    Gaussians collected at the step's time; colours RGB (the SH degree-0
    colour), so that floor and measurement count the same walk."""
    import bench_rig_step as rig
    params, D = rig.build(device, torch.float32, N, 5, 1.0, lidar=False, sh=0)
    s = D["scene"]
    with torch.no_grad():
        m, q, sc, o = nurec_ops.collect(params["means"], params["quats"], params["log_scales"],
                                        params["opacity_logits"], s["track_ids"], params["key_poses"],
                                        s["key_times"], s["track_ranges"], s["query_times"])
    colors = (s["colors"].to(torch.float32)).clamp(0, 1)
    return [dict(means=m, quats=q, scales=sc, opacities=o, features=colors, viewmats=V, Ks=K, width=W, height=H)
            for V, K, W, H in D["groups"]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenes", default="garden,garden3,street,lidar")
    ap.add_argument("--lidar-rows", type=int, default=128)
    ap.add_argument("--lidar-cols", type=int, default=3600)
    ap.add_argument("--rig-gaussians", type=float, default=2e6, help="the rig scene's Gaussians (`--scenes rig`)")
    ap.add_argument("--cuda", action="store_true", help="also time each stage's kernels on the GPU")
    ap.add_argument("--bandwidth", type=float, default=None, help="GB/s (default: measured, or 3737)")
    ap.add_argument("--tflops", type=float, default=67.0)
    ap.add_argument("--sfu", type=float, default=132 * 16 * 1.98e9)
    a = ap.parse_args()
    device = "cuda" if a.cuda else "cpu"
    bw = a.bandwidth or (copy_bandwidth_gbs(1 << 30)[0] if a.cuda else 3737.0)
    makers = {"garden": ("garden 648x420 x3", lambda: bc.garden(device, torch.float32, 1)),
              "garden3": ("garden 1944x1260 x3", lambda: bc.garden(device, torch.float32, 3)),
              "street": ("street 1920x1080", lambda: bc.street(device, torch.float32)),
              "lidar": (f"street lidar {a.lidar_rows}x{a.lidar_cols}",
                        lambda: bl.street_lidar_scene(device, torch.float32, a.lidar_rows, a.lidar_cols)),
              "rig": (f"rig step's cameras, {a.rig_gaussians / 1e6:g}M Gaussians", None)}
    print(f"peaks: {bw:.0f} GB/s, {a.tflops:.0f} TFLOP/s FP32, {a.sfu / 1e12:.2f} T exponentials/s")
    for key in a.scenes.split(","):
        name, make = makers[key]
        lidar = key == "lidar"
        # the rig: its two camera calls, each counted and timed, summed per stage
        calls = rig_scenes(device, int(a.rig_gaussians)) if key == "rig" else [make()]
        fl, dur, n = {}, {}, dict(I=0, visible=0, E=0)
        for sc in calls:
            nc = (counts_lidar if lidar else counts)(sc)
            for k in n:
                n[k] += nc[k]
            for stage, (us, bound, b, f) in floors(sc, nc, bw, a.tflops, a.sfu, lidar).items():
                u0, bound0, b0, f0 = fl.get(stage, (0.0, bound, 0, 0))
                fl[stage] = (u0 + us, bound if bound0 == bound else f"{bound0}+{bound}", b0 + b, f0 + f)
            for stage, us in (durations(sc, lidar) if a.cuda else {}).items():
                dur[stage] = dur.get(stage, 0.0) + us
        print(f"\n{name}: {sc['means'].shape[0]:,} Gaussians, {n['I']:,} intersections, {n['visible']:,} visible "
              f"items, {n['E']:,} {'ray' if lidar else 'pixel'}-Gaussian evaluations")
        rows = []
        for stage, (us, bound, b, f) in fl.items():
            d = dur.get(stage)
            rows.append([stage, f"{b / 1e6:.1f}", f"{f / 1e9:.2f}", bound, f"{us:.1f}",
                         f"{d:.1f}" if d is not None else "-", f"{d / us:.1f}x" if d is not None and us > 0 else "-"])
        total = sum(v[0] for v in fl.values())
        rows.append(["fwd+bwd", "", "", "", f"{total:.1f}", f"{sum(dur.values()):.1f}" if dur else "-",
                     f"{sum(dur.values()) / total:.1f}x" if dur else "-"])
        print(table(rows, ["kernel", "min MB", "GFLOP", "bound by", "floor us", "measured us", "/ floor"]))


if __name__ == "__main__":
    main()
