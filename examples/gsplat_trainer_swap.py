#!/usr/bin/env python3
"""A small gsplat-style training loop, written against ``gsplat.rasterization``
and gsplat's ``DefaultStrategy``, run once with gsplat's rasterizer (where it
is importable and a GPU is there) and once with nurec_ops swapped in by one
import, same seed: step time and PSNR side by side.

    python3 examples/gsplat_trainer_swap.py [--steps 300] [--device cuda] [--strategy default|mcmc|none] [--absgrad]

The loop is what gsplat's simple trainer does in miniature: Gaussians as an
``nn.ParameterDict`` (log-scales, logit opacities, raw quaternions), one Adam
per parameter, L1 to target images, the strategy's pre/post-backward steps
(DefaultStrategy: split, clone, prune; MCMCStrategy: relocation and growth
to a cap, with its opacity and scale regularizers). MCMC's two CUDA helper
kernels of gsplat are replaced, in both runs, by nurec_ops' own (the
relocation in PyTorch, the covariances a fused op:
``nurec_ops.gsplat.patch_gsplat_strategy_ops``), so that both runs
make their decisions with the same code. The targets are renders of a random "ground truth"
set of Gaussians from a ring of cameras (by the rasterizer under test), so
the run needs no data set. The only difference between the two runs is the
line that picks ``rasterization``.
"""
import argparse
import math
import statistics
import time

import torch


def rasterizer(which):
    if which == "gsplat":
        from gsplat import rasterization  # the original import
    else:
        from nurec_ops.gsplat import rasterization  # the one-import swap
    return rasterization


def look_at(eye, target=(0.0, 0.0, 0.0), up=(0.0, 0.0, 1.0)):
    eye = torch.as_tensor(eye, dtype=torch.float32)
    f = torch.as_tensor(target, dtype=torch.float32) - eye
    f = f / f.norm()
    r = torch.linalg.cross(f, torch.as_tensor(up, dtype=torch.float32))
    r = r / r.norm()
    d = torch.linalg.cross(f, r)
    V = torch.eye(4)
    V[:3, :3] = torch.stack((r, d, f))
    V[:3, 3] = -V[:3, :3] @ eye
    return V


def cameras(C, W, H, device):
    V = torch.stack([look_at((5 * math.cos(2 * math.pi * c / C), 5 * math.sin(2 * math.pi * c / C), 1.0))
                     for c in range(C)])
    f = 0.9 * W
    K = torch.tensor([[f, 0, W / 2], [0, f, H / 2], [0, 0, 1.0]]).expand(C, 3, 3).clone()
    return V.to(device), K.to(device)


def gaussians(N, seed, device):
    g = torch.Generator().manual_seed(seed)
    return torch.nn.ParameterDict({
        "means": torch.nn.Parameter((torch.rand(N, 3, generator=g) - 0.5) * 2.0),
        "scales": torch.nn.Parameter(torch.full((N, 3), math.log(0.05)) + 0.3 * torch.randn(N, 3, generator=g)),
        "quats": torch.nn.Parameter(torch.randn(N, 4, generator=g)),
        "opacities": torch.nn.Parameter(torch.logit(0.2 + 0.6 * torch.rand(N, generator=g))),
        "colors": torch.nn.Parameter(torch.rand(N, 3, generator=g)),
    }).to(device)


def render(rasterization, p, V, K, W, H, absgrad=False):
    return rasterization(p["means"], p["quats"], torch.exp(p["scales"]), torch.sigmoid(p["opacities"]),
                         p["colors"], V, K, W, H, packed=False, absgrad=absgrad)


def psnr(a, b):
    return -10 * math.log10(torch.mean((a - b) ** 2).item() + 1e-12)


