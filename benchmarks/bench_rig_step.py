"""The real training step of a drive: the 5-camera rig of
../shared/data/gsplat/test_pinhole_camera_params.json (3 x 1920x1280,
2 x 1920x886; its intrinsics as pinholes, so that gsplat's classic path can
render the same) on a car in the synthetic street, the 128 x 3600 lidar, N
Gaussians of which 64 actors, SH degree 3 for the cameras. One step:
collect, the cameras (one call per image size), the lidar, L1 losses,
backward, Adam over every parameter.

Reported per step: median time (CUDA events between step starts, no sync in
the loop; eager and, with --graph, replayed as a CUDA graph), the share of
each op's device time (one profiled step), kernels, host syncs (counted
under set_sync_debug_mode), peak memory; with --gsplat the same step with
gsplat's camera rasterizer (PyPI 1.5.3, classic, packed=False) for the
cameras, as a ratio. --sweep: N, cameras and resolution varied; a table
and docs/rig_step_sweep.png (matplotlib; its data beside it as .json,
which --replot draws again without a GPU).

    python3 benchmarks/bench_rig_step.py [--gaussians 2e6] [--steps 30] [--graph] [--gsplat] [--sweep]
    python3 benchmarks/bench_rig_step.py --smoke          # a tiny CPU run of the same code
    python3 benchmarks/bench_rig_step.py --replot docs/rig_step_sweep.json   # the plot again
"""
import argparse
import json
import os
import sys
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))
import nurec_ops  # noqa: E402
from scenes import make_street_scene, street_lidar  # noqa: E402
from timing import graph_ms, kernel_breakdown, step_ms, table  # noqa: E402

RIG = "gsplat/test_pinhole_camera_params.json"
ACTORS, PER_ACTOR = 64, 8_000


def rig_cameras(device, dtype, scale=1.0, cameras=5, car_x=-30.0):
    """(groups, names): per image size, (viewmats [C,4,4], Ks [C,3,3], W, H)
    of the rig's cameras on a car at car_x (rig frame: x forward, y left,
    z up, on the road)."""
    import shared_data
    from nurec_ops import sensors

    recs = sensors.read_cameras(shared_data.require(RIG))
    names = list(recs)[:cameras]
    T_world_rig = torch.eye(4, dtype=torch.float64)
    T_world_rig[0, 3], T_world_rig[1, 3] = car_x, -2.0
    groups = {}
    for n in names:
        _, p, (W, H) = sensors.camera_params(recs[n], scale=scale)
        T = torch.tensor(recs[n]["T_sensor_rig"], dtype=torch.float64)  # camera -> rig
        V = torch.linalg.inv(T_world_rig @ T)
        groups.setdefault((W, H), ([], []))
        groups[(W, H)][0].append(V)
        groups[(W, H)][1].append(p["Ks"])
    out = [(torch.stack(v).to(device, dtype), torch.stack(k).to(device, dtype), W, H)
           for (W, H), (v, k) in groups.items()]
    return out, names


def lidar_model(device, dtype):
    import shared_data
    from nurec_ops.lidar_model import load_lidar_model, synthetic_lidar_model

    path = shared_data.find(shared_data.LIDAR)
    return load_lidar_model(path, dtype=dtype, device=device) if path else synthetic_lidar_model(dtype=dtype,
                                                                                                device=device)


