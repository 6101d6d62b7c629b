"""SPEC section 8, per-Gaussian outputs for densification, shared by the
camera and lidar rasterizers: the ``Meta`` tuple (means2d, radii, depths),
which a forward's projection writes on the device without a host sync, and
the autograd path that makes ``meta.means2d.grad`` the loss's gradient
with respect to each projected mean (from the backward's per-item gradient
records)."""
import collections

import torch

Meta = collections.namedtuple("Meta", ["means2d", "radii", "depths"])
Meta.__doc__ = """Per sensor and Gaussian (SPEC section 8): ``means2d [C, N, 2]``
(the projected means: pixels for a camera, (azimuth, elevation) radians for
a lidar; with ``means2d_grad=True`` a leaf whose ``.grad`` after
``backward()`` is the loss's gradient with respect to them, and with
``absgrad=True`` also an attribute ``means2d.absgrad`` after ``backward()``:
the sum over pixels (rays) of each pixel's |gradient|, per coordinate, as
gsplat's ``absgrad``), ``radii
[C, N, 2]`` int32 (half-extents of the binning's bounding box of the
opacity-aware ellipse, in pixels or in lidar cells; 0 for a Gaussian the
binning dropped), ``depths [C, N]`` (camera z, lidar range)."""


# The rasterizers' backward gradient records (csrc/tiles/splat.h): rows of
# NUREC_SPLAT_GREC_SIZE values, or NUREC_SPLAT_GREC_ABS_SIZE with absgrad,
# whose slots NUREC_SPLAT_GREC_ABS, + 1 hold SPEC 8's absgrad.
def grad_records_width(absgrad):
    return 16 if absgrad else 8


def means2d_grad_shape(means2d_grad, C, N):
    """The backward op's ``grad_means2d`` output: [C, N, 2], or [0, 0, 2]
    where not asked for (csrc/tiles/splat_glue.h)."""
    return (C, N, 2) if means2d_grad else (0, 0, 2)


def meta_shapes(empty, meta, C, N):
    """A rasterizer forward op's last three outputs, for its fake kernel:
    SPEC 8's means2d [C, N, 2], radii [C, N, 2] int32 and depths [C, N],
    each with no rows where ``meta`` was not asked for
    (csrc/tiles/splat_glue.h, splat_meta_outputs)."""
    c, n = (C, N) if meta else (0, 0)
    return empty((c, n, 2)), empty((c, n, 2), dtype=torch.int32), empty((c, n))


def check_meta_cell(op, meta, meta_cell, like):
    """The lidar forward's ``meta_cell`` (a cell's size, [2] on the
    device), needed with ``meta``: the glue's checks."""
    from . import _checks as Ck

    if not meta:
        return
    if meta_cell is None:
        Ck.fail(op, "`meta` needs `meta_cell`, a cell's size [2]")
    Ck.shape(op, "meta_cell", meta_cell, (2,), "[2] (a cell's size)")
    Ck.like_means(op, [("meta_cell", meta_cell)], like)


def absgrad_of(grad_records, absgrad):
    """SPEC 8's absgrad [C * N, 2] from the backward's records (a view), or None."""
    return grad_records[:, 8:10] if absgrad else None


def meta_of(out, means2d=None):
    """Meta from a rasterizer forward's outputs: its projection wrote SPEC
    8's (means2d, radii, depths) as its last three outputs (the forward's
    ``meta=True``; ``nurec_ops::splat_meta`` computes the same from the
    records, a second pass over them). Detached: they carry no graph.
    ``means2d``, if given (the leaf of means2d_grad), receives the
    projected means."""
    m2d, radii, depths = (t.detach() for t in out[-3:])
    if means2d is not None:
        if torch.compiler.is_compiling():
            with torch.no_grad():
                means2d.copy_(m2d)
        else:  # the leaf takes the values' storage: no copy kernel (its shape, dtype and device are the same)
            means2d.data = m2d
        m2d = means2d
    return Meta(m2d, radii, depths)


@torch.library.register_fake("nurec_ops::splat_meta")
def _fake_splat_meta(records, counts, cell, cell_u, cell_v):
    from . import _checks as Ck

    op = "splat_meta"
    Ck.shape(op, "records", records, (-1, -1, 8), "[C, N, 8] (a rasterizer forward's records)")
    Ck.real(op, "records", records, records, "records")
    C, N = records.shape[:2]
    Ck.shape(op, "counts", counts, (C, N), "[C, N]")
    Ck.dtype(op, "counts", counts, torch.int64)
    Ck.device(op, "counts", counts, records, "records")
    if not (cell_u > 0 and cell_v > 0):
        Ck.fail(op, f"the cell size must be > 0, got {cell_u} x {cell_v}")
    if cell is not None:
        Ck.shape(op, "cell", cell, (2,), "[2]")
        Ck.real(op, "cell", cell, records, "records")
        Ck.device(op, "cell", cell, records, "records")
    e = records.new_empty
    return e((C, N, 2)), e((C, N, 2), dtype=torch.int32), e((C, N))


