"""A scene larger than the GPU's memory (issue 51): the rig step of
bench_rig_step.py (its 5 cameras, the 128 x 3600 lidar, SH degree 3,
collect, L1 losses, backward, Adam) on a street as dense as that
benchmark's (2M Gaussians per 160 m) and as long as N needs, two ways:

- gpu: every parameter and its Adam state on the GPU (torch.optim.Adam);
- offload: the SH coefficients (48 of a Gaussian's 59 values) and their Adam
  moments in pinned host memory, only the rows some sensor of the step can
  see read and updated, in place, by the GPU (nurec_ops.offload: the
  visibility test, the fixed-capacity compaction, gather_rows, adam_rows_);
  the geometry and its Adam state stay on the GPU;
- cache: offload with HostRows(cache=True): the last step's rows and
  moments stay on the GPU, only the rows entering the view are read over
  PCIe and only those leaving it written back (put_rows_).

`--advance M` drives the rig M metres along the street every step (a drive
trained in its recorded order: 1 m a step is 10 m/s at 10 frames a second);
0 keeps it still, where the cache reads nothing after its first step.

The cameras' visibility test is offload.pinhole_visible's bound, or with
`--visible exact` nurec_ops.camera_visible (the camera op's own projection
and footprint, the test any camera model needs); each row also times the
test alone and gives the share of Gaussians the cameras alone see.

Both steps cull what no sensor sees (cameras' far plane FAR_CAMERA, the
lidar's 200 m), so their images are the same; the optimizers differ only
in that the offloaded rows no sensor saw keep their moments (SelectiveAdam).
Each way runs in a process of its own (`--mode`), optionally under a memory
cap (`--memory-gb`: torch.cuda.set_per_process_memory_fraction, a smaller
card's memory), and reports one JSON line: step ms (median of CUDA events
between step starts), steps/s, the visible fraction, host syncs per step,
peak GPU memory, pinned host memory, or "out of memory".

    python3 benchmarks/bench_offload.py                         # H200: 20M, both ways, then a 24 GB cap
    python3 benchmarks/bench_offload.py --gaussians 2e7 --mode offload --memory-gb 24
    python3 benchmarks/bench_offload.py --modes gpu,offload,cache --advance 1 --no-cap
    python3 benchmarks/bench_offload.py --modes cache --advance 1 --no-cap --visible exact   # camera_visible
    python3 benchmarks/bench_offload.py --smoke                 # CPU: 20k Gaussians, tiny images
"""
import argparse
import json
import os
import subprocess
import sys
import time
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))
import nurec_ops  # noqa: E402
from nurec_ops import offload  # noqa: E402
import bench_rig_step as rig  # noqa: E402
from timing import step_ms, table  # noqa: E402

FAR_CAMERA = 200.0  # metres: a driving camera's useful depth, where a 12 cm Gaussian is < 1 px wide
DENSITY = 2e6 / 160.0  # Gaussians per metre of street (bench_rig_step's 2M street)


def build(device, N, scale, cameras):
    """bench_rig_step's parameters and data on a street of N Gaussians."""
    length = max(160.0, N / DENSITY)
    params, D = rig.build(device, torch.float32, N, cameras, scale, length=length)
    D["length"] = length
    return params, D


def losses(D, m, q, s, o, sh):
    return rig.losses(D, m, q, s, o, sh, camera_kw=dict(far=FAR_CAMERA))


def visible(D, mw, qw, sc, o, exact=False, lidar=True):
    """The step's visible set: the cameras' pinhole_visible bound, or
    (exact) camera_visible, the camera op's own projection and footprint;
    and (lidar) the lidar's lidar_visible."""
    with torch.no_grad():
        seen = torch.zeros(mw.shape[0], dtype=torch.bool, device=mw.device)
        for V, K, W, H in D["groups"]:
            if exact:
                seen |= nurec_ops.camera_visible(mw, qw, sc, o, V, K, W, H, far=FAR_CAMERA)
            else:
                seen |= offload.pinhole_visible(mw, sc, o, V, K, W, H, far=FAR_CAMERA)
        if lidar and D["lidar"] is not None:
            seen |= offload.lidar_visible(mw, sc, o, D["lidar"][0])
    return seen


