"""Shared test helpers for nurec_ops (generic: used by every op family).

- Devices: ``DEVICES`` / the ``device`` fixture run a test on CPU and on CUDA;
  the CUDA params are marked ``gpu`` and skipped without a CUDA device.
  ``GPU`` / ``needs_cuda`` mark a whole test as GPU-only.
- Dtypes: ``DTYPES`` / the ``dtype`` fixture (float32, float64).
- Randomness: every test gets a fresh seed (from the OS) unless
  ``NUREC_TEST_SEED`` is set; a failing test's report shows the seed as
  ``NUREC_TEST_SEED=<n>`` so the failure can be replayed exactly.
- ``poison`` / ``poison_allocator``: fill memory with NaN/sentinels so that an
  output element a kernel forgets to write shows up as non-finite.
- ``assert_close`` / ``TOL``: compare a result against a float64 reference
  with tolerances per dtype (stated in ``TOL``).
- Scene generators for actor tracks and packed Gaussians.
"""
import math
import os

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()

needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
GPU = [pytest.mark.gpu, needs_cuda]

DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda", id="cuda", marks=GPU),
]
DTYPES = [
    pytest.param(torch.float32, id="f32"),
    pytest.param(torch.float64, id="f64"),
]
INDEX_DTYPES = [
    pytest.param(torch.int32, id="i32"),
    pytest.param(torch.int64, id="i64"),
]


def gpu(test):
    """Decorator: GPU-only test (marked ``gpu``, skipped without CUDA)."""
    for m in GPU:
        test = m(test)
    return test


@pytest.fixture(params=DEVICES)
def device(request):
    return torch.device(request.param)


@pytest.fixture(params=DTYPES)
def dtype(request):
    return request.param


@pytest.fixture(params=INDEX_DTYPES)
def index_dtype(request):
    return request.param


# ----------------------------------------------------------------- seeds

def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped without one)")
    config.addinivalue_line("markers", "sanitize: small GPU cases the compute-sanitizer runs execute")


_SEED_KEY = pytest.StashKey[int]()


@pytest.fixture(autouse=True)
def seed(request):
    """A fresh seed per test (NUREC_TEST_SEED overrides); seeds torch's CPU and
    CUDA generators. The seed is shown in the report of a failing test."""
    env = os.environ.get("NUREC_TEST_SEED")
    s = int(env) if env else int.from_bytes(os.urandom(6), "little")
    request.node.stash[_SEED_KEY] = s
    torch.manual_seed(s)
    return s


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    s = item.stash.get(_SEED_KEY, None)
    if s is not None and rep.failed:
        rep.sections.append(("nurec_ops seed", f"replay with NUREC_TEST_SEED={s}"))


# ------------------------------------------------------------ tolerances

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
# by pairs of alpha up to 0.99. Seen (session 27, CPU, the rolling shutter's
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


# ---------------------------------------------------------------- poison

def poison(t, value=None):
    """Fills ``t`` in place with a value no kernel should ever produce (NaN for
    floating tensors, -12345 / True for integer / bool) and returns it."""
    if value is None:
        if t.is_floating_point():
            value = float("nan")
        elif t.dtype == torch.bool:
            value = True
        else:
            value = -12345
    with torch.no_grad():
        t.fill_(value)
    return t


