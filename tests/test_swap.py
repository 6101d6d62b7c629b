"""nurec_ops.swap (SPEC section 5): replaces the reference ops a training loop
calls through (a module, a class or an object) by the fused ops, restores
them, refuses a function whose signature is not the reference's, reports
what it swapped."""
import types

import pytest
import torch

import nurec_ops
from nurec_ops import reference

from random_scenes import make_gaussians, make_tracks, query_times_for

OPS = ("collect", "rasterize_camera", "interpolate_track_poses")


def _trainer_module():
    m = types.ModuleType("my_trainer")
    for name in OPS:
        setattr(m, name, getattr(reference, name))
    m.helper = lambda x: x  # not an op: never touched
    return m


class Trainer:
    """A trainer that holds its ops as static methods and calls self.op(...)."""

    collect = staticmethod(reference.collect)
    rasterize_camera = staticmethod(reference.rasterize_camera)

    def step(self, *args):
        return self.collect(*args)


class SubTrainer(Trainer):
    pass


def _collect_args():
    tr = make_tracks(num_tracks=3, min_keys=2, max_keys=5)
    g = make_gaussians(20, 3)
    q = query_times_for(tr, broadcast=True)
    return (g["means"], g["quats"], g["log_scales"], g["opacity_logits"], g["track_ids"], tr["key_poses"],
            tr["key_times"], tr["track_ranges"], q)


def test_module_replaced_and_restored():
    m = _trainer_module()
    helper = m.helper
    with nurec_ops.swap(m) as s:
        assert s.swapped == ["interpolate_track_poses", "collect", "rasterize_camera"]
        assert m.collect is nurec_ops.collect
        assert m.rasterize_camera is nurec_ops.rasterize_camera
        assert m.interpolate_track_poses is nurec_ops.interpolate_track_poses
        assert m.helper is helper
        text = repr(s)
        assert "module my_trainer" in text and "collect" in text and "rasterize_camera" in text
        # the swapped function computes what the reference does
        args = _collect_args()
        for a, b in zip(m.collect(*args), reference.collect(*args)):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)
    assert m.collect is reference.collect
    assert m.rasterize_camera is reference.rasterize_camera
    assert m.interpolate_track_poses is reference.interpolate_track_poses
    assert not hasattr(m, "rasterize_lidar") or m.rasterize_lidar is reference.rasterize_lidar


def test_restore_without_with_and_on_exception():
    m = _trainer_module()
    s = nurec_ops.swap(m, names=["collect"])
    assert m.collect is nurec_ops.collect
    s.restore()
    assert m.collect is reference.collect
    s.restore()  # a second restore changes nothing
    assert m.collect is reference.collect
    with pytest.raises(KeyError):
        with nurec_ops.swap(m):
            assert m.collect is nurec_ops.collect
            raise KeyError("boom")
    assert m.collect is reference.collect and m.rasterize_camera is reference.rasterize_camera


def test_class_replaced_and_restored():
    args = _collect_args()
    with nurec_ops.swap(Trainer) as s:
        assert s.swapped == ["collect", "rasterize_camera"]
        assert Trainer.collect is nurec_ops.collect
        # instances call it unbound (no `self` slipped in as `means`)
        assert Trainer().collect is nurec_ops.collect
        out = Trainer().step(*args)
        for a, b in zip(out, reference.collect(*args)):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)
        assert "class Trainer" in repr(s)
    assert Trainer.collect is reference.collect
    assert isinstance(Trainer.__dict__["collect"], staticmethod)  # restored as it was
    Trainer().step(*args)


def test_subclass_restores_to_inherited():
    with nurec_ops.swap(SubTrainer, names=["collect"]):
        assert SubTrainer.collect is nurec_ops.collect
        assert Trainer.collect is reference.collect  # the base class is untouched
    assert "collect" not in SubTrainer.__dict__
    assert SubTrainer().collect is reference.collect


def test_object_replaced_and_restored():
    t = Trainer()
    other = Trainer()
    args = _collect_args()
    with nurec_ops.swap(t) as s:
        assert s.swapped == ["collect", "rasterize_camera"]
        assert t.collect is nurec_ops.collect and t.rasterize_camera is nurec_ops.rasterize_camera
        assert other.collect is reference.collect  # only this object
        assert Trainer.collect is reference.collect
        t.step(*args)
        assert "Trainer object" in repr(s)
    assert "collect" not in vars(t) and t.collect is reference.collect

    # an object holding the ops as its own attributes
    ns = types.SimpleNamespace(collect=reference.collect, rasterize_camera=reference.rasterize_camera)
    with nurec_ops.swap(ns, names=["rasterize_camera"]) as s:
        assert s.swapped == ["rasterize_camera"]
        assert ns.rasterize_camera is nurec_ops.rasterize_camera and ns.collect is reference.collect
    assert ns.rasterize_camera is reference.rasterize_camera


def test_bound_method_with_reference_signature():
    class Methods:
        def collect(self, means, quats, log_scales, opacity_logits, track_ids, key_poses, key_times, track_ranges,
                    query_times, mode="slerp"):
            return reference.collect(means, quats, log_scales, opacity_logits, track_ids, key_poses, key_times,
                                     track_ranges, query_times, mode)

    obj = Methods()
    with nurec_ops.swap(obj) as s:
        assert s.swapped == ["collect"] and obj.collect is nurec_ops.collect
    assert obj.collect.__func__ is Methods.collect


