"""Collects the benchmark street scene (464,000 Gaussians: a static background
and 64 cars on keyframed tracks) at one frame time with nurec_ops, checks it
against the pure-PyTorch reference, and prints what it did and how long it
took; on the GPU if there is one, else on the CPU.

    python examples/collect_demo.py [--device cpu|cuda]
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import nurec_ops  # noqa: E402
from scenes import make_street_scene  # noqa: E402


def timed(fn, device, reps):
    fn()  # warm-up
    if device == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        out = fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return out, (time.perf_counter() - t) / reps * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    dev = args.device
    s = make_street_scene(dev)
    inputs = (s["means"], s["quats"], s["log_scales"], s["opacity_logits"], s["track_ids"],
              s["key_poses"], s["key_times"], s["track_ranges"], s["query_times"])
    reps = 100 if dev == "cuda" else 3
    with torch.no_grad():
        fused, t_fused = timed(lambda: nurec_ops.collect(*inputs), dev, reps)
        ref, t_ref = timed(lambda: nurec_ops.reference.collect(*inputs), dev, reps)
    poses, inside = nurec_ops.interpolate_track_poses(s["key_poses"], s["key_times"], s["track_ranges"], s["query_times"])
    err = max((a - b).abs().max().item() for a, b in zip(fused, ref))
    n, t = s["means"].shape[0], s["track_ranges"].shape[0]
    on_track = (s["track_ids"] >= 0).sum().item()
    hidden = (fused[3] == 0).sum().item()
    print(f"device: {torch.cuda.get_device_name() if dev == 'cuda' else 'cpu'}")
    print(f"scene: {n} Gaussians ({n - on_track} static, {on_track} on {t} actor tracks), "
          f"{s['key_poses'].shape[0]} key poses")
    print(f"query time {s['query_times'].item()} us: {inside.sum().item()} of {t} tracks inside their key range; "
          f"{hidden} Gaussians of tracks outside it get opacity 0")
    print(f"collected means/quats/scales/opacities {tuple(fused[0].shape)}/{tuple(fused[1].shape)}/"
          f"{tuple(fused[2].shape)}/{tuple(fused[3].shape)}")
    print(f"nurec_ops.collect: {t_fused:.3f} ms per call (mean of {reps}, wall clock)")
    print(f"reference (pure PyTorch): {t_ref:.3f} ms per call -> {t_ref / t_fused:.1f}x")
    print(f"max |fused - reference| = {err:.2e}")


if __name__ == "__main__":
    main()
