"""gsplat's ``rasterization(..., distributed=True)`` on nurec_ops: the
multi-GPU layout of Grendel (arXiv 2406.18533) that gsplat's trainers turn on
whenever ``world_size > 1``. Each rank holds its own Gaussians (a shard:
gsplat's trainer gives rank r the points r::world_size) and its own C
cameras (the same C on every rank), and renders its cameras with the
Gaussians of every rank; the Gaussians' gradients are the sum over all
ranks' cameras, so an optimizer steps each shard on its own rank.

gsplat projects each rank's Gaussians into every rank's cameras and sends
each camera's projected items to the rank that renders it. Here every rank
gathers the rows of all ranks' Gaussians instead (one all-gather of the
parameters, differentiable: its backward sums each shard's gradient over
the ranks) and renders its cameras with them in one op call. The images
and gradients are gsplat's; memory and traffic are of all the Gaussians,
not of those each camera sees.

``meta`` is laid out as gsplat's: per (world camera, local Gaussian), the
cameras in rank order (rank r's camera c is world camera r C + c):
``means2d`` [C_world, N, 2] (a leaf whose ``.grad`` after ``backward()``
is the gradient of every rank's loss with respect to this rank's
Gaussians' projections, what DefaultStrategy reads), ``radii``,
``depths``, ``opacities``; packed, those items with global ``camera_ids``
and local ``gaussian_ids``; ``n_cameras`` the local C. An all-to-all
moves the rendered call's meta (its cameras x every Gaussian) into that
layout, and another moves ``means2d``'s gradient when it lands, so every
rank must run the backward, as gsplat's own collectives in its backward
require.

Host syncs: the ranks' sizes (one all-gather read on the host, as gsplat's
``all_gather_int32``), and packed's own one.
"""
import torch

from . import _checks as Ck

_OP = "gsplat.rasterization"


def _collectives():
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        Ck.fail(_OP, "`distributed=True` needs an initialized torch.distributed process group "
                "(torch.distributed.init_process_group), as gsplat does")
    from torch.distributed.nn import functional as dnn
    return dist, dnn


def distributed_call(given):
    """``rasterization(**given)`` with ``distributed=True`` (given: the
    call's arguments): see the module docstring."""
    from . import gsplat as G

    means, colors = given["means"], given["colors"]
    per_gaussian = 3 if given["sh_degree"] is not None else 2  # colors' dims: [N, K, 3] or [N, D]
    if means.dim() != 2:
        G._unsupported("means", list(means.shape), "no batch dimensions in distributed mode, as in gsplat")
    if given["absgrad"]:
        G._unsupported("absgrad", True, "not in distributed mode, as in gsplat")
    if given["sparse_grad"]:
        G._unsupported("sparse_grad", True, "not in distributed mode")
    if isinstance(colors, torch.Tensor) and colors.dim() != per_gaussian:
        G._unsupported("colors", f"shape {list(colors.shape)}", "per-Gaussian colors only in distributed mode, "
                       "as in gsplat")
    dist, dnn = _collectives()
    ws, rank = dist.get_world_size(), dist.get_rank()
    N, C = means.shape[0], given["viewmats"].shape[0]
    sizes = torch.tensor([N, C], dtype=torch.int64, device=means.device)
    table = [torch.empty_like(sizes) for _ in range(ws)]
    dist.all_gather(table, sizes)
    table = torch.stack(table).tolist()  # the host sync (gsplat's all_gather_int32)
    counts = [n for n, _ in table]
    if any(c != C for _, c in table):
        Ck.fail(_OP, f"with `distributed=True` every rank renders the same number of cameras (gsplat's rule); "
                f"the ranks have {[c for _, c in table]}")
    gathered = _gather_gaussians(dnn, given, counts, rank)
    out, alpha, local = G.rasterization(**dict(given, **gathered, distributed=False, packed=False))
    meta = _world_meta(dnn, local, counts, rank, C)
    if given["packed"]:
        G._pack(meta, False)
    return out, alpha, meta


_ROWS = ("means", "quats", "scales", "opacities", "colors")


def _gather_gaussians(dnn, given, counts, rank):
    """Every rank's Gaussians, in rank order: one differentiable all-gather
    of each shard's rows (means, quats, scales, opacities, colors side by
    side), padded to the largest shard's count."""
    N, top = counts[rank], max(counts)
    rows = []
    for name in _ROWS:
        t = given[name]
        if not isinstance(t, torch.Tensor) or t.dim() < 1 or t.shape[0] != N:
            got = list(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            Ck.fail(_OP, f"`{name}` must have one row per Gaussian (N = {N}), got {got}")
        if t.dtype != given["means"].dtype or t.device != given["means"].device:
            Ck.fail(_OP, f"`{name}` must have the dtype and device of `means` ({given['means'].dtype}, "
                    f"{given['means'].device}), got {t.dtype}, {t.device}")
        rows.append(t.reshape(N, -1))
    widths = [r.shape[1] for r in rows]
    block = torch.cat(rows, 1)
    block = torch.cat((block, block.new_zeros(top - N, block.shape[1])))  # gradients of the padding are dropped
    shards = dnn.all_gather(block)
    everyone = torch.cat([s[:n] for s, n in zip(shards, counts)])
    parts = torch.split(everyone, widths, 1)
    out = {}
    for name, part in zip(_ROWS, parts):
        out[name] = part.reshape((part.shape[0],) + tuple(given[name].shape[1:]))
    return out


def _to_world(dnn, t, counts, rank, C):
    """[C, N_all, ...] (this rank's cameras x every rank's Gaussians) ->
    [C_world, N, ...] (every rank's cameras x this rank's Gaussians): an
    all-to-all of the Gaussians' column blocks."""
    offsets, top, tail = [sum(counts[:s]) for s in range(len(counts))], max(counts), tuple(t.shape[2:])
    send = []
    for o, n in zip(offsets, counts):  # each block padded to the largest shard (gloo's scatter takes one size)
        block = t.new_zeros((C, top) + tail)
        block[:, :n] = t[:, o:o + n]
        send.append(block)
    recv = [t.new_empty((C, top) + tail) for _ in counts]
    with torch.no_grad():
        got = dnn.all_to_all(recv, send)
    return torch.cat(got)[:, :counts[rank]].contiguous()


def _world_meta(dnn, local, counts, rank, C):
    """gsplat's distributed meta from the rendered call's (see the module
    docstring)."""
    from . import gsplat as G

    meta = dict(local, n_cameras=C)
    for key in ("radii", "depths", "opacities"):
        if key in meta:
            meta[key] = _to_world(dnn, meta[key], counts, rank, C)
    source = local["means2d"]
    means2d = _to_world(dnn, source.detach(), counts, rank, C)
    if source.requires_grad:
        means2d.requires_grad_(True)
        G._relay_grads(source, means2d, False, lambda _, g: _to_world(dnn, g, counts, rank, C))
    meta["means2d"] = means2d
    return meta
