"""Training scenes larger than the GPU's memory: a parameter's rows (the
SH coefficients, 48 of a Gaussian's 59 values at degree 3) and their Adam
moments live in pinned host memory; each step only the rows some sensor
can see are read by the GPU, and only those rows are updated, both in place
through unified addressing (``gather_rows``, ``adam_rows_``), as the CLM
paper offloads a scene's Gaussians to the host (Zhao et al. 2025). The
geometry (means, quats, scales, opacities) stays on the GPU, where the
visibility test needs all of it.

One step, with no host synchronization anywhere:

1. ``visible = pinhole_visible(...) | lidar_visible(...)``: a conservative
   test per Gaussian, ``True`` wherever the rasterizer could draw it
   (SPEC sections 3 and 4's culling, bounded from above); a Gaussian it
   leaves out reaches no pixel or ray, so the images are those of the
   whole scene. For any other camera model or a rolling shutter,
   ``nurec_ops.camera_visible(...)`` in place of ``pinhole_visible``: the
   camera op's own projection and footprint, exact.
2. ``index = rows.visible_index(visible)``: the visible rows, ascending,
   in a buffer of fixed capacity (padding -1), sized by the counts of
   earlier steps (read back asynchronously, as the binning's capacities
   are). An overflowed step is poisoned (its opacities NaN, so its images
   are NaN), never silently partial, and the next step has room.
3. ``subset(index, means, quats, scales, opacities)``: the geometry of
   those rows (padding rows transparent), and ``rows.gather(index)``: the
   offloaded rows, a leaf that takes the gradient.
4. Render, backward; ``rows.step(index, grad)``: Adam on those rows only
   (gsplat's SelectiveAdam semantics: a row no sensor saw keeps its value
   and moments).

With ``HostRows(..., cache=True)`` the last step's rows, values and
moments, stay on the GPU: a step reads over PCIe only the rows that became
visible, writes back (``put_rows_``) only those that left the view, and
runs Adam on the GPU. A drive trained in the order it was recorded sees
nearly the same Gaussians from one step to the next, so the host traffic
falls from every visible row's values and moments, read and written, to
the rows that changed. The values and moments are the same bits either way
(the same kernel on the same numbers); ``values()`` writes the cache back
first.
"""
import math
import warnings
import weakref

import torch

from . import _checks as C
from ._async_read import AsyncReads

_EPS2D = 0.3  # SPEC section 3: px^2 added to the projected covariance's diagonal
_SAFETY = 1.01  # relative slack on every bound (float32 rounding of the rasterizer's own projection)


def pinhole_visible(means, scales, opacities, viewmats, Ks, width, height, near=0.01, far=1e10):
    """``[N]`` bool: the Gaussians that a pinhole camera of
    ``rasterize_camera`` (SPEC section 3) could draw in at least one of its
    ``C`` images: mean depth inside ``(near, far)``, opacity above 1/255,
    and the opacity-aware ellipse, bounded from above, reaching the image.

    The bound: the projected covariance ``J W S W^T J^T + eps2d`` has no
    eigenvalue above ``|J|_F^2 max(scale)^2 + eps2d``, with ``J`` the
    clamped Jacobian SPEC section 3 names, so the ellipse ``d^T S2^-1 d <=
    2 ln(255 o)`` lies within that radius of the projected mean.

    Args: world-space ``means [N, 3]``, activated ``scales [N, 3]``,
    ``opacities [N]``; ``viewmats [C, 4, 4]`` (world to camera), ``Ks
    [C, 3, 3]``, the image size, the near and far planes as for
    ``rasterize_camera``."""
    op = "pinhole_visible"
    V = _check(op, means, scales, opacities, viewmats)
    C.shape(op, "Ks", Ks, (V.shape[0], 3, 3), "[C, 3, 3] (one per viewmat)")
    K = Ks.to(means.dtype)
    s = scales.amax(-1)
    s2 = s * s
    radius_o = torch.sqrt((torch.log((255.0 * opacities).clamp_min(1e-30)) * 2.0).clamp_min(0))  # sqrt(2 ln(255 o))
    seen = torch.zeros(means.shape[0], dtype=torch.bool, device=means.device)
    for c in range(V.shape[0]):  # one camera at a time: [N] temporaries, never [C, N]
        p = _in_sensor(means, V[c])
        z = p[:, 2]
        fx, fy, cx, cy = K[c, 0, 0], K[c, 1, 1], K[c, 0, 2], K[c, 1, 2]
        zs = torch.where(z > 0, z, torch.ones_like(z))
        tan_x, tan_y = width / (2 * fx), height / (2 * fy)
        tx = (p[:, 0] / zs).clamp(-(cx / fx + 0.3 * tan_x), (width - cx) / fx + 0.3 * tan_x)
        ty = (p[:, 1] / zs).clamp(-(cy / fy + 0.3 * tan_y), (height - cy) / fy + 0.3 * tan_y)
        j2 = (fx * fx * (1 + tx * tx) + fy * fy * (1 + ty * ty)) / (zs * zs)  # |J|_F^2
        radius = torch.sqrt(j2 * s2 + _EPS2D) * radius_o * _SAFETY + 1.0
        u = fx * p[:, 0] / zs + cx
        v = fy * p[:, 1] / zs + cy
        # the pixel centres run over [0.5, W - 0.5] x [0.5, H - 0.5]
        seen |= ((u + radius > 0.5) & (u - radius < width - 0.5) & (v + radius > 0.5)
                 & (v - radius < height - 0.5) & (z > near) & (z < far))
    return seen & (opacities > 1.0 / 255.0)


