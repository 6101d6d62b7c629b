#!/usr/bin/env python3
"""An "existing training loop" for a dynamic street, written against the
pure-PyTorch reference ops of nurec_ops, and the drop-in swap that makes it
fast (SPEC section 5).

The ground truth is a synthetic street (examples/street_scene.py): ground,
facades and cars on keyframed tracks, seen by an ego camera and a spinning
lidar (the real 128 x 3600 calibration, reduced on the CPU) at many frame
times. Training starts from a perturbed scene (noisy Gaussians, offset actor
key poses) and optimizes the Gaussians and the actor key poses with Adam on
camera L1 + lidar range L1. Each step: collect the Gaussians at the frame
time, render the camera and the lidar, backward, optimizer step.

    python3 examples/train_street.py                      # reference ops, CPU or GPU
    python3 examples/train_street.py --fused              # the same loop, fused ops swapped in
    python3 examples/train_street.py --fused raster       # reference collection + fused rasterizers
    python3 examples/train_street.py --fused --graph      # + the whole step in one CUDA graph
    python3 examples/train_street.py --fused --profile    # + a torch.profiler Chrome trace with NVTX ranges
    python3 examples/train_street.py --fused --diagnose   # + nurec_ops.diagnose's report of the last steps
    python3 examples/train_street.py --fused --strategy default --sh-degree 3   # densify (gsplat's strategy), SH ramp
    python3 examples/train_street.py --fused --strategy mcmc --cap-max 60000    # MCMC, up to a cap
    python3 examples/train_street.py --fused --camera-model ftheta --rolling-shutter   # a real FTheta camera,
                                          # rolling-shutter camera and lidar (the ego moves during a readout)
    torchrun --nproc_per_node=2 examples/train_street.py --ddp   # data parallel (gloo on CPU, NCCL on GPU)
    python3 examples/train_street.py --emulate-ranks 2           # the same two ranks' steps in one process

``--strategy default|mcmc`` densifies as real trainers do, with gsplat's own
``DefaultStrategy`` or ``MCMCStrategy`` reading nurec_ops' SPEC 8 meta
(examples/street_densify.py; actors' Gaussians keep their track ids through
every split, clone, prune and relocation). ``--sh-degree K`` trains SH
colours, the degree ramped from 0 to K (one step up every ``--sh-every``).

The loop calls ``collect``, ``rasterize_camera`` and ``rasterize_lidar`` as
globals of this module; ``--fused`` is one line, ``nurec_ops.swap(<this
module>)``, which replaces them by the fused ops (same signatures) and puts
the references back when the ``with`` block ends.

Prints the median step time, host syncs per step (counted under
``torch.cuda.set_sync_debug_mode``; 0 on the CPU by nature), camera PSNR,
lidar range error and actor pose error before and after training; writes to
``--out``: camera_*.png and lidar_*.png (labelled panels, Pillow: ground
truth | start | trained | error), loss.png (matplotlib), losses.csv,
metrics.json, params*.pt, and with
``--profile`` trace.json. ``--diagnose`` runs the last steps under
``nurec_ops.diagnose`` instead: its report (syncs by source line, kernels per
step, GPU busy fraction, idle gaps, top kernels) is printed, its trace written
to diagnose_trace.json and its figures kept in metrics.json.
"""
import argparse
import contextlib
import inspect
import json
import math
import os
import statistics
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import nurec_ops  # noqa: E402
from nurec_ops.nvtx import nvtx_range  # noqa: E402

import figures  # noqa: E402
import street_scene  # noqa: E402

# ---- the ops the existing loop was written against: nurec_ops.reference
from nurec_ops.reference import collect, rasterize_camera  # noqa: E402

try:  # the lidar rasterizer (SPEC section 4) may be missing from older builds
    from nurec_ops.reference import rasterize_lidar  # noqa: E402,F401

    HAVE_LIDAR = hasattr(nurec_ops, "rasterize_lidar")
except ImportError:
    HAVE_LIDAR = False

CAMERA_NEAR = 2.0  # metres: no Gaussian nearer than the bonnet
LIDAR_WEIGHT = 0.05  # range L1 (metres) is ~20x the camera L1 (colour) in size
# Adam learning rates; the actor key poses are two parameters (translations
# [P,3] and rotations [P,4]) so that the rotations get their own, smaller rate
LR = dict(means=0.01, quats=0.01, log_scales=0.01, opacity_logits=0.05, colors=0.01, key_translations=0.02,
          key_rotations=0.001)
PARAMS = tuple(LR)


class NS(dict):
    __getattr__ = dict.__getitem__

    def __setattr__(self, k, v):
        self[k] = v


def _accepts(fn, name):
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


# --------------------------------------------------------------- the step

def sensor_kwargs(D, i):
    """The camera's and the lidar's SPEC 6 / 7 arguments for frame(s) i
    (--camera-model, --rolling-shutter): a real calibration's model and the
    end-of-readout poses."""
    cam, lid = dict(D.get("cam_model_kw") or {}), {}
    if D.get("cam_viewmats_end") is not None:
        cam.update(viewmats_end=D.cam_viewmats_end.index_select(0, i), shutter="top_to_bottom")
    if D.get("lidar_viewmats_end") is not None:
        lid.update(viewmats_end=D.lidar_viewmats_end.index_select(0, i))
    return cam, lid


