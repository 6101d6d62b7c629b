#!/usr/bin/env python3
"""A picture of one or more step traces (the Chrome traces nurec_ops.diagnose
writes), stacked on one time scale, so a before/after comparison is one PNG:

    python3 examples/trace_picture.py out.png before=diagnose_trace.json after=other.json [--steps 2] [--skip 0]

Each panel shows, over the recorded steps (the diagnosis's step markers):
- cpu: the training step's NVTX ranges (collect, camera, lidar, backward,
  optimizer), coloured; host syncs as red ticks below them;
- gpu: every kernel, copy and fill, coloured by the range whose CPU code
  launched it (grey: outside them); white is the GPU idle.
The title line gives the span drawn, its GPU busy fraction and its syncs.
No dependency beyond torch (examples/png.py writes the file).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import png  # noqa: E402
from nurec_ops.diagnose.figures import STEP_PREFIX  # noqa: E402
from nurec_ops.diagnose.trace import Trace, covered, merge_intervals  # noqa: E402

# range name fragment -> colour; the first that matches a range's name wins
RANGES = [("collect", (0.95, 0.55, 0.1)), ("camera", (0.2, 0.45, 0.9)), ("lidar", (0.2, 0.7, 0.3)),
          ("backward", (0.6, 0.3, 0.75)), ("optimizer", (0.45, 0.45, 0.45)), ("all_reduce", (0.8, 0.7, 0.1))]
OTHER = (0.75, 0.75, 0.75)
# kernels whose launch is in no coloured range (a CUDA graph replay launches
# them all at once) are coloured by their name when it tells
KERNELS = [("backward", "backward"), ("rl_", "lidar"), ("rc_", "camera"), ("collect", "collect"), ("track_poses", "collect"),
           ("foreach", "optimizer"), ("adam", "optimizer")]
SYNC = (0.85, 0.1, 0.1)
WIDTH, LEFT, RIGHT = 1400, 50, 20
ROW, GAP = 22, 6


def _colour(name):
    for frag, c in RANGES:
        if frag in name:
            return c
    return None


def _window(tr, steps, skip=0):
    marks = sorted((e for n, e in tr.annotations.items() if n.startswith(STEP_PREFIX)), key=lambda e: e.ts)[skip:]
    if not marks:
        raise SystemExit(f"trace_picture: no {STEP_PREFIX}* step markers in the trace (a nurec_ops.diagnose trace?)")
    marks = marks[:steps] if steps else marks
    start, end = marks[0].ts, marks[-1].end
    launched = [g.end for g in tr.gpu if (lambda l: l is not None and start <= l.ts <= end)(tr.launch_of(g))]
    return start, max([end] + launched), len(marks)


def _ranges(tr):
    """(start, end, colour) of the trace's coloured NVTX ranges, innermost
    last (all of them: kernels running in a window may come from before it)."""
    out = []
    for events in tr.cpu_by_tid.values():
        for e in events:
            c = _colour(e.name) if e.cat == "user_annotation" else None
            if c is not None:
                out.append((e.ts, e.end, c))
    return sorted(out, key=lambda r: -(r[1] - r[0]))  # outer ranges first, inner ones drawn over them


def _launch_colour(ranges, ts, kernel_name):
    best = None
    if ts is not None:
        for a, b, c in ranges:  # the innermost (shortest) holding ts wins: ranges go long to short
            if a <= ts <= b:
                best = c
    if best is None:
        low = kernel_name.lower()
        best = next((_colour(r) for frag, r in KERNELS if frag in low), None)
    return best or OTHER


def panel(label, tr, steps, scale_us, skip=0):
    start, end, n = _window(tr, steps, skip)
    ranges = _ranges(tr)
    gpu = [g for g in tr.gpu if g.end >= start and g.ts <= end]
    busy = covered(merge_intervals([(g.ts, g.end) for g in gpu]), start, end) / max(end - start, 1e-9)
    # syncs inside the steps' CPU ranges: not the diagnosis's own (stopping
    # the profiler waits for the GPU, between steps)
    marks = [e for n_, e in tr.annotations.items() if n_.startswith(STEP_PREFIX)]
    syncs = [s for s in tr.syncs if start <= s.ts <= end and any(m.ts <= s.ts <= m.end for m in marks)]
    H = 18 + 3 * ROW + 2 * GAP + 16
    img = torch.ones(H, WIDTH, 3)
    X = lambda t: LEFT + (t - start) / scale_us  # noqa: E731
    png._text(img, 4, 2, f"{label}: {n} steps, {(end - start) / 1e3:.2f} ms, gpu busy {100 * busy:.0f}%, "
                         f"{len(syncs)} syncs", (0, 0, 0))
    y_cpu, y_sync, y_gpu = 18, 18 + ROW + 2, 18 + 2 * ROW + 2 * GAP
    png._text(img, 4, y_cpu + 6, "cpu", (0, 0, 0))
    png._text(img, 4, y_gpu + 6, "gpu", (0, 0, 0))

    def bar(t0, t1, y, h, c):
        x0, x1 = int(max(X(t0), LEFT)), int(min(X(t1), WIDTH - RIGHT))
        if x1 >= x0:
            img[y:y + h, x0:max(x1, x0 + 1)] = torch.tensor(c)

    img[y_gpu:y_gpu + ROW, LEFT:WIDTH - RIGHT] = torch.tensor((0.97, 0.97, 0.97))
    for a, b, c in ranges:
        bar(a, b, y_cpu, ROW, c)
    for s in syncs:
        bar(s.ts, s.end, y_sync, GAP + 4, SYNC)
    for g in gpu:
        launch = tr.launch_of(g)
        bar(g.ts, g.end, y_gpu, ROW, _launch_colour(ranges, launch.ts if launch is not None else None, g.name))
    # time axis: labelled ticks at least ~50 pixels apart
    y_ax = y_gpu + ROW + 2
    step_ms = next(t for t in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1e9) if t * 1e3 / scale_us >= 50)
    t = 0.0
    while start + t * 1e3 <= end:
        x = int(X(start + t * 1e3))
        img[y_ax:y_ax + 4, x:x + 1] = 0
        png._text(img, x - 4, y_ax + 5, f"{t:g}" + (" ms" if t == 0 else ""), (0.3, 0.3, 0.3), scale=1)
        t += step_ms
    return img, end - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("traces", nargs="+", help="label=trace.json")
    ap.add_argument("--steps", type=int, default=2, help="steps drawn from each trace (0: all)")
    ap.add_argument("--skip", type=int, default=0, help="recorded steps to skip first")
    args = ap.parse_args()
    loaded = []
    for item in args.traces:
        label, _, path = item.rpartition("=")
        loaded.append((label or os.path.basename(path), Trace.load(path)))
    spans = [(lambda w: w[1] - w[0])(_window(tr, args.steps, args.skip)) for _, tr in loaded]
    scale = max(spans) / (WIDTH - LEFT - RIGHT)  # us per pixel, shared by every panel
    panels = [panel(label, tr, args.steps, scale, args.skip)[0] for label, tr in loaded]
    legend = torch.ones(16, WIDTH, 3)
    x = LEFT
    for name, c in RANGES + [("other", OTHER), ("sync", SYNC)]:
        legend[4:12, x:x + 10] = torch.tensor(c)
        png._text(legend, x + 14, 3, name, (0, 0, 0))
        x += 14 + 8 * len(name) + 20
    png.write_png(args.out, png.stack_rows(panels + [legend], gap=6))
    print(f"trace_picture: wrote {args.out} ({len(panels)} panels, {scale:.1f} us per pixel)")


if __name__ == "__main__":
    main()