def train(which, args, device):
    rasterization = rasterizer(which)
    torch.manual_seed(args.seed)
    V, K = cameras(args.cameras, args.width, args.height, device)
    with torch.no_grad():
        target, _, _ = render(rasterization, gaussians(args.n * 2, 1, device), V, K, args.width, args.height)
    params = gaussians(args.n, 2, device)
    with torch.no_grad():
        start, _, _ = render(rasterization, params, V, K, args.width, args.height)
    optimizers = {k: torch.optim.Adam([v], lr=lr) for k, v, lr in (
        ("means", params["means"], 1.6e-3), ("scales", params["scales"], 5e-3), ("quats", params["quats"], 1e-3),
        ("opacities", params["opacities"], 5e-2), ("colors", params["colors"], 2.5e-3))}
    strategy, state = None, None
    if args.strategy == "default":
        from gsplat.strategy import DefaultStrategy
        strategy = DefaultStrategy(refine_start_iter=args.steps // 10, refine_stop_iter=args.steps // 2,
                                   refine_every=max(args.steps // 20, 1), reset_every=10 ** 9, absgrad=args.absgrad,
                                   grow_grad2d=0.0008 if args.absgrad else 0.0002, verbose=False)
    elif args.strategy == "mcmc":
        from gsplat.strategy import MCMCStrategy

        from nurec_ops.gsplat import patch_gsplat_strategy_ops
        patch_gsplat_strategy_ops()
        strategy = MCMCStrategy(cap_max=2 * args.n, refine_start_iter=args.steps // 10,
                                refine_stop_iter=args.steps * 3 // 4, refine_every=max(args.steps // 20, 1),
                                verbose=False)
    if strategy is not None:
        strategy.check_sanity(params, optimizers)
        state = strategy.initialize_state()
    times = []
    prof = None
    for step in range(args.steps):
        if args.profile and step == args.steps - 20:  # the last 20 steps under the profiler
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]
                                          + ([torch.profiler.ProfilerActivity.CUDA] if device.type == "cuda" else []))
            prof.__enter__()
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        c = step % args.cameras
        out, alpha, info = render(rasterization, params, V[c:c + 1], K[c:c + 1], args.width, args.height,
                                  absgrad=args.absgrad)
        loss = (out - target[c:c + 1]).abs().mean()
        if args.strategy == "mcmc":  # gsplat's simple trainer's MCMC regularizers
            loss = loss + 0.01 * torch.sigmoid(params["opacities"]).mean() + 0.01 * torch.exp(params["scales"]).mean()
        if strategy is not None:
            strategy.step_pre_backward(params, optimizers, state, step, info)
        loss.backward()
        for opt in optimizers.values():
            opt.step()
        if args.strategy == "default":
            strategy.step_post_backward(params, optimizers, state, step, info, packed=False)
        elif args.strategy == "mcmc":
            strategy.step_post_backward(params, optimizers, state, step, info, lr=1.6e-3)
        for opt in optimizers.values():
            opt.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    if prof is not None:
        prof.__exit__(None, None, None)
        print(f"--- {which}: the last 20 steps, by host time")
        print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=14, max_name_column_width=60))
    with torch.no_grad():
        out, _, _ = render(rasterization, params, V, K, args.width, args.height)
    return dict(step_ms=1e3 * statistics.median(times[len(times) // 4:]), psnr=psnr(out, target),
                psnr_start=psnr(start, target), gaussians=params["means"].shape[0])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--n", type=int, default=2000, help="Gaussians to start from (the target has twice as many)")
    ap.add_argument("--cameras", type=int, default=8)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--height", type=int, default=96)
    ap.add_argument("--strategy", default="default", choices=["default", "mcmc", "none"])
    ap.add_argument("--absgrad", action="store_true", help="DefaultStrategy on gsplat's absgrad")
    ap.add_argument("--device", default=None)
    ap.add_argument("--profile", action="store_true", help="print the host and device time of the last 20 steps by op")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    runs = ["nurec_ops"]
    if device.type == "cuda":
        try:
            import gsplat  # noqa: F401
            runs.insert(0, "gsplat")
        except ImportError:
            print("gsplat is not importable here: only the nurec_ops run")
    else:
        print("CPU: gsplat's rasterization needs CUDA; only the nurec_ops run")
    results = {}
    for which in runs:
        results[which] = train(which, args, device)
        r = results[which]
        print(f"{which:10s} {args.strategy:7s} step {r['step_ms']:.2f} ms (median)  PSNR {r['psnr_start']:.2f} -> {r['psnr']:.2f} dB  "
              f"Gaussians {args.n} -> {r['gaussians']}", flush=True)
    if len(results) == 2:
        g, n = results["gsplat"], results["nurec_ops"]
        print(f"nurec_ops / gsplat: step {g['step_ms'] / n['step_ms']:.2f}x faster, "
              f"PSNR {n['psnr'] - g['psnr']:+.2f} dB")
    return results


if __name__ == "__main__":
    main()
