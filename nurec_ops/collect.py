"""collect_gaussian_parameters and collect (SPEC section 2): fused ops, fake
kernels, autograd."""
import torch

from . import _checks as C
from ._library import AutogradOp, ops
from .nvtx import ranged
from .track_poses import check_inputs as _check_track_inputs

_OP = "collect_gaussian_parameters"

@ranged("nurec_ops.collect_gaussian_parameters")
def collect_gaussian_parameters(means, quats, log_scales, opacity_logits, track_ids, track_poses, track_inside):
    """Moves actor Gaussians into the world and activates all Gaussians, in one kernel.

    Args:
        means ``[N, 3]``, quats ``[N, 4]`` (unnormalized), log_scales ``[N, 3]``,
        opacity_logits ``[N]``: the packed Gaussians, each in its own frame
        (world for the static background, the actor's frame otherwise).
        track_ids: ``[N]`` int32/int64; ``-1`` is the static background,
            ``0 <= id < T`` an actor track, any other id is treated as static
            with opacity 0.
        track_poses: ``[T, 7]`` actor-to-world poses (e.g. from
            :func:`interpolate_track_poses`); track_inside: ``[T]`` bool.

    Returns:
        ``(means_w [N, 3], quats_w [N, 4] unit, scales [N, 3], opacities [N])``,
        one packed buffer ready for rasterization. A Gaussian of a track
        outside its time range (or of an invalid id) has opacity 0 and
        exactly zero gradients, and adds nothing to its track's pose gradient.
        Differentiable with respect to the four Gaussian inputs and
        ``track_poses``.
    """
    means_w, quats_w, scales, opacities = _COLLECT_PARAMETERS(
        means, quats, log_scales, opacity_logits, track_ids, track_poses, track_inside
    )
    return means_w, quats_w, scales, opacities

@ranged("nurec_ops.collect")
def collect(means, quats, log_scales, opacity_logits, track_ids, key_poses, key_times, track_ranges, query_times, mode="slerp"):
    """:func:`interpolate_track_poses` then :func:`collect_gaussian_parameters`
    at one query time, as one op: two kernel launches forward, one
    dispatcher call and one autograd node. (``NUREC_OPS_PDL=1`` lets the
    second kernel start while the first runs on Hopper; measured no faster
    so far, so off by default.) Gradients reach
    ``key_poses`` through both the means and the rotations. Arguments as in
    the two ops; returns ``(means_w, quats_w, scales, opacities)`` (the op
    under torch.ops also returns the track poses and inside flags, which its
    backward reuses)."""
    # Host time matters here: on the GPU a forward is ~17 us of kernels, and
    # every microsecond of Python shows when calls run back to back (see
    # AutogradOp: straight to the C++ entry when nothing is differentiated).
    out = _COLLECT(means, quats, log_scales, opacity_logits, track_ids, key_poses, key_times, track_ranges,
                   query_times, mode)
    return out[0], out[1], out[2], out[3]

def _check(op, means, quats, log_scales, opacity_logits, track_ids, track_poses, track_inside):
    C.shape(op, "means", means, (-1, 3), "[N, 3]")
    C.real(op, "means", means, means, "means")
    N = means.shape[0]
    C.shape(op, "quats", quats, (N, 4), "[N, 4] (N = means.shape[0])")
    C.shape(op, "log_scales", log_scales, (N, 3), "[N, 3] (N = means.shape[0])")
    C.shape(op, "opacity_logits", opacity_logits, (N,), "[N] (N = means.shape[0])")
    C.shape(op, "track_ids", track_ids, (N,), "[N] (N = means.shape[0])")
    C.shape(op, "track_poses", track_poses, (-1, 7), "[T, 7]")
    C.shape(op, "track_inside", track_inside, (track_poses.shape[0],), "[T] (T = track_poses.shape[0])")
    for name, t in (("quats", quats), ("log_scales", log_scales), ("opacity_logits", opacity_logits), ("track_poses", track_poses)):
        C.real(op, name, t, means, "means")
    C.index(op, "track_ids", track_ids)
    C.dtype(op, "track_inside", track_inside, torch.bool)
    for name, t in (("quats", quats), ("log_scales", log_scales), ("opacity_logits", opacity_logits),
                    ("track_ids", track_ids), ("track_poses", track_poses), ("track_inside", track_inside)):
        C.device(op, name, t, means, "means")
    return N, track_poses.shape[0]

@torch.library.register_fake("nurec_ops::collect_gaussian_parameters")
def _fake(means, quats, log_scales, opacity_logits, track_ids, track_poses, track_inside):
    N, _ = _check(_OP, means, quats, log_scales, opacity_logits, track_ids, track_poses, track_inside)
    return means.new_empty((N, 3)), means.new_empty((N, 4)), means.new_empty((N, 3)), means.new_empty((N,))