def poison_allocator(device, nbytes=1 << 22):
    """For ops that allocate their outputs: fills ``nbytes`` of freshly
    allocated memory with NaN and frees it, so that the caching allocator (CUDA)
    or malloc (CPU) is likely to hand those bytes to the next allocation; an
    output element the kernel forgets to write then reads as NaN. Call right
    before the op and check that its outputs are finite."""
    device = torch.device(device)
    if device.type == "meta":
        return
    chunks = []
    for size in (nbytes, nbytes // 16, 4096, 256, 64):
        n = max(1, size // 8)
        chunks.append(poison(torch.empty(n, dtype=torch.float64, device=device)))
    del chunks


def assert_all_finite(*tensors, msg=""):
    for i, t in enumerate(tensors):
        if t.is_floating_point():
            bad = ~torch.isfinite(t)
            assert not bad.any(), f"{msg}: output {i} has {int(bad.sum())} non-finite elements"


def randn_like_cotangent(*tensors):
    """Random cotangents (float outputs only), same dtype and device."""
    return [torch.randn_like(t) for t in tensors]


# ------------------------------------------------------- scene generators

EPOCH_US = 1_700_000_000_000_000  # ~2023-11 in microseconds since 1970


def random_quats(n, dtype=torch.float64, device="cpu", unnormalized=True):
    """Random quaternions, [n, 4]; unnormalized: norms spread over 1e-2..1e2."""
    q = torch.randn(n, 4, dtype=torch.float64)
    q = q / q.norm(dim=-1, keepdim=True)
    if unnormalized:
        q = q * torch.exp(torch.empty(n, 1, dtype=torch.float64).uniform_(-4.6, 4.6))
    return q.to(dtype=dtype, device=device)


def _axis_angle_quat(axis, angle):
    axis = axis / axis.norm(dim=-1, keepdim=True)
    h = angle[:, None] / 2
    return torch.cat((torch.cos(h), torch.sin(h) * axis), -1)


def quat_mul(a, b):
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack((
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ), -1)


def make_tracks(num_tracks=8, min_keys=1, max_keys=12, dtype=torch.float64, device="cpu",
                range_dtype=torch.int64, base_time=EPOCH_US, step_us=100_000, jitter_us=20_000,
                min_angle=0.05, max_angle=1.0, random_sign=True, gap=True, shuffle=True):
    """Keyframed actor tracks, packed as the ops take them.

    Ragged lengths in [min_keys, max_keys]; key times ascending within each
    track at about 10 Hz (``step_us`` +- ``jitter_us``, strictly increasing)
    from a random start near ``base_time``; consecutive key rotations differ
    by an angle in [min_angle, max_angle] rad (well away from the slerp
    threshold and from the 180 degree flip); quaternions unnormalized with
    a random sign (q and -q are the same rotation) when ``random_sign``.
    ``gap`` leaves unused key rows between tracks; ``shuffle`` stores the
    tracks in the key arrays in random order.

    Returns dict(key_poses [P,7], key_times [P] int64, track_ranges [T,2],
    counts list, starts list).
    """
    T = num_tracks
    counts = torch.randint(min_keys, max_keys + 1, (T,)).tolist() if T else []
    poses, times, blocks = [], [], []
    for k in range(T):
        c = counts[k]
        t0 = base_time + int(torch.randint(-step_us * 5, step_us * 5, ()).item())
        dts = step_us + torch.randint(-jitter_us, jitter_us + 1, (max(c - 1, 0),), dtype=torch.int64)
        tt = torch.cat((torch.tensor([t0], dtype=torch.int64), t0 + torch.cumsum(dts, 0)))[:c]
        q = [random_quats(1, unnormalized=False)[0]]
        for _ in range(c - 1):
            ang = torch.empty(1, dtype=torch.float64).uniform_(min_angle, max_angle)
            dq = _axis_angle_quat(torch.randn(1, 3, dtype=torch.float64), ang)[0]
            q.append(quat_mul(q[-1][None], dq[None])[0])
        q = torch.stack(q) if c else torch.zeros(0, 4, dtype=torch.float64)
        if c:
            q = q * torch.exp(torch.empty(c, 1, dtype=torch.float64).uniform_(-2.0, 2.0))
            if random_sign:
                q = q * (torch.randint(0, 2, (c, 1)) * 2 - 1).to(torch.float64)
        tr = torch.randn(c, 3, dtype=torch.float64) * 20 + torch.randn(1, 3, dtype=torch.float64) * 50
        blk = torch.cat((tr, q), -1)
        if gap and torch.rand(()) < 0.5:
            pad = int(torch.randint(1, 3, ()).item())
            blk = torch.cat((blk, torch.randn(pad, 7, dtype=torch.float64)), 0)
            tt = torch.cat((tt, tt[-1:].expand(pad) + 1 if c else torch.full((pad,), base_time))) if pad else tt
        blocks.append((k, blk, tt))
    order = torch.randperm(T).tolist() if shuffle else list(range(T))
    starts = [0] * T
    row = 0
    for k in order:
        _, blk, tt = blocks[k]
        starts[k] = row
        poses.append(blk)
        times.append(tt)
        row += blk.shape[0]
    key_poses = torch.cat(poses, 0) if poses else torch.zeros(0, 7, dtype=torch.float64)
    key_times = torch.cat(times, 0) if times else torch.zeros(0, dtype=torch.int64)
    ranges = torch.tensor([[starts[k], counts[k]] for k in range(T)], dtype=torch.int64).reshape(T, 2)
    return dict(
        key_poses=key_poses.to(dtype=dtype, device=device),
        key_times=key_times.to(device),
        track_ranges=ranges.to(dtype=range_dtype, device=device),
        counts=counts,
        starts=starts,
    )


def query_times_for(tracks, where="mixed", avoid_keys=True, avoid_midpoints=False, broadcast=False):
    """Query times [T] (or [1] when ``broadcast``) for ``make_tracks`` output.

    where: "inside" (strictly between first and last key where possible),
    "mixed" (about 70% inside, the rest before / after), "before", "after".
    avoid_keys: never exactly on a key time (for gradcheck: the pose is
    continuous but not differentiable there); avoid_midpoints: never within
    2 us of the midpoint between two keys (for "nearest" gradcheck).
    """
    kt = tracks["key_times"].cpu()
    out = []
    T = len(tracks["counts"])
    if broadcast:
        # one time: near the middle of the first non-empty track
        for k in range(T):
            s, c = tracks["starts"][k], tracks["counts"][k]
            if c >= 2:
                return (kt[s] + (kt[s + 1] - kt[s]) // 3 + 1).reshape(1).to(tracks["key_times"].device)
        return torch.tensor([EPOCH_US], dtype=torch.int64, device=tracks["key_times"].device)
    for k in range(T):
        s, c = tracks["starts"][k], tracks["counts"][k]
        if c == 0:
            out.append(EPOCH_US + 17)
            continue
        first, last = int(kt[s]), int(kt[s + c - 1])
        u = torch.rand(()).item()
        w = where
        if w == "mixed":
            w = "inside" if u < 0.7 else ("before" if u < 0.85 else "after")
        if w == "before":
            out.append(first - 1 - int(torch.randint(0, 300_000, ()).item()))
        elif w == "after":
            out.append(last + 1 + int(torch.randint(0, 300_000, ()).item()))
        elif c == 1:
            out.append(first if not avoid_keys else first + 7)
        else:
            i = int(torch.randint(0, c - 1, ()).item())
            tl, tr = int(kt[s + i]), int(kt[s + i + 1])
            while True:
                t = int(torch.randint(tl, tr + 1, ()).item())
                if avoid_keys and t in (tl, tr):
                    continue
                if avoid_midpoints and abs(2 * t - tl - tr) <= 4:
                    continue
                break
            out.append(t)
    return torch.tensor(out, dtype=torch.int64, device=tracks["key_times"].device)


def make_gaussians(n, num_tracks, dtype=torch.float64, device="cpu", id_dtype=torch.int64,
                   p_static=0.3, p_invalid=0.1):
    """Packed Gaussians: means [N,3], quats [N,4] (unnormalized), log_scales
    [N,3], opacity_logits [N], track_ids [N] (-1 static, 0..T-1 actors, and
    invalid ids -2, -7, T, T+3 with probability ``p_invalid``)."""
    T = num_tracks
    means = torch.randn(n, 3, dtype=torch.float64) * 5
    quats = random_quats(n)
    log_scales = torch.randn(n, 3, dtype=torch.float64) * 0.5 - 2
    logits = torch.randn(n, dtype=torch.float64) * 2
    u = torch.rand(n)
    ids = torch.randint(0, max(T, 1), (n,)) if T > 0 else torch.full((n,), -1)
    ids = torch.where(u < p_static, torch.full_like(ids, -1), ids)
    bad = torch.tensor([-2, -7, T, T + 3])[torch.randint(0, 4, (n,))]
    ids = torch.where((u >= p_static) & (u < p_static + p_invalid), bad, ids)
    f = lambda x: x.to(dtype=dtype, device=device)  # noqa: E731
    return dict(means=f(means), quats=f(quats), log_scales=f(log_scales), opacity_logits=f(logits),
                track_ids=ids.to(dtype=id_dtype, device=device))


def make_track_poses(num_tracks, dtype=torch.float64, device="cpu", p_inside=0.7):
    """Random actor poses [T,7] (unnormalized quats) and inside flags [T]."""
    T = num_tracks
    tr = torch.randn(T, 3, dtype=torch.float64) * 30
    q = random_quats(T)
    poses = torch.cat((tr, q), -1).to(dtype=dtype, device=device)
    inside = (torch.rand(T) < p_inside).to(device)
    return poses, inside


def upcast(x):
    """float64 detached copy (leaf, requires_grad as x) for reference runs."""
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.detach().to(torch.float64).requires_grad_(x.requires_grad)
    return x


def assert_same_sum(a, b, msg="", factor=5.0):
    """Two results of the same computation that may involve sums: bitwise equal
    on CPU (deterministic kernels), on CUDA equal up to summation order
    (reductions with atomics), i.e. within TOL * factor."""
    if a.device.type == "cpu":
        assert torch.equal(a, b), f"{msg}: not bitwise equal on CPU"
    else:
        assert_close(a, b.double(), a.dtype, factor, msg)


def changed(**change):
    """A maker of bad inputs for the error tables: the scene with each named
    input replaced (by a value, or by a function of the scene)."""
    def make(s):
        s = dict(s)
        for k, v in change.items():
            s[k] = v(s) if callable(v) else v
        return s
    return make


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def repo_env(**extra):
    """os.environ with this checkout first on PYTHONPATH (a subprocess then
    imports its nurec_ops, benchmarks and examples), and ``extra``."""
    path = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=os.pathsep.join([REPO] + ([path] if path else [])), **extra)


def run_benchmark(script, *args, timeout=600):
    """benchmarks/<script> with ``args`` in a fresh process (the checkout's
    environment): its finished process, output as text."""
    import subprocess
    import sys
    return subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", script), *map(str, args)], env=repo_env(),
                          capture_output=True, text=True, timeout=timeout)


# ------------------------------------------------- gradcheck away from cuts

def _watch_cuts(render, seen):
    """Runs ``render()`` (a reference rasterizer: both composite through
    composite.sort_front_to_back and composite.weights, watched here) and
    calls ``seen(order, alpha, live, keep, T_incl)`` at each weights call:
    the Gaussians' indices in depth order [C,N], alpha before the clamp,
    the pairs that are valid with sigma >= 0, the pairs kept and the
    transmittance after each, [C,A,B,N]."""
    from nurec_ops.reference import composite

    orig_sort, orig_weights, order = composite.sort_front_to_back, composite.weights, []

    def sort_watched(key, valid, opacities, *per_camera):
        C, N = key.shape
        idx = torch.arange(N, dtype=torch.float64, device=key.device).expand(C, N)
        out = orig_sort(key, valid, opacities, *per_camera, idx)
        order.append(out[-1].long())
        return out[:-1]

    def weights_watched(dx, dy, conic, o, valid):
        with torch.no_grad():
            sigma, alpha = composite.falloff(dx, dy, conic, o)  # alpha before the clamp
            live = valid[:, None, None, :].expand_as(alpha) & (sigma >= 0)
            _, keep, T_incl = composite.cuts(sigma, alpha, valid)
            seen(order.pop(), alpha, live, keep, T_incl)
        return orig_weights(dx, dy, conic, o, valid)

    composite.sort_front_to_back, composite.weights = sort_watched, weights_watched
    try:
        with torch.no_grad():
            render()
    finally:
        composite.sort_front_to_back, composite.weights = orig_sort, orig_weights


def _cut_distances(alpha, live, keep, T_incl):
    """Each pair's relative distance from SPEC 3's 1/255 cut and 0.99 clamp
    (alpha) and from the 1e-4 stop (T), inf where a pair has none."""
    from nurec_ops.reference import composite

    inf = torch.full_like(alpha, math.inf)
    return (torch.where(live, (alpha / composite.ALPHA_MIN - 1).abs(), inf),
            torch.where(live, (alpha / composite.ALPHA_MAX - 1).abs(), inf),
            torch.where(keep, (T_incl / composite.T_MIN - 1).abs(), inf))


def threshold_margin(render):
    """How far a scene is from the rasterizers' discrete decisions: the
    smallest relative distance, over the reference's pixel (ray) and
    Gaussian pairs, of alpha from SPEC 3's 1/255 cut and 0.99 clamp and of
    the transmittance from its 1e-4 stop. ``render()`` runs a reference
    rasterizer (_watch_cuts). A finite difference across a cut measures the
    cut's jump, not a derivative: gradcheck's inputs must lie farther from
    every cut than its eps moves them."""
    margins = []

    def seen(order, alpha, live, keep, T_incl):
        margins.extend(d.min().item() for d in _cut_distances(alpha, live, keep, T_incl) if d.numel())

    _watch_cuts(render, seen)
    return min(margins, default=math.inf)


def rows_near_cuts(render, margin=1e-4):
    """Where one float32 threshold flip may move whole gradient rows: the
    Gaussians (their indices) blended at any pixel (ray) where a pair lies
    within ``margin`` (relative, as threshold_margin measures it) of a cut,
    the near pair's Gaussian included, and those pixels' cameras. A flip
    there changes the pixel's transmittance chain, so the gradient of every
    Gaussian that pixel blends moves, and its camera's background row: seen
    on the H200 and the CPU (session 27, camera-rolling-pinhole float32): an
    alpha 8.3e-6 from 1/255 at one pixel moved the rows of the 6 Gaussians
    it blends, past an allowance of one row. float32 alphas round to ~1e-5
    of themselves there, so 1e-4 is margin enough and exempts few scenes
    (the rows still meet NEAR_CUT_BOUND). ``render()`` runs a reference
    rasterizer in float64. Returns (gaussians, cameras), sets of ints."""
    from nurec_ops.reference import composite

    gaussians, cameras = set(), set()

    def seen(order, alpha, live, keep, T_incl):
        near = torch.stack(_cut_distances(alpha, live, keep, T_incl)).amin(0) <= margin
        used = keep & (T_incl >= composite.T_MIN)
        for c, a, b in torch.nonzero(near.any(-1)).tolist():
            cameras.add(c)
            gaussians.update(order[c][used[c, a, b] | near[c, a, b]].tolist())

    _watch_cuts(render, seen)
    return gaussians, cameras


def raises_real_and_fake(call, bad, name):
    """``call(bad)`` raises a RuntimeError naming `name`, and so does the
    op's fake kernel (the same message) on fake copies of ``bad``'s tensors."""
    with pytest.raises(RuntimeError, match=f"`{name}`"):
        call(bad)
    mode = torch._subclasses.fake_tensor.FakeTensorMode()
    fake = {k: (mode.from_tensor(v) if isinstance(v, torch.Tensor) else v) for k, v in bad.items()}
    with pytest.raises(RuntimeError, match=f"`{name}`"):
        with mode:
            call(fake)


def gradcheck_inputs(call, s, keys):
    """torch.autograd.gradcheck of ``call(scene)`` in the inputs ``keys`` of
    the float64 scene dict ``s``, its other inputs held (every op's
    gradcheck: the same eps and tolerances)."""
    def f(*xs):
        return call(dict(s, **dict(zip(keys, xs))))

    return torch.autograd.gradcheck(f, [s[k] for k in keys], eps=1e-6, atol=1e-6, rtol=1e-5)


def away_from_cuts(draw, render, margin=1e-3, tries=50):
    """``draw()`` until its scene's threshold_margin (``render(scene)``)
    exceeds ``margin``; the scene."""
    for _ in range(tries):
        s = draw()
        if threshold_margin(lambda: render(s)) > margin:
            return s
    raise AssertionError(f"no scene within {tries} draws lies {margin} from every cut")
