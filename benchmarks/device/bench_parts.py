"""The camera's long lists cut into parts, swept: fwd+bwd of scenes of
different tile counts (gsplat's garden at 648x420 and 1296x840 with 1 and 3
cameras, the street camera at 960x540 and 1920x1080, and 1920x1080 with a
second camera 3 m ahead) with the number of
parts S in --parts (0: none), segment_min as set (512) or per entry
(S:m), interleaved in one process: medians of --rounds rounds, each the mean
of back-to-back calls. --no-budget lifts the parts' memory budget
(_SEGMENT_BYTES), which otherwise turns the cut off for large images; --scenes picks scenes
by name prefix. A maintainer's tool for the cut's defaults (benchmarks/RESULTS.md says what
they were set from).

    python3 benchmarks/device/bench_parts.py [--parts 16,8,6,4,0 | 16:512,16:256] [--no-budget]
        [--scenes "garden 648 x3,street 1920x1080"] [--rounds 3] [--calls 20]
"""
import argparse
import statistics
import sys

import torch

import _paths  # noqa: F401  (benchmarks/ and the repository on sys.path)
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


def with_camera_ahead(sc, metres):
    """sc's camera and a second one `metres` further along its view axis
    (a car's two frames, one call)."""
    d = dict(sc)
    V2 = sc["viewmats"].clone()
    V2[:, 2, 3] -= metres  # world points `metres` closer in camera z
    d["viewmats"] = torch.cat([sc["viewmats"], V2]).contiguous()
    d["Ks"] = torch.cat([sc["Ks"], sc["Ks"]]).contiguous()
    return d


def parse_config(text):
    """'S' or 'S:m' (parts, segment_min; m defaults to the module's)."""
    S, _, m = text.partition(":")
    return int(S), (int(m) if m else None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="16,8,6,4,0")
    ap.add_argument("--no-budget", action="store_true")
    ap.add_argument("--scenes", default="")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=20)
    a = ap.parse_args()
    configs = [parse_config(x) for x in a.parts.split(",")]
    g1, g2, g3 = (garden("cuda", torch.float32, k) for k in (1, 2, 3))
    st = street("cuda", torch.float32)
    scenes = {"garden 648 x1": first_cameras(g1, 1), "garden 648 x3": g1, "garden 1296 x1": first_cameras(g2, 1),
              "street 960x540": rescaled(st, 0.5), "street 1920x1080": st,
              "street 1920x1080 x2": with_camera_ahead(st, 3.0), "garden 1296 x3": g2,
              "garden 1944 x3": g3}
    if a.scenes:
        keep = [k.strip() for k in a.scenes.split(",")]
        scenes = {n: sc for n, sc in scenes.items() if any(n.startswith(k) for k in keep)}
    default = (RC._SEGMENTS, RC._SEGMENT_MIN, RC._SEGMENT_BYTES)
    if a.no_budget:
        RC._SEGMENT_BYTES = 1 << 50
    for name, sc in scenes.items():
        tiles = sc["viewmats"].shape[0] * ((sc["width"] + 15) // 16) * ((sc["height"] + 15) // 16)
        res = {c: [] for c in configs}
        for rnd in range(a.rounds):
            for c in (configs if rnd % 2 == 0 else configs[::-1]):
                RC._SEGMENTS, RC._SEGMENT_MIN = c[0], default[1] if c[1] is None else c[1]
                res[c].append(back_to_back_us(make_step(sc, False, "off"), calls=a.calls) / 1e3)
        RC._SEGMENTS, RC._SEGMENT_MIN = default[:2]
        label = lambda c: f"S={c[0]}" + ("" if c[1] is None else f":{c[1]}")  # noqa: E731
        print(f"{name} ({tiles} tiles): " + " ".join(f"{label(c)}: {statistics.median(v):.3f}"
                                                     for c, v in res.items()), flush=True)
    RC._SEGMENT_BYTES = default[2]


if __name__ == "__main__":
    main()
