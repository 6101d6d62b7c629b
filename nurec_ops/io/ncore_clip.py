"""What nurec_ops.io.ncore.load_clip returns: a clip's cameras, lidars and
tracks as the ops' tensors, and its lidar points as initial Gaussians."""
import collections
import dataclasses
from typing import Dict, List, Optional, Tuple

import torch

from ..lidar_model import LidarModel
from ..reference.quat import to_rotmat

InitialGaussians = collections.namedtuple("InitialGaussians", ["means", "track_ids", "times_us"])
InitialGaussians.__doc__ = """Lidar points as Gaussian centres: ``means [N, 3]``
(world coordinates for static points, the actor's cuboid frame for points
on an actor), ``track_ids [N]`` int64 (-1 static, else the index into
``Clip.tracks``), ``times_us [N]`` int64 (each point's measurement time)."""


@dataclasses.dataclass
class Camera:
    """One camera of a clip, ``F`` frames.

    ``camera_model`` ("ftheta", "opencv", "fisheye", "pinhole") and
    ``params`` (its per-camera arguments as ``nurec_ops.sensors.camera_params``
    returns them: unbatched tensors, ``Ks`` included for the pinhole family;
    what ``nurec_ops.reference.camera_models.project`` takes), ``Ks [3, 3]``
    (identity for FTheta, which does not read it), ``width``, ``height``,
    ``shutter`` (rasterize_camera's), ``timestamps_us [F, 2]`` (start, end),
    ``viewmats`` / ``viewmats_end [F, 4, 4]`` world -> camera at the frame's
    start / end, ``images [F, H, W, 3]`` in [0, 1] (None when not loaded),
    ``T_sensor_rig [4, 4]`` (None when the graph has no static rig edge),
    ``record``: NCore's intrinsics as the record camera_params read."""
    name: str
    camera_model: str
    params: Dict[str, torch.Tensor]
    Ks: torch.Tensor
    width: int
    height: int
    shutter: str
    timestamps_us: torch.Tensor
    viewmats: torch.Tensor
    viewmats_end: torch.Tensor
    images: Optional[torch.Tensor]
    T_sensor_rig: Optional[torch.Tensor]
    record: dict

    def model_kwargs(self, C=1):
        """rasterize_camera's ``camera_model=`` and model arguments for ``C``
        views of this camera (each parameter expanded to ``[C, k]``)."""
        kw = {"camera_model": self.camera_model}
        kw.update({k: v.expand(C, *v.shape) for k, v in self.params.items() if k != "Ks"})
        return kw


