"""One registry of op cases for the generic behaviour tests
(tests/test_op_registry.py): parity with the reference, opcheck,
torch.compile, both autograd paths, no host sync, CUDA-graph capture, the
current stream, poisoned memory and the binning overflow policy are written
once there and parametrised over CASES below. A sensor model is a row.

A row (``OpCase``) names the public op and its pure-PyTorch reference (the
same keyword arguments), ``make(device, dtype, seed, large=False)``: the
inputs as a dict of keyword arguments, drawn from ``seed`` (the test's fresh
seed), the differentiable ones ``requires_grad``; the outputs' names (all
compared; the floating ones get cotangents) and the differentiable inputs'
names; and what the row supports (graph capture, an overflow policy, ...).
The scenes come from the op families' own test modules (not copied here).
``large=True`` gives the bigger scenes of the GPU behaviour tests (several
thread blocks per kernel), the default the small ones the CPU suite runs.

Rolling shutters are built through the public API only (``viewmats_end=``,
``shutter=``), never through their packed per-camera parameters.
"""
import dataclasses
from typing import Callable, Optional

import pytest
import torch

import nurec_ops
from nurec_ops import reference as ref
from nurec_ops.collect import _COLLECT, _COLLECT_PARAMETERS
from nurec_ops.covariance import _COVAR_PRECI
from nurec_ops.offload_rows import _GATHER
from nurec_ops.rasterize_camera import _FORWARD as _CAMERA_FWD, _POLICY as _CAMERA_POLICY
from nurec_ops.rasterize_lidar import _FORWARD as _LIDAR_FWD, _POLICY as _LIDAR_POLICY
from nurec_ops.rasterize_rays import _FORWARD as _RAYS_FWD, _POLICY as _RAYS_POLICY
from nurec_ops.track_poses import _INTERPOLATE

import shared_data
import test_camera_models_fused as tm
import test_covariance as tcov
import test_offload_rows as toff
import test_rasterize_camera as tc
import test_rasterize_lidar as tl
import test_rasterize_rays as tr
from random_scenes import make_gaussians, make_track_poses, make_tracks, query_times_for
from test_rolling_shutter import lidar_end, moved

OPS = torch.ops.nurec_ops


@dataclasses.dataclass(frozen=True)
class OpCase:
    name: str
    op: Callable  # op(**inputs) -> tuple of outputs (the public entry)
    reference: Callable  # reference(**inputs) -> the same outputs (nurec_ops.reference)
    make: Callable  # make(device, dtype, seed, large=False) -> dict of inputs
    outputs: tuple  # names of the outputs, in order
    grads: tuple = ()  # names of the differentiable inputs (requires_grad in make's result)
    autograd_op: object = None  # the _library.AutogradOp behind op (both autograd paths); None: no autograd
    graph_capture: bool = True  # may be captured in a CUDA graph (with `fixed` kwargs)
    fixed: dict = dataclasses.field(default_factory=dict)  # kwargs where no sync may size buffers (graphs, compile)
    policy: object = None  # the binning CapacityPolicy (overflow policy), None: no capacity to overflow
    policy_key: Optional[Callable] = None  # inputs -> the policy's key of a call
    flips: Optional[tuple] = None  # float32 threshold flips allowed: (fraction of outputs, of grads, bound)
    int_atol32: int = 0  # integer outputs computed from float32 values may differ by this much
    refresh: Optional[Callable] = None  # refresh(inputs, seed) -> new values, same shapes (graph replay)
    deterministic: bool = True  # forward outputs bitwise repeatable on CUDA (no atomics, no parts)
    atomic_grads: bool = False  # a deterministic row whose CUDA backward sums by atomics (float32: in no fixed order)
    inductor: bool = False  # also torch.compile with the inductor backend (aot_eager always)
    data: tuple = ()  # shared_data files the row needs (skipped where absent)
    parts: Optional["Parts"] = None  # a rasterizer's long lists cut into parts (CUDA), None: no lists
    torch_backward: bool = False  # the backward is torch ops (gather_rows: index_add_), not an operator of ours

    def __str__(self):
        return self.name

    def inputs(self, device, dtype, seed, large=False):
        for f in self.data:
            shared_data.require(f)
        return self.make(device, dtype, seed, large)

    def new_inputs(self, inputs, seed, large=False):
        """New values of the same shapes (CUDA-graph replay, recompile checks)."""
        if self.refresh is not None:
            return self.refresh(inputs, seed)
        t = next(v for v in inputs.values() if isinstance(v, torch.Tensor) and v.is_floating_point())
        return self.make(t.device, t.dtype, seed, large)


