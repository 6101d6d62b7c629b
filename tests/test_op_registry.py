"""The generic behaviours of every op, written once and parametrised over the
op registry (tests/op_cases.py: one row per op and sensor model):

- parity with the pure-PyTorch reference, forward and backward (CPU, CUDA;
  float32 by the registry's rule: relative to the float32 error of the
  reference itself, tolerances.assert_close_to_reference; float64 tight);
- opcheck of every nurec_ops operator the row's forward and backward reach,
  with the arguments the public API gave it;
- torch.compile(fullgraph=True): values and gradients as eager, again
  with new inputs of the same shapes;
- both autograd paths (the Python wrappers' _library.AutogradOp and the
  kernel torch.library.register_autograd installed) agree, and the
  no-gradient path builds no autograd graph;
- poisoned memory: every output and gradient element is written;
- CUDA only (GPU-marked): no host sync, CUDA-graph capture of forward and
  backward replayed with new inputs, the current (side) stream, the
  binning overflow policy of the rasterizers, and their long lists cut into
  parts (parity, parts against one walk, the same bits every call).

Special-purpose tests (edge scenes, real data, golden images, error
messages, sizes past the grid) stay in the op families' own files."""
import sys
import warnings

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from conftest import DEVICES, DTYPES, gpu, no_host_sync
from near_cuts import rows_near_cuts
from poison import assert_all_finite, poison_allocator
from tolerances import GRAD_ORDER_FLOOR, assert_close, assert_close_to_reference
from op_cases import params
from nurec_ops import _binning

F32, F64 = torch.float32, torch.float64


# ----------------------------------------------------------------- helpers

def leaves(case, inputs):
    """Names of the row's differentiable inputs present in these inputs."""
    return [k for k in case.grads if isinstance(inputs.get(k), torch.Tensor)]


def on_cpu(inputs, dtype):
    """The inputs as the reference sees them: CPU, floating tensors in
    ``dtype`` (the same rounded values), detached leaves requiring a
    gradient as the originals do."""
    out = {}
    for k, v in inputs.items():
        if isinstance(v, torch.Tensor):
            v = v.detach().cpu()
            if v.is_floating_point():
                v = v.to(dtype).requires_grad_(inputs[k].requires_grad)
        out[k] = v
    return out


