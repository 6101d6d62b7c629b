"""Pure-PyTorch reference ops with exactly the signatures of the fused ops:
the parity oracle of the tests, the baseline of the benchmarks, and what a
training loop uses before it swaps the fused ops in."""
from .collect import collect, collect_gaussian_parameters
from .covariance import quat_scale_to_covar_preci
from .offload_rows import adam_rows_, gather_rows, put_rows_
from .track_poses import interpolate_track_poses
from .rasterize_camera import camera_visible, rasterize_camera
from .rasterize_lidar import rasterize_lidar
from .rasterize_rays import rasterize_rays

__all__ = ["interpolate_track_poses", "collect_gaussian_parameters", "collect", "rasterize_camera", "camera_visible",
           "rasterize_lidar", "rasterize_rays", "quat_scale_to_covar_preci", "gather_rows", "adam_rows_", "put_rows_"]
