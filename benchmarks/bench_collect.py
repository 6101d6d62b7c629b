"""Benchmark of the fused collection on the street scene:
nurec_ops.collect vs the eager reference and torch.compile of it, forward and
forward+backward, on one CUDA device. Prints a table; see timing.py for what
each column means.

    python benchmarks/bench_collect.py [--no-compile] [--fused-only] [--dtype float32]
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nurec_ops  # noqa: E402
from nurec_ops import reference  # noqa: E402
from scenes import make_street_scene  # noqa: E402
from timing import (back_to_back_us, copy_time_us, host_profile, host_us,  # noqa: E402
                    kernel_durations, kernel_profile, table)

GAUSSIAN_INPUTS = ("means", "quats", "log_scales", "opacity_logits")


def forward_bytes(scene):
    """Fewest bytes the forward must move: each Gaussian input read once, each
    output written once (the tiny track arrays are left out)."""
    n = scene["means"].shape[0]
    e = scene["means"].element_size()
    return n * (e * (3 + 4 + 3 + 1) + scene["track_ids"].element_size() + e * (3 + 4 + 3 + 1))


WINDOWS, WINDOW_GAP_S = 20, 0.25


def host_figures(run):
    """Back to back and host us per call, each the mean of 100 calls.

    A call over 1 ms: one such mean. A call under 1 ms (host-bound): the
    median of WINDOWS such means taken WINDOW_GAP_S apart, after 200 calls
    of warm-up, with the spread, and an eager ``add_`` on a 16-element
    tensor timed in the same windows as a gauge of the host's speed. Why
    spread over seconds: on the H200 machine the host's speed changes over
    time within one process (an eager add_ took 7.5 us of host time in some
    stretches and 10.5 us in others, for seconds each: benchmarks/RESULTS.md),
    so a few means taken within milliseconds report whichever stretch they
    fell in."""
    if host_us(run, calls=3, warmup=1) > 1000:
        return dict(b2b=back_to_back_us(run), host=host_us(run))
    back_to_back_us(run, calls=200, warmup=0)
    gauge = torch.zeros(16, device="cuda")
    b2bs, hosts, gauges = [], [], []
    for w in range(WINDOWS):
        if w:
            time.sleep(WINDOW_GAP_S)
        b2bs.append(back_to_back_us(run, warmup=0))
        hosts.append(host_us(run, warmup=0))
        gauges.append(host_us(lambda: gauge.add_(1), warmup=0))
    return dict(b2b=statistics.median(b2bs), host=statistics.median(hosts), b2b_range=(min(b2bs), max(b2bs)),
                gauge=statistics.median(gauges), gauge_range=(min(gauges), max(gauges)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--host-profile", action="store_true", help="print where the fused call's host time goes")
    ap.add_argument("--fused-only", action="store_true",
                    help="leave the baselines out (for comparing kernel variants; not for reporting)")
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    scene = make_street_scene("cuda", dtype)
    params = [scene[k].clone().requires_grad_(True) for k in GAUSSIAN_INPUTS]
    key_poses = scene["key_poses"].clone().requires_grad_(True)
    rest = (scene["track_ids"],)
    keys = (scene["key_times"], scene["track_ranges"], scene["query_times"])
    cot = None

    def fwd(f):
        with torch.no_grad():
            return f(*params, *rest, key_poses, *keys)

    def fwd_bwd(f):
        # autograd.grad, not backward: no .grad accumulation kernels in the count
        out = f(*params, *rest, key_poses, *keys)
        torch.autograd.grad(out, params + [key_poses], cot)

    impls = [("nurec_ops (fused)", nurec_ops.collect)]
    if not args.fused_only:
        impls.append(("reference (eager)", reference.collect))
    if not args.no_compile and not args.fused_only:
        impls.append(("reference (torch.compile)", torch.compile(reference.collect)))
    with torch.no_grad():
        cot = [torch.randn_like(o) for o in nurec_ops.collect(*params, *rest, key_poses, *keys)]

    nbytes = forward_bytes(scene)
    rows = []
    results = {}
    per_call = {}  # back to back, us per call
    # opt-in kernel variants, set per process (NUREC_OPS_PDL=1: programmatic dependent launch)
    toggles = [name for name, var in (("PDL", "NUREC_OPS_PDL"),)
               if os.environ.get(var) == "1"]
    label = f" [{', '.join(toggles)}]" if toggles else ""
    impls = [(n + (label if n.startswith("nurec") else ""), f) for n, f in impls]
    runs = [(name, pass_name, run) for name, f in impls
            for pass_name, run in (("forward", lambda f=f: fwd(f)), ("fwd+bwd", lambda f=f: fwd_bwd(f)))]
    # Host-side figures first, before torch.profiler runs in this process
    # (copy_time_us and kernel_profile use it): once it has, CUPTI stays
    # attached (Kineto does not tear it down, see pytorch/pytorch#144455) and
    # every later launch costs more host time.
    host_side = {(name, pass_name): host_figures(run) for name, pass_name, run in runs}
    copy_us = copy_time_us(nbytes)  # the profiler (after the host figures)
    for name, pass_name, run in runs:
        dev_us, sum_us, launches, memsets, _ = kernel_profile(run)
        b2b, host = host_side[(name, pass_name)]["b2b"], host_side[(name, pass_name)]["host"]
        bw = nbytes / (dev_us * 1e-6) / 1e9 if pass_name == "forward" else float("nan")
        results[(name, pass_name)] = sum_us
        per_call[(name, pass_name)] = b2b
        rows.append([name, pass_name, f"{dev_us:.1f}", f"{sum_us:.1f}", f"{b2b:.1f}", f"{host:.1f}", launches, memsets,
                     f"{bw:.0f}" if pass_name == "forward" else "-"])
    print(f"\nstreet scene: N={scene['means'].shape[0]} Gaussians, T={scene['track_ranges'].shape[0]} tracks, "
          f"P={scene['key_poses'].shape[0]} keys, {args.dtype}, {torch.cuda.get_device_name()}")
    print(f"forward moves at least {nbytes / 1e6:.1f} MB; device-to-device copy of those bytes: "
          f"{copy_us:.1f} us device time, {nbytes / (copy_us * 1e-6) / 1e9:.0f} GB/s\n")
    print(table(rows, ["impl", "pass", "span us", "kernel sum us", "back-to-back us/call", "host us/call",
                       "kernels", "memsets", "fwd GB/s"]))
    for (name, pass_name), h in host_side.items():
        if "b2b_range" in h:
            print(f"{name} {pass_name}: back to back over {WINDOWS} windows {WINDOW_GAP_S} s apart: median "
                  f"{h['b2b']:.1f}, min {h['b2b_range'][0]:.1f}, max {h['b2b_range'][1]:.1f} us per call; an eager "
                  f"add_ in the same windows: median {h['gauge']:.1f}, min {h['gauge_range'][0]:.1f}, "
                  f"max {h['gauge_range'][1]:.1f} us of host time")
    print(f"(nurec_ops forward back to back once torch.profiler has run in this process: "
          f"{back_to_back_us(runs[0][2]):.1f} us per call; the table's figures were taken before)")
    fused_f = results[(impls[0][0], "forward")]
    fused_fb = results[(impls[0][0], "fwd+bwd")]
    print()
    for name, _ in impls[1:]:
        print(f"speed-up vs {name}: forward {results[(name, 'forward')] / fused_f:.0f}x, "
              f"fwd+bwd {results[(name, 'fwd+bwd')] / fused_fb:.0f}x (kernel sum); per call back to back: forward "
              f"{per_call[(name, 'forward')] / per_call[(impls[0][0], 'forward')]:.0f}x, fwd+bwd "
              f"{per_call[(name, 'fwd+bwd')] / per_call[(impls[0][0], 'fwd+bwd')]:.0f}x")
    print(f"fused forward at {copy_us / fused_f * 100:.0f}% of copy bandwidth (kernel sum) ({nbytes / (fused_f * 1e-6) / 1e9:.0f} "
          f"GB/s; the copy: {nbytes / (copy_us * 1e-6) / 1e9:.0f} GB/s, device time)")
    print("kernel durations, fused forward:", {k[:40]: round(v, 1) for k, v in
                                                kernel_durations(lambda: fwd(impls[0][1])).items()})
    print("kernel durations, fused fwd+bwd:", {k[:40]: round(v, 1) for k, v in
                                                kernel_durations(lambda: fwd_bwd(impls[0][1])).items()})
    if args.host_profile:
        print(host_profile(lambda: fwd(nurec_ops.collect)))
        print(host_profile(lambda: fwd_bwd(nurec_ops.collect)))


if __name__ == "__main__":
    main()