def lidar_visible(means, scales, opacities, viewmats, near=0.5, far=200.0):
    """``[N]`` bool: the Gaussians a spinning lidar or ray bundle of
    ``rasterize_lidar`` (SPEC section 4) could reach from any of its ``C``
    poses: mean range inside ``(near, far)`` and opacity above 1/255 (no
    bound on direction: the sweep covers every azimuth)."""
    V = _check("lidar_visible", means, scales, opacities, viewmats)
    seen = torch.zeros(means.shape[0], dtype=torch.bool, device=means.device)
    for c in range(V.shape[0]):
        r = _in_sensor(means, V[c]).norm(dim=-1)
        seen |= (r > near) & (r < far)
    return seen & (opacities > 1.0 / 255.0)


def _check(op, means, scales, opacities, viewmats):
    """The visibility tests' shapes; the viewmats in means' dtype."""
    C.shape(op, "means", means, (-1, 3), "[N, 3]")
    N = means.shape[0]
    C.shape(op, "scales", scales, (N, 3), "[N, 3] (N = means.shape[0])")
    C.shape(op, "opacities", opacities, (N,), "[N] (N = means.shape[0])")
    C.shape(op, "viewmats", viewmats, (-1, 4, 4), "[C, 4, 4]")
    return viewmats.to(means.dtype)


def _in_sensor(means, viewmat):
    """World points [N, 3] in a sensor's frame (viewmat [4, 4], world to sensor)."""
    return means @ viewmat[:3, :3].T + viewmat[:3, 3]


def compact(mask, capacity):
    """The indices of ``mask``'s True entries, ascending, in ``[capacity]``
    int64 (padding -1), and their count (a 0-dim int64 tensor, which may
    exceed the capacity: those past it are left out). No host sync: a
    cumulative sum and one scatter."""
    if mask.dim() != 1 or mask.dtype != torch.bool:
        C.fail("compact", f"`mask` must be a 1-D bool tensor, got {mask.dtype} of shape {list(mask.shape)}")
    capacity = int(capacity)
    if capacity < 0:
        C.fail("compact", f"`capacity` must be >= 0, got {capacity}")
    N = mask.shape[0]
    pos = torch.cumsum(mask, 0)  # int64: 1-based slot of each True entry
    count = pos[-1] if N else torch.zeros((), dtype=torch.int64, device=mask.device)
    slot = torch.where(mask & (pos <= capacity), pos - 1, capacity)  # the rest to a spare slot, dropped
    out = torch.full((capacity + 1,), -1, dtype=torch.int64, device=mask.device)
    out.scatter_(0, slot, torch.arange(N, device=mask.device))
    return out[:capacity], count


def subset(index, means, quats, scales, opacities, poison=None):
    """The Gaussians at ``index`` (``compact``'s padding -1 gives a
    transparent Gaussian, opacity 0, which the rasterizers never bin).
    ``poison``: a 0-dim bool tensor; where True every opacity is NaN (an
    overflowed compaction's step renders NaN, never a partial scene).
    Differentiable: the gradients of the rows reach the full tensors."""
    # A padding row reads a row of its own (its slot modulo N), not row 0:
    # the backward adds each row's (zero) gradient back through index_add_,
    # and a million padding rows on one row serialized torch's indexing
    # backward (H100, 20M Gaussians: 1.2 s of a 1.4 s step).
    N = means.shape[0]
    if N == 0:  # nothing to read: every row padding
        K = index.shape[0]
        z = lambda t: t.new_zeros((K,) + tuple(t.shape[1:])) + t.sum() * 0  # keeps the graph to t
        o = z(opacities)
        if poison is not None:
            o = torch.where(poison, torch.full_like(o, float("nan")), o)
        return z(means), z(quats), z(scales), o
    slot = torch.arange(index.shape[0], device=index.device) % N
    j = torch.where(index >= 0, index, slot)
    pick = lambda t: torch.index_select(t, 0, j)
    o = torch.where(index >= 0, pick(opacities), torch.zeros((), dtype=opacities.dtype, device=opacities.device))
    if poison is not None:
        o = torch.where(poison, torch.full_like(o, float("nan")), o)
    return pick(means), pick(quats), pick(scales), o


