"""quat_scale_to_covar_preci (gsplat's function of that name): fused op, fake
kernels, autograd. gsplat's ``MCMCStrategy`` calls it every training step
(``nurec_ops.gsplat.patch_gsplat_strategy_ops()`` installs it there): one
kernel forward and one backward instead of dozens of small tensor ops."""
import torch

from . import _checks as C
from ._library import AutogradOp, ops
from .nvtx import ranged

_OP = "quat_scale_to_covar_preci"
_MAX_DIMS = 16  # csrc/torch_glue.h: kMaxDims (an output has the batch dimensions and two more)
_TRIU = 6  # csrc/covariance/covariance.h: NUREC_COV_TRIU


@ranged("nurec_ops.quat_scale_to_covar_preci")
def quat_scale_to_covar_preci(quats, scales, compute_covar=True, compute_preci=True, triu=False):
    """Covariances ``R S S R^T`` and precisions ``R S^-1 S^-1 R^T`` of
    Gaussians, in one kernel.

    Args:
        quats: ``[..., 4]`` float32/float64 quaternions ``(w, x, y, z)``, any
            norm (normalized here; a zero quaternion is the identity
            rotation, with zero gradient).
        scales: ``[..., 3]``, the same batch shape, dtype and device.
        compute_covar, compute_preci: which of the two to compute.
        triu: return the upper triangles ``(00, 01, 02, 11, 12, 22)``
            ``[..., 6]`` instead of the matrices ``[..., 3, 3]``.

    Returns:
        ``(covars, precis)``, each None where not computed (gsplat's
        convention; the op under torch.ops returns an empty tensor of shape
        ``[0]`` there). Differentiable with respect to ``quats`` and
        ``scales``; with ``triu`` the gradient of an off-diagonal entry
        applies to that entry alone (as autograd of the reference gives).
    """
    covars, precis = _COVAR_PRECI(quats, scales, compute_covar, compute_preci, triu)
    return (covars if compute_covar else None), (precis if compute_preci else None)


def _fail_batch(op, name, t, quats, tail):
    want = list(quats.shape[:-1]) + list(tail)
    if list(t.shape) != want:
        C.fail(op, f"`{name}` must have shape {want} (the batch shape of `quats`), got {list(t.shape)}")


def _check_batch_real(op, name, t, quats, tail):
    _fail_batch(op, name, t, quats, tail)
    C.real(op, name, t, quats, "quats")
    C.device(op, name, t, quats, "quats")


def _check(op, quats, scales):
    """The C++ glue's checks (csrc/covariance/covariance_register.cpp), in its order."""
    if quats.dim() < 1 or quats.shape[-1] != 4:
        C.fail(op, f"`quats` must have shape [..., 4], got {list(quats.shape)}")
    if quats.dim() + 1 > _MAX_DIMS:
        C.fail(op, f"`quats` must have at most {_MAX_DIMS - 1} dimensions, got {quats.dim()}")
    C.real(op, "quats", quats, quats, "quats")
    _check_batch_real(op, "scales", scales, quats, (3,))


def _matrix_tail(triu):
    return (_TRIU,) if triu else (3, 3)


@torch.library.register_fake("nurec_ops::quat_scale_to_covar_preci")
def _fake(quats, scales, compute_covar, compute_preci, triu):
    _check(_OP, quats, scales)
    shape = tuple(quats.shape[:-1]) + _matrix_tail(triu)
    return quats.new_empty(shape if compute_covar else (0,)), quats.new_empty(shape if compute_preci else (0,))


@torch.library.register_fake("nurec_ops::quat_scale_to_covar_preci_bwd")
def _fake_backward(quats, scales, grad_covars, grad_precis, triu):
    op = _OP + "_bwd"
    _check(op, quats, scales)
    for name, g in (("grad_covars", grad_covars), ("grad_precis", grad_precis)):
        if g is not None:
            _check_batch_real(op, name, g, quats, _matrix_tail(triu))
    return quats.new_empty(quats.shape), scales.new_empty(scales.shape)


def _setup_context(ctx, inputs, output):
    quats, scales, compute_covar, compute_preci, triu = inputs
    ctx.save_for_backward(quats, scales)
    ctx.computed = (compute_covar, compute_preci)
    ctx.triu = triu
    # an output the loss does not use stays None: the kernel skips its
    # terms, and no zeros are written for it
    ctx.set_materialize_grads(False)


def _backward(ctx, grad_covars, grad_precis):
    gc = grad_covars if ctx.computed[0] else None  # a not-computed output's [0] is no gradient
    gp = grad_precis if ctx.computed[1] else None
    if gc is None and gp is None:
        return None, None, None, None, None
    quats, scales = ctx.saved_tensors
    gq, gs = ops.quat_scale_to_covar_preci_bwd(quats, scales, gc, gp, ctx.triu)
    want = ctx.needs_input_grad
    return (gq if want[0] else None), (gs if want[1] else None), None, None, None


_COVAR_PRECI = AutogradOp(_OP, _backward, _setup_context)
