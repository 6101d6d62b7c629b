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


def gaussians(op, means, quats, scales, opacities):
    """The Gaussians' shapes and means' dtype (both rasterizers); their count N."""
    shape(op, "means", means, (-1, 3), "[N, 3]")
    real(op, "means", means, means, "means")
    N = means.shape[0]
    shape(op, "quats", quats, (N, 4), "[N, 4] (N = means.shape[0])")
    shape(op, "scales", scales, (N, 3), "[N, 3] (N = means.shape[0])")
    shape(op, "opacities", opacities, (N,), "[N] (N = means.shape[0])")
    return N


def like_means(op, named, means):
    """Every (name, tensor) real of means' dtype, then every one on means'
    device (the order in which the C++ checks report them)."""
    for name, t in named:
        real(op, name, t, means, "means")
    for name, t in named:
        device(op, name, t, means, "means")


def near_far(op, near, far):
    if not near > 0:
        fail(op, f"`near` must be > 0, got {near}")
    if not far > near:
        fail(op, f"`far` must be > `near`, got near = {near}, far = {far}")