def drive(D, metres):
    """Moves every sensor `metres` along the street (+x), in place on the
    device (no sync): a world-to-sensor matrix's translation loses R e_x d."""
    if not metres:
        return
    views = [V for V, _, _, _ in D["groups"]] + ([D["lidar"][0]] if D["lidar"] is not None else [])
    for V in views:
        V[..., :3, 3] -= V[..., :3, 0] * metres


def gpu_step(params, D):
    opt = torch.optim.Adam(list(params.values()), lr=1e-3)

    def step():
        drive(D, D["advance"])
        mw, qw, sc, o = rig.collect(params, D)
        loss = losses(D, mw, qw, sc, o, params["sh"])
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()
        D["loss"] = loss.detach()
    return step


def offload_step(params, D, cache=False, exact=False):
    sh = params.pop("sh")
    host = offload.HostRows(sh.detach(), sh.device, lr=1e-3, cache=cache)
    del sh
    D["host"] = host
    opt = torch.optim.Adam(list(params.values()), lr=1e-3)

    def step():
        drive(D, D["advance"])
        mw, qw, sc, o = rig.collect(params, D)
        D["geometry"] = (mw.detach(), qw.detach(), sc.detach(), o.detach())
        seen = visible(D, *D["geometry"], exact=exact)
        index, poison = host.visible_index(seen)
        D["visible"] = seen.sum()
        D["seen_prev"], D["seen"] = D.get("seen"), seen  # the last step's new rows (read at the end)
        m, q, s, oo = offload.subset(index, mw, qw, sc, o, poison)
        rows = host.gather(index)
        loss = losses(D, m, q, s, oo, rows)
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()
        host.step(index, rows.grad)
        D["loss"] = loss.detach()
    return step


