"""nurec_ops.diagnose: the context manager, its figures, the trace analysis,
and the ``python -m nurec_ops.diagnose`` entry point.

On the CPU there are no host-device syncs, so the sync path is exercised with
another warning that torch raises from C++ the same way (the resize-an-out=
tensor deprecation), which tests capture, per-step counting, the file:line and
the op. The GPU tests check the real thing."""
import inspect
import json
import os
import re
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import nurec_ops
from nurec_ops import nvtx
from nurec_ops.diagnose import figures as diag_figures
from nurec_ops.diagnose import syncs as diag_syncs
from nurec_ops.diagnose.trace import Trace
from run_scripts import repo_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THIS_FILE = os.path.basename(__file__)
CUDA_READY = torch.cuda.is_available() and nurec_ops.has_cuda_kernels()

# A C++ TORCH_WARN raised on the CPU, as the sync warning is on CUDA.
CPU_STAND_IN_WARNING = "An output with one or more elements was resized"
DOCUMENTED_KEYS = set(re.findall(r"^- ``(\w+)``", nurec_ops.diagnose.__doc__, re.M))
GPU_KEYS = {"kernels_per_step", "small_kernels_per_step", "launch_calls_per_step", "launches_by_op",
            "gpu_busy", "gpu_busy_per_step", "idle_gaps", "top_kernels"}


def _scene(device="cpu", n=3000, seed=0):
    """Inputs of nurec_ops.collect: a few tracks over packed Gaussians."""
    g = torch.Generator().manual_seed(seed)
    leaf = lambda *s: torch.randn(*s, generator=g).to(device).requires_grad_()
    return dict(
        means=leaf(n, 3), quats=leaf(n, 4), log_scales=leaf(n, 3), opacity_logits=leaf(n),
        track_ids=torch.randint(-1, 3, (n,), generator=g).to(device),
        key_poses=leaf(6, 7),
        key_times=torch.tensor([0, 100, 0, 100, 0, 100]).to(device),
        track_ranges=torch.tensor([[0, 2], [2, 2], [4, 2]]).to(device),
        query_times=torch.tensor([50]).to(device),
    )


def _fused_step(scene):
    out = nurec_ops.collect(**scene)
    loss = sum(o.square().sum() for o in out)
    loss.backward()
    return out, loss


def _global_state():
    return (torch.autograd._profiler_enabled(), warnings.showwarning, nvtx.nvtx_enabled(),
            torch.cuda.get_sync_debug_mode() if torch.cuda.is_available() else None)


def test_diagnose_is_a_callable_package():
    import nurec_ops.diagnose as module
    assert module is nurec_ops.diagnose  # the package, not a function shadowing it
    assert callable(nurec_ops.diagnose)
    assert isinstance(nurec_ops.diagnose(), nurec_ops.diagnose.Diagnosis)
    assert "diagnose" in nurec_ops.__all__ and "set_nvtx" in nurec_ops.__all__


def test_not_entered_costs_nothing(tmp_path):
    before = _global_state()
    trace = tmp_path / "trace.json"
    d = nurec_ops.diagnose(trace=str(trace))
    _fused_step(_scene())
    assert _global_state() == before  # no profiler, no warnings hook, no NVTX
    assert not trace.exists() and d.figures is None
    with pytest.raises(RuntimeError, match="inside the `with` block"):
        d.step()