@dataclasses.dataclass(frozen=True)
class Parts:
    """A rasterizer row's long tile lists, cut into parts on CUDA (composited
    separately and chained per cell): the module whose ``_SEGMENTS`` and
    ``_SEGMENT_MIN`` set the cut; the family's edge scene, run cut too; and,
    on one row per family, ``long(device, dtype)``: a scene of long lists
    whose cells reach the cut-off inside later parts when cut into parts of
    ``long_min`` entries or more (the case the parts' second walk exists for)."""
    module: str
    edge: Optional[Callable] = None  # edge(device, dtype) -> inputs
    long: Optional[Callable] = None  # long(device, dtype) -> inputs (float64 or float32, no seed: fixed)
    long_min: int = 0


def seeded(scene_fn):
    """scene_fn(large) (drawing from torch's global generator) run under
    ``seed`` without touching the test's own generator state."""
    def draw(seed, large):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return scene_fn(large)
    return draw


# ------------------------------------------------------------------ cameras

def _camera_make(scene_fn, bg=True):
    draw = seeded(scene_fn)

    def make(device, dtype, seed, large=False):
        return tc.to(draw(seed, large), device, dtype, bg=bg)
    return make


def _pinhole(large, sh=None):
    if large:
        return tc.random_scene(N=3000, C=2, W=96, H=64, sh=sh)
    return tc.random_scene(N=60, C=2, W=24, H=16, sh=sh)


def _model(name):
    def scene(large):
        return tm.model_scene(name, N=3000 if large else 60, seed=int(torch.randint(0, 1 << 30, ())))
    return scene


def _rolling(scene_fn, shutter="top_to_bottom"):
    def scene(large):
        s = scene_fn(large)
        s["viewmats_end"] = moved(s["viewmats"])
        s["shutter"] = shutter
        return s
    return scene


def _antialiased(scene_fn):
    """gsplat's antialiased mode on a scene: each item's opacity times its
    compensation (rc_opacity)."""
    def scene(large):
        return dict(scene_fn(large), antialiased=True)
    return scene


def _per_camera_features(scene_fn, D=3):
    """gsplat's per-camera colours: features [C, N, D], each (camera,
    Gaussian) item its own row (NUREC_RC_FEATURE_ROW)."""
    def scene(large):
        s = scene_fn(large)
        C, N = s["viewmats"].shape[0], s["means"].shape[0]
        s["features"] = torch.rand(C, N, D, dtype=s["features"].dtype)
        return s
    return scene


def _eps2d(scene_fn, eps2d):
    """gsplat's eps2d: the 2D dilation other than SPEC 3's 0.3 px^2."""
    def scene(large):
        return dict(scene_fn(large), eps2d=eps2d)
    return scene


def _radius_clip(scene_fn, clip):
    """gsplat's radius_clip: items whose radii are both <= clip dropped (a
    half past a whole radius, so that no radius rounds onto the cut; the
    scenes' radii are mostly 2-7 px, so a share of the items goes)."""
    def scene(large):
        return dict(scene_fn(large), radius_clip=clip)
    return scene


def _median(scene_fn):
    """gsplat issue 930's median depth beside the expected depth (a fourth
    output: camera z, lidar range)."""
    def scene(large):
        return dict(scene_fn(large), median_depth=True)
    return scene


def _camera_long(device, dtype):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        s = tc.random_scene(N=3000, C=2, W=96, H=64, D=4)
        s["opacities"] = s["opacities"] * 0.5 + 0.45  # pixels stop inside later parts
        return tc.to(s, device, dtype, bg=True)


def _camera_edge(device, dtype):
    return tc.to(tc.edge_scene(), device, dtype, bg=True)


CAMERA_PARTS = Parts("nurec_ops.rasterize_camera")
CAMERA_PARTS_ALL = Parts("nurec_ops.rasterize_camera", edge=_camera_edge, long=_camera_long, long_min=32)
CAMERA = dict(op=nurec_ops.rasterize_camera, reference=ref.rasterize_camera, outputs=("render", "depth", "alpha"),
              grads=tc.GRAD_KEYS + ("backgrounds",), autograd_op=_CAMERA_FWD, fixed=dict(capacity=1 << 18),
              policy=_CAMERA_POLICY, policy_key=lambda s: (s["viewmats"].shape[0], s["width"], s["height"]),
              flips=(2e-3, 0.02, 0.02), deterministic=False, parts=CAMERA_PARTS)
