"""nurec_ops.quat_scale_to_covar_preci (gsplat's covariances and precisions
of quaternions and scales, one fused op) against
nurec_ops.reference.quat_scale_to_covar_preci: forward and backward, CPU
and CUDA, both outputs alone or together, full matrices and upper
triangles, batch shapes (empty ones included), zero quaternions and
tiny / huge norms and scales, gradcheck, poisoned memory, the outputs not
computed, and torch.compile of gsplat's MCMC call. The generic behaviours
(opcheck, both autograd paths, no host sync, CUDA graphs, the current
stream) run over its row of tests/op_cases.py; bad arguments are rows of
tests/test_errors.py's table.

Float64 results must match the float64 reference to TOL[float64] (1e-9 of
each tensor's scale); float32 ones to TOL[float32] (2e-5); the extreme
inputs item by item, relative to each item's own magnitude."""
import pytest
import torch

import nurec_ops
from nurec_ops import reference as ref

from conftest import DEVICES, DTYPES
from poison import assert_all_finite, poison_allocator
from tolerances import TOL, assert_close

F32, F64 = torch.float32, torch.float64
OPS = torch.ops.nurec_ops

# (compute_covar, compute_preci)
FLAGS = [pytest.param((True, True), id="both"), pytest.param((True, False), id="covar"),
         pytest.param((False, True), id="preci")]
TRIU = [pytest.param(False, id="3x3"), pytest.param(True, id="triu")]
BATCHES = [(), (1,), (37,), (2, 3, 5), (0,), (4, 0, 2)]


def random_inputs(batch, dtype, device, gen):
    """Quaternions of norms spread over 1e-2..1e2 and scales over
    0.02..2.7 (gsplat's activated scales), batch shape ``batch``."""
    q = torch.randn(batch + (4,), generator=gen, dtype=F64)
    q = q * torch.exp(torch.empty(batch + (1,), dtype=F64).uniform_(-4.6, 4.6, generator=gen))
    s = torch.exp(torch.empty(batch + (3,), dtype=F64).uniform_(-4.0, 1.0, generator=gen))
    return q.to(device, dtype), s.to(device, dtype)


def _leaves(*xs):
    return [x.detach().clone().requires_grad_(True) for x in xs]


def run_both(q, s, flags, triu, gen):
    """The fused op on (q, s) and the float64 CPU reference on the same
    (upcast) values, forward and backward with one draw of cotangents:
    (outputs, grads), (reference outputs, reference grads), the
    cotangents; grads None where the batch is empty."""
    qf, sf = _leaves(q, s)
    q64, s64 = _leaves(q.cpu().double(), s.cpu().double())
    poison_allocator(q.device)
    out = nurec_ops.quat_scale_to_covar_preci(qf, sf, *flags, triu=triu)
    expect = ref.quat_scale_to_covar_preci(q64, s64, *flags, triu=triu)
    for a, e, computed in zip(out, expect, flags):
        assert (a is None) == (e is None) == (not computed)
    used = [(a, e) for a, e in zip(out, expect) if a is not None]
    if q.numel() == 0:
        return (out, None), (expect, None), []
    cots = [torch.randn(e.shape, generator=gen, dtype=F64) for _, e in used]
    poison_allocator(q.device)
    grads = torch.autograd.grad([a for a, _ in used], (qf, sf), [c.to(q.device, q.dtype) for c in cots])
    expect_g = torch.autograd.grad([e for _, e in used], (q64, s64), cots)
    return (out, grads), (expect, expect_g), cots


def _check_shapes(out, q, triu):
    tail = (6,) if triu else (3, 3)
    for a in out:
        if a is not None:
            assert a.shape == q.shape[:-1] + tail and a.dtype == q.dtype and a.device == q.device