def test_cpu_loop_figures(tmp_path, capsys):
    scene = _scene()
    n = scene["means"].shape[0]
    gaussians = [scene[k].detach() for k in ("means", "quats", "log_scales", "opacity_logits", "track_ids")]
    track_poses, track_inside = torch.randn(5, 7), torch.ones(5, dtype=torch.bool)
    trace = tmp_path / "trace.json"
    before = _global_state()
    with nurec_ops.diagnose(warmup=1, steps=3, trace=str(trace)) as d:
        # the profiler runs from the (last) warm-up step on, which is not recorded
        assert nvtx.nvtx_enabled() and torch.autograd._profiler_enabled()
        for _ in range(6):  # 1 warm-up + 3 recorded + 2 ignored
            out, loss = _fused_step(scene)
            loss.item()                      # a sync on CUDA
            out[0][out[3] > 0.5]             # a sync on CUDA (boolean mask)
            nurec_ops.collect_gaussian_parameters(*gaussians, track_poses, track_inside)
            d.step()
    assert _global_state() == before
    f = d.figures
    assert set(f) == DOCUMENTED_KEYS
    assert f["device"] == "cpu" and f["steps"] == 3
    assert len(f["step_ms"]) == 3 and all(t > 0 for t in f["step_ms"])
    assert f["syncs_per_step"] == [0, 0, 0] and f["syncs"] == [] and f["sync_sites"] == []
    assert len(f["ops_per_step"]) == 3 and min(f["ops_per_step"]) > 10
    assert len(set(f["ops_per_step"])) == 1  # the same step does the same ops
    assert f["top_ops"] and all(o["calls"] >= 3 and o["cpu_ms"] >= 0 for o in f["top_ops"])
    assert all(f[k] is None for k in GPU_KEYS) and f["peak_memory_mb"] is None

    ours = {o["op"]: o for o in f["nurec_ops"]}
    assert all(o["calls"] == 3 and o["device"] == "cpu" and o["ms"] > 0 for o in ours.values())
    collect = ours["nurec_ops::collect_gaussian_parameters"]
    read = n * (3 + 4 + 3 + 1) * 4 + n * 8 + 5 * 7 * 4 + 5 * 1  # float32, int64 ids, poses, bool inside
    written = n * (3 + 4 + 3 + 1) * 4
    assert collect["bytes"] == 3 * (read + written)
    assert collect["gbps"] == pytest.approx(collect["bytes"] / (collect["ms"] * 1e6))
    assert collect["copy_gbps"] > 0.1
    assert collect["fraction_of_copy"] == pytest.approx(collect["gbps"] / collect["copy_gbps"])
    fused = [o for name, o in ours.items() if name != "nurec_ops::collect_gaussian_parameters"]
    assert fused and all(o["bytes"] is None or o["gbps"] > 0 for o in fused)  # nurec_ops.collect's own op(s)

    assert f["trace"] == str(trace)
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e.get("name") for e in events}
    assert {f"{diag_figures.STEP_PREFIX}{k}" for k in (1, 2, 3)} <= names
    assert f"{diag_figures.STEP_PREFIX}0" not in names and f"{diag_figures.STEP_PREFIX}4" not in names
    assert "nurec_ops::collect_gaussian_parameters" in names and set(ours) <= names
    report = capsys.readouterr().out
    assert "nurec_ops.diagnose: 3 step(s) on cpu" in report and "host syncs / step       0" in report


def test_profiler_starts_one_step_before_the_first_recorded_step():
    """Starting the profiler drains the GPU's queue: it starts during the last
    warm-up step, so that the first recorded step does not begin on an idle
    GPU; earlier warm-up steps run without it, and it stops at the end."""
    running = []
    with nurec_ops.diagnose(warmup=3, steps=2, trace=None, print_report=False) as d:
        for _ in range(6):
            running.append(torch.autograd._profiler_enabled())
            d.step()
    assert running == [False, False, True, True, True, False]
    assert not torch.autograd._profiler_enabled()
    assert d.figures["steps"] == 2


def test_sync_lines_are_named_and_counted_per_step(monkeypatch, tmp_path):
    monkeypatch.setattr(diag_syncs, "SYNC_WARNING", CPU_STAND_IN_WARNING)
    a = torch.ones(3)
    with nurec_ops.diagnose(warmup=1, steps=2, trace=None, print_report=False) as d:
        for _ in range(4):  # syncs in the warm-up and after the last step are not counted
            b = a * 2
            line = inspect.currentframe().f_lineno + 1
            torch.add(a, b, out=torch.empty(2))
            d.step()
    f = d.figures
    assert f["syncs_per_step"] == [1, 1]
    assert [s["step"] for s in f["syncs"]] == [0, 1]
    (site,) = f["sync_sites"]
    assert site["where"].endswith(f"{THIS_FILE}:{line}") and site["count"] == 2
    assert site["code"] == "torch.add(a, b, out=torch.empty(2))"
    assert site["op"] == "aten::add"
    assert f["trace"] is None


@pytest.mark.parametrize("nvtx_on", [True, False])
def test_trace_shows_the_ops_nvtx_ranges(tmp_path, nvtx_on):
    """The op wrappers open nvtx_range(...); a diagnosis turns them on (unless
    nvtx=False) so its Chrome trace shows them."""
    trace = tmp_path / "trace.json"
    with nurec_ops.diagnose(trace=str(trace), nvtx=nvtx_on, print_report=False):
        with nvtx.nvtx_range("nurec_ops.demo_range"):
            torch.ones(8).sum()
    names = {e.get("name") for e in json.loads(trace.read_text())["traceEvents"]}
    assert ("nurec_ops.demo_range" in names) == nvtx_on


def test_other_warnings_still_reach_the_user():
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")
        with nurec_ops.diagnose(trace=None, print_report=False):
            warnings.warn("not a sync", UserWarning)
    assert [str(w.message) for w in log] == ["not a sync"]


