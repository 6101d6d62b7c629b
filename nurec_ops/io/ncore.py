"""An NVIDIA NCore v4 clip in, the tensors of nurec_ops' ops out.

    from nurec_ops.io.ncore import load_clip

    clip = load_clip("clip.json", device="cuda")   # sequence meta JSON, a store, a folder of stores
    cam = clip.cameras["camera_front_wide_120fov"]
    i = torch.tensor([3], device="cuda")          # a frame
    rasterize_camera(means, quats, scales, opacities, colors, cam.viewmats[i], cam.Ks.expand(1, 3, 3),
                     cam.width, cam.height, viewmats_end=cam.viewmats_end[i], shutter=cam.shutter,
                     **cam.model_kwargs())
    lid = clip.lidars["lidar_top"]
    rasterize_lidar(means, quats, scales, opacities, features, lid.viewmats[i], *lid.model,
                    viewmats_end=lid.viewmats_end[i], column_times=lid.column_times)
    rasterize_rays(means, quats, scales, opacities, features, **lid.ray_bundle(i))  # any lidar: its rays
                                                   # (load_clip(lidar_rays=True); default: lidars with no model)
    init = clip.initial_gaussians()                # lidar points: means, track ids (-1: static)

Everything is read and converted while loading (loops over frames are fine
there); what a training step needs is then plain indexing of device tensors.
Floating tensors come in ``dtype`` on ``device``, times as int64
microseconds (SPEC conventions), ids as int64.

Conventions, NCore's and ours. NCore keeps a graph of named frames whose
edges are static or time-dependent rigid transforms ``T_source_target``
(mapping points of ``source`` to ``target``; "world" is the anchor, "rig"
the vehicle). A world -> sensor view matrix is therefore the pose graph's
``("world", sensor)`` transform at a time: NCore interpolates between the
stored samples (linear translation, slerp rotation) in the stored precision
(float64 when written so) and we cast at the end. A sensor frame has a start
and an end timestamp; ``viewmats`` / ``viewmats_end`` are the poses then
(SPEC 7's rolling shutter). NCore's camera frame is OpenCV's (x right,
y down, z forward) and its image coordinates start at the first pixel's
top-left corner, as ours; its lidar frame is x forward, y left, z up with
azimuth ``atan2(y, x)`` and elevation ``asin(z)``, as rasterize_lidar's.
Camera intrinsics go through ``nurec_ops.sensors.camera_params`` (which
moves FTheta's pixel-centre principal point to our origin).

A large world frame (e.g. ECEF coordinates) would lose precision in
float32: NCore clips use a local metric world, but check ``viewmats``'
translations before training in float32.

Needs ``nvidia-ncore`` (``pip install nurec_ops[ncore]``), imported only when
a clip is loaded.
"""
import collections
import glob
import os
import warnings

import torch

from .. import sensors as _sensors
from .._rolling_shutter import rotmat_to_quat
from .ncore_clip import Camera, Clip, InitialGaussians, Lidar, Tracks  # noqa: F401  (the results)
from .ncore_convert import SHUTTER_OF, camera_record, euler_xyz_to_rotmat, nearest_cells  # noqa: F401

INSTALL_HINT = ("reading NCore clips needs NVIDIA's NCore (PyPI: nvidia-ncore): "
                "pip install nurec_ops[ncore]")


def _ncore():
    """NCore's v4 reader API, or an ImportError saying how to get it."""
    try:
        from ncore.data import v4
    except ImportError as e:
        raise ImportError(INSTALL_HINT) from e
    return v4


def _store_paths(path):
    """NCore component-store paths of ``path``: a sequence meta JSON or a
    store (passed to NCore as they are), a folder of stores (its
    ``*.zarr.itar`` files and ``*.zarr`` folders), or a list of these."""
    paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    out = []
    for p in map(os.fspath, paths):
        if not os.path.exists(p):
            raise FileNotFoundError(f"load_clip: {p} does not exist")
        is_store = os.path.exists(os.path.join(p, ".zgroup")) or os.path.exists(os.path.join(p, ".zmetadata"))
        if os.path.isdir(p) and not is_store:
            found = sorted(glob.glob(os.path.join(p, "*.zarr.itar")) + glob.glob(os.path.join(p, "*.zarr")))
            if not found:
                raise FileNotFoundError(f"load_clip: no NCore stores (*.zarr.itar, *.zarr) in {p}")
            out += found
        else:
            out.append(p)
    return out


