"""The float32 tolerance rule itself (tolerances.assert_close_to_reference):
a rule that passes everything tests nothing, so it is tested on tensors
made to pass and to fail."""
import pytest
import torch

from tolerances import assert_close_to_reference

F64 = torch.float64


def _case(shape, rows_off, seed=0):
    """A float64 'reference', its float32 rounding, and an 'actual' that is
    the rounding with rows_off rows (last dim) moved by 1e-3 of the scale."""
    g = torch.Generator().manual_seed(seed)
    e = torch.randn(shape, generator=g, dtype=F64)
    r = e.float().double()
    a = r.clone()
    a.view(-1, shape[-1] if len(shape) >= 2 else 1)[:rows_off] += 1e-3 * e.abs().max()
    return a, e, r


def test_exact_rounding_passes():
    a, e, r = _case((27, 4), 0)
    assert_close_to_reference(a, e, r, "x")


def test_one_flipped_row_passes_in_a_small_scene():
    """27 Gaussians, flips 3%: one Gaussian's 4 values may flip (1/27 > 3%)."""
    a, e, r = _case((27, 4), 1)
    assert_close_to_reference(a, e, r, "x", flips=0.03, flip_bound=0.02)


@pytest.mark.parametrize("shape,rows_off,flips", [
    ((27, 4), 2, 0.03),     # two rows: more than one row and more than 3%
    ((27,), 2, 0.03),       # a vector's row is one element
    ((27, 4), 1, 0.0),      # no flips allowed: none may flip
    ((1000, 3), 40, 0.03),  # 120 of 3000 elements > 3%
])
def test_too_many_flips_fail(shape, rows_off, flips):
    a, e, r = _case(shape, rows_off)
    with pytest.raises(AssertionError, match="elements off"):
        assert_close_to_reference(a, e, r, "x", flips=flips, flip_bound=0.02)


def test_a_flip_beyond_the_bound_fails():
    a, e, r = _case((27, 4), 1)
    a[0, 0] += 0.5 * e.abs().max()
    with pytest.raises(AssertionError, match="elements off"):
        assert_close_to_reference(a, e, r, "x", flips=0.03, flip_bound=0.02)


def test_the_gradient_floor_takes_order_noise_only():
    """floor=1e-4: elements 3e-5 of the scale off (the GPU's atomics' order)
    pass however many; 5e-4 off still counts as a flip and fails."""
    a, e, r = _case((27,), 0)
    a[:9] += 3e-5 * e.abs().max()
    with pytest.raises(AssertionError, match="elements off"):
        assert_close_to_reference(a, e, r, "x", flips=0.03, flip_bound=0.02)
    assert_close_to_reference(a, e, r, "x", flips=0.03, flip_bound=0.02, floor=1e-4)
    a[:2] += 5e-4 * e.abs().max()
    with pytest.raises(AssertionError, match="elements off"):
        assert_close_to_reference(a, e, r, "x", flips=0.03, flip_bound=0.02, floor=1e-4)


@pytest.mark.parametrize("opacity,lo,hi", [((1 / 255) * (1 + 1e-6), 0.0, 1e-5), (0.5, 0.49, 0.5)])
def test_threshold_margin_sees_the_cut(opacity, lo, hi):
    """near_cuts.threshold_margin on one Gaussian centred on a one-pixel
    camera (alpha = its opacity): 1e-6 above the 1/255 cut reads ~1e-6;
    opacity 0.5 reads its distance from the 0.99 clamp, 0.495."""
    from near_cuts import threshold_margin
    from nurec_ops import reference as ref

    d = dict(dtype=torch.float64)
    K = torch.tensor([[[10.0, 0, 0.5], [0, 10.0, 0.5], [0, 0, 1]]], **d)
    m = threshold_margin(lambda: ref.rasterize_camera(
        torch.tensor([[0.0, 0.0, 3.0]], **d), torch.tensor([[1.0, 0, 0, 0]], **d), torch.full((1, 3), 0.1, **d),
        torch.tensor([opacity], **d), torch.ones(1, 3, **d), torch.eye(4, **d)[None], K, 1, 1))
    assert lo <= m <= hi, m


def test_free_rows_take_a_pixels_gaussians_only():
    """One flip next to a cut moves the rows of the Gaussians its pixel
    blends (near_cuts.rows_near_cuts): 6 of 60 rows off fail the 2%
    allowance, pass with those rows free, and fail again with a seventh row
    off outside them or with a free row past NEAR_CUT_BOUND."""
    a, e, r = _case((60, 3), 0)
    rows = [15, 17, 34, 36, 55, 58]
    a[rows] += 1e-3 * e.abs().max()
    kw = dict(flips=0.02, flip_bound=0.02)
    with pytest.raises(AssertionError, match="elements off"):
        assert_close_to_reference(a, e, r, "x", **kw)
    assert_close_to_reference(a, e, r, "x", free_rows=set(rows), **kw)
    b = a.clone()
    b[[3, 4]] += 1e-3 * e.abs().max()
    with pytest.raises(AssertionError, match="elements off"):
        assert_close_to_reference(b, e, r, "x", free_rows=set(rows), **kw)
    b = a.clone()
    b[15, 0] += 0.5 * e.abs().max()
    with pytest.raises(AssertionError, match="past the near-cut bound"):
        assert_close_to_reference(b, e, r, "x", free_rows=set(rows), **kw)
    with pytest.raises(AssertionError, match="elements off"):  # no flips allowed: no row is free
        assert_close_to_reference(a, e, r, "x", free_rows=set(rows))


@pytest.mark.parametrize("front_opacity,expect", [((1 / 255) * (1 + 1e-6), ({0, 1}, {0})), (0.3, (set(), set()))])
def test_rows_near_cuts_names_the_pixels_gaussians(front_opacity, expect):
    """near_cuts.rows_near_cuts on two Gaussians centred on a one-pixel
    camera (alpha = opacity), the front one (index 1, nearer) 1e-6 above
    the 1/255 cut: both Gaussians and the camera; a front opacity of 0.3
    (far from every cut, the back one 0.5): none."""
    from near_cuts import rows_near_cuts
    from nurec_ops import reference as ref

    d = dict(dtype=torch.float64)
    K = torch.tensor([[[10.0, 0, 0.5], [0, 10.0, 0.5], [0, 0, 1]]], **d)
    got = rows_near_cuts(lambda: ref.rasterize_camera(
        torch.tensor([[0.0, 0.0, 4.0], [0.0, 0.0, 3.0]], **d), torch.tensor([[1.0, 0, 0, 0]] * 2, **d),
        torch.full((2, 3), 0.1, **d), torch.tensor([0.5, front_opacity], **d), torch.ones(2, 3, **d),
        torch.eye(4, **d)[None], K, 1, 1))
    assert got == expect


def test_flips_rule_frees_rows_next_to_a_cut():
    """tolerances.assert_close_flips (the rasterizers' own parity): a row
    next to a cut 5% of the scale off (past the 2% bound) passes only when
    freed; 30% off fails even then."""
    from tolerances import assert_close_flips
    a, e, r = _case((150, 3), 0)
    a[133, 0] += 0.05 * e.abs().max()
    with pytest.raises(AssertionError, match="is off by"):
        assert_close_flips(a, e, torch.float32, max_frac=0.02)
    assert_close_flips(a, e, torch.float32, max_frac=0.02, free_rows={133})
    a[133, 1] += 0.3 * e.abs().max()
    with pytest.raises(AssertionError, match="next to a cut"):
        assert_close_flips(a, e, torch.float32, max_frac=0.02, free_rows={133})
