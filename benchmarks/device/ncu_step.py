"""A few forward+backward calls of one rasterizer on its benchmark scene and
nothing else, for Nsight Compute to profile without the benchmarks' timing
loops, e.g. the lidar backward kernel's occupancy and stall reasons:

    ncu --clock-control none -k regex:rl_backward_kernel_f32 -s 2 -c 1 \\
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \\
        python benchmarks/device/ncu_step.py lidar

    python benchmarks/device/ncu_step.py {lidar,camera-street,camera-garden,camera-garden3,collect} [--calls 3]
"""
import argparse

import torch

import _paths  # noqa: F401  (benchmarks/ and the repository on sys.path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scene", choices=["lidar", "camera-street", "camera-garden", "camera-garden3", "collect"])
    ap.add_argument("--calls", type=int, default=3)
    a = ap.parse_args()
    if a.scene == "collect":  # the collection benchmark's forward, no autograd
        import nurec_ops
        from scenes import make_street_scene
        sc = make_street_scene("cuda", torch.float32)
        args = [sc[k] for k in ("means", "quats", "log_scales", "opacity_logits", "track_ids", "key_poses",
                                "key_times", "track_ranges", "query_times")]
        step = lambda: nurec_ops.collect(*args)  # noqa: E731
    elif a.scene == "lidar":
        import bench_rasterize_lidar as b
        step = b.make_step(b.street_lidar_scene("cuda", torch.float32, 128, 3600), True)
    else:
        import bench_rasterize_camera as b
        if a.scene == "camera-street":
            sc = b.street("cuda", torch.float32)
        else:  # gsplat's garden fixture, 3 cameras at scale 1 (648x420) or 3 (1944x1260)
            sc = b.garden("cuda", torch.float32, 3 if a.scene == "camera-garden3" else 1)
        step = b.make_step(sc, True)
    for _ in range(a.calls):
        step()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
