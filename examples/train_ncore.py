#!/usr/bin/env python3
"""Train Gaussians on a real NCore v4 clip: cameras of any NCore model,
their rolling shutters, a spinning lidar and the labelled actors.

    python3 examples/train_ncore.py --clip clip.json                      # every camera, GPU if there is one
    python3 examples/train_ncore.py --clip stores/ --cameras camera_front_wide_120fov --steps 2000
    python3 examples/train_ncore.py --clip clip.json --device cpu --image-scale 0.1 --steps 100

The clip is read by nurec_ops.io.ncore.load_clip (needs nvidia-ncore: pip
install nurec_ops[ncore]). The Gaussians start at the lidar points
(``Clip.initial_gaussians``: static points in the world, actor points in
their cuboid's frame with its track id), grey, half opaque, sized by their
neighbours' distance. Each step takes one camera frame (the schedule cycles
through all cameras' frames in a random order) and the lidar sweep nearest
to it in time, collects the Gaussians at each sensor's time (nurec_ops.collect
moves the actors along their labelled tracks), renders the camera
(rasterize_camera, with the camera's model and shutter) and the lidar
(rasterize_lidar, with its row-offset model and sweep poses; a lidar
without one, or any with ``--lidar-rays``, as its stored rays through
rasterize_rays, each ray from the pose at its own time), and steps Adam
on camera L1 + lidar range L1 (valid returns) + lidar alpha L1 (returned or
not). Actor key poses stay as labelled. Everything a step reads is indexed
on the device: no host sync in the loop.

``--strategy default|mcmc`` densifies with gsplat's own strategies, as
examples/train_street.py does (examples/street_densify.py: actors' Gaussians
keep their track ids through every split, clone, prune and relocation).

Prints progress, then camera PSNR and lidar range error before and after.
``--out DIR`` writes metrics.json, losses.csv, loss.png and, per camera, a
ground truth | start | trained panel of its first frame.
"""
import time

_T_START = time.perf_counter()  # before torch's import: the time to the first step counts it when run as a script

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import nurec_ops  # noqa: E402
from nurec_ops.io.ncore import open_clip  # noqa: E402

LR = dict(means=0.003, quats=0.01, log_scales=0.01, opacity_logits=0.05, colors=0.02, background=0.05)
CAMERA_NEAR = 0.2  # metres
LIDAR_WEIGHT = 0.05  # range L1 (metres) is ~20x a colour L1
ALPHA_WEIGHT = 0.1


class NS(dict):
    __getattr__ = dict.__getitem__

    def __setattr__(self, k, v):
        self[k] = v


def neighbour_scales(means, track_ids, k=3, chunk=2048, kdtree=None):
    """log of the mean distance to the k nearest Gaussians of the same
    frame (same track id), per Gaussian: sizes that cover the surface.
    Exact either way: by scipy's KD-tree where scipy is installed (NCore
    depends on it; 50k points in ~0.1 s on our 2 cores, where the
    brute-force distances took 3 s), else by brute force in chunks (on the
    device). ``kdtree``: force one or the other (None: scipy if present)."""
    if kdtree is None:
        kdtree = importlib.util.find_spec("scipy") is not None
    out = torch.empty(means.shape[0], dtype=means.dtype, device=means.device)
    for tid in torch.unique(track_ids).tolist():
        idx = torch.nonzero(track_ids == tid).flatten()
        pts = means[idx]
        kk = min(k + 1, pts.shape[0])
        if kk <= 1:
            d = torch.ones(pts.shape[0], 1)
        elif kdtree:
            from scipy.spatial import cKDTree

            p = pts.detach().cpu().double().numpy()
            d = torch.from_numpy(cKDTree(p).query(p, k=kk)[0][:, 1:])
        else:
            d = torch.cat([torch.cdist(pts[s:s + chunk], pts).topk(kk, largest=False).values[:, 1:]
                           for s in range(0, pts.shape[0], chunk)])
        out[idx] = d.mean(1).clamp(0.02, 2.0).to(means)
    return out.log()


