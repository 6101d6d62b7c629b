"""Argument checks for the fake (meta) kernels, used while tracing under
torch.compile. The real kernels check the same things in C++
(csrc/<family>/<family>_register.cpp); the messages follow the same form."""
import torch

REAL = (torch.float32, torch.float64)
INDEX = (torch.int32, torch.int64)


def fail(op, msg):
    raise RuntimeError(f"nurec_ops.{op}: {msg}")


def shape(op, name, t, want, desc):
    ok = t.dim() == len(want) and all(w < 0 or t.shape[d] == w for d, w in enumerate(want))
    if not ok:
        fail(op, f"`{name}` must have shape {desc}, got {list(t.shape)}")


def real(op, name, t, ref, ref_name):
    if t.dtype not in REAL:
        fail(op, f"`{name}` must be float32 or float64, got {t.dtype}")
    if t.dtype != ref.dtype:
        fail(op, f"`{name}` is {t.dtype} but `{ref_name}` is {ref.dtype}; all floating inputs must share one dtype")


def dtype(op, name, t, want):
    if t.dtype != want:
        fail(op, f"`{name}` must be {want}, got {t.dtype}")


def index(op, name, t):
    if t.dtype not in INDEX:
        fail(op, f"`{name}` must be int32 or int64, got {t.dtype}")


def device(op, name, t, ref, ref_name):
    if t.device != ref.device:
        fail(op, f"`{name}` is on {t.device} but `{ref_name}` is on {ref.device}; all inputs must be on one device")


MAX_SEGMENTS = 64  # csrc/tiles/splat.h: NUREC_SPLAT_MAX_SEGMENTS


def segments(op, segments, segment_min):
    """The parts of long tile lists (both rasterizers)."""
    if not 0 <= segments <= MAX_SEGMENTS:
        fail(op, f"`segments` must be in [0, {MAX_SEGMENTS}], got {segments}")
    if segment_min < 1:
        fail(op, f"`segment_min` must be >= 1, got {segment_min}")
