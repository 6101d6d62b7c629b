"""Safety at size: a camera scene past 2^31 Gaussian-tile
intersections (and so past 2^31 bytes in the binning's buffers) renders the
right image, not a wrapped one. Every Gaussian covers the whole 1080p image
(300k x 8160 tiles = 2.45e9 entries); each has opacity 0.5, so a pixel's
transmittance falls below the SPEC's stop after its 14 nearest Gaussians,
and the image must equal the render of only the 64 nearest (a small
problem). An offset or a count that wrapped at 2^31 would break the tiles
whose lists start past it (the lower part of the image).

Needs ~60 GB of GPU memory and a few seconds: run with NUREC_TEST_HUGE=1
(benchmarks/device/device_session.sh quick does)."""
import os

import pytest
import torch

import nurec_ops
from conftest import gpu
from nurec_ops import _binning

HUGE = pytest.mark.skipif(os.environ.get("NUREC_TEST_HUGE") != "1",
                          reason="a 2.45e9-intersection scene (~60 GB of GPU memory): set NUREC_TEST_HUGE=1")


@gpu
@HUGE
def test_camera_past_2_31_intersections_equals_its_nearest_gaussians():
    dev = torch.device("cuda")
    W, H, N = 1920, 1080, 300_000
    z = 5 + 45 * torch.randperm(N, dtype=torch.float64) / N  # distinct depths in random order
    means = torch.stack((torch.rand(N, dtype=torch.float64) - 0.5, torch.rand(N, dtype=torch.float64) - 0.5, z), -1)
    quats = torch.nn.functional.normalize(torch.randn(N, 4, dtype=torch.float64), dim=-1)
    scales = torch.full((N, 3), 60.0, dtype=torch.float64)  # 3 sigma covers the frustum at any of the depths
    opacities = torch.full((N,), 0.5, dtype=torch.float64)
    colors = torch.rand(N, 3, dtype=torch.float64)
    V = torch.eye(4, dtype=torch.float64)[None]
    K = torch.tensor([[[1000.0, 0, 960], [0, 1000.0, 540], [0, 0, 1]]], dtype=torch.float64)
    f = dict(device=dev, dtype=torch.float32)
    g = [t.to(**f) for t in (means, quats, scales, opacities, colors)]
    pol = _binning.policy("rasterize_camera")
    pol.capacity.clear()
    full = nurec_ops.rasterize_camera(*g, V.to(**f), K.to(**f), W, H, binning="exact", capacity=1)
    needed = max(pol.capacity.values())
    assert needed > 2 ** 31, needed  # the scene is past 2^31 (and each entry's key and value past 2^31 bytes)
    near = torch.argsort(z)[:64].to(dev)
    ref = nurec_ops.rasterize_camera(*[t[near] for t in g], V.to(**f), K.to(**f), W, H, binning="exact")
    for a, b, name in zip(full, ref, ("render", "depth", "alpha")):
        assert torch.isfinite(a).all(), name
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, msg=lambda m, n=name: f"{n}: {m}")
    del full, ref
    torch.cuda.empty_cache()
