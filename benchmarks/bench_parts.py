"""The camera's long lists cut into parts, swept: fwd+bwd of scenes of
different tile counts (gsplat's garden at 648x420 and 1296x840 with 1 and 3
cameras, the street camera at 960x540 and 1920x1080) with the number of
parts S in --parts (0: none), segment_min as set (512), interleaved in one
process: medians of --rounds rounds, each the mean of back-to-back calls.
Benchmarks/RESULTS.md, session 18, has its first table.

    python3 benchmarks/bench_parts.py [--parts 16,8,6,4,0] [--rounds 3] [--calls 20]
"""
import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nurec_ops  # noqa: E402,F401
from bench_builds import make_step  # noqa: E402
from bench_rasterize_camera import garden, street  # noqa: E402
from timing import back_to_back_us  # noqa: E402

RC = sys.modules["nurec_ops.rasterize_camera"]  # _SEGMENTS: read at each call


def first_cameras(sc, n):
    d = dict(sc)
    d["viewmats"], d["Ks"] = sc["viewmats"][:n].contiguous(), sc["Ks"][:n].contiguous()
    return d


def rescaled(sc, s):
    d = dict(sc)
    K = sc["Ks"].clone()
    K[:, :2, :] *= s
    d["Ks"], d["width"], d["height"] = K, int(sc["width"] * s), int(sc["height"] * s)
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="16,8,6,4,0")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=20)
    a = ap.parse_args()
    S = [int(x) for x in a.parts.split(",")]
    g1, g2 = garden("cuda", torch.float32, 1), garden("cuda", torch.float32, 2)
    st = street("cuda", torch.float32)
    scenes = {"garden 648 x1": first_cameras(g1, 1), "garden 648 x3": g1, "garden 1296 x1": first_cameras(g2, 1),
              "street 960x540": rescaled(st, 0.5), "street 1920x1080": st, "garden 1296 x3": g2}
    default = RC._SEGMENTS
    for name, sc in scenes.items():
        tiles = sc["viewmats"].shape[0] * ((sc["width"] + 15) // 16) * ((sc["height"] + 15) // 16)
        res = {s: [] for s in S}
        for rnd in range(a.rounds):
            for s in (S if rnd % 2 == 0 else S[::-1]):
                RC._SEGMENTS = s
                res[s].append(back_to_back_us(make_step(sc, False, "off"), calls=a.calls) / 1e3)
        RC._SEGMENTS = default
        print(f"{name} ({tiles} tiles): " + " ".join(f"S={s}: {statistics.median(v):.3f}" for s, v in res.items()),
              flush=True)


if __name__ == "__main__":
    main()
