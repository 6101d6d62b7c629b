"""Bad input raises a RuntimeError naming the argument (SPEC conventions),
table-driven: one list of cases, one parametrized test.

Each case is (op, argument, description, mutation). The mutation takes the
dict of valid inputs (and the "other" device) and breaks one argument. The
table runs on CPU (the C++ checks), on the meta device (the Python checks of
the fake kernels, used under torch.compile) and on CUDA (GPU-marked). A
mixed-device case moves one argument to another device: meta for CPU runs
(the dispatcher then routes to the fake kernel, whose check must catch it),
CPU for meta and CUDA runs.
"""
import functools
import os
import subprocess
import sys

import pytest
import torch

import nurec_ops

from conftest import DEVICES, GPU

OPS = torch.ops.nurec_ops

ERR_DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("meta", id="meta"),
    pytest.param("cuda", id="cuda", marks=GPU),
]
OTHER = {"cpu": "meta", "meta": "cpu", "cuda": "cpu"}

P, T, N = 5, 3, 4


def _valid(op, device):
    f64 = dict(dtype=torch.float64, device=device)
    i64 = dict(dtype=torch.int64, device=device)
    track = dict(
        key_poses=torch.ones(P, 7, **f64),
        key_times=torch.arange(P, **i64),
        track_ranges=torch.tensor([[0, 2], [2, 3], [0, 0]], **i64),
        query_times=torch.ones(T, **i64),
        mode="slerp",
    )
    gauss = dict(
        means=torch.ones(N, 3, **f64),
        quats=torch.ones(N, 4, **f64),
        log_scales=torch.zeros(N, 3, **f64),
        opacity_logits=torch.zeros(N, **f64),
        track_ids=torch.tensor([-1, 0, 1, 1], **i64),
    )
    if op == "interpolate_track_poses":
        return track
    if op == "interpolate_track_poses_backward":
        return dict(grad_poses=torch.ones(T, 7, **f64), **track)
    coll = dict(gauss, track_poses=torch.ones(2, 7, **f64), track_inside=torch.ones(2, dtype=torch.bool,
                                                                                        device=device))
    if op == "collect_gaussian_parameters":
        return coll
    if op == "collect_gaussian_parameters_backward":
        return dict(grad_means_w=torch.ones(N, 3, **f64), grad_quats_w=torch.ones(N, 4, **f64),
                    grad_scales=torch.ones(N, 3, **f64), grad_opacities=torch.ones(N, **f64), **coll)
    if op == "collect":
        return dict(gauss, **track)
    if op == "splat_meta":
        return dict(records=torch.ones(2, N, 8, **f64), counts=torch.ones(2, N, **i64), cell=torch.ones(2, **f64),
                    cell_u=1.0, cell_v=1.0)
    if op == "gather_rows":
        return dict(table=torch.ones(N, 3, **f64), index=torch.tensor([0, -1, 2], **i64))
    if op == "adam_rows_":
        return dict(param=torch.ones(N, 3, **f64), exp_avg=torch.zeros(N, 3, **f64), exp_avg_sq=torch.zeros(N, 3, **f64),
                    index=torch.tensor([0, 2, -1], **i64), grad=torch.ones(3, 3, **f64), step=torch.ones((), **f64),
                    lr=0.1, beta1=0.9, beta2=0.999, eps=1e-15, weight_decay=0.0)
    if op == "put_rows_":
        return dict(table=torch.ones(N, 3, **f64), index=torch.tensor([0, 2, -1], **i64), rows=torch.ones(3, 3, **f64))
    covar = dict(quats=torch.ones(2, N, 4, **f64), scales=torch.ones(2, N, 3, **f64))
    if op == "quat_scale_to_covar_preci":
        return dict(covar, compute_covar=True, compute_preci=True, triu=False)
    if op == "quat_scale_to_covar_preci_bwd":
        return dict(covar, grad_covars=torch.ones(2, N, 3, 3, **f64), grad_precis=torch.ones(2, N, 3, 3, **f64),
                    triu=False)
    raise KeyError(op)


def _call(op, kw):
    if op == "interpolate_track_poses":
        return nurec_ops.interpolate_track_poses(**kw)
    if op == "collect_gaussian_parameters":
        return nurec_ops.collect_gaussian_parameters(**kw)
    if op == "collect":
        return nurec_ops.collect(**kw)
    if op == "quat_scale_to_covar_preci":
        return nurec_ops.quat_scale_to_covar_preci(**kw)
    if op == "gather_rows":
        return nurec_ops.gather_rows(**kw)
    if op == "adam_rows_":
        return nurec_ops.adam_rows_(**kw)
    if op == "put_rows_":
        return nurec_ops.put_rows_(**kw)
    return getattr(OPS, op)(**kw)