def render_frame(P, D, i, cam_kw=None, lidar_kw=None):
    """Collects the Gaussians at frame ``i`` ([1] int64 device tensor) and
    renders its camera image and lidar sweep with whatever ``collect``,
    ``rasterize_camera`` and ``rasterize_lidar`` this module holds now.
    Returns (render [1,H,W,3], range [1,R,W,1] or None, lidar alpha or None,
    the camera's SPEC 8 meta when ``cam_kw`` asks for it, else None)."""
    t = D.times.index_select(0, i)
    with nvtx_range("train_street.collect"):
        key_poses = torch.cat([P.key_translations, P.key_rotations], -1)
        means_w, quats_w, scales, opacities = collect(P.means, P.quats, P.log_scales, P.opacity_logits, D.track_ids,
                                                      key_poses, D.key_times, D.track_ranges, t)
    with nvtx_range("train_street.camera"):
        sensor_cam, sensor_lidar = sensor_kwargs(D, i)
        kw = dict(sensor_cam, **(cam_kw or {}))
        if D.get("sh_degree") is not None:  # SH colours (--sh-degree), at the degree the ramp has reached
            kw["sh_degree"] = D.sh_degree
        out = rasterize_camera(means_w, quats_w, scales, opacities, P.colors, D.cam_viewmats.index_select(0, i),
                               D.Ks.index_select(0, i), D.width, D.height, near=CAMERA_NEAR,
                               backgrounds=D.backgrounds, **kw)
        render, meta = out[0], (out[3] if len(out) > 3 else None)
    rng = alpha = None
    if D.lidar:
        with nvtx_range("train_street.lidar"):
            _, rng, alpha = rasterize_lidar(means_w, quats_w, scales, opacities, D.intensity,
                                            D.lidar_viewmats.index_select(0, i), D.row_elevations,
                                            D.column_azimuths, D.row_azimuth_offsets,
                                            **dict(sensor_lidar, **(lidar_kw or {})))
    return render, rng, alpha, meta


def train_step(P, D, opt, S, cfg):
    """One training step, the same code eager and under CUDA graph capture:
    everything it reads that changes from step to step (which frame, the step
    counter) is on the device, so that there is no host sync and a replay of
    the captured step trains on the next frame."""
    with nvtx_range("train_street.step"):
        opt.zero_grad(set_to_none=True)
        rows = []
        for schedule in S.schedules:  # one per rank this process plays (several with --emulate-ranks)
            i = schedule.index_select(0, S.step)
            render, rng, _, _ = render_frame(P, D, i, cfg.cam_kw, cfg.lidar_kw)
            cam_loss = (render - D.images.index_select(0, i)).abs().mean()
            if D.lidar:
                lidar_loss = (rng - D.ranges.index_select(0, i)).abs().mean()
                loss = cam_loss + LIDAR_WEIGHT * lidar_loss
            else:
                lidar_loss = torch.zeros_like(cam_loss)
                loss = cam_loss
            with nvtx_range("train_street.backward"):
                loss.backward()  # several ranks' gradients add up in .grad, as the all-reduce's sum does
            rows.append(torch.stack([loss, cam_loss, lidar_loss]).detach())
        if len(S.schedules) > 1:
            mean_grads([P[name] for name in PARAMS], len(S.schedules))
        if cfg.world > 1:
            with nvtx_range("train_street.all_reduce"):
                all_reduce_grads([P[name] for name in PARAMS], cfg.world)
        with nvtx_range("train_street.optimizer"):
            opt.step()
        row = rows[0] if len(rows) == 1 else torch.stack(rows).mean(0)
        S.losses.index_copy_(0, S.step, row[None])
        S.step.add_(1)


def train_step_densify(P, D, opt, S, cfg, dens, k):
    """The step with densification (``--strategy``; eager, host step
    counter ``k`` for the strategy): the camera's meta feeds gsplat's
    strategy before and after the backward; the Gaussians' optimizers are
    the strategy's (it resizes their state), ``opt`` holds the key poses."""
    with nvtx_range("train_street.step"):
        i = S.schedules[0].index_select(0, S.step)
        cam_kw = dict(cfg.cam_kw, return_meta=True, means2d_grad=True, absgrad=dens.absgrad)
        render, rng, _, meta = render_frame(P, D, i, cam_kw, cfg.lidar_kw)
        info = dens.info(meta)
        cam_loss = (render - D.images.index_select(0, i)).abs().mean()
        lidar_loss = (rng - D.ranges.index_select(0, i)).abs().mean() if D.lidar else torch.zeros_like(cam_loss)
        loss = cam_loss + LIDAR_WEIGHT * lidar_loss + dens.regularization(P)
        opt.zero_grad(set_to_none=True)
        dens.pre_backward(k, info)
        with nvtx_range("train_street.backward"):
            loss.backward()
        if cfg.world > 1:
            with nvtx_range("train_street.all_reduce"):
                all_reduce_grads([P[name] for name in PARAMS], cfg.world)
                info = gather_info(info, cfg.world)  # every rank then makes the same densification decisions
        with nvtx_range("train_street.optimizer"):
            opt.step()
            dens.step(k, info, P, D)
        S.losses.index_copy_(0, S.step, torch.stack([loss, cam_loss, lidar_loss]).detach()[None])
        S.step.add_(1)


