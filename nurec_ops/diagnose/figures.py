"""Turns a recorded trace (plus the syncs and memory the session captured) into
the figures dict that ``nurec_ops.diagnose`` returns. Keys: see
``nurec_ops/diagnose/__init__.py``.

Attribution rules, because they decide what the numbers mean:
- a GPU kernel belongs to the step during which the CPU launched it (the GPU
  may run it later);
- GPU busy time is measured on the GPU timeline over the steps' wall time: from
  the first step's start to the later of the last step's end and the end of the
  last kernel those steps launched (a loop with no syncs still has to wait for
  that work eventually);
- "what the CPU was doing" during a GPU idle gap names the innermost CPU events
  that cover at least half of the gap.
"""
import bisect
from collections import Counter, defaultdict
from typing import Callable, Dict, List, Optional

from .syncs import SyncRecord
from .trace import Event, Trace, covered, merge_intervals

STEP_PREFIX = "nurec_ops.diagnose.step#"
SMALL_KERNEL_US = 10.0
OUR_OP_PREFIX = "nurec_ops::"
_OUR_MARKERS = ("nurec_ops.diagnose.",)


class _Steps:
    """The recorded steps' CPU time ranges, in order."""

    def __init__(self, trace: Trace, indices: List[int]):
        self.index, self.start, self.end = [], [], []
        for k in indices:
            e = trace.annotations.get(f"{STEP_PREFIX}{k}")
            if e is not None:
                self.index.append(k)
                self.start.append(e.ts)
                self.end.append(e.end)

    def __len__(self):
        return len(self.index)

    def at(self, ts: float) -> Optional[int]:
        """Position of the step whose CPU range holds ``ts``."""
        i = bisect.bisect_right(self.start, ts) - 1
        if i >= 0 and ts <= self.end[i]:
            return i
        return None

    def partition(self, window_end: float):
        """Contiguous per-step ranges covering the whole window: each step runs
        until the next one starts; the last one until ``window_end``."""
        ends = self.start[1:] + [window_end]
        return list(zip(self.start, ends))


def _op_label(chain: List[Event]) -> Optional[str]:
    if not chain:
        return None
    outer, inner = chain[0].name, chain[-1].name
    return outer if outer == inner else f"{outer} > {inner}"


def _attribute_syncs(trace: Trace, steps: _Steps, records: List[SyncRecord]) -> None:
    """Names the op behind each sync: the last synchronizing runtime call before
    the sync's marker (CUDA), else the last op that returned before it."""
    prev_ts, prev_step = None, None
    for r in records:
        marker = trace.annotations.get(r.marker) if r.marker else None
        if marker is None:
            continue
        pos = steps.at(marker.ts)
        if prev_step == pos and prev_ts is not None:
            lo = prev_ts  # after the previous sync of the same step
        else:
            lo = steps.start[pos] if pos is not None else marker.ts
        prev_ts, prev_step = marker.ts, pos
        calls = [s for s in trace.syncs if lo <= s.ts <= marker.ts]
        if calls:
            call = calls[-1]
            r.op = _op_label(trace.enclosing_ops(call.tid, call.ts)) or call.name
            continue
        returned = [e for e in trace.cpu_by_tid.get(marker.tid, ())
                    if e.cat == "cpu_op" and e.ts >= lo and e.end <= marker.ts]
        if returned:
            last = max(returned, key=lambda e: (e.end, -e.ts))  # the outermost of the last to return
            r.op = last.name


def _sync_figures(trace, steps: _Steps, records: List[SyncRecord]) -> dict:
    position = {k: i for i, k in enumerate(steps.index)}
    kept = [r for r in records if r.step in position]
    _attribute_syncs(trace, steps, kept)
    per_step = [0] * len(steps)
    sites: Dict[str, dict] = {}
    for r in kept:
        per_step[position[r.step]] += 1
        site = sites.setdefault(r.where, {"where": r.where, "code": r.code, "op": r.op, "count": 0})
        site["count"] += 1
        site["op"] = site["op"] or r.op
    syncs = [{"step": position[r.step], "where": r.where, "code": r.code, "op": r.op, "stack": r.stack} for r in kept]
    return {
        "syncs_per_step": per_step,
        "syncs": syncs,
        "sync_sites": sorted(sites.values(), key=lambda s: -s["count"]),
    }


