"""nurec_ops.interpolate_track_poses against nurec_ops.reference (SPEC section 1).

Float64 results must match the float64 reference to 1e-9 (relative to each
tensor's scale); float32 results are compared with the float64 reference run
on the upcast inputs, to 2e-5 (translations and quaternions separately, see
tolerances.TOL). Every run draws fresh random inputs; a failure prints the seed.
"""
import math

import pytest
import torch

import nurec_ops
from nurec_ops import reference as ref

from conftest import DEVICES, DTYPES, INDEX_DTYPES
from poison import assert_all_finite, poison_allocator
from random_scenes import EPOCH_US, make_tracks, query_times_for, upcast
from tolerances import assert_close, assert_same_sum

OPS = torch.ops.nurec_ops
MODES = ["slerp", "nearest"]


def _pack(key_poses, key_times, track_ranges, dtype, device, range_dtype=torch.int64):
    kp = torch.as_tensor(key_poses, dtype=torch.float64).reshape(-1, 7).to(dtype=dtype, device=device)
    kt = torch.as_tensor(key_times, dtype=torch.int64).reshape(-1).to(device)
    tr = torch.as_tensor(track_ranges, dtype=torch.int64).reshape(-1, 2).to(dtype=range_dtype, device=device)
    return kp, kt, tr


def _qt(times, device):
    return torch.as_tensor(times, dtype=torch.int64).reshape(-1).to(device)


def check_interp(key_poses, key_times, track_ranges, query_times, mode="slerp", factor=1.0, cot=None):
    """Runs the op and the float64 CPU reference on the same inputs (forward
    and backward with a random cotangent), compares them, and checks the raw
    backward op against autograd. Returns (poses, inside, grad_key_poses)."""
    dtype = key_poses.dtype
    kp = key_poses.detach().clone().requires_grad_()
    poison_allocator(kp.device)
    poses, inside = nurec_ops.interpolate_track_poses(kp, key_times, track_ranges, query_times, mode)
    T = track_ranges.shape[0]
    assert poses.shape == (T, 7) and poses.dtype == dtype and poses.device == kp.device
    assert inside.shape == (T,) and inside.dtype == torch.bool and inside.device == kp.device
    assert_all_finite(poses, msg="poses")

    kp64 = upcast(kp).cpu().detach().requires_grad_()
    cpu = lambda x: x.cpu()  # noqa: E731
    p64, in64 = ref.interpolate_track_poses(kp64, cpu(key_times), cpu(track_ranges), cpu(query_times), mode)
    assert torch.equal(inside.cpu(), in64), f"inside differs: {inside.cpu().tolist()} vs {in64.tolist()}"
    assert_close(poses[:, :3], p64[:, :3], dtype, factor, "translation")
    assert_close(poses[:, 3:], p64[:, 3:], dtype, factor, "rotation")
    if T:
        n = poses[:, 3:].double().norm(dim=-1)
        assert torch.allclose(n, torch.ones_like(n), atol=10 * torch.finfo(dtype).eps), "output quaternions not unit"

    if cot is None:
        cot = torch.randn(T, 7, dtype=dtype, device=kp.device)
    poison_allocator(kp.device)
    assert poses.requires_grad, "poses must be differentiable w.r.t. key_poses"
    (g,) = torch.autograd.grad(poses, kp, cot, allow_unused=True)
    if g is None:
        g = torch.zeros_like(kp)
    assert g.shape == kp.shape and g.dtype == dtype
    assert_all_finite(g, msg="grad key_poses")
    g64 = None
    if p64.requires_grad:  # the reference's output is constant when P == 0
        (g64,) = torch.autograd.grad(p64, kp64, upcast(cot).cpu(), allow_unused=True)
    if g64 is None:
        g64 = torch.zeros_like(kp64)
    assert_close(g[:, :3], g64[:, :3], dtype, factor, "grad translation")
    assert_close(g[:, 3:], g64[:, 3:], dtype, factor, "grad quaternion")
    poison_allocator(kp.device)
    graw = OPS.interpolate_track_poses_backward(cot, kp.detach(), key_times, track_ranges, query_times, mode)
    if kp.device.type == "cpu":
        assert torch.equal(graw, g), "raw backward op differs from autograd's gradient"
    else:  # CUDA: keys shared by several tracks are summed with atomics, in any order
        assert_close(graw, g.double(), dtype, 1.0, "raw backward op vs autograd")
    return poses.detach(), inside, g