def schedule(clip, args, device):
    """The data D (cameras, the lidar, the schedule, the read-ahead of the
    schedule's frames), from the clip's metadata alone."""
    lidar = clip.lidars[args.lidar] if args.lidar else next(
        (l for l in clip.lidars.values() if l.row_elevations is not None), next(iter(clip.lidars.values()), None))
    D = NS(tracks=clip.tracks, cams=list(clip.cameras.values()), lidar=lidar, source=clip.frames)
    # a lidar without a row-offset model trains on its rays (padded to its longest sweep: one configuration)
    D.lidar_rays = lidar is not None and (args.lidar_rays or lidar.row_elevations is None)
    D.ray_count = clip.frames.ray_count(lidar.name) if D.lidar_rays else 0
    lidar_key = (lambda s: ("lidar_rays", lidar.name, s, D.ray_count)) if D.lidar_rays else (  # noqa: E731
        lambda s: ("lidar", lidar.name, s))
    D.cam_mid_us = [cam.timestamps_us.sum(1) // 2 for cam in D.cams]  # when to collect for a frame: its middle
    # the schedule (host): which camera and frame each step, the sweep nearest to it
    g = torch.Generator().manual_seed(args.seed)
    views = [(c, f) for c in range(len(D.cams)) for f in range(D.cams[c].timestamps_us.shape[0])]
    order = []
    while len(order) < args.steps:
        order += [views[k] for k in torch.randperm(len(views), generator=g).tolist()]
    D.schedule, requests = [], []
    if lidar is not None:
        D.lidar_mid_us = lidar.timestamps_us.sum(1) // 2
        sweep_mid = D.lidar_mid_us.cpu()
    for c, f in order[:args.steps]:
        s = int((sweep_mid - int(D.cam_mid_us[c][f].cpu())).abs().argmin()) if lidar is not None else 0
        D.schedule.append((c, torch.tensor([f], device=device), torch.tensor([s], device=device)))
        requests.append((("camera", D.cams[c].name, f),) + ((lidar_key(s),) if lidar is not None else ()))
    # the frames each step reads: decoded by a thread pool args.read_ahead steps ahead, uploaded without a sync;
    # started once the Gaussians are built (decoding threads beside build() slowed it 2-4x: they share the GIL)
    D.frames = clip.frames.read_ahead(requests, device, depth=args.read_ahead, workers=args.read_workers,
                                      cache_bytes=int(args.frame_cache_gb * 2 ** 30), start=False)
    return D


def device_sync(device):
    """A function that waits for ``device``'s work (nothing to wait for on the CPU)."""
    return torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def build(clip, args, D, device, dtype, parts=None):
    """The trainable Gaussians P at the lidar points (D gets their track
    ids and the lidar feature). ``parts`` (a dict) gets the seconds of its
    steps: reading the points, classifying them, the neighbour scales."""
    sync = device_sync(device)
    t = time.perf_counter()

    def lap(name):
        nonlocal t
        sync()
        if parts is not None:
            parts[name] = time.perf_counter() - t
        t = time.perf_counter()

    clip.frames.read_points(args.point_sweeps)
    lap("read_points")
    init = clip.initial_gaussians(max_points=args.max_points, seed=args.seed)
    lap("classify")
    log_scales = neighbour_scales(init.means, init.track_ids)
    lap("scales")
    N = init.means.shape[0]
    P = NS(means=init.means.clone(), quats=torch.zeros(N, 4, device=device, dtype=dtype),
           log_scales=log_scales[:, None].repeat(1, 3),
           opacity_logits=torch.zeros(N, device=device, dtype=dtype),
           colors=torch.full((N, 3), 0.5, device=device, dtype=dtype),
           background=torch.full((1, 3), 0.5, device=device, dtype=dtype))
    P.quats[:, 0] = 1
    for v in P.values():
        v.requires_grad_(True)
    D.track_ids = init.track_ids
    D.intensity = torch.ones(N, 1, device=device, dtype=dtype)  # the lidar's feature (resized when densifying)
    return P


def gaussians_at(P, D, t):
    tr = D.tracks
    return nurec_ops.collect(P.means, P.quats, P.log_scales, P.opacity_logits, D.track_ids, tr.key_poses,
                             tr.key_times, tr.track_ranges, t)


def render_camera(P, D, c, i, meta=False):
    """The camera's render [1, H, W, 3] (and its SPEC 8 meta with meta=True,
    for densification)."""
    cam = D.cams[c]
    means, quats, scales, opac = gaussians_at(P, D, D.cam_mid_us[c].index_select(0, i))
    out = nurec_ops.rasterize_camera(means, quats, scales, opac, P.colors.clamp(0, 1), cam.viewmats.index_select(0, i),
                                     cam.Ks.expand(1, 3, 3), cam.width, cam.height, near=CAMERA_NEAR,
                                     backgrounds=P.background, viewmats_end=cam.viewmats_end.index_select(0, i),
                                     shutter=cam.shutter, return_meta=meta, means2d_grad=meta,
                                     **cam.model_kwargs())
    return (out[0], out[3]) if meta else out[0]


def render_lidar(P, D, j, rays=None):
    """Sweep j's expected range and alpha: on the model's grid [1, R, W],
    or (``rays``: the frame's directions [K, 3] and times [K]) per ray
    [1, K], NaN on the padding rays."""
    lid = D.lidar
    means, quats, scales, opac = gaussians_at(P, D, D.lidar_mid_us.index_select(0, j))
    if rays is not None:
        d, t = rays
        _, rng, alpha = nurec_ops.rasterize_rays(means, quats, scales, opac, D.intensity,
                                                 lid.viewmats.index_select(0, j), torch.zeros_like(d), d,
                                                 ray_times=t, viewmats_end=lid.viewmats_end.index_select(0, j))
        return rng[..., 0], alpha[..., 0]
    _, rng, alpha = nurec_ops.rasterize_lidar(means, quats, scales, opac, D.intensity, lid.viewmats.index_select(0, j),
                                              *lid.model, viewmats_end=lid.viewmats_end.index_select(0, j),
                                              column_times=lid.column_times)
    return rng[..., 0], alpha[..., 0]


def lidar_shape(D):
    """What the lidar trains on, in words: its grid, or its rays."""
    lid = D.lidar
    if D.lidar_rays:
        return f"{D.ray_count} rays a sweep (rasterize_rays)"
    return f"{lid.row_elevations.shape[0]}x{lid.column_azimuths.shape[0]}"


def lidar_losses(rng, alpha, ranges, valid, usable=None):
    """Range L1 over the valid returns and alpha L1 over the usable rays
    (all, or ``usable`` [1, K] of a ray bundle whose padding renders NaN),
    as means without boolean indexing (no host sync)."""
    valid = valid.to(rng.dtype)
    if usable is None:
        return ((rng - ranges).abs() * valid).sum() / valid.sum().clamp_min(1), (alpha - valid).abs().mean()
    u = usable.to(rng.dtype)
    rng, alpha, ranges = rng.nan_to_num(), alpha.nan_to_num(), ranges.nan_to_num()  # the padding: 0, no gradient
    return (((rng - ranges).abs() * valid).sum() / valid.sum().clamp_min(1),
            ((alpha - valid).abs() * u).sum() / u.sum().clamp_min(1))


def train_step(P, D, opt, c, i, j, frames, dens=None, k=0):
    """One step on ``frames`` (the read-ahead's: the camera image [H, W, 3],
    the lidar sweep's (ranges, valid, intensity) [R, W]); with ``dens`` (a street_densify.Densifier) the camera's meta
    feeds gsplat's strategy around the backward (it may change the number of
    Gaussians) and ``opt`` holds only the background."""
    if dens is not None:
        render, meta = render_camera(P, D, c, i, meta=True)
        info = dens.info(meta, D.cams[c].width, D.cams[c].height)
    else:
        render = render_camera(P, D, c, i)
    cam_loss = (render - frames[0][None]).abs().mean()
    loss, lidar_loss = cam_loss, torch.zeros_like(cam_loss)
    if D.lidar is not None and D.lidar_rays:
        d, t, ranges, valid, _ = frames[1]
        rng, alpha = render_lidar(P, D, j, (d, t[None]))
        lidar_loss, alpha_loss = lidar_losses(rng, alpha, ranges[None], valid[None], ~d[None, :, 0].isnan())
        loss = loss + LIDAR_WEIGHT * lidar_loss + ALPHA_WEIGHT * alpha_loss
    elif D.lidar is not None:
        rng, alpha = render_lidar(P, D, j)
        lidar_loss, alpha_loss = lidar_losses(rng, alpha, frames[1][0][None], frames[1][1][None])
        loss = loss + LIDAR_WEIGHT * lidar_loss + ALPHA_WEIGHT * alpha_loss
    opt.zero_grad(set_to_none=True)
    if dens is not None:
        loss = loss + dens.regularization(P)
        dens.pre_backward(k, info)
    loss.backward()
    opt.step()
    if dens is not None:
        dens.step(k, info, P, D)
    return torch.stack([loss, cam_loss, lidar_loss]).detach()


def _spread(n, k):
    """k indices spread evenly over range(n) (all of them for k <= 0)."""
    if k <= 0 or k >= n:
        return list(range(n))
    return sorted({round(x * (n - 1) / max(k - 1, 1)) for x in range(k)})


@torch.no_grad()
def evaluate(P, D, frames=0):
    """Mean camera PSNR (dB) over ``frames`` frames per camera (0: every
    frame; the first always), mean lidar range error (m) over as many
    sweeps on the returns the render also hits (alpha > 0.5, range /
    alpha), and each camera's first frame (ground truth, render). The
    frames are decoded here, synchronously."""
    psnrs, firsts = [], []
    for c, cam in enumerate(D.cams):
        for f in _spread(cam.timestamps_us.shape[0], frames):
            i = torch.tensor([f], device=cam.viewmats.device)
            img = render_camera(P, D, c, i)[0]
            gt = D.source.image(cam.name, f).to(img.device, img.dtype).div_(255)
            mse = (img - gt).square().mean().item()
            psnrs.append(-10 * math.log10(max(mse, 1e-12)))
            if f == 0:
                firsts.append((gt.cpu(), img.cpu()))
    err = float("nan")
    if D.lidar is not None:
        errs = []
        for s in _spread(D.lidar.timestamps_us.shape[0], frames):
            j = torch.tensor([s], device=D.lidar.viewmats.device)
            if D.lidar_rays:
                d, t, ranges, valid, _ = (x.to(j.device) for x in D.source.lidar_rays(D.lidar.name, s,
                                                                                       D.ray_count))
                rng, alpha = render_lidar(P, D, j, (d.to(P.means.dtype), t[None].to(P.means.dtype)))
                ranges, rng, alpha = ranges.nan_to_num(), rng.nan_to_num(), alpha.nan_to_num()
            else:
                rng, alpha = render_lidar(P, D, j)
                ranges, valid, _ = (t.to(rng.device) for t in D.source.lidar_grid(D.lidar.name, s))
            hit = valid & (alpha[0] > 0.5)
            if hit.any():
                errs.append(((rng[0] / alpha[0].clamp_min(1e-6) - ranges.to(rng.dtype)).abs()[hit]).mean().item())
        err = sum(errs) / len(errs) if errs else float("nan")
    return sum(psnrs) / len(psnrs), err, firsts


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clip", required=True, help="NCore v4 clip: sequence meta JSON, a store, or a folder of stores")
    p.add_argument("--cameras", nargs="+", default=None, help="camera names (default: all)")
    p.add_argument("--lidar", default=None, help="the lidar to train on (default: the first with a row-offset model, "
                                                 "else the first)")
    p.add_argument("--lidar-rays", action="store_true",
                   help="train the lidar as its stored rays (rasterize_rays) even where it has a row-offset model")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    p.add_argument("--image-scale", type=float, default=1.0, help="resize images and calibrations (e.g. 0.25)")
    p.add_argument("--max-points", type=int, default=50_000, help="at most this many initial Gaussians")
    p.add_argument("--time-range-us", type=int, nargs=2, default=None, metavar=("START", "STOP"),
                   help="only the frames ending in [START, STOP)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="folder for metrics.json, losses.csv and camera panels")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--strategy", default="none", choices=["none", "default", "mcmc"],
                   help="densify with gsplat's DefaultStrategy or MCMCStrategy (needs gsplat)")
    p.add_argument("--cap-max", type=int, default=None, help="MCMC: most Gaussians (default 1.5x the start)")
    p.add_argument("--time-only", type=int, default=None, metavar="N",
                   help="a measurement run: N steps, no evaluation, no figures (metrics.json with --out)")
    p.add_argument("--eval-frames", type=int, default=8,
                   help="evaluate on this many frames per camera and sweeps, spread evenly (0: all; a 30 s clip's "
                        "1,800 frames and sweeps took 206 s on the CPU before training)")
    p.add_argument("--point-sweeps", type=int, default=8,
                   help="lidar sweeps (spread over the clip) whose points start the Gaussians (0: all)")
    p.add_argument("--read-ahead", type=int, default=8, help="steps whose frames are decoded ahead")
    p.add_argument("--read-workers", type=int, default=None, help="decoding threads (default min(8, cores))")
    p.add_argument("--check-syncs", action="store_true",
                   help="CUDA: run the steps after the first with torch.cuda.set_sync_debug_mode('error') "
                        "(a host sync in a step raises; progress lines, which read a loss, are then off)")
    p.add_argument("--frame-cache-gb", type=float, default=2.0, help="decoded frames kept on the device (GiB)")
    args = p.parse_args(argv)
    if args.time_only is not None:
        args.steps = args.time_only
    if args.point_sweeps == 0:
        args.point_sweeps = None
    return args


def import_optimizer_modules():
    """torch.optim's first optimizer imports torch._dynamo (its methods'
    decorators load it lazily): 0.9 s on our 2-core machine, 4.5-4.8 s on
    the H200 machine's file system, a cost of torch's optimizers for any
    trainer. Imported here, it is timed as an import of its own
    ("optimizer_import") instead of hiding in the set-up. (A thread that
    imported it while the clip's metadata was read took the metadata from
    1.66 to 7.22 s on the H200: the two share the interpreter.)"""
    import importlib

    importlib.import_module("torch._dynamo")


def main(argv=None, t_start=None):
    """Trains; returns the metrics. ``t_start``: the process's start
    (perf_counter) when run as a script, for the time to the first step."""
    t_main = time.perf_counter()
    args = parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dtype = torch.float32
    torch.manual_seed(args.seed)
    log = (lambda *a: None) if args.quiet else (lambda *a: print(*a, flush=True))  # noqa: E731
    cuda = device.type == "cuda"
    sync = device_sync(device)
    tt = {"imports": t_main - t_start if t_start is not None else 0.0}  # the time to the first step, by part
    t = time.perf_counter()
    if cuda:
        torch.zeros(1, device=device).sum().item()  # the CUDA context
    tt["cuda_init"] = time.perf_counter() - t
    t = time.perf_counter()
    import_optimizer_modules()
    tt["optimizer_import"] = time.perf_counter() - t
    t = time.perf_counter()
    clip = open_clip(args.clip, device=device, dtype=dtype, cameras=args.cameras, image_scale=args.image_scale,
                     time_range_us=tuple(args.time_range_us) if args.time_range_us else None, point_sweeps=0)
    if not clip.cameras:
        raise SystemExit("train_ncore: the clip has no cameras to train on")
    D = schedule(clip, args, device)  # the read-ahead of the steps' frames, not yet started
    tt["metadata"] = time.perf_counter() - t
    t = time.perf_counter()
    init_parts = {}
    P = build(clip, args, D, device, dtype, init_parts)
    N = P.means.shape[0]
    dens = None
    if args.strategy != "none":
        import street_densify

        V = torch.cat([cam.viewmats for cam in D.cams])
        dens = street_densify.Densifier(args.strategy, P, D, LR, args.steps, cap_max=args.cap_max,
                                        width=D.cams[0].width, height=D.cams[0].height, camera_viewmats=V)
        opt = torch.optim.Adam([{"params": [P.background], "lr": LR["background"]}], eps=1e-15)
    else:
        opt = torch.optim.Adam([{"params": [P[k]], "lr": lr} for k, lr in LR.items()], eps=1e-15)
    sync()
    tt["initial_gaussians"] = time.perf_counter() - t
    init_parts["rest"] = tt["initial_gaussians"] - sum(init_parts.values())
    D.frames.start()  # the first steps' frames decode from here on (during the evaluation, when there is one)
    log(f"train_ncore: {clip.sequence_id}: {len(D.cams)} cameras "
        + ", ".join(f"{c.name} ({c.camera_model}, {c.width}x{c.height}, {c.shutter}, {c.timestamps_us.shape[0]} frames)"
                    for c in D.cams)
        + (f"; lidar {D.lidar.name} {lidar_shape(D)}, "
           f"{D.lidar.timestamps_us.shape[0]} sweeps" if D.lidar is not None else "; no lidar")
        + f"; {N} Gaussians ({int((D.track_ids >= 0).sum())} on {D.tracks.track_ranges.shape[0]} tracks); "
        f"{args.steps} steps on {device}")
    t = time.perf_counter()
    start = evaluate(P, D, args.eval_frames) if args.time_only is None else None
    eval_start_s = time.perf_counter() - t  # a report, not what training needs: outside the time to the first step
    losses = torch.zeros(args.steps, 3, device=device, dtype=dtype)
    every = max(1, args.steps // 10)
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(args.steps)] if cuda else []
    host_ms = []
    t1 = None
    checked = 0
    for k, (c, i, j) in enumerate(D.schedule):
        if k == 1 and cuda and args.check_syncs:  # the first step warms up (allocations, capacities): the rest must not sync
            torch.cuda.set_sync_debug_mode("error")
        t = time.perf_counter()
        frames = D.frames.get(k)  # waits only if decoding fell behind; the upload does not sync
        if k == 0:
            tt["first_frames"] = time.perf_counter() - t
            t = time.perf_counter()
        if cuda:
            events[k][0].record()
        losses[k] = train_step(P, D, opt, c, i, j, frames, dens, k)
        if cuda:
            events[k][1].record()
        if k == 0:  # once, before the steady steps: the first step's own time (CUDA warm-up in it)
            sync()
            tt["first_step"] = time.perf_counter() - t
            t1 = time.perf_counter()
        else:
            host_ms.append((time.perf_counter() - t) * 1e3)
        checked += int(torch.cuda.get_sync_debug_mode() == 2) if cuda else 0
        if args.check_syncs and cuda:
            continue
        if not args.quiet and ((k + 1) % every == 0 or k + 1 == args.steps):  # reading a loss syncs: rarely
            log(f"  step {k + 1:5d}/{args.steps}  loss {float(losses[k, 0]):.4f}  "
                f"camera L1 {float(losses[k, 1]):.4f}  lidar L1 {float(losses[k, 2]):.3f} m")
    if cuda:
        torch.cuda.set_sync_debug_mode(0)
    sync()
    steady = args.steps - 1
    step_ms = (time.perf_counter() - t1) * 1e3 / steady if t1 is not None and steady > 0 else float("nan")
    step_times = [a.elapsed_time(b) for a, b in events[1:]] if cuda else host_ms
    step_ms_median = statistics.median(step_times) if step_times else float("nan")
    tt.setdefault("first_frames", 0.0)
    tt.setdefault("first_step", 0.0)
    tt["total"] = sum(tt.values())
    read_wait_s = D.frames.wait_s - (D.frames.waits[0] if D.frames.waits else 0.0)
    decoded = D.frames.decoded
    D.frames.close()
    log("  time to the first step " + ", ".join(f"{k} {v:.2f}" for k, v in tt.items())
        + f" s (and {eval_start_s:.2f} s of evaluation before it)")
    log(f"  steady step {step_ms_median:.2f} ms median ({'CUDA events' if cuda else 'host'}), {step_ms:.2f} ms mean "
        f"wall; waited {read_wait_s:.2f} s for frames after the first; {decoded} frames decoded")
    metrics = dict(steps=args.steps, gaussians=N, gaussians_final=int(P.means.shape[0]), strategy=args.strategy,
                   device=str(device), time_to_first_step_s=tt, initial_gaussians_s=init_parts, eval_start_s=eval_start_s, step_ms=step_ms,
                   step_ms_median=step_ms_median,
                   step_ms_source="cuda_events" if cuda else "host", sync_checked_steps=checked, read_wait_s=read_wait_s, frames_decoded=decoded,
                   cameras={c.name: [c.width, c.height, int(c.timestamps_us.shape[0])] for c in D.cams},
                   lidar=None if D.lidar is None else (
                       [D.ray_count, int(D.lidar.timestamps_us.shape[0])] if D.lidar_rays else
                       [D.lidar.row_elevations.shape[0], D.lidar.column_azimuths.shape[0],
                        int(D.lidar.timestamps_us.shape[0])]),
                   lidar_rays=bool(D.lidar is not None and D.lidar_rays))
    losses = losses.cpu().double()
    metrics["losses"] = losses.tolist()
    if start is not None:
        final = evaluate(P, D, args.eval_frames)
        log(f"  camera PSNR        {start[0]:7.2f} -> {final[0]:.2f} dB")
        if D.lidar is not None:
            log(f"  lidar range error  {start[1]:7.3f} -> {final[1]:.3f} m")
        if dens is not None:
            log(f"  Gaussians          {N:7d} -> {int(P.means.shape[0])}  ({args.strategy} strategy)")
        metrics.update(psnr_start=start[0], psnr_final=final[0], lidar_range_error_start=start[1],
                       lidar_range_error_final=final[1])
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "metrics.json"), "w") as f:
            json.dump(metrics, f, indent=1)
        with open(os.path.join(args.out, "losses.csv"), "w") as f:
            f.write("step,loss,camera_l1,lidar_range_l1\n")
            f.writelines(f"{k},{a:.8g},{b:.8g},{c:.8g}\n" for k, (a, b, c) in enumerate(losses.tolist()))
        if start is not None:
            import figures

            figures.plot_losses(os.path.join(args.out, "loss.png"),
                                [("total", losses[:, 0].tolist(), (0.0, 0.0, 0.0)),
                                 ("camera", losses[:, 1].tolist(), (0.1, 0.35, 0.85))]
                                + ([("lidar", losses[:, 2].tolist(), (0.85, 0.3, 0.1))] if D.lidar is not None
                                   else []))
            for cam, (gt, a), (_, b) in zip(D.cams, start[2], final[2]):
                figures.save_panels(os.path.join(args.out, f"camera_{cam.name}.png"),
                                    [("ground truth", gt), ("start", a), ("trained", b)],
                                    scale=max(1, 480 // cam.width))
        log(f"  wrote {args.out}/: metrics.json, losses.csv" + (", loss.png, camera_*.png" if start is not None else ""))
    return metrics


if __name__ == "__main__":
    main(t_start=_T_START)
