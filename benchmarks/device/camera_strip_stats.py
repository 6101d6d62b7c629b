#!/usr/bin/env python3
"""How much warp culling can save the camera walks (CPU, no GPU needed).

A camera tile is 16 x 16 pixels walked by 8 warps of 32 pixels: the
forward's warps hold 2 whole pixel rows each (16 x 2), the backward's a
block of 8 x 4 (csrc/rasterize_camera: rc_bwd_cell). For the entries a walk
evaluates (each tile's list up to the furthest entry any of its pixels
reaches before its cut-off, from the CPU op's `last`), this counts, per warp
shape, the (entry, warp) pairs whose footprint ellipse d^T Q d <= thr
reaches a pixel centre of the warp (exactly, in float64: the pairs with a
pixel to composite), and the pairs that a cull by the ellipse's bounding
box keeps (rc_stage_warps: rows for 16 x 2, rows and columns for 8 x 4).
The pairs a cull drops are the steps a culling warp skips; the exact
pairs are the ones that pay for a gradient. The backward's warps hold
RC_BWD_PIX of the 8 x 4 blocks stacked (a lane a pixel in each: 2 made
warps of 8 x 8, 4 of 8 x 16), so it also counts the (entry, warp) pairs of
those warps, and from them the SASS instructions the backward's loop would
issue under its cost model: ~157 an (entry, warp) pair for what does not
depend on the pixels (the ballot, the VJP's finish, the warp's sums, the
atomics) and ~54 for each of the warp's blocks the entry's box meets (a
lane's pixel there; benchmarks/RESULTS.md, "Four pixels a thread").

``--per-splat`` sets this backward against a per-splat one (Taming 3DGS,
Faster-GS: a warp takes 32 of a tile's entries, a lane an entry, and the
lanes pass each pixel's state down the warp, so every entry meets all 256
pixels of its tile, 256 + 31 steps a bucket of 32): the (pixel, entry)
evaluations each design makes, and the gradient rows each sends to global
memory (ours: one per (entry, warp) whose pixels a box reaches, at most;
per-splat: one per walked (tile, entry)).

    python3 benchmarks/device/camera_strip_stats.py --scenes garden,garden3,street
"""
import argparse
import os
import sys

import torch

import _paths  # benchmarks/ and the repository on sys.path

sys.path.insert(0, os.path.join(_paths.ROOT, "tests"))

import bench_rasterize_camera as bc  # noqa: E402

OPS = torch.ops.nurec_ops
T = 16  # csrc/tiles/tiles.h: NUREC_TILE


def walked_entries(sc):
    """(tile x, tile y, record, H, tile id over the cameras) of every entry a
    walk evaluates, grouped by tile."""
    out = OPS.rasterize_camera_fwd(sc["means"], sc["quats"], sc["scales"], sc["opacities"], sc["features"],
                                   sc["viewmats"], sc["Ks"], None, sc["width"], sc["height"], 0.01, 1e10, -1, 0, 1,
                                   0)
    rec, isect, ranges, last = out[3].double(), out[6].long(), out[7], out[9]
    C, N = rec.shape[:2]
    W, H = sc["width"], sc["height"]
    ty_n, tx_n = ranges.shape[1], ranges.shape[2]
    furthest = torch.nn.functional.pad(last.reshape(C, H, W).float(), (0, tx_n * T - W, 0, ty_n * T - H))
    furthest = furthest.reshape(C, ty_n, T, tx_n, T).amax((2, 4)).long()
    starts, ends = ranges[..., 0], ranges[..., 1]
    n = torch.minimum(furthest, ends - starts).flatten()
    cz, ty, tx = torch.meshgrid(torch.arange(C), torch.arange(ty_n), torch.arange(tx_n), indexing="ij")
    tile = (cz * ty_n + ty) * tx_n + tx
    first = starts.flatten().repeat_interleave(n)
    offs = torch.arange(int(n.sum())) - torch.repeat_interleave(torch.cumsum(n, 0) - n, n)
    items = isect[first + offs]
    return (tx.flatten().repeat_interleave(n), ty.flatten().repeat_interleave(n), rec.reshape(C * N, 8)[items], H,
            tile.flatten().repeat_interleave(n))


