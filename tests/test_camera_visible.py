"""nurec_ops.camera_visible: the Gaussians a camera can draw, for every
camera model and shutter (the offloaded scene's visible set where
offload.pinhole_visible has no bound). It lies inside the forward's own
binning (its radii > 0, on CPU and CUDA, float32 and float64), rendering
only its Gaussians gives the whole scene's images and gradients
(the real calibrations' FTheta, fisheye and OpenCV cameras, with a rolling
shutter), and for pinholes it lies inside pinhole_visible's bound. Its
reference parity, opcheck, compile, poison and no-sync checks are the
registry's rows (tests/op_cases.py, "visible-*")."""
import pytest
import torch

import nurec_ops
from nurec_ops import offload

import shared_data
import test_camera_models_fused as tm
import test_offload as toff
from bad_inputs import GAUSSIAN_ERRORS, changed, raises_real_and_fake
from conftest import DEVICES, DTYPES, gpu
from test_rolling_shutter import moved

OPS = torch.ops.nurec_ops

KEYS = ("means", "quats", "scales", "opacities")


def _pinhole(seed):
    torch.manual_seed(seed)
    return dict(toff.spread_scene(), near=0.3)


def _model(name):
    def scene(seed):
        s = tm.model_scene(name, N=200, seed=seed)
        s["opacities"][:6] = 1.0 / 300  # never 1/255 anywhere
        return s
    return scene


def _rolling(make, shutter):
    """make's scene with a rolling shutter: its cameras moved by the frame's end."""
    def scene(seed):
        s = make(seed)
        return dict(s, viewmats_end=moved(s["viewmats"]), shutter=shutter)
    return scene


SCENES = {
    "pinhole": (_pinhole, ()),
    "pinhole-rolling": (_rolling(_pinhole, "top_to_bottom"), ()),
    "pinhole-antialiased-eps2d": (lambda seed: dict(_pinhole(seed), antialiased=True, eps2d=1.0), ()),
    "opencv": (_model("opencv"), (tm.MODELS["opencv"][0],)),
    "fisheye": (_model("fisheye"), (tm.MODELS["fisheye"][0],)),
    "ftheta": (_model("ftheta"), (tm.MODELS["ftheta"][0],)),
    "ftheta-rolling": (_rolling(_model("ftheta"), "left_to_right"), (tm.MODELS["ftheta"][0],)),
    "ortho": (_model("ortho"), ()),
}


def scene_of(name, seed):
    make, data = SCENES[name]
    for f in data:
        shared_data.require(f)
    return make(seed)


def _on(s, device, dtype):
    return {k: v.to(device=device, dtype=dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
            for k, v in s.items()}


def _visible(s):
    kw = {k: v for k, v in s.items() if k not in ("features", "sh_degree", "backgrounds")}
    return nurec_ops.camera_visible(*[kw.pop(k) for k in KEYS], kw.pop("viewmats"), kw.pop("Ks"), kw.pop("width"),
                                    kw.pop("height"), **kw)


def _render(s, idx=None, **extra):
    kw = dict(s)
    g = [kw.pop(k) if idx is None else kw.pop(k)[idx] for k in KEYS + ("features",)]
    return nurec_ops.rasterize_camera(*g, kw.pop("viewmats"), kw.pop("Ks"), kw.pop("width"), kw.pop("height"),
                                      **kw, **extra)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(SCENES))
def test_visible_lies_in_the_forwards_binning(name, device, dtype, seed):
    """Every Gaussian camera_visible finds, the forward bins (its radii > 0
    in some camera) on the same device and precision; the binning's extra
    are few (its tile rows' slack); and the scene has Gaussians on both
    sides."""
    s = _on(scene_of(name, seed), device, dtype)
    seen = _visible(s)
    assert seen.dtype == torch.bool and seen.shape == s["opacities"].shape and seen.device == s["means"].device
    meta = _render(s, return_meta=True, binning="exact").meta
    binned = (meta.radii > 0).any(-1).any(0)
    assert not (seen & ~binned).any(), f"{int((seen & ~binned).sum())} visible Gaussians the forward does not bin"
    assert int((binned & ~seen).sum()) <= 0.05 * int(binned.sum()) + 2
    assert 0 < int(seen.sum()) < seen.numel()


@pytest.mark.parametrize("name", list(SCENES))
def test_visible_subset_renders_the_whole_scene(name, seed):
    """Only camera_visible's Gaussians: the whole scene's images (float64)
    and gradients; a Gaussian left out has zero gradient in the whole
    render (so nothing it would have drawn is lost)."""
    s = scene_of(name, seed)
    for k in KEYS + ("features",):
        s[k] = s[k].detach().requires_grad_(True)
    seen = _visible({k: v.detach() if isinstance(v, torch.Tensor) else v for k, v in s.items()})
    idx = seen.nonzero()[:, 0]
    out = (~seen).nonzero()[:, 0]
    assert idx.numel() > 0 and out.numel() > 0
    full, part = _render(s), _render(s, idx)
    for a, b in zip(full, part):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    cot = [torch.randn_like(o) for o in full]
    g_full = torch.autograd.grad(full, [s[k] for k in KEYS + ("features",)], cot)
    g_part = torch.autograd.grad(part, [s[k] for k in KEYS + ("features",)], cot)
    for gf, gp in zip(g_full, g_part):
        torch.testing.assert_close(gf, gp, rtol=1e-10, atol=1e-12)  # gp: zero outside idx
        assert torch.count_nonzero(gf[out]) == 0


