#!/usr/bin/env python3
"""A small gsplat-style training loop, written against ``gsplat.rasterization``
and gsplat's ``DefaultStrategy``, run once with gsplat's rasterizer (where it
is importable and a GPU is there) and once with nurec_ops swapped in by one
import, same seed: step time and PSNR side by side. The two runs are
interleaved step by step in one process (each with its own random-number
stream, so each draws what it would alone), so that both are timed under the
same conditions of the machine.

    python3 examples/gsplat_trainer_swap.py [--steps 300] [--device cuda] [--strategy default|mcmc|none] [--absgrad]
        [--runs gsplat,nurec_ops,gsplat-again]

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


# The runs: gsplat's rasterizer, the one-import swap, and gsplat once more
# with the same seed, the control: gsplat's backward sums gradients with
# atomics in no fixed order, and densification amplifies such differences,
# so two gsplat runs of one seed do not end at the same PSNR either; the
# control's difference is the spread that the swap's is measured against.
RUNS = ("gsplat", "nurec_ops", "gsplat-again")
# A step's sections, as --sections prints them (ms, median): rendering, the
# loss and the strategy's pre-backward step, the backward, the optimizers,
# the strategy's post-backward step (gsplat's strategies synchronize in it,
# so it also holds the wait for the device), zero_grad and the final wait.
SECTIONS = ("render", "loss", "backward", "adam", "strategy", "rest")


def rasterizer(which):
    if which.startswith("gsplat"):
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


class Trainer:
    """One training run (gsplat's or the swap's): its Gaussians, optimizers,
    strategy and random-number stream, a step at a time, so that two runs
    can be interleaved step by step in one process (each step timed under
    the same conditions as the other run's) and still draw the same random
    numbers as each would alone."""

    def __init__(self, which, args, device):
        self.which, self.args, self.device = which, args, device
        self.rasterization = rasterizer(which)
        torch.manual_seed(args.seed)
        self.V, self.K = cameras(args.cameras, args.width, args.height, device)
        with torch.no_grad():
            self.target, _, _ = self.render(gaussians(args.n * 2, 1, device), self.V, self.K)
        self.params = gaussians(args.n, 2, device)
        with torch.no_grad():
            self.start, _, _ = self.render(self.params, self.V, self.K)
        self.optimizers = {k: torch.optim.Adam([v], lr=lr) for k, v, lr in (
            ("means", self.params["means"], 1.6e-3), ("scales", self.params["scales"], 5e-3),
            ("quats", self.params["quats"], 1e-3), ("opacities", self.params["opacities"], 5e-2),
            ("colors", self.params["colors"], 2.5e-3))}
        self.strategy, self.state = None, None
        steps = args.steps
        if args.strategy == "default":
            from gsplat.strategy import DefaultStrategy
            self.strategy = DefaultStrategy(refine_start_iter=steps // 10, refine_stop_iter=steps // 2,
                                            refine_every=max(steps // 20, 1), reset_every=10 ** 9,
                                            absgrad=args.absgrad, grow_grad2d=0.0008 if args.absgrad else 0.0002,
                                            verbose=False)
        elif args.strategy == "mcmc":
            from gsplat.strategy import MCMCStrategy

            from nurec_ops.gsplat import patch_gsplat_strategy_ops
            patch_gsplat_strategy_ops()
            self.strategy = MCMCStrategy(cap_max=2 * args.n, refine_start_iter=steps // 10,
                                         refine_stop_iter=steps * 3 // 4, refine_every=max(steps // 20, 1),
                                         verbose=False)
        if self.strategy is not None:
            self.strategy.check_sanity(self.params, self.optimizers)
            self.state = self.strategy.initialize_state()
        self.rng = self._rng_state()
        self.times, self.sections = [], []

    def render(self, p, V, K):
        return render(self.rasterization, p, V, K, self.args.width, self.args.height, absgrad=self.args.absgrad)

    def _rng_state(self):
        return torch.get_rng_state(), (torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None)

    def _set_rng_state(self, st):
        torch.set_rng_state(st[0])
        if st[1] is not None:
            torch.cuda.set_rng_state(st[1], self.device)

    def step(self, step):
        """One training step, timed from a synchronized start to a synchronized end;
        also the host time to each section's end (`SECTIONS`), without waiting
        for the device: where the device keeps up, where the host's time goes."""
        args, p = self.args, self.params
        self._set_rng_state(self.rng)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        marks = []
        c = step % args.cameras
        out, alpha, info = self.render(p, self.V[c:c + 1], self.K[c:c + 1])
        marks.append(time.perf_counter())
        loss = (out - self.target[c:c + 1]).abs().mean()
        if args.strategy == "mcmc":  # gsplat's simple trainer's MCMC regularizers
            loss = loss + 0.01 * torch.sigmoid(p["opacities"]).mean() + 0.01 * torch.exp(p["scales"]).mean()
        if self.strategy is not None:
            self.strategy.step_pre_backward(p, self.optimizers, self.state, step, info)
        marks.append(time.perf_counter())
        loss.backward()
        marks.append(time.perf_counter())
        for opt in self.optimizers.values():
            opt.step()
        marks.append(time.perf_counter())
        if args.strategy == "default":
            self.strategy.step_post_backward(p, self.optimizers, self.state, step, info, packed=False)
        elif args.strategy == "mcmc":
            self.strategy.step_post_backward(p, self.optimizers, self.state, step, info, lr=1.6e-3)
        marks.append(time.perf_counter())
        for opt in self.optimizers.values():
            opt.zero_grad(set_to_none=True)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        marks.append(time.perf_counter())
        self.times.append(marks[-1] - t0)
        self.sections.append([b - a for a, b in zip([t0] + marks[:-1], marks)])
        self.rng = self._rng_state()

    def result(self):
        with torch.no_grad():
            out, _, _ = self.render(self.params, self.V, self.K)
        t = self.times[len(self.times) // 4:]
        sec = self.sections[len(self.sections) // 4:]
        parts = {name: 1e3 * statistics.median(x[i] for x in sec) for i, name in enumerate(SECTIONS)}
        return dict(step_ms=1e3 * statistics.median(t), psnr=psnr(out, self.target),
                    psnr_start=psnr(self.start, self.target), gaussians=self.params["means"].shape[0],
                    sections=parts)


def train_all(runs, args, device):
    """The runs side by side: step k of each, in alternating order (the
    first of a pair may find a warmer or a colder machine); the profile, if
    asked, of the last 20 steps of all runs together."""
    trainers = [Trainer(w, args, device) for w in runs]
    prof = None
    for step in range(args.steps):
        if args.profile and step == args.steps - 20:
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]
                                          + ([torch.profiler.ProfilerActivity.CUDA] if device.type == "cuda" else []))
            prof.__enter__()
        for tr in (trainers if step % 2 == 0 else trainers[::-1]):
            tr.step(step)
    if prof is not None:
        prof.__exit__(None, None, None)
        print(f"--- the last 20 steps of {' and '.join(runs)}, by host time")
        print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=24, max_name_column_width=60))
    return {tr.which: tr.result() for tr in trainers}


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
    ap.add_argument("--sections", action="store_true", help="print each run's host time by section of the step")
    ap.add_argument("--runs", default="gsplat,nurec_ops",
                    help=f"comma-separated, of {', '.join(RUNS)} (gsplat-again: the control, gsplat a second time)")
    args = ap.parse_args(argv)
    wanted = [w for w in args.runs.split(",") if w]
    bad = [w for w in wanted if w not in RUNS]
    if bad or not wanted:
        ap.error(f"--runs takes {', '.join(RUNS)}, got {args.runs!r}")
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    runs = wanted
    peers = [w for w in runs if w.startswith("gsplat")]
    if peers and device.type == "cuda":
        try:
            import gsplat  # noqa: F401
        except ImportError:
            print("gsplat is not importable here: only the nurec_ops run")
            runs = [w for w in runs if w not in peers]
    elif peers:
        print("CPU: gsplat's rasterization needs CUDA; only the nurec_ops run")
        runs = [w for w in runs if w not in peers]
    if not runs:
        ap.error("no run is left to do here (gsplat's runs need CUDA and gsplat)")
    results = train_all(runs, args, device)
    for which in runs:
        r = results[which]
        print(f"{which:10s} {args.strategy:7s} step {r['step_ms']:.2f} ms (median)  PSNR {r['psnr_start']:.2f} -> {r['psnr']:.2f} dB  "
              f"Gaussians {args.n} -> {r['gaussians']}", flush=True)
    if args.sections:
        print("host ms by section (median): " + ", ".join(SECTIONS))
        for which in runs:
            sec = results[which]["sections"]
            print(f"  {which:12s} " + "  ".join(f"{name} {sec[name]:.3f}" for name in SECTIONS))
    g = results.get("gsplat")
    for which in ("nurec_ops", "gsplat-again"):
        if g is not None and which in results:
            n = results[which]
            print(f"{which} / gsplat: step {g['step_ms'] / n['step_ms']:.2f}x faster, "
                  f"PSNR {n['psnr'] - g['psnr']:+.2f} dB")
    return results


if __name__ == "__main__":
    main()