class HostRows:
    """An ``[N, D]`` parameter whose values and Adam moments live in host
    memory (pinned when ``device`` is CUDA), read and updated by ``device``
    in place, a visible set of rows at a time.

    Args:
        values: ``[N, D]`` (or ``[N, ...]``, flattened to D) initial values.
        device: where the steps run (``"cuda"`` reads the host rows through
            unified addressing; ``"cpu"`` keeps everything on the CPU).
        lr, betas, eps, weight_decay: Adam's, as ``torch.optim.Adam``.
        capacity: rows of the first step's visible set (None: that step
            counts them, the one host sync; later steps' capacities follow
            their counts, read back without waiting).
        cache: keep the last step's rows and their moments on ``device``
            (module docstring): host traffic only for the rows that enter
            or leave the visible set, at the price of ``device`` memory for
            two steps' rows (values and moments) while a step gathers.
    """

    def __init__(self, values, device, lr, betas=(0.9, 0.999), eps=1e-15, weight_decay=0.0, capacity=None,
                 cache=False):
        self.device = torch.device(device)
        self.shape = tuple(values.shape)
        pin = self.device.type == "cuda"
        flat = values.detach().reshape(values.shape[0], -1)
        self.param = self._host(flat, pin)
        self.exp_avg = self._host(torch.zeros_like(flat), pin)
        self.exp_avg_sq = self._host(torch.zeros_like(flat), pin)
        self.lr, self.betas, self.eps, self.weight_decay = float(lr), tuple(betas), float(eps), float(weight_decay)
        self.t = torch.zeros((), dtype=torch.float32, device=self.device)  # Adam's step, on the device
        N = self.shape[0]
        self.capacity = N if capacity is None else max(0, min(int(capacity), N))
        self._sized = capacity is not None
        self._counts = AsyncReads(1)  # earlier steps' visible counts; payload: that step's capacity
        self.cache = bool(cache)
        self._cached = None  # with cache: (keys [K], values, exp_avg, exp_avg_sq [K, D]) of the last gather
        self._gathered = None  # with cache: the index the last gather() was given
        self.overflowed_steps = 0

    @staticmethod
    def _host(t, pin):
        """A host copy of ``t``; with ``pin``, its pages locked in place
        (cudaHostRegister: exactly its bytes, where the pinned allocator
        would round a 19 GB table up to 32 GB), so that the GPU reads it
        through unified addressing."""
        h = torch.empty(t.shape, dtype=t.dtype, device="cpu")
        h.copy_(t)
        if pin and h.numel():
            rt = torch.cuda.cudart()
            err = rt.cudaHostRegister(h.data_ptr(), h.numel() * h.element_size(), 0)
            if int(err) != 0:
                raise RuntimeError(f"nurec_ops.offload: could not pin {h.numel() * h.element_size()} bytes of host "
                                   f"memory (cudaHostRegister error {int(err)})")
            weakref.finalize(h, rt.cudaHostUnregister, h.data_ptr())
        return h

    # ---------------------------------------------------------------- visible set
    def visible_index(self, mask):
        """``(index, poison)``: ``compact(mask, capacity)`` at this object's
        current capacity, and a 0-dim bool, True when the mask held more
        rows than fit (pass it to ``subset``). The count is read back
        without waiting; a later call grows the capacity to it (1.25x)."""
        self._poll()
        if not self._sized:  # the first call is sized exactly, once (as the binning's first call is)
            if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
                C.fail("offload", "the first visible_index of a HostRows inside CUDA-graph capture needs "
                                  "`capacity=` (no host synchronization can size it there); or run one step first")
            self.capacity = self._target(int(mask.sum()))
            self._sized = True
        cap = self.capacity
        index, count = compact(mask, cap)
        if self.device.type == "cuda":
            self._counts.record(count, cap)  # nothing under capture: a replay's count is the graph's
        else:
            self._grow(int(count), cap)
        return index, count > cap

    def _poll(self):
        for (count,), cap in self._counts.ready():
            self._grow(count, cap)

    def _target(self, count):
        return min(self.shape[0], int(math.ceil(count * 1.25)) + 1024)

    def _grow(self, count, cap):
        """Grown at once past a count, shrunk when 2.5x above what it needs."""
        want = self._target(count)
        if count > cap:
            self.overflowed_steps += 1
            warnings.warn(f"nurec_ops.offload: a step saw {count} visible rows, more than its capacity {cap}: "
                          f"its images are NaN; the capacity is now {max(want, self.capacity)}", RuntimeWarning,
                          stacklevel=3)
        if want > self.capacity or want * 2.5 < self.capacity:
            self.capacity = want

    # ---------------------------------------------------------------- rows
    def gather(self, index):
        """The rows at ``index`` on the device, ``[K, ...]`` (the trailing
        shape of ``values``; padding rows zero), a leaf that takes the
        step's gradient. With ``cache``, ``index`` must be visible_index's
        (ascending rows, then padding)."""
        from .offload_rows import gather_rows

        if self.cache:
            self._gathered = index  # step() must be given this very index (the cache's rows are in its order)
        index = index.to(self.device)
        if self.cache:
            rows = self._gather_cached(index)
        else:
            rows = gather_rows(self.param, index)
        return rows.reshape((index.shape[0],) + self.shape[1:]).requires_grad_(True)

    def _gather_cached(self, index):
        """The new cache for ``index``: rows the last one held moved on the
        device, the others read from the host; rows that left written back.
        Keys: the rows, padding as N (so that they ascend), for the
        sorted searches both ways."""
        from .offload_rows import gather_rows

        N = self.shape[0]
        keys = torch.where(index >= 0, index, N)
        tables = (self.param, self.exp_avg, self.exp_avg_sq)
        if self._cached is None or self._cached[0].numel() == 0 or keys.numel() == 0:
            if self._cached is not None:
                self._write_back(self._cached, torch.zeros_like(self._cached[0], dtype=torch.bool))
            new = [gather_rows(t, index) for t in tables]
        else:
            old_keys, *old = self._cached
            pos = torch.searchsorted(old_keys, keys).clamp_(max=old_keys.numel() - 1)
            hit = (old_keys[pos] == keys) & (index >= 0)
            miss = torch.where(hit, -1, index)  # gather_rows reads nothing at -1
            new = [torch.where(hit[:, None], o.index_select(0, pos), gather_rows(t, miss)) for o, t in zip(old, tables)]
            back = torch.searchsorted(keys, old_keys).clamp_(max=keys.numel() - 1)
            self._write_back(self._cached, keys[back] == old_keys)
        self._cached = (keys, *new)
        return new[0]

    def _write_back(self, cached, kept):
        """put_rows_ of the cached rows not ``kept`` (padding never)."""
        from .offload_rows import put_rows_

        keys, *rows = cached
        out = torch.where(kept | (keys >= self.shape[0]), -1, keys)
        for t, r in zip((self.param, self.exp_avg, self.exp_avg_sq), rows):
            put_rows_(t, out, r)

    def step(self, index, grad):
        """Adam on the rows at ``index`` with their gradient ``grad [K, ...]``
        (a missing gradient, None, is zero)."""
        from .offload_rows import adam_rows_

        K = index.shape[0]
        g = torch.zeros((K, self.param.shape[1]), dtype=self.param.dtype, device=self.device) if grad is None \
            else grad.reshape(K, -1)
        self.t.add_(1)
        with torch.no_grad():
            if self.cache:  # the cache's rows are the gather's, in its order: row k at k
                if self._cached is None or index is not self._gathered:
                    C.fail("offload", "HostRows(cache=True).step needs the index its last gather() was given "
                                      "(the cached rows are in that index's order)")
                index = index.to(self.device)
                local = torch.where(index >= 0, torch.arange(K, device=self.device), -1)
                _, p, m, v = self._cached
                adam_rows_(p, m, v, local, g, self.t, self.lr, self.betas[0], self.betas[1], self.eps,
                           self.weight_decay)
            else:
                adam_rows_(self.param, self.exp_avg, self.exp_avg_sq, index, g, self.t, self.lr, self.betas[0],
                           self.betas[1], self.eps, self.weight_decay)

    def flush(self):
        """With ``cache``: writes the cached rows back to the host tables
        and waits for that (a host sync: for a checkpoint or an evaluation,
        not the step). The cache stays valid."""
        if self._cached is None:
            return
        self._write_back(self._cached, torch.zeros_like(self._cached[0], dtype=torch.bool))
        if self.device.type == "cuda":
            torch.cuda.current_stream(self.device).synchronize()

    def values(self):
        """The parameter, ``[N, ...]`` on the host (the live tensor; with
        ``cache``, written back first)."""
        self.flush()
        return self.param.reshape(self.shape)
