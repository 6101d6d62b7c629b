"""Optional NVTX ranges around nurec_ops's ops, named after the op.

Nsight Systems shows NVTX ranges on the CPU timeline, so a user sees which of
their kernels belong to which of our ops. The same range is also opened as a
``torch.profiler.record_function``, because a torch.profiler (Chrome) trace
does not record NVTX: with it, ``nurec_ops.diagnose`` traces show the ranges too.

Off by default. ``set_nvtx(True)``, or ``NUREC_OPS_NVTX=1`` in the environment
when nurec_ops is imported, turns it on. The op wrappers always write::

    with nvtx_range("nurec_ops.collect"):
        ...

and when off that costs one module-level flag check and a shared no-op context
manager: no allocation, no call into torch.
"""
import functools
import os

import torch

_enabled = os.environ.get("NUREC_OPS_NVTX", "") == "1"

# Whether torch.cuda.nvtx works in this build (a CPU-only torch has no NVTX
# library and raises); probed on the first range opened, None until then.
_nvtx_works = None


def set_nvtx(enabled: bool) -> None:
    """Turns NVTX ranges around nurec_ops's ops on or off (process-wide)."""
    global _enabled
    _enabled = bool(enabled)


def nvtx_enabled() -> bool:
    """True when the ops open NVTX ranges."""
    return _enabled


class _Off:
    """The shared do-nothing range returned while NVTX is off."""

    __slots__ = ()

    def __enter__(self):
        return None

    def __exit__(self, exc_type, exc, tb):
        return False


_OFF = _Off()


def _probe_nvtx() -> bool:
    global _nvtx_works
    try:
        torch.cuda.nvtx.range_push("nurec_ops")
        torch.cuda.nvtx.range_pop()
        _nvtx_works = True
    except Exception:  # a CPU-only build: record_function ranges only
        _nvtx_works = False
    return _nvtx_works


class _Range:
    """An NVTX range plus a profiler record_function range of the same name."""

    __slots__ = ("name", "_record", "_pushed")

    def __init__(self, name):
        self.name = name
        self._record = None
        self._pushed = False

    def __enter__(self):
        works = _nvtx_works if _nvtx_works is not None else _probe_nvtx()
        if works:
            torch.cuda.nvtx.range_push(self.name)
            self._pushed = True
        self._record = torch.profiler.record_function(self.name)
        self._record.__enter__()
        return None

    def __exit__(self, exc_type, exc, tb):
        self._record.__exit__(exc_type, exc, tb)
        if self._pushed:
            torch.cuda.nvtx.range_pop()
        return False


def nvtx_range(name: str):
    """A context manager that marks ``name`` on the NVTX and profiler timelines
    while NVTX is on, and does nothing (shared no-op object) while it is off."""
    if not _enabled:
        return _OFF
    return _Range(name)


def ranged(name: str):
    """Decorator for the op wrappers: the call runs inside ``nvtx_range(name)``
    while NVTX is on. While it is off the wrapper costs one flag check, and
    under torch.compile the flag is a constant, so no context manager is
    traced (fullgraph stays possible)."""

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if not _enabled:
                return fn(*args, **kwargs)
            with _Range(name):
                return fn(*args, **kwargs)

        return wrapper

    return decorate