def all_reduce_grads(params, world):
    """The mean of the parameters' gradients over the ranks, in one
    collective on one flat buffer. Not overlapped with the backward: every
    Gaussian's gradient but its colours' comes out of collect's backward,
    the backward's last op (~50 us), so a bucket started earlier (the
    colours', once the camera's backward has written them) would overlap
    with nothing but that op; one collective after the backward costs one
    launch and no bucketing."""
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    torch.distributed.all_reduce(flat)
    flat.div_(world)
    at = 0
    for p, g in zip(params, grads):
        n = g.numel()
        p.grad = flat[at:at + n].view_as(g)
        at += n


def mean_grads(params, ranks):
    """--emulate-ranks: the summed gradients of ``ranks`` frames divided
    as all_reduce_grads divides the ranks' sum (a missing one is zero there
    too), so that one process reproduces --ddp's step."""
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        p.grad.div_(ranks)


def gather_info(info, world):
    """The ranks' densification inputs (SPEC 8's means2d gradient, its
    absgrad, radii) gathered into one info with every rank's cameras, the
    same on every rank: gsplat's strategy, run on it with the same seed on
    each rank, decides the same splits, clones, prunes and relocations."""
    m = info["means2d"]

    def gather(t):
        parts = [torch.empty_like(t) for _ in range(world)]
        torch.distributed.all_gather(parts, t.contiguous())
        return torch.cat(parts)
    out = dict(info)
    leaf = torch.zeros((world * m.shape[0],) + tuple(m.shape[1:]), dtype=m.dtype, device=m.device,
                       requires_grad=True)
    leaf.grad = gather(m.grad if m.grad is not None else torch.zeros_like(m))
    if getattr(m, "absgrad", None) is not None:
        leaf.absgrad = gather(m.absgrad)
    out.update(means2d=leaf, radii=gather(info["radii"]), n_cameras=world * m.shape[0])
    return out


def rank_schedule(rank, world, F, steps, seed):
    """Rank ``rank`` of ``world``'s frames, one per step: its share of the F
    frames (every world-th), in a fresh random order per pass."""
    mine = list(range(rank, F, world))
    g = torch.Generator().manual_seed(seed + 1000 + rank)
    order = []
    while len(order) < steps:
        order += [mine[k] for k in torch.randperm(len(mine), generator=g).tolist()]
    return order[:steps]


def to_sh(colors, degree):
    """RGB colours [N, 3] as SH coefficients [N, (degree + 1)^2, 3] that
    render the same (degree 0: SH0 * C0 + 0.5 = colour), a fresh leaf."""
    C0 = 0.28209479177387814
    sh = colors.new_zeros((colors.shape[0], (degree + 1) ** 2, 3))
    sh[:, 0] = (colors.detach() - 0.5) / C0
    return sh.requires_grad_(True)


# ----------------------------------------------------------- data, metrics

def build(args, size, device, dtype):
    """Ground truth (rendered by the fused ops: fast, and the same data
    whichever ops the loop uses) and the perturbed starting parameters."""
    gt = street_scene.make_street(size, seed=args.seed, device=device, dtype=dtype,
                                  lidar_calibration=args.lidar_calibration)
    D = NS(gt)
    D.lidar = HAVE_LIDAR and not args.no_lidar
    sensors_of(args, D, device, dtype)
    N = gt["means"].shape[0]
    D.intensity = torch.ones(N, 1, device=device, dtype=dtype)
    F = gt["times"].shape[0]
    cam_exact = {"binning": "exact"} if device.type == "cuda" else {}
    images, ranges, alphas = [], [], []
    with torch.no_grad():
        for f in range(F):
            t = gt["times"][f:f + 1]
            mw, qw, s, o = nurec_ops.collect(gt["means"], gt["quats"], gt["log_scales"], gt["opacity_logits"],
                                             gt["track_ids"], gt["key_poses"], gt["key_times"], gt["track_ranges"], t)
            fi = torch.tensor([f], device=device)
            cam_kw, lid_kw = sensor_kwargs(D, fi)
            img, _, _ = nurec_ops.rasterize_camera(mw, qw, s, o, gt["colors"], gt["cam_viewmats"][f:f + 1],
                                                   D.Ks[f:f + 1], D.width, D.height, near=CAMERA_NEAR,
                                                   backgrounds=gt["backgrounds"], **cam_exact, **cam_kw)
            images.append(img[0])
            if D.lidar:
                fl = nurec_ops.rasterize_lidar
                kw = {"binning": "exact"} if device.type == "cuda" and _accepts(fl, "binning") else {}
                _, r, a = fl(mw, qw, s, o, D.intensity, gt["lidar_viewmats"][f:f + 1], gt["row_elevations"],
                             gt["column_azimuths"], gt["row_azimuth_offsets"], **kw, **lid_kw)
                ranges.append(r[0])
                alphas.append(a[0])
    D.images = torch.stack(images)
    if D.lidar:
        D.ranges, D.lidar_alpha = torch.stack(ranges), torch.stack(alphas)
    P = NS(street_scene.perturb(gt, seed=args.seed + 1))
    kp = P.pop("key_poses").detach()
    P.key_translations = kp[:, :3].clone().requires_grad_(True)
    P.key_rotations = kp[:, 3:].clone().requires_grad_(True)
    return D, P


