"""A call's host work stays small: the tensor ops the Python side runs
around the fused kernels, counted with torch.profiler on the CPU (each is a
launch on CUDA). The rolling shutter once packed the sensors'
poses on the host in ~230 small ops per call, which made the H200's rolling
forward host-bound (lidar 3.40 ms against 1.57 global); the kernels now pack
them. A regression here shows on the GPU only as time, so it is counted."""
import math

import pytest
import torch

import nurec_ops
import test_rasterize_camera as tc
import test_rasterize_lidar as tl
from test_rolling_shutter import lidar_end, moved

KEYS = ("means", "quats", "scales", "opacities", "features")


def top_level_aten_ops(fn, warm=2):
    """The aten ops fn runs outside our ops (not nested in another op), after
    `warm` calls (the tables' caches filled)."""
    for _ in range(warm):
        fn()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return [e.name for e in prof.events() if e.name.startswith("aten::") and e.cpu_parent is None]


def camera_call(rolling):
    s = tc.to(tc.random_scene(N=40, C=2, W=32, H=24), "cpu", torch.float32, grad=False)
    end = moved(s["viewmats"]) if rolling else None
    return lambda: nurec_ops.rasterize_camera(*[s[k] for k in KEYS], s["viewmats"], s["Ks"], s["width"],
                                              s["height"], viewmats_end=end,
                                              shutter="top_to_bottom" if rolling else "global")


def lidar_call(rolling):
    s = tl.to(tl.random_scene(N=40, C=2, D=1), "cpu", torch.float32, grad=False)
    end = lidar_end(s["viewmats"]) if rolling else None
    return lambda: nurec_ops.rasterize_lidar(*[s[k] for k in KEYS], s["viewmats"], s["row_elevations"],
                                             s["column_azimuths"], s["row_azimuth_offsets"], viewmats_end=end)


@pytest.mark.parametrize("rolling", [False, True], ids=["global", "rolling"])
@pytest.mark.parametrize("make", [camera_call, lidar_call], ids=["camera", "lidar"])
def test_a_call_runs_few_host_tensor_ops(make, rolling):
    ops = top_level_aten_ops(make(rolling))
    # measured: none for a global call, one detach for a rolling one (host packing was 230)
    assert len(ops) <= 6, ops


def test_the_count_sees_host_packing():
    """The counter itself: packing the poses on the host (the reference's
    way, what the ops did before) is dozens of ops."""
    from nurec_ops import _rolling_shutter as RS
    V = torch.eye(4).expand(2, 4, 4).clone()
    V1 = V.clone()
    V1[:, 0, 3] = 0.5 * math.cos(0.3)
    ops = top_level_aten_ops(lambda: RS.pack("test", V, V1, "top_to_bottom"))
    assert len(ops) > 30, len(ops)
