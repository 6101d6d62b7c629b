"""The camera's binning ways side by side (tiles/tiles.cu's KeyBits): each
scene's fwd+bwd with the entries keyed by tile | the depth's 32 bits
(`depth`: one sort of 8-byte keys over the entries, no sort of the items),
by tile alone after a depth sort of the items (`tile`: 2-byte keys), and as
the library picks (`default`: depth keys up to a capacity of 2^21 entries,
NUREC_OPS_TILES_DEPTH_KEYS_MAX), interleaved in one process (both ways give
the same bits: tests/test_op_registry.py's BINNING_WAYS). Per way: the
median of --rounds rounds of back-to-back calls, and one call's device time
(the sum of its kernels and memsets), launches and memsets. A maintainer's
tool for the default (benchmarks/RESULTS.md says what it was set from).

    python3 benchmarks/device/bench_binning.py [--scenes "garden 648 x3,street 960x540"] [--rounds 5]
"""
import argparse
import os
import statistics

import torch

import _paths  # noqa: F401  (benchmarks/ and the repository on sys.path)
import nurec_ops  # noqa: E402,F401
from bench_builds import make_step  # noqa: E402
from bench_parts import first_cameras, rescaled  # noqa: E402
from bench_rasterize_camera import garden, street  # noqa: E402
from timing import back_to_back_us, kernel_profile  # noqa: E402

# read by the binning at each call (tiles/tiles.cu's env_or)
WAYS = {"default": {},
        "depth": {"NUREC_OPS_TILES_DEPTH_KEYS_MAX": str(1 << 40)},
        "tile": {"NUREC_OPS_TILES_DEPTH_KEYS_MAX": "0"}}
KNOBS = ("NUREC_OPS_TILES_DEPTH_KEYS_MAX", "NUREC_OPS_TILES_TILE_KEYS")


def set_way(name):
    for k in KNOBS:
        os.environ.pop(k, None)
    os.environ.update(WAYS[name])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenes", default="garden 648 x1,garden 648 x3,street 960x540,street 1920x1080")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20)
    a = ap.parse_args()
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}", flush=True)
    g1 = garden("cuda", torch.float32, 1)
    st = street("cuda", torch.float32)
    scenes = {"garden 648 x1": first_cameras(g1, 1), "garden 648 x3": g1, "street 960x540": rescaled(st, 0.5),
              "street 1920x1080": st}
    keep = [k.strip() for k in a.scenes.split(",")]
    scenes = {n: sc for n, sc in scenes.items() if any(n.startswith(k) for k in keep)}
    ways = list(WAYS)
    for name, sc in scenes.items():
        step = make_step(sc, False, "off")
        res = {w: [] for w in ways}
        prof = {}
        for w in ways:
            set_way(w)
            _, dev, launches, memsets, _ = kernel_profile(step, calls=5, warmup=3)
            prof[w] = f"{dev:.1f} us of kernels, {launches} launches + {memsets} memsets"
        for rnd in range(a.rounds):
            for w in (ways if rnd % 2 == 0 else ways[::-1]):
                set_way(w)
                res[w].append(back_to_back_us(step, calls=a.calls, warmup=3) / 1e3)
        set_way("default")
        print(f"{name}: " + "; ".join(f"{w} {statistics.median(v):.3f} ms ({min(v):.3f}-{max(v):.3f}; {prof[w]})"
                                      for w, v in res.items()), flush=True)


if __name__ == "__main__":
    main()
