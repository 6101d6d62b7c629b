"""One line per build, for comparing kernel variants built side by side
(benchmarks/device/device_variants.sh): fwd+bwd of the four benchmark
scenes (street camera 1080p + depth, gsplat's garden at 648x420 and
1944x1260 x 3 cameras, the street lidar 128 x 3600) and of SPEC 8's absgrad
mode (meta + means2d gradient + absgrad) on the street camera and lidar,
then each case's costliest kernels (device time per call, every launch of a
kernel counted).

Each figure is the median over rounds of the mean of back-to-back calls
(CUDA events); rounds alternate their order. Run it in each build's tree,
one process per build, and twice in opposite orders over the builds: the
H200's figures drift by ~0.3% between processes.

    python3 benchmarks/device/bench_builds.py TAG [--rounds 5] [--calls 15] [--kernels 0]
"""
import argparse
import statistics

import torch

import _paths  # noqa: F401  (benchmarks/ and the repository on sys.path)
import nurec_ops  # noqa: E402
from bench_rasterize_camera import garden, street  # noqa: E402
from bench_rasterize_lidar import street_lidar_scene  # noqa: E402
from timing import back_to_back_us, kernel_totals  # noqa: E402

KEYS = ("means", "quats", "scales", "opacities", "features")


def make_step(sc, lidar, mode):
    """fwd+bwd of one scene, mode "off" (the plain call) or "abs"."""
    L = {k: sc[k].detach().clone().requires_grad_(True) for k in KEYS}
    flags = dict(return_meta=mode != "off", means2d_grad=mode != "off", absgrad=mode == "abs")

    def render():
        if lidar:
            return nurec_ops.rasterize_lidar(L["means"], L["quats"], L["scales"], L["opacities"], L["features"],
                                             sc["viewmats"], *sc["model"], **flags)
        return nurec_ops.rasterize_camera(L["means"], L["quats"], L["scales"], L["opacities"], L["features"],
                                          sc["viewmats"], sc["Ks"], sc["width"], sc["height"], **flags)
    cot = [torch.randn_like(o) for o in render()[:3]]

    def step():
        out = render()
        torch.autograd.backward(list(out[:3]), cot)
        for v in L.values():
            v.grad = None
        if mode != "off":
            out[3].means2d.grad = None
    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tag", help="the build's name, printed at the start of each line")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=15)
    ap.add_argument("--kernels", type=int, default=1, help="0: skip the per-kernel lines")
    a = ap.parse_args()
    print(f"[{a.tag}] library: {nurec_ops._library.LIBRARY_PATH}", flush=True)
    torch.manual_seed(0)
    scenes = {"street": (street("cuda", torch.float32), False), "g648": (garden("cuda", torch.float32, 1), False),
              "g1944": (garden("cuda", torch.float32, 3), False),
              "lidar": (street_lidar_scene("cuda", torch.float32, 128, 3600), True)}
    cases = [(n, m) for n in scenes for m in (("off", "abs") if n in ("street", "lidar") else ("off",))]
    steps = {c: make_step(*scenes[c[0]], c[1]) for c in cases}
    for f in steps.values():
        for _ in range(3):
            f()
    torch.cuda.synchronize()
    t = {c: [] for c in cases}
    for r in range(a.rounds):
        for c in (cases if r % 2 == 0 else cases[::-1]):
            t[c].append(back_to_back_us(steps[c], calls=a.calls, warmup=2) / 1e3)
    med = {c: statistics.median(v) for c, v in t.items()}
    line = " ".join(f"{n}{'' if m == 'off' else '_abs'}={med[(n, m)]:.3f}" for n, m in cases)
    cost = lambda n: 100 * (med[(n, "abs")] / med[(n, "off")] - 1)  # noqa: E731
    print(f"[{a.tag}] fwd+bwd ms: {line} | absgrad's cost: street {cost('street'):+.1f}% lidar {cost('lidar'):+.1f}%",
          flush=True)
    if a.kernels:
        for c in cases:
            if c[0] == "g1944":
                continue
            # each kernel's device time per call, all its launches (a sort's passes) summed
            top = sorted(kernel_totals(steps[c], calls=10, warmup=2).items(), key=lambda kv: -kv[1])[:8]
            print(f"[{a.tag}] {c[0]}/{c[1]} us: " + ", ".join(f"{k[:40]}={v:.1f}" for k, v in top), flush=True)


if __name__ == "__main__":
    main()
