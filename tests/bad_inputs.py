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
