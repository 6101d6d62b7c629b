"""What gsplat's per-camera colours [C, N, D] (its trainer's appearance
module) cost on nurec_ops' front end, against the same colours as [N, D].
Rendered one op call a camera (C binnings of N Gaussians where [N, D]
pays one of C x N items) they cost 1.3-2.8x the fwd+bwd at C = 3 on the
H200; they are now the op's features per camera, one call, each item
reading its own row. Forward and fwd+bwd (with gsplat's
``means2d`` gradient, as DefaultStrategy reads it), ms per call: the
median over rounds of the mean of back-to-back calls, the two forms
interleaved.

    python3 benchmarks/bench_frontend_per_camera.py [--rounds 5] [--calls 15]
"""
import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_rasterize_camera import garden  # noqa: E402
from timing import back_to_back_us, table  # noqa: E402

from nurec_ops.gsplat import rasterization  # noqa: E402

KEYS = ("means", "quats", "scales", "opacities")


def steps(sc, per_camera):
    C = sc["viewmats"].shape[0]
    L = {k: sc[k].detach().clone().requires_grad_(True) for k in KEYS}
    colors = sc["features"][:, :3].contiguous()
    colors = (colors[None].expand(C, -1, -1).contiguous() if per_camera else colors).requires_grad_(True)

    def render():
        return rasterization(L["means"], L["quats"], L["scales"], L["opacities"], colors, sc["viewmats"], sc["Ks"],
                             sc["width"], sc["height"], packed=False)

    def forward():
        with torch.no_grad():
            render()

    def fwd_bwd():
        img, alpha, meta = render()
        (img.sum() + alpha.sum()).backward()
        for t in list(L.values()) + [colors]:
            t.grad = None
    return forward, fwd_bwd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=15)
    args = ap.parse_args()
    rows = []
    for name, sc in (("garden 648x420 x3", garden("cuda", torch.float32, 1)),
                     ("garden 1944x1260 x3", garden("cuda", torch.float32, 3))):
        fns = {pc: steps(sc, pc) for pc in (False, True)}
        got = {(pc, k): [] for pc in (False, True) for k in (0, 1)}
        for r in range(args.rounds):
            for pc in ((False, True) if r % 2 == 0 else (True, False)):
                for k in (0, 1):
                    got[pc, k].append(back_to_back_us(fns[pc][k], calls=args.calls, warmup=3) / 1e3)
        med = {key: statistics.median(v) for key, v in got.items()}
        rows.append((name, sc["viewmats"].shape[0], f"{med[False, 0]:.3f}", f"{med[True, 0]:.3f}",
                     f"{med[True, 0] / med[False, 0]:.2f}x", f"{med[False, 1]:.3f}", f"{med[True, 1]:.3f}",
                     f"{med[True, 1] / med[False, 1]:.2f}x"))
    print(table(rows, ("scene", "C", "fwd [N,D] ms", "fwd [C,N,D] ms", "ratio", "fwd+bwd [N,D] ms",
                       "fwd+bwd [C,N,D] ms", "ratio")))


if __name__ == "__main__":
    main()
