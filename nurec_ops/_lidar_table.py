"""The lidar rasterizer's canonical column table (SPEC section 4: only the
ray directions matter, never the table's numeric order).

A real sensor's column table starts where its sweep starts, runs clockwise
or counter-clockwise, wraps from -pi to pi anywhere inside, may cover less
than a full turn and may be uneven. The binning needs columns that are
neighbours in azimuth (a tile is 256 consecutive columns), so the kernels
walk a canonical table derived here, on the table's own device and without
any host synchronization:

- every azimuth wrapped to [-pi, pi) and the columns sorted by it (stable);
- the sorted circle cut at its largest gap between neighbours (for a sector
  the missing part of the turn; for a full turn, the widest step): the
  columns from the cut on, then those before it, which lie 2 pi further
  round. The kernels read that lift from the values (canonical column k is
  at ``azimuths[k] + 2 pi`` where ``azimuths[k] < azimuths[0]``,
  rasterize_lidar_math_generic.h's rl_canon_az): an ascending table that
  spans less than 2 pi, so no tile straddles a gap or the cut, whose values
  keep the user's precision. Storing the lifted values instead put half a
  full turn's columns past pi, where a float32 azimuth has 2-4x the ulp:
  up to 5e-7 rad on a ray, 1.5e-5 of a far Gaussian's alpha in the lidar's
  edge scene (12-35 of 11,520 ranges beyond the float32 parity bound,
  against 1e-6 for the float32 reference on the user's table);
- ``order[k]``: the user's column of canonical column k. The kernels write
  ray (row, k)'s outputs (and read its gradients) at the user's column
  ``order[k]``, so callers see their own table's layout.

A table is small and constant per sensor: the result is cached per table
tensor (its identity and version counter, so an in-place change recomputes
it) and is a plain device computation, so it is also safe inside CUDA-graph
capture and torch.compile (where it is traced instead of cached)."""
import math

import torch

from ._cache import cached


def canonical_columns(column_azimuths):
    """``(azimuths [W], order [W] int32)`` for a column table ``[W]``:
    canonical column k is the user's column ``order[k]``, its azimuth
    wrapped to [-pi, pi) in ``azimuths[k]``; ascending once the columns
    below column 0's azimuth are lifted by 2 pi (``lifted``)."""
    t = column_azimuths
    if t.dim() != 1:
        return _derive(t)
    return cached("columns", (t,), _derive)


def cell_size(row_elevations, canonical_azimuths):
    """A lidar cell's size [2] (mean column spacing, mean row spacing, in
    radians) on the table's device: SPEC 8's radii are in cells. Cached per
    table (no host sync, no small kernels per call)."""
    return cached("cell", (row_elevations, canonical_azimuths), _cell)


def _cell(row_el, col_az):
    with torch.no_grad():
        R, W = row_el.shape[0], col_az.shape[0]
        col = (lifted(col_az[-1:], col_az)[0] - col_az[0]).abs() / max(W - 1, 1) if W > 1 else \
            col_az.new_tensor(2 * math.pi)
        row = ((row_el.max() - row_el.min()) / max(R - 1, 1) if R > 1 else row_el.new_tensor(1.0))
        return torch.stack((col, row)).clamp_min(1e-12)


def row_search_levels(R):
    """The levels L of R rows' row_search tables, floor(log2 R) + 1
    (2^(L - 1) <= R): the table is [1 + 4 L, R]."""
    return int(R).bit_length()


def row_search(row_elevations, row_azimuth_offsets):
    """The rows in elevation order and their range tables, ``[1 + 4 L, R]``
    in the table's dtype and device (L = floor(log2 R) + 1), or None for a
    table the op will refuse (it names the problem) or an empty one: row 0
    the elevations ascending (NaN as +inf), then L levels of sparse tables
    over the sorted rows, level l's entry k the min over ``[k, k + 2^l)``
    of the rows' indices, then the max of the indices, the min of the
    azimuth offsets (NaN as +inf) and their max (NaN as -inf). The
    projection finds the rows an item's elevation extent reaches by two
    binary searches and reads their first and last index and their
    offsets' span in two lookups each (csrc/rasterize_lidar,
    rl_rows_reached), the same rows and values as a scan of every row.
    Cached per table (no host sync)."""
    el, off = row_elevations, row_azimuth_offsets
    if (el.dim() != 1 or off.dim() != 1 or el.shape != off.shape or el.shape[0] == 0 or el.shape[0] > (1 << 20)
            or el.dtype != off.dtype or el.dtype not in (torch.float32, torch.float64) or el.device != off.device):
        return None
    return cached("row_search", (el, off), _row_search)


def _row_search(el, off):
    with torch.no_grad():
        R = el.shape[0]
        inf = float("inf")
        s, perm = torch.sort(torch.nan_to_num(el.detach(), nan=inf, posinf=inf, neginf=-inf), stable=True)
        o = off.detach()[perm]
        bases = (perm.to(el.dtype), perm.to(el.dtype), torch.nan_to_num(o, nan=inf, posinf=inf, neginf=-inf),
                 torch.nan_to_num(o, nan=-inf, posinf=inf, neginf=-inf))
        ops = (torch.minimum, torch.maximum, torch.minimum, torch.maximum)
        L = row_search_levels(R)
        tables = []
        for base, op in zip(bases, ops):
            level, levels = base, [base]
            for lv in range(1, L):
                h = 1 << (lv - 1)  # level lv's entry k: op of level lv - 1's entries k and k + h
                nxt = level.clone()
                nxt[: R - h] = op(level[: R - h], level[h:])
                levels.append(nxt)
                level = nxt
            tables.append(torch.stack(levels))
        return torch.cat([s[None]] + tables).contiguous()


def _derive(t):
    if t.dim() != 1 or t.shape[0] == 0 or not t.dtype.is_floating_point:
        # bad or empty tables are reported by the op's own checks, naming them
        return t, torch.zeros(t.shape[:1], dtype=torch.int32, device=t.device)
    with torch.no_grad():
        two_pi = 2 * math.pi
        a = torch.remainder(t.detach().to(torch.float64) + math.pi, two_pi) - math.pi  # [-pi, pi)
        s, idx = torch.sort(a, stable=True)
        # gap after each sorted column to the next one round the circle
        gap = torch.cat((s[1:] - s[:-1], (s[:1] + two_pi) - s[-1:]))
        start = (torch.argmax(gap) + 1) % s.shape[0]
        k = torch.arange(s.shape[0], device=t.device)
        rot = (k + start) % s.shape[0]  # canonical column k = sorted column rot[k]
        return s[rot].to(t.dtype), idx[rot].to(torch.int32)


def lifted(azimuths, canonical):
    """Canonical azimuths as the kernels read them: ``azimuths`` (entries
    of the ``canonical`` table) plus 2 pi where below column 0's."""
    return azimuths + (azimuths < canonical[0]).to(azimuths.dtype) * (2 * math.pi)


def sensor_op_args(row_elevations, column_azimuths, row_azimuth_offsets):
    """The sensor model as ``torch.ops.nurec_ops.rasterize_lidar_fwd`` takes
    it: ``(row_elevations, canonical azimuths, order, row_azimuth_offsets)``."""
    az, order = canonical_columns(column_azimuths)
    return row_elevations, az, order, row_azimuth_offsets