def _instance(reader, component, required):
    """The component instance to read: "default", or the only one there is."""
    names = sorted(reader.open_component_readers(component.Reader))
    if "default" in names:
        return "default"
    if len(names) == 1:
        return names[0]
    if not names and not required:
        return None
    raise ValueError(f"load_clip: expected one {component.COMPONENT_NAME} component (or one named 'default'), "
                     f"found {names or 'none'}")


def _pick(available, wanted, what):
    if wanted is None:
        return list(available)
    missing = [n for n in wanted if n not in available]
    if missing:
        raise KeyError(f"load_clip: no {what} {missing} in the clip (it has {list(available)})")
    return list(wanted)


def _frames(timestamps_us, time_range_us):
    """Indices of the frames whose end timestamp lies in the half-open range."""
    import numpy as np

    if time_range_us is None:
        return np.arange(len(timestamps_us))
    lo, hi = time_range_us
    end = timestamps_us[:, 1].astype(np.int64)
    return np.nonzero((end >= lo) & (end < hi))[0]


def _poses(graph, source, target, timestamps_us):
    """float64 torch T_source_target at timestamps [...] -> [..., 4, 4]."""
    import numpy as np

    ts = np.asarray(timestamps_us, dtype=np.uint64)
    if ts.size == 0:
        return torch.zeros(ts.shape + (4, 4), dtype=torch.float64)
    return torch.from_numpy(np.asarray(graph.evaluate_poses(source, target, ts), dtype=np.float64))


def _static_pose(sensor, device, dtype):
    T = sensor.T_sensor_rig  # None when the graph has no path to "rig"
    return None if T is None else torch.as_tensor(T, dtype=torch.float64).to(device=device, dtype=dtype)


def _to(t, device, dtype):
    return t.to(device=device, dtype=dtype) if t.is_floating_point() else t.to(device=device)


def _decode_image(sensor, name, i, record, W, H):
    """Frame i of a camera as uint8 [H, W, 3] (resized to W x H)."""
    import numpy as np
    import PIL.Image

    im = sensor.get_frame_image(int(i)).convert("RGB")
    if list(im.size) != record["resolution"]:
        raise ValueError(f"load_clip: camera {name} frame {i} is {im.size[0]}x{im.size[1]}, its "
                         f"calibration {record['resolution'][0]}x{record['resolution'][1]}")
    if (W, H) != im.size:
        im = im.resize((W, H), resample=PIL.Image.BOX)  # area average: no aliasing when shrinking
    return torch.from_numpy(np.array(im))


def _camera_meta(loader, name, world, time_range_us, image_scale, device, dtype):
    """A Camera without images, and what decoding its frames needs."""
    import numpy as np

    sensor = loader.get_camera_sensor(name)
    mp = sensor.model_parameters
    if mp.external_distortion_parameters is not None:
        warnings.warn(f"load_clip: camera {name} has an external (windshield) distortion; nurec_ops' camera "
                      "models do not include it (SPEC 6), so it is ignored", RuntimeWarning, stacklevel=4)
    record = camera_record(mp)
    model, params, (W, H) = _sensors.camera_params(record, scale=image_scale)
    ts = np.asarray(sensor.frames_timestamps_us)
    sel = _frames(ts, time_range_us)
    T = _poses(loader.pose_graph, world, name, ts[sel])  # [F, 2, 4, 4] world -> camera at start, end
    Ks = params.get("Ks", torch.eye(3, dtype=torch.float64))
    cam = Camera(name=name, camera_model=model, params={k: _to(v, device, dtype) for k, v in params.items()},
                 Ks=_to(Ks, device, dtype), width=W, height=H, shutter=SHUTTER_OF[mp.shutter_type.name],
                 timestamps_us=torch.from_numpy(ts[sel].astype(np.int64)).to(device),
                 viewmats=_to(T[:, 0], device, dtype), viewmats_end=_to(T[:, 1], device, dtype), images=None,
                 T_sensor_rig=_static_pose(sensor, device, dtype), record=record)
    return cam, (sensor, sel, record, W, H)


