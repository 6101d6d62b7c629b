"""The sync-free binning's capacity rule (nurec_ops/_binning.py), on its
own: what capacity a configuration gets from the counts its calls
reported. Pure host logic, so it runs without a GPU; the policy on real
calls (overflow, NaN outputs, warnings) is test_op_registry's
test_overflow_policy. On the H100, bench_rasterize_rays alternating three
ray patterns of one size (0.39M, 2.1M and 5.9M intersections) under the
old rule (shrink as soon as one report needs 2.5x less) overflowed the
bigger ones' calls into NaN again and again."""
import random

import pytest
import torch

from nurec_ops import _binning as B

KEY = (0, ("test", 1, 100))


def fresh():
    return B.CapacityPolicy("test_op")


def test_first_report_sets_the_target():
    pol = fresh()
    pol.update(KEY, 1_000_000, work=10)
    assert pol.capacity[KEY] == pol.target(1_000_000)
    pol.update((0, ("other",)), 10)
    assert pol.capacity[(0, ("other",))] == B.MIN_CAPACITY


def test_grows_at_once():
    pol = fresh()
    pol.update(KEY, 1_000_000)
    pol.update(KEY, 3_000_000)
    assert pol.capacity[KEY] == pol.target(3_000_000)


@pytest.mark.parametrize("period", [2, 3, B.SHRINK_WINDOW])
def test_alternating_scenes_keep_the_big_capacity(period):
    """A big call every `period` calls among small ones (2.8x fewer
    intersections): never shrunk below the big one's need."""
    pol = fresh()
    big, small = 5_927_181, 2_119_179
    for i in range(10 * B.SHRINK_WINDOW):
        pol.update(KEY, big if i % period == 0 else small)
        assert pol.capacity[KEY] >= big, i


def test_shrinks_after_a_window_of_small_reports():
    pol = fresh()
    pol.update(KEY, 10_000_000)
    for i in range(B.SHRINK_WINDOW - 1):
        pol.update(KEY, 1_000_000)
        assert pol.capacity[KEY] == pol.target(10_000_000), i  # still in the window
    pol.update(KEY, 1_000_000)
    assert pol.capacity[KEY] == pol.target(1_000_000)


def test_no_shrink_within_the_factor():
    pol = fresh()
    pol.update(KEY, 2_000_000)
    for _ in range(3 * B.SHRINK_WINDOW):
        pol.update(KEY, 1_000_000)  # 2x less: inside SHRINK_FACTOR, no reallocation
    assert pol.capacity[KEY] == pol.target(2_000_000)


def test_random_reports_never_below_the_last_need():
    """Whatever the sequence, the capacity after a report covers that
    report's need (the next call of the same scene cannot overflow) and
    never exceeds SHRINK_FACTOR times the window's largest need for long."""
    rng = random.Random(torch.initial_seed())
    pol = fresh()
    window = []
    for _ in range(500):
        need = rng.choice([rng.randrange(1, 10**7), rng.randrange(1, 10**5)])
        pol.update(KEY, need)
        window = (window + [pol.target(need)])[-B.SHRINK_WINDOW:]
        cap = pol.capacity[KEY]
        assert cap >= pol.target(need)
        if len(window) == B.SHRINK_WINDOW:
            assert cap <= max(B.MIN_CAPACITY, B.SHRINK_FACTOR * max(window))


def test_more_work_scales_the_last_rate():
    """A call with more Gaussians than the last report saw (densification)
    gets that report's intersections per Gaussian times its own count; with
    less it keeps the capacity. (A CUDA device object only names the key:
    nothing here touches a GPU.)"""
    pol = fresh()
    dev = torch.device("cuda", 0)
    pol.update(KEY, 1_000_000, work=1000)
    assert pol.capacity_for(dev, KEY[1], 1000) == pol.target(1_000_000)
    assert pol.capacity_for(dev, KEY[1], 500) == pol.target(1_000_000)
    assert pol.capacity_for(dev, KEY[1], 3000) == pol.target(3_000_000)
    assert pol.capacity_for(dev, ("never seen",), 10) is None
