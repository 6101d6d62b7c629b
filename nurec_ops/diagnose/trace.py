"""Reads a torch.profiler (Kineto) Chrome trace into the few indexes the
figures need.

The exported JSON is the one complete record of a run: CPU ops with their
input shapes, CUDA runtime calls, and GPU kernels on one (CPU) clock, linked by
correlation ids. Times here are microseconds, as in the file.
"""
import bisect
import json
from dataclasses import dataclass
from typing import Dict, List, Optional

CPU_CATEGORIES = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "python_function")
RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver")
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")



def is_sync_call(name: str) -> bool:
    """Runtime calls that block the host until the device has caught up
    (names may carry a CUPTI version suffix, e.g. ``cudaMemcpy_v3020``)."""
    if "Synchronize" in name:
        return True
    return name.startswith(("cudaMemcpy", "cuMemcpy")) and "Async" not in name


@dataclass
class Event:
    name: str
    cat: str
    ts: float
    end: float
    tid: int
    args: dict

    @property
    def dur(self) -> float:
        return self.end - self.ts


class Trace:
    def __init__(self, data: dict):
        self.cpu_by_tid: Dict[int, List[Event]] = {}
        self.runtime_by_correlation: Dict[int, Event] = {}
        # Runtime calls that put kernels on the GPU, by time: any call a kernel
        # correlates with, whatever its name (launch APIs vary and a CUDA
        # graph replay is one call for many kernels).
        self.launches: List[Event] = []
        self.runtime_by_tid: Dict[int, List[Event]] = {}
        self.syncs: List[Event] = []      # synchronizing runtime calls, by time
        self.gpu: List[Event] = []        # kernels, copies, fills, by time
        self.ops_by_external_id: Dict[int, Event] = {}
        self.annotations: Dict[str, Event] = {}
        for raw in data.get("traceEvents", []):
            if raw.get("ph") != "X" or "ts" not in raw:
                continue
            cat = raw.get("cat", "")
            ts = float(raw["ts"])
            e = Event(raw.get("name", ""), cat, ts, ts + float(raw.get("dur", 0.0)),
                      raw.get("tid", 0), raw.get("args") or {})
            if cat in GPU_CATEGORIES:
                self.gpu.append(e)
                continue
            if cat not in CPU_CATEGORIES:
                continue  # gpu_user_annotation and other projections
            self.cpu_by_tid.setdefault(e.tid, []).append(e)
            if cat == "cpu_op" and "External id" in e.args:
                self.ops_by_external_id[e.args["External id"]] = e
            elif cat == "user_annotation":
                self.annotations[e.name] = e
            elif cat in RUNTIME_CATEGORIES:
                if "correlation" in e.args:
                    self.runtime_by_correlation[e.args["correlation"]] = e
                self.runtime_by_tid.setdefault(e.tid, []).append(e)
                if is_sync_call(e.name):
                    self.syncs.append(e)
        for events in self.cpu_by_tid.values():
            events.sort(key=lambda e: (e.ts, -e.end))  # parents before children
        self.gpu.sort(key=lambda e: e.ts)
        self.gpu_by_correlation: Dict[int, List[Event]] = {}
        for g in self.gpu:
            self.gpu_by_correlation.setdefault(g.args.get("correlation"), []).append(g)
        launching = {g.args.get("correlation") for g in self.gpu if g.cat == "kernel"}
        self.launches = sorted((e for e in self.runtime_by_correlation.values()
                                if e.args.get("correlation") in launching), key=lambda e: e.ts)
        for events in self.runtime_by_tid.values():
            events.sort(key=lambda e: e.ts)
        self.syncs.sort(key=lambda e: e.ts)
        self.cpu_ops = sorted((e for es in self.cpu_by_tid.values() for e in es if e.cat == "cpu_op"),
                              key=lambda e: e.ts)
        self._cpu_op_starts = [e.ts for e in self.cpu_ops]

    @classmethod
    def load(cls, path: str) -> "Trace":
        with open(path) as f:
            return cls(json.load(f))

    def cpu_ops_between(self, start: float, end: float) -> List[Event]:
        lo = bisect.bisect_left(self._cpu_op_starts, start)
        hi = bisect.bisect_left(self._cpu_op_starts, end)
        return self.cpu_ops[lo:hi]

    def enclosing_ops(self, tid: int, ts: float) -> List[Event]:
        """cpu_op events on thread ``tid`` open at time ``ts``, outermost first."""
        return [e for e in self.cpu_by_tid.get(tid, ()) if e.cat == "cpu_op" and e.ts <= ts <= e.end]

    def launch_of(self, kernel: Event) -> Optional[Event]:
        """The runtime call that launched a GPU event (None if not recorded)."""
        return self.runtime_by_correlation.get(kernel.args.get("correlation"))

    def op_of(self, kernel: Event) -> Optional[Event]:
        """The innermost CPU op that launched a GPU event."""
        launch = self.launch_of(kernel)
        for holder in (launch, kernel):
            if holder is not None:
                op = self.ops_by_external_id.get(holder.args.get("External id"))
                if op is not None:
                    return op
        if launch is not None:
            chain = self.enclosing_ops(launch.tid, launch.ts)
            return chain[-1] if chain else None
        return None


def merge_intervals(intervals):
    """Sorted, disjoint union of (start, end) pairs."""
    out = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1][1] = end
        else:
            out.append([start, end])
    return out


def covered(merged, start: float, end: float) -> float:
    """Length of ``[start, end]`` covered by merged intervals."""
    total = 0.0
    i = bisect.bisect_left([m[1] for m in merged], start)
    for a, b in merged[i:]:
        if a >= end:
            break
        total += max(0.0, min(b, end) - max(a, start))
    return total
