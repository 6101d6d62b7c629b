#!/usr/bin/env python3
"""The rig step's optimizer: is a fused Adam of our own worth
building? torch's Adam over the rig's parameters (2M Gaussians: means,
quats, log_scales, opacity_logits, SH degree 3 = 59 values each, and the
actors' key poses), timed as the step runs it and as it could:

- foreach (torch's default, what bench_rig_step.py uses), fused=True, and
  fused + capturable replayed in a CUDA graph: mean of back-to-back steps,
  device time and launches per step from the profiler;
- the floor of any one-pass Adam: the bytes it must move (read the value,
  its gradient and both moments, write the value and both moments: 7 x 4
  bytes per float32 value) at this chip's measured copy bandwidth;
- the floor of a visibility-masked Adam (gsplat's SelectiveAdam: only the
  Gaussians some sensor of the step sees), at the visible fraction of the
  rig's own step (the Gaussians with a non-zero gradient after one
  forward and backward of bench_rig_step's step).

The rule: build our own only if it wins, i.e. only if the best
torch variant is well above the floor (what a perfect single launch could
save is `best - floor`; masked, `best - visible x floor`).

    python3 benchmarks/bench_adam.py             # H200: 2M Gaussians, the 5-camera rig
    python3 benchmarks/bench_adam.py --smoke     # CPU: 20k Gaussians, timing by wall clock
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import bench_rig_step as rig  # noqa: E402
from timing import back_to_back_us, copy_bandwidth_gbs, graph_ms, kernel_profile, step_ms, table  # noqa: E402


class _NoStep:
    """An optimizer stand-in for one forward and backward of the rig step."""

    def __init__(self, params):
        self.params = params

    def zero_grad(self, set_to_none=False):
        for p in self.params:
            if p.grad is not None:
                p.grad.zero_()

    def step(self):
        pass


def rig_gradients(device, N, cameras, scale):
    """The rig's parameters with the gradients of one step, and the fraction
    of Gaussians whose gradient is non-zero (what a masked Adam updates)."""
    params, D = rig.build(device, torch.float32, N, cameras, scale)
    rig.step_fn(params, D, _NoStep(list(params.values())))()
    per_gaussian = [k for k in params if k != "key_poses"]
    touched = torch.zeros(params["means"].shape[0], dtype=torch.bool, device=device)
    for k in per_gaussian:
        g = params[k].grad
        touched |= (g.reshape(g.shape[0], -1) != 0).any(1)
    return params, float(touched.float().mean())


def variants(device):
    out = [("foreach (default)", dict(foreach=True)), ("fused", dict(fused=True))]
    if device.type == "cuda":
        out.append(("fused, capturable, CUDA graph", dict(fused=True, capturable=True)))
    return out


def measure(params, device, steps):
    rows = []
    leaves = list(params.values())
    for name, kw in variants(device):
        copies = [p.detach().clone().requires_grad_(True) for p in leaves]
        for c, p in zip(copies, leaves):
            c.grad = p.grad.clone()
        opt = torch.optim.Adam(copies, lr=1e-4, **kw)
        opt.step()  # the moments exist from here on
        if device.type != "cuda":
            us = 1e3 * step_ms(opt.step, steps, warmup=0, cuda=False)
            rows.append(dict(name=name, us=us, device_us=float("nan"), launches=0))
            continue
        if kw.get("capturable"):
            us = 1e3 * graph_ms(opt.step, steps)
        else:
            us = back_to_back_us(opt.step, calls=steps)
        _, device_us, launches, memsets, _ = kernel_profile(opt.step, calls=5, warmup=2)
        rows.append(dict(name=name, us=us, device_us=device_us, launches=launches + memsets))
        del opt, copies
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gaussians", type=float, default=2e6)
    ap.add_argument("--cameras", type=int, default=5)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--smoke", action="store_true", help="CPU, 20k Gaussians, 1/20 images")
    a = ap.parse_args()
    device = torch.device("cpu" if a.smoke else "cuda")
    if a.smoke:
        a.gaussians, a.scale, a.steps = 2e4, 0.05, 3
    params, visible = rig_gradients(device, int(a.gaussians), a.cameras, a.scale)
    values = sum(p.numel() for p in params.values())
    nbytes = 7 * 4 * values
    rows = measure(params, device, a.steps)
    if device.type == "cuda":
        gbs, _ = copy_bandwidth_gbs(nbytes // 2)
        floor_us = nbytes / (gbs * 1e9) * 1e6
    else:
        gbs, floor_us = float("nan"), float("nan")
    N = params["means"].shape[0]
    print(f"Adam over {N:,} Gaussians + key poses: {values:,} float32 values, {nbytes / 1e9:.2f} GB moved per step; "
          f"copy bandwidth {gbs:.0f} GB/s; floor {floor_us:.0f} us; visible fraction {visible:.3f} "
          f"(masked floor {visible * floor_us:.0f} us)")
    print(table([[r["name"], f"{r['us']:.0f}", f"{r['device_us']:.0f}", r["launches"],
                  f"{r['us'] / floor_us:.2f}x" if floor_us == floor_us else "-"] for r in rows],
                ["Adam", "us per step", "device us", "launches", "/ floor"]))
    best = min(r["us"] for r in rows)
    if floor_us == floor_us:
        print(f"a perfect one-pass Adam would save {best - floor_us:.0f} us per step; "
              f"a perfect masked one {best - visible * floor_us:.0f} us")


if __name__ == "__main__":
    main()