def _grid(rows, cols, dist, inten, R, W):
    """First returns on the R x W grid: per cell the nearest of its rays."""
    import numpy as np

    flat = rows * W + cols
    if flat.size == 0 or np.bincount(flat, minlength=R * W).max() <= 1:
        first = np.arange(flat.size)  # a ray per cell (a stored model element each): no sort (~10x faster)
    else:
        order = np.lexsort((dist, flat))  # by cell, then by distance
        first = order[np.unique(flat[order], return_index=True)[1]]
    ranges, intensity = np.zeros(R * W), np.zeros(R * W)
    valid = np.zeros(R * W, dtype=bool)
    ranges[flat[first]], intensity[flat[first]], valid[flat[first]] = dist[first], inten[first], True
    return ranges.reshape(R, W), valid.reshape(R, W), intensity.reshape(R, W)


def _sweep_bundle(sensor, i):
    """Sweep i's stored rays, all of them: directions [n, 3], timestamps
    [n], first-return ranges [n] (numpy float64 / uint64) and whether each
    has a valid return."""
    import numpy as np

    d = np.asarray(sensor.get_frame_ray_bundle_direction(i), dtype=np.float64)
    t = np.asarray(sensor.get_frame_ray_bundle_timestamp_us(i))
    r = np.asarray(sensor.get_frame_ray_bundle_return_distance_m(i, 0), dtype=np.float64)
    ok = np.asarray(sensor.get_frame_ray_bundle_return_valid_mask(i, 0)) & np.isfinite(r) & (r > 0)
    return d, t, r, ok


def _sweep_intensity(sensor, i):
    """Sweep i's first-return intensity over every stored ray (numpy
    float64, NaN as 0)."""
    import numpy as np

    return np.nan_to_num(np.asarray(sensor.get_frame_ray_bundle_return_intensity(i, 0), dtype=np.float64))


def _valid_returns(bundle):
    """A _sweep_bundle's valid returns: directions [M, 3], timestamps [M],
    ranges [M], and the valid mask over every stored ray."""
    d, t, r, ok = bundle
    return d[ok], t[ok], r[ok], ok


def _sweep_rays(sensor, i):
    """Sweep i's valid returns (_valid_returns of its stored rays)."""
    return _valid_returns(_sweep_bundle(sensor, i))


def _as_rays(bundle, inten, span_us):
    """A sweep's stored rays (_sweep_bundle) and intensity (_sweep_intensity)
    as a ray bundle (numpy): unit directions [n, 3], times [n] in [0, 1]
    within the sweep's span (start, end) us, ranges [n] (NaN without a
    valid return), valid [n], intensity [n] (0 without one)."""
    import numpy as np

    d, t, r, ok = bundle
    n = np.linalg.norm(d, axis=-1, keepdims=True)
    d = d / np.where(n > 0, n, 1.0)
    t0, t1 = (int(v) for v in span_us)
    tau = (t.astype(np.float64) - t0) / (t1 - t0) if t1 > t0 else np.zeros(t.shape)
    return d, np.clip(tau, 0.0, 1.0), np.where(ok, r, np.nan), ok, np.where(ok, inten, 0.0)


def _sweep_as_rays(sensor, i, span_us):
    """Sweep i as a ray bundle (_as_rays)."""
    return _as_rays(_sweep_bundle(sensor, i), _sweep_intensity(sensor, i), span_us)


def _sweep_points(graph, name, world, d, t, r):
    """World points [M, 3] float64 of returns, each from the sensor's pose at
    its own timestamp (the ray bundle is not motion-compensated)."""
    import numpy as np

    uniq, inv = np.unique(t, return_inverse=True)
    T_lw = _poses(graph, name, world, uniq)[torch.from_numpy(inv.reshape(-1))]
    p = torch.from_numpy(d * r[:, None])
    return torch.einsum("nij,nj->ni", T_lw[:, :3, :3], p) + T_lw[:, :3, 3]


