"""The two ways into each differentiable op agree: the Python wrappers call
it through nurec_ops._library.AutogradOp (a plain autograd.Function, or the
C++ entry below autograd when nothing needs a gradient), while
torch.ops.nurec_ops.* goes through the kernel torch.library.register_autograd
installed. Same inputs and cotangents: the same outputs and gradients, and
no autograd graph on the no-gradient path. One table row per op."""
import pytest
import torch

from nurec_ops.collect import _COLLECT, _COLLECT_PARAMETERS
from nurec_ops.rasterize_camera import _FORWARD as _CAMERA
from nurec_ops.rasterize_lidar import _FORWARD as _LIDAR
from nurec_ops._lidar_table import sensor_op_args
from nurec_ops.rasterize_lidar import default_eps2d
from nurec_ops.track_poses import _INTERPOLATE
from conftest import DEVICES, make_gaussians, make_track_poses, make_tracks, query_times_for
from test_rasterize_camera import random_scene as camera_scene
from test_rasterize_lidar import random_scene as lidar_scene


def _interpolate(device):
    t = make_tracks(num_tracks=6, min_keys=1, max_keys=8, device=device)
    kp = t["key_poses"].requires_grad_(True)
    args = (kp, t["key_times"], t["track_ranges"], query_times_for(t, where="mixed"), "slerp")
    return args, (0,), 1


def _collect_parameters(device):
    g = make_gaussians(64, 5, device=device)
    poses, inside = make_track_poses(5, device=device)
    leaves = [g[k].requires_grad_(True) for k in ("means", "quats", "log_scales", "opacity_logits")]
    args = (*leaves, g["track_ids"], poses.requires_grad_(True), inside)
    return args, (0, 1, 2, 3, 5), 4


def _collect(device):
    t = make_tracks(num_tracks=5, min_keys=1, max_keys=8, device=device)
    g = make_gaussians(64, 5, device=device)
    leaves = [g[k].requires_grad_(True) for k in ("means", "quats", "log_scales", "opacity_logits")]
    args = (*leaves, g["track_ids"], t["key_poses"].requires_grad_(True), t["key_times"], t["track_ranges"],
            query_times_for(t, where="mixed"), "slerp")
    return args, (0, 1, 2, 3, 5), 4


def _leaves(scene, device, keys):
    return [scene[k].to(device).requires_grad_(True) for k in keys]


def _camera(device):
    s = camera_scene(N=60, C=2, W=24, H=16, D=3)
    g = _leaves(s, device, ("means", "quats", "scales", "opacities", "features"))
    bg = torch.rand(2, 3, dtype=torch.float64, device=device, requires_grad=True)
    segments = 4 if device == "cuda" else 0  # the parts of long lists, as the wrapper passes on CUDA
    args = (*g, s["viewmats"].to(device), s["Ks"].to(device), bg, 24, 16, 0.01, 1e10, -1, segments, 8, 1 << 16)
    return args, (0, 1, 2, 3, 4, 7), 3


def _lidar(device):
    s = lidar_scene(N=60, C=2, D=2)
    g = _leaves(s, device, ("means", "quats", "scales", "opacities", "features"))
    sensor = sensor_op_args(*[s[k].to(device) for k in ("row_elevations", "column_azimuths", "row_azimuth_offsets")])
    W = sensor[1].shape[0]
    segments = 4 if device == "cuda" else 0  # the parts of long lists, as the wrapper passes on CUDA
    args = (*g, s["viewmats"].to(device), *sensor, 0.5, 200.0, default_eps2d(W), segments, 8, 1 << 16)
    return args, (0, 1, 2, 3, 4), 3


CASES = [
    ("interpolate_track_poses", _INTERPOLATE, _interpolate),
    ("collect_gaussian_parameters", _COLLECT_PARAMETERS, _collect_parameters),
    ("collect", _COLLECT, _collect),
    ("rasterize_camera_fwd", _CAMERA, _camera),
    ("rasterize_lidar_fwd", _LIDAR, _lidar),
]


def _run(call, args, leaves, n_out, cots):
    out = call(*args)
    grads = torch.autograd.grad(out[:n_out], [args[i] for i in leaves], cots, allow_unused=True)
    return [o.detach() for o in out[:n_out]], grads


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,op,make", CASES, ids=[c[0] for c in CASES])
def test_wrapper_path_matches_registered_autograd(device, name, op, make):
    args, leaves, n_out = make(device)
    assert op.op is getattr(torch.ops.nurec_ops, name)
    with torch.no_grad():
        probe = op.op(*args)
    cots = [torch.randn_like(o) for o in probe[:n_out]]
    out_a, g_a = _run(op, args, leaves, n_out, cots)  # AutogradOp: autograd.Function
    out_b, g_b = _run(op.op, args, leaves, n_out, cots)  # register_autograd's kernel
    for a, b in zip(out_a, out_b):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12, equal_nan=True)
    assert sum(g is not None for g in g_a) == len(leaves)
    for i, (a, b) in enumerate(zip(g_a, g_b)):
        assert a is not None and b is not None, f"{name}: no gradient for input {leaves[i]}"
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12, msg=f"{name}: input {leaves[i]}")
    assert any(g.abs().sum() > 0 for g in g_a), f"{name}: every gradient is zero; the case tests nothing"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,op,make", CASES, ids=[c[0] for c in CASES])
def test_no_gradient_path_builds_no_graph(device, name, op, make):
    args, _, n_out = make(device)
    with torch.no_grad():
        expected = op.op(*args)
        out = op(*args)
    for a, b in zip(out[:n_out], expected[:n_out]):
        assert a.grad_fn is None and not a.requires_grad
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12, equal_nan=True)
    detached = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)
    out = op(*detached)  # grad mode on, no input requires a gradient
    assert all(o.grad_fn is None for o in out[:n_out])
