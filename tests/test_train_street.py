"""examples/train_street.py: the drop-in swap end to end.

- The same loop with the reference ops and with the fused ops swapped in,
  from the same seed, gives the same losses step by step: float32 on the CPU,
  relative tolerance 1e-4 per step over 6 steps (observed: ~5e-7; the ops
  agree to float32 rounding and Adam does not amplify that in 6 steps).
- It writes its PNGs (camera and lidar: ground truth / start / trained; the
  loss curve) and puts the reference ops back when it is done.
- ``torchrun --nproc_per_node=2 ... --ddp`` on the CPU (gloo) finishes and
  both ranks end with identical parameters.
"""
import json
import math
import os
import struct
import subprocess
import sys

import pytest
import torch

import nurec_ops
from nurec_ops import reference

from conftest import gpu
from run_scripts import repo_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
sys.path.insert(0, EXAMPLES)

import train_street  # noqa: E402

RTOL = 1e-4
TINY = ["--size", "tiny", "--steps", "6", "--quiet"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    ref_out = str(tmp_path_factory.mktemp("reference"))
    fused_out = str(tmp_path_factory.mktemp("fused"))
    ref = train_street.main(TINY + ["--device", "cpu", "--no-eval", "--out", ref_out])
    fused = train_street.main(TINY + ["--device", "cpu", "--fused", "--out", fused_out])
    return ref, fused, ref_out, fused_out


def test_fused_matches_reference_step_by_step(runs):
    ref, fused, _, _ = runs
    assert ref["fused"] is None and fused["fused"] == "all"
    a = torch.tensor(ref["losses"], dtype=torch.float64)
    b = torch.tensor(fused["losses"], dtype=torch.float64)
    assert a.shape == b.shape == (6, 3)
    assert torch.isfinite(a).all() and torch.isfinite(b).all()
    assert (a[:, 1] > 0).all()  # camera L1 is being optimized
    if ref["lidar"]:
        assert (a[:, 2] > 0).all()
    torch.testing.assert_close(b, a, rtol=RTOL, atol=0.0)
    assert ref["syncs_per_step"] == 0 and fused["syncs_per_step"] == 0  # CPU


def test_swap_is_restored_after_the_run(runs):
    assert train_street.collect is reference.collect
    assert train_street.rasterize_camera is reference.rasterize_camera
    if train_street.HAVE_LIDAR:
        assert train_street.rasterize_lidar is reference.rasterize_lidar


def _png_size(path):
    with open(path, "rb") as f:
        head = f.read(33)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    assert head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def test_writes_pngs_and_metrics(runs):
    _, fused, _, out = runs
    files = sorted(os.listdir(out))
    cams = [f for f in files if f.startswith("camera_") and f.endswith(".png")]
    assert len(cams) == 3, files
    w, h = _png_size(os.path.join(out, cams[0]))
    assert w > 0 and h > 0
    if fused["lidar"]:
        assert len([f for f in files if f.startswith("lidar_") and f.endswith(".png")]) == 3, files
        assert fused["lidar_range_error_final"] == fused["lidar_range_error_final"]  # not NaN
    assert _png_size(os.path.join(out, "loss.png")) == (640, 400)
    for f in ("losses.csv", "metrics.json", "params.pt"):
        assert f in files
    assert fused["psnr_final"] > fused["psnr_start"]


def test_ddp_two_processes_gloo(tmp_path):
    out = str(tmp_path)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           os.path.join(EXAMPLES, "train_street.py"), "--ddp", "--device", "cpu", "--fused", "--no-eval",
           "--size", "tiny", "--steps", "4", "--quiet", "--out", out]
    env = repo_env(OMP_NUM_THREADS="1")
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "2 ranks" in r.stdout
    p0 = torch.load(os.path.join(out, "params_rank0.pt"))
    p1 = torch.load(os.path.join(out, "params_rank1.pt"))
    assert p0.keys() == p1.keys()
    start = train_street.street_scene.perturb(train_street.street_scene.make_street("tiny", seed=0), seed=1)
    kp = start.pop("key_poses")
    start.update(key_translations=kp[:, :3], key_rotations=kp[:, 3:])
    assert set(p0) == set(start)
    for k in p0:
        assert torch.equal(p0[k], p1[k]), k
        assert not torch.equal(p0[k], start[k].detach()), f"{k} did not train"
    # one process playing both ranks in turn (the same frames, the gradients' mean): the same loss curve
    # and parameters, bit for bit (two ranks' all-reduce adds a + b, which is b + a; measured identical)
    one = train_street.main(["--emulate-ranks", "2", "--device", "cpu", "--fused", "--no-eval", "--size", "tiny",
                             "--steps", "4", "--quiet", "--out", str(tmp_path / "one")])
    ddp = json.load(open(os.path.join(out, "metrics.json")))
    assert ddp["world"] == 2 and one["world"] == 1
    a, b = torch.tensor(ddp["losses"], dtype=torch.float64), torch.tensor(one["losses"], dtype=torch.float64)
    assert a.shape == b.shape == (4, 3) and torch.isfinite(a).all()
    assert torch.equal(a, b), (a, b)
    assert not torch.allclose(a[0], a[-1]), "the loss did not move"
    p = torch.load(os.path.join(str(tmp_path / "one"), "params.pt"))
    for k in p0:
        assert torch.equal(p[k], p0[k]), (k, (p[k] - p0[k]).abs().max())


