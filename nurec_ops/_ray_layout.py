"""The tiles of a ray bundle (nurec_ops.rasterize_rays): the rays grouped
into a grid of GE x GA cells over their directions, what the kernels bin
the Gaussians into. In PyTorch, on the rays' device, with no host sync
(fixed sizes: sorts, scatters and searches over [C, M] and [C, cells]).

- The frame: each sensor's start pose (viewmats' rotation), azimuth
  measured from the circular mean of its rays' azimuths, so that a narrow
  bundle does not straddle the +-pi seam.
- Bands of equal ray counts (quantiles of the usable rays' elevations and
  azimuths; gsplat's lidar tiling equalizes its histogram the same way):
  a cell holds about M / (GE GA) rays wherever the pattern is dense.
- Per cell, from its rays as the kernels will read them: the cone of
  directions (axis, half angle) and the ball of world origins (centre,
  radius); per sensor the ball of all origins. The binning's tests
  (csrc/sensors/ray_bundle.h) rely only on these being bounds of the cell's
  actual rays, never on the bands: any grid gives the same image.

The grid's shape is chosen once per configuration (device, sensors, rays)
from the rays' angular extents, one host sync, and cached: the cache
cannot tell two patterns of one size apart without a sync a call, so a
program that renders several (a rosette and a spinning sweep of as many
rays) passes each its own ``grid=`` (``nurec_ops.suggest_ray_grid``);
``grid=`` is also needed inside torch.compile or CUDA-graph capture
before an eager call of that configuration. The grid changes the speed,
never the outputs."""
import math

import torch

from . import _checks as Ck

RAYS_PER_CELL = 128  # csrc/rasterize_rays/rasterize_rays.cu: RAYS_THREADS, one chunk a cell
MAX_BANDS = 4096
_GRIDS = {}


def _angles(d_f):
    el = torch.atan2(d_f[..., 2], torch.linalg.vector_norm(d_f[..., :2], dim=-1))
    az = torch.atan2(d_f[..., 1], d_f[..., 0])
    return el, az


def _wrap(x):
    return x - 2 * math.pi * torch.ceil((x - math.pi) / (2 * math.pi))


def _frame_angles(viewmats, d_w, ok):
    """Elevation and azimuth (from the circular mean) of each ray in its
    sensor's start frame, float64, and that mean [C]."""
    F = viewmats.detach()[:, :3, :3].to(torch.float64)
    d_f = torch.einsum("cij,cmj->cmi", F, d_w.to(torch.float64))
    el, az = _angles(d_f)
    w = ok.to(torch.float64)
    az0 = torch.atan2((torch.sin(az) * w).sum(1), (torch.cos(az) * w).sum(1))
    return F, el, _wrap(az - az0[:, None]), az0


def choose_grid(op, viewmats, d_w, ok, grid):
    """(GE, GA): ``grid`` as given (checked), else the cached or (once, one
    host sync) computed shape: about M / RAYS_PER_CELL cells, their bands in
    the ratio of the rays' elevation and azimuth extents."""
    if grid is not None:
        try:
            ge, ga = (int(g) for g in grid)
        except (TypeError, ValueError):
            Ck.fail(op, f"`grid` must be a pair of band counts (elevation, azimuth), got {grid!r}")
        if not (1 <= ge <= MAX_BANDS and 1 <= ga <= MAX_BANDS):
            Ck.fail(op, f"`grid` bands must be in [1, {MAX_BANDS}], got {grid!r}")
        return ge, ga
    C, M = ok.shape
    dev = d_w.device
    key = (dev.type, dev.index, C, M)
    if key in _GRIDS:
        return _GRIDS[key]
    if torch.compiler.is_compiling() or (dev.type == "cuda" and torch.cuda.is_current_stream_capturing()):
        Ck.fail(op, "the first call of a ray bundle's size inside torch.compile or CUDA-graph capture needs "
                    "`grid=(GE, GA)` (its direction grid cannot be sized without a host sync there); or run "
                    "it once eagerly first")
    _GRIDS[key] = grid_of(viewmats, d_w, ok)
    return _GRIDS[key]


def grid_of(viewmats, d_w, ok):
    """(GE, GA) for these rays, not cached (one host sync): about
    M / RAYS_PER_CELL cells, their bands in the ratio of the rays' elevation
    and azimuth extents in the start frame (the most over the sensors)."""
    C, M = ok.shape
    _, el, az, _ = _frame_angles(viewmats, d_w, ok)
    big = torch.finfo(torch.float64).max
    with torch.no_grad():
        lo_e = torch.where(ok, el, torch.full_like(el, big)).amin(1)
        hi_e = torch.where(ok, el, torch.full_like(el, -big)).amax(1)
        lo_a = torch.where(ok, az, torch.full_like(az, big)).amin(1)
        hi_a = torch.where(ok, az, torch.full_like(az, -big)).amax(1)
        ext = torch.stack(((hi_e - lo_e).clamp(min=0).amax(), (hi_a - lo_a).clamp(min=0).amax())).tolist()  # the sync
    cells = max(1.0, M / RAYS_PER_CELL)
    e, a = max(ext[0], 1e-3), max(ext[1], 1e-3)
    ge = int(min(MAX_BANDS, max(1, round(math.sqrt(cells * e / a)))))
    ga = int(min(MAX_BANDS, max(1, round(cells / ge))))
    return ge, ga