def warps_reached(tx, ty, r, W, H, bw, bh):
    """Per (entry, warp) of warps of bw x bh pixels (row-major over the
    tile): whether the ellipse reaches a pixel centre of the warp (exact),
    and whether its bounding box does (box)."""
    u, v, A, B, C, thr = r[:, 0], r[:, 1], r[:, 2], r[:, 3], r[:, 4], r[:, 7]
    det = A * C - B * B
    ext_y, ext_x = torch.sqrt(thr * A / det), torch.sqrt(thr * C / det)
    nx = T // bw
    n = (T // bw) * (T // bh)
    exact = torch.zeros(len(u), n, dtype=torch.bool)
    box = torch.zeros(len(u), n, dtype=torch.bool)
    for w in range(n):
        x0 = tx.double() * T + (w % nx) * bw + 0.5
        x1 = torch.clamp_max(x0 + bw - 1, W - 0.5)
        cols = (u + ext_x >= x0) & (u - ext_x <= x1) & (x0 < W)
        for row in range(bh):
            yc = ty.double() * T + (w // nx) * bh + row + 0.5
            dy = yc - v
            disc = A * thr - det * dy * dy
            h = torch.sqrt(disc.clamp_min(0)) / A
            c = u - B * dy / A
            inside = (yc < H) & (x0 < W)
            exact[:, w] |= inside & (disc >= 0) & (c + h >= x0) & (c - h <= x1)
            box[:, w] |= inside & (dy.abs() <= ext_y) & cols
    return exact, box


PER_PAIR, PER_BLOCK = 157, 54  # the backward loop's SASS instructions: an (entry, warp) pair, a block it meets


def stacked(box, k):
    """Per entry and warp of k stacked 8 x 4 blocks (k = 1, 2, 4: RC_BWD_PIX),
    [entries, 4 // k, 2], from box [entries, 8], the 8 x 4 blocks of a tile
    (row-major, 2 a row) an entry meets: a warp of rows of blocks
    [j k, (j + 1) k) of a column meets the entry where one of its blocks does."""
    return box.view(-1, 4 // k, k, 2).any(2)


def stacked_pairs(box, k):
    """The (entry, warp) pairs of warps of k stacked blocks (stacked)."""
    return int(stacked(box, k).sum())


def loop_instructions(box, k):
    """The backward loop's instructions over the entries (the cost model
    above) with k pixels a thread: every pair pays PER_PAIR, every block an
    entry meets PER_BLOCK, whatever warp holds it."""
    return stacked_pairs(box, k) * PER_PAIR + int(box.sum()) * PER_BLOCK


def per_splat_counts(tile, box8x8):
    """(ours, per-splat): the backward's (pixel, entry) evaluations and the
    gradient rows it adds to global memory. Ours: a warp of 8 x 8 pixels
    evaluates an entry its box meets (box8x8 [entries, 4]) at its 64 pixels
    and adds one row for it. Per-splat: each tile's walked entries in
    buckets of 32, a bucket 256 + 31 steps of 32 lanes, one row per entry.
    tile: each entry's tile, grouped (walked_entries)."""
    _, per_tile = torch.unique_consecutive(tile, return_counts=True)
    buckets = (per_tile + 31) // 32
    ours = (int(box8x8.sum()) * 64, int(box8x8.sum()))
    splat = (int(buckets.sum()) * 32 * (256 + 31), len(tile))
    return ours, splat


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenes", default="garden,garden3,street")
    ap.add_argument("--per-splat", action="store_true", help="set this backward against a per-splat one")
    a = ap.parse_args()
    makers = {"garden": ("garden 648x420 x3", lambda: bc.garden("cpu", torch.float32, 1)),
              "garden3": ("garden 1944x1260 x3", lambda: bc.garden("cpu", torch.float32, 3)),
              "street": ("street 1920x1080", lambda: bc.street("cpu", torch.float32))}
    for key in a.scenes.split(","):
        name, make = makers[key]
        sc = make()
        tx, ty, r, H, tile = walked_entries(sc)
        print(f"{name}: {len(tx):,} walked (tile, entry) pairs")
        for bw, bh in ((16, 2), (8, 4)):
            exact, box = warps_reached(tx, ty, r, sc["width"], H, bw, bh)
            print(f"  warps of {bw} x {bh}: (entry, warp) pairs reached {int(exact.sum()):,}, "
                  f"kept by the box cull {int(box.sum()):,} (of {exact.numel():,}); "
                  f"warps reached per entry {exact.sum(1).double().mean():.2f} of 8")
            if (bw, bh) == (8, 4):  # warps of k stacked blocks (RC_BWD_PIX)
                for k in (2, 4):
                    print(f"  warps of {k} stacked 8 x 4 blocks: pairs reached {stacked_pairs(exact, k):,}, "
                          f"kept by the box cull {stacked_pairs(box, k):,}; backward loop instructions "
                          f"(cost model) {loop_instructions(box, k) / 1e6:.1f} M a warp")
                if a.per_splat:
                    (ev_o, rows_o), (ev_s, rows_s) = per_splat_counts(tile, stacked(box, 2).reshape(-1, 4))
                    print(f"  backward, (pixel, entry) evaluations: ours {ev_o:,}, per-splat {ev_s:,} "
                          f"({ev_s / max(ev_o, 1):.2f}x); gradient rows to global memory: ours at most "
                          f"{rows_o:,}, per-splat {rows_s:,} ({rows_s / max(rows_o, 1):.2f}x)")


if __name__ == "__main__":
    main()
