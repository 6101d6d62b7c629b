"""One rank of tests/test_gsplat_distributed.py: the front end with
``distributed=True`` on its shard of a shared scene (gloo, CPU), one
backward of its own loss, everything the test compares saved to
``<out>/rank<r>.pt``. Run as ``python gsplat_distributed_worker.py RANK
WORLD INIT_FILE OUT PACKED DEVICE`` (DEVICE cpu: gloo; cuda: NCCL, rank r
on GPU r)."""
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gsplat_distributed_scene import SHARD_SPLIT, loss_weights, scene  # noqa: E402

from nurec_ops.gsplat import rasterization  # noqa: E402


def main(rank, world, init_file, out, packed, device):
    if device == "cuda":
        torch.cuda.set_device(rank)
    dist.init_process_group("nccl" if device == "cuda" else "gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    s = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in scene().items()}
    lo, hi = SHARD_SPLIT[rank], SHARD_SPLIT[rank + 1]
    C = s["viewmats"].shape[0] // world
    mine = {k: s[k][lo:hi].clone().requires_grad_() for k in ("means", "quats", "scales", "opacities", "colors")}
    img, alpha, meta = rasterization(**mine, viewmats=s["viewmats"][rank * C:(rank + 1) * C],
                                     Ks=s["Ks"][rank * C:(rank + 1) * C], width=s["width"], height=s["height"],
                                     packed=packed, distributed=True, render_mode="RGB+D")
    w_img, w_alpha = (w.to(device) for w in loss_weights(img.shape, rank))
    ((img * w_img).sum() + (alpha * w_alpha).sum()).backward()
    saved = dict(img=img.detach(), alpha=alpha.detach(), radii=meta["radii"], depths=meta["depths"],
                 means2d=meta["means2d"].detach(), means2d_grad=meta["means2d"].grad, n_cameras=meta["n_cameras"],
                 grads={k: v.grad for k, v in mine.items()})
    for key in ("camera_ids", "gaussian_ids", "opacities"):
        saved[key] = meta[key]
    torch.save(_cpu(saved), os.path.join(out, f"rank{rank}.pt"))
    dist.destroy_process_group()


def _cpu(x):
    if isinstance(x, dict):
        return {k: _cpu(v) for k, v in x.items()}
    return x.cpu() if isinstance(x, torch.Tensor) else x


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5] == "1", sys.argv[6])