@pytest.mark.parametrize("batch", BATCHES, ids=str)
@pytest.mark.parametrize("triu", TRIU)
@pytest.mark.parametrize("flags", FLAGS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_matches_reference(device, dtype, flags, triu, batch, seed):
    """Forward and backward against the reference on fresh random inputs.
    A float32 scale gradient through the precision may also be off by the
    rounding of the terms it sums (_precision_terms)."""
    gen = torch.Generator().manual_seed(seed)
    q, s = random_inputs(batch, dtype, device, gen)
    (out, grads), (expect, expect_g), cots = run_both(q, s, flags, triu, gen)
    _check_shapes(out, q, triu)
    for name, a, e in zip(("covars", "precis"), out, expect):
        if a is not None:
            assert_close(a, e, dtype, msg=name)
    if grads is not None:
        for name, g, e in zip(("quats", "scales"), grads, expect_g):
            assert g.shape == e.shape
            if name == "scales" and dtype == F32 and flags[1]:
                _assert_close_terms(g, e, _precision_terms(q, s, cots[-1], triu), msg=f"grad {name}")
            else:
                assert_close(g, e, dtype, msg=f"grad {name}")
        assert all((g.abs() > 0).any() for g in grads), "a zero gradient: the case tests nothing"


def _precision_terms(q, s, cot, triu):
    """Per item and scale j, the size of the terms that the precision's
    scale gradient, -t_j^3 sum_ik S_ik R_kj R_ij (t = 1 / s, S the
    precision's cotangent symmetrised, R the rotation), sums: t_j^3 sum_ik
    |S_ik| |R_kj| |R_ij|, float64. Where they cancel (one scale small
    against the others, cotangents of either sign) float32 carries
    rounding of their size, not the result's: seen at 8e-5 and 1.3e-4 of a
    gradient's scale, a few ulps of its terms (1 in ~1,000 draws of one
    Gaussian)."""
    from nurec_ops.reference import quat

    R = quat.to_rotmat(quat.normalize(q.detach().cpu().double()))
    c = cot.double()
    if triu:  # (00, 01, 02, 11, 12, 22): an entry stands for itself alone
        z = torch.zeros_like(c[..., 0])
        G = torch.stack((c[..., 0], c[..., 1], c[..., 2], z, c[..., 3], c[..., 4], z, z, c[..., 5]), -1)
        G = G.reshape(c.shape[:-1] + (3, 3))
    else:
        G = c
    S = (G + G.transpose(-1, -2)).abs()
    t = 1 / s.detach().cpu().double()
    return t ** 3 * torch.einsum("...ik,...kj,...ij->...j", S, R.abs(), R.abs())


def _assert_close_terms(a, e, terms, msg):
    """assert_close in float32, each element also allowed 16 float32 ulps
    of ``terms`` (the size of what it sums)."""
    a, e = a.detach().cpu().double(), e.detach().cpu().double()
    scale = max(1.0, e.abs().max().item())
    t = TOL[F32]
    bound = t["atol"] * scale + t["rtol"] * e.abs() + 16 * torch.finfo(F32).eps * terms
    err = (a - e).abs()
    assert (err <= bound).all(), f"{msg}: off by {err.max().item():.3g} (bound there {bound[err > bound].min().item():.3g})"


def _assert_items_close(a, e, dtype, msg, scale=None):
    """Item by item (the last dimension a row), relative to each row's
    ``scale`` [rows] (by default its own largest magnitude in the
    reference): outputs spanning 1e-60..1e60 are each held to their own
    scale. A row of scale zero must be zero exactly."""
    a = a.detach().cpu().double().reshape(-1, a.shape[-1])
    e = e.detach().cpu().double().reshape(-1, e.shape[-1])
    assert torch.isfinite(e).all(), f"{msg}: the reference is not finite (bad test inputs)"
    assert torch.isfinite(a).all(), f"{msg}: non-finite values"
    scale = e.abs().amax(-1, keepdim=True) if scale is None else scale.detach().cpu().double().reshape(-1, 1)
    zero = (scale == 0).squeeze(-1)
    assert (a[zero] == 0).all(), f"{msg}: nonzero where the reference is exactly zero"
    err = ((a - e).abs() / scale.clamp_min(torch.finfo(F64).tiny))[~zero]
    bound = TOL[dtype]["rtol"] * 10
    assert (err <= bound).all(), f"{msg}: relative error {err.max().item():.3g} > {bound:.3g}"


def extreme_inputs(dtype, device):
    """Zero quaternions, quaternions of tiny and huge norms, and scales from
    tiny to huge (within what the covariance and the precision, s^2 and
    1/s^2, and their gradients keep finite in the dtype), every combination."""
    norms, scales = ((1e-30, 1e-3, 1.0, 1e30), (1e-30, 1e-6, 1.0, 1e6, 1e30)) if dtype == F64 else \
        ((1e-12, 1e-3, 1.0, 1e12), (1e-6, 1e-3, 1.0, 1e3, 1e6))  # float32: the gradients ~ s^-3 / |q| stay finite
    g = torch.Generator().manual_seed(3)
    dirs = torch.randn(len(norms) + 1, 4, generator=g, dtype=F64)
    dirs = dirs / dirs.norm(dim=-1, keepdim=True)
    q = torch.cat((torch.zeros(1, 4, dtype=F64), dirs[1:] * torch.tensor(norms, dtype=F64)[:, None]))
    rows_q, rows_s = [], []
    for i in range(q.shape[0]):
        for a in scales:
            for b in scales:
                rows_q.append(q[i])
                rows_s.append(torch.tensor([a, b, scales[len(scales) // 2]], dtype=F64))
    return torch.stack(rows_q).to(device, dtype), torch.stack(rows_s).to(device, dtype)


@pytest.mark.parametrize("triu", TRIU)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_zero_quaternions_and_extreme_magnitudes(device, dtype, triu):
    """A zero quaternion is the identity rotation with an exactly zero
    gradient (the scales' gradient still flows); quaternions of norm 1e-30
    and 1e30 rotate as unit ones; scales from tiny to huge: each output and
    gradient item matches the reference relative to its own magnitude."""
    q, s = extreme_inputs(dtype, device)
    gen = torch.Generator().manual_seed(5)
    for flags in ((True, False), (False, True)):  # one output: its gradient's magnitude is the item's own
        (out, grads), (expect, expect_g), cots = run_both(q, s, flags, triu, gen)
        for name, a, e in zip(("covars", "precis"), out, expect):
            if a is not None:
                _assert_items_close(a.reshape(q.shape[0], -1), e.reshape(q.shape[0], -1), dtype, name)
        # a quaternion's gradient cancels to ~0 where scales are (nearly)
        # isotropic: held to its size without cancellation, |G| f^2 / |q|
        # (f = s or 1 / s); zero for a zero quaternion
        f = (s if flags[0] else 1 / s).cpu().double()
        q_scale = cots[0].abs().flatten(1).amax(-1) * f.abs().amax(-1) ** 2 / q.cpu().double().norm(dim=-1)
        _assert_items_close(grads[0], expect_g[0], dtype, "grad quats", torch.nan_to_num(q_scale, posinf=0.0))
        _assert_items_close(grads[1], expect_g[1], dtype, "grad scales")
        zero = (q == 0).all(-1)
        assert zero.any() and (grads[0][zero] == 0).all(), "a zero quaternion's gradient must be exactly zero"
        assert (grads[1][zero] != 0).any(), "a zero quaternion's scales must keep their gradient"
        covar_or_preci = out[0] if out[0] is not None else out[1]
        rot = torch.diag_embed(s[zero] ** (2 if flags[0] else -2))  # the identity rotation
        e = rot[..., [0, 0, 0, 1, 1, 2], [0, 1, 2, 1, 2, 2]] if triu else rot
        torch.testing.assert_close(covar_or_preci[zero], e, rtol=TOL[dtype]["rtol"] * 10, atol=0)


@pytest.mark.parametrize("triu", TRIU)
@pytest.mark.parametrize("flags", FLAGS)
@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck(device, flags, triu, seed):
    """torch.autograd.gradcheck in float64 through the public op, on a
    batch of two dimensions; well-conditioned inputs (norms and scales near
    1: finite differences of 1/s^2 / |q| at s = 0.02, |q| = 0.01 are off by
    more than gradcheck's tolerance), the wide ranges being the parity
    tests'."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 3, 4, generator=gen, dtype=F64)
    q = q / q.norm(dim=-1, keepdim=True) * (0.5 + torch.rand(2, 3, 1, generator=gen, dtype=F64))
    s = 0.3 + torch.rand(2, 3, 3, generator=gen, dtype=F64)
    q, s = _leaves(q.to(device), s.to(device))

    def f(q, s):
        return tuple(o for o in nurec_ops.quat_scale_to_covar_preci(q, s, *flags, triu=triu) if o is not None)

    assert torch.autograd.gradcheck(f, (q, s))


@pytest.mark.parametrize("triu", TRIU)
@pytest.mark.parametrize("flags", FLAGS)
@pytest.mark.parametrize("device", DEVICES)
def test_outputs_fully_written(device, flags, triu, seed):
    """With freed memory full of NaN every output and gradient element is
    written: finite, and the bits of an unpoisoned run."""
    gen = torch.Generator().manual_seed(seed)
    q, s = _leaves(*random_inputs((300,) if device == "cpu" else (70_001,), F32, device, gen))
    cots = None
    runs = []
    for poisoned in (False, True, True):
        if poisoned:
            poison_allocator(device)
        out = [o for o in nurec_ops.quat_scale_to_covar_preci(q, s, *flags, triu=triu) if o is not None]
        if cots is None:
            cots = [torch.randn(o.shape, generator=gen).to(device) for o in out]
        if poisoned:
            poison_allocator(device)
        grads = torch.autograd.grad(out, (q, s), cots)
        assert_all_finite(*out, *grads, msg="poisoned run")
        runs.append([t.detach() for t in out + list(grads)])
    for again in runs[1:]:
        for a, b in zip(again, runs[0]):
            assert torch.equal(a, b)


@pytest.mark.parametrize("device", ["cpu", "meta"] + [pytest.param("cuda", marks=DEVICES[1].marks)])
def test_outputs_not_computed(device):
    """The op under torch.ops returns an empty tensor of shape [0] for an
    output not computed (the wrapper: None), the others of the batch shape
    followed by [3, 3] or [6]; the fake kernel (meta) gives the same shapes
    as the real kernels; the backward takes None for an unused gradient and
    gives gradients of the inputs' shapes."""
    q = torch.ones(2, 5, 4, dtype=F64, device=device)
    s = torch.ones(2, 5, 3, dtype=F64, device=device)
    for cc in (False, True):
        for cp in (False, True):
            for triu in (False, True):
                tail = (2, 5) + ((6,) if triu else (3, 3))
                c, p = OPS.quat_scale_to_covar_preci(q, s, cc, cp, triu)
                assert c.shape == (tail if cc else (0,)) and p.shape == (tail if cp else (0,))
                assert c.dtype == p.dtype == F64 and c.device == p.device == q.device
                c2, p2 = nurec_ops.quat_scale_to_covar_preci(q, s, cc, cp, triu)
                assert (c2 is None) == (not cc) and (p2 is None) == (not cp)
                g = torch.ones(tail, dtype=F64, device=device)
                gq, gs = OPS.quat_scale_to_covar_preci_bwd(q, s, g if cc else None, g if cp else None, triu)
                assert gq.shape == q.shape and gs.shape == s.shape


def test_compile_mcmc_call(seed):
    """torch.compile(fullgraph=True) of gsplat MCMC's call (the covariances
    alone) and of the upper triangles of both: eager's values and gradients."""
    gen = torch.Generator().manual_seed(seed)
    q, s = _leaves(*random_inputs((50,), F64, "cpu", gen))
    for flags, triu in (((True, False), False), ((True, True), True)):
        def f(q, s):
            out = [o for o in nurec_ops.quat_scale_to_covar_preci(q, s, *flags, triu=triu) if o is not None]
            return sum((o * torch.arange(o[0].numel(), dtype=o.dtype).view(o.shape[1:])).sum() for o in out)
        torch._dynamo.reset()
        compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
        e, c = f(q, s), compiled(q, s)
        torch.testing.assert_close(c, e)
        for a, b in zip(torch.autograd.grad(c, (q, s)), torch.autograd.grad(e, (q, s))):
            torch.testing.assert_close(a, b)
