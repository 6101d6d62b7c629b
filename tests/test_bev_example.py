"""examples/bev_map.py: the synthetic street seen from above through the
orthographic camera is a metric map: the road at height 0, each car at its
collected position (pixels per metre times its world offset from the map's
centre, image right = +x, image up = +y) and above the road."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
import bev_map  # noqa: E402
import street_scene  # noqa: E402

import nurec_ops  # noqa: E402


def test_bev_map_places_the_cars(tmp_path):
    s = street_scene.make_street("tiny", dtype=torch.float64)
    px, height, length = 4.0, 40.0, street_scene.SIZES["tiny"]["length"]
    V, K, W, H = bev_map.bev_camera(length / 2, 0.0, height, length, 22.0, px, "cpu", torch.float64)
    checked = 0
    for f in (0, s["times"].shape[0] - 1):
        t = s["times"][f:f + 1]
        img, heights = bev_map.render_bev(s, t, V, K, W, H, height)
        assert img.shape == (H, W, 3) and heights.shape == (H, W)
        road = heights[H // 2 - 2:H // 2 + 2].nan_to_num(0.0)
        assert road.abs().median() < 0.3  # the road's Gaussians lie on z = 0
        mw, _, _, op = nurec_ops.collect(s["means"], s["quats"], s["log_scales"], s["opacity_logits"],
                                         s["track_ids"], s["key_poses"], s["key_times"], s["track_ranges"], t)
        for k in range(int(s["track_ids"].max()) + 1):
            mine = s["track_ids"] == k
            if float(op[mine].max()) < 0.1:
                continue  # outside its track at this time: not drawn
            c = mw[mine].mean(0)
            u, v = int(px * (c[0] - length / 2) + W / 2), int(-px * c[1] + H / 2)
            if not (4 <= u < W - 4 and 4 <= v < H - 4):
                continue  # off the map at this time
            patch = heights[v - 4:v + 5, u - 4:u + 5]  # within a metre of its centre (a tiny car has gaps)
            assert float(patch.nan_to_num(0.0).max()) > 0.7, (f, k, u, v)  # a car's body, not the road
            checked += 1
    assert checked >= 2
    pytest.importorskip("PIL")
    bev_map.main(["--size", "tiny", "--frames", "2", "--out", str(tmp_path), "--device", "cpu"])
    assert (tmp_path / "bev.png").stat().st_size > 1000