def _sweep_grid(sensor, i, d, r, ok, model, inten=None):
    """Sweep i's first returns on the model's grid (ranges, valid,
    intensity: numpy [R, W]); ``model`` = (el, az, off) float64 tensors;
    ``inten``: its _sweep_intensity, when already read."""
    import numpy as np

    el, az, off = model
    R, W = el.shape[0], az.shape[0]
    me = sensor.get_frame_ray_bundle_model_element(i)
    if me is not None:
        rows, cols = (np.asarray(me, dtype=np.int64)[ok].T)
    else:
        rows, cols = (c.numpy() for c in nearest_cells(torch.from_numpy(d), el, az, off))
    inten = (_sweep_intensity(sensor, i) if inten is None else inten)[ok]
    inside = (rows < R) & (cols < W)  # a stored element outside the model has no cell
    return _grid(rows[inside], cols[inside], r[inside], inten[inside], R, W)


def _lidar_meta(loader, name, world, time_range_us, device, dtype):
    """A Lidar without sweeps (no grids, no points), and what reading its
    sweeps needs: (sensor, selected frames, (el, az, off) or None)."""
    import numpy as np

    sensor = loader.get_lidar_sensor(name)
    mp = sensor.model_parameters
    structured = mp is not None and hasattr(mp, "row_azimuth_offsets_rad")  # NCore's row-offset spinning model
    model = None
    if structured:
        model = tuple(torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in
                      (mp.row_elevations_rad, mp.column_azimuths_rad, mp.row_azimuth_offsets_rad))
    elif mp is not None:
        warnings.warn(f"load_clip: lidar {name}'s model {mp.type()!r} is not a row-offset spinning one; "
                      "its sweeps are read as points and ray bundles (rasterize_rays), not as grids",
                      RuntimeWarning, stacklevel=4)
    ts = np.asarray(sensor.frames_timestamps_us)
    sel = _frames(ts, time_range_us)
    T = _poses(loader.pose_graph, world, name, ts[sel])
    f = lambda a: None if model is None else _to(a, device, dtype)  # noqa: E731
    W = 0 if model is None else model[1].shape[0]
    lid = Lidar(name=name, row_elevations=f(model and model[0]), column_azimuths=f(model and model[1]),
                row_azimuth_offsets=f(model and model[2]),
                column_times=f(torch.arange(W, dtype=torch.float64) / max(W - 1, 1)),
                spinning_frequency_hz=float(mp.spinning_frequency_hz) if structured else None,
                spinning_direction=str(mp.spinning_direction) if structured else None,
                timestamps_us=torch.from_numpy(ts[sel].astype(np.int64)).to(device),
                viewmats=_to(T[:, 0], device, dtype), viewmats_end=_to(T[:, 1], device, dtype),
                ranges=None, valid=None, intensity=None, points=torch.zeros((0, 3), dtype=dtype, device=device),
                point_times_us=torch.zeros(0, dtype=torch.int64, device=device),
                point_sweeps=torch.zeros(0, dtype=torch.int64, device=device),
                T_sensor_rig=_static_pose(sensor, device, dtype))
    return lid, (sensor, sel, model)


def _read_sweeps(loader, world, lid, src, sweeps, device, dtype, grids, rays=False):
    """Fills ``lid.points`` / ``point_times_us`` / ``point_sweeps`` from the
    sweeps ``sweeps`` (indices into the selected frames) and, with
    ``grids`` (and a row-offset model), ``ranges`` / ``valid`` /
    ``intensity`` of those sweeps; with ``rays`` the ``ray_*`` bundles."""
    import numpy as np

    import concurrent.futures as cf

    sensor, sel, model = src
    spans = np.asarray(sensor.frames_timestamps_us) if rays else None

    grid = grids and model is not None

    def one(s):
        i = int(sel[s])
        stored = _sweep_bundle(sensor, i)  # read once: the points, the grid and the bundle all come from it
        d, t, r, ok = _valid_returns(stored)
        inten = _sweep_intensity(sensor, i) if grid or rays else None
        return (_sweep_points(loader.pose_graph, lid.name, world, d, t, r), torch.from_numpy(t.astype(np.int64)),
                torch.full((t.shape[0],), int(s), dtype=torch.int64),
                _sweep_grid(sensor, i, d, r, ok, model, inten) if grid else None,
                _as_rays(stored, inten, spans[i]) if rays else None)

    sweeps = list(sweeps)
    # a thread per sweep (up to 8): the decoding and numpy work release the interpreter for most of their time
    with cf.ThreadPoolExecutor(max(1, min(8, len(sweeps), os.cpu_count() or 1))) as pool:
        read = list(pool.map(one, sweeps))
    points, times, idx = ([x[k] for x in read] for k in range(3))
    cells = [x[3] for x in read if x[3] is not None]
    cat = lambda xs, shape, dt: torch.cat(xs) if xs else torch.zeros(shape, dtype=dt)  # noqa: E731
    lid.points = _to(cat(points, (0, 3), torch.float64), device, dtype)
    lid.point_times_us = cat(times, (0,), torch.int64).to(device)
    lid.point_sweeps = cat(idx, (0,), torch.int64).to(device)
    if grid:
        R, W = model[0].shape[0], model[1].shape[0]
        stack = lambda k, dt: (torch.from_numpy(np.stack([g[k] for g in cells])) if cells  # noqa: E731
                               else torch.zeros((0, R, W), dtype=dt))
        lid.ranges, lid.valid, lid.intensity = (_to(stack(0, torch.float64), device, dtype),
                                                stack(1, torch.bool).to(device),
                                                _to(stack(2, torch.float64), device, dtype))
    if rays:
        _pad_bundles(lid, [x[4] for x in read], device, dtype)