def build(device, dtype, N, cameras, scale, lidar=True, sh=3, length=160.0):
    per = min(PER_ACTOR, max(N // (4 * ACTORS), 1))
    s = make_street_scene(device, dtype, seed=0, num_static=max(N - ACTORS * per, 1), num_tracks=ACTORS,
                          per_track=per, length=length)
    n = s["means"].shape[0]
    K = (sh + 1) ** 2
    params = {k: s[k].clone().requires_grad_(True) for k in ("means", "quats", "log_scales", "opacity_logits")}
    sh0 = (s["colors"].to(dtype) - 0.5) / 0.28209479177387814
    params["sh"] = torch.cat((sh0[:, None], torch.zeros(n, K - 1, 3, device=device, dtype=dtype)), 1).requires_grad_(True)
    params["key_poses"] = s["key_poses"].clone().requires_grad_(True)
    groups, names = rig_cameras(device, dtype, scale, cameras)
    targets = [torch.rand(V.shape[0], H, W, 3, device=device, dtype=dtype) for V, _, W, H in groups]
    D = dict(scene=s, groups=groups, names=names, targets=targets, sh=sh, lidar=None)
    if lidar:
        model = lidar_model(device, dtype)
        D["lidar"] = (street_lidar(device, dtype), model)
        R, W = model.row_elevations.shape[0], model.column_azimuths.shape[0]
        D["lidar_target"] = torch.rand(1, R, W, 1, device=device, dtype=dtype) * 30
    return params, D


def collect(params, D):
    """The step's world-space Gaussians at the scene's query time."""
    s = D["scene"]
    return nurec_ops.collect(params["means"], params["quats"], params["log_scales"], params["opacity_logits"],
                             s["track_ids"], params["key_poses"], s["key_times"], s["track_ranges"], s["query_times"])


def losses(D, mw, qw, sc, o, sh, camera_op="nurec_ops", camera_kw=None):
    """The step's L1 losses: every camera group (through `camera_op`,
    ours with `camera_kw` or gsplat's classic path), and the lidar's range."""
    if camera_op == "gsplat":
        import gsplat
    loss = 0.0
    for (V, K, W, H), tgt in zip(D["groups"], D["targets"]):
        if camera_op == "gsplat":
            img, _, _ = gsplat.rasterization(mw, qw, sc, o, sh, V, K, W, H, sh_degree=D["sh"], packed=False,
                                             near_plane=0.01)
        else:
            img = nurec_ops.rasterize_camera(mw, qw, sc, o, sh, V, K, W, H, sh_degree=D["sh"], **(camera_kw or {}))[0]
        loss = loss + (img - tgt).abs().mean()
    if D["lidar"] is not None:
        LV, m = D["lidar"]
        rng = nurec_ops.rasterize_lidar(mw, qw, sc, o, torch.ones_like(o)[:, None], LV, *m)[1]
        loss = loss + 0.05 * (rng - D["lidar_target"]).abs().mean()
    return loss


def step_fn(params, D, opt, camera_op="nurec_ops"):
    def step():
        loss = losses(D, *collect(params, D), params["sh"], camera_op)
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()
        D["loss"] = loss.detach()  # read only after a run (a graph's replays write it in place)
    return step


def syncs_of(step, device):
    if device.type != "cuda":
        return 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode(0)
    return sum(str(w.message).startswith("called a synchronizing CUDA operation") for w in caught)


def profile_shares(step, device):
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if device.type == "cuda"
                                                    else [])
    with torch.profiler.profile(activities=acts) as prof:
        step()
        if device.type == "cuda":
            torch.cuda.synchronize()
    ev = prof.key_averages()
    on_device = [e for e in ev if str(getattr(e, "device_type", "")).endswith("CUDA")]  # kernels, memsets, copies
    if device.type == "cuda":
        # an op's self device time is that of the kernels it launched, which
        # their own events hold again: the step's device time is theirs
        # alone (summed over every event it counted each kernel twice, and
        # the shares came out half of the true ones)
        attr = "self_device_time_total"
        total, kernels = sum(e.self_device_time_total for e in on_device), sum(e.count for e in on_device)
    else:
        attr, kernels = "self_cpu_time_total", 0
        total = sum(e.self_cpu_time_total for e in ev)
    ours = {e.key: getattr(e, attr, 0.0) for e in ev if e.key.startswith("nurec_ops::")}
    return {k: v / (total or 1.0) for k, v in sorted(ours.items(), key=lambda kv: -kv[1])}, kernels


def measure(device, dtype, N, cameras, scale, steps, graph=False, with_gsplat=False, kernels=False):
    params, D = build(device, dtype, N, cameras, scale)
    opt = torch.optim.Adam(list(params.values()), lr=1e-3, capturable=graph and device.type == "cuda")
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    step = step_fn(params, D, opt)
    cuda = device.type == "cuda"
    row = dict(N=D["scene"]["means"].shape[0], cameras=cameras, scale=scale, eager_ms=step_ms(step, steps, cuda=cuda))
    row["syncs"] = syncs_of(step, device)
    row["shares"], row["kernels"] = profile_shares(step, device)
    row["peak_mb"] = torch.cuda.max_memory_allocated() / 2 ** 20 if device.type == "cuda" else float("nan")
    if graph and device.type == "cuda":
        # The graph takes each call's own capacity from the policies the
        # eager steps above sized (capacity=None under capture): the same
        # sorts and scans as eager. (One capacity for every call, 2x the
        # largest seen, made the graph's sorts 2x or more the eager ones':
        # 25.69 against 23.89 ms, 2026-12-05.) A graph cannot resize, so
        # its last replay's loss is checked: an overflowed call's outputs
        # are NaN, never a silent partial image.
        from nurec_ops import _binning
        caps = []
        for op in ("rasterize_camera", "rasterize_lidar"):
            pol = _binning.policy(op)
            pol.poll()
            caps += list(pol.capacity.values())
        row["graph_ms"] = graph_ms(step_fn(params, D, opt), steps)
        row["graph_capacity"] = sum(caps)
        row["graph_finite"] = bool(torch.isfinite(D["loss"]).item())
    if kernels and device.type == "cuda":
        row["kernels_ours"] = kernel_breakdown(step, calls=3, warmup=1)
    if with_gsplat:
        row["gsplat_ms"] = step_ms(step_fn(params, D, opt, camera_op="gsplat"), steps, cuda=cuda)
        if kernels:
            row["kernels_gsplat"] = kernel_breakdown(step_fn(params, D, opt, camera_op="gsplat"), calls=3, warmup=1)
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gaussians", type=float, default=2e6)
    ap.add_argument("--cameras", type=int, default=5)
    ap.add_argument("--scale", type=float, default=1.0, help="image resolution factor")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--graph", action="store_true")
    ap.add_argument("--gsplat", action="store_true")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--kernels", action="store_true", help="the step's 15 costliest kernels (ours, and gsplat's)")
    ap.add_argument("--plot", default=os.path.join(ROOT, "docs", "rig_step_sweep.png"), help="the sweep's plot")
    ap.add_argument("--smoke", action="store_true", help="tiny CPU run (20k Gaussians, 1/20 images, 2 steps)")
    ap.add_argument("--replot", metavar="JSON", help="only draw --plot from a sweep's saved data (no GPU)")
    a = ap.parse_args()
    if a.replot:
        with open(a.replot) as f:
            plot_sweep([tuple(p) for p in json.load(f)], a.plot)
        return
    device = torch.device("cpu" if a.smoke else "cuda")
    if a.smoke:
        a.gaussians, a.scale, a.steps = 2e4, 0.05, 2
    r = measure(device, torch.float32, int(a.gaussians), a.cameras, a.scale, a.steps, a.graph, a.gsplat, a.kernels)
    print(table([[r["N"], r["cameras"], r["scale"], f"{r['eager_ms']:.2f}",
                  f"{r.get('graph_ms', float('nan')):.2f}", r["syncs"], r["kernels"], f"{r['peak_mb']:.0f}",
                  f"{r['gsplat_ms'] / r['eager_ms']:.2f}x" if "gsplat_ms" in r else "-"]],
                ["Gaussians", "cameras", "resolution", "step ms", "graph ms", "syncs", "kernels", "peak MB",
                 "gsplat cameras / ours"]))
    print("device-time shares: " + ", ".join(f"{k.split('::')[1]} {100 * v:.1f}%" for k, v in r["shares"].items()))
    if "graph_capacity" in r:
        print(f"graph: each call's own capacity, as eager ({r['graph_capacity']} intersections over all "
              f"calls); last replay's loss finite: {r['graph_finite']}")
    for who in ("ours", "gsplat"):
        if f"kernels_{who}" in r:
            print(f"the step's costliest kernels ({who} cameras):")
            print(table(r[f"kernels_{who}"], ["kernel", "launches", "median us", "us per step"]))
    if a.sweep:
        sweep(device, a.steps, a.plot)


