"""Where the lidar rasterizer's work lies, counted on the CPU path (no GPU
needed): the street benchmark scene through the exact C binning, then per
tile the list length, and per ray whether it ever reaches the
transmittance cut-off. The figures behind benchmarks/RESULTS.md's lidar
section (how many rays walk their whole list, the longest list against the
mean): the tail of the per-tile work is what the CUDA kernels' time follows.

    python benchmarks/lidar_tile_stats.py [--rows 128 --cols 3600]

Tile shape: the build's (NUREC_RL_TILE_ROWS x NUREC_RL_TILE_COLS; rebuild
with NUREC_OPS_CFLAGS/NUREC_OPS_NVCC_FLAGS to compare shapes).
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_rasterize_lidar import street_lidar_scene  # noqa: E402
from nurec_ops.rasterize_lidar import default_eps2d  # noqa: E402
from timing import table  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=128)
    ap.add_argument("--cols", type=int, default=3600)
    a = ap.parse_args()
    sc = street_lidar_scene("cpu", torch.float32, a.rows, a.cols)
    model = sc["model"]
    W = model.column_azimuths.shape[0]
    t0 = time.perf_counter()
    out = torch.ops.nurec_ops.rasterize_lidar_fwd(sc["means"], sc["quats"], sc["scales"], sc["opacities"],
                                                 sc["features"], sc["viewmats"], *model, 0.5, 200.0,
                                                 default_eps2d(W), 0)
    seconds = time.perf_counter() - t0
    final_T, ranges = out[7], out[6]
    C, ty, tx, _ = ranges.shape
    n = (ranges[..., 1] - ranges[..., 0]).flatten().double()
    q = lambda x: f"{n.quantile(x).item():,.0f}"  # noqa: E731
    rows = [["tiles", f"{n.numel():,} ({ty} x {tx} per sweep)"],
            ["intersections", f"{int(n.sum()):,}"],
            ["list length: mean / median", f"{n.mean().item():,.0f} / {q(0.5)}"],
            ["list length: p90 / p99 / max", f"{q(0.9)} / {q(0.99)} / {int(n.max()):,}"],
            ["longest list / mean", f"{(n.max() / n.mean()).item():.1f}x"],
            ["share of entries in the 1% longest lists",
             f"{100 * n.sort(descending=True).values[:max(1, n.numel() // 100)].sum().item() / n.sum().item():.1f}%"],
            # a ray that stopped early ends with T in [1e-4, 1e-2) (alpha <= 0.99
            # per Gaussian); one ending above 1e-2 walked its whole list
            ["rays that walked their whole list (final T > 0.01)",
             f"{100 * (final_T > 1e-2).double().mean().item():.1f}%"],
            ["rays that stay mostly clear (final T > 0.5)", f"{100 * (final_T > 0.5).double().mean().item():.1f}%"],
            ["CPU forward (exact, single thread)", f"{seconds:.1f} s"]]
    print(f"street lidar {a.rows} x {a.cols}, {sc['means'].shape[0]:,} Gaussians")
    print(table(rows, ["figure", "value"]))


if __name__ == "__main__":
    main()