CAMERA_READOUT_S = 0.030  # a rolling camera's readout (--rolling-shutter)
LIDAR_SWEEP_S = 0.1       # a spinning lidar's sweep


def _moved(V, velocity, dt):
    """World -> sensor poses [F,4,4] after moving the sensors by velocity
    [F,3] (world, m/s) for dt seconds (no turn)."""
    out = V.clone()
    R, t = V[:, :3, :3], V[:, :3, 3]
    centre = -torch.einsum("fji,fj->fi", R, t) + velocity * dt
    out[:, :3, 3] = -torch.einsum("fij,fj->fi", R, centre)
    return out


def sensors_of(args, D, device, dtype):
    """--camera-model: a real calibration (../shared/data/gsplat/, or
    --camera-calibration) resized to the scene's camera width replaces the
    pinhole (its height follows the calibration's aspect); --rolling-shutter:
    the end-of-readout poses of the camera and the lidar from the ego's
    velocity between frames. Sets D.cam_model_kw, D.Ks, D.width, D.height,
    D.cam_viewmats_end, D.lidar_viewmats_end."""
    D.cam_model_kw, D.cam_viewmats_end, D.lidar_viewmats_end = None, None, None
    if args.camera_model != "pinhole":
        from nurec_ops import sensors

        path = args.camera_calibration or _default_calibration(args.camera_model)
        recs = sensors.read_cameras(path)
        rec = next(r for r in recs.values() if sensors.camera_params(r)[0] == args.camera_model)
        model, p, (W, H) = sensors.camera_params(rec, scale=D.width / rec["resolution"][0])
        F = D.cam_viewmats.shape[0]
        K = p.pop("Ks", None)
        D.Ks = (K if K is not None else torch.eye(3, dtype=torch.float64)).to(device, dtype)[None].expand(F, 3, 3)
        D.width, D.height = W, H
        D.cam_model_kw = dict(camera_model=model)
        D.cam_model_params = {k: (v.to(device, dtype) if v.is_floating_point() else v.to(device))[None]
                              for k, v in p.items()}
        D.cam_model_kw.update(D.cam_model_params)
    if args.rolling_shutter:
        t = D.times.double() * 1e-6
        F = t.shape[0]
        for name, dt in (("cam", CAMERA_READOUT_S), ("lidar", LIDAR_SWEEP_S)):
            V = D[f"{name}_viewmats"]
            c = -torch.einsum("fji,fj->fi", V[:, :3, :3], V[:, :3, 3])
            vel = torch.zeros_like(c)
            if F > 1:  # the ego's velocity from one frame to the next (the last frame keeps the one before)
                step = (c[1:] - c[:-1]) / (t[1:] - t[:-1]).to(c.device, c.dtype)[:, None]
                vel = torch.cat((step, step[-1:]))
            D[f"{name}_viewmats_end"] = _moved(V, vel, dt)


def _default_calibration(model):
    here = os.path.dirname(os.path.abspath(__file__))
    base = os.environ.get("NUREC_OPS_SHARED_DATA", os.path.join(here, "..", "..", "shared", "data"))
    name = {"ftheta": "test_ftheta_camera_params.json", "fisheye": "test_fisheye_camera_params.json",
            "opencv": "test_pinhole_camera_params.json"}[model]
    path = os.path.join(base, "gsplat", name)
    if not os.path.exists(path):
        raise SystemExit(f"train_street: --camera-model {model} needs a calibration: {path} is missing; "
                         "pass --camera-calibration PATH (an NCore intrinsics JSON)")
    return path


@torch.no_grad()
def evaluate(P, D, frames):
    """Mean camera PSNR (dB) over ``frames``, mean lidar range error (m, on
    rays that hit in the ground truth, ranges normalized by alpha) and the
    renders of every frame (CPU)."""
    psnrs, errs, renders, lidars = [], [], [], []
    for f in frames:
        i = torch.tensor([f], device=D.images.device)
        render, rng, alpha, _ = render_frame(P, D, i)
        mse = (render[0] - D.images[f]).square().mean().item()
        psnrs.append(-10 * math.log10(max(mse, 1e-12)))
        renders.append(render[0].cpu())
        if D.lidar:
            hit = D.lidar_alpha[f] > 0.5
            r = rng[0] / alpha[0].clamp_min(1e-6)
            r_gt = D.ranges[f] / D.lidar_alpha[f].clamp_min(1e-6)
            errs.append((r - r_gt).abs()[hit].mean().item() if hit.any() else float("nan"))
            lidars.append((rng[0].cpu(), alpha[0].cpu()))
    return (statistics.fmean(psnrs), statistics.fmean(errs) if errs else float("nan"), renders, lidars)


