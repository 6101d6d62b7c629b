"""gsplat's ``distributed=True`` through the front end (nurec_ops.gsplat,
nurec_ops._gsplat_distributed): two ranks (gloo, CPU, two processes), each
with its own shard of the Gaussians (70 and 60: unequal) and its own two
cameras, against one process rendering every camera with every Gaussian:
- each rank's images are that process's images of its cameras;
- each rank's Gaussian gradients are that process's gradients of the sum of
  the ranks' losses, restricted to its shard (summed over every rank's
  cameras);
- meta is gsplat's layout, per (world camera, local Gaussian): radii,
  depths, opacities and means2d with its gradient are the single process's
  columns of the shard; packed, the items with global camera ids and local
  Gaussian ids; n_cameras the local count.
Without an initialized process group, and for what gsplat too refuses in
distributed mode, an error naming the argument."""
import os
import subprocess
import sys

import pytest
import torch

from nurec_ops.gsplat import rasterization

from gsplat_distributed_scene import SHARD_SPLIT, loss_weights, scene
from tolerances import assert_close

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _run_ranks(tmp_path, packed, device, world=2):
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(p for p in (ROOT, HERE, os.environ.get("PYTHONPATH", "")) if p))
    init = str(tmp_path / "init")
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "gsplat_distributed_worker.py"), str(r), str(world),
                               init, str(tmp_path), "1" if packed else "0", device], env=env,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(world)]
    logs = [p.communicate(timeout=240)[0] for p in procs]
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log[-3000:]
    return [torch.load(str(tmp_path / f"rank{r}.pt")) for r in range(world)]


@pytest.fixture(scope="module")
def cpu_ranks(tmp_path_factory):
    """The gloo ranks' results, packed and not, each run once for the tests
    that read them."""
    runs = {}

    def get(packed):
        if packed not in runs:
            runs[packed] = _run_ranks(tmp_path_factory.mktemp(f"ranks_packed{int(packed)}"), packed, "cpu")
        return runs[packed]
    return get


def _one_process():
    """Every camera with every Gaussian in one call; the loss the ranks' losses' sum."""
    s = scene()
    leaves = {k: s[k].clone().requires_grad_() for k in ("means", "quats", "scales", "opacities", "colors")}
    img, alpha, meta = rasterization(**leaves, viewmats=s["viewmats"], Ks=s["Ks"], width=s["width"],
                                     height=s["height"], packed=False, render_mode="RGB+D")
    C = img.shape[0] // 2
    loss = 0
    for r in range(2):
        w_img, w_alpha = loss_weights(img[r * C:(r + 1) * C].shape, r)
        loss = loss + (img[r * C:(r + 1) * C] * w_img).sum() + (alpha[r * C:(r + 1) * C] * w_alpha).sum()
    loss.backward()
    return img.detach(), alpha.detach(), meta, {k: v.grad for k, v in leaves.items()}, C


TWO_GPUS = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                              reason="NCCL ranks need two CUDA devices")
RANK_DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, TWO_GPUS])]


@pytest.mark.parametrize("device", RANK_DEVICES)
@pytest.mark.parametrize("packed", [False, True])
def test_two_ranks_are_one_process(tmp_path, cpu_ranks, packed, device):
    """On the CPU through gloo, on two GPUs through NCCL (against the CPU's
    single process, to float64 tolerance)."""
    ranks = cpu_ranks(packed) if device == "cpu" else _run_ranks(tmp_path, packed, device)
    img, alpha, meta, grads, C = _one_process()
    radii = meta["radii"]
    for r, got in enumerate(ranks):
        lo, hi = SHARD_SPLIT[r], SHARD_SPLIT[r + 1]
        assert_close(got["img"], img[r * C:(r + 1) * C], torch.float64)
        assert_close(got["alpha"], alpha[r * C:(r + 1) * C], torch.float64)
        for k, g in grads.items():
            assert_close(got["grads"][k], g[lo:hi], torch.float64)
        assert got["grads"]["means"].abs().sum() > 0
        assert got["n_cameras"] == C
        mine = radii[:, lo:hi]  # [C_world, N_local, 2]
        kept = (mine > 0).all(-1)
        assert kept.any() and not kept.all()
        if packed:
            cam, gid = kept.nonzero(as_tuple=True)
            assert torch.equal(got["camera_ids"], cam) and torch.equal(got["gaussian_ids"], gid)
            assert torch.equal(got["radii"], mine[kept])
            assert_close(got["depths"], meta["depths"][:, lo:hi][kept], torch.float64)
            assert_close(got["means2d"], meta["means2d"][:, lo:hi][kept].detach(), torch.float64)
            assert_close(got["means2d_grad"], meta["means2d"].grad[:, lo:hi][kept], torch.float64)
            assert_close(got["opacities"], meta["opacities"][:, lo:hi][kept], torch.float64)
        else:
            assert got["camera_ids"] is None and got["gaussian_ids"] is None
            assert torch.equal(got["radii"], mine)
            assert_close(got["depths"], meta["depths"][:, lo:hi], torch.float64)
            assert_close(got["means2d"], meta["means2d"][:, lo:hi].detach(), torch.float64)
            assert_close(got["means2d_grad"], meta["means2d"].grad[:, lo:hi], torch.float64)
            assert_close(got["opacities"], meta["opacities"][:, lo:hi], torch.float64)
        # the other rank's cameras reach this shard's projections: their gradient rows are not zero
        other = slice((1 - r) * C, (2 - r) * C)
        assert meta["means2d"].grad[other, lo:hi].abs().sum() > 0


