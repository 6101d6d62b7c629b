"""The rasterizers' discrete decisions (SPEC 3's 1/255 alpha cut, 0.99
clamp, 1e-4 transmittance stop) in tests: how far a scene lies from them,
which gradient rows one float32 flip may move, and gradcheck on scenes far
enough from every cut for finite differences to mean a derivative."""
import math

import torch

def _watch_cuts(render, seen):
    """Runs ``render()`` (a reference rasterizer: both composite through
    composite.sort_front_to_back and composite.weights, watched here) and
    calls ``seen(order, alpha, live, keep, T_incl)`` at each weights call:
    the Gaussians' indices in depth order [C,N], alpha before the clamp,
    the pairs that are valid with sigma >= 0, the pairs kept and the
    transmittance after each, [C,A,B,N]."""
    from nurec_ops.reference import composite

    orig_sort, orig_weights, order = composite.sort_front_to_back, composite.weights, []

    def sort_watched(key, valid, opacities, *per_camera):
        C, N = key.shape
        idx = torch.arange(N, dtype=torch.float64, device=key.device).expand(C, N)
        out = orig_sort(key, valid, opacities, *per_camera, idx)
        order.append(out[-1].long())
        return out[:-1]

    def weights_watched(dx, dy, conic, o, valid):
        with torch.no_grad():
            sigma, alpha = composite.falloff(dx, dy, conic, o)  # alpha before the clamp
            live = valid[:, None, None, :].expand_as(alpha) & (sigma >= 0)
            _, keep, T_incl = composite.cuts(sigma, alpha, valid)
            seen(order.pop(), alpha, live, keep, T_incl)
        return orig_weights(dx, dy, conic, o, valid)

    composite.sort_front_to_back, composite.weights = sort_watched, weights_watched
    try:
        with torch.no_grad():
            render()
    finally:
        composite.sort_front_to_back, composite.weights = orig_sort, orig_weights


def _cut_distances(alpha, live, keep, T_incl):
    """Each pair's relative distance from SPEC 3's 1/255 cut and 0.99 clamp
    (alpha) and from the 1e-4 stop (T), inf where a pair has none."""
    from nurec_ops.reference import composite

    inf = torch.full_like(alpha, math.inf)
    return (torch.where(live, (alpha / composite.ALPHA_MIN - 1).abs(), inf),
            torch.where(live, (alpha / composite.ALPHA_MAX - 1).abs(), inf),
            torch.where(keep, (T_incl / composite.T_MIN - 1).abs(), inf))


def threshold_margin(render):
    """How far a scene is from the rasterizers' discrete decisions: the
    smallest relative distance, over the reference's pixel (ray) and
    Gaussian pairs, of alpha from SPEC 3's 1/255 cut and 0.99 clamp and of
    the transmittance from its 1e-4 stop. ``render()`` runs a reference
    rasterizer (_watch_cuts). A finite difference across a cut measures the
    cut's jump, not a derivative: gradcheck's inputs must lie farther from
    every cut than its eps moves them."""
    margins = []

    def seen(order, alpha, live, keep, T_incl):
        margins.extend(d.min().item() for d in _cut_distances(alpha, live, keep, T_incl) if d.numel())

    _watch_cuts(render, seen)
    return min(margins, default=math.inf)


def rows_near_cuts(render, margin=1e-4):
    """Where one float32 threshold flip may move whole gradient rows: the
    Gaussians (their indices) blended at any pixel (ray) where a pair lies
    within ``margin`` (relative, as threshold_margin measures it) of a cut,
    the near pair's Gaussian included, and those pixels' cameras. A flip
    there changes the pixel's transmittance chain, so the gradient of every
    Gaussian that pixel blends moves, and its camera's background row: seen
    on the H200 and the CPU (camera-rolling-pinhole float32): an
    alpha 8.3e-6 from 1/255 at one pixel moved the rows of the 6 Gaussians
    it blends, past an allowance of one row. float32 alphas round to ~1e-5
    of themselves there, so 1e-4 is margin enough and exempts few scenes
    (the rows still meet NEAR_CUT_BOUND). ``render()`` runs a reference
    rasterizer in float64. Returns (gaussians, cameras), sets of ints."""
    from nurec_ops.reference import composite

    gaussians, cameras = set(), set()

    def seen(order, alpha, live, keep, T_incl):
        near = torch.stack(_cut_distances(alpha, live, keep, T_incl)).amin(0) <= margin
        used = keep & (T_incl >= composite.T_MIN)
        for c, a, b in torch.nonzero(near.any(-1)).tolist():
            cameras.add(c)
            gaussians.update(order[c][used[c, a, b] | near[c, a, b]].tolist())

    _watch_cuts(render, seen)
    return gaussians, cameras


def gradcheck_inputs(call, s, keys):
    """torch.autograd.gradcheck of ``call(scene)`` in the inputs ``keys`` of
    the float64 scene dict ``s``, its other inputs held (every op's
    gradcheck: the same eps and tolerances)."""
    def f(*xs):
        return call(dict(s, **dict(zip(keys, xs))))

    return torch.autograd.gradcheck(f, [s[k] for k in keys], eps=1e-6, atol=1e-6, rtol=1e-5)


def away_from_cuts(draw, render, margin=1e-3, tries=50):
    """``draw()`` until its scene's threshold_margin (``render(scene)``)
    exceeds ``margin``; the scene."""
    for _ in range(tries):
        s = draw()
        if threshold_margin(lambda: render(s)) > margin:
            return s
    raise AssertionError(f"no scene within {tries} draws lies {margin} from every cut")