def measure(mode, N, scale, cameras, steps, memory_gb, device, advance=0.0, exact=False):
    cuda = device.type == "cuda"
    if cuda and memory_gb:
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, memory_gb * 2 ** 30 / total))
    row = dict(mode=mode, memory_gb=memory_gb or None, advance_m=advance)
    if mode != "gpu":
        row["visible_test"] = "exact" if exact else "bound"
    try:
        t0 = time.time()
        params, D = build(device, N, scale, cameras)
        row.update(N=D["scene"]["means"].shape[0], street_m=round(D["length"]), build_s=round(time.time() - t0, 1))
        D["advance"] = advance
        step = gpu_step(params, D) if mode == "gpu" else offload_step(params, D, cache=mode == "cache", exact=exact)
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        row["step_ms"] = step_ms(step, steps, cuda=cuda)
        row["steps_per_s"] = 1e3 / row["step_ms"]
        row["syncs"] = rig.syncs_of(step, device)
        row["loss_finite"] = bool(torch.isfinite(D["loss"]).item())
        if cuda:
            row["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2 ** 20
        if mode != "gpu":
            host = D["host"]
            row["visible_frac"] = int(D["visible"]) / row["N"]
            # the visibility test alone, on the last step's geometry (its cameras and lidar)
            row["visible_test_ms"] = step_ms(lambda: visible(D, *D["geometry"], exact=exact), 5, cuda=cuda)
            row["camera_test_ms"] = step_ms(lambda: visible(D, *D["geometry"], exact=exact, lidar=False), 5, cuda=cuda)
            row["camera_visible_frac"] = int(visible(D, *D["geometry"], exact=exact, lidar=False).sum()) / row["N"]
            if D.get("seen_prev") is not None:  # of the last step's visible rows, those the step before did not see
                row["entering_frac"] = int((D["seen"] & ~D["seen_prev"]).sum()) / max(int(D["visible"]), 1)
            row["capacity_rows"] = host.capacity
            row["overflowed_steps"] = host.overflowed_steps
            row["pinned_gb"] = 3 * host.param.numel() * host.param.element_size() / 2 ** 30
        row["status"] = "ok"
    except (torch.OutOfMemoryError, RuntimeError) as e:
        # torch's allocator raises OutOfMemoryError; an op's own output
        # allocation failing says so in a RuntimeError of its own
        msg = str(e).split("\n")[0]
        if not isinstance(e, torch.OutOfMemoryError) and "allocation" not in msg and "out of memory" not in msg:
            raise
        row["status"] = "out of memory"
        row["error"] = msg[:160]
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gaussians", type=float, default=2e7)
    ap.add_argument("--mode", choices=["gpu", "offload", "cache"], help="one way, in this process (default: a driver)")
    ap.add_argument("--modes", default="gpu,offload", help="the driver's ways, each in a process of its own")
    ap.add_argument("--advance", type=float, default=0.0, help="metres the rig drives every step")
    ap.add_argument("--no-cap", action="store_true", help="the driver skips the capped runs")
    ap.add_argument("--memory-gb", type=float, default=0.0, help="cap the process's GPU memory (0: the card's)")
    ap.add_argument("--cap-gb", type=float, default=24.0, help="the driver's capped runs (CLM's 24 GB card)")
    ap.add_argument("--cameras", type=int, default=5)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--visible", choices=["bound", "exact"], default="bound",
                    help="the cameras' visibility test: offload.pinhole_visible, or nurec_ops.camera_visible")
    ap.add_argument("--smoke", action="store_true", help="CPU, 20k Gaussians, 1/20 images, 2 steps")
    a = ap.parse_args()
    if a.smoke:
        device = torch.device("cpu")
        for mode in ("gpu", "offload", "cache"):
            print(json.dumps(measure(mode, 20_000, 0.05, a.cameras, 2, 0, device, advance=1.0,
                                     exact=a.visible == "exact")))
        return
    if a.mode:
        warnings.simplefilter("ignore")
        print("ROW " + json.dumps(measure(a.mode, int(a.gaussians), a.scale, a.cameras, a.steps, a.memory_gb,
                                          torch.device("cuda"), a.advance, a.visible == "exact")), flush=True)
        return
    rows = []
    modes = a.modes.split(",")
    runs = [(m, 0) for m in modes] + ([] if a.no_cap else [(m, a.cap_gb) for m in modes])
    for mode, cap in runs:
        cmd = [sys.executable, os.path.abspath(__file__), "--mode", mode, "--gaussians", str(a.gaussians),
               "--memory-gb", str(cap), "--cameras", str(a.cameras), "--scale", str(a.scale), "--steps",
               str(a.steps), "--advance", str(a.advance), "--visible", a.visible]
        out = subprocess.run(cmd, capture_output=True, text=True)
        got = [ln[4:] for ln in out.stdout.splitlines() if ln.startswith("ROW ")]
        r = json.loads(got[-1]) if got else dict(mode=mode, memory_gb=cap, status="failed: " + out.stderr[-300:])
        print(json.dumps(r), flush=True)
        rows.append(r)
    f = lambda r, k, fmt: format(r[k], fmt) if k in r else "-"
    print(table([[r["mode"], r.get("N", "-"), r.get("memory_gb") or "card", r.get("advance_m", 0), r["status"],
                  r.get("visible_test", "-"), f(r, "step_ms", ".1f"), f(r, "steps_per_s", ".2f"),
                  f(r, "visible_frac", ".3f"), f(r, "camera_visible_frac", ".3f"), f(r, "visible_test_ms", ".2f"),
                  f(r, "entering_frac", ".3f"), r.get("syncs", "-"), f(r, "peak_gpu_mb", ".0f"),
                  f(r, "pinned_gb", ".1f")] for r in rows],
                ["mode", "Gaussians", "GPU memory", "m a step", "status", "test", "step ms", "steps/s", "visible",
                 "cameras' visible", "test ms",
                 "entering", "syncs", "peak GPU MB", "pinned host GB"]))


if __name__ == "__main__":
    main()