def test_emulated_ranks_differ_from_one_rank(tmp_path):
    """--emulate-ranks 2 is not a no-op: its step sees two frames, so its
    losses differ from one rank's over the same steps (the check above
    could not tell otherwise)."""
    args = ["--device", "cpu", "--fused", "--no-eval", "--size", "tiny", "--steps", "3", "--quiet"]
    one = train_street.main(args + ["--out", str(tmp_path / "a")])
    two = train_street.main(args + ["--emulate-ranks", "2", "--out", str(tmp_path / "b")])
    assert not torch.allclose(torch.tensor(one["losses"]), torch.tensor(two["losses"]))


@pytest.mark.parametrize("strategy", ["default", "mcmc"])
def test_ddp_densifying_ranks_stay_identical(tmp_path, strategy):
    """torchrun --nproc_per_node=2 --ddp --strategy (gloo, CPU): the ranks
    render different frames, gather their densification inputs and make the
    same decisions: after steps that split / clone / prune (or relocate and
    add) the parameters are bit-identical across ranks."""
    pytest.importorskip("gsplat.strategy")
    out = str(tmp_path)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           os.path.join(EXAMPLES, "train_street.py"), "--ddp", "--device", "cpu", "--fused", "--no-eval",
           "--size", "tiny", "--steps", "12", "--quiet", "--strategy", strategy, "--cap-max", "500", "--out", out]
    env = repo_env(OMP_NUM_THREADS="1")
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    p0 = torch.load(os.path.join(out, "params_rank0.pt"))
    p1 = torch.load(os.path.join(out, "params_rank1.pt"))
    assert p0["means"].shape[0] != 348, "the strategy did not change the Gaussians"
    for k in p0:
        assert torch.equal(p0[k], p1[k]), k


@gpu
def test_cuda_graph_matches_eager_fused(tmp_path):
    """The captured step replays the same training: losses as the eager fused
    loop within 1e-3 (capturable Adam computes its bias correction on the
    device), no host sync in either, finite throughout."""
    args = ["--size", "tiny", "--steps", "12", "--quiet", "--no-eval", "--device", "cuda", "--fused"]
    eager = train_street.main(args + ["--out", str(tmp_path / "eager")])
    graph = train_street.main(args + ["--graph", "--out", str(tmp_path / "graph")])
    a = torch.tensor(eager["losses"], dtype=torch.float64)
    b = torch.tensor(graph["losses"], dtype=torch.float64)
    assert torch.isfinite(b).all()
    torch.testing.assert_close(b, a, rtol=1e-3, atol=1e-6)
    assert eager["syncs_per_step"] == 0
    assert graph["syncs_per_step"] == 0


@gpu
def test_cuda_reference_matches_fused(tmp_path):
    args = ["--size", "tiny", "--steps", "6", "--quiet", "--no-eval", "--device", "cuda"]
    ref = train_street.main(args + ["--out", str(tmp_path / "ref")])
    fused = train_street.main(args + ["--fused", "--out", str(tmp_path / "fused")])
    a = torch.tensor(ref["losses"], dtype=torch.float64)
    b = torch.tensor(fused["losses"], dtype=torch.float64)
    torch.testing.assert_close(b, a, rtol=1e-3, atol=1e-6)
    assert fused["syncs_per_step"] == 0


def test_nurec_ops_importable_by_the_example():
    assert train_street.nurec_ops is nurec_ops