def shape(*s):
    return lambda kw, name, other: kw[name].new_ones(s)


def dtype(dt):
    return lambda kw, name, other: kw[name].to(dt)


def device():
    # (a meta tensor has no data to copy: make a new tensor of the same shape)
    return lambda kw, name, other: torch.zeros(kw[name].shape, dtype=kw[name].dtype, device=other)


def value(v):
    return lambda kw, name, other: v


IP, IPB, CG, CGB, CL = ("interpolate_track_poses", "interpolate_track_poses_backward",
                        "collect_gaussian_parameters", "collect_gaussian_parameters_backward", "collect")
TRACK_OPS = (IP, IPB)
COLLECT_OPS = (CG, CGB)

CASES = []


def case(ops, arg, what, mut):
    for op in ops:
        CASES.append(pytest.param(op, arg, mut, id=f"{op}-{arg}-{what}"))


# interpolate_track_poses (forward and backward share the checks)
case(TRACK_OPS, "key_poses", "shape[P,6]", shape(P, 6))
case(TRACK_OPS, "key_poses", "1d", shape(P * 7))
case(TRACK_OPS, "key_poses", "3d", shape(P, 7, 1))
case(TRACK_OPS, "key_poses", "int64", dtype(torch.int64))
case(TRACK_OPS, "key_poses", "float16", dtype(torch.float16))
case(TRACK_OPS, "key_poses", "bfloat16", dtype(torch.bfloat16))
case(TRACK_OPS, "key_times", "shape[P-1]", shape(P - 1))
case(TRACK_OPS, "key_times", "shape[P,1]", shape(P, 1))
case(TRACK_OPS, "key_times", "int32", dtype(torch.int32))
case(TRACK_OPS, "key_times", "float64", dtype(torch.float64))
case(TRACK_OPS, "key_times", "device", device())
case(TRACK_OPS, "track_ranges", "shape[T,3]", shape(T, 3))
case(TRACK_OPS, "track_ranges", "shape[2T]", shape(2 * T))
case(TRACK_OPS, "track_ranges", "float32", dtype(torch.float32))
case(TRACK_OPS, "track_ranges", "int16", dtype(torch.int16))
case(TRACK_OPS, "track_ranges", "bool", dtype(torch.bool))
case(TRACK_OPS, "track_ranges", "device", device())
case(TRACK_OPS, "query_times", "shape[T-1]", shape(T - 1))
case(TRACK_OPS, "query_times", "shape[T+1]", shape(T + 1))
case(TRACK_OPS, "query_times", "shape[T,1]", shape(T, 1))
case(TRACK_OPS, "query_times", "0d", shape())
case(TRACK_OPS, "query_times", "int32", dtype(torch.int32))
case(TRACK_OPS, "query_times", "float64", dtype(torch.float64))
case(TRACK_OPS, "query_times", "device", device())
case(TRACK_OPS, "mode", "linear", value("linear"))
case(TRACK_OPS, "mode", "empty", value(""))
case(TRACK_OPS, "mode", "Slerp", value("Slerp"))
case((IPB,), "grad_poses", "shape[T,6]", shape(T, 6))
case((IPB,), "grad_poses", "shape[T+1,7]", shape(T + 1, 7))
case((IPB,), "grad_poses", "float32", dtype(torch.float32))
case((IPB,), "grad_poses", "int64", dtype(torch.int64))
case((IPB,), "grad_poses", "device", device())

