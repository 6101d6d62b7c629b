"""Dispatcher / CUDA behaviour of the nurec_ops ops (SPEC conventions):
opcheck of all six registered ops, torch.compile(fullgraph=True), and on
CUDA (GPU-marked): no host sync, CUDA graph capture of forward + backward
replayed with new inputs, use of the current (side) stream, and a large
randomized CUDA-vs-CPU parity run."""
import pytest
import torch

import nurec_ops
from nurec_ops import reference as ref

from conftest import (DEVICES, assert_all_finite, assert_close, gpu, make_gaussians, make_track_poses,
                      make_tracks, poison, query_times_for, upcast)

OPS = torch.ops.nurec_ops
G_NAMES = ["means", "quats", "log_scales", "opacity_logits"]


def _scene(device, dtype=torch.float32, T=6, N=400, mode_inside=True, id_dtype=torch.int64):
    tr = make_tracks(T, 1, 8, dtype=dtype, device=device, range_dtype=id_dtype)
    g = make_gaussians(N, T, dtype, device, id_dtype)
    qt = query_times_for(tr, "mixed", avoid_keys=False)
    return tr, g, qt


def _collect_args(tr, g, qt):
    return ([g[k] for k in G_NAMES] + [g["track_ids"], tr["key_poses"], tr["key_times"], tr["track_ranges"], qt])


# ----------------------------------------------------------------- opcheck

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_opcheck_all_ops(device, dtype):
    T = 5
    tr, g, qt = _scene(device, dtype, T=T, N=64)
    kp = tr["key_poses"].clone().requires_grad_()
    args_ip = (kp, tr["key_times"], tr["track_ranges"], qt, "slerp")
    torch.library.opcheck(OPS.interpolate_track_poses.default, args_ip)
    torch.library.opcheck(OPS.interpolate_track_poses.default,
                          (kp, tr["key_times"], tr["track_ranges"], qt[:1], "nearest"))
    poses, inside = OPS.interpolate_track_poses(*[a.detach() if torch.is_tensor(a) else a for a in args_ip])
    gp = torch.randn_like(poses)
    torch.library.opcheck(OPS.interpolate_track_poses_backward.default,
                          (gp, tr["key_poses"], tr["key_times"], tr["track_ranges"], qt, "slerp"))
    leaves = [g[k].clone().requires_grad_() for k in G_NAMES]
    tp = poses.clone().requires_grad_()
    torch.library.opcheck(OPS.collect_gaussian_parameters.default, (*leaves, g["track_ids"], tp, inside))
    outs = OPS.collect_gaussian_parameters(*[g[k] for k in G_NAMES], g["track_ids"], poses, inside)
    cots = [torch.randn_like(o) for o in outs]
    torch.library.opcheck(OPS.collect_gaussian_parameters_backward.default,
                          (*cots, *[g[k] for k in G_NAMES], g["track_ids"], poses, inside))
    # the fused op behind nurec_ops.collect, and its backward
    args_c = (*leaves, g["track_ids"], kp, tr["key_times"], tr["track_ranges"], qt, "slerp")
    torch.library.opcheck(OPS.collect.default, args_c)
    torch.library.opcheck(OPS.collect.default, (*leaves, g["track_ids"], kp, tr["key_times"], tr["track_ranges"],
                                                qt[:1], "nearest"))
    torch.library.opcheck(OPS.collect_backward.default,
                          (*cots, *[g[k] for k in G_NAMES], g["track_ids"], poses, inside, tr["key_poses"],
                           tr["key_times"], tr["track_ranges"], qt, "slerp"))


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_empty(device):
    """opcheck with N = 0 and T = 0."""
    tr, g, qt = _scene(device, torch.float64, T=0, N=0)
    torch.library.opcheck(OPS.interpolate_track_poses.default,
                          (tr["key_poses"].requires_grad_(), tr["key_times"], tr["track_ranges"], qt, "slerp"))
    poses, inside = make_track_poses(0, torch.float64, device)
    torch.library.opcheck(OPS.collect_gaussian_parameters.default,
                          (*[g[k].requires_grad_() for k in G_NAMES], g["track_ids"], poses.requires_grad_(), inside))


