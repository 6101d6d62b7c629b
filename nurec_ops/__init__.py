"""nurec_ops: fused operators for neural reconstruction of driving scenes with
3D Gaussian splatting (CPU kernels in C, CUDA kernels), registered with the
PyTorch dispatcher under torch.ops.nurec_ops.

The pure-PyTorch twins of every op are in nurec_ops.reference."""
from ._version import __version__
from . import _library
from ._library import has_cuda_kernels
from .collect import collect, collect_gaussian_parameters
from .covariance import quat_scale_to_covar_preci
from .offload_rows import adam_rows_, gather_rows, put_rows_
from . import offload_rows
from .track_poses import interpolate_track_poses
from .rasterize_camera import camera_visible, rasterize_camera
from .rasterize_lidar import rasterize_lidar
from .rasterize_rays import rasterize_rays, suggest_ray_grid
from . import reference
from . import diagnose
from .nvtx import set_nvtx
from .swap import Swap, swap
from ._compile_cache import package_files as _package_files, tag_compile_cache as _tag_compile_cache

# After every op and fake kernel above is registered: see _compile_cache.py.
_tag_compile_cache("nurec_ops", _package_files())

__all__ = [
    "__version__",
    "interpolate_track_poses",
    "collect_gaussian_parameters",
    "collect",
    "rasterize_camera",
    "camera_visible",
    "rasterize_lidar",
    "rasterize_rays",
    "suggest_ray_grid",
    "quat_scale_to_covar_preci",
    "gather_rows",
    "adam_rows_",
    "put_rows_",
    "offload_rows",
    "reference",
    "has_cuda_kernels",
    "diagnose",
    "set_nvtx",
    "swap",
    "Swap",
]