CAMERA_MEDIAN = dict(CAMERA, outputs=CAMERA["outputs"] + ("median_depth",))
CAMERA_MEDIAN_PARTS = Parts("nurec_ops.rasterize_camera", edge=lambda d, t: dict(_camera_edge(d, t), median_depth=True),
                            long=lambda d, t: dict(_camera_long(d, t), median_depth=True), long_min=32)
MODEL_DATA = {m: (tm.MODELS[m][0],) if tm.MODELS[m][0] else () for m in tm.MODELS}  # a model of no file: ()


# ------------------------------------------------------- camera visibility

def _visible_make(scene_fn):
    """A camera row's scene without its features (camera_visible takes
    none), nothing differentiable, and its first Gaussians faint (opacity
    under 1/255: never visible), so that the mask holds both values."""
    draw = _camera_make(scene_fn, bg=False)

    def make(device, dtype, seed, large=False):
        s = {k: v.detach() if isinstance(v, torch.Tensor) else v for k, v in draw(device, dtype, seed, large).items()
             if k not in ("features", "sh_degree", "backgrounds")}
        s["opacities"] = s["opacities"].clone()
        s["opacities"][:3] = 1.0 / 300
        return s
    return make


def _visible(op):
    return lambda **kw: (op(**kw),)


VISIBLE = dict(op=_visible(nurec_ops.camera_visible), reference=_visible(ref.camera_visible), outputs=("visible",))


# ------------------------------------------------------------------ lidars

def _lidar_make(rolling=False, median=False):
    def scene(large):
        if large:
            s = tl.random_scene(N=3000, C=2, D=2, row_step=2, col_step=4)  # 64 x 900
        else:
            s = tl.random_scene(N=60, C=2, D=2, row_step=16, col_step=30)  # 8 x 120
        if rolling:
            s["viewmats_end"] = lidar_end(s["viewmats"])
        if median:
            s["median_depth"] = True
        return s
    draw = seeded(scene)

    def make(device, dtype, seed, large=False):
        return tl.to(draw(seed, large), device, dtype)
    return make


def _lidar_long(device, dtype):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        return tl.to(tl.full_sensor_scene(), device, dtype)  # the real 128 x 3600 sensor, 20k Gaussians


LIDAR_PARTS = Parts("nurec_ops.rasterize_lidar")
LIDAR_PARTS_ALL = Parts("nurec_ops.rasterize_lidar", edge=lambda device, dtype: tl.to(tl.edge_scene(), device, dtype),
                        long=_lidar_long, long_min=64)
LIDAR = dict(op=nurec_ops.rasterize_lidar, reference=ref.rasterize_lidar, outputs=("features", "range", "alpha"),
             grads=tl.GRAD_KEYS, autograd_op=_LIDAR_FWD, fixed=dict(capacity=1 << 19), policy=_LIDAR_POLICY,
             policy_key=lambda s: (s["viewmats"].shape[0], s["row_elevations"].shape[0],
                                   s["column_azimuths"].shape[0]),
             flips=(2e-3, 0.03, 0.02), deterministic=False, parts=LIDAR_PARTS)
LIDAR_MEDIAN = dict(LIDAR, outputs=LIDAR["outputs"] + ("median_range",))
LIDAR_MEDIAN_PARTS = Parts("nurec_ops.rasterize_lidar",
                           edge=lambda d, t: dict(tl.to(tl.edge_scene(), d, t), median_depth=True),
                           long=lambda d, t: dict(_lidar_long(d, t), median_depth=True), long_min=64)


# ---------------------------------------------------------- ray bundles

def _rays_make(rolling=False, pattern="rosette"):
    def scene(large):
        if large:
            return tr.random_scene(N=3000, C=2, M=20000, pattern=pattern, rolling=rolling)
        return tr.random_scene(N=60, C=2, M=300, pattern=pattern, rolling=rolling)
    draw = seeded(scene)

    def make(device, dtype, seed, large=False):
        return tr.to(draw(seed, large), device, dtype)
    return make