# collect_gaussian_parameters (forward and backward share the checks)
case(COLLECT_OPS, "means", "shape[N,2]", shape(N, 2))
case(COLLECT_OPS, "means", "1d", shape(N * 3))
case(COLLECT_OPS, "means", "int64", dtype(torch.int64))
case(COLLECT_OPS, "means", "float16", dtype(torch.float16))
case(COLLECT_OPS, "quats", "shape[N,3]", shape(N, 3))
case(COLLECT_OPS, "quats", "shape[N+1,4]", shape(N + 1, 4))
case(COLLECT_OPS, "quats", "float32", dtype(torch.float32))
case(COLLECT_OPS, "quats", "int32", dtype(torch.int32))
case(COLLECT_OPS, "quats", "device", device())
case(COLLECT_OPS, "log_scales", "shape[N,4]", shape(N, 4))
case(COLLECT_OPS, "log_scales", "shape[N-1,3]", shape(N - 1, 3))
case(COLLECT_OPS, "log_scales", "float32", dtype(torch.float32))
case(COLLECT_OPS, "log_scales", "device", device())
case(COLLECT_OPS, "opacity_logits", "shape[N,1]", shape(N, 1))
case(COLLECT_OPS, "opacity_logits", "shape[N+1]", shape(N + 1))
case(COLLECT_OPS, "opacity_logits", "float32", dtype(torch.float32))
case(COLLECT_OPS, "opacity_logits", "bool", dtype(torch.bool))
case(COLLECT_OPS, "opacity_logits", "device", device())
case(COLLECT_OPS, "track_ids", "shape[N,1]", shape(N, 1))
case(COLLECT_OPS, "track_ids", "shape[N-1]", shape(N - 1))
case(COLLECT_OPS, "track_ids", "float32", dtype(torch.float32))
case(COLLECT_OPS, "track_ids", "int16", dtype(torch.int16))
case(COLLECT_OPS, "track_ids", "uint8", dtype(torch.uint8))
case(COLLECT_OPS, "track_ids", "bool", dtype(torch.bool))
case(COLLECT_OPS, "track_ids", "device", device())
case(COLLECT_OPS, "track_poses", "shape[T,6]", shape(2, 6))
case(COLLECT_OPS, "track_poses", "1d", shape(14))
case(COLLECT_OPS, "track_poses", "float32", dtype(torch.float32))
case(COLLECT_OPS, "track_poses", "int64", dtype(torch.int64))
case(COLLECT_OPS, "track_poses", "device", device())
case(COLLECT_OPS, "track_inside", "shape[T+1]", lambda kw, n, o: torch.ones(3, dtype=torch.bool, device=kw[n].device))
case(COLLECT_OPS, "track_inside", "shape[T,1]", lambda kw, n, o: torch.ones(2, 1, dtype=torch.bool,
                                                                            device=kw[n].device))
case(COLLECT_OPS, "track_inside", "uint8", dtype(torch.uint8))
case(COLLECT_OPS, "track_inside", "int64", dtype(torch.int64))
case(COLLECT_OPS, "track_inside", "float32", dtype(torch.float32))
case(COLLECT_OPS, "track_inside", "device", device())
for g, n in (("grad_means_w", 3), ("grad_quats_w", 4), ("grad_scales", 3)):
    case((CGB,), g, "shape", shape(N, n + 1))
    case((CGB,), g, "rows", shape(N + 1, n))
    case((CGB,), g, "float32", dtype(torch.float32))
    case((CGB,), g, "device", device())
case((CGB,), "grad_opacities", "shape", shape(N, 1))
case((CGB,), "grad_opacities", "float32", dtype(torch.float32))
case((CGB,), "grad_opacities", "int64", dtype(torch.int64))
case((CGB,), "grad_opacities", "device", device())

# collect: the composition reports its inner ops' argument names
case((CL,), "key_poses", "float32 vs float64 means", dtype(torch.float32))
case((CL,), "key_times", "int32", dtype(torch.int32))
case((CL,), "track_ranges", "float32", dtype(torch.float32))
case((CL,), "query_times", "shape[T+1]", shape(T + 1))
case((CL,), "mode", "linear", value("linear"))
case((CL,), "track_ids", "float32", dtype(torch.float32))
case((CL,), "means", "shape", shape(N, 2))
case((CL,), "key_poses", "device", device())

# splat_meta (SPEC 8's meta of both rasterizers)
SM = "splat_meta"
case((SM,), "records", "shape", shape(2, N, 7))
case((SM,), "records", "int64", dtype(torch.int64))
case((SM,), "counts", "shape", shape(2, N + 1))
case((SM,), "counts", "int32", dtype(torch.int32))
case((SM,), "counts", "device", device())
case((SM,), "cell", "shape", shape(3))
case((SM,), "cell", "float32", dtype(torch.float32))
case((SM,), "cell", "device", device())

