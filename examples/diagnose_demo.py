"""Before / after: the same small optimization step with the pure-PyTorch
collection (nurec_ops.reference) and with the fused op, each under
nurec_ops.diagnose. Runs on the CPU (syncs are a GPU matter: 0 there) and on
a GPU, where the report shows the syncs, tiny kernels and idle gaps the fused
op removes.

    python examples/diagnose_demo.py [--gaussians N] [--steps S] [--log-every-step]

--log-every-step adds the classic `print(loss.item())` to the loop, a sync
the report then names by file and line.
"""
import argparse

import torch

import nurec_ops


def make_scene(n, device, tracks=8, keys=16):
    g = torch.Generator().manual_seed(0)
    leaf = lambda *s: torch.randn(*s, generator=g).to(device).requires_grad_()
    key_times = torch.arange(keys).repeat(tracks) * 100_000
    starts = torch.arange(tracks) * keys
    return dict(
        means=leaf(n, 3), quats=leaf(n, 4), log_scales=leaf(n, 3), opacity_logits=leaf(n),
        track_ids=torch.randint(-1, tracks, (n,), generator=g).to(device),
        key_poses=leaf(tracks * keys, 7), key_times=key_times.to(device),
        track_ranges=torch.stack([starts, torch.full_like(starts, keys)], 1).to(device),
        query_times=torch.tensor([750_000]).to(device),
    )


def run(collect, scene, steps, log_every_step, trace):
    params = [v for v in scene.values() if v.requires_grad]
    opt = torch.optim.Adam(params, lr=1e-3)
    with nurec_ops.diagnose(warmup=2, steps=steps, trace=trace) as d:
        for _ in range(steps + 2):
            means_w, quats_w, scales, opacities = collect(**scene)
            loss = means_w.square().mean() + (opacities * scales.prod(-1)).mean() + quats_w[:, 0].mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if log_every_step:
                print(f"loss {loss.item():.4f}", end="\r")
            d.step()
    return d.figures


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gaussians", type=int, default=None, help="default: 1M on a GPU, 100k on the CPU")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--log-every-step", action="store_true")
    args = p.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    n = args.gaussians or (1_000_000 if device == "cuda" else 100_000)
    for name, collect in (("reference", nurec_ops.reference.collect), ("fused", nurec_ops.collect)):
        print(f"\n=== {name} collection, {n} Gaussians on {device} ===")
        run(collect, make_scene(n, device), args.steps, args.log_every_step, f"diagnose_{name}_trace.json")


if __name__ == "__main__":
    main()