def test_needs_a_process_group():
    s = scene()
    with pytest.raises(RuntimeError, match="process group"):
        rasterization(s["means"], s["quats"], s["scales"], s["opacities"], s["colors"], s["viewmats"], s["Ks"],
                      s["width"], s["height"], distributed=True)


@pytest.mark.parametrize("kw,name", [(dict(absgrad=True), "absgrad"), (dict(sparse_grad=True), "sparse_grad"),
                                     (dict(per_camera=True), "colors"), (dict(batch=True), "means")])
def test_refuses_what_gsplat_refuses_there(kw, name):
    """absgrad, per-camera colours and batch dimensions gsplat asserts
    against in distributed mode (sparse gradients: not there): an error
    naming the argument, before any collective."""
    s = scene()
    args = [s[k] for k in ("means", "quats", "scales", "opacities", "colors", "viewmats", "Ks")]
    if kw.pop("per_camera", False):
        args[4] = args[4][None].expand(4, -1, -1)
    if kw.pop("batch", False):
        args = [a[None] for a in args]
    with pytest.raises(NotImplementedError, match=f"`{name}="):
        rasterization(*args, s["width"], s["height"], distributed=True, **kw)


@pytest.mark.parametrize("packed", [False, True])
def test_default_strategy_on_each_ranks_meta(cpu_ranks, packed):
    """gsplat's DefaultStrategy updating its statistics from each rank's meta
    (what gsplat's trainer runs with world_size > 1): per local Gaussian the
    single process's statistics of those Gaussians over every camera: the
    same counts, and gradient norms 1 / world_size of its (the strategy
    scales by meta's n_cameras, the local count in distributed mode, as in
    gsplat)."""
    strategy = pytest.importorskip("gsplat.strategy")
    ranks = cpu_ranks(packed)
    _, _, meta, _, C = _one_process()
    s = scene()

    def statistics(means2d, grad, radii, n_cameras, gaussian_ids, n, packed):
        leaf = means2d.float().requires_grad_()
        leaf.grad = grad.float()
        info = dict(width=s["width"], height=s["height"], n_cameras=n_cameras, radii=radii,
                    gaussian_ids=gaussian_ids, means2d=leaf)
        state = {"grad2d": None, "count": None, "radii": None}
        strategy.DefaultStrategy()._update_state({"means": torch.zeros(n, 3)}, state, info, packed=packed)
        return state

    one = statistics(meta["means2d"].detach(), meta["means2d"].grad, meta["radii"], meta["n_cameras"], None, 130,
                     False)
    for r, got in enumerate(ranks):
        lo, hi = SHARD_SPLIT[r], SHARD_SPLIT[r + 1]
        mine = statistics(got["means2d"], got["means2d_grad"], got["radii"], got["n_cameras"], got["gaussian_ids"],
                          hi - lo, packed)
        assert torch.equal(mine["count"], one["count"][lo:hi]) and mine["count"].sum() > 0
        assert_close(mine["grad2d"] * 2, one["grad2d"][lo:hi], torch.float32)
