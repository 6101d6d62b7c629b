"""nurec_ops.rasterize_camera side by side with gsplat (PyPI 1.5.3, the
classic path: ``rasterization(..., packed=False)``) in one process:

- images: PSNR of our render (and depth, alpha) against gsplat's, per view,
  on gsplat's garden fixture at scale 1 and 3 (gsplat's own recipe for the
  Gaussians) and on the 1080p street scene with depth (RGB+D);
- speed: forward and forward+backward, the two libraries interleaved round by
  round (each round: the mean of back-to-back calls between two CUDA events,
  which cancels the ~25 us of one event pair), medians over rounds, and the
  speed-ups.

Run on the GPU machine with gsplat importable (benchmarks/device/peer_gsplat.sh):
    python3 benchmarks/vs_gsplat.py [--scenes garden,garden3,street] [--rounds 7] [--kernels]
"""
import argparse
import math
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nurec_ops  # noqa: E402
from bench_rasterize_camera import garden, street  # noqa: E402
from timing import back_to_back_us, kernel_breakdown, table  # noqa: E402

KEYS = ("means", "quats", "scales", "opacities", "features")


def psnr(a, b, peak=1.0):
    mse = torch.mean((a.double() - b.double()) ** 2).item()
    return float("inf") if mse == 0 else 10 * math.log10(peak * peak / mse)


def renderers(sc, depth, antialiased=False):
    """(ours, gsplat's): each renders the scene's leaves into (rgb, depth or
    None, alpha), [C, H, W, k]; both in gsplat's antialiased mode with
    ``antialiased``."""
    import gsplat

    W, H = sc["width"], sc["height"]

    def ours(L):
        r, d, a = nurec_ops.rasterize_camera(L["means"], L["quats"], L["scales"], L["opacities"], L["features"],
                                             sc["viewmats"], sc["Ks"], W, H, near=0.01, far=1e10,
                                             antialiased=antialiased)
        return r, (d if depth else None), a

    def theirs(L):
        colors, alphas, _ = gsplat.rasterization(
            L["means"], L["quats"], L["scales"], L["opacities"], L["features"], sc["viewmats"], sc["Ks"], W, H,
            near_plane=0.01, far_plane=1e10, eps2d=0.3, packed=False,
            rasterize_mode="antialiased" if antialiased else "classic",
            render_mode="RGB+D" if depth else "RGB")
        return colors[..., :3], (colors[..., 3:4] if depth else None), alphas

    return ours, theirs


def step(render, L, cot, backward):
    def run():
        out = [o for o in render(L) if o is not None]
        if backward:
            torch.autograd.backward(out, cot[:len(out)])
            for v in L.values():
                v.grad = None
        return out
    return run


def kernel_lists(name, fns, top=14):
    """Each side's forward and forward+backward, kernel by kernel: launches
    per call, median launch, device time per call (every launch), largest
    first (where a target's time lies, e.g. the 1944 garden's forward)."""
    for k, label in (("ours_f", "ours, forward"), ("gs_f", "gsplat, forward"), ("ours_fb", "ours, fwd+bwd"),
                     ("gs_fb", "gsplat, fwd+bwd")):
        rows = kernel_breakdown(fns[k], calls=10, warmup=2, top=10 ** 6)
        total = sum(float(r[3]) for r in rows)
        print(f"\n{name}: {label}, {total:.1f} us of kernels and memsets a call")
        print(table(rows[:top], ["kernel", "launches", "median us", "us per call"]))


def compare(name, sc, depth, rounds, calls, solo=False, kernels=False, antialiased=False):
    L = {k: sc[k].detach().clone().requires_grad_(True) for k in KEYS}
    ours, theirs = renderers(sc, depth, antialiased)
    with torch.no_grad():
        for _ in range(2):  # our capacity history; gsplat's first call
            a, b = ours(L), theirs(L)
        torch.cuda.synchronize()
    rows = []
    C = sc["viewmats"].shape[0]
    for c in range(C):
        row = [name, c, f"{psnr(a[0][c], b[0][c]):.1f}"]
        if depth:
            peak = b[1][c].max().item()
            row.append(f"{psnr(a[1][c], b[1][c], peak):.1f}")
        else:
            row.append("-")
        row += [f"{psnr(a[2][c], b[2][c]):.1f}", f"{a[2][c].mean().item():.3f}", f"{b[2][c].mean().item():.3f}"]
        rows.append(row)
    cot = [torch.randn_like(o) for o in a if o is not None]
    times = {k: [] for k in ("ours_f", "gs_f", "ours_fb", "gs_fb")}
    fns = {"ours_f": step(ours, L, cot, False), "gs_f": step(theirs, L, cot, False),
           "ours_fb": step(ours, L, cot, True), "gs_fb": step(theirs, L, cot, True)}
    if solo:  # ours alone first: does running gsplat in between change our figures?
        alone = [back_to_back_us(fns["ours_fb"], calls=calls, warmup=2) / 1e3 for _ in range(rounds)]
        print(f"{name}: ours alone fwd+bwd {statistics.median(alone):.3f} ms", flush=True)
    if kernels:
        kernel_lists(name, fns)
    for _ in range(rounds):  # interleaved: the same host and clock state for both
        for k, f in fns.items():
            times[k].append(back_to_back_us(f, calls=calls, warmup=2) / 1e3)
    med = {k: statistics.median(v) for k, v in times.items()}
    speed = [name, sc["means"].shape[0], f"{med['ours_f']:.3f}", f"{med['gs_f']:.3f}",
             f"{med['gs_f'] / med['ours_f']:.2f}x", f"{med['ours_fb']:.3f}", f"{med['gs_fb']:.3f}",
             f"{med['gs_fb'] / med['ours_fb']:.2f}x",
             f"{min(times['ours_fb']):.3f}-{max(times['ours_fb']):.3f}"]
    return rows, speed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenes", default="garden,garden3,street")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--solo", action="store_true", help="time ours alone too (no gsplat calls between ours)")
    ap.add_argument("--kernels", action="store_true", help="each side's kernels, forward and fwd+bwd, per scene")
    ap.add_argument("--antialiased", action="store_true", help="both sides in gsplat's antialiased mode")
    a = ap.parse_args()
    import gsplat

    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  gsplat {gsplat.__version__}")
    makers = {"garden": ("garden 648x420 x3", lambda: garden("cuda", torch.float32, 1), False),
              "garden3": ("garden 1944x1260 x3", lambda: garden("cuda", torch.float32, 3), False),
              "street": ("street 1920x1080 +depth", lambda: street("cuda", torch.float32), True)}
    images, speeds = [], []
    for key in a.scenes.split(","):
        name, make, depth = makers[key]
        rows, speed = compare(name, make(), depth, a.rounds, a.calls, a.solo, a.kernels, a.antialiased)
        images += rows
        speeds.append(speed)
        print(name, "done", flush=True)
    print()
    print(table(images, ["scene", "view", "PSNR rgb dB", "PSNR depth dB", "PSNR alpha dB", "alpha mean ours",
                         "alpha mean gsplat"]))
    print()
    print(table(speeds, ["scene", "N", "fwd ms ours", "fwd ms gsplat", "fwd speed-up", "fwd+bwd ms ours",
                         "fwd+bwd ms gsplat", "fwd+bwd speed-up", "ours fwd+bwd range"]))
    print("\ntimes: medians over rounds of the mean of back-to-back calls (CUDA events), interleaved; "
          f"gsplat: rasterization(packed=False, rasterize_mode='{'antialiased' if a.antialiased else 'classic'}').")


if __name__ == "__main__":
    main()