RAYS = dict(op=nurec_ops.rasterize_rays, reference=ref.rasterize_rays, outputs=("features", "range", "alpha"),
            grads=tr.GRAD_KEYS, autograd_op=_RAYS_FWD, fixed=dict(capacity=1 << 19, grid=(6, 10)),
            policy=_RAYS_POLICY, policy_key=lambda s: ("rays", s["viewmats"].shape[0], s["ray_origins"].shape[-2]),
            flips=(2e-3, 0.03, 0.05), atomic_grads=True)


# ---------------------------------------------------------- actor tracks

G_NAMES = ("means", "quats", "log_scales", "opacity_logits")
COLLECT_OUT = ("means_w", "quats_w", "scales", "opacities")


def _sizes(large):
    return (32, 70_001) if large else (5, 64)  # tracks, Gaussians


def _tracks_make(mode, broadcast=False):
    def make(device, dtype, seed, large=False):
        T, _ = _sizes(large)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            tr = make_tracks(T, 1, 8, dtype=dtype, device=device)
            qt = query_times_for(tr, "mixed", broadcast=broadcast)
        return dict(key_poses=tr["key_poses"].requires_grad_(True), key_times=tr["key_times"],
                    track_ranges=tr["track_ranges"], query_times=qt, mode=mode)
    return make


def _collect_make(mode, broadcast=False):
    tracks = _tracks_make(mode, broadcast)

    def make(device, dtype, seed, large=False):
        T, N = _sizes(large)
        s = tracks(device, dtype, seed, large)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed + 1)
            g = make_gaussians(N, T, dtype, device)
        return dict({k: g[k].requires_grad_(True) for k in G_NAMES}, track_ids=g["track_ids"], **s)
    return make


def _track_refresh(inputs, seed):
    """The same track layout (ranges) with new key poses, key times and query
    times, and new Gaussians (CUDA-graph replay keeps every shape)."""
    out = dict(inputs)
    kp, kt, qt = inputs["key_poses"], inputs["key_times"], inputs["query_times"]
    g = torch.Generator(device=kp.device).manual_seed(seed)
    out["key_poses"] = (torch.randn(kp.shape, generator=g, device=kp.device, dtype=kp.dtype) * 3).requires_grad_(
        kp.requires_grad)
    jitter = torch.randint(-50_000, 50_000, kt.shape, generator=g, device=kt.device)
    out["key_times"] = torch.sort(kt + jitter)[0]
    out["query_times"] = qt + torch.randint(-200_000, 200_000, qt.shape, generator=g, device=qt.device)
    if "means" in inputs:
        N, T = inputs["means"].shape[0], inputs["track_ranges"].shape[0]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            new = make_gaussians(N, T, kp.dtype, kp.device, inputs["track_ids"].dtype)
        out.update({k: new[k].requires_grad_(True) for k in G_NAMES}, track_ids=new["track_ids"])
    return out


def _collect_parameters_make(device, dtype, seed, large=False):
    T, N = _sizes(large)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        g = make_gaussians(N, T, dtype, device)
        poses, inside = make_track_poses(T, dtype, device)
    return dict({k: g[k].requires_grad_(True) for k in G_NAMES}, track_ids=g["track_ids"],
                track_poses=poses.requires_grad_(True), track_inside=inside)


COLLECT = dict(op=nurec_ops.collect, reference=ref.collect, outputs=COLLECT_OUT, grads=G_NAMES + ("key_poses",),
               atomic_grads=True,
               autograd_op=_COLLECT, refresh=_track_refresh)
TRACKS = dict(op=nurec_ops.interpolate_track_poses, reference=ref.interpolate_track_poses, atomic_grads=True,
              outputs=("poses", "inside"), grads=("key_poses",), autograd_op=_INTERPOLATE, refresh=_track_refresh)


# ------------------------------------------------------------- splat_meta

def meta_formula(records, counts, cell, cell_u=1.0, cell_v=1.0):
    """SPEC 8's meta by tensor ops (float64 inside): means2d and depths
    copied from the records, radii the ceil of the half-extents of the
    binning's box, sqrt(thr C / det) and sqrt(thr A / det), in cells
    (``cell`` [2], or cell_u x cell_v), saturating at int32's maximum; 0 for
    a dropped item (count 0)."""
    cell = torch.tensor([cell_u, cell_v], dtype=torch.float64) if cell is None else cell
    r = records.double()
    A, B, Cc, thr = r[..., 2], r[..., 3], r[..., 4], r[..., 7]
    det = A * Cc - B * B
    ext = torch.sqrt((torch.stack((thr * Cc, thr * A), -1) / det[..., None]).clamp_min(0)) / cell.double().to(r.device)
    radii = torch.where((counts > 0)[..., None], torch.ceil(ext), torch.zeros_like(ext))
    return records[..., :2], radii.clamp(max=2 ** 31 - 1).to(torch.int32), records[..., 6]