def test_profile_writes_a_trace_with_the_op_ranges(tmp_path):
    m = train_street.main(["--size", "tiny", "--steps", "4", "--quiet", "--no-eval", "--device", "cpu", "--fused",
                           "--profile", "--out", str(tmp_path)])
    with open(tmp_path / "trace.json") as f:
        trace = f.read()
    assert '"train_street.step"' in trace and '"train_street.camera"' in trace
    assert "nurec_ops::collect" in trace and "nurec_ops::rasterize_camera_fwd" in trace
    assert not nurec_ops.nvtx.nvtx_enabled()  # turned off again
    assert m["step_ms"] > 0


def _diagnose_fused_training_steps(device, tmp_path, steps=3, warmup=2):
    """The example's own train_step (fused ops swapped in) under
    nurec_ops.diagnose: on the fused loop of the training example it reports
    zero syncs. Not through `python -m nurec_ops.diagnose
    train_street.py`: the example counts syncs itself in a
    warnings.catch_warnings(record=True) block, which would hide them from the
    diagnosis and make a zero vacuous."""
    dev = torch.device(device)
    args = train_street.parse_args(["--size", "tiny", "--device", device, "--fused", "--no-eval", "--quiet",
                                    "--out", str(tmp_path)])
    D, P = train_street.build(args, "tiny", dev, torch.float32)
    n = warmup + steps
    S = train_street.NS(schedules=[torch.arange(n + 1, device=dev) % D.times.shape[0]],
                        step=torch.zeros(1, dtype=torch.int64, device=dev), losses=torch.zeros(n + 1, 3, device=dev))
    opt = torch.optim.Adam([P[k] for k in train_street.PARAMS], lr=0.01)
    cfg = train_street.NS(cam_kw={}, lidar_kw={}, world=1)
    with nurec_ops.swap(train_street):
        with nurec_ops.diagnose(warmup=warmup, steps=steps, trace=str(tmp_path / "trace.json"),
                                print_report=False) as d:
            for _ in range(n):
                train_street.train_step(P, D, opt, S, cfg)
                d.step()
    assert torch.isfinite(S.losses[:n]).all() and (S.losses[:n, 1] > 0).all()
    return d.figures


def test_diagnose_the_fused_training_step_cpu(tmp_path):
    f = _diagnose_fused_training_steps("cpu", tmp_path)
    assert f["steps"] == 3 and f["syncs_per_step"] == [0, 0, 0]
    ours = {o["op"] for o in f["nurec_ops"]}
    assert {"nurec_ops::collect", "nurec_ops::rasterize_camera_fwd"} <= ours, ours


@gpu
def test_diagnose_the_fused_training_step_has_no_syncs_cuda(tmp_path):
    f = _diagnose_fused_training_steps("cuda", tmp_path)
    assert f["steps"] == 3
    assert f["syncs_per_step"] == [0, 0, 0], f["sync_sites"]
    assert min(f["kernels_per_step"]) > 0 and 0 < f["gpu_busy"] <= 1
    ours = {o["op"]: o for o in f["nurec_ops"]}
    assert {"nurec_ops::collect", "nurec_ops::rasterize_camera_fwd"} <= set(ours), list(ours)
    assert all(ours[k]["device"].startswith("cuda") for k in ("nurec_ops::collect", "nurec_ops::rasterize_camera_fwd"))


def test_diagnose_flag_reports_and_writes_a_trace_picture(tmp_path, monkeypatch):
    """--diagnose runs the last steps under nurec_ops.diagnose: its figures in
    the metrics, its trace on disk; examples/trace_picture.py draws that
    trace (the README's before/after picture) as a PNG."""
    m = train_street.main(["--size", "tiny", "--steps", "6", "--quiet", "--no-eval", "--device", "cpu", "--fused",
                           "--diagnose", "--out", str(tmp_path)])
    d = m["diagnosis"]
    assert d["steps"] == 5 and d["syncs_per_step"] == [0] * 5 and len(d["step_ms"]) == 5
    assert all(t > 0 for t in d["step_ms"]) and d["gpu_busy"] is None  # CPU: no GPU figures
    trace = tmp_path / "diagnose_trace.json"
    assert trace.exists() and d["trace"] == str(trace)
    import trace_picture

    out = tmp_path / "trace.png"
    monkeypatch.setattr(sys, "argv", ["trace_picture.py", str(out), f"a={trace}", f"b={trace}", "--steps", "2"])
    trace_picture.main()
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", data[16:24])
    assert w == trace_picture.WIDTH and h > 100


