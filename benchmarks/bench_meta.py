"""The cost of SPEC section 8's per-Gaussian outputs: forward+backward of the
street camera (1080p) and the street lidar (128 x 3600) with
``return_meta=True, means2d_grad=True`` against without, interleaved round
by round in one process (medians of rounds, each the mean of back-to-back
calls between two CUDA events). The issue's bound: <= 3% when on, 0% when
off (off is the plain call, so "off" is measured as the plain op itself).

    python3 benchmarks/bench_meta.py [--rounds 7] [--calls 20]
"""
import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nurec_ops  # noqa: E402
from bench_rasterize_camera import street  # noqa: E402
from bench_rasterize_lidar import street_lidar_scene  # noqa: E402
from timing import back_to_back_us, table  # noqa: E402

KEYS = ("means", "quats", "scales", "opacities", "features")


def steps(render, sc):
    L = {k: sc[k].detach().clone().requires_grad_(True) for k in KEYS}

    def make(meta):
        def step():
            out = render(L, meta)
            outs = list(out[:3])
            torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])
            for v in L.values():
                v.grad = None
            if meta:
                out[3].means2d.grad = None
        return step
    return make(False), make(True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=20)
    a = ap.parse_args()
    cam = street("cuda", torch.float32)
    lid = street_lidar_scene("cuda", torch.float32, 128, 3600)

    def cam_render(L, meta):
        return nurec_ops.rasterize_camera(L["means"], L["quats"], L["scales"], L["opacities"], L["features"],
                                          cam["viewmats"], cam["Ks"], cam["width"], cam["height"],
                                          return_meta=meta, means2d_grad=meta)

    def lid_render(L, meta):
        return nurec_ops.rasterize_lidar(L["means"], L["quats"], L["scales"], L["opacities"], L["features"],
                                         lid["viewmats"], *lid["model"], return_meta=meta, means2d_grad=meta)

    rows = []
    for name, render, sc in (("street camera 1920x1080", cam_render, cam), ("street lidar 128x3600", lid_render, lid)):
        off, on = steps(render, sc)
        for _ in range(3):
            off(), on()
        torch.cuda.synchronize()
        t = {"off": [], "on": []}
        for _ in range(a.rounds):
            t["off"].append(back_to_back_us(off, calls=a.calls, warmup=2) / 1e3)
            t["on"].append(back_to_back_us(on, calls=a.calls, warmup=2) / 1e3)
        m_off, m_on = statistics.median(t["off"]), statistics.median(t["on"])
        rows.append([name, f"{m_off:.3f}", f"{m_on:.3f}", f"{100 * (m_on / m_off - 1):+.1f}%"])
    print(table(rows, ["scene", "fwd+bwd ms (no meta)", "fwd+bwd ms (meta + means2d grad)", "cost"]))


if __name__ == "__main__":
    main()