def _meta_make(device, dtype, seed, large=False):
    """A forward's records (u, v, conic A B C, opacity, depth, threshold)
    with positive-definite conics, a huge ellipse (saturating radii),
    dropped items, and a lidar-sized cell."""
    g = torch.Generator().manual_seed(seed)
    C, N = 2, (20_000 if large else 300)
    rec = torch.rand(C, N, 8, generator=g, dtype=torch.float64)
    rec[..., 2] += 0.1
    rec[..., 4] += 0.1
    rec[..., 3] = (rec[..., 3] - 0.5) * 0.1
    rec[..., 7] = rec[..., 7] * 10
    rec[0, 0, 2:5] = torch.tensor([1e-20, 0.0, 1e-20], dtype=torch.float64)
    counts = torch.randint(0, 3, (C, N), generator=g)
    counts[0, 0] = 1
    cell = torch.tensor([0.0017, 0.006], dtype=torch.float64)
    return dict(records=rec.to(device, dtype), counts=counts.to(device), cell=cell.to(device, dtype),
                cell_u=1.0, cell_v=1.0)


def _splat_meta(records, counts, cell, cell_u=1.0, cell_v=1.0):
    return OPS.splat_meta(records, counts, cell, cell_u, cell_v)


# ------------------------------------------------------------- covariance

def _covariance_make(device, dtype, seed, large=False):
    """gsplat's covariances and precisions of a batch [2, N] (several thread
    blocks when large), both computed, full matrices."""
    gen = torch.Generator().manual_seed(seed)
    q, s = tcov.random_inputs((2, 100_000 if large else 40), dtype, device, gen)
    return dict(quats=q.requires_grad_(True), scales=s.requires_grad_(True), compute_covar=True,
                compute_preci=True, triu=False)


# ---------------------------------------------------------- offload rows

def _offload_sizes(large):
    return (200_000, 100_001) if large else (300, 121)  # N, K (D = 48: SH degree 3)


def _gather_make(device, dtype, seed, large=False):
    """A compaction's index (rows, then padding) into an SH table [N, 48]
    on the device (the pinned host path is test_offload_rows.py's). No bad
    entries: their NaN rows are test_offload_rows.py's too (the poison
    test wants finite outputs)."""
    gen = torch.Generator().manual_seed(seed)
    N, K = _offload_sizes(large)
    table = toff.random_table(N, 48, dtype, device, gen).requires_grad_(True)
    return dict(table=table, index=toff.compaction_index(N, K, gen).to(device))


def _gather(table, index):
    return (nurec_ops.gather_rows(table, index),)


def _ref_gather(table, index):
    return (ref.gather_rows(table, index),)


def _adam_make(mixed, weight_decay):
    def make(device, dtype, seed, large=False):
        """Adam's state [N, 48] on the device with random moments, a
        compaction's index (the padding among the rows with `mixed`), a
        gradient per entry and a step count t in 1..9."""
        gen = torch.Generator().manual_seed(seed)
        N, K = _offload_sizes(large)
        p, m, v = toff.adam_state(N, 48, dtype, device, gen)
        index, grad = toff.adam_step_inputs(N, K, 48, dtype, device, gen, mixed=mixed)
        step = toff.step_tensor(int(torch.randint(1, 10, (1,), generator=gen)), device, dtype)
        return dict(param=p, exp_avg=m, exp_avg_sq=v, index=index, grad=grad, step=step, lr=1e-2, beta1=0.9,
                    beta2=0.999, eps=1e-15, weight_decay=weight_decay)
    return make


def _functional_adam(adam_rows_):
    """A mutating op as the registry's rows want it, a function of its
    inputs: clones of param, exp_avg, exp_avg_sq updated in place and
    returned, with the status (the in-place semantics themselves are
    test_offload_rows.py's)."""
    def op(param, exp_avg, exp_avg_sq, index, grad, step, lr, beta1, beta2, eps, weight_decay):
        p, m, v = param.clone(), exp_avg.clone(), exp_avg_sq.clone()
        status = adam_rows_(p, m, v, index, grad, step, lr, beta1, beta2, eps, weight_decay)
        return p, m, v, status
    return op