# ------------------------------------------------------------------ parity

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("range_dtype", INDEX_DTYPES)
def test_parity_random(device, dtype, mode, range_dtype):
    tr = make_tracks(24, 1, 20, dtype=dtype, device=device, range_dtype=range_dtype)
    qt = query_times_for(tr, "mixed", avoid_keys=False)
    # some queries exactly on keys
    for k in range(0, 24, 5):
        s, c = tr["starts"][k], tr["counts"][k]
        qt[k] = tr["key_times"][s + int(torch.randint(0, c, ()).item())]
    check_interp(tr["key_poses"], tr["key_times"], tr["track_ranges"], qt, mode)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
def test_parity_broadcast_query(device, dtype, mode):
    """query_times of shape [1] equals the same time expanded to [T]."""
    tr = make_tracks(16, 1, 10, dtype=dtype, device=device)
    q1 = query_times_for(tr, broadcast=True)
    assert q1.shape == (1,)
    p1, i1, g1 = check_interp(tr["key_poses"], tr["key_times"], tr["track_ranges"], q1, mode)
    qT = q1.expand(16).clone()
    cot = torch.randn(16, 7, dtype=dtype, device=device)
    p1, _, g1 = check_interp(tr["key_poses"], tr["key_times"], tr["track_ranges"], q1, mode, cot=cot)
    pT, iT, gT = check_interp(tr["key_poses"], tr["key_times"], tr["track_ranges"], qT, mode, cot=cot)
    assert torch.equal(p1, pT) and torch.equal(i1, iT)
    assert_same_sum(g1, gT, "grad, [1] vs [T] query")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_parity_long_tracks(device, dtype):
    """Binary search over long tracks (up to 700 keys)."""
    tr = make_tracks(6, 300, 700, dtype=dtype, device=device)
    qt = query_times_for(tr, "inside", avoid_keys=False)
    check_interp(tr["key_poses"], tr["key_times"], tr["track_ranges"], qt, "slerp")
    check_interp(tr["key_poses"], tr["key_times"], tr["track_ranges"], qt, "nearest")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("length", [2, 31, 32, 33, 64, 65, 200, 992, 993, 1100])