def _lidar_image(rng, alpha, hi):
    r = rng[..., 0] / alpha[..., 0].clamp_min(1e-6)
    img = figures.colormap(r, 0.0, hi, invalid=alpha[..., 0] < 0.5)
    R, W = img.shape[:2]
    sy = max(1, min(8, 400 // max(R, 1)))
    sx = max(1, min(4, 1600 // max(W, 1)))
    return img.repeat_interleave(sy, 0).repeat_interleave(sx, 1)


def write_pngs(out, D, frames, start, final):
    """Labelled panels per frame (Pillow): ground truth | start | trained |
    error (|trained - truth|, x4) for the camera; ground truth | start |
    trained for the lidar's range (colour-mapped)."""
    up = max(1, min(6, 480 // D.width))
    for k, f in enumerate(frames):
        gt = D.images[f].cpu()
        figures.save_panels(os.path.join(out, f"camera_{f:03d}.png"),
                            [("ground truth", gt), ("start", start[2][k]), ("trained", final[2][k]),
                             ("error x4", ((final[2][k] - gt).abs() * 4).clamp(0, 1))], scale=up)
        if D.lidar:
            hit = D.lidar_alpha[f] > 0.5
            r_gt = (D.ranges[f] / D.lidar_alpha[f].clamp_min(1e-6))[hit]
            hi = float(r_gt.max()) if r_gt.numel() else 50.0
            rows = [(D.ranges[f].cpu(), D.lidar_alpha[f].cpu()), start[3][k], final[3][k]]
            figures.save_panels(os.path.join(out, f"lidar_{f:03d}.png"),
                                [(name, _lidar_image(r, a, hi)) for name, (r, a) in
                                 zip(("ground truth", "start", "trained"), rows)])


# ---------------------------------------------------------------- timing

class StepTimer:
    """Per-step times: CUDA events on the stream (the interval between
    consecutive step starts on the device timeline: no sync in the loop) or
    the host clock on the CPU."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"
        self.marks = []

    def mark(self):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            self.marks.append(e)
        else:
            self.marks.append(time.perf_counter())

    def times_ms(self):
        if self.cuda:
            torch.cuda.synchronize()
            return [a.elapsed_time(b) for a, b in zip(self.marks, self.marks[1:])]
        return [(b - a) * 1e3 for a, b in zip(self.marks, self.marks[1:])]


SYNC_WARNING = "called a synchronizing CUDA operation"  # c10::cuda::warn_or_error_on_sync
SYNC_MODE_NOTICE = "Synchronization debug mode is a prototype feature"


@contextlib.contextmanager
def count_syncs(device, box):
    """Counts host-device synchronizations (CUDA) as the warnings of
    ``torch.cuda.set_sync_debug_mode("warn")``; ``box[0]`` gets the count.
    Under a running nurec_ops.diagnose (``python -m nurec_ops.diagnose
    examples/train_street.py``) the syncs are left to it, which names their
    lines: ``box[0]`` is then None."""
    if device.type != "cuda":
        box[0] = 0
        yield
        return
    if nurec_ops.diagnose.running():
        box[0] = None
        yield
        return
    old = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            yield
        finally:
            torch.cuda.set_sync_debug_mode(old)
    # Count only the sync warning itself ("called a synchronizing CUDA
    # operation (Triggered internally at ...)"). A substring like "synchroniz"
    # also matched the one-per-process notice that set_sync_debug_mode raises
    # on its first call ("Synchronization debug mode is a prototype feature and
    # does not yet detect all synchronizing operations"): a spurious sync in
    # the first counted loop of a process.
    is_sync = lambda w: str(w.message).startswith(SYNC_WARNING)  # noqa: E731
    box[0] = sum(is_sync(w) for w in caught)
    for w in caught:  # pass other warnings on (e.g. a binning overflow), not the notice
        if not is_sync(w) and not str(w.message).startswith(SYNC_MODE_NOTICE):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _graph_capacity(op, fallback):
    """A fixed binning capacity for capture: twice the largest capacity the
    op's asynchronous policy holds after the eager warm-up steps (it has read
    their reported counts), or ``fallback``."""
    try:
        from nurec_ops import _binning

        pol = _binning.policy(op)
        pol.poll()
        caps = list(pol.capacity.values())
        if caps:
            return 2 * max(caps)
    except Exception:  # noqa: BLE001 - a different policy layout: use the fallback
        pass
    return fallback


# ------------------------------------------------------------------ main

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fused", nargs="?", const="all", choices=["all", "raster"], default=None,
                   help="swap the fused ops in: all (default) or only the rasterizers (the GPU baseline)")
    p.add_argument("--graph", action="store_true", help="capture the whole step in a CUDA graph and replay it (CUDA)")
    p.add_argument("--profile", action="store_true", help="write a torch.profiler Chrome trace (with NVTX ranges)")
    p.add_argument("--diagnose", action="store_true",
                   help="run the last 5 steps under nurec_ops.diagnose (report, trace, GPU busy fraction)")
    p.add_argument("--ddp", action="store_true", help="data parallel under torchrun (gloo on CPU, NCCL on CUDA)")
    p.add_argument("--emulate-ranks", type=int, default=None, metavar="N",
                   help="one process plays N data-parallel ranks in turn: each step renders the N ranks' frames and "
                        "steps on their gradients' mean, as --ddp on N ranks does (the reference --ddp is tested "
                        "against)")
    p.add_argument("--camera-model", default="pinhole", choices=["pinhole", "opencv", "fisheye", "ftheta"],
                   help="the camera: a real calibration of this model (SPEC 6) instead of the pinhole")
    p.add_argument("--camera-calibration", default=None, metavar="PATH",
                   help="NCore intrinsics JSON for --camera-model (default: ../shared/data/gsplat/'s)")
    p.add_argument("--rolling-shutter", action="store_true",
                   help="rolling-shutter camera (30 ms readout, top to bottom) and lidar (0.1 s sweep), SPEC 7")
    p.add_argument("--strategy", default="none", choices=["none", "default", "mcmc"],
                   help="densify with gsplat's DefaultStrategy or MCMCStrategy (needs --fused; not with --graph)")
    p.add_argument("--absgrad", action="store_true", help="DefaultStrategy on the absgrad (SPEC 8) instead of the grad")
    p.add_argument("--cap-max", type=int, default=None, help="MCMC: most Gaussians (default 1.5x the start)")
    p.add_argument("--sh-degree", type=int, default=0, choices=[0, 1, 2, 3],
                   help="train SH colours up to this degree (0: plain RGB colours)")
    p.add_argument("--sh-every", type=int, default=None,
                   help="steps per SH degree of the ramp (default steps / (degree + 2); with --graph no ramp)")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    p.add_argument("--size", default=None, choices=sorted(street_scene.SIZES),
                   help="scene size (default: small on CPU, large on CUDA)")
    p.add_argument("--steps", type=int, default=None, help="training steps (default: 120 small, 1000 large, 100 tiny)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--no-lidar", action="store_true", help="camera only")
    p.add_argument("--lidar-calibration", default=None, metavar="PATH",
                   help="a real spinning lidar's calibration JSON (NCore's row-offset model, e.g. "
                        "../shared/data/gsplat/row-offset-spinning-lidar-model-parameters.json; any "
                        "table start or spin direction); default: the synthetic 128 x 3600 model")
    p.add_argument("--no-eval", action="store_true", help="skip the before / after metrics and PNGs")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--out", default="train_street_out")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    rank, world = 0, 1
    if args.ddp:
        import torch.distributed as dist

        if "RANK" not in os.environ:
            raise SystemExit("train_street: --ddp runs under torchrun, e.g. "
                             "torchrun --nproc_per_node=2 examples/train_street.py --ddp")
        rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    dev_name = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if dev_name == "cuda" and args.ddp:
        dev_name = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
    device = torch.device(dev_name)
    if device.type == "cuda":
        if device.index is None:  # torch 2.11's set_device wants an index
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
    if args.ddp:
        if device.type == "cuda":
            # NVLink multicast (NVLS) stays off (set before the NCCL
            # communicator exists): on shared multi-GPU hosts a program using
            # it can take the GPUs out of service; a plain ring/tree
            # all-reduce is all this example needs.
            os.environ["NCCL_NVLS_ENABLE"] = "0"
            os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
        if args.graph:  # NCCL collectives inside a captured graph: no async error-handling watchdog
            os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0")
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    size = args.size or ("large" if device.type == "cuda" else "small")
    steps = args.steps if args.steps is not None else {"large": 1000, "small": 120}.get(size, 100)
    dtype = getattr(torch, args.dtype)
    if args.graph and device.type != "cuda":
        raise SystemExit("train_street: --graph needs a CUDA device")
    if args.graph and args.fused is None:  # the dense reference lidar copies host data: not capturable
        raise SystemExit("train_street: --graph needs --fused or --fused raster")
    if args.strategy != "none":
        if args.fused is None:
            raise SystemExit("train_street: --strategy reads the fused rasterizer's SPEC 8 meta: add --fused")
        if args.graph:
            raise SystemExit("train_street: --strategy changes the number of Gaussians, which a captured CUDA "
                             "graph cannot follow: drop --graph")
    if args.emulate_ranks is not None and (args.emulate_ranks < 1 or args.ddp or args.strategy != "none"):
        raise SystemExit("train_street: --emulate-ranks N needs N >= 1, no --ddp and no --strategy "
                         "(the strategy would need the ranks' gathered meta)")
    if size == "large" and args.fused is None:
        raise SystemExit("train_street: the dense reference rasterizers cannot render the large scene; "
                         "use --fused raster (the baseline: reference collection + fused rasterizers) or --fused")
    os.makedirs(args.out, exist_ok=True)
    main_rank = rank == 0
    tag = f"_rank{rank}" if world > 1 else ""
    log = (lambda *a: print(*a, flush=True)) if main_rank else (lambda *a: None)  # noqa: E731
    torch.manual_seed(args.seed)

    D, P = build(args, size, device, dtype)
    sh_every = None
    if args.sh_degree > 0:
        P.colors = to_sh(P.colors, args.sh_degree)
        # the ramp changes the op's sh_degree: eager only; a graph renders at the full degree
        sh_every = None if args.graph else (args.sh_every or max(1, steps // (args.sh_degree + 2)))
        D.sh_degree = 0 if sh_every else args.sh_degree
    if not D.lidar:
        log("train_street: lidar "
            + ("off (--no-lidar)" if args.no_lidar else "unavailable: this nurec_ops has no rasterize_lidar; camera only"))
    if args.ddp:
        for name in PARAMS:  # identical start on every rank (they are already: same seed)
            dist.broadcast(P[name].data, 0)
    F = D.times.shape[0]
    N = D.means.shape[0]
    played = range(args.emulate_ranks) if args.emulate_ranks else [rank]  # the data-parallel ranks this process plays
    ranks = args.emulate_ranks or world
    S = NS(schedules=[torch.tensor(rank_schedule(r, ranks, F, steps, args.seed) + [0], device=device) for r in played],
           step=torch.zeros(1, dtype=torch.int64, device=device),
           losses=torch.zeros(steps + 1, 3, device=device, dtype=dtype))
    dens = None
    if args.strategy != "none":
        import street_densify

        dens = street_densify.Densifier(args.strategy, P, D, LR, steps, absgrad=args.absgrad, cap_max=args.cap_max,
                                        width=D.width, height=D.height)
        opt = torch.optim.Adam([{"params": [P[k]], "lr": LR[k]} for k in ("key_translations", "key_rotations")],
                               eps=1e-12)
    else:
        opt = torch.optim.Adam([{"params": [P[k]], "lr": LR[k]} for k in PARAMS], capturable=args.graph,
                               eps=1e-12)
    cfg = NS(cam_kw={}, lidar_kw={}, world=world)
    what = {None: "reference ops", "all": "fused ops", "raster": "reference collection + fused rasterizers"}[args.fused]
    log(f"train_street: {size} street, {N} Gaussians ({int((D.track_ids >= 0).sum())} on "
        f"{D.track_ranges.shape[0]} actor tracks), {F} frames, camera {D.width}x{D.height}"
        + (f", lidar {D.row_elevations.shape[0]}x{D.column_azimuths.shape[0]}" if D.lidar else "")
        + f"; {steps} steps on {device} ({args.dtype}) with {what}" + (" in a CUDA graph" if args.graph else "")
        + (f", densified by gsplat's {args.strategy} strategy" if dens else "")
        + (f", SH degree up to {args.sh_degree}" if args.sh_degree else "")
        + (f", {world} ranks" if world > 1 else "")
        + (f", {args.emulate_ranks} ranks played in turn" if args.emulate_ranks else ""))

    this = sys.modules[__name__]
    names = None if args.fused == "all" else ["rasterize_camera"] + (["rasterize_lidar"] if D.lidar else [])
    swap_cm = nurec_ops.swap(this, names) if args.fused else contextlib.nullcontext()
    with swap_cm as sw:
        if sw is not None:
            log(f"train_street: {sw}")
        eval_frames = [0, F // 2, F - 1] if F > 2 else list(range(F))
        start = None
        if main_rank and not args.no_eval:
            start = evaluate(P, D, range(F))
        pe0 = street_scene.pose_error(_key_poses(P), D.key_poses, street_scene.observed_keys(D))
        rpe0 = street_scene.relative_pose_error(_key_poses(P), D.key_poses, D.track_ranges, street_scene.observed_keys(D))
        n_prof = min(5, steps) if (args.profile or args.diagnose) else 0
        prof = diagnosis = None
        timer = StepTimer(device)
        bar = figures.progress(steps, main_rank and not args.quiet)
        syncs = [0]
        done = 0
        graph = None
        if args.graph:
            warm = min(3, steps)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(warm):
                    train_step(P, D, opt, S, cfg)
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            done = warm
            bar.update(done)
            if _accepts(rasterize_camera, "capacity"):
                cfg.cam_kw = {"capacity": _graph_capacity("rasterize_camera", 64 * N)}
            if D.lidar and _accepts(rasterize_lidar, "capacity"):
                cfg.lidar_kw = {"capacity": _graph_capacity("rasterize_lidar", 64 * N)}
            if steps > done:
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):  # records one step; runs nothing
                    train_step(P, D, opt, S, cfg)
        def run(first, last):
            for k in range(first, last):
                if sh_every:
                    D.sh_degree = min(args.sh_degree, k // sh_every)
                if graph is not None:
                    with nvtx_range("train_street.step (CUDA graph replay)"):
                        graph.replay()
                elif dens is not None:
                    train_step_densify(P, D, opt, S, cfg, dens, k)
                else:
                    train_step(P, D, opt, S, cfg)
                timer.mark()
                bar.update(k + 1)

        # the timed steps, under sync counting; then the profiled ones (the
        # profiler itself synchronizes when it starts and stops)
        # --diagnose: one more step under the diagnosis, as its warm-up (the
        # profiler starts in it: starting drains the GPU's queue)
        n_settle = 1 if args.diagnose and steps - n_prof > done else 0
        timed_end = max(done, steps - n_prof - n_settle)
        with count_syncs(device, syncs):
            timer.mark()
            run(done, timed_end)
        counted = timed_end - done
        times = timer.times_ms()
        step_ms = statistics.median(times) if times else float("nan")
        if n_prof:
            # NVTX / record_function ranges only for the profiled steps: turned
            # on before the timed steps they added host time to every timed
            # eager step. (A graph replay's kernels were captured without host
            # ranges either way; its replay range below needs them on now.)
            nurec_ops.set_nvtx(True)
            if args.diagnose:
                if main_rank:
                    log(f"train_street: nurec_ops.diagnose of the last {n_prof} steps")
                d = nurec_ops.diagnose(steps=n_prof, warmup=n_settle, print_report=main_rank,
                                       trace=os.path.join(args.out, f"diagnose_trace{tag}.json"))
                with d:
                    for k in range(timed_end, steps):
                        run(k, k + 1)
                        d.step()
                diagnosis = d.figures
            else:
                acts = [torch.profiler.ProfilerActivity.CPU]
                if device.type == "cuda":
                    acts.append(torch.profiler.ProfilerActivity.CUDA)
                with torch.profiler.profile(activities=acts) as prof:
                    run(timed_end, steps)
                    if device.type == "cuda":
                        torch.cuda.synchronize()
                prof.export_chrome_trace(os.path.join(args.out, f"trace{tag}.json"))
            nurec_ops.set_nvtx(False)
            if not times:  # every step was profiled
                times = timer.times_ms()
                step_ms = statistics.median(times) if times else float("nan")
        losses = S.losses[:steps].clone()
        if args.ddp:
            dist.all_reduce(losses)
            losses /= world
        losses = losses.cpu().double()
        final = None
        if main_rank and not args.no_eval:
            final = evaluate(P, D, range(F))
    # the references are back in place here
    pe1 = street_scene.pose_error(_key_poses(P), D.key_poses, street_scene.observed_keys(D))
    rpe1 = street_scene.relative_pose_error(_key_poses(P), D.key_poses, D.track_ranges, street_scene.observed_keys(D))
    torch.save({k: P[k].detach().cpu() for k in PARAMS}, os.path.join(args.out, f"params{tag}.pt"))
    metrics = dict(size=size, device=str(device), fused=args.fused, graph=args.graph, steps=steps, world=world,
                   gaussians=N, gaussians_final=int(P.means.shape[0]), strategy=args.strategy,
                   sh_degree=args.sh_degree, lidar=D.lidar, step_ms=step_ms,
                   syncs_per_step=None if syncs[0] is None else syncs[0] / max(counted, 1),
                   losses=losses.tolist(), pose_error_start=pe0, pose_error_final=pe1,
                   relative_pose_error_start=rpe0, relative_pose_error_final=rpe1)
    if diagnosis is not None:
        keep = ("steps", "step_ms", "syncs_per_step", "kernels_per_step", "small_kernels_per_step",
                "launch_calls_per_step", "gpu_busy", "gpu_busy_per_step", "peak_memory_mb", "trace")
        metrics["diagnosis"] = {k: diagnosis.get(k) for k in keep}
    if final is not None:
        metrics.update(psnr_start=start[0], psnr_final=final[0], lidar_range_error_start=start[1],
                       lidar_range_error_final=final[1])
    if main_rank:
        if not math.isfinite(float(losses[:, 0].sum())):
            log("train_street: WARNING: non-finite losses (a binning capacity overflow gives NaN images; "
                "see nurec_ops.rasterize_camera's docstring)")
        with open(os.path.join(args.out, "losses.csv"), "w") as f:
            f.write("step,loss,camera_l1,lidar_range_l1\n")
            for k, (a, b, c) in enumerate(losses.tolist()):
                f.write(f"{k},{a:.8g},{b:.8g},{c:.8g}\n")
        curves = [("total", losses[:, 0].tolist(), (0.0, 0.0, 0.0)), ("camera", losses[:, 1].tolist(), (0.1, 0.35, 0.85))]
        if D.lidar:
            curves.append(("lidar", losses[:, 2].tolist(), (0.85, 0.3, 0.1)))
        figures.plot_losses(os.path.join(args.out, "loss.png"), curves)
        if final is not None:
            write_pngs(args.out, D, eval_frames, _pick(start, eval_frames), _pick(final, eval_frames))
        with open(os.path.join(args.out, "metrics.json"), "w") as f:
            json.dump(metrics, f, indent=1)
        log(f"  step time (median)      {step_ms:9.2f} ms" + (" (CUDA graph replays)" if args.graph else ""))
        if metrics["syncs_per_step"] is None:
            log("  host syncs per step          (counted by the running nurec_ops.diagnose)")
        else:
            log(f"  host syncs per step     {metrics['syncs_per_step']:9.2f}"
                + ("" if device.type == "cuda" else "   (CPU: none by nature)"))
        if diagnosis is not None and diagnosis.get("gpu_busy") is not None:
            log(f"  GPU busy (diagnosed)    {100 * diagnosis['gpu_busy']:9.1f} % of the last {n_prof} steps' wall time")
        log(f"  loss                    {losses[0, 0]:9.4f} -> {losses[-1, 0]:.4f}")
        if dens is not None:
            log(f"  Gaussians               {N:9d} -> {int(P.means.shape[0])}  ({args.strategy} strategy)")
        if final is not None:
            log(f"  camera PSNR             {start[0]:9.2f} -> {final[0]:.2f} dB  (all {F} frames)")
            if D.lidar:
                log(f"  lidar range error       {start[1]:9.3f} -> {final[1]:.3f} m  (rays that hit)")
        log(f"  actor pose error        {pe0[0]:9.3f} -> {pe1[0]:.3f} m, {pe0[1]:.2f} -> {pe1[1]:.2f} deg  (observed keys)")
        log(f"  actor motion error      {rpe0[0]:9.3f} -> {rpe1[0]:.3f} m, {rpe0[1]:.2f} -> {rpe1[1]:.2f} deg  "
            "(key to next key; a track's constant offset is not observable)")
        log(f"  wrote {args.out}/: loss.png, losses.csv, metrics.json"
            + (", camera_*.png" + (", lidar_*.png" if D.lidar else "") if final is not None else "")
            + (", trace.json" if prof is not None else "") + (", diagnose_trace.json" if diagnosis is not None else ""))
    if args.ddp:
        dist.barrier()
        dist.destroy_process_group()
    return metrics


def _key_poses(P):
    return torch.cat([P.key_translations, P.key_rotations], -1).detach()


def _pick(ev, frames):
    return (ev[0], ev[1], [ev[2][f] for f in frames], [ev[3][f] for f in frames] if ev[3] else [])


if __name__ == "__main__":
    main()