def split_grads(res):
    """A rasterizer's ``_backward_with_records(ctx, g..., absgrad=False,
    means2d_grad=False)`` result: the op's input gradients, then its three
    extras: the per-item gradient records [C * N, 8] (16 slots a row with
    absgrad, its absgrad in slots 8, 9: csrc/tiles/splat.h), SPEC 8's
    absgrad [C * N, 2] (else None) and SPEC 8's means2d gradient [C, N, 2],
    contiguous (else None)."""
    return tuple(res[:-3]), res[-3], res[-2], res[-1]


def op_backward(backward_with_records):
    """The op's registered backward: ``backward_with_records``'s input
    gradients for the cotangents of the op's first three outputs (its
    other outputs carry none)."""

    def backward(ctx, g0, g1, g2, *_unused):
        return split_grads(backward_with_records(ctx, g0, g1, g2))[0]

    return backward


def means2d_grad_function(autograd_op, setup_context, backward_with_records):
    """An autograd.Function running ``autograd_op``'s forward with two more
    inputs first: ``means2d`` [C, N, 2] (a leaf whose values are not read)
    and ``absgrad``, a bool. The gradient of ``means2d`` is the first two
    values of each item's gradient record; with ``absgrad`` the backward
    also sets ``means2d.absgrad`` to its absgrad [C, N, 2], as gsplat's
    rasterization backward does (each backward replaces it). That is set
    here, not carried through autograd by a second leaf: the second leaf's
    AccumulateGrad node, copy and hook cost host time in every step of a
    trainer that densifies on absgrad. ``backward_with_records(ctx, g...,
    absgrad=, means2d_grad=True)`` returns the gradient records, the
    absgrad and the means2d gradient after the op's own input gradients
    (split_grads): the last contiguous, written by the op, so that the leaf's
    AccumulateGrad takes it as it is (a strided view of the records cost a
    copy kernel per step: 5.3 us on the street camera, 9.1 with absgrad's
    wider rows; H200)."""

    def forward(ctx, means2d, absgrad, *args):
        if torch.compiler.is_compiling():
            out = autograd_op.op(*args)
        else:
            with torch._C._AutoDispatchBelowAutograd():
                out = autograd_op._entry(*args)
        setup_context(ctx, args, out)
        ctx.m2d_shape = means2d.shape
        ctx.absgrad = bool(absgrad)
        # the leaf itself, to hand it its absgrad: a reference to a leaf of
        # the caller's (no graph node, so no reference cycle)
        ctx.m2d = means2d if ctx.absgrad else None
        ctx.input_offset = 2  # the op's inputs follow means2d, absgrad (ctx.needs_input_grad is shifted)
        return out

    def backward(ctx, *grads):
        grads, _, absgrad, g_m2d = split_grads(
            backward_with_records(ctx, *grads[:3], absgrad=ctx.absgrad, means2d_grad=True))
        C, N = ctx.m2d_shape[0], ctx.m2d_shape[1]
        if ctx.absgrad:
            ctx.m2d.absgrad = absgrad.view(C, N, 2)
        return (g_m2d, None) + grads

    name = f"{autograd_op.op.__name__}_with_means2d"
    return type(name, (torch.autograd.Function,), {"forward": staticmethod(forward),
                                                   "backward": staticmethod(backward)})


def run_with_meta(op, run, forward, with_m2d, like, C, N, return_meta, means2d_grad, outputs, absgrad=False,
                  median=None):
    """The rasterizers' common tail: checks the flags, runs ``run(forward)``
    (the binned forward, asked for its meta when return_meta) through
    ``with_m2d`` when the means2d gradient is wanted, and returns the
    outputs as ``outputs[0]`` (named tuple), or with their Meta as
    ``outputs[1]`` if asked. ``median``, if given, maps the forward op's
    outputs to the median depth (nurec_ops._median), returned after the
    first three outputs (``outputs`` then name it)."""
    from . import _checks

    if means2d_grad and not return_meta:
        _checks.fail(op, "`means2d_grad=True` needs `return_meta=True` (the gradient lands in meta.means2d.grad)")
    if absgrad and not means2d_grad:
        _checks.fail(op, "`absgrad=True` needs `means2d_grad=True` (it lands in meta.means2d.absgrad)")
    m2d = None
    if means2d_grad and torch.is_grad_enabled():
        # leaves whose values the forward does not read (empty: no fill
        # kernel); meta_of hands them the projected means
        m2d = like.new_empty((C, N, 2)).requires_grad_(True)
        out = run(lambda *a: with_m2d.apply(m2d, bool(absgrad), *a))
    else:
        out = run(forward)
    extra = () if median is None else (median(out),)
    if return_meta:
        return outputs[1](out[0], out[1], out[2], *extra, meta_of(out, m2d))
    return outputs[0](out[0], out[1], out[2], *extra)
