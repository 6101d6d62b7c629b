"""A bird's-eye view of a drive: the synthetic street of examples/street_scene.py
rendered from above by an orthographic camera (``camera_model="ortho"``,
gsplat's), at a few frame times, with the cars collected at each time
(``nurec_ops.collect``); per time the colour map and the height map (from
the depth), all side by side in one PNG.

    python3 examples/bev_map.py [--size small] [--frames 3] [--px-per-m 4] [--out bev_out] [--device cpu]

The camera hangs ``--height`` metres above the street's middle looking down
(image right = the driving direction +x, image up = +y, the left of the
road); ``Ks`` are pixels per metre, so the map's scale is the same
everywhere, unlike a perspective camera's.
"""
import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import figures  # noqa: E402
import street_scene  # noqa: E402

import nurec_ops  # noqa: E402


def bev_camera(centre_x, centre_y, height, width_m, depth_m, px_per_m, device, dtype):
    """viewmat [1, 4, 4] (world -> camera, OpenCV axes: x = world x, y = world
    -y, z = world -z, i.e. looking down) of an orthographic camera above
    (centre_x, centre_y) at ``height``, its Ks [1, 3, 3] and image size for a
    map of width_m x depth_m metres."""
    R = torch.tensor([[1.0, 0, 0], [0, -1.0, 0], [0, 0, -1.0]], dtype=torch.float64)
    c = torch.tensor([centre_x, centre_y, height], dtype=torch.float64)
    V = torch.eye(4, dtype=torch.float64)
    V[:3, :3] = R
    V[:3, 3] = -R @ c
    W, H = int(math.ceil(width_m * px_per_m)), int(math.ceil(depth_m * px_per_m))
    K = torch.tensor([[px_per_m, 0, W / 2], [0, px_per_m, H / 2], [0, 0, 1]], dtype=torch.float64)
    return V[None].to(device, dtype), K[None].to(device, dtype), W, H


def render_bev(scene, t, V, K, W, H, height):
    """The colour map [H, W, 3] and height map [H, W] (metres above the
    ground, NaN where nothing was drawn) of the scene at time t."""
    s = scene
    mw, qw, sc, op = nurec_ops.collect(s["means"], s["quats"], s["log_scales"], s["opacity_logits"], s["track_ids"],
                                       s["key_poses"], s["key_times"], s["track_ranges"], t)
    img, depth, alpha = nurec_ops.rasterize_camera(mw, qw, sc, op, s["colors"], V, K, W, H, near=0.1, far=1e3,
                                                   backgrounds=s["backgrounds"], camera_model="ortho")
    a = alpha[0, ..., 0]
    z = depth[0, ..., 0] / a.clamp_min(1e-6)  # the expected depth of what was drawn
    heights = torch.where(a > 0.5, height - z, torch.full_like(z, float("nan")))
    return img[0], heights


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="small", choices=sorted(street_scene.SIZES))
    ap.add_argument("--frames", type=int, default=3, help="times shown, spread over the drive")
    ap.add_argument("--px-per-m", type=float, default=4.0)
    ap.add_argument("--height", type=float, default=40.0, help="the camera's height above the ground, m")
    ap.add_argument("--out", default="bev_out")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    s = street_scene.make_street(args.size, device=device, dtype=torch.float32)
    length = street_scene.SIZES[args.size]["length"]
    V, K, W, H = bev_camera(length / 2, 0.0, args.height, length, 2 * street_scene.STREET_HALF_WIDTH + 4,
                            args.px_per_m, device, torch.float32)
    F = s["times"].shape[0]
    picks = sorted({round(k * (F - 1) / max(args.frames - 1, 1)) for k in range(args.frames)})
    panels = []
    with torch.no_grad():
        for f in picks:
            img, heights = render_bev(s, s["times"][f:f + 1], V, K, W, H, args.height)
            sec = (int(s["times"][f]) - int(s["times"][0])) * 1e-6
            panels.append((f"t = {sec:.1f} s", img))
            panels.append(("height", figures.colormap(heights, 0.0, 4.0, invalid=heights != heights)))
            print(f"frame {f}: {W} x {H} px, drawn {float((heights == heights).float().mean()):.0%}, "
                  f"highest {float(heights.nan_to_num(-1).max()):.2f} m")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "bev.png")
    figures.save_panels(path, panels, scale=2)
    print(f"wrote {path}")
    return panels


if __name__ == "__main__":
    main()