def test_a_block_without_step_calls_is_one_step():
    with nurec_ops.diagnose(trace=None, print_report=False) as d:
        _fused_step(_scene())
    assert d.figures["steps"] == 1 and d.figures["ops_per_step"][0] > 10


def test_no_step_recorded_when_the_warmup_is_not_over(capsys):
    with nurec_ops.diagnose(warmup=2, trace=None) as d:
        _fused_step(_scene())
        d.step()
    assert d.figures["steps"] == 0 and d.figures["step_ms"] == [] and d.figures["nurec_ops"] == []
    assert "no step was recorded" in capsys.readouterr().out


def test_sessions_do_not_nest_and_errors_restore_state():
    before = _global_state()
    with pytest.raises(ZeroDivisionError):
        with nurec_ops.diagnose(trace=None, print_report=False) as d:
            with pytest.raises(RuntimeError, match="already running"):
                with nurec_ops.diagnose():
                    pass
            1 / 0
    assert d.figures is None and _global_state() == before
    with nurec_ops.diagnose(trace=None, print_report=False) as d:  # usable again
        pass
    assert d.figures["steps"] == 1


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="steps"):
        nurec_ops.diagnose(steps=0)
    with pytest.raises(ValueError, match="warmup"):
        nurec_ops.diagnose(warmup=-1)


SCRIPT = textwrap.dedent("""
    import sys, torch
    import nurec_ops
    with open(sys.argv[1], "w") as f:
        f.write(" ".join(sys.argv[1:]))
    w, v = torch.ones(8, requires_grad=True), torch.ones(8, requires_grad=True)
    opt_w, opt_v = torch.optim.SGD([w], lr=0.1), torch.optim.SGD([v], lr=0.1)
    if __name__ == "__main__":
        for step in range(4):
            loss = (w * v).square().sum()
            loss.backward()
            opt_w.step(); opt_v.step()   # two optimizers: still one step per iteration
            opt_w.zero_grad(); opt_v.zero_grad()
        sys.exit(int(sys.argv[3]))
""")


