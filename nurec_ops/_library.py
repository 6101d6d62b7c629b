"""Loads the compiled operator library (nurec_ops/_C*.so).

The library has no Python C API in it (PyTorch stable ABI only), so it is
loaded with torch.ops.load_library rather than imported; its operators then
live under torch.ops.nurec_ops.
"""
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
