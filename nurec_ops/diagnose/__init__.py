"""Step diagnosis: where a training step synchronizes the host with the device,
launches tiny kernels and leaves the GPU idle. Built on torch.profiler and
``torch.cuda.set_sync_debug_mode``; no Nsight needed.

This module is callable: ``nurec_ops.diagnose(...)`` makes a :class:`Diagnosis`
(a context manager), and ``python -m nurec_ops.diagnose script.py [args]`` runs
a script under one (see ``__main__.py``)::

    with nurec_ops.diagnose(warmup=2, steps=10) as d:
        for batch in loader:
            train_step(batch)
            d.step()            # end of one step
    d.figures["syncs_per_step"]

When the block ends it prints a table, writes a Chrome trace (open it in
chrome://tracing or https://ui.perfetto.dev), and fills ``d.figures``.
Nothing is set up before the block is entered, and everything is restored
when it ends. ``nurec_ops.diagnose.running()`` says whether one is entered. On the CPU the GPU figures are None; syncs are then 0 by nature.

Keys of ``d.figures`` (a step is one of the recorded steps, in order; times
in ms unless said otherwise):

- ``device`` (str): "cpu" or e.g. "cuda:0 (NVIDIA H200)".
- ``steps`` (int): number of recorded steps.
- ``step_ms`` (list[float]): CPU wall time of each step.
- ``syncs_per_step`` (list[int]): host-device synchronizations per step.
- ``syncs`` (list[dict]): each sync: ``step``, ``where`` ("file.py:LINE",
  the innermost frame outside torch), ``code`` (that line), ``op`` (the torch
  op that synchronized, e.g. "aten::item > aten::_local_scalar_dense", or
  None), ``stack`` (up to 4 "file:line" frames, innermost first).
- ``sync_sites`` (list[dict]): syncs grouped by ``where``, with ``code``,
  ``op``, ``count``; most frequent first.
- ``ops_per_step`` (list[int]): torch dispatcher op calls per step (all
  nesting levels; meaningful on the CPU too).
- ``top_ops`` (list[dict]): the most called ops: ``name``, ``calls``,
  ``cpu_ms`` (inclusive CPU time).
- ``kernels_per_step`` (list[int] | None): GPU kernels launched per step.
- ``small_kernels_per_step`` (list[int] | None): those that ran under 10 µs.
- ``launch_calls_per_step`` (list[int] | None): CPU launch API calls per step
  (a CUDA graph replay is one call for many kernels).
- ``launches_by_op`` (list[dict] | None): ops that launched the most
  kernels: ``op``, ``kernels``, ``small``.
- ``gpu_busy`` (float | None): fraction of the steps' wall time with a kernel,
  copy or fill running on the GPU.
- ``gpu_busy_per_step`` (list[float] | None): the same per step.
- ``idle_gaps`` (list[dict] | None): the largest GPU idle gaps: ``step``,
  ``at_ms`` (from the first step's start), ``ms``, ``cpu`` (what the CPU was
  doing: innermost events first, e.g. "cudaStreamSynchronize <
  aten::_local_scalar_dense < aten::item").
- ``top_kernels`` (list[dict] | None): ``name``, ``calls``, ``total_ms``,
  ``mean_us``; by total time.
- ``nurec_ops`` (list[dict]): each op of this package seen in the steps:
  ``op`` ("nurec_ops::..."), ``device``, ``calls``, ``ms`` (GPU kernel time,
  or CPU time on the CPU), ``bytes`` (estimated from the recorded shapes, None
  if unknown), ``gbps``, ``copy_gbps`` (the device's copy bandwidth, measured
  once per process), ``fraction_of_copy``.
- ``peak_memory_mb`` (list[float] | None): peak CUDA memory allocated per step.
- ``trace`` (str | None): the Chrome trace written.
"""
import sys
import types

from .session import Diagnosis, running

__all__ = ["Diagnosis", "running"]


class _CallableModule(types.ModuleType):
    """Lets ``nurec_ops.diagnose`` be both this package (for ``python -m``)
    and the function users call."""

    def __call__(self, *args, **kwargs) -> Diagnosis:
        """``nurec_ops.diagnose(steps=None, warmup=0, trace="nurec_ops_trace.json",
        print_report=True, nvtx=True, top=5)``: a :class:`Diagnosis`."""
        return Diagnosis(*args, **kwargs)

sys.modules[__name__].__class__ = _CallableModule
