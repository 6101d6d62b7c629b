"""The diagnosis session: the context manager behind ``nurec_ops.diagnose``.

Nothing happens until it is entered (constructing one starts no profiler and
touches no global state). While entered it holds process-wide state, restored on
exit: a torch.profiler session, ``torch.cuda.set_sync_debug_mode("warn")`` (on
CUDA), the warnings hook of :mod:`.syncs`, and NVTX ranges on (optional).
"""
import contextlib
import json
import os
import tempfile
import warnings
from typing import Optional

import torch

from .. import nvtx as _nvtx
from . import bandwidth, figures, table
from .syncs import SyncRecorder
from .trace import Trace

_active = None  # the entered session: profilers and the sync mode do not nest


def running() -> bool:
    """Whether a diagnosis is entered now (in this process). Code that would
    catch sync warnings itself (a loop counting its own syncs) should leave
    them to the diagnosis then, which names their source lines."""
    return _active is not None


def _set_sync_mode(mode) -> None:
    with warnings.catch_warnings():  # the "prototype feature" notice
        warnings.simplefilter("ignore")
        torch.cuda.set_sync_debug_mode(mode)


def _copy_gbps(device: str) -> float:
    """The copy bandwidth, measured with sync debugging off: the measurement
    synchronizes, and the user's own mode may be "error"."""
    if not device.startswith("cuda"):
        return bandwidth.copy_bandwidth_gbps(device)
    before = torch.cuda.get_sync_debug_mode()
    _set_sync_mode(0)
    try:
        return bandwidth.copy_bandwidth_gbps(device)
    finally:
        _set_sync_mode(before)


