"""SPEC section 7's rolling shutter on the H200: fwd+bwd of the 1080p street
camera (pinhole and the real FTheta front camera) and of the 128 x 3600
street lidar, global against rolling (a car at 15 m/s: 30 ms camera readout,
0.1 s lidar sweep), and gsplat 1.5.3's 3DGUT camera with its rolling
shutter (``rolling_shutter=ROLLING_TOP_TO_BOTTOM, viewmats_rs=...``), in
one process, interleaved round by round (means of back-to-back calls between
two CUDA events), medians; and per fwd+bwd the sum of its kernels' durations
(torch.profiler) and its host time, which show a host-bound call. gsplat
1.5.3 has no lidar: gsplat's newer lidar with rolling shutter, measured at
6.94 ms fwd+bwd on the H200 (a fixed figure, not re-measured here), is the
peer figure.

    python3 benchmarks/bench_rolling_shutter.py [--rounds 5] [--calls 10]
"""
import argparse
import os
import statistics
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import nurec_ops  # noqa: E402
from bench_camera_models import calibration  # noqa: E402
from bench_rasterize_camera import street  # noqa: E402
from bench_rasterize_lidar import street_lidar_scene  # noqa: E402
from timing import autograd_step, back_to_back_us, host_us, kernel_breakdown, kernel_profile, table  # noqa: E402

KEYS = ("means", "quats", "scales", "opacities", "features")
GSPLAT_LIDAR_RS_MS = 6.94  # gsplat's newer lidar on the H200, 128 x 3600 with rolling shutter, fwd+bwd


def moved(V, dx, dt):
    """End poses: the sensors carried dx metres along world x in dt."""
    out = V.clone()
    R, t = V[:, :3, :3], V[:, :3, 3]
    centre = -torch.einsum("cji,cj->ci", R, t)
    centre[:, 0] += dx
    out[:, :3, 3] = -torch.einsum("cij,cj->ci", R, centre)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--kernels", action="store_true", help="the lidar's kernels, global and rolling (f+b)")
    a = ap.parse_args()
    cam = street("cuda", torch.float32)
    Lc = {k: cam[k].detach().clone().requires_grad_(True) for k in KEYS}
    V, K, W, H = cam["viewmats"], cam["Ks"], cam["width"], cam["height"]
    V1 = moved(V, 15.0 * 0.030, 0.030)
    _, fp, FW, FH = calibration("ftheta", "cuda")
    fkw = {k: (v.float() if v.is_floating_point() else v) for k, v in fp.items()}
    fns = {
        "camera pinhole, global": lambda L: nurec_ops.rasterize_camera(
            *[L[k] for k in KEYS], V, K, W, H)[::2],
        "camera pinhole, rolling": lambda L: nurec_ops.rasterize_camera(
            *[L[k] for k in KEYS], V, K, W, H, viewmats_end=V1, shutter="top_to_bottom")[::2],
        "camera ftheta, rolling": lambda L: nurec_ops.rasterize_camera(
            *[L[k] for k in KEYS], V, None, FW, FH, camera_model="ftheta", viewmats_end=V1,
            shutter="top_to_bottom", **fkw)[::2],
    }
    try:
        import gsplat
        from gsplat.cuda._wrapper import RollingShutterType

        def gs(L):
            c, al, _ = gsplat.rasterization(*[L[k] for k in KEYS], V, K, W, H, packed=False, with_ut=True,
                                            with_eval3d=True, rolling_shutter=RollingShutterType.ROLLING_TOP_TO_BOTTOM,
                                            viewmats_rs=V1)
            return c, al
        fns["gsplat 3DGUT pinhole, rolling"] = gs
    except Exception as e:  # noqa: BLE001
        print(f"gsplat: not run ({type(e).__name__}: {e})")
    lid = street_lidar_scene("cuda", torch.float32, 128, 3600)
    Ll = {k: lid[k].detach().clone().requires_grad_(True) for k in KEYS}
    LV = lid["viewmats"]
    LV1 = moved(LV, 15.0 * 0.1, 0.1)
    fns["lidar 128x3600, global"] = lambda L: nurec_ops.rasterize_lidar(*[L[k] for k in KEYS], LV, *lid["model"])[::2]
    fns["lidar 128x3600, rolling"] = lambda L: nurec_ops.rasterize_lidar(*[L[k] for k in KEYS], LV, *lid["model"],
                                                                         viewmats_end=LV1)[::2]
    steps = {}
    for name, f in fns.items():
        L = Ll if name.startswith("lidar") else Lc
        for _ in range(2):
            with torch.no_grad():
                f(L)
        torch.cuda.synchronize()
        cot = [torch.randn_like(o) for o in f(L)]
        steps[name] = (autograd_step(lambda f=f, L=L: f(L), L, cot, False),
                       autograd_step(lambda f=f, L=L: f(L), L, cot, True))
    t = {k: ([], []) for k in steps}
    for _ in range(a.rounds):
        for k, (fw, fb) in steps.items():
            t[k][0].append(back_to_back_us(fw, calls=a.calls, warmup=2) / 1e3)
            t[k][1].append(back_to_back_us(fb, calls=a.calls, warmup=2) / 1e3)
    med = {k: (statistics.median(v[0]), statistics.median(v[1])) for k, v in t.items()}
    # where a back-to-back mean is host-bound, the kernels' sum is below it: both shown
    dev = {k: kernel_profile(fb, calls=5, warmup=2)[1] / 1e3 for k, (_, fb) in steps.items()}
    host = {k: host_us(fb, calls=a.calls, warmup=2) / 1e3 for k, (_, fb) in steps.items()}
    rows = []
    for k, (fw, fb) in med.items():
        base = "camera pinhole, global" if k.startswith("camera") else "lidar 128x3600, global"
        vs = f"{fb / med[base][1]:.2f}" if not k.startswith("gsplat") else "-"
        if k.startswith("camera") and "gsplat 3DGUT pinhole, rolling" in med:
            peer = f"{med['gsplat 3DGUT pinhole, rolling'][1] / fb:.2f}x"
        elif k == "lidar 128x3600, rolling":
            peer = f"{GSPLAT_LIDAR_RS_MS / fb:.2f}x (vs {GSPLAT_LIDAR_RS_MS} ms)"
        else:
            peer = "-"
        rows.append([k, f"{fw:.3f}", f"{fb:.3f}", f"{dev[k]:.3f}", f"{host[k]:.3f}", vs, peer])
    print(table(rows, ["renderer", "fwd ms", "fwd+bwd ms", "f+b kernels ms", "f+b host ms", "f+b / our global",
                       "gsplat rolling / ours (f+b)"]))
    if a.kernels:
        for k in ("lidar 128x3600, global", "lidar 128x3600, rolling"):
            print(f"{k}, fwd+bwd kernels:")
            print(table(kernel_breakdown(steps[k][1], calls=5), ["kernel", "launches", "median us", "us per call"]))


if __name__ == "__main__":
    main()
