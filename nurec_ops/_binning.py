"""Host-side capacity policy of the sync-free tile binning (CUDA).

The number of Gaussian-tile intersections of a call is only known on the
device, after the projection. The binning buffers are allocated before that,
with a capacity chosen here from counts that earlier calls reported
asynchronously:

- each eager CUDA call copies its device ``status`` (needed intersections,
  overflowed) into pinned host memory with a non-blocking copy and records an
  event; nothing waits on it;
- the next call polls the events of earlier reports (``Event.query``, which
  never blocks) and reads the counts of those that have arrived;
- capacity = ``ceil(needed * HEADROOM) + SLACK``: grown at once when a report
  needs more, shrunk only when it exceeds ``SHRINK_FACTOR`` times what each
  of the last ``SHRINK_WINDOW`` reports needed, and then to the most of
  them (so a capacity is not reallocated back and forth, and calls that
  alternate between a big and a small scene of one configuration, e.g.
  two ray patterns of the same size, keep the big one's capacity instead
  of overflowing every other call);
- a call with more work (cameras x Gaussians, e.g. after densification) than
  the last report's gets at least that report's intersections per item
  times its own work, with the headroom;
- the first call of a configuration (no report yet for its device and
  sensor shape) is sized exactly instead, at the price of one host
  synchronization, once: it runs with a guess from its sizes, reads its
  count back and, if that overflowed, runs again with the count it needs.
  A first call never returns NaN; every later call is sync-free. Inside
  CUDA-graph capture or torch.compile no synchronization is possible, so a
  first call there without ``capacity=`` raises an error naming it (warm
  up eagerly first, or pass ``capacity=``).

A call that overflows (more intersections than its capacity) never writes out
of bounds and never returns a wrong image: its render, depth and alpha are
NaN (and its gradients zero, so that an optimizer step on it changes
nothing). Its report then raises a ``RuntimeWarning`` (``on_overflow="warn"``)
or a ``RuntimeError`` (``"raise"``) naming the call and the counts, at the
first later call that finds the report arrived (under ordinary training
loops: the next call), and the capacity is grown so it cannot recur for that
count. ``check_overflow()`` polls and reports explicitly.

``binning="exact"`` synchronizes once per call instead (gsplat's
behaviour): the call runs, its count is read back, and on overflow it is
re-run with the capacity it needs; the result is always exact.

Under torch.compile and CUDA graph capture no report is made (the host does
not run at replay); the capacity is the one current at trace / capture time:
pass ``capacity=`` for a fixed bound, and an overflowing replay still gives
NaN images rather than wrong ones.
"""
import collections
import math
import warnings

import torch

from ._async_read import AsyncReads, capturing

HEADROOM = 1.25
SLACK = 4096
SHRINK_FACTOR = 2.5
SHRINK_WINDOW = 8
MIN_CAPACITY = 1 << 16


def _compiling():
    try:
        return torch.compiler.is_compiling()
    except AttributeError:  # pragma: no cover
        return False


class CapacityPolicy:
    def __init__(self, op):
        self.op = op
        self.capacity = {}  # (device index, key) -> int
        self.rate = {}  # (device index, key) -> (needed intersections per item, items) of the last report
        self.recent = {}  # (device index, key) -> the targets of its last SHRINK_WINDOW reports
        self.reports = AsyncReads(2)  # (needed, overflowed) of eager calls; payload (capacity, serial, key, work)
        self.serial = 0
        self.on_overflow = "warn"

    def _key(self, device, key):
        return (device.index if device.index is not None else torch.cuda.current_device(), key)

    def target(self, needed):
        return int(math.ceil(needed * HEADROOM)) + SLACK

    def capacity_for(self, device, key, work):
        """Capacity for the next call on `device` (`key` separates
        configurations) with `work` items, or None when no call of this
        configuration has been sized yet (the caller sizes it exactly)."""
        if not _compiling():
            self.poll()
        k = self._key(device, key)
        if k not in self.capacity:
            return None
        per_item, items = self.rate.get(k, (0.0, work))
        if work > items:  # more Gaussians than the last report saw: scale its count
            want = self.target(per_item * work)
            if want > self.capacity[k]:
                self.capacity[k] = want
        return self.capacity[k]

    def update(self, k, needed, work=None):
        cap = self.capacity.get(k, 0)
        want = self.target(needed)
        recent = self.recent.setdefault(k, collections.deque(maxlen=SHRINK_WINDOW))
        recent.append(want)
        if want > cap:
            self.capacity[k] = max(MIN_CAPACITY, want)
        elif len(recent) == SHRINK_WINDOW and cap > SHRINK_FACTOR * max(recent):
            self.capacity[k] = max(MIN_CAPACITY, max(recent))
        if work:
            self.rate[k] = (needed / work, work)

    def record(self, device, key, status, capacity, work=None):
        """Queues the asynchronous report of one eager call's status."""
        if _compiling() or capturing():
            return
        self.serial += 1
        self.reports.record(status, (capacity, self.serial, self._key(device, key), work))

    def poll(self):
        """Reads every report whose copy has finished (never waits)."""
        problems = []
        for (needed, overflowed), (cap, serial, k, work) in self.reports.ready():
            self.update(k, needed, work)
            if overflowed:
                problems.append((serial, needed, cap, self.capacity[k]))
        for serial, needed, cap, new in problems:
            self._report(serial, needed, cap, new)

    def _report(self, serial, needed, cap, new):
        msg = (f"nurec_ops.{self.op}: call #{serial} on CUDA needed {needed} Gaussian-tile "
               f"intersections but its binning capacity was {cap}; that call's render, depth "
               f"and alpha were returned as NaN (and its gradients as zero) instead of a wrong "
               f"image. The capacity is now {new}. Pass binning='exact' (one sync per call) or "
               f"capacity=... to rule this out.")
        if self.on_overflow == "raise":
            raise RuntimeError(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=4)