@pytest.mark.parametrize("far", [1e10, 6.0])
def test_pinhole_bound_contains_it(far, seed):
    """For pinholes camera_visible is the exact set and pinhole_visible a
    bound around it: every Gaussian the op finds, the bound finds too, and
    the bound takes more (it is not the same test)."""
    s = dict(_pinhole(seed), far=far)
    seen = _visible(s)
    bound = offload.pinhole_visible(s["means"], s["scales"], s["opacities"], s["viewmats"], s["Ks"], s["width"],
                                    s["height"], near=s["near"], far=far)
    assert not (seen & ~bound).any(), f"{int((seen & ~bound).sum())} visible Gaussians outside the bound"
    assert int(bound.sum()) > int(seen.sum()) > 0


@pytest.mark.parametrize("device", DEVICES)
def test_many_cameras_take_no_per_item_memory(device):
    """64 cameras (the 3 of the scene, repeated) over 20,000 Gaussians: the
    3 cameras' set, and on CUDA no buffer per (camera, Gaussian) item (the
    forward's projection would hold C N records of 48 bytes: 61 MB)."""
    torch.manual_seed(0)
    s = _on(toff.spread_scene(N=20_000), device, torch.float32)
    V, K = s["viewmats"], s["Ks"]
    many = dict(s, viewmats=V.repeat(22, 1, 1)[:64], Ks=K.repeat(22, 1, 1)[:64])
    few = _visible(s)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    seen = _visible(many)
    if device == "cuda":
        assert torch.cuda.max_memory_allocated() - before < 1 << 20
    assert torch.equal(seen, few) and 0 < int(seen.sum()) < seen.numel()


# ------------------------------------------------------------------ errors

def _small(device):
    torch.manual_seed(0)
    s = toff.spread_scene(N=10, W=8, H=8)
    s.pop("features")
    return _on(s, device, torch.float64)


ERRORS = GAUSSIAN_ERRORS + [  # the shared rows (tests/bad_inputs.py), then the op's own
    ("near", changed(near=0.0)),
    ("Ks", changed(Ks=lambda s: s["Ks"][:1])),
    ("far", changed(far=0.001, near=0.01)),
    ("eps2d", changed(eps2d=-0.1)),
    ("eps2d", changed(eps2d=float("nan"))),
    ("radius_clip", changed(radius_clip=-1.0)),
    ("radius_clip", changed(radius_clip=float("nan"))),
    ("width", changed(width=-3)),
    ("camera_model", changed(camera_model="kannala_brandt")),
    ("radial", changed(radial=lambda s: s["means"].new_zeros(3, 6))),  # a pinhole takes no model arguments
    ("shutter", changed(shutter="sideways", viewmats_end=lambda s: s["viewmats"])),
    ("viewmats_end", changed(shutter="top_to_bottom", viewmats_end=lambda s: s["viewmats"][:2])),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,make", ERRORS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(ERRORS)])
def test_bad_input(device, name, make):
    raises_real_and_fake(_visible, make(_small(device)), name)


def _raw(s, **kw):
    return OPS.rasterize_camera_visible(s["means"], s["quats"], s["scales"], s["opacities"], s["viewmats"], s["Ks"],
                                        s["width"], s["height"], 0.01, 1e10, **kw)


RAW_ERRORS = [  # the codes and packed tensors the public function builds, given to the op directly
    ("camera_model", dict(camera_model=7)),
    ("model_params", dict(camera_model=3)),
    ("model_params", dict(camera_model=3, model_params=lambda s: s["means"].new_zeros(3, 19))),
    ("shutter", dict(shutter=9)),
    ("viewmats_end", dict(shutter=1)),
    ("viewmats_end", dict(shutter=1, viewmats_end=lambda s: s["viewmats"].float())),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,kw", RAW_ERRORS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(RAW_ERRORS)])
def test_bad_packed_input(device, name, kw):
    s = _small(device)
    bad = dict(s, **{k: v(s) if callable(v) else v for k, v in kw.items()})
    raises_real_and_fake(lambda x: _raw(x, **{k: x[k] for k in kw}), bad, name)


@gpu
def test_mixed_devices():
    s = _small("cuda")
    s["Ks"] = s["Ks"].cpu()
    with pytest.raises(RuntimeError, match="`Ks`"):
        _visible(s)