def test_refuses_mismatched_signature_without_changing_anything():
    m = _trainer_module()

    def rasterize_camera(means, quats, scales, opacities, colors, viewmats, Ks, width, height):  # renamed, no near/far
        return reference.rasterize_camera(means, quats, scales, opacities, colors, viewmats, Ks, width, height)

    m.rasterize_camera = rasterize_camera
    with pytest.raises(TypeError, match=r"my_trainer\.rasterize_camera has signature .*colors.*refusing"):
        nurec_ops.swap(m)
    assert m.collect is reference.collect  # checked before anything changed
    assert m.interpolate_track_poses is reference.interpolate_track_poses
    assert m.rasterize_camera is rasterize_camera

    def collect(means, quats, log_scales, opacity_logits, track_ids, key_poses, key_times, track_ranges,
                query_times, mode="nearest"):  # a different default is a different function
        return None

    m2 = _trainer_module()
    m2.collect = collect
    with pytest.raises(TypeError, match="collect"):
        nurec_ops.swap(m2, names=["collect"])
    assert m2.collect is collect

    m3 = _trainer_module()
    m3.collect = len  # a builtin: no signature to compare
    with pytest.raises(TypeError):
        nurec_ops.swap(m3)
    assert m3.collect is len and m3.rasterize_camera is reference.rasterize_camera


def test_not_callable_and_unknown_names():
    m = _trainer_module()
    with pytest.raises(ValueError, match="not a swappable op"):
        nurec_ops.swap(m, names=["rasterize_fisheye"])
    with pytest.raises(ValueError, match="not a swappable op"):
        nurec_ops.swap(m, names=["helper"])
    assert m.collect is reference.collect

    only_collect = types.SimpleNamespace(collect=reference.collect)
    with pytest.raises(AttributeError, match="rasterize_camera"):
        nurec_ops.swap(only_collect, names=["collect", "rasterize_camera"])
    assert only_collect.collect is reference.collect

    with pytest.raises(ValueError, match="has none of"):
        nurec_ops.swap(types.SimpleNamespace(train=lambda: None))

    bad = types.SimpleNamespace(collect=3)
    with pytest.raises(TypeError, match="not callable"):
        nurec_ops.swap(bad)
    assert bad.collect == 3


def test_names_restriction():
    m = _trainer_module()
    with nurec_ops.swap(m, names=("rasterize_camera",)) as s:
        assert s.swapped == ["rasterize_camera"]
        assert m.rasterize_camera is nurec_ops.rasterize_camera
        assert m.collect is reference.collect and m.interpolate_track_poses is reference.interpolate_track_poses
    assert m.rasterize_camera is reference.rasterize_camera


def test_nested_swaps_restore_in_order():
    m = _trainer_module()
    with nurec_ops.swap(m, names=["collect"]):
        with nurec_ops.swap(m, names=["rasterize_camera"]):
            assert m.collect is nurec_ops.collect and m.rasterize_camera is nurec_ops.rasterize_camera
        assert m.collect is nurec_ops.collect and m.rasterize_camera is reference.rasterize_camera
    assert m.collect is reference.collect


def test_every_reference_op_has_the_fused_signature():
    """The contract that makes the swap possible: identical signatures (the
    fused ops may add keyword-only extras after them)."""
    import importlib
    import inspect

    for name in importlib.import_module("nurec_ops.swap").SWAPPABLE:
        ref, fused = getattr(reference, name, None), getattr(nurec_ops, name, None)
        if ref is None or fused is None:
            continue
        kw = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_KEYWORD)
        rp = [p for p in inspect.signature(ref).parameters.values() if p.kind not in kw]
        fp = [p for p in inspect.signature(fused).parameters.values() if p.kind not in kw]
        assert [(p.name, p.default) for p in rp] == [(p.name, p.default) for p in fp], name
        # and every keyword the reference takes, the fused op takes too (with the same default)
        fkw = inspect.signature(fused).parameters
        for p in inspect.signature(ref).parameters.values():
            if p.kind in kw:
                assert p.name in fkw and fkw[p.name].kind == p.kind and fkw[p.name].default == p.default, (name, p)


def test_every_op_has_its_kernels_registered():
    """Each family registers its own schemas and kernels (csrc/<family>/
    <family>_register.cpp): every nurec_ops operator has a CPU kernel, and a
    CUDA kernel in a build with CUDA (checked from the dispatcher, so this
    runs without a GPU)."""
    import torch
    import nurec_ops
    names = sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith("nurec_ops::"))
    assert len(names) >= 11, names
    cuda = nurec_ops.has_cuda_kernels()
    for n in names:
        assert torch._C._dispatch_has_kernel_for_dispatch_key(n, "CPU"), n
        if cuda:
            assert torch._C._dispatch_has_kernel_for_dispatch_key(n, "CUDA"), n


def test_covariances_swapped():
    """gsplat's quat_scale_to_covar_preci, as a trainer's MCMC noise calls it,
    is swapped for the fused op, which gives the reference's values."""
    m = types.ModuleType("my_mcmc")
    m.quat_scale_to_covar_preci = reference.quat_scale_to_covar_preci
    q, s = torch.randn(50, 4, dtype=torch.float64), torch.rand(50, 3, dtype=torch.float64) + 0.1
    with nurec_ops.swap(m) as sw:
        assert sw.swapped == ["quat_scale_to_covar_preci"]
        assert m.quat_scale_to_covar_preci is nurec_ops.quat_scale_to_covar_preci
        got, want = m.quat_scale_to_covar_preci(q, s, triu=True), reference.quat_scale_to_covar_preci(q, s, triu=True)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    assert m.quat_scale_to_covar_preci is reference.quat_scale_to_covar_preci
