"""The cost of the median depth (gsplat issue 930) beside the expected depth:
forward, and forward+backward with a loss on every output, of the garden
cameras (648x420 and 1944x1260, x3), the street camera (1080p) and the
street lidar (128 x 3600), with ``median_depth=True`` against without,
interleaved round by round in one process (medians of rounds, each the mean
of back-to-back calls between two CUDA events), and the median walk's own
device time per call (its kernel, from torch.profiler). gsplat 1.5.3 has no
median depth for 3DGS (only 2DGS's render_median), so there is no peer to
time here: the floor is our own forward, whose lists the walk re-reads
only up to each cell's median.

    python3 benchmarks/bench_median.py [--rounds 5] [--calls 20] [--scenes garden,garden3,street,lidar]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nurec_ops  # noqa: E402
from bench_rasterize_camera import garden, street  # noqa: E402
from bench_rasterize_lidar import street_lidar_scene  # noqa: E402
from timing import interleaved_ms, kernel_totals, table  # noqa: E402

KEYS = ("means", "quats", "scales", "opacities", "features")


def camera(sc):
    def render(L, median):
        return nurec_ops.rasterize_camera(L["means"], L["quats"], L["scales"], L["opacities"], L["features"],
                                          sc["viewmats"], sc["Ks"], sc["width"], sc["height"], median_depth=median)
    return render


def lidar(sc):
    def render(L, median):
        return nurec_ops.rasterize_lidar(L["means"], L["quats"], L["scales"], L["opacities"], L["features"],
                                         sc["viewmats"], *sc["model"], median_depth=median)
    return render


def calls(render, sc):
    """(forward without, forward with, fwd+bwd without, fwd+bwd with)."""
    L = {k: sc[k].detach().clone().requires_grad_(True) for k in KEYS}

    def fwd(median):
        def f():
            with torch.no_grad():
                render(L, median)
        return f

    def fwd_bwd(median):
        def f():
            outs = list(render(L, median))
            torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])
            for v in L.values():
                v.grad = None
        return f
    return [fwd(False), fwd(True), fwd_bwd(False), fwd_bwd(True)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--scenes", default="garden,garden3,street,lidar")
    a = ap.parse_args()
    makers = {"garden": ("garden 648x420 x3", lambda: garden("cuda", torch.float32, 1), camera),
              "garden3": ("garden 1944x1260 x3", lambda: garden("cuda", torch.float32, 3), camera),
              "street": ("street camera 1920x1080", lambda: street("cuda", torch.float32), camera),
              "lidar": ("street lidar 128x3600", lambda: street_lidar_scene("cuda", torch.float32, 128, 3600), lidar)}
    rows = []
    for key in a.scenes.split(","):
        name, make, kind = makers[key]
        sc = make()
        render = kind(sc)
        fns = calls(render, sc)
        med = interleaved_ms(fns, a.rounds, a.calls)
        walk = sum(us for k, us in kernel_totals(fns[1], calls=10, warmup=2).items() if "median_kernel" in k)
        with torch.no_grad():
            out = render(sc, True)
        m = out[3]
        share = float((m > 0).float().mean())
        rows.append([name, f"{med[0]:.3f}", f"{med[1]:.3f}", f"{100 * (med[1] / med[0] - 1):+.1f}%",
                     f"{med[2]:.3f}", f"{med[3]:.3f}", f"{100 * (med[3] / med[2] - 1):+.1f}%", f"{walk:.1f}",
                     f"{100 * share:.1f}%"])
        print(rows[-1], flush=True)
    print(table(rows, ["scene", "fwd ms", "fwd + median", "cost", "fwd+bwd ms", "+ median", "cost",
                       "median walk us", "cells with a median"]))


if __name__ == "__main__":
    main()