def _check_grads(op, N, means, grads):
    names = ("grad_means_w", "grad_quats_w", "grad_scales", "grad_opacities")
    for name, g, want, desc in zip(names, grads, ((N, 3), (N, 4), (N, 3), (N,)), ("[N, 3]", "[N, 4]", "[N, 3]", "[N]")):
        C.shape(op, name, g, want, desc)
        C.real(op, name, g, means, "means")
        C.device(op, name, g, means, "means")

@torch.library.register_fake("nurec_ops::collect_gaussian_parameters_backward")
def _fake_backward(grad_means_w, grad_quats_w, grad_scales, grad_opacities, means, quats, log_scales,
                   opacity_logits, track_ids, track_poses, track_inside):
    N, T = _check(_OP + "_backward", means, quats, log_scales, opacity_logits, track_ids, track_poses, track_inside)
    _check_grads(_OP + "_backward", N, means, (grad_means_w, grad_quats_w, grad_scales, grad_opacities))
    return (means.new_empty((N, 3)), means.new_empty((N, 4)), means.new_empty((N, 3)), means.new_empty((N,)),
            means.new_empty((T, 7)))

def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs)

def _backward(ctx, grad_means_w, grad_quats_w, grad_scales, grad_opacities):
    grads = ops.collect_gaussian_parameters_backward(
        grad_means_w, grad_quats_w, grad_scales, grad_opacities, *ctx.saved_tensors
    )
    g_means, g_quats, g_log_scales, g_logits, g_poses = grads
    return g_means, g_quats, g_log_scales, g_logits, None, g_poses, None

_COLLECT_PARAMETERS = AutogradOp("collect_gaussian_parameters", _backward, _setup_context)

# ---- the fused op: collect at a query time

def _check_at_time(op, means, quats, log_scales, opacity_logits, track_ids, key_poses, key_times, track_ranges, query_times, mode):
    T = _check_track_inputs(op, key_poses, key_times, track_ranges, query_times, mode)
    C.real(op, "key_poses", key_poses, means, "means")
    C.device(op, "key_poses", key_poses, means, "means")
    poses = key_poses.new_empty((T, 7))
    return _check(op, means, quats, log_scales, opacity_logits, track_ids, poses, poses.new_empty((T,), dtype=torch.bool))

@torch.library.register_fake("nurec_ops::collect")
def _fake_at_time(means, quats, log_scales, opacity_logits, track_ids, key_poses, key_times, track_ranges, query_times, mode="slerp"):
    N, T = _check_at_time("collect", means, quats, log_scales, opacity_logits, track_ids, key_poses, key_times,
                          track_ranges, query_times, mode)
    return (means.new_empty((N, 3)), means.new_empty((N, 4)), means.new_empty((N, 3)), means.new_empty((N,)),
            key_poses.new_empty((T, 7)), key_poses.new_empty((T,), dtype=torch.bool))

@torch.library.register_fake("nurec_ops::collect_backward")
def _fake_at_time_backward(grad_means_w, grad_quats_w, grad_scales, grad_opacities, means, quats, log_scales,
                           opacity_logits, track_ids, track_poses, track_inside, key_poses, key_times, track_ranges,
                           query_times, mode):
    op = "collect_backward"
    N, T = _check_at_time(op, means, quats, log_scales, opacity_logits, track_ids, key_poses,
                          key_times, track_ranges, query_times, mode)
    _check(op, means, quats, log_scales, opacity_logits, track_ids, track_poses, track_inside)
    C.shape(op, "track_poses", track_poses, (T, 7), "[T, 7] (T = track_ranges.shape[0])")
    _check_grads(op, N, means, (grad_means_w, grad_quats_w, grad_scales, grad_opacities))
    return (means.new_empty((N, 3)), means.new_empty((N, 4)), means.new_empty((N, 3)), means.new_empty((N,)),
            key_poses.new_empty(key_poses.shape))

def _setup_context_at_time(ctx, inputs, output):
    means, quats, log_scales, opacity_logits, track_ids, key_poses, key_times, track_ranges, query_times, mode = inputs
    track_poses, track_inside = output[4], output[5]
    ctx.save_for_backward(means, quats, log_scales, opacity_logits, track_ids, track_poses, track_inside,
                          key_poses, key_times, track_ranges, query_times)
    ctx.mode = mode
    # The wrapper hides track_poses / track_inside: leave their gradients
    # None rather than have autograd fill zeros (a kernel) for them.
    ctx.set_materialize_grads(False)

def _backward_at_time(ctx, grad_means_w, grad_quats_w, grad_scales, grad_opacities, _grad_poses, _grad_inside):
    saved = ctx.saved_tensors
    grads = [g if g is not None else torch.zeros_like(like)  # an output the loss did not use
             for g, like in zip((grad_means_w, grad_quats_w, grad_scales, grad_opacities),
                                (saved[0], saved[1], saved[2], saved[3]))]
    g_means, g_quats, g_log_scales, g_logits, g_keys = ops.collect_backward(*grads, *saved, ctx.mode)
    return g_means, g_quats, g_log_scales, g_logits, None, g_keys, None, None, None, None

_COLLECT = AutogradOp("collect", _backward_at_time, _setup_context_at_time)
