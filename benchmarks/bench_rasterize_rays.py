"""rasterize_rays (a sensor given by its rays, gsplat issue 1009) on the
street scene: the real 128 x 3600 lidar's rays as a ray bundle against the
spinning-lidar rasterizer on the same sensor (the model whose tables the
bundle replaces), a non-repetitive rosette of as many rays, and the bundle
under a rolling shutter; forward and forward+backward (a loss on every
output), interleaved round by round in one process (medians of rounds, each
the mean of back-to-back calls between two CUDA events), each call's device
time split into the posing and tiling of the rays (PyTorch), the binning
and the walks (torch.profiler), launches per call; and the eager reference
against the op on a sub-scene small enough for the dense reference.
gsplat 1.5.3 has no ray-bundle sensor (its newest commit renders given
rays through eval3d only with a lidar model's tiling), so there is no peer
to time here; the floor is the spinning rasterizer on the same rays.

    python3 benchmarks/bench_rasterize_rays.py [--rounds 5] [--calls 10]
"""
import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nurec_ops  # noqa: E402
from nurec_ops import _ray_layout  # noqa: E402
from nurec_ops.lidar_model import lidar_model_rays  # noqa: E402
from nurec_ops.reference.rasterize_rays import world_rays  # noqa: E402
from bench_rasterize_lidar import street_lidar_scene  # noqa: E402
from timing import back_to_back_us, interleaved_ms, kernel_profile, kernel_totals, table  # noqa: E402

KEYS = ("means", "quats", "scales", "opacities", "features")


def lidar_rays(model):
    """The spinning model's rays [R * W, 3] (unit, lidar frame) and each
    one's firing time (its column's)."""
    from nurec_ops.rasterize_lidar import default_column_times
    R, W = model.row_elevations.shape[0], model.column_azimuths.shape[0]
    d = lidar_model_rays(model)
    t = default_column_times(model.column_azimuths)[None, :].expand(R, W).reshape(-1)
    return d.contiguous(), t.contiguous()


def rosette(M, device, dtype, fov=math.radians(70.0)):
    t = torch.linspace(0, 1, M, dtype=torch.float64, device=device)
    r = 0.5 * fov * torch.abs(torch.sin(7 * math.pi * t * 11.0))
    phi = 2 * math.pi * 11.0 * t
    d = torch.stack((torch.cos(r), torch.sin(r) * torch.cos(phi), torch.sin(r) * torch.sin(phi)), -1)
    return d.to(dtype).contiguous()


def end_pose(V, dx=1.5, yaw=0.05):
    T = torch.eye(4, dtype=V.dtype, device=V.device).repeat(V.shape[0], 1, 1)
    T[:, 0, 0] = T[:, 1, 1] = math.cos(yaw)
    T[:, 0, 1], T[:, 1, 0] = -math.sin(yaw), math.sin(yaw)
    T[:, 0, 3] = dx
    return torch.linalg.inv(T @ torch.linalg.inv(V))