def sweep(device, steps, plot):
    rows, pts = [], []
    for N in (0.25e6, 0.5e6, 1e6, 2e6, 4e6, 8e6):
        r = measure(device, torch.float32, int(N), 5, 1.0, steps)
        rows.append([r["N"], 5, 1.0, f"{r['eager_ms']:.2f}", f"{r['peak_mb']:.0f}"])
        pts.append(("N", r["N"], r["eager_ms"], r["peak_mb"]))
    for cams in (1, 2, 3, 4, 5):
        r = measure(device, torch.float32, int(2e6), cams, 1.0, steps)
        rows.append([r["N"], cams, 1.0, f"{r['eager_ms']:.2f}", f"{r['peak_mb']:.0f}"])
        pts.append(("cameras", cams, r["eager_ms"], r["peak_mb"]))
    for scale in (0.5, 1.0, 2.0):
        r = measure(device, torch.float32, int(2e6), 5, scale, steps)
        rows.append([r["N"], 5, scale, f"{r['eager_ms']:.2f}", f"{r['peak_mb']:.0f}"])
        pts.append(("resolution", scale, r["eager_ms"], r["peak_mb"]))
    print(table(rows, ["Gaussians", "cameras", "resolution", "step ms", "peak MB"]))
    with open(os.path.splitext(plot)[0] + ".json", "w") as f:  # the plot's data, for --replot
        json.dump([list(p) for p in pts], f, indent=0)
    plot_sweep(pts, plot)