def _pad_rows(bundle, K):
    """One sweep's bundle (_sweep_as_rays) padded to K rays: NaN directions
    and ranges, time 0, invalid, intensity 0 (numpy)."""
    import numpy as np

    d, tau, r, ok, inten = bundle
    n = d.shape[0]
    out = (np.full((K, 3), np.nan), np.zeros(K), np.full(K, np.nan), np.zeros(K, dtype=bool), np.zeros(K))
    for a, b in zip(out, bundle):
        a[:n] = b
    return out


def _pad_bundles(lid, bundles, device, dtype):
    """The sweeps' ray bundles padded to the longest one's K rays into
    ``lid.ray_*`` [S, K]."""
    import numpy as np

    K = max([b[0].shape[0] for b in bundles], default=0)
    rows = [_pad_rows(b, K) for b in bundles]
    stack = lambda k, shape: np.stack([r[k] for r in rows]) if rows else np.zeros(shape)  # noqa: E731
    d, tau, r, ok, inten = (stack(k, (0, K, 3) if k == 0 else (0, K)) for k in range(5))
    lid.ray_directions, lid.ray_times, lid.ray_ranges, lid.ray_intensity = (
        _to(torch.from_numpy(a), device, dtype) for a in (d, tau, r, inten))
    lid.ray_valid = torch.from_numpy(ok.astype(bool)).to(device)


_OBS_FIELDS = ("track_id", "class_id", "timestamp_us", "reference_frame_id", "reference_frame_timestamp_us")


class _Box(collections.namedtuple("_Box", "centroid dim rot")):
    """The fields of NCore's BBox3 that _load_tracks reads."""


class _Obs(collections.namedtuple("_Obs", _OBS_FIELDS + ("bbox3",))):
    """The fields of NCore's CuboidTrackObservation that _load_tracks reads."""


def _as_obs(d):
    b = d["bbox3"]
    return _Obs(str(d["track_id"]), str(d["class_id"]), int(d["timestamp_us"]), str(d["reference_frame_id"]),
                int(d["reference_frame_timestamp_us"]),
                _Box(*(tuple(float(x) for x in b[k]) for k in ("centroid", "dim", "rot"))))


def _cuboid_observations(loader):
    """The clip's cuboid observations. NCore's v4 store keeps them as one
    list of dicts and its reader decodes each through dataclasses_json
    (0.2-0.7 ms apiece: 0.3-1 s for our 30 s clip's 1,505, seconds for a
    busy drive's); these are the same dicts read as plain records, checked
    against NCore's own decoding of the first and last. Any other layout
    (or a mismatch) goes through NCore's API."""
    try:
        from ncore.impl.data.types import CuboidTrackObservation

        raw = loader._cuboids_reader._group["cuboids"].attrs["cuboid_track_observations"]
        obs = [_as_obs(d) for d in raw]
        for k in {0, len(raw) - 1} if raw else ():
            ref = CuboidTrackObservation.from_dict(raw[k])
            if (tuple(getattr(ref, f) for f in _OBS_FIELDS) != obs[k][:5]
                    or (tuple(ref.bbox3.centroid), tuple(ref.bbox3.dim), tuple(ref.bbox3.rot)) != tuple(obs[k].bbox3)):
                raise ValueError("layout")
        return obs
    except Exception:  # noqa: BLE001  (any other store layout or NCore version: its API)
        return list(loader.get_cuboid_track_observations())