# ----------------------------------------------------------- torch.compile

def _loss_fn(fn):
    def f(means, quats, log_scales, opacity_logits, track_ids, key_poses, key_times, track_ranges, query_times, w):
        mw, qw, sc, op = fn(means, quats, log_scales, opacity_logits, track_ids, key_poses, key_times, track_ranges,
                            query_times)
        out = (mw * w[:, :3]).sum() + (qw * w[:, 3:7]).sum() + (sc * w[:, 7:10]).sum() + (op * w[:, 10]).sum()
        return out, mw, op
    return f


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_fullgraph(device, backend):
    """torch.compile(fullgraph=True) of a function calling nurec_ops.collect:
    same values and gradients as eager, no graph break."""
    torch._dynamo.reset()
    tr, g, qt = _scene(device, torch.float32)
    N = g["means"].shape[0]
    w = torch.randn(N, 11, device=device)
    eager = _loss_fn(nurec_ops.collect)
    comp = torch.compile(_loss_fn(nurec_ops.collect), fullgraph=True, backend=backend)
    res = []
    for f in (eager, comp):
        leaves = [g[k].clone().requires_grad_() for k in G_NAMES]
        kp = tr["key_poses"].clone().requires_grad_()
        loss, mw, op = f(*leaves, g["track_ids"], kp, tr["key_times"], tr["track_ranges"], qt, w)
        loss.backward()
        res.append([loss.detach(), mw.detach(), op.detach()] + [x.grad for x in leaves + [kp]])
    for a, b in zip(*res):
        assert_close(b, a.double(), torch.float32, 2.0)
    # new inputs (same shapes): no recompile needed, still right
    tr2, g2, qt2 = _scene(device, torch.float32)
    if tr2["key_poses"].shape == tr["key_poses"].shape:
        a = eager(*[g2[k] for k in G_NAMES], g2["track_ids"], tr2["key_poses"], tr2["key_times"],
                  tr2["track_ranges"], qt2, w)
        b = comp(*[g2[k] for k in G_NAMES], g2["track_ids"], tr2["key_poses"], tr2["key_times"],
                 tr2["track_ranges"], qt2, w)
        for x, y in zip(a, b):
            assert_close(y, x.double(), torch.float32, 2.0)


# -------------------------------------------------------------- CUDA only

@gpu
def test_no_host_sync_forward_backward():
    tr, g, qt = _scene("cuda", torch.float32, T=16, N=5000)
    leaves = [g[k].clone().requires_grad_() for k in G_NAMES]
    kp = tr["key_poses"].clone().requires_grad_()
    cots = [torch.randn(5000, n, device="cuda") for n in (3, 4, 3)] + [torch.randn(5000, device="cuda")]
    torch.cuda.synchronize()
    prev = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for mode in ("slerp", "nearest"):
            outs = nurec_ops.collect(*leaves, g["track_ids"], kp, tr["key_times"], tr["track_ranges"], qt, mode)
            grads = torch.autograd.grad(outs, leaves + [kp], cots)
            poses, inside = nurec_ops.interpolate_track_poses(kp, tr["key_times"], tr["track_ranges"], qt[:1], mode)
            (gk,) = torch.autograd.grad(poses, kp, torch.ones_like(poses))
            raw = OPS.collect_gaussian_parameters_backward(*cots, *[x.detach() for x in leaves], g["track_ids"],
                                                           poses.detach(), inside)
    finally:
        torch.cuda.set_sync_debug_mode(prev)
    torch.cuda.synchronize()
    assert_all_finite(*outs, *grads, gk, *raw)