def _cpu_op_figures(trace: Trace, steps: _Steps, top: int) -> dict:
    per_step, calls, cpu_us = [], Counter(), defaultdict(float)
    for start, end in zip(steps.start, steps.end):
        ops = trace.cpu_ops_between(start, end)
        per_step.append(len(ops))
        for e in ops:
            calls[e.name] += 1
            cpu_us[e.name] += e.dur
    top_ops = [{"name": n, "calls": c, "cpu_ms": cpu_us[n] / 1e3} for n, c in calls.most_common(top)]
    return {"ops_per_step": per_step, "top_ops": top_ops}


def _describe_cpu(trace: Trace, start: float, end: float) -> str:
    span = end - start
    covering = []
    for events in trace.cpu_by_tid.values():
        for e in events:
            if e.ts >= end:
                break
            if e.name.startswith(_OUR_MARKERS):
                continue
            if min(e.end, end) - max(e.ts, start) >= 0.5 * span:
                covering.append(e)
    if not covering:
        return "Python outside torch ops"
    names = []
    for e in sorted(covering, key=lambda e: e.dur):  # innermost first
        if e.name not in names:
            names.append(e.name)
    return " < ".join(names[:3])


def _gpu_figures(trace: Trace, steps: _Steps, top: int) -> dict:
    n = len(steps)
    kernels_per_step, small_per_step, launches_per_step = [0] * n, [0] * n, [0] * n
    by_op: Dict[str, List[int]] = defaultdict(lambda: [0, 0])
    by_kernel: Dict[str, List[float]] = defaultdict(lambda: [0, 0.0])
    window_end = steps.end[-1]
    for call in trace.launches:
        pos = steps.at(call.ts)
        if pos is not None:
            launches_per_step[pos] += 1
    for g in trace.gpu:
        launch = trace.launch_of(g)
        pos = steps.at(launch.ts if launch is not None else g.ts)
        if pos is None:
            continue
        window_end = max(window_end, g.end)
        if g.cat != "kernel":
            continue
        small = g.dur < SMALL_KERNEL_US
        kernels_per_step[pos] += 1
        small_per_step[pos] += small
        op = trace.op_of(g)
        counts = by_op[op.name if op is not None else "(no op recorded)"]
        counts[0] += 1
        counts[1] += small
        k = by_kernel[g.name]
        k[0] += 1
        k[1] += g.dur

    first = steps.start[0]
    busy = merge_intervals((max(g.ts, first), min(g.end, window_end)) for g in trace.gpu
                           if g.end > first and g.ts < window_end)
    busy_per_step = []
    for a, b in steps.partition(window_end):
        busy_per_step.append(covered(busy, a, b) / (b - a) if b > a else 0.0)
    gaps, cursor = [], first
    for a, b in busy + [[window_end, window_end]]:
        if a > cursor:
            gaps.append((cursor, a))
        cursor = max(cursor, b)
    gaps.sort(key=lambda g: g[0] - g[1])
    idle_gaps = []
    for a, b in gaps[:top]:
        pos = max(0, bisect.bisect_right(steps.start, a) - 1)
        idle_gaps.append({"step": pos, "at_ms": (a - first) / 1e3, "ms": (b - a) / 1e3,
                          "cpu": _describe_cpu(trace, a, b)})
    wall = window_end - first
    return {
        "kernels_per_step": kernels_per_step,
        "small_kernels_per_step": small_per_step,
        "launch_calls_per_step": launches_per_step,
        "launches_by_op": [{"op": name, "kernels": c[0], "small": c[1]}
                           for name, c in sorted(by_op.items(), key=lambda kv: -kv[1][0])[:top]],
        "gpu_busy": covered(busy, first, window_end) / wall if wall > 0 else 0.0,
        "gpu_busy_per_step": busy_per_step,
        "idle_gaps": idle_gaps,
        "top_kernels": [{"name": name, "calls": int(k[0]), "total_ms": k[1] / 1e3, "mean_us": k[1] / k[0]}
                        for name, k in sorted(by_kernel.items(), key=lambda kv: -kv[1][1])[:top]],
    }