def _load_tracks(loader, world, device, dtype):
    import numpy as np

    obs = _cuboid_observations(loader)
    n = len(obs)
    # a cuboid is given in a reference frame (e.g. the lidar) at a reference time: to the world through the graph
    T_ref = torch.zeros((n, 4, 4), dtype=torch.float64)
    by_frame = collections.defaultdict(list)
    for k, o in enumerate(obs):
        by_frame[o.reference_frame_id].append(k)
    for frame, idx in by_frame.items():
        stamps = np.array([obs[k].reference_frame_timestamp_us for k in idx], dtype=np.uint64)
        T_ref[idx] = _poses(loader.pose_graph, frame, world, stamps)
    box = torch.tensor([list(o.bbox3.centroid) + list(o.bbox3.rot) + list(o.bbox3.dim) for o in obs],
                       dtype=torch.float64).reshape(n, 9)
    T_box = torch.eye(4, dtype=torch.float64).repeat(n, 1, 1)
    T_box[:, :3, :3] = euler_xyz_to_rotmat(box[:, 3:6])
    T_box[:, :3, 3] = box[:, :3]
    T_w = T_ref @ T_box
    quats = rotmat_to_quat(T_w[:, :3, :3])
    names = sorted({o.track_id for o in obs})
    order = sorted(range(n), key=lambda k: (obs[k].track_id, obs[k].timestamp_us))
    ranges, class_ids, start = [], [], 0
    for name in names:
        idx = [k for k in order if obs[k].track_id == name]
        for a, b in zip(idx, idx[1:]):  # one hemisphere along a track: the key rotations train smoothly
            if float(quats[b] @ quats[a]) < 0:
                quats[b] = -quats[b]
        ranges.append((start, len(idx)))
        class_ids.append(obs[idx[0]].class_id)
        start += len(idx)
    o = torch.tensor(order, dtype=torch.int64)
    key_poses = torch.cat((T_w[:, :3, 3], quats), -1)[o]
    key_dims = box[:, 6:9][o]
    dims = torch.stack([key_dims[s:s + c].median(0).values for s, c in ranges]) if ranges else torch.zeros(0, 3)
    return Tracks(names=names, class_ids=class_ids, key_poses=_to(key_poses, device, dtype),
                  key_times=torch.tensor([obs[k].timestamp_us for k in order], dtype=torch.int64).to(device),
                  track_ranges=torch.tensor(ranges, dtype=torch.int64).reshape(-1, 2).to(device),
                  key_dims=_to(key_dims, device, dtype), dims=_to(dims.double(), device, dtype))


def load_clip(path_or_meta_json, device="cpu", dtype=torch.float32, cameras=None, lidars=None,
              time_range_us=None, image_scale=1.0, load_images=True, world_frame="world", lidar_rays="auto"):
    """Reads an NCore v4 clip into a Clip (see the module docstring).

    Args:
        path_or_meta_json: a sequence meta JSON (NCore's list of component
            stores), one store (``*.zarr.itar`` or a ``*.zarr`` folder), a
            folder holding the stores, or a list of stores.
        device, dtype: of every returned tensor (floating ones in dtype).
        cameras, lidars: names to read (default: all).
        time_range_us: (start, stop): only the frames whose end timestamp
            lies in [start, stop) (default: all); tracks are read whole.
        image_scale: resizes the images and the calibrations (e.g. 0.25 for
            a CPU run; nurec_ops.sensors' scaling keeps the rays exact).
        load_images: False leaves ``Camera.images`` None (calibration and
            poses only).
        world_frame: the pose graph's anchor frame.
        lidar_rays: read the lidars' sweeps as ray bundles (``Lidar.ray_*``,
            for rasterize_rays): ``"auto"`` (default) for the lidars without
            a row-offset spinning model (which rasterize_lidar cannot take),
            ``True`` for every lidar, ``False`` for none.
    """
    if lidar_rays not in ("auto", True, False):
        raise ValueError(f'load_clip: `lidar_rays` must be "auto", True or False, got {lidar_rays!r}')
    loader = _open(path_or_meta_json)
    cams = {}
    for n in _pick(loader.camera_ids, cameras, "cameras"):
        cam, (sensor, sel, record, W, H) = _camera_meta(loader, n, world_frame, time_range_us, image_scale,
                                                        device, dtype)
        if load_images:
            frames = [_decode_image(sensor, n, i, record, W, H) for i in sel]
            images = torch.stack(frames) if frames else torch.zeros((0, H, W, 3), dtype=torch.uint8)
            cam.images = images.to(device=device, dtype=dtype).div_(255)
        cams[n] = cam
    lids = {}
    for n in _pick(loader.lidar_ids, lidars, "lidars"):
        lid, src = _lidar_meta(loader, n, world_frame, time_range_us, device, dtype)
        rays = lidar_rays is True or (lidar_rays == "auto" and src[2] is None)
        _read_sweeps(loader, world_frame, lid, src, range(len(src[1])), device, dtype, grids=True, rays=rays)
        lids[n] = lid
    return _clip(loader, cams, lids, world_frame, device, dtype)


