"""A clip's frames decoded on demand, and read ahead of a training loop.

``nurec_ops.io.ncore.open_clip`` reads a clip's metadata only (calibrations,
poses, tracks, the lidar points of a few sweeps for the initial Gaussians)
and gives ``clip.frames``, a FrameSource: ``image(camera, f)`` and
``lidar_grid(lidar, s)`` decode one frame synchronously (what load_clip
does for every frame), and ``read_ahead(requests, device)`` a ReadAhead
that decodes the frames a schedule will ask for in a thread pool, ``depth``
requests ahead, into pinned host tensors, and uploads them with
``non_blocking=True`` on a side CUDA stream (the training stream waits on
an event: no host-device sync), keeping the uploads in an LRU cache on the
device (``cache_bytes``) so a frame asked for again is not decoded again.

    clip = open_clip("clip.json", device="cuda")
    reqs = [(("camera", "cam_front", f), ("lidar", "lidar_top", s)) for f, s in schedule]
    frames = clip.frames.read_ahead(reqs, "cuda")
    for k in range(len(reqs)):
        image, (ranges, valid, intensity) = frames.get(k)   # [H, W, 3] in [0, 1]; [R, W] each

A lidar's sweep as a ray bundle (any lidar, for rasterize_rays):
``("lidar_rays", name, s, K)`` gives (directions [K, 3], times, ranges,
valid, intensity [K]) padded to K rays.
"""
import collections
import concurrent.futures as cf
import os
import threading
import time

import torch

from .ncore import _decode_image, _pad_rows, _sweep_as_rays, _sweep_grid, _sweep_rays


class FrameSource:
    """Decodes a clip's camera images and lidar grids on demand (the frames
    selected when the clip was opened: index f of ``Camera.viewmats``, s of
    ``Lidar.viewmats``). Thread-safe: NCore's tar store reads under a lock."""

    def __init__(self, cameras, lidars, read_points):
        self._cams = cameras  # name -> (sensor, selected frames, record, W, H)
        self._lids = lidars  # name -> (sensor, selected frames, (el, az, off) or None)
        self._read_points = read_points  # (lidar names, sweep count -> indices) -> fills the Lidars' points
        self._ray_counts = {}  # lidar name -> ray_count's answer

    def read_points(self, point_sweeps=8, lidars=None):
        """Fills the clip's ``Lidar.points`` / ``point_times_us`` /
        ``point_sweeps`` of ``lidars`` (default: all) from ``point_sweeps``
        sweeps spread evenly over each lidar's (None: all of them)."""
        import numpy as np

        def which(S):
            if point_sweeps is None or point_sweeps >= S:
                return range(S)
            return np.unique(np.linspace(0, S - 1, max(1, point_sweeps)).round().astype(np.int64))

        self._read_points(list(self._lids) if lidars is None else list(lidars), which)

    def image(self, camera, f):
        """Camera frame f: uint8 [H, W, 3] on the CPU."""
        sensor, sel, record, W, H = self._cams[camera]
        return _decode_image(sensor, camera, int(sel[f]), record, W, H)

    def lidar_grid(self, lidar, s):
        """Lidar sweep s's first returns on the model's grid: (ranges float64,
        valid bool, intensity float64) [R, W] on the CPU, as load_clip's."""
        sensor, sel, model = self._lids[lidar]
        if model is None:
            raise ValueError(f"lidar {lidar} has no row-offset spinning model: no grid")
        i = int(sel[s])
        d, _, r, ok = _sweep_rays(sensor, i)
        return tuple(torch.from_numpy(a) for a in _sweep_grid(sensor, i, d, r, ok, model))

    def ray_count(self, lidar):
        """The most rays any selected sweep of ``lidar`` stores (NCore's
        per-frame metadata, no decoding; read on the first call, not when
        the clip is opened): the ``K`` that pads every sweep's bundle to one
        size."""
        if lidar not in self._ray_counts:
            sensor, sel, _ = self._lids[lidar]
            self._ray_counts[lidar] = max([int(sensor.get_frame_ray_bundle_count(int(i))) for i in sel], default=0)
        return self._ray_counts[lidar]

    def lidar_rays(self, lidar, s, K=None):
        """Lidar sweep s as a ray bundle (any lidar, with a model or
        without), as load_clip's ``Lidar.ray_*`` rows: (directions [K, 3],
        times [K], ranges [K], valid [K], intensity [K]) float64 / bool on
        the CPU, padded to ``K`` rays (NaN directions; default: the sweep's
        own count). A fixed K keeps rasterize_rays' configuration (and its
        cached grid and capacity) the same from sweep to sweep; a sweep with
        more than K rays raises instead of being cut."""
        sensor, sel, _ = self._lids[lidar]
        i = int(sel[s])
        bundle = _sweep_as_rays(sensor, i, sensor.frames_timestamps_us[i])
        n = bundle[0].shape[0]
        if K is not None and n > K:
            raise ValueError(f"lidar {lidar} sweep {s} has {n} rays, more than K = {K}")
        return tuple(torch.from_numpy(a) for a in _pad_rows(bundle, n if K is None else K))

    def read_ahead(self, requests, device, dtype=torch.float32, depth=8, workers=None, cache_bytes=1 << 31,
                   start=True):
        """A ReadAhead over ``requests`` (see ReadAhead)."""
        return ReadAhead(self, requests, device, dtype=dtype, depth=depth, workers=workers, cache_bytes=cache_bytes,
                         start=start)