@dataclasses.dataclass
class Lidar:
    """One lidar of a clip, ``S`` sweeps.

    The row-offset spinning model (None for a lidar without one):
    ``row_elevations [R]``, ``column_azimuths [W]``, ``row_azimuth_offsets
    [R]`` (radians; ray (i, j) at azimuth ``column_azimuths[j] +
    row_azimuth_offsets[i]``), ``column_times [W]`` (NCore's relative firing
    time of a column: ``j / (W - 1)``), ``spinning_frequency_hz``,
    ``spinning_direction``. Per sweep: ``timestamps_us [S, 2]``,
    ``viewmats`` / ``viewmats_end [S, 4, 4]`` world -> lidar at its start /
    end, and the first returns on the model's grid, ``ranges [S, R, W]``
    (metres, 0 where there is none), ``valid [S, R, W]`` bool and
    ``intensity [S, R, W]``: each ray goes to NCore's stored model element
    when the clip has one, else to the cell whose ray is nearest in angle;
    a cell hit by several rays keeps the nearest. All valid returns as
    world points (each from the sensor's pose at its own timestamp):
    ``points [M, 3]``, ``point_times_us [M]``, ``point_sweeps [M]``.

    The sweeps as ray bundles (``load_clip(lidar_rays=...)``; None when not
    read), any lidar, with a spinning model or without: every stored ray of
    each sweep, padded to the longest sweep's ``K`` rays: ``ray_directions
    [S, K, 3]`` (unit, lidar frame; NaN in the padding, so that
    rasterize_rays gives the padding NaN), ``ray_times [S, K]`` (the ray's
    timestamp within its sweep's ``timestamps_us``, in [0, 1]),
    ``ray_ranges [S, K]`` (the first return, metres; NaN without one),
    ``ray_valid [S, K]`` bool (a valid return) and ``ray_intensity [S, K]``.
    ``ray_bundle(i)`` unpacks sweeps ``i`` into rasterize_rays' arguments
    (with open_clip: ``clip.frames.ray_count(name)`` and
    ``clip.frames.lidar_rays``)."""
    name: str
    row_elevations: Optional[torch.Tensor]
    column_azimuths: Optional[torch.Tensor]
    row_azimuth_offsets: Optional[torch.Tensor]
    column_times: Optional[torch.Tensor]
    spinning_frequency_hz: Optional[float]
    spinning_direction: Optional[str]
    timestamps_us: torch.Tensor
    viewmats: torch.Tensor
    viewmats_end: torch.Tensor
    ranges: Optional[torch.Tensor]
    valid: Optional[torch.Tensor]
    intensity: Optional[torch.Tensor]
    points: torch.Tensor
    point_times_us: torch.Tensor
    point_sweeps: torch.Tensor
    T_sensor_rig: Optional[torch.Tensor]
    ray_directions: Optional[torch.Tensor] = None
    ray_times: Optional[torch.Tensor] = None
    ray_ranges: Optional[torch.Tensor] = None
    ray_valid: Optional[torch.Tensor] = None
    ray_intensity: Optional[torch.Tensor] = None

    @property
    def model(self):
        """The sensor model as rasterize_lidar takes it: ``*lidar.model``."""
        return LidarModel(self.row_elevations, self.column_azimuths, self.row_azimuth_offsets)

    def ray_bundle(self, sweeps):
        """rasterize_rays' sensor arguments for ``sweeps`` (an index tensor
        or slice; C of them): ``rasterize_rays(means, quats, scales,
        opacities, features, **lidar.ray_bundle(i))`` renders them, each ray
        from the pose at its own time. Needs the clip read with
        ``lidar_rays``."""
        if self.ray_directions is None:
            raise ValueError(f"lidar {self.name}: its ray bundles were not read (load_clip(lidar_rays=True))")
        d = self.ray_directions[sweeps]
        return dict(viewmats=self.viewmats[sweeps], ray_origins=torch.zeros_like(d), ray_directions=d,
                    ray_times=self.ray_times[sweeps], viewmats_end=self.viewmats_end[sweeps])


@dataclasses.dataclass
class Tracks:
    """Cuboid tracks as SPEC 1's keyframed actor poses: ``key_poses [P, 7]``
    (x, y, z, qw, qx, qy, qz: the cuboid centre and orientation in world
    coordinates, consecutive quaternions of a track in one hemisphere),
    ``key_times [P]`` (each observation's timestamp), ``track_ranges
    [T, 2]`` (start, count), ``key_dims [P, 3]`` and ``dims [T, 3]`` (the
    median over a track's keys) the cuboid's full extents along its x, y, z;
    ``names`` (NCore's track ids, sorted) and ``class_ids`` [T]."""
    names: List[str]
    class_ids: List[str]
    key_poses: torch.Tensor
    key_times: torch.Tensor
    track_ranges: torch.Tensor
    key_dims: torch.Tensor
    dims: torch.Tensor