ADAM = dict(op=_functional_adam(nurec_ops.adam_rows_), reference=_functional_adam(ref.adam_rows_),
            outputs=("param", "exp_avg", "exp_avg_sq", "status"))


def _put_make(device, dtype, seed, large=False):
    """A table [N, 48] on the device, a compaction's index (rows, then
    padding: a cache's evicted rows) and the rows to write there."""
    gen = torch.Generator().manual_seed(seed)
    N, K = _offload_sizes(large)
    table = toff.random_table(N, 48, dtype, device, gen)
    index = toff.compaction_index(N, K, gen).to(device)
    rows = toff.random_table(K, 48, dtype, device, gen)
    return dict(table=table, index=index, rows=rows)


def _functional_put(put_rows_):
    """put_rows_ as a function of its inputs (a clone of the table written
    and returned, with the status), as _functional_adam."""
    def op(table, index, rows):
        t = table.clone()
        return t, put_rows_(t, index, rows)
    return op


# ------------------------------------------------------------------- rows

CASES = [
    OpCase("camera-pinhole", make=_camera_make(_pinhole), inductor=True, **dict(CAMERA, parts=CAMERA_PARTS_ALL)),
    OpCase("camera-pinhole-sh2", make=_camera_make(lambda large: _pinhole(large, sh=2), bg=False), **CAMERA),
    OpCase("camera-opencv", make=_camera_make(_model("opencv")), data=MODEL_DATA["opencv"], **CAMERA),
    OpCase("camera-fisheye", make=_camera_make(_model("fisheye")), data=MODEL_DATA["fisheye"], **CAMERA),
    OpCase("camera-ftheta", make=_camera_make(_model("ftheta")), data=MODEL_DATA["ftheta"], **CAMERA),
    OpCase("camera-ortho", make=_camera_make(_model("ortho")), **CAMERA),
    OpCase("camera-rolling-ortho", make=_camera_make(_rolling(_model("ortho"), "left_to_right")), **CAMERA),
    OpCase("camera-rolling-pinhole", make=_camera_make(_rolling(_pinhole)), **CAMERA),
    OpCase("camera-rolling-ftheta", make=_camera_make(_rolling(_model("ftheta"), "left_to_right")),
           data=MODEL_DATA["ftheta"], **CAMERA),
    OpCase("camera-antialiased-pinhole", make=_camera_make(_antialiased(_pinhole)), **CAMERA),
    OpCase("camera-per-camera-features", make=_camera_make(_per_camera_features(_pinhole)), **CAMERA),
    # 6 channels: two CUDA passes of 4, each reading its item's row at its offset
    OpCase("camera-per-camera-features-d6-fisheye",
           make=_camera_make(_per_camera_features(_model("fisheye"), D=6)), data=MODEL_DATA["fisheye"], **CAMERA),
    OpCase("camera-eps2d-antialiased-pinhole", make=_camera_make(_eps2d(_antialiased(_pinhole), 0.1)), **CAMERA),
    OpCase("camera-eps2d-opencv", make=_camera_make(_eps2d(_model("opencv"), 1.0)), data=MODEL_DATA["opencv"],
           **CAMERA),
    OpCase("camera-radius-clip-pinhole", make=_camera_make(_radius_clip(_pinhole, 3.5)), **CAMERA),
    OpCase("camera-radius-clip-rolling-fisheye", make=_camera_make(_radius_clip(_rolling(_model("fisheye")), 2.5)),
           data=MODEL_DATA["fisheye"], **CAMERA),
    OpCase("camera-antialiased-rolling-ftheta", make=_camera_make(_antialiased(_rolling(_model("ftheta")))),
           data=MODEL_DATA["ftheta"], **CAMERA),
    # median depth (gsplat issue 930): the median walk over the lists' parts, through a camera model and shutter
    OpCase("camera-median-pinhole", make=_camera_make(_median(_pinhole)), inductor=True,
           **dict(CAMERA_MEDIAN, parts=CAMERA_MEDIAN_PARTS)),
    OpCase("camera-median-rolling-ftheta", make=_camera_make(_median(_rolling(_model("ftheta"), "left_to_right"))),
           data=MODEL_DATA["ftheta"], **CAMERA_MEDIAN),
    OpCase("visible-pinhole", make=_visible_make(_pinhole), inductor=True, **VISIBLE),
    OpCase("visible-antialiased-eps2d-pinhole", make=_visible_make(_eps2d(_antialiased(_pinhole), 1.0)), **VISIBLE),
    OpCase("visible-radius-clip-pinhole", make=_visible_make(_radius_clip(_pinhole, 3.5)), **VISIBLE),
    OpCase("visible-opencv", make=_visible_make(_model("opencv")), data=MODEL_DATA["opencv"], **VISIBLE),
    OpCase("visible-fisheye", make=_visible_make(_model("fisheye")), data=MODEL_DATA["fisheye"], **VISIBLE),
    OpCase("visible-ftheta", make=_visible_make(_model("ftheta")), data=MODEL_DATA["ftheta"], **VISIBLE),
    OpCase("visible-ortho", make=_visible_make(_model("ortho")), **VISIBLE),
    OpCase("visible-rolling-pinhole", make=_visible_make(_rolling(_pinhole)), **VISIBLE),
    OpCase("visible-rolling-ftheta", make=_visible_make(_rolling(_model("ftheta"), "left_to_right")),
           data=MODEL_DATA["ftheta"], **VISIBLE),
    OpCase("lidar-global", make=_lidar_make(), inductor=True, **dict(LIDAR, parts=LIDAR_PARTS_ALL)),
    OpCase("lidar-rolling", make=_lidar_make(rolling=True), **LIDAR),
    OpCase("lidar-median-global", make=_lidar_make(median=True), **dict(LIDAR_MEDIAN, parts=LIDAR_MEDIAN_PARTS)),
    OpCase("lidar-median-rolling", make=_lidar_make(rolling=True, median=True), **LIDAR_MEDIAN),
    OpCase("rays-rosette", make=_rays_make(), inductor=True, **RAYS),
    OpCase("rays-rolling-sphere", make=_rays_make(rolling=True, pattern="sphere"), **RAYS),
    OpCase("collect-slerp", make=_collect_make("slerp"), inductor=True, **COLLECT),
    OpCase("collect-nearest", make=_collect_make("nearest"), **COLLECT),
    OpCase("collect-nearest-broadcast", make=_collect_make("nearest", broadcast=True), **COLLECT),
    OpCase("collect_parameters", op=nurec_ops.collect_gaussian_parameters, reference=ref.collect_gaussian_parameters,
           make=_collect_parameters_make, outputs=COLLECT_OUT, grads=G_NAMES + ("track_poses",),
           autograd_op=_COLLECT_PARAMETERS, atomic_grads=True),
    OpCase("track_poses-slerp", make=_tracks_make("slerp"), **TRACKS),
    OpCase("track_poses-slerp-broadcast", make=_tracks_make("slerp", broadcast=True), **TRACKS),
    OpCase("track_poses-nearest-broadcast", make=_tracks_make("nearest", broadcast=True), **TRACKS),
    OpCase("quat_scale_to_covar_preci", op=nurec_ops.quat_scale_to_covar_preci,
           reference=ref.quat_scale_to_covar_preci, make=_covariance_make, outputs=("covars", "precis"),
           grads=("quats", "scales"), autograd_op=_COVAR_PRECI, inductor=True),
    OpCase("gather_rows", op=_gather, reference=_ref_gather, make=_gather_make, outputs=("rows",),
           grads=("table",), autograd_op=_GATHER, inductor=True, torch_backward=True),
    OpCase("adam_rows_", make=_adam_make(mixed=False, weight_decay=0.0), inductor=True, **ADAM),
    OpCase("adam_rows_-mixed-padding-weight-decay", make=_adam_make(mixed=True, weight_decay=0.01), **ADAM),
    OpCase("put_rows_", op=_functional_put(nurec_ops.put_rows_), reference=_functional_put(ref.put_rows_),
           make=_put_make, outputs=("table", "status"), inductor=True),
    OpCase("splat_meta", op=_splat_meta, reference=meta_formula, make=_meta_make,
           outputs=("means2d", "radii", "depths"), int_atol32=1),
]
BY_NAME = {c.name: c for c in CASES}


def params(select=lambda c: True, marks=()):
    """pytest params of the rows that ``select`` keeps, id = the row's name."""
    return [pytest.param(c, id=c.name, marks=marks) for c in CASES if select(c)]
