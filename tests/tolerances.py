"""How a test judges a result against the float64 reference (every op family).

- ``assert_close`` / ``TOL``: tolerances per dtype, relative to the
  reference tensor's scale.
- ``assert_close_to_reference``: the op registry's float32 parity rule
  (flash-attention's: a multiple of the reference's own float32 error).
- ``assert_close_flips``: the rasterizers' allowance for float32 threshold
  flips (an alpha that rounds to the other side of 1/255).
- ``assert_same_sum``: two runs of one computation, bitwise on CPU, up to
  summation order on CUDA.
"""
import torch

# Tolerances of a result in `dtype` against a float64 reference computed on
# the same (upcast) inputs. atol is relative to the largest magnitude of the
# reference tensor (floor 1), so that sums over many terms (pose gradients
# reduced over a track's Gaussians) are judged on their own scale.
TOL = {
    torch.float64: dict(rtol=1e-9, atol=1e-9),
    torch.float32: dict(rtol=2e-5, atol=2e-5),
}


def tol(dtype, factor=1.0):
    t = TOL[dtype]
    return dict(rtol=t["rtol"] * factor, atol=t["atol"] * factor)


def assert_close(actual, expected, dtype=None, factor=1.0, msg=""):
    """``actual`` (any float dtype, any device) against ``expected`` (usually
    the float64 reference): same shape, all finite where expected is finite,
    |a - e| <= atol * max(1, max|e|) + rtol * |e| with TOL[dtype] * factor."""
    dtype = dtype or actual.dtype
    assert actual.shape == expected.shape, f"{msg}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    a = actual.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    fin = torch.isfinite(e)
    assert torch.equal(torch.isfinite(a), fin), f"{msg}: non-finite values where the reference is finite (or vice versa)"
    if a.numel() == 0:
        return
    t = tol(dtype, factor)
    scale = max(1.0, e[fin].abs().max().item()) if fin.any() else 1.0
    torch.testing.assert_close(a[fin], e[fin], rtol=t["rtol"], atol=t["atol"] * scale, msg=lambda m: f"{msg}: {m}")


# The parity rule of the op registry (tests/op_cases.py), flash-attention's:
# our float32 result may be off the float64 reference by at most
# REF_FACTOR times the float32 error of the reference itself (the reference
# run in float32 on the same float32 inputs, against its float64 run),
#     max|ours - ref64| <= REF_FACTOR * max|ref32 - ref64| + atol,
# so a tensor is judged by how well float32 can compute it at all (sums
# over many terms, ill-conditioned angles), not by one fixed tolerance.
# REF_FACTOR = 3: measured over the registry's rows (12 seeds each, CPU,
# with the floor below) the ratio of our error to the reference's reaches
# ~2.6 for the cameras (the SH scene's scale gradients); for the collection
# ops ours stays within the floor; the lidar's reaches ~4 on < 0.1% of its
# outputs' elements and ~6 on < 1% of its gradients' (angles of ~3 rad,
# where the kernels' and the reference's float32 roundings differ most),
# which the rasterizers' flips allowance below covers. The floor atol = REF_ULPS float32 ulps (machine
# epsilon) at the tensor's scale max(1, max|ref64|): where the reference's
# float32 evaluation happens to be exact (one rounding of a copied value,
# a sigmoid that lands on a float32 number) its error is 0, and a result
# computed by another, equally valid float32 order must still be allowed
# its few roundings; 8 ulps (~1e-6 of the scale) is 2-4 roundings' worth
# of headroom over the ~2-4 ulps such differences take, and two orders of
# magnitude under any real bug's error.
# Float64 results keep TOL[float64] (1e-9 of the scale): there the
# reference's own error is not the limit.
REF_FACTOR = 3.0
REF_ULPS = 8



# NEAR_CUT_BOUND: a row next to a cut (rows_near_cuts) may move by this
# much of the tensor's scale. The pair on the cut is in one run and out of
# the other, so its own gradient at that pixel jumps: alpha's derivative
# there, 1/255 x 2 sigma / s (sigma ~ 5, s its scale), against a scale set
# by pairs of alpha up to 0.99. Seen (CPU, the rolling shutter's
# parity): 2.7% of the scale for a small Gaussian's scale gradient with
# an alpha 4.3e-9 from 1/255, past the 2% flip bound. A quarter of the
# scale still catches a wrong sign or garbage in those rows.
NEAR_CUT_BOUND = 0.25


def _free_mask(shape, free_rows):
    """A bool tensor of `shape`, True in the rows (first dimension) named."""
    free = torch.zeros(shape, dtype=torch.bool)
    if free_rows and len(shape) > 0:
        free[sorted(free_rows)] = True
    return free


