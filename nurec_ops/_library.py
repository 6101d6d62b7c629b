"""Loads the compiled operator library (nurec_ops/_C*.so).

The library has no Python C API in it (PyTorch stable ABI only), so it is
loaded with torch.ops.load_library rather than imported; its operators then
live under torch.ops.nurec_ops.
"""
import collections
import glob
import os

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))


def _find_library():
    candidates = sorted(glob.glob(os.path.join(_HERE, "_C*.so")) + glob.glob(os.path.join(_HERE, "_C*.pyd")))
    if not candidates:
        raise ImportError(
            "nurec_ops: the compiled library (nurec_ops/_C*.so) is missing; build it with "
            "`pip install --no-build-isolation -e .` (see README.md)"
        )
    return candidates[0]


LIBRARY_PATH = _find_library()
torch.ops.load_library(LIBRARY_PATH)

ops = torch.ops.nurec_ops


def has_cuda_kernels() -> bool:
    """True when this build registered CUDA kernels (built with nvcc)."""
    return torch._C._dispatch_has_kernel_for_dispatch_key("nurec_ops::collect_gaussian_parameters", "CUDA")


_BelowAutograd = torch._C._AutoDispatchBelowAutograd


class AutogradOp:
    """One of our ops with its backward: registered with
    ``torch.library.register_autograd`` (for ``torch.ops.nurec_ops.*``,
    torch.compile and opcheck), and callable itself, which is how the Python
    wrappers call it in eager mode.

    Why a second way in: the registered autograd kernel is Python that, on
    every call, re-reads the op's schema argument by argument
    (``torch._library.utils.fill_defaults``: the schema's argument list is
    rebuilt at each index, quadratic in the arguments) and redispatches
    through ``OpOverload``. For the lidar rasterizer's 15 arguments that was
    ~80 of the ~107 us a tiny CPU call took on our 2-core machine, and the H200
    machine's host runs such code 3-4x slower: time before the first kernel
    starts and between steps. A call here goes through a plain
    ``torch.autograd.Function`` with the same ``setup_context`` and
    ``backward`` when a gradient is wanted, and straight to the operator's
    C++ entry below autograd when not; under torch.compile it is the op
    itself. Pass every argument of the schema, positionally."""

    __slots__ = ("op", "_entry", "_function")

    def __init__(self, name, backward, setup_context):
        torch.library.register_autograd(f"nurec_ops::{name}", backward, setup_context=setup_context)
        self.op = getattr(ops, name)
        self._entry = self.op.default._op  # the dispatcher entry behind the OpOverload
        entry = self._entry

        # forward(ctx, ...) with setup_context called inside, not a separate
        # setup_context staticmethod: with one, every apply binds the
        # arguments to forward's signature through inspect (~40 us per call
        # on the 2-core machine).
        def forward(ctx, *args):
            with _BelowAutograd():
                out = entry(*args)
            setup_context(ctx, args, out)
            return out

        self._function = type(f"{name}_function", (torch.autograd.Function,), {
            "forward": staticmethod(forward), "backward": staticmethod(backward)})

    def __call__(self, *args):
        if torch.compiler.is_compiling():
            return self.op(*args)
        if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            return self._function.apply(*args)
        with _BelowAutograd():
            return self._entry(*args)


def named_outputs(op_name, count, rename=None, extra=()):
    """A namedtuple type for the first `count` outputs of op `op_name`, its
    fields named as the op's schema names them (``rename`` maps a schema
    name to the public one), plus ``extra`` fields: the rasterizers return
    these (positional order unchanged)."""
    rename = rename or {}
    returns = getattr(ops, op_name).default._schema.returns[:count]
    fields = [rename.get(r.name, r.name) for r in returns] + list(extra)
    return collections.namedtuple(op_name.replace("_fwd", "") + "_outputs" + "".join("_" + e for e in extra), fields)
