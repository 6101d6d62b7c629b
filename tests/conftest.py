"""The pytest side of nurec_ops's tests (every op family): devices, dtypes,
seeds and markers. The helpers live beside it, one module each:
tolerances.py (judging a result against the reference), poison.py,
random_scenes.py, near_cuts.py (the rasterizers' thresholds, gradcheck),
bad_inputs.py (the error tables), run_scripts.py (scripts in a subprocess).

- Devices: ``DEVICES`` / the ``device`` fixture run a test on CPU and on CUDA;
  the CUDA params are marked ``gpu`` and skipped without a CUDA device.
  ``GPU`` / ``needs_cuda`` mark a whole test as GPU-only.
- Dtypes: ``DTYPES`` / the ``dtype`` fixture (float32, float64).
- Randomness: every test gets a fresh seed (from the OS) unless
  ``NUREC_TEST_SEED`` is set; a failing test's report shows the seed as
  ``NUREC_TEST_SEED=<n>`` so the failure can be replayed exactly.
- Shards: ``NUREC_TEST_SHARD=k/K`` keeps every K-th selected test from the
  k-th on (0 <= k < K), so that K processes run one suite together
  (benchmarks/device/gpu_tests.sh: the GPU suite within one device call).
- Times: ``NUREC_TEST_TIMES=<file>`` appends each finished test's seconds,
  outcome and id to the file as it finishes (a killed run keeps what it
  ran; benchmarks/device/test_times.py sums such files).
"""
import contextlib
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


@contextlib.contextmanager
def no_host_sync():
    """Inside: any CUDA host synchronization raises (torch's sync debug
    mode "error"); the mode before is restored after."""
    prev = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(prev)


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


def shard_of(spec):
    """(k, K) of a NUREC_TEST_SHARD value "k/K"; a clear error otherwise."""
    try:
        k, n = (int(v) for v in spec.split("/"))
    except ValueError:
        raise pytest.UsageError(f"NUREC_TEST_SHARD must be k/K (e.g. 0/4), got {spec!r}") from None
    if not 0 <= k < n:
        raise pytest.UsageError(f"NUREC_TEST_SHARD {spec!r}: need 0 <= k < K")
    return k, n


@pytest.hookimpl(trylast=True)  # after -m and -k: the shards split what is selected
def pytest_collection_modifyitems(config, items):
    spec = os.environ.get("NUREC_TEST_SHARD")
    if not spec:
        return
    k, n = shard_of(spec)
    # every K-th test, not a contiguous K-th: a file's or a row's costly
    # parametrisations stand together in collection order, dealt this way
    # they spread over the shards
    keep = items[k::n]
    dropped = [it for i, it in enumerate(items) if i % n != k]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


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


# ----------------------------------------------------------------- times
# NUREC_TEST_TIMES=<file>: one line per finished test, appended as it
# finishes ("seconds<TAB>outcome<TAB>node id", setup, call and teardown
# summed), so that a process killed at its time limit still leaves the
# durations of what it ran (pytest's --durations prints only at the end:
# the device's GPU shards, stopped by `timeout`, left none;
# benchmarks/device/test_times.py sums the files).
_TIMES_PENDING = {}  # node id -> [seconds so far, outcome]


def pytest_runtest_logreport(report):
    path = os.environ.get("NUREC_TEST_TIMES")
    if not path:
        return
    pending = _TIMES_PENDING.setdefault(report.nodeid, [0.0, None])
    pending[0] += report.duration
    if report.when == "call":
        pending[1] = report.outcome
    elif report.when == "setup" and report.outcome != "passed":  # skipped, or an error before the test
        pending[1] = "error" if report.outcome == "failed" else report.outcome
    if report.when != "teardown":
        return
    seconds, outcome = _TIMES_PENDING.pop(report.nodeid)
    if report.outcome == "failed":  # a teardown error outranks the call's outcome
        outcome = "error"
    with open(path, "a") as f:  # one write a test: a kill leaves whole lines
        f.write(f"{seconds:.3f}\t{outcome or report.outcome}\t{report.nodeid}\n")