def calls(render, L):
    def fwd():
        with torch.no_grad():
            render(L)

    def fwd_bwd():
        outs = list(render(L))
        torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])
        for v in L.values():
            v.grad = None
    return fwd, fwd_bwd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=10)
    a = ap.parse_args()
    dt = torch.float32
    sc = street_lidar_scene("cuda", dt, 128, 3600)
    V, model = sc["viewmats"], sc["model"]
    d, tau = lidar_rays(model)
    M = d.shape[0]
    zeros = torch.zeros_like(d)
    L = {k: sc[k].detach().clone().requires_grad_(True) for k in KEYS}
    V_end = end_pose(V)

    def spinning(L):
        return nurec_ops.rasterize_lidar(L["means"], L["quats"], L["scales"], L["opacities"], L["features"], V, *model)

    def bundle(dirs, rolling=False):
        # each pattern its own grid: grid=None caches one per (device, sensors, rays)
        grid = nurec_ops.suggest_ray_grid(V, dirs)

        def render(L):
            kw = dict(viewmats_end=V_end, ray_times=tau) if rolling else {}
            return nurec_ops.rasterize_rays(L["means"], L["quats"], L["scales"], L["opacities"], L["features"], V,
                                            zeros, dirs, near=0.5, far=200.0, grid=grid, **kw)
        render.grid = grid
        return render

    variants = [("spinning lidar rasterizer 128x3600", spinning), ("ray bundle, the same rays", bundle(d)),
                ("ray bundle, rosette of as many rays", bundle(rosette(M, "cuda", dt))),
                ("ray bundle, rolling shutter (1.5 m per sweep)", bundle(d, rolling=True))]
    pol = nurec_ops._binning.policy("rasterize_rays")
    for name, r in variants[1:]:  # each pattern's intersections (the policy's last report)
        with torch.no_grad():
            r(sc)
        torch.cuda.synchronize()
        pol.poll()
        per_item, items = pol.rate[pol._key(V.device, ("rays", 1, M))]
        print(f"{name}: grid {r.grid[0]} x {r.grid[1]}, {per_item * items / 1e6:.2f}M Gaussian-cell pairs", flush=True)
    fns = []
    for _, r in variants:
        fns.extend(calls(r, L))
    med = interleaved_ms(fns, a.rounds, a.calls)

    def layout_only():
        with torch.no_grad():
            o_w, d_w, ok = world_rays(V, zeros, d)
            _ray_layout.layout(V, o_w, d_w, ok, *variants[1][1].grid)
    layout_ms = back_to_back_us(layout_only, calls=a.calls, warmup=2) / 1e3
    rows = []
    for k, (name, render) in enumerate(variants):
        tot = kernel_totals(fns[2 * k + 1], calls=5, warmup=1)
        walk_f = sum(us for n, us in tot.items() if "rays_forward" in n or "rl_forward" in n) / 1e3
        walk_b = sum(us for n, us in tot.items() if "rays_backward" in n or "rl_backward" in n) / 1e3
        _, dev_us, launches, memsets, _ = kernel_profile(fns[2 * k + 1], calls=5, warmup=1)
        with torch.no_grad():
            out = render(sc)
        cov = float((out[2] > 0.5).float().mean())
        rows.append([name, f"{med[2 * k]:.3f}", f"{med[2 * k + 1]:.3f}", f"{walk_f:.3f}", f"{walk_b:.3f}",
                     f"{dev_us / 1e3:.3f}", f"{launches}+{memsets}", f"{100 * cov:.1f}%"])
        print(rows[-1], flush=True)
    print(table(rows, ["variant", "fwd ms", "fwd+bwd ms", "fwd walk ms", "bwd walk ms", "device ms (f+b)",
                       "launches+memsets (f+b)", "rays alpha>0.5"]))
    print(f"rays {M}, grid {variants[1][1].grid}, posing + tiling the rays alone: {layout_ms:.3f} ms a call")

    # the dense reference against the op on a sub-scene it can hold (M x N pairs)
    sub = torch.randperm(sc["means"].shape[0], device="cuda")[:4000]
    S = {k: sc[k][sub].detach().clone().requires_grad_(True) for k in KEYS}
    dd = d[::40].contiguous()
    z = torch.zeros_like(dd)

    def op_small():
        outs = nurec_ops.rasterize_rays(S["means"], S["quats"], S["scales"], S["opacities"], S["features"], V, z, dd)
        torch.autograd.backward(list(outs), [torch.ones_like(o) for o in outs])

    def ref_small():
        outs = nurec_ops.reference.rasterize_rays(S["means"], S["quats"], S["scales"], S["opacities"],
                                                  S["features"], V, z, dd)
        torch.autograd.backward(list(outs), [torch.ones_like(o) for o in outs])
    for f in (op_small, ref_small):
        f()
    r_op = back_to_back_us(op_small, calls=5, warmup=1) / 1e3
    r_ref = back_to_back_us(ref_small, calls=3, warmup=1) / 1e3
    print(f"sub-scene 4000 Gaussians x {dd.shape[0]} rays, fwd+bwd: op {r_op:.3f} ms, eager reference "
          f"{r_ref:.3f} ms ({r_ref / r_op:.1f}x)")


if __name__ == "__main__":
    main()
