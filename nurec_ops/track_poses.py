"""interpolate_track_poses (SPEC section 1): fused op, fake kernel, autograd."""
import torch

from . import _checks as C
from ._library import AutogradOp, ops
from .nvtx import ranged

_OP = "interpolate_track_poses"


@ranged("nurec_ops.interpolate_track_poses")
def interpolate_track_poses(key_poses, key_times, track_ranges, query_times, mode="slerp"):
    """Pose of every actor track at a query time, from keyframed poses.

    Args:
        key_poses: ``[P, 7]`` float32/float64 poses ``(tx, ty, tz, qw, qx, qy, qz)``
            mapping actor to world; quaternions may be unnormalized.
        key_times: ``[P]`` int64 microseconds, ascending within each track.
        track_ranges: ``[T, 2]`` int32/int64 ``(start, count)`` rows into the key arrays.
        query_times: ``[T]`` or ``[1]`` (broadcast) int64 microseconds.
        mode: ``"slerp"`` or ``"nearest"``.

    Returns:
        ``(poses [T, 7], inside [T] bool)``: unit-quaternion poses, and whether
        each query fell within its track's key times.

    Choices where the SPEC is silent: a range that does not fit in ``[0, P)``
    (negative start or count, or past the end) is treated as an empty track
    (identity pose, ``inside = False``), so no input can read out of bounds;
    a zero quaternion normalizes to the identity with zero gradient.
    Differentiable with respect to ``key_poses``.
    """
    poses, inside = _INTERPOLATE(key_poses, key_times, track_ranges, query_times, mode)
    return poses, inside


def check_inputs(op, key_poses, key_times, track_ranges, query_times, mode):
    C.shape(op, "key_poses", key_poses, (-1, 7), "[P, 7]")
    C.real(op, "key_poses", key_poses, key_poses, "key_poses")
    C.shape(op, "key_times", key_times, (key_poses.shape[0],), "[P] (P = key_poses.shape[0])")
    C.dtype(op, "key_times", key_times, torch.int64)
    C.shape(op, "track_ranges", track_ranges, (-1, 2), "[T, 2]")
    C.index(op, "track_ranges", track_ranges)
    T = track_ranges.shape[0]
    if query_times.dim() != 1 or query_times.shape[0] not in (T, 1):
        C.fail(op, f"`query_times` must have shape [T] or [1] (T = {T} tracks), got {list(query_times.shape)}")
    C.dtype(op, "query_times", query_times, torch.int64)
    for name, t in (("key_times", key_times), ("track_ranges", track_ranges), ("query_times", query_times)):
        C.device(op, name, t, key_poses, "key_poses")
    if mode not in ("slerp", "nearest"):
        C.fail(op, f'`mode` must be "slerp" or "nearest", got "{mode}"')
    return T


@torch.library.register_fake("nurec_ops::interpolate_track_poses")
def _fake(key_poses, key_times, track_ranges, query_times, mode="slerp"):
    T = check_inputs(_OP, key_poses, key_times, track_ranges, query_times, mode)
    return key_poses.new_empty((T, 7)), key_poses.new_empty((T,), dtype=torch.bool)


@torch.library.register_fake("nurec_ops::interpolate_track_poses_backward")
def _fake_backward(grad_poses, key_poses, key_times, track_ranges, query_times, mode):
    op = _OP + "_backward"
    T = check_inputs(op, key_poses, key_times, track_ranges, query_times, mode)
    C.shape(op, "grad_poses", grad_poses, (T, 7), "[T, 7]")
    C.real(op, "grad_poses", grad_poses, key_poses, "key_poses")
    C.device(op, "grad_poses", grad_poses, key_poses, "key_poses")
    return key_poses.new_empty(key_poses.shape)


def _setup_context(ctx, inputs, output):
    key_poses, key_times, track_ranges, query_times, mode = inputs
    ctx.save_for_backward(key_poses, key_times, track_ranges, query_times)
    ctx.mode = mode


def _backward(ctx, grad_poses, _grad_inside):
    key_poses, key_times, track_ranges, query_times = ctx.saved_tensors
    grad = ops.interpolate_track_poses_backward(grad_poses, key_poses, key_times, track_ranges, query_times, ctx.mode)
    return grad, None, None, None, None


_INTERPOLATE = AutogradOp("interpolate_track_poses", _backward, _setup_context)
