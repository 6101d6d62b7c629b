"""Where the camera op's host time goes, per fwd+bwd call: the time the host
takes to issue a call while the device never holds it up (10 calls after a
synchronize, so the launch queue never fills; median of 20 bursts), the
wall time back to back, and torch.profiler's CPU-side events by name (self
time and count per call: the CUDA runtime's launches, memsets and copies,
allocations, the autograd engine, our ops' C++ glue).

A step whose host time exceeds its device time is host-bound: faster
kernels do not shorten it (measured on the H200: on a scene of the size of
examples/gsplat_trainer_swap.py's small one, 1.16 ms of host time per
camera call; benchmarks/RESULTS.md). The scene here is that example's own: the op alone on its
eight cameras, the example's own call (one camera through the gsplat front
end, with its loss), gsplat's same call where gsplat is importable on CUDA,
and the MCMC noise gsplat's MCMCStrategy adds to each step.

    python3 benchmarks/device/host_profile.py [--device cuda|cpu] [--top 18] [--only NAME]
"""
import argparse
import os
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

import _paths  # benchmarks/ and the repository on sys.path
import nurec_ops  # noqa: E402,F401
from bench_builds import make_step  # noqa: E402


def trainer_scene(device, N=20000, C=8, W=640, H=480):
    """examples/gsplat_trainer_swap.py's scene (its cameras and its
    Gaussians, activated as its render() activates them): the small one by
    default."""
    sys.path.insert(0, os.path.join(_paths.ROOT, "examples"))
    import gsplat_trainer_swap as swap
    V, K = swap.cameras(C, W, H, device)
    p = swap.gaussians(N, 2, device)
    with torch.no_grad():
        return dict(means=p["means"].detach(), quats=p["quats"].detach(), scales=torch.exp(p["scales"]).detach(),
                    opacities=torch.sigmoid(p["opacities"]).detach(), features=p["colors"].detach(),
                    viewmats=V, Ks=K, width=W, height=H)


def trainer_call(sc, mode, rasterization=None):
    """The trainer's own step of the camera op: examples/gsplat_trainer_swap.py
    renders one camera a step through the front end (nurec_ops.gsplat, the
    one-import swap), takes an L1 loss and runs backward; mode "abs" asks
    for absgrad, as its --absgrad run does."""
    if rasterization is None:
        from nurec_ops.gsplat import rasterization
    L = {k: sc[k].detach().clone().requires_grad_(True) for k in ("means", "quats", "scales", "opacities", "features")}
    V, K = sc["viewmats"][:1], sc["Ks"][:1]
    target = torch.rand(1, sc["height"], sc["width"], 3, device=V.device)

    def step():
        out, _, meta = rasterization(L["means"], L["quats"], L["scales"], L["opacities"], L["features"], V, K,
                                     sc["width"], sc["height"], packed=False, absgrad=mode == "abs")
        meta["means2d"].retain_grad()  # as gsplat's DefaultStrategy.step_pre_backward does
        (out - target).abs().mean().backward()
        for v in L.values():
            v.grad = None
    return step


def mcmc_noise_call(sc):
    """What gsplat's MCMCStrategy adds to every step besides the render:
    inject_noise_to_position's covariances (quat_scale_to_covar_preci, the
    op nurec_ops.gsplat.patch_gsplat_strategy_ops installs) and the noise."""
    from nurec_ops.gsplat_strategy_ops import quat_scale_to_covar_preci
    q, s, m = sc["quats"], sc["scales"], sc["means"].clone()

    def step():
        with torch.no_grad():
            covars, _ = quat_scale_to_covar_preci(q, s, compute_covar=True, compute_preci=False, triu=False)
            noise = torch.randn_like(m) * 1e-3
            m.add_(torch.einsum("bij,bj->bi", covars, noise))
    return step


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def host_and_wall_us(f, device, bursts=20, per_burst=10, calls=50):
    for _ in range(10):
        f()
    sync(device)
    hs = []
    for _ in range(bursts):
        t = time.perf_counter()
        for _ in range(per_burst):
            f()
        hs.append((time.perf_counter() - t) / per_burst * 1e6)
        sync(device)
    t = time.perf_counter()
    for _ in range(calls):
        f()
    sync(device)
    return statistics.median(hs), (time.perf_counter() - t) / calls * 1e6


def cpu_events(f, device, calls=20, top=18):
    """(name, count per call, self CPU us per call) of the CPU-side events,
    largest first."""
    for _ in range(5):
        f()
    sync(device)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=acts) as prof:
        for _ in range(calls):
            f()
        sync(device)
    rows = [(e.key, e.count / calls, e.self_cpu_time_total / calls) for e in prof.key_averages()]
    rows.sort(key=lambda r: -r[2])
    return rows[:top], sum(r[2] for r in rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--top", type=int, default=18)
    ap.add_argument("--only", default="", help="run only the cases whose name contains this")
    a = ap.parse_args()
    device = torch.device(a.device)
    if device.type == "cuda":
        from bench_rasterize_camera import garden
        scenes = {"trainer 20k x8 640x480": trainer_scene(device), "garden 648 x3": garden("cuda", torch.float32, 1)}
    else:  # the CPU path's own host cost, on a scene the CPU kernels take quickly
        scenes = {"trainer 200 x2 64x48 (cpu)": trainer_scene(device, N=200, C=2, W=64, H=48)}
    cases = [(name, mode, make_step(sc, False, mode)) for name, sc in scenes.items() for mode in ("off", "abs")]
    first = next(iter(scenes.values()))
    cases += [("trainer's call (1 camera, front end, L1 loss)", mode, trainer_call(first, mode)) for mode in ("off", "abs")]
    cases += [("MCMC noise (quat_scale_to_covar_preci + einsum)", "-", mcmc_noise_call(first))]
    if device.type == "cuda":
        try:  # the peer's host cost of the same call, where it is importable (benchmarks/device/peer_gsplat.sh)
            import gsplat
            cases += [("gsplat's trainer call (the same)", mode, trainer_call(first, mode, gsplat.rasterization))
                      for mode in ("off", "abs")]
        except ImportError:
            print("gsplat is not importable: no peer rows")
    for name, mode, f in cases:
        if a.only in name:
            host, wall = host_and_wall_us(f, device)
            bound = ("host-bound" if host >= 0.95 * wall else "device-bound") if device.type == "cuda" else "CPU"
            print(f"{name} {mode}: host {host:.0f} us per fwd+bwd call, wall {wall:.0f} us back to back"
                  f" ({bound})", flush=True)
            rows, total = cpu_events(f, device, top=a.top)
            print(f"    CPU-side self time by event, per call (sum {total:.0f} us):", flush=True)
            for key, n, us in rows:
                print(f"    {us:8.1f} us  {n:6.1f}x  {key[:90]}", flush=True)


if __name__ == "__main__":
    main()