def test_parity_search_round_boundaries(device, dtype, length):
    """Tracks at the edges of the CUDA search's rounds (32 evenly spaced keys
    per round, the last round once <= 31 keys remain: one round up to 31
    keys, two up to ~1000), queried exactly on keys at the ends of the
    sampled segments, between keys, before and after."""
    tr = make_tracks(12, length, length, dtype=dtype, device=device)
    qt = query_times_for(tr, "inside", avoid_keys=False).cpu()
    kt = tr["key_times"].cpu()
    step = (length + 31) // 32
    offsets = [0, 1, step - 1, step, length // 2, length - step - 1, length - step, length - 2, length - 1]
    for k, o in enumerate(offsets):
        qt[k] = kt[tr["starts"][k] + min(max(o, 0), length - 1)]
    qt[9] = kt[tr["starts"][9]] - 1
    qt[10] = kt[tr["starts"][10] + length - 1] + 1
    qt = qt.to(device)
    for mode in MODES:
        check_interp(tr["key_poses"], tr["key_times"], tr["track_ranges"], qt, mode)


# --------------------------------------------------------------- gradcheck

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", MODES)
def test_gradcheck(device, mode):
    tr = make_tracks(6, 1, 5, dtype=torch.float64, device=device)
    qt = query_times_for(tr, "mixed", avoid_keys=True, avoid_midpoints=(mode == "nearest"))
    kp = tr["key_poses"].clone().requires_grad_()
    f = lambda k: nurec_ops.interpolate_track_poses(k, tr["key_times"], tr["track_ranges"], qt, mode)[0]  # noqa: E731
    assert torch.autograd.gradcheck(f, (kp,), eps=1e-6, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_broadcast_query(device):
    tr = make_tracks(5, 2, 5, dtype=torch.float64, device=device)
    qt = query_times_for(tr, broadcast=True)
    kp = tr["key_poses"].clone().requires_grad_()
    f = lambda k: nurec_ops.interpolate_track_poses(k, tr["key_times"], tr["track_ranges"], qt)[0]  # noqa: E731
    assert torch.autograd.gradcheck(f, (kp,), eps=1e-6, atol=1e-6, rtol=1e-5)


# ------------------------------------------------------------- edge cases

def _rand_key(n, scale=1.0):
    k = torch.randn(n, 7, dtype=torch.float64)
    k[:, 3:] *= scale
    return k


def _normalized(k):
    k = k.clone()
    k[:, 3:] = k[:, 3:] / k[:, 3:].norm(dim=-1, keepdim=True)
    return k


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
def test_empty_track(device, dtype, mode):
    """count == 0: identity pose, inside False, zero gradient for all keys."""
    keys = _rand_key(4)
    kp, kt, rng = _pack(keys, [EPOCH_US + i for i in range(4)], [[0, 0], [2, 0], [4, 0], [1, 2]], dtype, device)
    qt = _qt([EPOCH_US, EPOCH_US + 2, EPOCH_US + 4, EPOCH_US + 1], device)
    poses, inside, g = check_interp(kp, kt, rng, qt, mode)
    ident = torch.tensor([0, 0, 0, 1, 0, 0, 0], dtype=dtype, device=device)
    for k in range(3):
        assert torch.equal(poses[k], ident)
    assert inside.tolist() == [False, False, False, True]
    assert torch.equal(g[0], torch.zeros_like(g[0])) and torch.equal(g[3], torch.zeros_like(g[3]))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
def test_single_key_track(device, dtype, mode):
    """Before / on / after the only key: that key's (normalized) pose;
    inside only exactly on it; the gradient reaches that key."""
    keys = _rand_key(1, 3.0)
    t0 = EPOCH_US + 123
    kp, kt, rng = _pack(keys, [t0], [[0, 1]] * 3, dtype, device)
    qt = _qt([t0 - 1, t0, t0 + 1], device)
    poses, inside, g = check_interp(kp, kt, rng, qt, mode)
    assert inside.tolist() == [False, True, False]
    want = _normalized(keys).to(dtype=dtype, device=device).expand(3, 7)
    assert_close(poses, want.double(), dtype)
    assert (g[0] != 0).any()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
def test_query_positions(device, dtype, mode):
    """Before, exactly on first / interior / last key, between keys, after."""
    keys = _rand_key(4, 2.0)
    base = EPOCH_US + 1000
    times = [base, base + 100_000, base + 180_000, base + 300_000]
    cases = [base - 50, base, base + 100_000, base + 180_000, base + 300_000, base + 300_001, base + 20_000]
    T = len(cases)
    kp, kt, rng = _pack(keys, times, [[0, 4]] * T, dtype, device)
    poses, inside, g = check_interp(kp, kt, rng, _qt(cases, device), mode)
    assert inside.tolist() == [False, True, True, True, True, False, True]
    kn = _normalized(keys)
    expect_key = [0, 0, 1, 2, 3, 3]
    for i, k in enumerate(expect_key):
        # on a key (a == 0), before or after: exactly that key's pose up to rounding
        assert_close(poses[i], kn[k], dtype, msg=f"case {i}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
def test_duplicate_key_times(device, dtype, mode):
    """Duplicate times: l is the last key with time <= t."""
    keys = _rand_key(6, 1.5)
    b = EPOCH_US
    times = [b, b + 100, b + 100, b + 100, b + 200, b + 200]
    qs = [b + 50, b + 100, b + 150, b + 200, b + 99, b + 201]
    kp, kt, rng = _pack(keys, times, [[0, 6]] * len(qs), dtype, device)
    poses, inside, g = check_interp(kp, kt, rng, _qt(qs, device), mode)
    assert inside.tolist() == [True, True, True, True, True, False]
    kn = _normalized(keys)
    assert_close(poses[1], kn[3], dtype, msg="on the duplicated time: the last duplicate")
    assert_close(poses[3], kn[5], dtype, msg="on the duplicated last time")
    assert_close(poses[5], kn[5], dtype, msg="after")
    # a track whose keys all share one time
    kp2, kt2, rng2 = _pack(keys[:3], [b, b, b], [[0, 3]] * 3, dtype, device)
    poses2, inside2, _ = check_interp(kp2, kt2, rng2, _qt([b - 1, b, b + 1], device), mode)
    assert inside2.tolist() == [False, True, False]
    assert_close(poses2[1], kn[2], dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_q_vs_minus_q(device, dtype):
    """Negating a key's quaternion gives the same rotation; negating the right
    key leaves the output unchanged and negates its quaternion gradient."""
    tr = make_tracks(10, 2, 6, dtype=torch.float64, random_sign=False)
    qt = query_times_for(tr, "inside", avoid_keys=True)
    cot = torch.randn(10, 7, dtype=dtype, device=device)
    kp = tr["key_poses"].to(dtype=dtype, device=device)
    kt, rng, qt = tr["key_times"].to(device), tr["track_ranges"].to(device), qt.to(device)
    p0, _, g0 = check_interp(kp, kt, rng, qt, cot=cot)
    flip = torch.ones(kp.shape[0], 1, dtype=dtype, device=device)
    flip[torch.randperm(kp.shape[0])[: kp.shape[0] // 2]] = -1
    kp2 = kp.clone()
    kp2[:, 3:] *= flip
    p1, _, g1 = check_interp(kp2, kt, rng, qt, cot=cot)
    # same rotation: q or -q, per track
    s = torch.sign((p0[:, 3:] * p1[:, 3:]).sum(-1, keepdim=True))
    assert_close(p1[:, 3:] * s, p0[:, 3:].double(), dtype)
    assert_close(p1[:, :3], p0[:, :3].double(), dtype)
    # two-key tracks, right key negated: output unchanged, its quaternion gradient negated
    tr = make_tracks(10, 2, 2, dtype=dtype, device=device, random_sign=False)
    qt = query_times_for(tr, "inside", avoid_keys=True)
    kp, kt, rng = tr["key_poses"], tr["key_times"], tr["track_ranges"]
    p0, _, g0 = check_interp(kp, kt, rng, qt, cot=cot)
    right = torch.ones(kp.shape[0], 1, dtype=dtype, device=device)
    right[torch.tensor(tr["starts"], device=device) + 1] = -1
    kp3 = kp.clone()
    kp3[:, 3:] *= right
    p3, _, g3 = check_interp(kp3, kt, rng, qt, cot=cot)
    assert_close(p3, p0.double(), dtype)
    assert_close(g3[:, 3:] * right, g0[:, 3:].double(), dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_180_degree_rotation(device, dtype):
    """dot(q_l, q_r) == 0 exactly (180 degree relative rotation): halfway is a
    90 degree rotation; slightly negative dot flips the path."""
    b = EPOCH_US
    e = 1e-3
    keys = torch.tensor([
        [0, 0, 0, 1, 0, 0, 0], [2, 0, 0, 0, 1, 0, 0],       # dot = 0
        [0, 0, 0, 1, 0, 0, 0], [2, 0, 0, -e, 1, 0, 0],      # dot < 0: flip
        [0, 0, 0, 0, 0, 0, 3], [0, 0, 0, 0, 0, -3, 0],      # dot = 0, other axes, unnormalized
    ], dtype=torch.float64)
    times = [b, b + 10] * 3
    kp, kt, rng = _pack(keys, times, [[0, 2], [2, 2], [4, 2]], dtype, device)
    poses, inside, g = check_interp(kp, kt, rng, _qt([b + 5] * 3, device))
    h = math.sqrt(0.5)
    assert_close(poses[0], torch.tensor([1, 0, 0, h, h, 0, 0], dtype=torch.float64), dtype)
    # halfway along the short path (through -x), within O(e) of (h, -h, 0, 0)
    assert torch.allclose(poses[1, 3:].cpu().double(), torch.tensor([h, -h, 0, 0], dtype=torch.float64), atol=e)
    assert_close(poses[2, 3:], torch.tensor([0, 0, -h, h], dtype=torch.float64), dtype)
    assert_all_finite(g)
    # and at many fractions
    T = 9
    kp, kt, rng = _pack(keys[:2], [b, b + 1000], [[0, 2]] * T, dtype, device)
    check_interp(kp, kt, rng, _qt([b + 1 + 111 * i for i in range(T)], device))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("angle", [0.0, 1e-12, 1e-9, 5e-7, 9.9e-7, 1.01e-6, 3e-6, 1e-4])
def test_nearly_identical_rotations(device, dtype, angle):
    """Relative angles around the 1e-6 rad slerp/lerp threshold: no NaN in
    value or gradient, and parity with the reference."""
    b = EPOCH_US
    q = torch.randn(4, dtype=torch.float64)
    q = q / q.norm()
    ax = torch.randn(3, dtype=torch.float64)
    ax = ax / ax.norm()
    dq = torch.cat((torch.tensor([math.cos(angle / 2)], dtype=torch.float64), math.sin(angle / 2) * ax))
    w1, x1, y1, z1 = q
    w2, x2, y2, z2 = dq
    qr = torch.stack((w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                      w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2))
    keys = torch.zeros(2, 7, dtype=torch.float64)
    keys[0, 3:] = q * 2.0
    keys[1, 3:] = qr * 0.5
    keys[1, :3] = 1.0
    T = 5
    kp, kt, rng = _pack(keys, [b, b + 1000], [[0, 2]] * T, dtype, device)
    poses, _, g = check_interp(kp, kt, rng, _qt([b + 1, b + 250, b + 500, b + 777, b + 999], device))
    # within the relative angle (plus rounding) of the left key
    near = q.expand(T, 4) * torch.sign(poses[:1, 3:].cpu().double() @ q)
    assert torch.allclose(poses[:, 3:].cpu().double(), near, atol=angle + 10 * torch.finfo(dtype).eps)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("scale", [1e30, 1e-30, 1e18, 1e-18, 7.5])
@pytest.mark.parametrize("mode", MODES)
def test_huge_tiny_quaternion_norms_f32(device, scale, mode):
    """float32 quaternions scaled by 1e30 (|q|^2 overflows float32) or 1e-30
    (|q|^2 underflows): same poses as the normalized keys, gradients scaled by
    1/scale."""
    dtype = torch.float32
    tr = make_tracks(8, 1, 5, dtype=torch.float64, random_sign=True)
    qt = query_times_for(tr, "mixed", avoid_keys=True)
    kp = tr["key_poses"].clone()
    kp[:, 3:] = kp[:, 3:] / kp[:, 3:].norm(dim=-1, keepdim=True)
    kt, rng, qt = tr["key_times"].to(device), tr["track_ranges"].to(device), qt.to(device)
    cot = torch.randn(8, 7, dtype=dtype, device=device)
    k1 = kp.to(dtype=dtype, device=device)
    ks = k1.clone()
    ks[:, 3:] *= scale
    assert torch.isfinite(ks).all()
    p1, i1, g1 = check_interp(k1, kt, rng, qt, mode, cot=cot)
    ps, i_s, gs = check_interp(ks, kt, rng, qt, mode, cot=cot)
    assert torch.equal(i1, i_s)
    assert_close(ps, p1.double(), dtype, factor=4)
    assert_close(gs[:, :3], g1[:, :3].double(), dtype)
    assert_close(gs[:, 3:].double() * scale, g1[:, 3:].double(), dtype, factor=4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
def test_zero_quaternion(device, dtype, mode):
    """A zero key quaternion normalizes to the identity, with zero gradient."""
    b = EPOCH_US
    keys = _rand_key(3)
    keys[0, 3:] = 0
    kp, kt, rng = _pack(keys, [b, b + 100, b + 200], [[0, 1], [0, 2], [0, 2], [0, 3]], dtype, device)
    poses, inside, g = check_interp(kp, kt, rng, _qt([b, b + 10, b - 5, b + 150], device), mode)
    assert_close(poses[0, 3:], torch.tensor([1.0, 0, 0, 0], dtype=torch.float64), dtype)
    assert_close(poses[2, 3:], torch.tensor([1.0, 0, 0, 0], dtype=torch.float64), dtype)
    assert torch.equal(g[0, 3:], torch.zeros_like(g[0, 3:])), f"grad of a zero quaternion: {g[0, 3:].tolist()}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("range_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("P", [0, 5])
def test_no_tracks(device, dtype, range_dtype, P):
    """T = 0 (query_times [0] or [1]), with and without keys."""
    kp, kt, rng = _pack(_rand_key(P), [EPOCH_US + i for i in range(P)], torch.zeros(0, 2), dtype, device, range_dtype)
    for qt in (_qt([], device), _qt([EPOCH_US], device)):
        poses, inside, g = check_interp(kp, kt, rng, qt)
        assert poses.shape == (0, 7) and inside.shape == (0,)
        assert torch.equal(g, torch.zeros_like(kp))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("range_dtype", INDEX_DTYPES)
def test_no_keys(device, dtype, range_dtype):
    """P = 0: every track is empty (count 0) or invalid: identity poses."""
    kp, kt, rng = _pack(torch.zeros(0, 7), [], [[0, 0], [0, 1], [3, 2], [-1, 1]], dtype, device, range_dtype)
    poses, inside, g = check_interp(kp, kt, rng, _qt([EPOCH_US], device))
    assert g.shape == (0, 7)
    ident = torch.tensor([0, 0, 0, 1, 0, 0, 0], dtype=dtype, device=device)
    assert torch.equal(poses, ident.expand(4, 7)) and not inside.any()


I64_MAX, I64_MIN = 2**63 - 1, -(2**63)
I32_MAX, I32_MIN = 2**31 - 1, -(2**31)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("range_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("mode", MODES)
def test_invalid_ranges(device, dtype, range_dtype, mode):
    """Ranges that do not fit in [0, P) (negative, past the end, overflowing
    start + count) are empty tracks; valid tracks beside them are unaffected;
    no key gets gradient from an invalid track."""
    P = 6
    big, small = (I32_MAX, I32_MIN) if range_dtype == torch.int32 else (I64_MAX, I64_MIN)
    bad = [[-1, 2], [P - 1, 2], [0, -1], [P, 1], [2, big], [big, 1], [small, 3], [big, big],
           [small, small], [-3, 5], [P - 2, big - P + 5], [0, P + 1]]
    good = [[0, 3], [3, 3], [0, P]]
    ranges = bad + good
    b = EPOCH_US
    times = [b, b + 100, b + 200, b + 50, b + 150, b + 250]
    kp, kt, rng = _pack(_rand_key(P, 2.0), times, ranges, dtype, device, range_dtype)
    qt = _qt([b + 120] * len(ranges), device)
    cot = torch.randn(len(ranges), 7, dtype=dtype, device=device)
    poses, inside, g = check_interp(kp, kt, rng, qt, mode, cot=cot)
    ident = torch.tensor([0, 0, 0, 1, 0, 0, 0], dtype=dtype, device=device)
    nb = len(bad)
    assert torch.equal(poses[:nb], ident.expand(nb, 7)), "invalid ranges must give the identity"
    assert not inside[:nb].any() and inside[nb:].all()
    cot2 = cot.clone()
    cot2[:nb] = 0
    _, _, g2 = check_interp(kp, kt, rng, qt, mode, cot=cot2)
    assert_same_sum(g, g2, "invalid tracks must contribute no gradient")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
def test_unused_keys_zero_grad(device, dtype, mode):
    """Keys no query uses get exactly zero gradient."""
    b = EPOCH_US
    keys = _rand_key(8, 2.0)
    times = [b + 100 * i for i in range(8)]
    # track 0 uses keys 1,2 (slerp) ; track 1: query after -> key 7 only; keys 0,3..6 unused
    kp, kt, rng = _pack(keys, times, [[0, 3], [4, 4]], dtype, device)
    poses, inside, g = check_interp(kp, kt, rng, _qt([b + 130, b + 900], device), mode)
    used = {"slerp": [1, 2, 7], "nearest": [1, 7]}[mode]
    for k in range(8):
        if k in used:
            assert (g[k] != 0).any(), f"key {k} should get gradient"
        else:
            assert torch.equal(g[k], torch.zeros_like(g[k])), f"key {k} should get exactly zero gradient"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_nearest_ties_go_left(device, dtype):
    b = EPOCH_US
    keys = _rand_key(3, 2.0)
    times = [b, b + 10, b + 30]
    qs = [b, b + 4, b + 5, b + 6, b + 10, b + 19, b + 20, b + 21, b + 30]
    want = [0, 0, 0, 1, 1, 1, 1, 2, 2]
    kp, kt, rng = _pack(keys, times, [[0, 3]] * len(qs), dtype, device)
    cot = torch.randn(len(qs), 7, dtype=dtype, device=device)
    poses, inside, g = check_interp(kp, kt, rng, _qt(qs, device), "nearest", cot=cot)
    assert inside.all()
    kn = _normalized(keys)
    for i, k in enumerate(want):
        assert_close(poses[i], kn[k], dtype, msg=f"query {qs[i] - b}")
    # translation gradient goes to the chosen key, unchanged
    gt = torch.zeros(3, 3, dtype=torch.float64)
    for i, k in enumerate(want):
        gt[k] += cot[i, :3].double().cpu()
    assert_close(g[:, :3], gt, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("base", [EPOCH_US, 2**62 + 12345, -(2**62)])
def test_epoch_times_exact_fraction(device, dtype, base):
    """Fractions come from int64 differences in float64: a = 1/3 exactly at
    epoch-sized times (and beyond 2**53, where the times themselves are not
    representable in float64)."""
    keys = torch.zeros(4, 7, dtype=torch.float64)
    keys[:, 3] = 1
    keys[1, 0] = 3.0
    keys[3, 0] = 2.0**40 + 1
    b = base
    d = 2**40 + 1
    kp, kt, rng = _pack(keys, [b, b + 3, b + 10, b + 10 + d], [[0, 2], [0, 2], [0, 2], [2, 2], [2, 2]],
                        dtype, device)
    qs = [b + 1, b + 2, b - 1, b + 11, b + 10 + d - 1]
    poses, inside, _ = check_interp(kp, kt, rng, _qt(qs, device))
    assert inside.tolist() == [True, True, False, True, True]
    want = torch.tensor([1.0, 2.0, 0.0, 1.0, float(d - 1)], dtype=torch.float64)
    assert_close(poses[:, 0], want.to(dtype).double(), dtype)
    if dtype == torch.float64:
        assert poses[0, 0].item() == pytest.approx(1.0, abs=1e-15)
        assert poses[3, 0].item() == pytest.approx(1.0, abs=1e-15)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
def test_non_contiguous_and_expanded(device, dtype, mode):
    """Transposed / sliced / stride-0 inputs give the same result as dense ones."""
    tr = make_tracks(10, 1, 8, dtype=dtype, device=device)
    kp, kt, rng = tr["key_poses"], tr["key_times"], tr["track_ranges"]
    qt = query_times_for(tr, "mixed", avoid_keys=False)
    cot = torch.randn(10, 7, dtype=dtype, device=device)
    p0, i0, g0 = check_interp(kp, kt, rng, qt, mode, cot=cot)
    kp_nc = kp.t().contiguous().t()                                   # transposed
    kt_nc = torch.stack((kt, kt), 1)[:, 1]                            # stride 2
    rng_nc = rng.t().contiguous().t()                                 # transposed
    qt_nc = torch.stack((qt, qt * 0), 1)[:, 0]                        # stride 2
    assert not (kp_nc.is_contiguous() or kt_nc.is_contiguous() or rng_nc.is_contiguous() or qt_nc.is_contiguous())
    p1, i1, g1 = check_interp(kp_nc, kt_nc, rng_nc, qt_nc, mode, cot=cot.t().contiguous().t())
    assert torch.equal(p0, p1) and torch.equal(i0, i1)
    assert_same_sum(g0, g1, "grad, non-contiguous")
    # stride-0: one query time expanded over all tracks; one key row used by every track
    qe = qt[:1].expand(10)
    assert qe.stride() == (0,)
    p2, i2, g2 = check_interp(kp, kt, rng, qe, mode, cot=cot)
    p3, i3, g3 = check_interp(kp, kt, rng, qt[:1], mode, cot=cot)
    assert torch.equal(p2, p3) and torch.equal(i2, i3)
    assert_same_sum(g2, g3, "grad, expanded query")
    re = torch.tensor([[0, 1]], dtype=rng.dtype, device=device).expand(10, 2)
    check_interp(kp, kt, re, qt, mode, cot=cot.expand(10, 7))
    ce = torch.randn(1, 7, dtype=dtype, device=device).expand(10, 7)
    check_interp(kp, kt, rng, qt, mode, cot=ce)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
def test_gradient_accumulates_over_two_calls(device, dtype, mode):
    tr = make_tracks(8, 1, 8, dtype=dtype, device=device)
    q1 = query_times_for(tr, "mixed", avoid_keys=False)
    q2 = query_times_for(tr, "mixed", avoid_keys=False)
    c1, c2 = torch.randn(8, 7, dtype=dtype, device=device), torch.randn(8, 7, dtype=dtype, device=device)
    kp = tr["key_poses"].clone().requires_grad_()
    a, _ = nurec_ops.interpolate_track_poses(kp, tr["key_times"], tr["track_ranges"], q1, mode)
    b, _ = nurec_ops.interpolate_track_poses(kp, tr["key_times"], tr["track_ranges"], q2, mode)
    ((a * c1).sum() + (b * c2).sum()).backward()
    k64 = upcast(kp).cpu().detach().requires_grad_()
    cpu = [x.cpu() for x in (tr["key_times"], tr["track_ranges"])]
    a64, _ = ref.interpolate_track_poses(k64, *cpu, q1.cpu(), mode)
    b64, _ = ref.interpolate_track_poses(k64, *cpu, q2.cpu(), mode)
    ((a64 * upcast(c1).cpu()).sum() + (b64 * upcast(c2).cpu()).sum()).backward()
    assert_close(kp.grad[:, :3], k64.grad[:, :3], dtype)
    assert_close(kp.grad[:, 3:], k64.grad[:, 3:], dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_keyword_arguments_and_default_mode(device):
    tr = make_tracks(4, 1, 4, device=device)
    qt = query_times_for(tr)
    p, i = nurec_ops.interpolate_track_poses(key_poses=tr["key_poses"], key_times=tr["key_times"],
                                             track_ranges=tr["track_ranges"], query_times=qt)
    p2, i2 = torch.ops.nurec_ops.interpolate_track_poses(
        key_poses=tr["key_poses"], key_times=tr["key_times"], track_ranges=tr["track_ranges"],
        query_times=qt, mode="slerp")
    assert torch.equal(p, p2) and torch.equal(i, i2)


@pytest.mark.parametrize("device", DEVICES)
def test_no_grad_and_inputs_unchanged(device):
    tr = make_tracks(6, 1, 6, device=device)
    qt = query_times_for(tr)
    before = [t.clone() for t in (tr["key_poses"], tr["key_times"], tr["track_ranges"], qt)]
    with torch.no_grad():
        p, _ = nurec_ops.interpolate_track_poses(tr["key_poses"], tr["key_times"], tr["track_ranges"], qt)
    assert not p.requires_grad
    for a, b in zip(before, (tr["key_poses"], tr["key_times"], tr["track_ranges"], qt)):
        assert torch.equal(a, b), "inputs must not be modified"