class Diagnosis:
    """Profiles the steps of a loop and reports what slows them down.

    Args:
        steps: how many steps to record after the warm-up (None: every step
            until the block ends).
        warmup: steps to run first without recording (CUDA/cuDNN set-up,
            allocator growth). With ``warmup >= 1`` the profiler starts one
            step early, during the last warm-up step: starting it drains the
            GPU's queue, and a first recorded step that began on an idle GPU
            would show an idle gap that the loop itself does not have.
        trace: where to write the Chrome trace (None: no file is kept).
        print_report: print the table when the block ends.
        nvtx: turn nurec_ops's NVTX ranges on inside the block, so the trace
            shows our ops by their public names.
        top: how many rows each top-N list keeps.

    Mark the end of each step with :meth:`step`. Without any ``step()`` call
    (and ``warmup=0``), the whole block is one step. After the block,
    :attr:`figures` holds the numbers (keys: see ``nurec_ops.diagnose``).
    """

    def __init__(self, steps: Optional[int] = None, warmup: int = 0, trace: Optional[str] = "nurec_ops_trace.json",
                 print_report: bool = True, nvtx: bool = True, top: int = 5):
        if steps is not None and steps < 1:
            raise ValueError(f"diagnose: steps must be >= 1 or None, got {steps}")
        if warmup < 0:
            raise ValueError(f"diagnose: warmup must be >= 0, got {warmup}")
        self.steps, self.warmup, self.trace = steps, warmup, trace
        self.print_report, self.nvtx, self.top = print_report, nvtx, top
        self.figures: Optional[dict] = None
        self._entered = False

    # --- the step protocol -------------------------------------------------

    def __enter__(self):
        global _active
        if _active is not None:
            raise RuntimeError("nurec_ops.diagnose: a diagnosis is already running (they do not nest)")
        _active = self
        try:
            self._enter()
        except BaseException:
            _active = None
            raise
        return self

    def _enter(self):
        # First what can fail without having changed any global state.
        self._cuda = torch.cuda.is_available()
        self._device = torch.device("cuda", torch.cuda.current_device()) if self._cuda else torch.device("cpu")
        activities = [torch.profiler.ProfilerActivity.CPU]
        if self._cuda:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self._prof = torch.profiler.profile(activities=activities, record_shapes=True)
        self._prof.prepare_trace()  # profiler set-up (CUPTI) outside the steps
        self._step, self._recording, self._started, self._tracing = 0, False, False, False
        self._recorded, self._peaks = [], []
        self._annotation = None
        # Then the global state that __exit__ restores.
        self._entered = True
        self._nvtx_before = _nvtx.nvtx_enabled()
        if self.nvtx:
            _nvtx.set_nvtx(True)
        self._sync_mode_before = None
        if self._cuda:
            self._sync_mode_before = torch.cuda.get_sync_debug_mode()
            _set_sync_mode("warn")
        self._syncs = SyncRecorder(lambda: self._step, lambda: self._recording).__enter__()
        with self._quiet():
            if self.warmup <= 1:
                self._start_trace()
            if self.warmup == 0:
                self._start_recording()

    def step(self) -> None:
        """Marks the end of one step (and the start of the next)."""
        if not self._entered or _active is not self:
            raise RuntimeError("nurec_ops.diagnose: step() must be called inside the `with` block")
        with self._quiet():
            if self._recording:
                self._end_step()
            self._step += 1
            if not self._tracing and self._step == self.warmup - 1:
                self._start_trace()  # one step before the first recorded one
            if not self._started and self._step == self.warmup:
                self._start_recording()
            elif self._recording and self.steps is not None and len(self._recorded) >= self.steps:
                self._stop_trace()
                self._recording = False
            elif self._recording:
                self._begin_step()

    def __exit__(self, exc_type, exc, tb):
        global _active
        try:
            with self._quiet():
                if self._recording:
                    # The code after the last step() is not a step, unless
                    # step() was never called: then the block is the step.
                    whole_block = self._step == 0
                    self._end_step(keep=whole_block)
                    self._recording = False
                if self._tracing:  # also a trace started in the last warm-up step
                    self._stop_trace()
        finally:
            self._syncs.__exit__(exc_type, exc, tb)
            if self._cuda:
                _set_sync_mode(self._sync_mode_before)
            _nvtx.set_nvtx(self._nvtx_before)
            _active = None
            self._entered = False
        if exc_type is None:
            self.figures = self._analyse()
            if self.print_report:
                print(table.format_report(self.figures), flush=True)
        return False

    # --- internals ---------------------------------------------------------

    @contextlib.contextmanager
    def _quiet(self):
        """No sync warnings for the session's own calls (stopping the
        profiler synchronizes the device)."""
        self._syncs.paused = True
        if self._cuda:
            _set_sync_mode(0)
        try:
            yield
        finally:
            if self._cuda:
                _set_sync_mode("warn")
            self._syncs.paused = False

    def _start_trace(self):
        self._prof.start_trace()
        self._tracing = True

    def _stop_trace(self):
        self._prof.stop_trace()
        self._tracing = False

    def _start_recording(self):
        if not self._tracing:
            self._start_trace()
        self._started = self._recording = True
        self._begin_step()

    def _begin_step(self):
        if self._cuda:
            torch.cuda.reset_peak_memory_stats(self._device)
        self._annotation = torch.profiler.record_function(f"{figures.STEP_PREFIX}{self._step}")
        self._annotation.__enter__()

    def _end_step(self, keep=True):
        self._annotation.__exit__(None, None, None)
        self._annotation = None
        if keep:
            self._recorded.append(self._step)
            if self._cuda:
                self._peaks.append(torch.cuda.max_memory_allocated(self._device) / 2**20)

    def _analyse(self) -> dict:
        if not self._started:
            return figures.compute(Trace({}), [], [], None, self._device_name(), None,
                                   bandwidth.copy_bandwidth_gbps, bandwidth.estimate_bytes, self.top, None)
        path = self.trace
        if path is None:
            fd, path = tempfile.mkstemp(prefix="nurec_ops_trace_", suffix=".json")
            os.close(fd)
        try:
            self._prof.export_chrome_trace(path)
            with open(path) as f:
                recorded = Trace(json.load(f))
        finally:
            if self.trace is None:
                os.remove(path)
        cuda_device = str(self._device) if (self._cuda and recorded.gpu) else None
        return figures.compute(recorded, self._recorded, self._syncs.records,
                               self._peaks if self._cuda else None, self._device_name(), cuda_device,
                               _copy_gbps, bandwidth.estimate_bytes, self.top, self.trace)

    def _device_name(self) -> str:
        if self._cuda:
            return f"{self._device} ({torch.cuda.get_device_name(self._device)})"
        return "cpu"
