"""Benchmark of the lidar rasterizer on one CUDA device.

Scene: the collection benchmark's street scene (benchmarks/scenes.py,
464,000 Gaussians collected at the query time), the lidar 1.8 m above the
road mid-street (scenes.street_lidar), the real 128 x 3600 row-offset
spinning lidar (the real calibration of ../shared/data/gsplat/, else the synthetic model of nurec_ops.lidar_model), range + 1 feature channel
(the first colour channel standing in for intensity).

Reports the median time (CUDA events, after warm-up) of forward and of
forward+backward, the mean of forward+backward calls queued back to back (as
a training loop runs them: the host's issue time of one call overlaps the
GPU work of the one before) and the host time of one, the same replayed as
one CUDA graph, the device time split
by stage from torch.profiler (projection, binning, forward, backward sweep,
projection VJP), kernel launches and memsets per call, the intersections
binned and host syncs per call (set_sync_debug_mode("error")), against
gsplat 1.6's lidar path measured on the H200 (3.60 ms forward, 5.71 ms
forward+backward: fixed figures, not re-measured here, since gsplat 1.5.3
on PyPI has no lidar; target <= 2.85 ms forward+backward).

Registers and occupancy of the lidar backward kernel: ptxas reports them at
build time (NUREC_OPS_PTXAS_VERBOSE=1: rl_backward_kernel_f32); achieved
occupancy needs Nsight Compute, e.g.
    ncu -k regex:rl_backward_kernel --metrics \
        launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
        python benchmarks/bench_rasterize_lidar.py --iters 3
The lidar walks run at 64 registers (4 blocks of 256 per SM); for the
contrast with the camera backward kernel's configuration (104 registers, 4
channels per pass), rebuild with -DRL_BWD_MIN_BLOCKS_F32=2 -DRL_CH=4
(NUREC_OPS_NVCC_FLAGS) and run again (H200, street lidar: backward sweep
1.07 ms against 1.48).

    python benchmarks/bench_rasterize_lidar.py [--dtype float32] [--iters 30] [--rows 128 --cols 3600]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
import nurec_ops  # noqa: E402
from nurec_ops.lidar_model import load_lidar_model, reduce_lidar_model, synthetic_lidar_model  # noqa: E402
import shared_data  # noqa: E402  (tests/shared_data.py)
from nurec_ops._lidar_table import sensor_op_args  # noqa: E402
from nurec_ops.rasterize_lidar import _POLICY, _SEGMENT_MIN, _SEGMENTS, default_eps2d  # noqa: E402
from timing import (autograd_step, back_to_back_us, copy_bandwidth_gbs, event_median_ms, graph_ms,  # noqa: E402
                    host_syncs, host_us, kernel_breakdown, stage_split, table)

GSPLAT_MS = (3.60, 5.71)  # forward, forward+backward (gsplat 1.6 lidar path, H200)
TARGET_FB_MS = 2.85

STAGES = [
    ("projection", ("rl_project_kernel",)),
    ("binning", ("emit_kernel", "ranges_kernel", "depth_bits", "rank_scatter", "cub", "Radix", "Scan",
                 "Onesweep", "onesweep", "radix", "scan")),
    ("forward", ("rl_forward_kernel",)),
    ("backward", ("rl_backward_kernel",)),
    ("projection VJP", ("rl_project_backward_kernel",)),
]


def street_lidar_scene(device, dtype, rows, cols):
    from scenes import make_street_scene, street_lidar
    s = make_street_scene(device, dtype, seed=0)
    with torch.no_grad():
        m, q, sc, o = nurec_ops.collect(s["means"], s["quats"], s["log_scales"], s["opacity_logits"],
                                        s["track_ids"], s["key_poses"], s["key_times"], s["track_ranges"],
                                        s["query_times"])
    path = shared_data.find(shared_data.LIDAR)  # the real calibration, else the synthetic model
    model = (load_lidar_model(path, dtype=dtype, device=device) if path else
             synthetic_lidar_model(dtype=dtype, device=device))
    model = reduce_lidar_model(model, max(128 // rows, 1), max(3600 // cols, 1))
    return dict(means=m, quats=q, scales=sc, opacities=o, features=s["colors"][:, :1].to(dtype).contiguous(),
                viewmats=street_lidar(device, dtype), model=model)


def make_step(sc, backward, capacity=None):
    leaves = {k: sc[k].detach().clone().requires_grad_(True) for k in ("means", "quats", "scales", "opacities", "features")}
    C = sc["viewmats"].shape[0]
    R, W = sc["model"].row_elevations.shape[0], sc["model"].column_azimuths.shape[0]
    dt = sc["means"].dtype
    cot = [torch.randn(C, R, W, 1, device="cuda", dtype=dt), torch.randn(C, R, W, 1, device="cuda", dtype=dt) * 0.01,
           torch.randn(C, R, W, 1, device="cuda", dtype=dt)]
    kw = {} if capacity is None else dict(capacity=capacity)

    def render():
        return nurec_ops.rasterize_lidar(leaves["means"], leaves["quats"], leaves["scales"], leaves["opacities"],
                                         leaves["features"], sc["viewmats"], *sc["model"], **kw)
    return autograd_step(render, leaves, cot, backward)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--kernels", action="store_true", help="also print each kernel's launches and time per call")
    ap.add_argument("--rows", type=int, default=128)
    ap.add_argument("--cols", type=int, default=3600)
    a = ap.parse_args()
    dtype = getattr(torch, a.dtype)
    bw, _ = copy_bandwidth_gbs(1 << 30)
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  dtype {a.dtype}")
    print(f"copy reference: {bw:.0f} GB/s device-to-device (1 GiB, read + write)")
    sc = street_lidar_scene("cuda", dtype, a.rows, a.cols)
    R, W = sc["model"].row_elevations.shape[0], sc["model"].column_azimuths.shape[0]
    fwd, fb = make_step(sc, False), make_step(sc, True)
    for _ in range(3):  # capacity reports arrive
        fb()
        torch.cuda.synchronize()
    t_fwd = event_median_ms(fwd, warmup=5, iters=a.iters)
    t_fb = event_median_ms(fb, warmup=5, iters=a.iters)
    # a training loop does not wait on each step: calls queued back to back,
    # and the host time of one (before torch.profiler runs in this process)
    b2b_fb = back_to_back_us(fb, calls=20, warmup=3) / 1e3
    host_fb = host_us(fb, calls=20, warmup=3) / 1e3
    cap = max(_POLICY.capacity.values())
    g_fb = graph_ms(make_step(sc, True, capacity=cap), a.iters)
    split, launches, memsets = stage_split(fb, STAGES)
    st = torch.ops.nurec_ops.rasterize_lidar_fwd(
        sc["means"], sc["quats"], sc["scales"], sc["opacities"], sc["features"], sc["viewmats"], *sensor_op_args(*sc["model"]),
        0.5, 200.0, default_eps2d(W), _SEGMENTS, _SEGMENT_MIN, cap)[9].tolist()
    row = [f"street lidar {R}x{W}", sc["means"].shape[0], f"{t_fwd:.3f}", f"{t_fb:.3f}", f"{b2b_fb:.3f}",
           f"{host_fb:.3f}", f"{g_fb:.3f}",
           f"{GSPLAT_MS[1] / t_fb:.2f}x", "yes" if t_fb <= TARGET_FB_MS else "no"]
    row += [f"{split[name]:.3f}" for name, _ in STAGES] + [f"{split['other']:.3f}", f"{launches}+{memsets}",
                                                            host_syncs(fb), st[0]]
    if a.kernels:
        print(table(kernel_breakdown(fb), ["kernel (forward+backward)", "per call", "median us", "us per call"]))
    print()
    print(table([row], ["scene", "N", "fwd ms", "fwd+bwd ms", "b2b fwd+bwd ms", "host ms", "graph fwd+bwd ms",
                        "vs gsplat fwd+bwd",
                        f"<= {TARGET_FB_MS} ms"] + [f"{n} ms" for n, _ in STAGES] +
                ["other ms", "kernels+memsets", "host syncs", "intersections"]))
    print(f"\ngsplat 1.6 lidar (H200): {GSPLAT_MS[0]:.2f} ms forward, {GSPLAT_MS[1]:.2f} ms forward+backward. "
          "Stage split: device time per forward+backward call (torch.profiler).")


if __name__ == "__main__":
    main()