# quat_scale_to_covar_preci (forward and backward share the input checks)
QS, QSB = "quat_scale_to_covar_preci", "quat_scale_to_covar_preci_bwd"
case((QS, QSB), "quats", "shape[...,3]", shape(2, N, 3))
case((QS, QSB), "quats", "0d", shape())
case((QS, QSB), "quats", "16d", shape(*[1] * 15, 4))
case((QS, QSB), "quats", "int64", dtype(torch.int64))
case((QS, QSB), "quats", "float16", dtype(torch.float16))
case((QS, QSB), "quats", "device", device())
case((QS, QSB), "scales", "shape[...,4]", shape(2, N, 4))
case((QS, QSB), "scales", "batch", shape(2, N + 1, 3))
case((QS, QSB), "scales", "flat", shape(2 * N, 3))
case((QS, QSB), "scales", "float32", dtype(torch.float32))
case((QS, QSB), "scales", "device", device())
for g in ("grad_covars", "grad_precis"):
    case((QSB,), g, "triu shape", shape(2, N, 6))
    case((QSB,), g, "batch", shape(2, N + 1, 3, 3))
    case((QSB,), g, "float32", dtype(torch.float32))
    case((QSB,), g, "device", device())

# gather_rows, adam_rows_ and put_rows_ (offload: a table on the compute
# device here; the pinned host tables' errors are tests/test_offload_rows.py's,
# on CUDA)
GR, AR, PR = "gather_rows", "adam_rows_", "put_rows_"
case((GR, PR), "table", "1d", shape(N * 3))
case((GR, PR), "table", "3d", shape(N, 3, 1))
case((GR, PR), "table", "D=0", shape(N, 0))
case((GR, PR), "table", "int64", dtype(torch.int64))
case((GR, PR), "table", "float16", dtype(torch.float16))
case((GR, PR), "table", "device", device())
case((PR,), "table", "non-contiguous", lambda kw, n, o: kw[n].new_ones(3, N).t())
case((GR, AR, PR), "index", "shape[K,1]", shape(3, 1))
case((GR, AR, PR), "index", "0d", shape())
case((GR, AR, PR), "index", "int32", dtype(torch.int32))
case((GR, AR, PR), "index", "float32", dtype(torch.float32))
case((GR, AR, PR), "index", "device", device())
case((PR,), "rows", "shape[K+1,D]", shape(4, 3))
case((PR,), "rows", "shape[K,D+1]", shape(3, 4))
case((PR,), "rows", "float32", dtype(torch.float32))
case((PR,), "rows", "device", device())
case((AR,), "param", "1d", shape(N * 3))
case((AR,), "param", "D=0", shape(N, 0))
case((AR,), "param", "int64", dtype(torch.int64))
case((AR,), "param", "bfloat16", dtype(torch.bfloat16))
case((AR,), "param", "non-contiguous", lambda kw, n, o: kw[n].new_ones(3, N).t())
case((AR,), "param", "device", device())
for m in ("exp_avg", "exp_avg_sq"):
    case((AR,), m, "rows", shape(N + 1, 3))
    case((AR,), m, "columns", shape(N, 4))
    case((AR,), m, "float32", dtype(torch.float32))
    case((AR,), m, "non-contiguous", lambda kw, n, o: kw[n].new_ones(3, N).t())
    case((AR,), m, "device", device())
case((AR,), "grad", "shape[K+1,D]", shape(4, 3))
case((AR,), "grad", "shape[K,D+1]", shape(3, 4))
case((AR,), "grad", "float32", dtype(torch.float32))
case((AR,), "grad", "device", device())
case((AR,), "step", "shape[2]", shape(2))
case((AR,), "step", "shape[1,1]", shape(1, 1))
case((AR,), "step", "int64", dtype(torch.int64))
case((AR,), "step", "device", device())
case((AR,), "lr", "negative", value(-1.0))
case((AR,), "lr", "nan", value(float("nan")))
case((AR,), "beta1", "1", value(1.0))
case((AR,), "beta1", "negative", value(-0.1))
case((AR,), "beta2", "1", value(1.0))
case((AR,), "beta2", "nan", value(float("nan")))
case((AR,), "eps", "0", value(0.0))
case((AR,), "weight_decay", "negative", value(-0.1))


# A C++ check that throws must surface as a Python RuntimeError. If the
# library's error path crashes the interpreter instead (seen with a build made
# on the H200 image: every raised check segfaulted, CPU and CUDA alike), the
# in-process table would kill the whole pytest run; so it is probed once in a
# subprocess, the probe is a test of its own, and the table is skipped
# (pointing at the probe's failure) where the probe crashed.
_PROBE = r"""
import sys, torch, nurec_ops
d = sys.argv[1]
try:
    nurec_ops.interpolate_track_poses(torch.ones(5, 6, device=d, dtype=torch.float64), torch.arange(5, device=d),
                                      torch.zeros(1, 2, dtype=torch.int64, device=d),
                                      torch.zeros(1, dtype=torch.int64, device=d))
    print("NO-ERROR")
except RuntimeError as e:
    print("RAISED", "`key_poses`" in str(e))
"""


