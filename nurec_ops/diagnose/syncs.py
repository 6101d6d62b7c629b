"""Captures host-device synchronizations with the Python line that caused them.

Under ``torch.cuda.set_sync_debug_mode("warn")`` every synchronizing CUDA call
emits a UserWarning. That warning carries the C++ source location, not the
user's, but it is raised while the Python frame that called the op is still on
the stack, so this recorder replaces ``warnings.showwarning`` and walks the
stack itself. It also drops a zero-length profiler marker right after the op
returned; the trace analysis finds the op from it (see figures.py).

The recorder itself knows nothing of CUDA: it records any warning whose text
starts with ``SYNC_WARNING`` (read when entered, so a CPU test can point it at
another C++ warning and exercise the whole path).
"""
import linecache
import os
import re
import sys
import warnings
from dataclasses import dataclass, field
from typing import Callable, List, Optional

import torch

SYNC_WARNING = "called a synchronizing CUDA operation"
MARKER_PREFIX = "nurec_ops.diagnose.sync#"

# Frames from these directories are never "the line that synced": torch's own
# Python and this package (the recorder, the session); nor are the warnings
# machinery's frames (warnings, or _py_warnings in newer Pythons).
_SKIP_DIRS = tuple(
    os.path.dirname(os.path.abspath(p)) + os.sep
    for p in (torch.__file__, __file__)
)
_SKIP_MODULES = ("warnings", "_py_warnings")


@dataclass
class SyncRecord:
    index: int          # order of capture, also the marker's number
    step: int           # the session's step counter when it happened
    where: str          # "file.py:LINE" of the innermost frame outside torch
    code: str           # that line's source text
    stack: List[str] = field(default_factory=list)  # up to 4 user frames, innermost first
    marker: Optional[str] = None  # profiler marker name when one was recorded
    op: Optional[str] = None      # filled in by the trace analysis


def _short_path(path: str) -> str:
    path = os.path.abspath(path)
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def _user_frames(frame, limit=4):
    out = []
    while frame is not None and len(out) < limit:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not filename.startswith(_SKIP_DIRS) and frame.f_globals.get("__name__") not in _SKIP_MODULES:
            out.append((frame.f_code.co_filename, frame.f_lineno))
        frame = frame.f_back
    return out


class SyncRecorder:
    """Context manager: while entered, sync warnings are recorded (and not
    printed); every other warning goes to the previous ``showwarning``.

    ``current_step()`` gives the step each sync belongs to; ``marking()`` says
    whether the profiler is recording, i.e. whether a marker is worth adding.
    Set ``paused`` around the session's own synchronizing calls."""

    def __init__(self, current_step: Callable[[], int], marking: Callable[[], bool]):
        self._current_step = current_step
        self._marking = marking
        self.records: List[SyncRecord] = []
        self.paused = False
        self._catch = None
        self._forward = None
        self._text = SYNC_WARNING

    def __enter__(self):
        self._text = SYNC_WARNING
        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        # "always": the default filter would show (and let us see) a given
        # location only once, and the C++ location is the same for all syncs.
        warnings.filterwarnings("always", message=re.escape(self._text))
        self._forward = warnings.showwarning
        warnings.showwarning = self._show
        return self

    def __exit__(self, exc_type, exc, tb):
        self._catch.__exit__(exc_type, exc, tb)
        return False

    def _show(self, message, category, filename, lineno, file=None, line=None):
        if not str(message).startswith(self._text):
            return self._forward(message, category, filename, lineno, file, line)
        if self.paused:
            return None
        frames = _user_frames(sys._getframe(1))
        stack = [f"{_short_path(f)}:{n}" for f, n in frames]
        where = stack[0] if stack else "?"
        code = linecache.getline(frames[0][0], frames[0][1]).strip() if frames else ""
        record = SyncRecord(len(self.records), self._current_step(), where, code, stack)
        if self._marking():
            # The warning is issued when the op has returned to Python, so the
            # marker lands right after the op that synchronized.
            record.marker = f"{MARKER_PREFIX}{record.index}"
            with torch.profiler.record_function(record.marker):
                pass
        self.records.append(record)
        return None