@gpu
@pytest.mark.parametrize("mode", ["slerp", "nearest"])
def test_cuda_graph_capture_forward_backward(mode):
    """Capture forward + backward of nurec_ops.collect in a CUDA graph; copy
    new values into the static inputs, replay, compare with eager."""
    T, N = 8, 3000
    tr, g, qt = _scene("cuda", torch.float32, T=T, N=N)
    static = {k: g[k].clone().requires_grad_() for k in G_NAMES}
    s_kp = tr["key_poses"].clone().requires_grad_()
    s_ids, s_kt, s_rng, s_qt = (g["track_ids"].clone(), tr["key_times"].clone(), tr["track_ranges"].clone(),
                                qt.clone())
    s_cots = [torch.randn(N, n, device="cuda") for n in (3, 4, 3)] + [torch.randn(N, device="cuda")]
    inputs = [static[k] for k in G_NAMES] + [s_kp]

    def step():
        outs = nurec_ops.collect(*[static[k] for k in G_NAMES], s_ids, s_kp, s_kt, s_rng, s_qt, mode)
        grads = torch.autograd.grad(outs, inputs, s_cots)
        return outs, grads

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        s_outs, s_grads = step()

    for trial in range(3):
        # new values, same shapes (the key layout is kept: same ranges, new times/poses)
        g2 = make_gaussians(N, T, torch.float32, "cuda")
        kp2 = torch.randn_like(s_kp) * 3
        kt2 = torch.sort(s_kt + torch.randint(-50_000, 50_000, s_kt.shape, device="cuda"))[0]
        qt2 = s_qt + torch.randint(-200_000, 200_000, s_qt.shape, device="cuda")
        cots2 = [torch.randn_like(c) for c in s_cots]
        with torch.no_grad():
            for k in G_NAMES:
                static[k].copy_(g2[k])
            s_ids.copy_(g2["track_ids"])
            s_kp.copy_(kp2)
            s_kt.copy_(kt2)
            s_qt.copy_(qt2)
            for c, c2 in zip(s_cots, cots2):
                c.copy_(c2)
        graph.replay()
        torch.cuda.synchronize()
        leaves = [g2[k].clone().requires_grad_() for k in G_NAMES]
        kpe = kp2.clone().requires_grad_()
        e_outs = nurec_ops.collect(*leaves, g2["track_ids"], kpe, kt2, s_rng, qt2, mode)
        e_grads = torch.autograd.grad(e_outs, leaves + [kpe], cots2)
        for a, b in zip(s_outs, e_outs):
            assert torch.equal(a, b), f"graph replay {trial} differs from eager"
        # gradients: the pose reduction may sum in another order (atomics)
        for a, b in zip(s_grads, e_grads):
            assert_close(a, b.double(), torch.float32, 5.0, f"graph replay {trial} gradient")


@gpu
def test_runs_on_current_side_stream():
    """The ops launch on the current stream: on a side stream whose inputs are
    written after a long sleep, a kernel launched on any other stream would
    read stale inputs."""
    T, N = 16, 200_000
    tr, g, qt = _scene("cuda", torch.float32, T=T, N=N)
    expect_outs = nurec_ops.collect(*_collect_args(tr, g, qt))
    cots = [torch.randn_like(o) for o in expect_outs]
    leaves = [g[k].clone().requires_grad_() for k in G_NAMES]
    kp = tr["key_poses"].clone().requires_grad_()
    expect_grads = torch.autograd.grad(nurec_ops.collect(*leaves, g["track_ids"], kp, tr["key_times"],
                                                         tr["track_ranges"], qt), leaves + [kp], cots)
    # stale inputs: zeros
    z = {k: torch.zeros_like(g[k]).requires_grad_() for k in G_NAMES}
    zkp = torch.zeros_like(kp).requires_grad_()
    zqt = torch.zeros_like(qt)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)  # ~tens of ms on the side stream
        with torch.no_grad():
            for k in G_NAMES:
                z[k].copy_(g[k])
            zkp.copy_(kp)
            zqt.copy_(qt)
        outs = nurec_ops.collect(*[z[k] for k in G_NAMES], g["track_ids"], zkp, tr["key_times"], tr["track_ranges"],
                                 zqt)
        grads = torch.autograd.grad(outs, [z[k] for k in G_NAMES] + [zkp], cots)
        poses, inside = nurec_ops.interpolate_track_poses(zkp, tr["key_times"], tr["track_ranges"], zqt)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    for a, b in zip(outs, expect_outs):
        assert torch.equal(a, b)
    for a, b in zip(grads, expect_grads):
        assert_close(a, b.double(), torch.float32, 5.0)
    p2, i2 = nurec_ops.interpolate_track_poses(kp.detach(), tr["key_times"], tr["track_ranges"], qt)
    assert torch.equal(poses, p2) and torch.equal(inside, i2)