_POLICIES = {}


def policy(op):
    if op not in _POLICIES:
        _POLICIES[op] = CapacityPolicy(op)
    return _POLICIES[op]


def fake_intersections(device, capacity):
    """Length of a rasterizer's intersection buffer in its fake kernel: the
    capacity the caller chose on CUDA; on the CPU, which bins exactly, a
    size known only from the data. On meta tensors (shapes only, e.g.
    nurec_ops.diagnose sizing a recorded call to estimate its bytes) the
    capacity recorded with the call."""
    if device.type in ("cuda", "meta"):
        return capacity
    return torch.library.get_ctx().new_dynamic_size()


def part_slots(segments, capacity, segment_min, tiles):
    """X of a rasterizer's parts state [S, X, cells per tile, D + 2] in its
    fake kernel, as csrc/tiles/splat_glue.h sizes it: the fewest slots that
    S divides, at least nurec_splat_part_layout's (tiles/splat_math.h): 2
    capacity / m, m the largest power of two <= segment_min, or one per
    (tile, part) where that is fewer; X >= 1 (also without parts, S = 0)."""
    if segments <= 0:
        return 1
    by_start = (2 * capacity) >> min(int(segment_min).bit_length() - 1, 62) if capacity > 0 else 0
    slots = min(by_start, segments * tiles)
    return max(-(-slots // segments), 1)


def part_chunks(segments, capacity, segment_min):
    """Entries of a rasterizer forward's later-parts list `seg_later` in
    its fake kernel (tiles/splat_math.h's nurec_splat_part_chunks): chunks
    of segment_min entries of the capacity where lists are cut (S > 1), else
    0."""
    if segments <= 1 or capacity <= 0 or segment_min <= 0:
        return 0
    return -(-capacity // segment_min)


def leading(t):
    """Size of t's first dimension, 0 for a scalar (bad input is reported by
    the op's own checks, with the argument's name, not here)."""
    return t.shape[0] if t.dim() > 0 else 0


def run_binned(op, forward, args, device, key, work, binning, capacity, on_overflow, report):
    """Runs a binned rasterizer forward (`forward(*args, capacity)`) under
    the policy of `op`, the one piece of this file the rasterizers call:
    validates the policy arguments, picks the capacity (fixed by the caller,
    or from earlier reports scaled to `work` = cameras x Gaussians), and
    afterwards either records the device's report without waiting
    (binning="auto") or reads it at once and re-runs an overflowed call
    (binning="exact", and the first call of a configuration: the one host
    sync). `report` is the index of the [needed, overflowed] status tensor
    in the forward's outputs."""
    from . import _checks

    if binning not in ("auto", "exact"):
        _checks.fail(op, f'`binning` must be "auto" or "exact", got {binning!r}')
    if on_overflow not in ("warn", "raise"):
        _checks.fail(op, f'`on_overflow` must be "warn" or "raise", got {on_overflow!r}')
    pol = policy(op)
    cap = 0
    exact = binning == "exact"
    if device.type == "cuda":
        pol.on_overflow = on_overflow
        if capacity is not None:
            cap = int(capacity)
            if cap < 0:
                _checks.fail(op, f"`capacity` must be >= 0, got {cap}")
        else:
            cap = pol.capacity_for(device, key, work)
            if cap is None:  # the first call of this configuration: sized exactly, once
                if _compiling() or torch.cuda.is_current_stream_capturing():
                    _checks.fail(op, "the first call of a configuration (cameras or sweeps and their size) "
                                     "inside CUDA-graph capture or torch.compile needs `capacity=` (the "
                                     "number of Gaussian-tile intersections to allocate): no host "
                                     "synchronization can size it there; or run it once eagerly first")
                cap, exact = max(MIN_CAPACITY, 8 * work), True
    out = forward(*args, cap)
    if device.type == "cuda":
        if exact and not _compiling():
            needed, overflowed = (int(v) for v in out[report].tolist())  # the one sync
            pol.update(pol._key(device, key), needed, work)
            if overflowed:
                out = forward(*args, pol.target(needed) if capacity is None else max(needed, 1))
        elif capacity is None:
            pol.record(device, key, out[report], cap, work)
    return out