@pytest.mark.parametrize("exit_code", [0, 3])
def test_entry_point_runs_a_script(tmp_path, exit_code):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    argv_out, out_json, trace = tmp_path / "argv.txt", tmp_path / "figures.json", tmp_path / "trace.json"
    env = repo_env()
    # -W error::RuntimeWarning: runpy warns (RuntimeWarning) when a package's
    # __main__ was imported before it runs; that must not happen.
    cmd = [sys.executable, "-W", "error::RuntimeWarning", "-m", "nurec_ops.diagnose", "--warmup", "1",
           "--json", str(out_json), "--trace", str(trace), str(script), str(argv_out), "--flag", str(exit_code)]
    run = subprocess.run(cmd, env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert run.returncode == exit_code, run.stderr
    assert argv_out.read_text() == f"{argv_out} --flag {exit_code}"
    f = json.loads(out_json.read_text())
    assert set(f) == DOCUMENTED_KEYS
    assert f["steps"] == 3 and f["syncs_per_step"] == [0, 0, 0]  # 4 optimizer steps, 1 of warm-up
    assert f["trace"] == str(trace) and "traceEvents" in json.loads(trace.read_text())
    assert "nurec_ops.diagnose: 3 step(s)" in run.stdout
    assert "RuntimeWarning" not in run.stderr


def test_entry_point_help():
    env = repo_env()
    run = subprocess.run([sys.executable, "-m", "nurec_ops.diagnose", "--help"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "script" in run.stdout


def _synthetic_cuda_trace():
    """A Kineto-shaped trace of two steps (indices 1 and 2) on a GPU, with
    times in µs chosen so every figure is known by hand."""
    ev = []

    def x(name, cat, ts, end, tid=1, **args):
        ev.append({"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": end - ts, "pid": 0, "tid": tid, "args": args})

    def kernel(name, ts, end, corr, cat="kernel"):
        x(name, cat, ts, end, tid=7, correlation=corr)

    x(f"{diag_figures.STEP_PREFIX}1", "user_annotation", 0, 1000)
    x(f"{diag_figures.STEP_PREFIX}2", "user_annotation", 1000, 2000)
    # Not in a step: ignored.
    x("cudaLaunchKernel", "cuda_runtime", -60, -55, correlation=99, **{"External id": 0})
    kernel("early_kernel", -40, -30, 99)
    # Step 1: a tiny kernel, our op's kernel, then .item().
    x("aten::mul", "cpu_op", 10, 60, **{"External id": 1})
    x("cudaLaunchKernel", "cuda_runtime", 20, 30, correlation=100, **{"External id": 1})
    kernel("mul_kernel", 100, 105, 100)
    x("nurec_ops::collect_gaussian_parameters", "cpu_op", 100, 200, **{"External id": 2})
    x("cudaLaunchKernel", "cuda_runtime", 110, 120, correlation=101, **{"External id": 2})
    kernel("collect_kernel", 150, 350, 101)
    x("aten::item", "cpu_op", 400, 900, **{"External id": 3})
    x("aten::_local_scalar_dense", "cpu_op", 410, 890, **{"External id": 4})
    x("cudaMemcpyAsync", "cuda_runtime", 420, 430, correlation=102, **{"External id": 4})
    x("cudaStreamSynchronize", "cuda_runtime", 430, 880, correlation=103, **{"External id": 4})
    kernel("Memcpy DtoH", 440, 445, 102, cat="gpu_memcpy")
    x(f"{diag_syncs.MARKER_PREFIX}0", "user_annotation", 905, 905.1)
    # Step 2: two adds, the second one's kernel runs past the step's end.
    x("aten::add", "cpu_op", 1010, 1050, **{"External id": 5})
    x("cudaLaunchKernel", "cuda_runtime", 1020, 1030, correlation=104, **{"External id": 5})
    kernel("add_kernel", 1040, 1060, 104)
    x("aten::add", "cpu_op", 1090, 1120, **{"External id": 6})
    x("cudaLaunchKernel", "cuda_runtime", 1100, 1110, correlation=105, **{"External id": 6})
    kernel("add_kernel", 1500, 2500, 105)
    # A GPU-side projection of an annotation is not GPU work.
    x(f"{diag_figures.STEP_PREFIX}1", "gpu_user_annotation", 0, 2500, tid=7)
    return {"traceEvents": ev}


def test_gpu_figures_from_a_known_trace():
    record = diag_syncs.SyncRecord(0, 1, "train.py:12", "loss.item()", ["train.py:12"],
                                   marker=f"{diag_syncs.MARKER_PREFIX}0")
    f = diag_figures.compute(Trace(_synthetic_cuda_trace()), [1, 2], [record], [10.0, 12.0], "cuda:0 (test)", "cuda:0",
                             copy_gbps=lambda device: 10.0, estimate_bytes=lambda name, args: 1_000_000, top=5)
    assert set(f) == DOCUMENTED_KEYS
    assert f["steps"] == 2 and f["step_ms"] == [1.0, 1.0]
    assert f["syncs_per_step"] == [1, 0]
    assert f["syncs"][0]["op"] == "aten::item > aten::_local_scalar_dense"
    assert f["ops_per_step"] == [4, 2]
    assert f["kernels_per_step"] == [2, 2]
    assert f["small_kernels_per_step"] == [1, 0]
    assert f["launch_calls_per_step"] == [2, 2]
    assert f["launches_by_op"][0] == {"op": "aten::add", "kernels": 2, "small": 0}
    assert {"op": "aten::mul", "kernels": 1, "small": 1} in f["launches_by_op"]
    # GPU busy: 5 + 200 + 5 (copy) + 20 + 1000 µs over [0, 2500] (the last kernel ends at 2500).
    assert f["gpu_busy"] == pytest.approx(1230 / 2500)
    assert f["gpu_busy_per_step"] == pytest.approx([210 / 1000, 1020 / 1500])
    gaps = f["idle_gaps"]
    assert [round(g["ms"], 3) for g in gaps] == [0.595, 0.44, 0.1, 0.09, 0.045]
    assert gaps[0]["step"] == 0 and gaps[0]["at_ms"] == pytest.approx(0.445)
    assert gaps[0]["cpu"] == "cudaStreamSynchronize < aten::_local_scalar_dense < aten::item"
    assert gaps[1]["step"] == 1 and gaps[1]["cpu"] == "Python outside torch ops"
    assert [(k["name"], k["calls"]) for k in f["top_kernels"]] == [("add_kernel", 2), ("collect_kernel", 1),
                                                                   ("mul_kernel", 1)]
    assert f["top_kernels"][0]["total_ms"] == pytest.approx(1.02) and f["top_kernels"][0]["mean_us"] == 510
    (ours,) = f["nurec_ops"]
    assert ours["device"] == "cuda:0" and ours["ms"] == pytest.approx(0.2)
    assert ours["gbps"] == pytest.approx(5.0) and ours["fraction_of_copy"] == pytest.approx(0.5)
    assert f["peak_memory_mb"] == [10.0, 12.0]


# --- on a GPU ---------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.skipif(not CUDA_READY, reason="needs a CUDA device and the CUDA kernels")
def test_gpu_sync_lines_are_named(tmp_path):
    x = torch.randn(4096, device="cuda")
    with nurec_ops.diagnose(warmup=1, steps=3, trace=str(tmp_path / "trace.json"), print_report=False) as d:
        for _ in range(4):
            y = (x * 2).sum()
            item_line = inspect.currentframe().f_lineno + 1
            y.item()
            mask_line = inspect.currentframe().f_lineno + 1
            x[x > 0]
            d.step()
    f = d.figures
    sites = {s["where"].rsplit(":", 1)[1]: s for s in f["sync_sites"]}
    assert all(s["where"].rsplit(":", 1)[0].endswith(THIS_FILE) for s in f["sync_sites"])
    assert set(sites) == {str(item_line), str(mask_line)}
    assert sites[str(item_line)]["code"] == "y.item()" and sites[str(mask_line)]["code"] == "x[x > 0]"
    assert all(s["op"] for s in f["sync_sites"])
    assert all(n >= 2 for n in f["syncs_per_step"]) and len(f["syncs_per_step"]) == 3
    assert min(f["kernels_per_step"]) >= 2 and 0 < f["gpu_busy"] <= 1
    assert f["peak_memory_mb"] and min(f["peak_memory_mb"]) > 0
    assert f["top_kernels"] and f["device"].startswith("cuda")


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA_READY, reason="needs a CUDA device and the CUDA kernels")
def test_gpu_fused_collect_loop_has_no_syncs(tmp_path):
    scene = _scene("cuda", n=200_000)
    mode_before = torch.cuda.get_sync_debug_mode()
    with nurec_ops.diagnose(warmup=2, steps=3, trace=str(tmp_path / "trace.json"), print_report=False) as d:
        for _ in range(5):
            _fused_step(scene)
            d.step()
    f = d.figures
    assert f["syncs_per_step"] == [0, 0, 0], f["sync_sites"]
    assert min(f["kernels_per_step"]) >= 4  # collect forward and backward, the loss's kernels
    assert all(0 <= b <= 1 for b in f["gpu_busy_per_step"])
    ours = f["nurec_ops"]
    assert ours and all(o["device"].startswith("cuda") and o["calls"] == 3 for o in ours)
    assert any(o["gbps"] for o in ours)
    assert all(o["copy_gbps"] > 100 for o in ours)  # any datacenter GPU copies faster than 100 GB/s
    assert torch.cuda.get_sync_debug_mode() == mode_before


@pytest.mark.parametrize("op", ["rasterize_camera", "rasterize_lidar"])
def test_rasterizer_forward_bytes_are_estimated(op, tmp_path):
    """The byte estimate behind the bandwidth column sizes a recorded
    rasterizer forward (its intersection buffer has the recorded capacity),
    instead of giving up on the data-dependent output."""
    from nurec_ops.diagnose.bandwidth import estimate_bytes

    s = _scene()
    with torch.no_grad():
        m, q, sc, o = nurec_ops.collect(s["means"], s["quats"], s["log_scales"], s["opacity_logits"], s["track_ids"],
                                        s["key_poses"], s["key_times"], s["track_ranges"], s["query_times"])
    feats = torch.rand(m.shape[0], 3)
    V = torch.eye(4)[None]
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        if op == "rasterize_camera":
            K = torch.tensor([[[50.0, 0, 20], [0, 50.0, 15], [0, 0, 1]]])
            nurec_ops.rasterize_camera(m, q, sc, o, feats, V, K, 40, 30)
        else:
            el, az = torch.linspace(-0.3, 0.3, 8), torch.linspace(3.0, -3.0, 90)
            nurec_ops.rasterize_lidar(m, q, sc, o, feats[:, :1], V, el, az, torch.zeros(8))
    path = str(tmp_path / "t.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("name") == f"nurec_ops::{op}_fwd"]
    assert events, "the forward op was not recorded"
    args = events[0]["args"]
    base = estimate_bytes(f"nurec_ops::{op}_fwd", args)
    assert base is not None and base > sum(t.numel() * t.element_size() for t in (m, q, sc, o))
    # the same call recorded with a capacity of 1000 (as on CUDA): 1000 int32 intersection slots more
    concrete = list(args["Concrete Inputs"])
    at = [a.name for a in getattr(torch.ops.nurec_ops, f"{op}_fwd").default._schema.arguments].index("capacity")
    concrete[at] = str(int(concrete[at] or 0) + 1000)
    assert estimate_bytes(f"nurec_ops::{op}_fwd", dict(args, **{"Concrete Inputs": concrete})) == base + 4000
