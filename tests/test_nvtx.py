"""NVTX ranges of the ops: off by default and free, on by set_nvtx or the
environment, and visible on the torch.profiler timeline when on."""
import os
import subprocess
import sys
import timeit

import pytest
import torch

import nurec_ops
from nurec_ops import nvtx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def restore_nvtx():
    before = nvtx.nvtx_enabled()
    yield
    nvtx.set_nvtx(before)


@pytest.fixture
def nvtx_calls(monkeypatch):
    """Records torch.cuda.nvtx pushes and pops instead of calling NVTX."""
    calls = []
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda name: calls.append(("push", name)))
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: calls.append(("pop",)))
    monkeypatch.setattr(nvtx, "_nvtx_works", True)
    return calls


def _enabled_in_fresh_process(env_value):
    env = {k: v for k, v in os.environ.items() if k != "NUREC_OPS_NVTX"}
    if env_value is not None:
        env["NUREC_OPS_NVTX"] = env_value
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", "import nurec_ops.nvtx as n; print(n.nvtx_enabled())"],
                         env=env, capture_output=True, text=True, check=True, cwd=ROOT)
    return out.stdout.strip()


def test_off_by_default_and_on_by_environment():
    assert _enabled_in_fresh_process(None) == "False"
    assert _enabled_in_fresh_process("0") == "False"
    assert _enabled_in_fresh_process("1") == "True"


def test_set_nvtx_is_exported_and_toggles():
    assert nurec_ops.set_nvtx is nvtx.set_nvtx
    nurec_ops.set_nvtx(True)
    assert nvtx.nvtx_enabled()
    nurec_ops.set_nvtx(False)
    assert not nvtx.nvtx_enabled()


def test_off_is_a_shared_no_op(monkeypatch):
    nvtx.set_nvtx(False)

    def forbidden(*args, **kwargs):
        raise AssertionError("called into torch while NVTX is off")

    monkeypatch.setattr(torch.cuda.nvtx, "range_push", forbidden)
    monkeypatch.setattr(torch.profiler, "record_function", forbidden)
    a, b = nvtx.nvtx_range("nurec_ops.a"), nvtx.nvtx_range("nurec_ops.b")
    assert a is b  # no allocation per call
    with a:
        pass


def test_off_costs_well_under_a_microsecond_per_range():
    nvtx.set_nvtx(False)

    def one_range():
        with nvtx.nvtx_range("nurec_ops.collect"):
            pass

    n = 20000
    best = min(timeit.repeat(one_range, number=n, repeat=5)) / n
    assert best < 2e-6, f"an NVTX range costs {best * 1e9:.0f} ns while off"


def test_on_pushes_and_pops_nvtx(nvtx_calls):
    nvtx.set_nvtx(True)
    with nvtx.nvtx_range("nurec_ops.collect"):
        assert nvtx_calls == [("push", "nurec_ops.collect")]
    assert nvtx_calls == [("push", "nurec_ops.collect"), ("pop",)]


def test_on_pops_when_the_body_raises(nvtx_calls):
    nvtx.set_nvtx(True)
    with pytest.raises(ValueError):
        with nvtx.nvtx_range("nurec_ops.collect"):
            raise ValueError("inside")
    assert nvtx_calls[-1] == ("pop",)


def _profiled_names(body):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        body()
    return {e.name for e in prof.events()}


def test_on_shows_in_a_profiler_trace(nvtx_calls):
    nvtx.set_nvtx(True)

    def body():
        with nvtx.nvtx_range("nurec_ops.test_range"):
            torch.ones(4).sum()

    assert "nurec_ops.test_range" in _profiled_names(body)
    nvtx.set_nvtx(False)
    assert "nurec_ops.test_range" not in _profiled_names(body)


def test_on_without_an_nvtx_library_still_records_the_range(monkeypatch):
    """A CPU-only torch build raises on torch.cuda.nvtx calls."""
    def missing(*args):
        raise RuntimeError("NVTX functions not installed")

    monkeypatch.setattr(torch.cuda.nvtx, "range_push", missing)
    monkeypatch.setattr(nvtx, "_nvtx_works", None)
    nvtx.set_nvtx(True)

    def body():
        with nvtx.nvtx_range("nurec_ops.no_nvtx"):
            torch.ones(4).sum()

    assert "nurec_ops.no_nvtx" in _profiled_names(body)
    assert nvtx._nvtx_works is False


OP_CALLS = [
    ("nurec_ops.interpolate_track_poses", lambda: nurec_ops.interpolate_track_poses(
        torch.randn(3, 7), torch.arange(3), torch.tensor([[0, 3]]), torch.tensor([1]))),
    ("nurec_ops.collect_gaussian_parameters", lambda: nurec_ops.collect_gaussian_parameters(
        torch.randn(4, 3), torch.randn(4, 4), torch.randn(4, 3), torch.randn(4), torch.full((4,), -1),
        torch.randn(0, 7), torch.zeros(0, dtype=torch.bool))),
    ("nurec_ops.collect", lambda: nurec_ops.collect(
        torch.randn(4, 3), torch.randn(4, 4), torch.randn(4, 3), torch.randn(4), torch.zeros(4, dtype=torch.int64),
        torch.randn(3, 7), torch.arange(3), torch.tensor([[0, 3]]), torch.tensor([1]))),
]


@pytest.mark.parametrize("name,call", OP_CALLS, ids=[n for n, _ in OP_CALLS])
def test_ops_open_a_range_named_after_the_op_only_when_on(nvtx_calls, name, call):
    def ranges():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            call()
        return {e.name for e in prof.events()}

    assert name not in ranges()
    nvtx.set_nvtx(True)
    try:
        assert name in ranges()
    finally:
        nvtx.set_nvtx(False)
    assert name not in ranges()