def open_clip(path_or_meta_json, device="cpu", dtype=torch.float32, cameras=None, lidars=None,
              time_range_us=None, image_scale=1.0, world_frame="world", point_sweeps=8):
    """A clip's metadata without its frames, for training that reads frames
    as it goes (nurec_ops.io.ncore_frames): what load_clip returns, except
    ``Camera.images`` and ``Lidar.ranges`` / ``valid`` / ``intensity`` are
    None, a lidar's ``points`` come from ``point_sweeps`` sweeps spread
    evenly over the selected ones (None: every sweep; their indices in
    ``point_sweeps``; 0: none yet, ``clip.frames.read_points`` reads them
    later), enough for ``Clip.initial_gaussians``, and
    ``clip.frames`` is a FrameSource that decodes any frame on demand or
    reads a schedule's frames ahead (``clip.frames.read_ahead``). The
    arguments are load_clip's."""
    from .ncore_frames import FrameSource

    loader = _open(path_or_meta_json)
    cams, cam_src = {}, {}
    for n in _pick(loader.camera_ids, cameras, "cameras"):
        cams[n], cam_src[n] = _camera_meta(loader, n, world_frame, time_range_us, image_scale, device, dtype)
    lids, lid_src = {}, {}
    for n in _pick(loader.lidar_ids, lidars, "lidars"):
        lids[n], lid_src[n] = _lidar_meta(loader, n, world_frame, time_range_us, device, dtype)
    clip = _clip(loader, cams, lids, world_frame, device, dtype)
    clip.frames = FrameSource(cam_src, lid_src, lambda names, which: [  # noqa: E731
        _read_sweeps(loader, world_frame, lids[n], lid_src[n], which(len(lid_src[n][1])), device, dtype, False)
        for n in names])
    if point_sweeps != 0:
        clip.frames.read_points(point_sweeps)
    return clip


def _open(path_or_meta_json):
    """NCore's SequenceLoaderV4 over the clip's stores."""
    v4 = _ncore()
    reader = v4.SequenceComponentGroupsReader(_store_paths(path_or_meta_json))
    return v4.SequenceLoaderV4(
        reader, poses_component_group_name=_instance(reader, v4.PosesComponent, True),
        intrinsics_component_group_name=_instance(reader, v4.IntrinsicsComponent, True),
        masks_component_group_name=_instance(reader, v4.MasksComponent, False),
        cuboids_component_group_name=_instance(reader, v4.CuboidsComponent, False))


def _clip(loader, cams, lids, world_frame, device, dtype):
    span = loader.sequence_timestamp_interval_us
    return Clip(sequence_id=loader.sequence_id, time_range_us=(int(span.start), int(span.stop)), cameras=cams,
                lidars=lids, tracks=_load_tracks(loader, world_frame, device, dtype))


__all__ = ["load_clip", "open_clip", "Clip", "Camera", "Lidar", "Tracks", "InitialGaussians", "camera_record",
           "euler_xyz_to_rotmat", "nearest_cells", "SHUTTER_OF", "INSTALL_HINT"]