def cotangents(outs, seed):
    """Random float64 CPU cotangents of the floating outputs (one draw,
    cast to each run's dtype and device)."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(o.shape, generator=g, dtype=F64) for o in outs if o.is_floating_point()]


def grads_of(case, out, inputs, cots):
    """The gradients of <outputs, cotangents> with respect to the row's
    differentiable inputs, by name (None where unused)."""
    fl = [o for o in out if o.is_floating_point()]
    names = leaves(case, inputs)
    if not names:
        return {}
    grads = torch.autograd.grad(fl, [inputs[k] for k in names], [c.to(o.device, o.dtype) for c, o in zip(cots, fl)],
                                allow_unused=True)
    return dict(zip(names, grads))


def forward_backward(case, fn, inputs, cots, **kw):
    """fn(**inputs, **kw) and grads_of its outputs."""
    out = list(fn(**inputs, **kw))
    return out, grads_of(case, out, inputs, cots)


def tensors_of(inputs):
    return {k: v for k, v in inputs.items() if isinstance(v, torch.Tensor)}


def copy_into(static, new):
    """Copies new values into the static inputs (same shapes) in place."""
    with torch.no_grad():
        for k, v in tensors_of(static).items():
            assert new[k].shape == v.shape, f"{k}: new inputs must keep the shape"
            v.copy_(new[k])


def assert_tests_something(case, outs, grads):
    """A row whose outputs (or gradients) are all zero could not fail."""
    fl = [o for o in outs if o.is_floating_point()]
    masks = [o for o in outs if o.dtype == torch.bool]
    assert fl or masks, f"{case}: no floating or bool output to look at"
    if fl:
        assert any((o.detach().abs() > 0).any() for o in fl), f"{case}: every output is zero; the case tests nothing"
    else:  # a row of masks only (camera_visible): a mask of one value would test nothing
        for m in masks:
            assert m.any() and not m.all(), f"{case}: a mask all {bool(m.any())}; the case tests nothing"
    if grads:
        assert all(g is not None for g in grads.values()), f"{case}: no gradient for {[k for k, g in grads.items() if g is None]}"
        assert any((g.abs() > 0).any() for g in grads.values()), f"{case}: every gradient is zero"


def assert_same_run(case, actual, expected, dtype, msg, grads=False):
    """Two runs of the same op on the same inputs (graph replay, another
    stream, poisoned memory): equal bits on the CPU, for integer outputs and
    for the forward outputs of a deterministic row; else (CUDA gradients,
    the rasterizers' outputs) equal up to summation order (atomics), within
    5x TOL[dtype] of the tensor's scale."""
    for i, (a, b) in enumerate(zip(actual, expected)):
        if a is None or b is None:
            assert a is None and b is None, f"{msg} {i}"
        elif a.device.type == "cpu" or not a.is_floating_point() or (case.deterministic and not grads):
            assert torch.equal(a, b), f"{msg} {i}: not equal"
        else:
            assert_close(a, b.double(), dtype, 5.0, f"{msg} {i}")


class RecordOps(TorchDispatchMode):
    """Records every nurec_ops operator call (overload, args, kwargs) made
    while active, forward and backward."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.namespace == "nurec_ops":
            self.calls.append((func, args, kwargs))
        return func(*args, **kwargs)


@pytest.fixture
def cut_lists(monkeypatch):
    """The rasterizers' long tile lists cut into 4 parts from 2 entries on
    (CUDA; the CPU walks every list whole), so that the parts' state is
    among what opcheck and the autograd paths compare."""
    for mod in ("nurec_ops.rasterize_camera", "nurec_ops.rasterize_lidar"):
        monkeypatch.setattr(sys.modules[mod], "_SEGMENTS", 4)
        monkeypatch.setattr(sys.modules[mod], "_SEGMENT_MIN", 2)


def full_args(func, args):
    """args of an overload with the schema's trailing defaults filled in
    (AutogradOp takes every argument positionally)."""
    schema = func._schema.arguments
    return tuple(args) + tuple(a.default_value for a in schema[len(args):])


def recorded_forward(case, inputs):
    """The arguments the public op passed to its AutogradOp's operator: its
    one call, or, where a configuration's first CUDA call overflowed the
    capacity it guessed without history, the policy's one rerun with more
    (nurec_ops/_binning.py; a test run alone in a fresh process meets it)."""
    with RecordOps() as rec, torch.no_grad():
        case.op(**inputs)
    calls = [c for c in rec.calls if c[0] is case.autograd_op.op.default]
    assert 1 <= len(calls) <= 2, f"{case}: {len(calls)} calls of {case.autograd_op.op}"
    func, args, kwargs = calls[-1]
    assert not kwargs
    args = full_args(func, args)
    if len(calls) == 2:
        names = [a.name for a in func._schema.arguments]
        first = full_args(*calls[0][:2])
        k = names.index("capacity")
        assert args[k] > first[k], f"{case}: two calls that are not an overflow's rerun (capacity {first[k]}, {args[k]})"
    return args


# ------------------------------------------------------------------ parity

@pytest.mark.sanitize
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", params())
def test_parity(case, device, dtype, seed):
    """Forward and backward against the reference on the same (rounded)
    inputs: float64 within TOL[float64] (gradients 10x), float32 by the
    registry's rule against the reference's own float32 error."""
    check_parity(case, case.inputs(device, dtype, seed), device, dtype, seed)


PER_CAMERA_GRADS = ("backgrounds",)  # gradients with a row per camera, not per Gaussian


def check_parity(case, s, device, dtype, seed):
    """test_parity on the inputs s."""
    r64 = on_cpu(s, F64)
    poison_allocator(device)
    out = list(case.op(**s))
    cots = cotangents(out, seed)
    poison_allocator(device)
    grads = grads_of(case, out, s, cots)
    expect, expect_g = forward_backward(case, case.reference, r64, cots)
    if dtype == F32:
        ref32, ref32_g = forward_backward(case, case.reference, on_cpu(s, F32), cots)
    assert len(out) == len(case.outputs)
    flips = case.flips or (0.0, 0.0, 0.0)
    # a rasterizer's float32 flip next to a cut moves the rows of the Gaussians that pixel blends
    near = rows_near_cuts(lambda: case.reference(**r64)) if dtype == F32 and case.flips else (set(), set())
    n_gaussians = r64["means"].shape[0] if "means" in r64 else -1
    for i, (name, a, e) in enumerate(zip(case.outputs, out, expect)):
        assert a.device.type == torch.device(device).type and a.shape == e.shape, name
        if not a.is_floating_point():
            assert a.dtype == e.dtype, name
            atol = case.int_atol32 if dtype == F32 else 0
            d = (a.cpu().long() - e.long()).abs()
            assert (d <= atol).all(), f"{name}: {int((d > atol).sum())} elements differ by more than {atol}"
        elif dtype == F64:
            assert a.dtype == F64
            assert_close(a, e, F64, msg=name)
        else:
            assert a.dtype == F32
            assert_close_to_reference(a, e, ref32[i], name, flips[0], flips[2])
    for k, e in expect_g.items():
        assert (grads[k] is None) == (e is None), f"grad {k}: None in one run only"
        if e is None:
            continue
        if dtype == F64:
            assert_close(grads[k], e, F64, 10.0, f"grad {k}")
        else:
            free = near[1] if k in PER_CAMERA_GRADS else near[0] if e.shape[0] == n_gaussians else ()
            assert_close_to_reference(grads[k], e, ref32_g[k], f"grad {k}", flips[1], flips[2], GRAD_ORDER_FLOOR,
                                      free_rows=free)
    assert_tests_something(case, out, grads)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", params(lambda c: c.name.startswith(("camera", "lidar"))))  # the rasterizers
def test_unread_outputs_take_no_cotangent(case, device, seed):
    """A loss that reads only the first output (the render, or the lidar's
    features) leaves depth / range and alpha without a cotangent: the
    backward op takes them as absent (no zero images made), and its
    gradients equal those of explicit zero cotangents. (If the kernels read
    an absent cotangent, this fails or crashes.)"""
    s = case.inputs(device, F64, seed)
    names = leaves(case, s)
    out = list(case.op(**s))
    cot = cotangents(out, seed)[0].to(out[0].device, out[0].dtype)
    absent = torch.autograd.grad((out[0] * cot).sum(), [s[k] for k in names], allow_unused=True)
    out = list(case.op(**s))
    zeros = [torch.zeros_like(o) for o in out[1:3]]
    explicit = torch.autograd.grad(out[:3], [s[k] for k in names], [cot] + zeros, allow_unused=True)
    for k, a, e in zip(names, absent, explicit):
        assert (a is None) == (e is None), k
        if e is not None:
            assert_close(a, e, F64, msg=f"grad {k}")
    assert any(a is not None and a.abs().sum() > 0 for a in absent), "no gradient reached the inputs"


# ------------------------------------------ long lists cut into parts (CUDA)

SEG_FIXUP = 0x20000000  # csrc/tiles/splat.h: NUREC_SPLAT_SEG_FIXUP


def cut_into_parts(monkeypatch, case, segments, segment_min):
    """The row's rasterizer cuts lists longer than segment_min into up to
    `segments` parts (0: none)."""
    mod = sys.modules[case.parts.module]  # the package's attribute of that name is the function
    monkeypatch.setattr(mod, "_SEGMENTS", segments)
    monkeypatch.setattr(mod, "_SEGMENT_MIN", segment_min)


def forward_args(case, inputs, **given):
    """The arguments the public op gives the row's forward operator, with
    those named in `given` (e.g. segments, segment_min) replaced."""
    func = case.autograd_op.op.default
    args = list(recorded_forward(case, inputs))
    names = [a.name for a in func._schema.arguments]
    for name, value in given.items():
        args[names.index(name)] = value
    return args


def call_forward(case, args):
    """The row's forward operator on `args`: its outputs by the schema's names."""
    func = case.autograd_op.op.default
    with torch.no_grad():
        out = func(*args)
    return dict(zip([r.name for r in func._schema.returns], out))


def raw_forward(case, inputs, segments, segment_min):
    """The row's forward operator on the arguments the public op gives it,
    with the cut as given: its outputs by the schema's names."""
    return call_forward(case, forward_args(case, inputs, segments=segments, segment_min=segment_min))


def bits(t):
    """A tensor as compared bit for bit (NaN == NaN too)."""
    return t.view(torch.uint8) if t.is_floating_point() else t


def longest_list(case, inputs):
    """The longest tile list of a scene (the CPU binning: the same tiles)."""
    r = raw_forward(case, on_cpu(inputs, F64), 0, 1)["tile_ranges"]
    return int((r[..., 1] - r[..., 0]).max())


def _segment_count(segments, segment_min, n):
    """csrc/tiles/splat_math.h: nurec_splat_segment_count (parts of a list of n entries)."""
    if segments <= 1 or n <= segment_min:
        return 1
    seg_len = max(-(-n // segments), segment_min)
    return -(-n // seg_len)


def _random_tile_lists(g, segments, segment_min, trial, long_share):
    """Random tile list lengths and a capacity that holds them: odd trials
    as real scenes have them (most lists short, `long_share` long), even
    ones all long; every third list an edge length around segment_min."""
    edge = [segment_min, segment_min + 1, 2 * segment_min - 1, 2 * segment_min, segments * segment_min + 1, 1, 0]
    tiles = int(torch.randint(1, 300, (1,), generator=g))
    short = torch.randint(0, segment_min + 1, (tiles,), generator=g)
    long = torch.randint(0, 4 * segments * segment_min, (tiles,), generator=g)
    pick_long = (torch.rand(tiles, generator=g) < long_share) | torch.tensor(trial % 2 == 0)
    lens = torch.where(pick_long, long, short).tolist()
    lens = [edge[(t + trial) % len(edge)] if t % 3 == 0 else n for t, n in enumerate(lens)]
    return lens, sum(lens) + int(torch.randint(0, 50, (1,), generator=g))


@pytest.mark.parametrize("segments,segment_min", [(2, 1), (4, 3), (8, 8), (16, 512), (16, 777), (64, 1), (5, 100)])
def test_part_slots_never_meet(segments, segment_min):
    """The parts' state layout (tiles/splat_math.h, nurec_splat_part_layout,
    ported): on random tile lists, up to a full capacity, every part of
    every cut list gets its own slot, inside the S x X slots the fake
    kernels size (nurec_ops._binning.part_slots, the glue's rule)."""
    g = torch.Generator().manual_seed(segments * 1000 + segment_min)
    m = 1 << (segment_min.bit_length() - 1)
    modes = set()
    for trial in range(40):
        lens, capacity = _random_tile_lists(g, segments, segment_min, trial, 0.1)
        tiles = len(lens)
        by_start = (2 * capacity) >> (m.bit_length() - 1)
        by_tile = segments * tiles
        modes.add(by_start <= by_tile)
        X = _binning.part_slots(segments, capacity, segment_min, tiles)
        assert segments * X >= min(by_start, by_tile) and X >= 1
        used, start = set(), 0
        for t, n in enumerate(lens):
            parts = _segment_count(segments, segment_min, n)
            if parts > 1:
                base = ((2 * start) >> (m.bit_length() - 1)) if by_start <= by_tile else t * segments
                slots = set(range(base, base + parts))
                assert not slots & used, (t, n, start, sorted(slots & used))
                assert max(slots) < segments * X, (t, n, max(slots), segments * X)
                used |= slots
            start += n
    assert modes == {True, False}, f"only slots by {'start' if True in modes else 'tile'} were drawn"


@pytest.mark.parametrize("segments,segment_min", [(2, 1), (4, 3), (8, 8), (16, 512), (16, 777), (64, 1), (5, 100)])
def test_later_parts_one_per_chunk(segments, segment_min):
    """The walks' grid (tiles/splat_parts_grid_cuda.cuh, ported): on random
    tile lists up to a full capacity, the later part (1 and up) of every
    cut list starts in a chunk of segment_min entries of its own, one of
    the ceil(capacity / segment_min) chunks the grid launches (a chunk
    that two later parts start in would walk one of them and lose the
    other), and the chunks' list names every later part exactly once."""
    g = torch.Generator().manual_seed(segments * 1000 + segment_min + 7)
    for trial in range(40):
        lens, capacity = _random_tile_lists(g, segments, segment_min, trial, 0.3)
        chunks = -(-capacity // segment_min)
        later, start, want = {}, 0, set()
        for t, n in enumerate(lens):
            parts = _segment_count(segments, segment_min, n)
            seg_len = max(-(-n // segments), segment_min) if parts > 1 else n
            for k in range(1, parts):
                c = (start + k * seg_len) // segment_min  # nurec_splat_later_parts_kernel's chunk
                assert c < chunks, (t, n, k, c, chunks)
                assert c not in later, (t, k, c, later.get(c))
                later[c] = (t, k)
                want.add((t, k))
            start += n
        assert set(later.values()) == want


def _parts_params(pred=lambda parts: True, marks=()):
    """The rows with parts (sanitizers: the families' main rows, with their edge scenes)."""
    return params(lambda c: c.parts is not None and pred(c.parts), marks)


@gpu
@pytest.mark.parametrize("segments,segment_min", [(2, 1), (4, 3), (8, 8), (64, 1)])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", _parts_params(lambda parts: parts.edge is None)
                         + _parts_params(lambda parts: parts.edge is not None, marks=pytest.mark.sanitize))
def test_parity_lists_cut_into_parts(case, dtype, segments, segment_min, seed, monkeypatch):
    """test_parity with the lists cut into parts (composited separately,
    chained per cell; the parts where a cell's cut-off falls composited
    again), on the row's scene and the family's edge scene: each has a list
    longer than segment_min, so that lists are cut."""
    cut_into_parts(monkeypatch, case, segments, segment_min)
    for k in range(5):  # the camera models' small scenes have lists of ~10-14: draw again where all are short
        s = case.inputs("cuda", dtype, seed + k)
        if longest_list(case, s) > segment_min:
            break
    scenes = [s] + ([case.parts.edge("cuda", dtype)] if case.parts.edge else [])
    for s in scenes:
        assert longest_list(case, s) > segment_min, f"{case}: no list longer than {segment_min}: nothing is cut"
        check_parity(case, s, "cuda", dtype, seed)


# The binning's ways that must give the same bits (csrc/tiles/tiles.cu, set by
# the environment at each call): keys of tile | depth rank or tile | the
# depth's own 32 bits (float32 up to a capacity).
# A switch of the CUDA binning (csrc/tiles/tiles.cu): (the environment it
# runs in, the variable switched, its two values). Tile keys are compared
# with the depth keys off, which small binnings would otherwise take.
BINNING_WAYS = {"depth keys": ({"NUREC_OPS_TILES_TILE_KEYS": "0"}, "NUREC_OPS_TILES_DEPTH_KEYS_MAX", ("0", str(1 << 40))),
                "tile keys": ({"NUREC_OPS_TILES_DEPTH_KEYS_MAX": "0"}, "NUREC_OPS_TILES_TILE_KEYS", ("0", "1"))}


@gpu
@pytest.mark.parametrize("way", sorted(BINNING_WAYS))
@pytest.mark.parametrize("case", _parts_params())
def test_binning_ways_same_bits(case, way, seed, monkeypatch):
    """Either way of a BINNING_WAYS switch, the forward operator's outputs
    (the intersection list up to its needed count, the tile ranges, the
    images, the parts' state) are the same bits, on the row's large scene
    with a tenth of its Gaussians 6x larger (long lists, cut into parts)."""
    fixed, env, values = BINNING_WAYS[way]
    for k, v in fixed.items():
        monkeypatch.setenv(k, v)
    s = dict(case.inputs("cuda", F32, seed, large=True))
    s["scales"] = s["scales"].detach().clone()
    s["scales"][: s["scales"].shape[0] // 10] *= 6
    with torch.no_grad():  # the first call of a configuration may size itself and run twice (nurec_ops._binning)
        case.op(**s)
    # the capacity the scene needs (the policy's, from earlier scenes of this
    # shape, may be short: an overflowed call compares nothing), the same both ways
    needed = int(call_forward(case, forward_args(case, s, segments=8, segment_min=32))["status"][0])
    args = forward_args(case, s, segments=8, segment_min=32, capacity=needed + 4096)
    outs = []
    for v in values:
        monkeypatch.setenv(env, v)
        poison_allocator("cuda")
        outs.append(call_forward(case, args))
    a, b = outs
    needed = int(a["status"][0])
    assert int(a["status"][1]) == 0 and needed > 0, "overflowed or empty: nothing compared"
    for k in a:
        x, y = (a[k][:needed], b[k][:needed]) if k == "isect_items" else (a[k], b[k])
        assert torch.equal(bits(x), bits(y)), f"{way}: output {k} differs"


@gpu
@pytest.mark.parametrize("case", _parts_params(lambda parts: parts.long is not None))
def test_parts_match_one_walk(case, seed, monkeypatch):
    """A scene of long lists cut into parts of >= long_min entries vs one
    walk per list (float64: equal up to rounding), and cells do reach the
    cut-off inside later parts (the case the second walk exists for)."""
    s = case.parts.long("cuda", F64)
    results = []
    for segments in (0, 8):
        cut_into_parts(monkeypatch, case, segments, case.parts.long_min)
        poison_allocator("cuda")
        out = list(case.op(**s, binning="exact"))
        cots = cotangents(out, seed)
        results.append((out, grads_of(case, out, s, cots)))
    (o1, g1), (o8, g8) = results
    for name, a, b in zip(case.outputs, o8, o1):
        assert_close(a, b, F64, factor=10, msg=name)
    for k in g1:
        err = (g8[k] - g1[k]).norm() / g1[k].norm().clamp_min(1e-12)
        assert err < 1e-9, (k, err.item())
    fwd = raw_forward(case, s, 8, case.parts.long_min)
    assert fwd["seg_state"].shape[0] == 8 and fwd["seg_last"].shape[0] == 8
    assert ((fwd["seg_last"] & SEG_FIXUP) != 0).any(), "no later part was walked again (no cut-off inside one)"


def call_backward(case, fwd_args, fwd, cots, **given):
    """The row's backward operator on a forward's arguments and outputs (by
    the schemas' names; the first three arguments are the cotangents of the
    first three outputs), with those named in `given` replaced."""
    fwd_func = case.autograd_op.op.default
    func = getattr(torch.ops.nurec_ops, fwd_func._schema.name.split("::")[1].replace("_fwd", "_bwd")).default
    by_name = dict(zip([a.name for a in fwd_func._schema.arguments], fwd_args))
    by_name.update(fwd)
    args = list(cots[:3])
    for a in func._schema.arguments[3:]:
        args.append(given[a.name] if a.name in given else by_name.get(a.name, a.default_value))
    with torch.no_grad():
        return func(*args)


@gpu
@pytest.mark.parametrize("case", _parts_params(lambda parts: parts.long is not None))
def test_backward_takes_the_forwards_later_parts(case, seed):
    """The forward returns its later parts' list (seg_later: one entry per
    chunk of segment_min entries of the capacity) and the backward given it,
    as autograd gives it, walks by it and does not build it again: the
    gradients of the backward that builds its own (a caller of the operator
    that passes none), up to the order of its atomics; a list that names no
    later part drops their gradients (so the given list is the one read).
    A list of the wrong length is refused, naming it."""
    s = case.parts.long("cuda", F64)
    args = forward_args(case, s, segments=8, segment_min=case.parts.long_min)
    fwd = call_forward(case, args)
    capacity = args[[a.name for a in case.autograd_op.op.default._schema.arguments].index("capacity")]
    later = fwd["seg_later"]
    assert later.dtype == torch.int64 and later.numel() == -(-capacity // case.parts.long_min)
    assert (later >= 0).any(), "no later part in the scene: nothing compared"
    g = torch.Generator().manual_seed(seed)
    outs = list(fwd.values())[:3]
    cots = [torch.randn(o.shape, generator=g, dtype=F64).to(o.device) for o in outs]
    poison_allocator("cuda")
    given = call_backward(case, args, fwd, cots)
    poison_allocator("cuda")
    built = call_backward(case, args, fwd, cots, seg_later=None)
    poison_allocator("cuda")
    none = call_backward(case, args, fwd, cots, seg_later=torch.full_like(later, -1))
    for i, (a, b, c) in enumerate(zip(given[:5], built[:5], none[:5])):
        err = (a - b).norm() / b.norm().clamp_min(1e-300)
        assert err < 1e-12, (i, err.item())
    drop = max(((c - b).norm() / b.norm().clamp_min(1e-300)).item() for b, c in zip(built[:5], none[:5]))
    assert drop > 1e-6, f"the later parts' gradients did not depend on the list given ({drop})"
    with pytest.raises(RuntimeError, match="seg_later"):
        call_backward(case, args, fwd, cots, seg_later=later[:-1])


@pytest.mark.parametrize("case", _parts_params(lambda parts: parts.long is not None))
def test_later_parts_empty_on_the_cpu(case, seed):
    """On the CPU no list is cut: seg_later is empty (the fake kernel's
    sizes are opcheck's to compare, on both devices), and the backward
    refuses one that is not."""
    s = case.parts.long("cpu", F64)
    args = forward_args(case, s, segments=8, segment_min=case.parts.long_min)
    fwd = call_forward(case, args)
    assert fwd["seg_later"].shape == (0,) and fwd["seg_later"].dtype == torch.int64
    cots = [torch.zeros_like(o) for o in list(fwd.values())[:3]]
    with pytest.raises(RuntimeError, match="seg_later"):
        call_backward(case, args, fwd, cots, seg_later=torch.zeros(3, dtype=torch.int64))


def _rolling_rows(case):
    return case.name in ("camera-rolling-pinhole", "camera-rolling-ftheta", "lidar-rolling")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", params(_rolling_rows))
def test_backward_checks_the_forwards_taus(case, device, seed):
    """A rolling shutter's backward takes back the forward's `taus` (each
    Gaussian's time in each image's sweep) instead of solving them again: a
    caller of the operator that passes none, or one of the wrong shape,
    dtype or device, gets an error naming them, never a read of the wrong
    memory; the forward's own are accepted."""
    s = case.inputs(device, F64, seed)
    args = forward_args(case, s)
    fwd = call_forward(case, args)
    taus = fwd["taus"]
    assert taus.dim() == 2 and taus.numel() > 0, "the forward kept no taus: nothing checked"
    cots = [torch.zeros_like(o) for o in list(fwd.values())[:3]]
    call_backward(case, args, fwd, cots)  # the forward's own
    bad = {"is needed": None, "shape": taus[:, :-1], "float64": taus.float()}
    if device == "cuda":
        bad["cpu"] = taus.cpu()
    for message, t in bad.items():
        with pytest.raises(RuntimeError, match="taus") as err:
            call_backward(case, args, fwd, cots, taus=t)
        assert message in str(err.value), (message, str(err.value))


@gpu
@pytest.mark.parametrize("case", _parts_params(lambda parts: parts.long is not None))
def test_parts_outputs_same_every_call(case):
    """Every output of the forward operator, the parts' state included, is
    the same bits call after call: a later part drops the cells an earlier
    part has stopped when it sees that (timing), and what it leaves for them
    must reach no output (opcheck compares all of them between two runs)."""
    s = case.parts.long("cuda", F32)
    first = raw_forward(case, s, 8, case.parts.long_min)
    assert ((first["seg_last"] & SEG_FIXUP) != 0).any(), "no later part was walked again (no cut-off inside one)"
    needed = int(first["status"][0])
    for _ in range(3):
        poison_allocator("cuda")
        again = raw_forward(case, s, 8, case.parts.long_min)
        for k in first:
            a, b = first[k], again[k]
            if k == "isect_items":  # the intersection list past the needed count is scratch
                a, b = a[:needed], b[:needed]
            assert torch.equal(bits(a), bits(b)), f"output {k} differs"


@gpu
@pytest.mark.parametrize("segments,segment_min", [(8, None), (64, 1), (3, 5)])
@pytest.mark.parametrize("case", _parts_params(lambda parts: parts.long is not None))
def test_parts_grid_layouts_same(case, segments, segment_min, monkeypatch):
    """The walks' grid with its later parts from a list of chunks
    (csrc/tiles/splat_parts_grid_cuda.cuh) gives the same forward outputs,
    bit for bit, as a block for every (tile, part)
    (NUREC_OPS_SPLAT_PARTS_DENSE=1), and the same gradients up to the
    order of their atomic sums (float64). A later part missing from the
    list, or a block on the wrong tile, changes the parts' state."""
    m = case.parts.long_min if segment_min is None else segment_min
    s = case.parts.long("cuda", F32)
    assert longest_list(case, s) > 2 * m, "no list with a later part: nothing compared"
    out = {}
    for dense in ("0", "1"):
        monkeypatch.setenv("NUREC_OPS_SPLAT_PARTS_DENSE", dense)
        poison_allocator("cuda")
        out[dense] = raw_forward(case, s, segments, m)
    needed = int(out["0"]["status"][0])
    for k in out["0"]:
        a, b = out["0"][k], out["1"][k]
        if k == "isect_items":  # past the needed count: scratch
            a, b = a[:needed], b[:needed]
        assert torch.equal(bits(a), bits(b)), f"output {k} differs between the layouts"
    cut_into_parts(monkeypatch, case, segments, m)
    s64 = case.parts.long("cuda", F64)
    grads = {}
    for dense in ("0", "1"):
        monkeypatch.setenv("NUREC_OPS_SPLAT_PARTS_DENSE", dense)
        x = {k: (v.detach().clone().requires_grad_(True) if k in case.grads else v) for k, v in s64.items()}
        outs = case.op(**x)
        loss = sum((o * torch.linspace(0.5, 1.5, o.numel(), device=o.device, dtype=o.dtype).view_as(o)).sum()
                   for o in outs if o.is_floating_point())
        grads[dense] = torch.autograd.grad(loss, [x[k] for k in case.grads], allow_unused=True)
    for name, a, b in zip(case.grads, grads["0"], grads["1"]):
        if a is None and b is None:
            continue
        assert a is not None and b is not None, name
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12, msg=f"gradient of {name} differs")


# ----------------------------------------------------------------- opcheck

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", params())
def test_opcheck(case, device, dtype, seed, cut_lists):
    """opcheck (schema, fake kernel, autograd registration, AOT dispatch) of
    every nurec_ops operator the row's forward and backward call, with the
    arguments the public API passed. Float32 only for deterministic rows
    (opcheck compares two runs; the rasterizers' gradients sum by atomics).
    Rows whose CUDA backward alone sums by atomics (the pose gradients of
    collect and the track poses) compare float32 gradients with a tolerance
    for that order: opcheck's float32 default (1.3e-6) failed
    collect_parameters' track-pose gradient on the H200 by 3.8e-6 of it."""
    if dtype == F32 and not case.deterministic:
        pytest.skip("float32 gradients sum in no fixed order (atomics): opcheck in float64")
    tol = dict(rtol=2e-5, atol=1e-4) if dtype == F32 and device == "cuda" and case.atomic_grads else {}
    s = case.inputs(device, dtype, seed)
    with RecordOps() as rec:
        out = list(case.op(**s))
        forward_backward(case, case.op, s, cotangents(out, seed))
    first = {}
    for func, args, kwargs in rec.calls:
        first.setdefault(func, (args, kwargs))
    if case.autograd_op is not None:
        assert case.autograd_op.op.default in first, f"{case}: its operator was not called"
        if leaves(case, s) and not case.torch_backward:
            assert len(first) >= 2, f"{case}: no backward operator was called: {list(first)}"
    assert first
    forward = case.autograd_op.op.default if case.autograd_op is not None else None
    for func, (args, kwargs) in first.items():
        if func is not forward:  # a backward (no autograd of its own): its saved inputs, detached
            args = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)
        torch.library.opcheck(func, args, kwargs, **tol)


# ----------------------------------------------------------- torch.compile

@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", params())
def test_compile_fullgraph(case, device, backend, seed):
    """torch.compile(fullgraph=True) of a loss through the public op: no
    graph break, the same outputs and gradients as eager (float64: the
    gradients' atomic sums in no fixed order do not show), and again for new
    inputs of the same shapes."""
    if backend == "inductor" and not case.inductor:
        pytest.skip("inductor on one row per op family (aot_eager on all)")
    torch._dynamo.reset()
    s = case.inputs(device, F64, seed)
    names = list(tensors_of(s))
    other = {k: v for k, v in s.items() if k not in names}
    diff = leaves(case, s)
    weights = [c.to(device) for c in cotangents(case.op(**s), seed)]

    def f(*xs):
        out = case.op(**dict(zip(names, xs)), **other, **case.fixed)
        fl = [o for o in out if o.is_floating_point()]
        zero = torch.zeros((), dtype=F64, device=device)  # the loss of a row with only masks (camera_visible)
        return sum(((o * w).sum() for o, w in zip(fl, weights)), zero), tuple(out)

    compiled = torch.compile(f, fullgraph=True, backend=backend)
    for trial, inputs in enumerate((s, case.new_inputs(s, seed + 1))):
        xs = [inputs[k] for k in names]
        results = []
        for fn in (f, compiled):
            loss, out = fn(*xs)
            g = torch.autograd.grad(loss, [inputs[k] for k in diff]) if diff else ()
            results.append((loss.detach(), [o.detach() for o in out], g))
        (le, oe, ge), (lc, ocm, gc) = results
        torch.testing.assert_close(lc, le, msg=f"loss, inputs {trial}")
        for a, b in zip(ocm, oe):
            torch.testing.assert_close(a, b, equal_nan=True, msg=f"output, inputs {trial}")
        for k, a, b in zip(diff, gc, ge):
            torch.testing.assert_close(a, b, msg=f"grad {k}, inputs {trial}")
        if trial == 0:
            assert_tests_something(case, oe, dict(zip(diff, ge)))


# ------------------------------------------------------ the autograd paths

def as_tuple(out):
    """An operator's outputs as a tuple (gather_rows returns one tensor)."""
    return out if isinstance(out, tuple) else (out,)


def _autograd_params():
    return params(lambda c: c.autograd_op is not None)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", _autograd_params())
def test_wrapper_path_matches_registered_autograd(case, device, seed, cut_lists):
    """The Python wrappers call the op through _library.AutogradOp (an
    autograd.Function), torch.ops.nurec_ops.* through the kernel
    register_autograd installed: the same outputs and gradients on the
    arguments the public op passes."""
    s = case.inputs(device, F64, seed)
    op = case.autograd_op
    args = recorded_forward(case, s)
    idx = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad]
    assert len(idx) == len(leaves(case, s)), f"{case}: {len(idx)} differentiable arguments"
    with torch.no_grad():
        probe = as_tuple(op.op(*args))
    n_out = sum(o.is_floating_point() for o in case.op(**s))
    g = torch.Generator().manual_seed(seed)
    cots = [torch.randn(o.shape, generator=g, dtype=o.dtype).to(o.device) for o in probe[:n_out]]

    def run(call):
        a = [x.detach().requires_grad_(True) if i in idx else x for i, x in enumerate(args)]
        out = as_tuple(call(*a))
        grads = torch.autograd.grad(out[:n_out], [a[i] for i in idx], cots, allow_unused=True)
        return [o.detach() for o in out[:n_out]], grads

    out_a, g_a = run(op)  # AutogradOp: the autograd.Function
    out_b, g_b = run(op.op)  # register_autograd's kernel
    for a, b in zip(out_a, out_b):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12, equal_nan=True)
    for i, a, b in zip(idx, g_a, g_b):
        assert a is not None and b is not None, f"{case}: no gradient for argument {i}"
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12, msg=f"{case}: argument {i}")
    assert any(x.abs().sum() > 0 for x in g_a), f"{case}: every gradient is zero; the case tests nothing"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", _autograd_params())
def test_no_gradient_path_builds_no_graph(case, device, seed, cut_lists):
    """Without a gradient wanted (no_grad, or no input requiring one) the
    wrapper goes below autograd: no graph, the registered op's values."""
    s = case.inputs(device, F64, seed)
    op = case.autograd_op
    args = recorded_forward(case, s)
    n_out = sum(o.is_floating_point() for o in case.op(**s))
    with torch.no_grad():
        expected = as_tuple(op.op(*args))
        out = as_tuple(op(*args))
    for a, b in zip(out[:n_out], expected[:n_out]):
        assert a.grad_fn is None and not a.requires_grad
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12, equal_nan=True)
    detached = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)
    out = as_tuple(op(*detached))  # grad mode on, no input requires a gradient
    assert all(o.grad_fn is None for o in out[:n_out])
    out = case.op(**{k: (v.detach() if isinstance(v, torch.Tensor) else v) for k, v in s.items()})
    assert all(o.grad_fn is None for o in out)


# ------------------------------------------------------------------ poison

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", params())
def test_outputs_fully_written(case, device, seed):
    """With freed memory full of NaN (the CUDA caching allocator, malloc)
    every output and gradient element is written: finite, and the values of
    an unpoisoned run (the large scenes on CUDA)."""
    s = case.inputs(device, F32, seed, large=device == "cuda")
    base = list(case.op(**s))
    cots = cotangents(base, seed)
    base, base_g = forward_backward(case, case.op, s, cots)
    for _ in range(3):
        poison_allocator(device)
        out = list(case.op(**s))
        assert_all_finite(*out, msg=f"{case} outputs")
        assert_same_run(case, out, base, F32, "output")
        poison_allocator(device)
        _, g = forward_backward(case, case.op, s, cots)
        assert_all_finite(*[x for x in g.values() if x is not None], msg=f"{case} gradients")
        assert_same_run(case, list(g.values()), list(base_g.values()), F32, "gradient", grads=True)
    assert_tests_something(case, base, base_g)


# --------------------------------------------------------------- CUDA only

@gpu
@pytest.mark.parametrize("case", params())
def test_no_host_sync(case, seed):
    """Forward and backward (after a warm-up: capacity reports arrived,
    allocator primed) never synchronize with the host."""
    s = case.inputs("cuda", F32, seed, large=True)
    cots = cotangents(case.op(**s), seed)
    for _ in range(3):
        forward_backward(case, case.op, s, cots)
        torch.cuda.synchronize()
    cots = [c.cuda() for c in cots]
    with no_host_sync():
        for _ in range(2):
            out, g = forward_backward(case, case.op, s, cots)
    torch.cuda.synchronize()
    assert_all_finite(*out, *[x for x in g.values() if x is not None], msg=str(case))
    assert_tests_something(case, out, g)


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", params(lambda c: c.graph_capture))
def test_cuda_graph_capture(case, dtype, seed):
    """Forward and backward captured in one CUDA graph (with the row's fixed
    capacity); new values copied into the static inputs, replayed: eager's
    outputs and gradients on those values."""
    static = case.inputs("cuda", dtype, seed, large=True)
    cots = [c.to("cuda", dtype) for c in cotangents(case.op(**static), seed)]

    def step(x):
        return forward_backward(case, case.op, x, cots, **case.fixed)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step(static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        g_out, g_grads = step(static)
    for trial in range(3):
        new = case.new_inputs(static, seed + 1 + trial, large=True)
        copy_into(static, new)
        graph.replay()
        torch.cuda.synchronize()
        e_out, e_grads = step(new)
        assert_all_finite(*g_out, msg=f"replay {trial}")
        assert_same_run(case, g_out, e_out, dtype, f"replay {trial} output")
        assert_same_run(case, [g_grads[k] for k in e_grads], list(e_grads.values()), dtype, f"replay {trial} grad",
                        grads=True)
    assert_tests_something(case, e_out, e_grads)


@gpu
@pytest.mark.parametrize("case", params())
def test_runs_on_current_stream(case, seed):
    """The ops launch on the current stream: on a side stream whose inputs
    are written after a long sleep, a kernel launched on any other stream
    would read the stale (zero) inputs."""
    s = case.inputs("cuda", F32, seed, large=True)
    cots = cotangents(case.op(**s), seed)
    expect, expect_g = forward_backward(case, case.op, s, cots)
    stale = dict(s)
    for k, v in tensors_of(s).items():
        stale[k] = torch.zeros_like(v).requires_grad_(v.requires_grad)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # ~tens of ms on the side stream
        copy_into(stale, s)
        out, g = forward_backward(case, case.op, stale, cots)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    assert_same_run(case, out, expect, F32, "output")
    assert_same_run(case, [g[k] for k in expect_g], list(expect_g.values()), F32, "grad", grads=True)
    assert_tests_something(case, out, g)


@gpu
@pytest.mark.parametrize("case", params(lambda c: c.policy is not None))
def test_overflow_policy(case, seed):
    """The binning capacity (nurec_ops._binning): a fixed capacity too small
    gives NaN outputs and zero gradients, never a wrong image; under the
    automatic policy an overflowing call is reported by the next call
    (warning, or RuntimeError with on_overflow="raise") and the capacity
    grows; binning="exact" re-runs an overflowing call and is always
    right."""
    s = case.inputs("cuda", F32, seed, large=True)
    pol = case.policy
    good = [o.detach() for o in case.op(**s, binning="exact")]
    out = case.op(**s, capacity=100)
    assert all(torch.isnan(o).all() for o in out)
    _, g = forward_backward(case, case.op, s, [torch.ones(o.shape, dtype=F64) for o in out], capacity=100)
    assert g and all((v == 0).all() for v in g.values())
    k = pol._key(torch.device("cuda"), case.policy_key(s))
    # the automatic policy: force a tiny capacity, the call overflows, the next one warns and grows
    pol.poll()
    pol.capacity[k] = 1000
    out = case.op(**s)
    assert torch.isnan(out[0]).all()
    torch.cuda.synchronize()  # the report has arrived (the policy itself never waits)
    with pytest.warns(RuntimeWarning, match="needed .* intersections but its binning capacity was 1000"):
        out = case.op(**s)
    assert pol.capacity[k] > 1000
    for a, b in zip(out, good):
        torch.testing.assert_close(a, b)
    # on_overflow="raise"
    torch.cuda.synchronize()
    pol.poll()  # reads the last report (which would grow the capacity back)
    pol.capacity[k] = 1000
    case.op(**s)
    torch.cuda.synchronize()
    with pytest.raises(RuntimeError, match="binning capacity was 1000"):
        case.op(**s, on_overflow="raise")
    # exact mode: one sync, re-run on overflow, always right
    torch.cuda.synchronize()
    pol.poll()
    pol.capacity[k] = 1000
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = case.op(**s, binning="exact")
    for a, b in zip(out, good):
        torch.testing.assert_close(a, b)
    pol.poll()