def _quantile_edges(x, ok, G):
    """[C, G + 1] band edges (outer ones infinite) splitting each sensor's
    usable values into G bands of equal counts."""
    C, M = x.shape
    inf = float("inf")
    s = torch.sort(torch.where(ok, x, torch.full_like(x, inf)), dim=1).values
    n = ok.sum(1)  # [C]
    k = torch.arange(1, G, device=x.device, dtype=torch.int64)
    idx = (k[None, :] * n[:, None]) // G
    idx = torch.minimum(idx, (n[:, None] - 1).clamp(min=0)).clamp(max=max(M - 1, 0))
    inner = torch.gather(s, 1, idx) if M > 0 else torch.zeros(C, G - 1, dtype=x.dtype, device=x.device)
    inner = torch.where(torch.isfinite(inner), inner, torch.zeros_like(inner))
    edges = torch.cat((torch.full((C, 1), -inf, dtype=x.dtype, device=x.device), inner,
                       torch.full((C, 1), inf, dtype=x.dtype, device=x.device)), 1)
    return edges


def _band(edges, x):
    inner = edges[:, 1:-1].contiguous()
    return torch.searchsorted(inner, x.contiguous(), right=True)


def layout(viewmats, o_w, d_w, ok, ge, ga):
    """The op's tables: ray_order [C, M] int32, cell_rays [C, cells + 1, 2]
    int32, cells [C, cells, 8], el_edges [C, GE + 1], az_edges [C, GA + 1],
    sensor [C, 16] (float64; layouts in csrc/rasterize_rays/rasterize_rays.h
    and csrc/sensors/ray_bundle.h)."""
    C, M = ok.shape
    dev = o_w.device
    f64 = torch.float64
    ncell = ge * ga
    with torch.no_grad():
        F, el, az, az0 = _frame_angles(viewmats, d_w, ok)
        el_edges = _quantile_edges(el, ok, ge)
        az_edges = _quantile_edges(az, ok, ga)
        cell = _band(el_edges, el) * ga + _band(az_edges, az)
        cell = torch.where(ok, cell, torch.full_like(cell, ncell))  # unusable rays: past the last cell
        sorted_cell, order = torch.sort(cell, dim=1, stable=True)
        bounds = torch.arange(ncell + 1, device=dev, dtype=cell.dtype)[None].expand(C, ncell + 1).contiguous()
        starts = torch.searchsorted(sorted_cell, bounds)
        ends = torch.searchsorted(sorted_cell, bounds, right=True)
        cell_rays = torch.stack((starts, ends), -1).to(torch.int32)
        # per cell: cone of directions, ball of origins (from the rays as the kernels read them)
        o64, d64 = o_w.to(f64), d_w.to(f64)
        idx3 = cell[..., None].expand(C, M, 3)
        cnt = torch.zeros(C, ncell + 1, dtype=f64, device=dev).scatter_add_(1, cell, torch.ones_like(el))
        axis = torch.zeros(C, ncell + 1, 3, dtype=f64, device=dev).scatter_add_(1, idx3, d64)
        an = torch.linalg.vector_norm(axis, dim=-1, keepdim=True)
        x_axis = torch.zeros_like(axis)
        x_axis[..., 0] = 1  # a fill: no host-to-device copy (graph capture)
        axis = torch.where(an > 1e-12, axis / an.clamp(min=1e-300), x_axis)
        ax_r = torch.gather(axis, 1, idx3)
        ang = torch.atan2(torch.linalg.vector_norm(torch.cross(ax_r, d64, dim=-1), dim=-1), (ax_r * d64).sum(-1))
        half = torch.full((C, ncell + 1), -1.0, dtype=f64, device=dev).scatter_reduce_(1, cell, ang, "amax")
        centre = torch.zeros(C, ncell + 1, 3, dtype=f64, device=dev).scatter_add_(1, idx3, o64)
        centre = centre / cnt.clamp(min=1)[..., None]
        dist = torch.linalg.vector_norm(o64 - torch.gather(centre, 1, idx3), dim=-1)
        rad = torch.zeros(C, ncell + 1, dtype=f64, device=dev).scatter_reduce_(1, cell, dist, "amax")
        half = torch.where(cnt > 0, half, torch.full_like(half, -1.0))
        cells = torch.cat((axis, half[..., None], centre, rad[..., None]), -1)[:, :ncell].contiguous()
        # per sensor: the ball of all usable origins
        from .reference.rasterize_rays import sensor_centres

        c = sensor_centres(o_w, ok)
        r = torch.where(ok, torch.linalg.vector_norm(o64 - c[:, None], dim=-1), torch.zeros_like(el)).amax(1) \
            if M > 0 else torch.zeros(C, dtype=f64, device=dev)
        sensor = torch.cat((F.reshape(C, 9), c, r[:, None], az0[:, None], torch.zeros(C, 2, dtype=f64, device=dev)), 1)
    return order.to(torch.int32), cell_rays, cells, el_edges, az_edges, sensor