@functools.lru_cache(maxsize=None)
def _probe(dev):
    root = os.path.dirname(os.path.dirname(os.path.abspath(nurec_ops.__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", _PROBE, dev], capture_output=True, text=True, env=env, timeout=300)
    return r.returncode, r.stdout.strip(), r.stderr.strip()[-2000:]


def _skip_if_error_path_crashes(dev):
    if dev in ("cpu", "cuda") and _probe(dev)[0] != 0:
        pytest.skip(f"raising a C++ check crashes the process on {dev}: see test_error_path_does_not_crash")


@pytest.mark.parametrize("dev", DEVICES)
def test_error_path_does_not_crash(dev):
    """A bad argument raises RuntimeError (naming it) instead of crashing."""
    rc, out, err = _probe(dev)
    assert rc == 0, f"the process died (exit code {rc}) when a C++ argument check raised; stderr tail:\n{err}"
    assert out == "RAISED True", out


@pytest.mark.parametrize("dev", ERR_DEVICES)
@pytest.mark.parametrize("op,arg,mut", CASES)
def test_bad_input_names_argument(op, arg, mut, dev):
    _skip_if_error_path_crashes(dev)
    kw = _valid(op, dev)
    _call(op, kw)  # the valid inputs are accepted
    other = OTHER[dev]
    kw[arg] = mut(kw, arg, other)
    with pytest.raises(RuntimeError) as ei:
        _call(op, kw)
    msg = str(ei.value)
    assert f"`{arg}`" in msg, f"error for a bad `{arg}` does not name it: {msg!r}"
    assert msg.lstrip().startswith("nurec_ops.") or "nurec_ops." in msg, msg


NON_DEVICE = [c for c in CASES if not c.id.endswith("-device")]


@pytest.mark.parametrize("op,arg,mut", NON_DEVICE)
def test_fake_and_real_checks_agree(op, arg, mut):
    """The fake kernels' Python checks (meta) say what the C++ checks (CPU) say
    (up to what was got: dtype spellings differ)."""
    _skip_if_error_path_crashes("cpu")
    msgs = []
    for dev in ("cpu", "meta"):
        kw = _valid(op, dev)
        kw[arg] = mut(kw, arg, OTHER[dev])
        with pytest.raises(RuntimeError) as ei:
            _call(op, kw)
        m = str(ei.value)
        assert "nurec_ops." in m, m
        # the C++ check may prefix the source location: compare from the op's name on
        msgs.append(m[m.index("nurec_ops."):].strip().splitlines()[0].split(", got")[0].replace("torch.", ""))
    assert msgs[0] == msgs[1]


@pytest.mark.parametrize("dev", ERR_DEVICES)
def test_valid_meta_shapes(dev):
    """The fake kernels give the real kernels' output shapes and dtypes."""
    kw = _valid(IP, dev)
    p, i = _call(IP, kw)
    assert p.shape == (T, 7) and p.dtype == torch.float64 and i.shape == (T,) and i.dtype == torch.bool
    kw = _valid(CG, dev)
    outs = _call(CG, kw)
    assert [tuple(o.shape) for o in outs] == [(N, 3), (N, 4), (N, 3), (N,)]
    grads = _call(CGB, _valid(CGB, dev))
    assert [tuple(o.shape) for o in grads] == [(N, 3), (N, 4), (N, 3), (N,), (2, 7)]
    g = _call(IPB, _valid(IPB, dev))
    assert g.shape == (P, 7)
    rows = _call(GR, _valid(GR, dev))
    assert rows.shape == (3, 3) and rows.dtype == torch.float64 and rows.device.type == dev
    status = _call(AR, _valid(AR, dev))
    assert status.shape == (1,) and status.dtype == torch.int64 and status.device.type == dev


def test_reference_rejects_bad_mode():
    kw = _valid(IP, "cpu")
    kw["mode"] = "cubic"
    with pytest.raises(RuntimeError, match="`mode`"):
        nurec_ops.reference.interpolate_track_poses(**kw)
