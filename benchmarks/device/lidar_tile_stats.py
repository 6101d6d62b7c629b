"""Where the lidar rasterizer's work lies, counted on the CPU path (no GPU
needed): the street benchmark scene through the exact C binning, then per
tile the list length, and per ray whether it ever reaches the
transmittance cut-off: how many rays walk their whole list, the longest
list against the mean (the figures behind the lidar's tiles of one row x
256 columns and its long lists cut into parts). The tail of the per-tile
work is what the CUDA kernels' time follows.

    python benchmarks/device/lidar_tile_stats.py [--rows 128 --cols 3600] [--warps]

--warps adds each CUDA warp's share of the walk (32 columns of a tile's
row; the warp culling emulated in float64): chunks of 32 entries read and
Gaussians evaluated, forward (up to where all its rays stopped) and
backward (up to the furthest entry its rays used), and a crude cost of
each walk with whole lists and with the lists cut into parts (CUDA). The
longest walk against the mean is the kernels' tail.

Tile shape: the build's (NUREC_RL_TILE_ROWS x NUREC_RL_TILE_COLS; rebuild
with NUREC_OPS_CFLAGS/NUREC_OPS_NVCC_FLAGS to compare shapes).
"""
import argparse
import math
import time

import torch

import _paths  # noqa: F401  (benchmarks/ and the repository on sys.path)
from bench_rasterize_lidar import street_lidar_scene  # noqa: E402
from nurec_ops._lidar_table import sensor_op_args  # noqa: E402
from nurec_ops.rasterize_lidar import default_eps2d  # noqa: E402
from timing import table  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=128)
    ap.add_argument("--cols", type=int, default=3600)
    ap.add_argument("--warps", action="store_true", help="also each warp's walk (slow: ~10 s)")
    ap.add_argument("--warp-cols", type=int, default=32,
                    help="columns a warp covers: 32 (one ray a lane, the kernels'), 64 for two rays a lane")
    a = ap.parse_args()
    sc = street_lidar_scene("cpu", torch.float32, a.rows, a.cols)
    model = sc["model"]
    W = model.column_azimuths.shape[0]
    t0 = time.perf_counter()
    out = torch.ops.nurec_ops.rasterize_lidar_fwd(sc["means"], sc["quats"], sc["scales"], sc["opacities"],
                                                 sc["features"], sc["viewmats"], *sensor_op_args(*model), 0.5, 200.0,
                                                 default_eps2d(W), 0, 1, 0)
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
    if a.warps:
        print(f"warps of {a.warp_cols} columns")
        print(table(warp_rows(out, model, warp_cols=a.warp_cols), ["per warp", "total", "mean", "max", "max / mean"]))


def warp_rows(out, model, tile_cols=256, warp_cols=32):
    """Each warp's walk of the CUDA sweeps on sweep 0 (rasterize_lidar_cuda_generic.cuh):
    the culling test of rl_may_reach against the warp's window, in float64.
    warp_cols: the columns of a warp's window (64: what two rays a lane
    would test; chunks stay 32 entries)."""
    records, items, ranges, final_T, last = out[3], out[5], out[6][0], out[7][0], out[8][0]
    records = records[0].double()
    el, caz, roff = [t.double() for t in model]
    W = caz.shape[0]
    wrap = lambda x: torch.remainder(x + math.pi, 2 * math.pi) - math.pi  # noqa: E731
    grow, pad = 1 + 10 * 1e-3, 10 * 1e-5  # NUREC_RL_BOUND_REL / _ABS, widened as the kernels widen them
    work = []  # per warp: chunks forward, evaluations forward, chunks backward, evaluations backward
    parts = []  # per warp and part of the list (CUDA defaults): chunks, evaluations (an upper bound: a
    # part's walk also ends once all its warp's rays stopped, which is not counted)
    for i in range(ranges.shape[0]):
        for bx in range(ranges.shape[1]):
            s, e = ranges[i, bx].tolist()
            rec = records[(items[s:e].long() % records.shape[0])]
            thr, A, B, C, u, v = rec[:, 7], rec[:, 2], rec[:, 3], rec[:, 4], rec[:, 0], rec[:, 1]
            d = A * C - B * B
            # rl_may_reach on a one-row window: the row's slice of the ellipse
            dy = el[i] - v
            disc = A * thr * grow * grow - d * dy * dy
            hw = torch.sqrt(disc.clamp(min=0)) / A + pad
            ctr = u - B * dy / A
            for j0 in range(bx * tile_cols, min((bx + 1) * tile_cols, W), warp_cols):
                js = torch.arange(j0, min(j0 + warp_cols, W))
                raz = caz[js] + roff[i]
                rel = wrap(raz - raz[0])  # the window, centred on the warp's rays (rl_warp_window)
                mid, half = raz[0] + (rel.min() + rel.max()) / 2, (rel.max() - rel.min()) / 2
                reach = ~((disc < 0) | (wrap(ctr - mid).abs() - half > hw))
                lw = last[i, js]
                fend = min(e - s, int(lw.max()) + 32) if bool((final_T[i, js] < 1e-2).all()) else e - s
                bend = int(lw.max())
                work.append((math.ceil(fend / 32), int(reach[:fend].sum()), math.ceil(bend / 32),
                             int(reach[:bend].sum())))
                for lo, hi in _parts(e - s):
                    parts.append((math.ceil((hi - lo) / 32), int(reach[lo:hi].sum())))
    w = torch.tensor(work, dtype=torch.float64)
    names = ("forward: chunks read", "forward: Gaussians evaluated", "backward: chunks read",
             "backward: Gaussians evaluated")
    rows = [[name, f"{w[:, k].sum():,.0f}", f"{w[:, k].mean():,.1f}", f"{w[:, k].max():,.0f}",
             f"{w[:, k].max() / w[:, k].mean():.1f}x"] for k, name in enumerate(names)]
    # a crude cost of a walk: 3 per chunk read and tested, 1 per evaluation;
    # 'max / even' compares the longest walk with the total spread evenly
    # over ~3,300 resident warps (H200: 132 SMs x ~25 warps at 80 registers)
    whole = (w[:, 0] * 3 + w[:, 1])
    pw = torch.tensor(parts, dtype=torch.float64)
    cut = pw[:, 0] * 3 + pw[:, 1]
    for name, c in ((f"cost, whole lists, early stop ({len(whole):,} walks)", whole),
                    (f"cost, parts, no early stop ({len(cut):,} walks)", cut)):
        rows.append([name, f"{c.sum():,.0f}", f"{c.mean():,.1f}", f"{c.max():,.0f}",
                     f"{c.max() / c.mean():.1f}x (max / even {c.max() / (c.sum() / 3300):.2f})"])
    return rows


def _parts(n):
    """The parts [lo, hi) of a list of n entries as the CUDA walks cut it
    (rasterize_lidar_cuda_generic.cuh, rl_segment_count; the defaults)."""
    from nurec_ops.rasterize_lidar import _SEGMENT_MIN, _SEGMENTS
    if _SEGMENTS <= 1 or n <= _SEGMENT_MIN:
        return [(0, n)]
    size = max(_SEGMENT_MIN, -(-n // _SEGMENTS))
    return [(lo, min(n, lo + size)) for lo in range(0, n, size)]


if __name__ == "__main__":
    main()
