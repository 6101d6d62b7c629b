"""Benchmark of the camera rasterizer on one CUDA device.

Scenes: (a) gsplat's garden fixture (../shared/data/gsplat/test_garden.npz): points cropped
to [-2, 2]^3, scales uniform in [1e-4, 0.02], random unit quaternions,
uniform opacities, its colours, its 3 cameras at 648x420 and with the
intrinsics scaled x3 (1944x1260); (b) the street scene (benchmarks/scenes.py,
464,000 Gaussians collected at the query time) at 1920x1080 from a camera
1.5 m above the road, with expected depth.

For each: median time (CUDA events, after warm-up) of forward and of
forward+backward, the same replayed as one CUDA graph, the device time split
by stage from torch.profiler (projection, binning, forward, backward), kernel
launches and memsets per call, the intersections binned, host syncs per call
(counted by running under torch.cuda.set_sync_debug_mode("error")), and a
device-to-device copy measured in the same run as a bandwidth reference.

    python benchmarks/bench_rasterize_camera.py [--dtype float32] [--iters 30]
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
import nurec_ops  # noqa: E402
import shared_data  # noqa: E402  (tests/shared_data.py)
from nurec_ops.rasterize_camera import _POLICY, _SEGMENT_MIN, _SEGMENTS  # noqa: E402
from timing import (autograd_step, copy_bandwidth_gbs, event_median_ms, graph_ms, host_syncs,  # noqa: E402
                    kernel_breakdown, stage_split, table)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GSPLAT_FWD_BWD_MS = {"garden 648x420 x3": (1.23, 3.08), "garden 1944x1260 x3": (2.32, 7.52),
                     "street 1920x1080 +depth": (2.24, 5.38)}

STAGES = [
    ("projection", ("rc_project_kernel",)),
    ("binning", ("emit_kernel", "ranges_kernel", "depth_bits", "rank_scatter", "cub", "Radix", "Scan",
                 "Onesweep", "onesweep", "radix", "scan")),
    ("forward", ("rc_forward_kernel",)),
    ("backward", ("rc_backward_kernel", "rc_project_backward_kernel")),
]


def garden(device, dtype, scale=1, seed=0):
    """gsplat's garden fixture (../shared/data/gsplat/test_garden.npz) with
    gsplat's recipe for the Gaussians (gsplat/_helper.py: points cropped to
    [-2, 2]^3, random unit quaternions, scales up to 0.02, opacities in
    [0, 1)); intrinsics and image size times `scale`."""
    path = shared_data.find(shared_data.GARDEN)
    if path is None:
        raise SystemExit(f"gsplat's garden fixture {shared_data.GARDEN} not found under ../shared/data/")
    d = np.load(path)
    g = torch.Generator().manual_seed(seed)
    means = torch.from_numpy(d["means3d"]).double()
    colors = torch.from_numpy(d["colors"]).double() / 255.0
    keep = (means.abs() <= 2).all(-1)
    means, colors = means[keep], colors[keep]
    N = means.shape[0]
    quats = torch.randn(N, 4, generator=g, dtype=torch.float64)
    quats = quats / quats.norm(dim=-1, keepdim=True)
    scales = 1e-4 + torch.rand(N, 3, generator=g, dtype=torch.float64) * (0.02 - 1e-4)
    opac = torch.rand(N, generator=g, dtype=torch.float64)
    V = torch.from_numpy(d["viewmats"]).double()
    K = torch.from_numpy(d["Ks"]).double().clone()
    K[:, :2, :] *= scale
    W, H = int(d["width"]) * scale, int(d["height"]) * scale
    f = lambda x: x.to(device=device, dtype=dtype)  # noqa: E731
    return dict(means=f(means), quats=f(quats), scales=f(scales), opacities=f(opac), features=f(colors),
                viewmats=f(V), Ks=f(K), width=W, height=H)


def street(device, dtype):
    from scenes import make_street_scene, street_camera
    s = make_street_scene(device, dtype, seed=0)
    with torch.no_grad():
        m, q, sc, o = nurec_ops.collect(s["means"], s["quats"], s["log_scales"], s["opacity_logits"],
                                        s["track_ids"], s["key_poses"], s["key_times"], s["track_ranges"],
                                        s["query_times"])
    V, K = street_camera(1920, 1080, device, dtype)
    return dict(means=m, quats=q, scales=sc, opacities=o, features=s["colors"].to(dtype), viewmats=V, Ks=K,
                width=1920, height=1080)


def make_step(sc, backward, capacity=None):
    leaves = {k: sc[k].detach().clone().requires_grad_(True) for k in ("means", "quats", "scales", "opacities", "features")}
    C, H, W = sc["viewmats"].shape[0], sc["height"], sc["width"]
    D = sc["features"].shape[1]
    cot = [torch.randn(C, H, W, D, device="cuda", dtype=sc["means"].dtype),
           torch.randn(C, H, W, 1, device="cuda", dtype=sc["means"].dtype) * 0.01,
           torch.randn(C, H, W, 1, device="cuda", dtype=sc["means"].dtype)]
    kw = {} if capacity is None else dict(capacity=capacity)

    def render():
        return nurec_ops.rasterize_camera(leaves["means"], leaves["quats"], leaves["scales"], leaves["opacities"],
                                          leaves["features"], sc["viewmats"], sc["Ks"], W, H, **kw)
    return autograd_step(render, leaves, cot, backward)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--kernels", action="store_true", help="also print each kernel's launches and time per call")
    ap.add_argument("--scenes", default="garden,garden3,street")
    a = ap.parse_args()
    dtype = getattr(torch, a.dtype)
    bw, _ = copy_bandwidth_gbs(1 << 30)
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  dtype {a.dtype}")
    print(f"copy reference: {bw:.0f} GB/s device-to-device (1 GiB, read + write)")
    makers = {"garden": ("garden 648x420 x3", lambda: garden("cuda", dtype, 1)),
              "garden3": ("garden 1944x1260 x3", lambda: garden("cuda", dtype, 3)),
              "street": ("street 1920x1080 +depth", lambda: street("cuda", dtype))}
    rows = []
    for key in a.scenes.split(","):
        name, make = makers[key]
        sc = make()
        fwd, fb = make_step(sc, False), make_step(sc, True)
        for _ in range(3):  # capacity reports arrive
            fb()
            torch.cuda.synchronize()
        t_fwd = event_median_ms(fwd, warmup=5, iters=a.iters)
        t_fb = event_median_ms(fb, warmup=5, iters=a.iters)
        cap = max(_POLICY.capacity.values())
        g_fb = graph_ms(make_step(sc, True, capacity=cap), a.iters)
        split, launches, memsets = stage_split(fb, STAGES)
        st = torch.ops.nurec_ops.rasterize_camera_fwd(
            sc["means"], sc["quats"], sc["scales"], sc["opacities"], sc["features"], sc["viewmats"], sc["Ks"],
            None, sc["width"], sc["height"], 0.01, 1e10, -1, _SEGMENTS, _SEGMENT_MIN, cap)[10].tolist()
        ref_f, ref_fb = GSPLAT_FWD_BWD_MS[name]
        rows.append([name, sc["means"].shape[0], f"{t_fwd:.3f}", f"{t_fb:.3f}", f"{g_fb:.3f}",
                     f"{ref_fb / t_fb:.2f}x", f"{split['projection']:.3f}", f"{split['binning']:.3f}",
                     f"{split['forward']:.3f}", f"{split['backward']:.3f}", f"{split['other']:.3f}",
                     f"{launches}+{memsets}", host_syncs(fb), st[0], f"{ref_f:.2f}/{ref_fb:.2f}"])
        if a.kernels:
            print(table(kernel_breakdown(fb), ["kernel (forward+backward)", "per call", "median us", "us per call"]))
        print(name, "done", flush=True)
    print()
    print(table(rows, ["scene", "N", "fwd ms", "fwd+bwd ms", "graph fwd+bwd ms", "vs gsplat fwd+bwd",
                       "proj ms", "binning ms", "raster fwd ms", "bwd ms", "other ms", "kernels+memsets",
                       "host syncs", "intersections", "gsplat fwd/fwd+bwd ms"]))
    print("\nstage split: device time per forward+backward call (torch.profiler); "
          "'other' = autograd's elementwise kernels outside the op.")


if __name__ == "__main__":
    main()