@gpu
@pytest.mark.parametrize("mode", ["slerp", "nearest"])
def test_large_cuda_vs_cpu_f32(mode):
    """100k Gaussians, 64 tracks of 50-200 keys (10 Hz, epoch times), float32:
    CUDA vs CPU kernels and vs the float64 reference, forward and backward."""
    T, N = 64, 100_000
    tr = make_tracks(T, 50, 200, dtype=torch.float32, device="cpu")
    tr["track_ranges"][3, 1] = 1  # a single-key track
    g = make_gaussians(N, T, torch.float32, "cpu", p_static=0.5, p_invalid=0.02)
    qt = query_times_for(tr, "mixed", avoid_keys=False)
    cots = [torch.randn(N, n) for n in (3, 4, 3)] + [torch.randn(N)]
    res = {}
    for dev in ("cpu", "cuda"):
        leaves = [g[k].to(dev).requires_grad_() for k in G_NAMES]
        kp = tr["key_poses"].to(dev).requires_grad_()
        outs = nurec_ops.collect(*leaves, g["track_ids"].to(dev), kp, tr["key_times"].to(dev),
                                 tr["track_ranges"].to(dev), qt.to(dev), mode)
        grads = torch.autograd.grad(outs, leaves + [kp], [c.to(dev) for c in cots])
        res[dev] = [x.detach().cpu() for x in list(outs) + list(grads)]
    l64 = [upcast(g[k]).requires_grad_() for k in G_NAMES]
    kp64 = upcast(tr["key_poses"]).requires_grad_()
    o64 = ref.collect(*l64, g["track_ids"], kp64, tr["key_times"], tr["track_ranges"], qt, mode)
    g64 = torch.autograd.grad(o64, l64 + [kp64], [upcast(c) for c in cots])
    names = ["means_w", "quats_w", "scales", "opacities"] + ["grad " + k for k in G_NAMES] + ["grad key_poses"]
    for i, (a, b, e) in enumerate(zip(res["cuda"], res["cpu"], list(o64) + list(g64))):
        f = 20.0 if names[i] == "grad key_poses" else 1.0
        assert_close(a, e, torch.float32, f, "cuda " + names[i])
        assert_close(b, e, torch.float32, f, "cpu " + names[i])
        assert_close(a, b.double(), torch.float32, f, "cuda vs cpu " + names[i])
    # forced Gaussians: exactly zero on both
    assert torch.equal(res["cuda"][3] == 0, res["cpu"][3] == 0)


@gpu
def test_poisoned_cuda_allocator_outputs_written():
    """With the caching allocator full of NaN, every output element is written."""
    tr, g, qt = _scene("cuda", torch.float32, T=32, N=70_001)
    for _ in range(3):
        junk = [poison(torch.empty(1 << 20, device="cuda")) for _ in range(8)]
        del junk
        outs = nurec_ops.collect(*_collect_args(tr, g, qt))
        assert_all_finite(*outs)
        junk = [poison(torch.empty(1 << 20, device="cuda")) for _ in range(8)]
        del junk
        grads = OPS.collect_gaussian_parameters_backward(*[torch.randn_like(o) for o in outs],
                                                         *[g[k] for k in G_NAMES], g["track_ids"],
                                                         *make_track_poses(32, torch.float32, "cuda"))
        assert_all_finite(*grads)
        gk = OPS.interpolate_track_poses_backward(torch.randn(32, 7, device="cuda"), tr["key_poses"], tr["key_times"],
                                                  tr["track_ranges"], qt, "slerp")
        assert_all_finite(gk)


# ------------------------------------------------- opt-in kernel variants

@gpu
def test_pdl_variant_passes_the_parity_tests():
    """Programmatic dependent launch of the collection kernel is opt-in
    (NUREC_OPS_PDL=1, read once per process): run the CUDA tests of
    test_collect.py in a fresh process with it on."""
    import os
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, NUREC_OPS_PDL="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-m", "gpu", "-p", "no:cacheprovider",
                        os.path.join(here, "test_collect.py")], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
