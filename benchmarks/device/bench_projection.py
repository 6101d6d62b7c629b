"""The projection and emission kernels' device time per forward call (no
grad) on the 1944 garden x 3, the street camera and the street lidar: the
two kernels that count and write a scene's tile entries, which a change to
the footprints' walk (tiles/tiles_math.h, tiles/footprint_warp_cuda.cuh,
the lidar's rl_box) moves. Run it in each build's tree, one process per
build, twice in opposite orders (one build's figures drift a little
between processes on the H200; the two orders show by how much):

    python3 benchmarks/device/bench_projection.py TAG
"""
import sys

import torch

import _paths  # noqa: F401  (benchmarks/ and the repository on sys.path)
import nurec_ops  # noqa: E402
from bench_rasterize_camera import garden, street  # noqa: E402
from bench_rasterize_lidar import street_lidar_scene  # noqa: E402
from timing import kernel_totals  # noqa: E402


def forward(sc, lidar):
    def f():
        with torch.no_grad():
            if lidar:
                nurec_ops.rasterize_lidar(sc["means"], sc["quats"], sc["scales"], sc["opacities"], sc["features"],
                                          sc["viewmats"], *sc["model"])
            else:
                nurec_ops.rasterize_camera(sc["means"], sc["quats"], sc["scales"], sc["opacities"], sc["features"],
                                           sc["viewmats"], sc["Ks"], sc["width"], sc["height"], near=0.01, far=1e10)
    return f


def main():
    tag = sys.argv[1] if len(sys.argv) > 1 else "build"
    scenes = (("garden 1944 x3", garden("cuda", torch.float32, 3), False),
              ("street camera", street("cuda", torch.float32), False),
              ("street lidar", street_lidar_scene("cuda", torch.float32, 128, 3600), True))
    for name, sc, lidar in scenes:
        t = kernel_totals(forward(sc, lidar), calls=10, warmup=3)
        shown = [(k, v) for k, v in sorted(t.items(), key=lambda kv: -kv[1]) if "project" in k or "emit" in k]
        print(f"[{tag}] {name}: " + ", ".join(f"{k[:32]}={v:.1f} us" for k, v in shown), flush=True)


if __name__ == "__main__":
    main()
