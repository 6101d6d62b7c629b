"""Readers of recorded driving clips into the tensors nurec_ops' ops take.

``nurec_ops.io.ncore.load_clip`` reads an NVIDIA NCore v4 clip (``open_clip``: its
metadata, the frames decoded on demand or read ahead); it needs the
optional ``nvidia-ncore`` package (``pip install nurec_ops[ncore]``), which is
imported only when a clip is loaded: ``import nurec_ops.io`` needs torch only.
"""
from .ncore import Camera, Clip, InitialGaussians, Lidar, Tracks, load_clip, open_clip

__all__ = ["load_clip", "open_clip", "Clip", "Camera", "Lidar", "Tracks", "InitialGaussians"]