def plot_sweep(pts, plot):
    """The sweep's three panels: step time (and peak memory, right axis)
    against Gaussians, cameras and resolution, each on linear axes with a
    dashed line of proportional growth from its first point, so that what
    grows slower (or faster) than linearly shows as such."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot")
        return
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    labels = {"N": ("Gaussians (millions; 5 cameras, x1)", 1e-6),
              "cameras": ("cameras (2M Gaussians, x1)", 1.0),
              "resolution": ("resolution factor (2M Gaussians, 5 cameras)", 1.0)}
    for ax, what in zip(axes, ("N", "cameras", "resolution")):
        sel = sorted({x: (y, m) for w, x, y, m in pts if w == what}.items())
        xs = [x * labels[what][1] for x, _ in sel]
        ys = [y for _, (y, _) in sel]
        mem = [m / 1024 for _, (_, m) in sel]
        ax.plot(xs, ys, "o-", color="C0", label="step ms")
        # proportional to the work: N and cameras linearly, resolution by its pixels (factor^2)
        grow = (lambda x: (x / xs[0]) ** 2) if what == "resolution" else (lambda x: x / xs[0])
        ax.plot(xs, [ys[0] * grow(x) for x in xs], "--", color="0.6", label="proportional")
        ax.set_xlabel(labels[what][0])
        ax.set_ylabel("step ms")
        ax.set_ylim(0, max(ys) * 1.15)
        ax2 = ax.twinx()
        ax2.plot(xs, mem, "s:", color="C1", label="peak GB")
        ax2.set_ylabel("peak GB", color="C1")
        ax2.set_ylim(0, max(mem) * 1.3)
        lines = ax.get_lines() + ax2.get_lines()
        ax.legend(lines, [ln.get_label() for ln in lines], loc="upper left", fontsize=8)
    fig.suptitle("The rig step (5 cameras + 128 x 3600 lidar, SH 3, Adam) on one H200, eager")
    fig.tight_layout()
    os.makedirs(os.path.dirname(plot) or ".", exist_ok=True)
    fig.savefig(plot, dpi=120)


if __name__ == "__main__":
    main()
