"""The error tables' helpers: a scene with named inputs replaced, and the
check that the op and its fake kernel both reject it by name."""
import pytest
import torch

def changed(**change):
    """A maker of bad inputs for the error tables: the scene with each named
    input replaced (by a value, or by a function of the scene)."""
    def make(s):
        s = dict(s)
        for k, v in change.items():
            s[k] = v(s) if callable(v) else v
        return s
    return make


def raises_real_and_fake(call, bad, name):
    """``call(bad)`` raises a RuntimeError naming `name`, and so does the
    op's fake kernel (the same message) on fake copies of ``bad``'s tensors."""
    with pytest.raises(RuntimeError, match=f"`{name}`"):
        call(bad)
    mode = torch._subclasses.fake_tensor.FakeTensorMode()
    fake = {k: (mode.from_tensor(v) if isinstance(v, torch.Tensor) else v) for k, v in bad.items()}
    with pytest.raises(RuntimeError, match=f"`{name}`"):
        with mode:
            call(fake)


def _one_more(name):
    return lambda s: torch.cat([s[name], s[name][:1]])


# Bad Gaussians and sensor poses that every rasterizer (camera, lidar, rays,
# camera_visible) refuses by name: one table, spliced into each op's own
# (its scene in float64, N Gaussians, C sensors). Ranges are each op's own:
# the projecting ones need near > 0, the rays near >= 0.
GAUSSIAN_ERRORS = [
    ("means", changed(means=lambda s: s["means"][:, :2])),
    ("means", changed(means=lambda s: s["means"].to(torch.int64))),
    ("quats", changed(quats=lambda s: s["quats"][:-1])),
    ("quats", changed(quats=lambda s: s["quats"][:, :3])),
    ("scales", changed(scales=lambda s: s["scales"].float())),
    ("scales", changed(scales=_one_more("scales"))),
    ("opacities", changed(opacities=lambda s: s["opacities"][:, None])),
    ("opacities", changed(opacities=_one_more("opacities"))),
    ("viewmats", changed(viewmats=lambda s: s["viewmats"][:, :3])),
    ("viewmats", changed(viewmats=lambda s: s["viewmats"].float())),
]
