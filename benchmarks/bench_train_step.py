"""Benchmark of the whole training step: examples/train_street.py
trained three ways from the same seed on one CUDA device, in one run:

- baseline: the reference collection (nurec_ops.reference.collect, pure
  PyTorch) around nurec_ops's rasterizers (``--fused raster``): what a team
  had before fusing the collection, since a dense PyTorch rasterizer cannot
  render 1080p;
- fused: every op swapped in (``--fused``);
- fused + graph: the whole step (collect, both renders, backward, Adam)
  captured once in a CUDA graph and replayed (``--fused --graph``).

Each run ends with its last 5 steps under nurec_ops.diagnose (``--diagnose``),
whose reports are printed (the diagnosis's before/after) and whose GPU busy
fraction goes in the table. Step time is the median over the timed steps
(CUDA events between consecutive step starts, no sync in the loop); host
syncs are counted over the same steps under set_sync_debug_mode("warn").
Quality (camera PSNR over all frames, lidar range error, actor pose error)
is evaluated after training: the fused runs must match the baseline's within
noise. Targets: 0 syncs (fused), GPU busy >= 95% (fused + graph), fused +
graph >= 3x faster per step than the baseline.

    python benchmarks/bench_train_step.py [--size large] [--steps 1000] [--only baseline,fused,graph]
"""
import argparse
import os
import sys
import tempfile

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, ROOT)
import train_street  # noqa: E402

CONFIGS = {
    "baseline": ["--fused", "raster"],
    "fused": ["--fused"],
    "graph": ["--fused", "--graph"],
}
LABEL = {"baseline": "reference collect + fused raster", "fused": "fused", "graph": "fused + CUDA graph"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="large")
    ap.add_argument("--steps", type=int, default=None, help="default: the example's (1000 for large)")
    ap.add_argument("--only", default=",".join(CONFIGS))
    ap.add_argument("--device", default="cuda", help="cuda; cpu only to try the script (no graph, no GPU figures)")
    ap.add_argument("--out", default=None, help="where the runs write (default: a temporary folder)")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench_train_step: needs a CUDA device (or --device cpu --only baseline,fused to try it)")
    out = args.out or tempfile.mkdtemp(prefix="bench_train_step_")
    steps = [] if args.steps is None else ["--steps", str(args.steps)]
    rows = {}
    for name in args.only.split(","):
        print(f"\n===== {name}: {LABEL[name]} =====", flush=True)
        argv = ["--size", args.size, "--device", args.device, "--quiet", "--diagnose",
                "--out", os.path.join(out, name)] + steps + CONFIGS[name]
        rows[name] = train_street.main(argv)
        if args.device == "cuda":
            torch.cuda.empty_cache()

    where = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    print(f"\nTraining step, {args.size} street, {where} (runs under {out})")
    head = ("config", "step ms", "vs baseline", "syncs/step", "GPU busy", "kernels/step",
            "PSNR dB", "lidar err m", "pose err m / deg")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    base = rows.get("baseline", {}).get("step_ms")
    for name, m in rows.items():
        dg = m.get("diagnosis") or {}
        busy = dg.get("gpu_busy")
        kps = dg.get("kernels_per_step") or []
        cells = (LABEL[name], f"{m['step_ms']:.3f}",
                 f"{base / m['step_ms']:.2f}x" if base else "-",
                 f"{m['syncs_per_step']:.2f}",
                 f"{100 * busy:.1f}%" if busy is not None else "?",
                 f"{sum(kps) / len(kps):.0f}" if kps else "?",
                 f"{m.get('psnr_start', float('nan')):.2f} -> {m.get('psnr_final', float('nan')):.2f}",
                 f"{m.get('lidar_range_error_start', float('nan')):.3f} -> "
                 f"{m.get('lidar_range_error_final', float('nan')):.3f}",
                 f"{m['pose_error_final'][0]:.3f} / {m['pose_error_final'][1]:.2f}")
        print("| " + " | ".join(cells) + " |")
    print("targets: 0 syncs (fused); GPU busy >= 95% (fused + graph); fused + graph >= 3x the baseline")


if __name__ == "__main__":
    main()
