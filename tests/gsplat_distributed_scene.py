"""The scene tests/test_gsplat_distributed.py and its ranks share: 130
Gaussians split 70 / 60 between two ranks (unequal: the all-gather pads),
four cameras (two a rank), and each rank's loss weights, all drawn from
fixed seeds so that every process makes the same ones."""
import torch

import test_rasterize_camera as tc

SHARD_SPLIT = (0, 70, 130)


def scene():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(11)
        s = tc.random_scene(N=130, C=4, W=32, H=24, D=3)
    s["colors"] = s.pop("features")
    return s


def loss_weights(shape, rank):
    """Rank rank's weights on its image [C, H, W, 4] (RGB+D) and alpha."""
    g = torch.Generator().manual_seed(100 + rank)
    return (torch.rand(shape, generator=g, dtype=torch.float64),
            torch.rand(shape[:-1] + (1,), generator=g, dtype=torch.float64))