def assert_close_flips(actual, expected, dtype, factor=1.0, msg="", max_frac=2e-3, bound=0.02, free_rows=()):
    """assert_close, except that in float32 a few elements (at most
    ``max_frac`` of them, each off by at most ``bound`` of the tensor's
    scale) may differ: a float32 alpha that rounds to the other side of 1/255
    (or T of 1e-4) than the float64 reference takes a Gaussian in or out of
    one pixel or ray. Such flips are rounding, not bugs (seen at ~3e-9 from
    1/255; a lidar's angles ~3 rad carry ~2e-7 of rounding). ``free_rows``
    (rows_near_cuts: the Gaussians of a pixel next to a cut) may differ
    besides, each element within NEAR_CUT_BOUND of the scale."""
    if dtype == torch.float64:
        return assert_close(actual, expected, dtype, factor=factor, msg=msg)
    a = actual.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    assert a.shape == e.shape, msg
    assert torch.isfinite(a).all(), f"{msg}: non-finite values"
    if e.numel() == 0:
        return
    scale = max(1.0, e.abs().max().item())
    t = 2e-5 * factor
    err = (a - e).abs()
    bad = err > t * scale + t * e.abs()
    free = _free_mask(e.shape, free_rows)
    assert (err[bad & free] <= NEAR_CUT_BOUND * scale).all(), (
        f"{msg}: an element of a row next to a cut is off by {err[bad & free].max().item():.3g} (scale {scale:.3g})")
    bad &= ~free
    frac = bad.double().mean().item()
    assert frac <= max_frac, f"{msg}: {int(bad.sum())} of {e.numel()} elements off (max {err[bad].max().item():.3g})"
    assert (err[bad] <= bound * scale).all(), f"{msg}: an element is off by {err[bad].max().item():.3g} (scale {scale:.3g})"

# GRAD_ORDER_FLOOR: a float32 gradient summed by atomics in the GPU's order
# (many terms that cancel) carries rounding the CPU reference's own float32
# error need not show where a tensor has few elements: the H200 ran the
# lidar's 27-Gaussian edge scene with lists cut into parts with 3 of 27
# opacity gradients 2.8e-5 of the scale off the float64 reference (3 of 7
# runs, different elements from run to run; float64 exact). Gradients are
# held to max(the rule's bound, 1e-4 of their scale).
GRAD_ORDER_FLOOR = 1e-4


def reference_bound(e, r, floor=0.0):
    """The rule's bound for a float32 result against the float64 reference
    ``e`` whose float32 run is ``r`` (float64 CPU tensors): (bound, scale,
    the float32 reference's own error)."""
    scale = max(1.0, e.abs().max().item())
    ref_err = (r - e).abs().max().item()
    return max(REF_FACTOR * ref_err + REF_ULPS * torch.finfo(torch.float32).eps * scale, floor * scale), scale, ref_err


def assert_close_to_reference(actual, ref64, ref32, msg="", flips=0.0, flip_bound=0.0, floor=0.0, free_rows=()):
    """``actual`` (float32, any device) against ``ref64`` (the float64
    reference) by the rule above, ``ref32`` being the reference's float32
    result. Where the reference is finite ``actual`` must be too. ``flips``:
    the fraction of elements that may exceed the bound (each by at most
    ``flip_bound`` of the scale): an op with discrete decisions (a
    rasterizer's 1/255 alpha and 1e-4 transmittance thresholds) takes a
    Gaussian in or out of a pixel where float32 rounds to the other side of
    the threshold than float64, in our float32 and the reference's at
    different places. ``floor``: the bound is at least this much of the
    scale (GRAD_ORDER_FLOOR for gradients). One flip moves a whole row (a Gaussian's parameter
    vector, a pixel's channels), so at least one row's worth of elements may
    flip: a scene of 27 Gaussians flips a fraction of 1/27 of a gradient or
    none (seen on the H200 with the lidar's lists cut into parts, where the
    parts' transmittance products round differently). ``free_rows``:
    indices along the first dimension (rows_near_cuts: the Gaussians of a
    pixel next to a cut) whose elements may flip besides, each within
    NEAR_CUT_BOUND of the scale. Returns the bound."""
    assert actual.shape == ref64.shape, f"{msg}: shape {tuple(actual.shape)} != {tuple(ref64.shape)}"
    a = actual.detach().to("cpu", torch.float64)
    e = ref64.detach().to("cpu", torch.float64)
    r = ref32.detach().to("cpu", torch.float64)
    fin = torch.isfinite(e)
    assert torch.isfinite(a[fin]).all(), f"{msg}: non-finite values where the reference is finite"
    if not fin.any():
        return 0.0
    free = _free_mask(fin.shape, free_rows if flips > 0 else ())
    a, e, r, free = a[fin], e[fin], r[fin], free[fin]
    assert torch.isfinite(r).all(), f"{msg}: the float32 reference is not finite where the float64 one is"
    bound, scale, ref_err = reference_bound(e, r, floor)
    err = (a - e).abs()
    bad = err > bound
    near = max(flip_bound, NEAR_CUT_BOUND) * scale
    assert (err[bad & free] <= near).all(), (
        f"{msg}: an element of a row next to a cut off by {err[bad & free].max().item():.3g}, past the near-cut bound "
        f"{near:.3g}")
    bad &= ~free
    n_bad = int(bad.sum())
    if n_bad:
        row = actual.shape[-1] if actual.dim() >= 2 else 1  # a vector's row is one element
        allowed = max(flips * err.numel(), row) if flips > 0 else 0
        assert n_bad <= allowed and (err[bad] <= flip_bound * scale).all(), (
            f"{msg}: {n_bad} of {err.numel()} elements off by more than {bound:.3g} (max {err.max().item():.3g}, "
            f"the float32 reference's own error {ref_err:.3g}, scale {scale:.3g})")
    return bound


def assert_same_sum(a, b, msg="", factor=5.0):
    """Two results of the same computation that may involve sums: bitwise equal
    on CPU (deterministic kernels), on CUDA equal up to summation order
    (reductions with atomics), i.e. within TOL * factor."""
    if a.device.type == "cpu":
        assert torch.equal(a, b), f"{msg}: not bitwise equal on CPU"
    else:
        assert_close(a, b.double(), a.dtype, factor, msg)