def _outermost_our_ops(trace: Trace, steps: _Steps) -> List[Event]:
    """nurec_ops::* events inside the steps, minus those nested in a call of
    the same op (the autograd wrapper re-enters the dispatcher)."""
    ours = sorted((e for e in trace.cpu_ops if e.name.startswith(OUR_OP_PREFIX) and steps.at(e.ts) is not None),
                  key=lambda e: (e.tid, e.ts, -e.end))
    kept, last = [], {}
    for e in ours:
        parent = last.get((e.tid, e.name))
        if parent is not None and e.ts >= parent.ts and e.end <= parent.end:
            continue
        last[(e.tid, e.name)] = e
        kept.append(e)
    return kept


def _our_op_figures(trace: Trace, steps: _Steps, cuda_device: Optional[str],
                    copy_gbps: Callable[[str], float], estimate_bytes: Callable[[str, dict], Optional[int]]) -> list:
    totals: Dict[tuple, dict] = {}
    for op in _outermost_our_ops(trace, steps):
        calls = trace.runtime_by_tid.get(op.tid, [])
        lo = bisect.bisect_left([c.ts for c in calls], op.ts)
        device_us, on_gpu = 0.0, False
        for call in calls[lo:]:
            if call.ts > op.end:
                break
            for g in trace.gpu_by_correlation.get(call.args.get("correlation"), ()):
                device_us += g.dur
                on_gpu = True
        device = cuda_device if (on_gpu and cuda_device) else "cpu"
        if not on_gpu:
            device_us = op.dur
        nbytes = estimate_bytes(op.name, op.args)
        if nbytes == 0:
            continue  # an empty call: nothing to measure
        t = totals.setdefault((op.name, device), {"op": op.name, "device": device, "calls": 0, "us": 0.0, "bytes": 0})
        t["calls"] += 1
        t["us"] += device_us
        t["bytes"] = None if (nbytes is None or t["bytes"] is None) else t["bytes"] + nbytes
    out = []
    for t in sorted(totals.values(), key=lambda t: -t["us"]):
        gbps = t["bytes"] / (t["us"] * 1e3) if (t["bytes"] is not None and t["us"] > 0) else None
        copy = copy_gbps(t["device"])
        out.append({"op": t["op"], "device": t["device"], "calls": t["calls"], "ms": t["us"] / 1e3,
                    "bytes": t["bytes"], "gbps": gbps, "copy_gbps": copy,
                    "fraction_of_copy": gbps / copy if (gbps is not None and copy) else None})
    return out


def compute(trace: Trace, step_indices: List[int], syncs: List[SyncRecord], peak_memory_mb: Optional[List[float]],
            device: str, cuda_device: Optional[str], copy_gbps, estimate_bytes, top: int = 5,
            trace_path: Optional[str] = None) -> dict:
    """The figures dict. ``cuda_device`` ("cuda:0") when GPU activity was
    recorded, else None (CPU run: every GPU figure is None)."""
    steps = _Steps(trace, step_indices)
    figures = {"device": device, "steps": len(steps),
               "step_ms": [(e - s) / 1e3 for s, e in zip(steps.start, steps.end)]}
    figures.update(_sync_figures(trace, steps, syncs))
    figures.update(_cpu_op_figures(trace, steps, top))
    gpu_keys = ("kernels_per_step", "small_kernels_per_step", "launch_calls_per_step", "launches_by_op",
                "gpu_busy", "gpu_busy_per_step", "idle_gaps", "top_kernels")
    if cuda_device is not None and len(steps):
        figures.update(_gpu_figures(trace, steps, top))
    else:
        figures.update(dict.fromkeys(gpu_keys))
    figures["nurec_ops"] = _our_op_figures(trace, steps, cuda_device, copy_gbps, estimate_bytes) if len(steps) else []
    figures["peak_memory_mb"] = peak_memory_mb
    figures["trace"] = trace_path
    return figures