class ReadAhead:
    """The frames of ``requests`` (a list; each a tuple of keys
    ``("camera", name, f)``, ``("lidar", name, s)`` or ``("lidar_rays", name,
    s, K)``), decoded ahead of use.

    ``get(k)`` (k = 0, 1, 2, ... in order) returns request k's frames on
    ``device``: a camera's as ``dtype [H, W, 3]`` in [0, 1], a lidar's as
    (ranges ``dtype``, valid bool, intensity ``dtype``) [R, W], a lidar's
    rays as FrameSource.lidar_rays' five rows padded to K (``dtype``, valid
    bool): the same values load_clip gives. Meanwhile ``workers`` threads decode requests
    k + 1 .. k + depth into pinned memory; on CUDA the uploads run on a side
    stream, the next request's as soon as it is decoded, and the current
    stream only waits on their events. ``wait_s`` sums the time ``get``
    blocked on decoding (``waits`` per call), ``decoded`` counts the frames
    decoded; ``cache_bytes`` bounds the uploaded frames kept on the device
    (least recently used first out). ``start=False``: nothing is decoded
    until ``start()`` (or the first ``get``), so that a caller's own set-up
    does not share the interpreter with the decoding threads."""

    def __init__(self, source, requests, device, dtype=torch.float32, depth=8, workers=None, cache_bytes=1 << 31,
                 start=True):
        self.source, self.requests = source, [tuple(r) for r in requests]
        self.device, self.dtype, self.depth = torch.device(device), dtype, max(1, int(depth))
        self.cuda = self.device.type == "cuda"
        self._pool = cf.ThreadPoolExecutor(workers or min(8, os.cpu_count() or 1),
                                           thread_name_prefix="nurec-read-ahead")
        self._decoding = {}  # key -> future of host tensors
        self._uploaded = collections.OrderedDict()  # key -> (device tensors, event or None, bytes)
        self._bytes, self.cache_bytes = 0, cache_bytes
        self._stream = torch.cuda.Stream(self.device) if self.cuda else None
        self._lock = threading.Lock()
        self._next = 0
        self.wait_s, self.waits, self.decoded = 0.0, [], 0
        if start:
            self.start()

    def start(self):
        """Starts decoding the first ``depth`` requests (again: no effect)."""
        self._queue(self._next)

    def __len__(self):
        return len(self.requests)

    # ---------------------------------------------------------- host side

    def _decode(self, key):
        kind, name, f = key[:3]
        if kind == "camera":
            out = (self.source.image(name, f),)
        elif kind == "lidar":
            r, v, i = self.source.lidar_grid(name, f)
            out = (r.to(self.dtype), v, i.to(self.dtype))
        elif kind == "lidar_rays":
            d, t, r, v, i = self.source.lidar_rays(name, f, key[3])
            out = (d.to(self.dtype), t.to(self.dtype), r.to(self.dtype), v, i.to(self.dtype))
        else:
            raise ValueError(f"ReadAhead: unknown frame kind {kind!r} (camera, lidar or lidar_rays)")
        with self._lock:
            self.decoded += 1
        return tuple(t.pin_memory() for t in out) if self.cuda else out

    def _queue(self, k):
        """Decoding of requests k .. k + depth - 1 that are neither uploaded nor under way."""
        for req in self.requests[k:k + self.depth]:
            for key in req:
                if key not in self._uploaded and key not in self._decoding:
                    self._decoding[key] = self._pool.submit(self._decode, key)

    # -------------------------------------------------------- device side

    def _upload(self, key, host):
        if not self.cuda:
            dev, event = tuple(t.to(self.device) for t in host), None
        else:
            with torch.cuda.stream(self._stream):
                dev = tuple(t.to(self.device, non_blocking=True) for t in host)
                event = torch.cuda.Event()
                event.record(self._stream)
        nbytes = sum(t.numel() * t.element_size() for t in dev)
        self._uploaded[key] = (dev, event, nbytes)
        self._bytes += nbytes
        while self._bytes > self.cache_bytes and len(self._uploaded) > 1:
            old = next(iter(self._uploaded))
            if old == key:
                break
            self._bytes -= self._uploaded.pop(old)[2]

    def _take(self, key):
        """Key's device tensors, blocking on its decoding if it is not done."""
        if key not in self._uploaded:
            fut = self._decoding.pop(key, None) or self._pool.submit(self._decode, key)  # evicted: again
            t = time.perf_counter()
            host = fut.result()
            self._last_wait += time.perf_counter() - t
            self._upload(key, host)
        self._uploaded.move_to_end(key)
        dev, event, _ = self._uploaded[key]
        if event is not None:
            cur = torch.cuda.current_stream(self.device)
            cur.wait_event(event)  # on the GPU: the host does not wait
            for t in dev:
                t.record_stream(cur)
        return dev

    def _convert(self, key, dev):
        if key[0] == "camera":
            return dev[0].to(self.dtype).div_(255)
        return dev

    def get(self, k):
        """Request k's frames on the device (one tuple entry per key)."""
        if k != self._next:
            raise IndexError(f"ReadAhead.get: requests are taken in order; expected {self._next}, got {k}")
        self._next = k + 1
        self._queue(k)
        self._last_wait = 0.0
        out = tuple(self._convert(key, self._take(key)) for key in self.requests[k])
        self.wait_s += self._last_wait
        self.waits.append(self._last_wait)
        self._queue(k + 1)
        for key in (key for req in self.requests[k + 1:k + 3] for key in req):  # upload what is already decoded
            fut = self._decoding.get(key)
            if fut is not None and fut.done() and key not in self._uploaded:
                self._upload(key, self._decoding.pop(key).result())
        return out

    def close(self):
        for fut in self._decoding.values():
            fut.cancel()
        self._pool.shutdown(wait=True)
        self._decoding.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
