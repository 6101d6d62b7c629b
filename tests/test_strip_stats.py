"""benchmarks/device/camera_strip_stats.py's count of a per-splat backward against
ours, on entries made by hand (the script itself walks the garden and the
street on the CPU, minutes; it is run by hand, not in the suite)."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "device"))
import camera_strip_stats as css  # noqa: E402


def test_per_splat_counts():
    # three tiles of 33, 1 and 32 walked entries: buckets of 32 -> 2 + 1 + 1
    tile = torch.tensor([0] * 33 + [5] + [7] * 32)
    box = torch.zeros(len(tile), 4, dtype=torch.bool)
    box[:33, :] = True  # the first tile's entries meet all four 8 x 8 warps
    box[33, 2] = True  # the lone entry one warp
    box[34:, :2] = True  # the last tile's entries two
    (ev_o, rows_o), (ev_s, rows_s) = css.per_splat_counts(tile, box)
    warps = 33 * 4 + 1 + 32 * 2
    assert (ev_o, rows_o) == (warps * 64, warps)
    assert (ev_s, rows_s) == (4 * 32 * (256 + 31), 66)


def test_stacked_pairs_and_loop_instructions():
    # a tile's 8 x 4 blocks, row-major, 2 a row: entry 0 meets blocks (0, 0)
    # and (3, 1); entry 1 rows 1-2 of column 0; entry 2 the whole tile
    box = torch.zeros(3, 8, dtype=torch.bool)
    box[0, [0, 7]] = True
    box[1, [2, 4]] = True
    box[2, :] = True
    # warps of 2 stacked blocks (rows 0-1, 2-3 of a column): 2 + 2 + 4 pairs;
    # of 4 (a whole column): 2 + 1 + 2
    assert [css.stacked_pairs(box, k) for k in (1, 2, 4)] == [12, 8, 5]
    blocks = 2 + 2 + 8
    assert css.loop_instructions(box, 2) == 8 * css.PER_PAIR + blocks * css.PER_BLOCK
    assert css.loop_instructions(box, 4) == 5 * css.PER_PAIR + blocks * css.PER_BLOCK
