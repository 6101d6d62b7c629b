"""Dispatcher / CUDA behaviour of the actor-track ops beyond what every op
shares (opcheck, torch.compile, no host sync, CUDA graphs, the current
stream, poisoned memory: tests/test_op_registry.py over the rows of
tests/op_cases.py): opcheck with no Gaussians and no tracks, a large
randomized CUDA-vs-CPU parity run (GPU-marked) and the opt-in PDL variant."""
import pytest
import torch

import nurec_ops
from nurec_ops import reference as ref

from conftest import DEVICES, gpu
from random_scenes import make_gaussians, make_track_poses, make_tracks, query_times_for, upcast
from tolerances import assert_close

OPS = torch.ops.nurec_ops
G_NAMES = ["means", "quats", "log_scales", "opacity_logits"]


def _scene(device, dtype=torch.float32, T=6, N=400, mode_inside=True, id_dtype=torch.int64):
    tr = make_tracks(T, 1, 8, dtype=dtype, device=device, range_dtype=id_dtype)
    g = make_gaussians(N, T, dtype, device, id_dtype)
    qt = query_times_for(tr, "mixed", avoid_keys=False)
    return tr, g, qt


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_empty(device):
    """opcheck with N = 0 and T = 0."""
    tr, g, qt = _scene(device, torch.float64, T=0, N=0)
    torch.library.opcheck(OPS.interpolate_track_poses.default,
                          (tr["key_poses"].requires_grad_(), tr["key_times"], tr["track_ranges"], qt, "slerp"))
    poses, inside = make_track_poses(0, torch.float64, device)
    torch.library.opcheck(OPS.collect_gaussian_parameters.default,
                          (*[g[k].requires_grad_() for k in G_NAMES], g["track_ids"], poses.requires_grad_(), inside))


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
