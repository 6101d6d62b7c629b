"""Real inputs from other projects, read where they lie (../shared/data/ of
the checkout, or NUREC_OPS_SHARED_DATA): gsplat's garden fixture and its
real sensor calibrations (Apache-2.0, see ORIGIN.md there). They are never
copied into this repository; a test that needs one skips, saying so, where
they are absent."""
import os

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CANDIDATES = [os.environ.get("NUREC_OPS_SHARED_DATA", ""),
               os.path.join(_ROOT, "shared", "data"),
               os.path.join(os.path.dirname(_ROOT), "shared", "data")]

GARDEN = "gsplat/test_garden.npz"
LIDAR = "gsplat/row-offset-spinning-lidar-model-parameters.json"
FTHETA = "gsplat/test_ftheta_camera_params.json"
FISHEYE = "gsplat/test_fisheye_camera_params.json"
PINHOLE_RIG = "gsplat/test_pinhole_camera_params.json"


def find(name):
    """Path of shared data file `name` (e.g. GARDEN), or None."""
    for root in _CANDIDATES:
        if root and os.path.exists(os.path.join(root, name)):
            return os.path.join(root, name)
    return None


def require(name):
    """Path of shared data file `name`; skips the calling test where it is absent."""
    path = find(name)
    if path is None:
        pytest.skip(f"real data {name} not found (looked in ../shared/data/ and $NUREC_OPS_SHARED_DATA)")
    return path