@dataclasses.dataclass
class Clip:
    """A loaded clip: ``cameras`` and ``lidars`` by name, ``tracks``,
    ``sequence_id`` and ``time_range_us`` (start, stop: half-open);
    ``frames``: a FrameSource (nurec_ops.io.ncore_frames) when the clip was
    opened with ``open_clip`` (its frames decoded on demand), else None."""
    sequence_id: str
    time_range_us: Tuple[int, int]
    cameras: Dict[str, Camera]
    lidars: Dict[str, Lidar]
    tracks: Tracks
    frames: Optional[object] = None

    def initial_gaussians(self, max_points=None, seed=0, lidars=None, margin=0.0, chunk=1 << 22):
        """Lidar points of ``lidars`` (default: all) as Gaussian centres
        (InitialGaussians). A point inside a track's cuboid (its median
        dimensions grown by ``margin`` metres per side) at the point's own
        time becomes that actor's, expressed in its cuboid frame; the first
        such track wins; a track is absent outside its key times. Every
        other point is static (-1), in world coordinates. ``max_points``
        keeps every actor point (up to the cap) and a random subset
        (``seed``) of the static ones. ``chunk`` bounds the (point, track)
        pairs tested at once (on CUDA each chunk syncs once, to pick the
        points near an actor: a set-up step, not a training one)."""
        from ..track_poses import interpolate_track_poses

        names = list(self.lidars) if lidars is None else list(lidars)
        if not names:
            raise ValueError("initial_gaussians: the clip has no lidar points")
        pts = torch.cat([self.lidars[n].points for n in names])
        times = torch.cat([self.lidars[n].point_times_us for n in names])
        N = pts.shape[0]
        ids = torch.full((N,), -1, dtype=torch.int64, device=pts.device)
        means = pts.clone()
        tr = self.tracks
        T = tr.track_ranges.shape[0]
        if T and N:
            half = tr.dims.to(pts) / 2 + margin
            # every track at every distinct point time, once: a spinning lidar's rows share each column's
            # timestamp, so a sweep of 128 x 3600 returns has <= 3600 times (one interpolation of U * T
            # (track, time) pairs instead of N * T); the points then gather their time's poses
            utimes, which = torch.unique(times, return_inverse=True)
            U = utimes.shape[0]
            poses, inside = interpolate_track_poses(tr.key_poses, tr.key_times, tr.track_ranges.repeat(U, 1),
                                                    utimes.repeat_interleave(T))
            poses, inside = poses.view(U, T, 7), inside.view(U, T)
            Rt = to_rotmat(poses[..., 3:]).transpose(-1, -2).contiguous()  # world -> actor
            centre, reach2 = poses[..., :3], (half * half).sum(-1)  # a cuboid lies within its half-diagonal
            step = max(1, chunk // T)
            for s in range(0, N, step):
                p, w = pts[s:s + step], which[s:s + step]
                # most points are far from every actor: the exact box test only for those within a
                # cuboid's half-diagonal of its centre (3 coordinates gathered per pair instead of 12)
                near = inside[w] & ((p[:, None, :] - centre[w]) ** 2).sum(-1).le(reach2)
                rows = near.any(1).nonzero().flatten()
                if rows.numel() == 0:
                    continue
                p, w = p[rows], w[rows]
                local = torch.einsum("ntij,ntj->nti", Rt[w], p[:, None, :] - centre[w])  # R^T (p - t)
                hit = near[rows] & (local.abs() <= half).all(-1)
                on_actor = hit.any(1)
                k = hit.to(torch.uint8).argmax(1)  # the first track holding the point
                at = s + rows
                ids[at] = torch.where(on_actor, k, torch.full_like(k, -1))
                means[at] = torch.where(on_actor[:, None], local[torch.arange(rows.numel(), device=p.device), k], p)
        if max_points is not None and N > max_points:
            g = torch.Generator().manual_seed(seed)
            actor = torch.nonzero(ids.cpu() >= 0).flatten()
            static = torch.nonzero(ids.cpu() < 0).flatten()
            actor = actor[torch.randperm(actor.numel(), generator=g)[:max_points]]
            static = static[torch.randperm(static.numel(), generator=g)[:max_points - actor.numel()]]
            keep = torch.cat((actor, static)).sort().values.to(pts.device)
            means, ids, times = means[keep], ids[keep], times[keep]
        return InitialGaussians(means, ids, times)