def test_motion_error_ignores_a_tracks_constant_offset_and_sees_jitter():
    street = train_street.street_scene
    s = street.make_street("tiny", seed=0)
    kp, ranges = s["key_poses"].double(), s["track_ranges"]
    assert street.relative_pose_error(kp, kp, ranges)[0] == 0.0
    shifted = kp.clone()
    shifted[:, :3] += torch.tensor([0.5, -0.2, 0.1], dtype=torch.float64)  # the same for every key
    assert street.pose_error(shifted, kp)[0] == pytest.approx(math.sqrt(0.25 + 0.04 + 0.01))
    assert street.relative_pose_error(shifted, kp, ranges)[0] < 1e-9
    jittered = kp.clone()
    jittered[::2, :3] += 0.1  # every other key moved: the motion between keys changes
    dt, _ = street.relative_pose_error(jittered, kp, ranges)
    assert dt > 0.05


def test_sync_counting_is_left_to_a_running_diagnosis():
    """Under `python -m nurec_ops.diagnose examples/train_street.py` the
    example must not swallow the sync warnings the diagnosis records (and
    names by line): its own count steps aside. A CPU stand-in for a sync: a
    warning with the sync text (the recorder reads it, CUDA or not)."""
    import warnings
    from nurec_ops.diagnose import syncs

    box = [0]
    with nurec_ops.diagnose(trace=None, print_report=False) as d:
        assert nurec_ops.diagnose.running()
        with train_street.count_syncs(torch.device("cuda"), box):
            warnings.warn(syncs.SYNC_WARNING + " (stand-in)")
    assert not nurec_ops.diagnose.running()
    assert box[0] is None
    assert d.figures["syncs_per_step"] == [1]
    assert "test_train_street.py:" in d.figures["syncs"][0]["where"]


@pytest.mark.parametrize("strategy", ["default", "mcmc"])
def test_densifying_training(strategy, tmp_path):
    """--strategy: gsplat's own strategy densifies the street as it trains
    (default: split / clone; mcmc: grows to its cap), with SH colours ramped
    to degree 2 on the way; the losses stay finite and the images improve.
    (That actors' Gaussians keep their track ids through every move is
    tested on boxes whose id is known from the position:
    test_gsplat_frontend.py.)"""
    pytest.importorskip("gsplat.strategy")
    m = train_street.main(["--size", "tiny", "--steps", "60", "--quiet", "--device", "cpu", "--fused", "--strategy",
                           strategy, "--sh-degree", "2", "--cap-max", "400", "--out", str(tmp_path)])
    assert m["strategy"] == strategy and m["sh_degree"] == 2
    losses = torch.tensor(m["losses"])
    assert torch.isfinite(losses).all()
    if strategy == "default":
        assert m["gaussians_final"] > m["gaussians"], m["gaussians_final"]
    else:
        assert m["gaussians"] < m["gaussians_final"] <= 400
    assert m["psnr_final"] > m["psnr_start"] + 1.0


def test_strategy_refuses_what_it_cannot_follow(tmp_path):
    with pytest.raises(SystemExit, match="--fused"):
        train_street.main(["--size", "tiny", "--steps", "2", "--device", "cpu", "--strategy", "default",
                           "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="graph"):
        train_street.main(["--size", "tiny", "--steps", "2", "--device", "cpu", "--fused", "--graph", "--strategy",
                           "mcmc", "--out", str(tmp_path)])


def test_real_camera_and_rolling_shutter_fused_matches_reference(tmp_path):
    """--camera-model ftheta --rolling-shutter (a real FTheta calibration,
    rolling camera and lidar): the fused loop's losses are the reference
    loop's step by step, as for the pinhole."""
    import shared_data
    shared_data.require(shared_data.FTHETA)
    args = ["--size", "tiny", "--steps", "4", "--quiet", "--no-eval", "--device", "cpu", "--camera-model", "ftheta",
            "--rolling-shutter", "--camera-calibration", shared_data.require(shared_data.FTHETA)]
    ref = train_street.main(args + ["--out", str(tmp_path / "ref")])
    fused = train_street.main(args + ["--fused", "--out", str(tmp_path / "fused")])
    a = torch.tensor(ref["losses"], dtype=torch.float64)
    b = torch.tensor(fused["losses"], dtype=torch.float64)
    assert torch.isfinite(a).all() and (a[:, 1] > 0).all()
    torch.testing.assert_close(b, a, rtol=RTOL, atol=0.0)
