"""rasterize_camera (SPEC section 3): parity of the fused op (C CPU and CUDA)
with the dense pure-PyTorch reference, forward and backward, on scenes of
several kinds (channels, SH, backgrounds, edge Gaussians, ranks per image,
long lists cut into parts); gradcheck; CUDA vs CPU at moderate size;
errors. The behaviours every op shares (opcheck, torch.compile, both
autograd paths, no host sync, CUDA graphs, the binning overflow policy,
poisoned memory) are tests/test_op_registry.py's, over the camera rows of
tests/op_cases.py."""
import math

import pytest
import torch

import nurec_ops
from nurec_ops import reference as ref
from conftest import DEVICES, DTYPES, gpu
from bad_inputs import GAUSSIAN_ERRORS, changed, raises_real_and_fake
from near_cuts import away_from_cuts, gradcheck_inputs, rows_near_cuts
from poison import poison_allocator
from random_scenes import random_quats
from tolerances import assert_close, assert_close_flips

OPS = torch.ops.nurec_ops


# ---------------------------------------------------------------- scenes

def look_at(eye, target=(0.0, 0.0, 0.0), up=(0.0, -1.0, 0.0)):
    """World -> camera (OpenCV) viewmat of a camera at `eye` looking at `target`."""
    eye = torch.as_tensor(eye, dtype=torch.float64)
    f = torch.as_tensor(target, dtype=torch.float64) - eye
    f = f / f.norm()
    r = torch.linalg.cross(torch.as_tensor(up, dtype=torch.float64), f)
    r = r / r.norm()
    d = torch.linalg.cross(f, r)
    R = torch.stack((r, d, f))
    V = torch.eye(4, dtype=torch.float64)
    V[:3, :3] = R
    V[:3, 3] = -R @ eye
    return V


def cameras(C, W, H, f=30.0, dist=4.0):
    eyes = []
    for _ in range(C):
        a = torch.rand(()).item() * 2 * math.pi
        eyes.append((dist * math.cos(a), torch.empty(()).uniform_(-1, 1).item(), dist * math.sin(a)))
    V = torch.stack([look_at(e) for e in eyes])
    K = torch.tensor([[f, 0, W / 2 + 0.3], [0, f * 1.05, H / 2 - 0.2], [0, 0, 1]], dtype=torch.float64)
    return V, K.expand(C, 3, 3).clone()


def random_scene(N=200, C=3, W=40, H=30, D=3, sh=None):
    """Gaussians in a 2 m ball seen from C cameras 4 m away (float64, CPU)."""
    means = torch.randn(N, 3, dtype=torch.float64) * 0.8
    quats = random_quats(N)
    scales = torch.exp(torch.randn(N, 3, dtype=torch.float64) * 0.6 - 2.3)
    opac = torch.rand(N, dtype=torch.float64) * 0.95
    if sh is None:
        feats = torch.rand(N, D, dtype=torch.float64)
    else:
        feats = torch.randn(N, (sh + 1) ** 2 + 1, 3, dtype=torch.float64) * 0.4
    V, K = cameras(C, W, H)
    return dict(means=means, quats=quats, scales=scales, opacities=opac, features=feats, viewmats=V, Ks=K,
                width=W, height=H, sh_degree=sh)


def edge_scene(W=40, H=30, near=0.5):
    """Camera 0 sees, in its own frame: a Gaussian behind it, one just before
    the near plane, one straddling it, off-screen ones (one reaching in), a
    huge one, tiny ones, transparent and faint ones, one above the 0.99 clamp,
    and an opaque stack that drives pixels to the transmittance cut-off."""
    cam = []
    def add(p, s, o, n=1):
        for _ in range(n):
            cam.append((p, s, o))
    add((0.0, 0.0, -1.0), 0.3, 0.9)          # behind the camera
    add((0.1, 0.0, near * 0.98), 0.1, 0.9)   # mean just before near: dropped
    add((0.1, 0.05, near * 1.2), 0.4, 0.8)   # straddles the near plane
    add((20.0, 0.0, 4.0), 0.2, 0.9)          # far off-screen
    add((3.0, 0.5, 4.0), 0.4, 0.9)           # centre off-screen, reaches in
    add((0.0, -2.2, 4.0), 0.3, 0.9)          # above the image, reaches in
    add((0.3, 0.2, 5.0), 12.0, 0.3)          # huge
    add((-0.2, 0.1, 3.0), 1e-4, 0.9)         # tiny (eps2d dominates)
    add((0.25, -0.1, 3.0), 1e-5, 0.5)        # tinier
    add((0.0, 0.3, 3.5), 0.2, 0.0)           # transparent
    add((0.1, 0.3, 3.5), 0.2, 1.0 / 300)     # below 1/255 everywhere
    add((0.2, 0.3, 3.5), 0.2, 0.0045)        # faint: reaches 1/255 only near its centre
    add((-0.3, -0.3, 3.2), 0.15, 1.0)        # above the 0.99 clamp
    for k in range(40):                      # opaque stack: T cut-off
        add((0.02 * math.sin(k), 0.02 * math.cos(k), 2.0 + 0.05 * k), 0.25, 0.95)
    n = len(cam)
    pc = torch.tensor([c[0] for c in cam], dtype=torch.float64)
    s = torch.tensor([c[1] for c in cam], dtype=torch.float64)[:, None] * torch.exp(torch.randn(n, 3, dtype=torch.float64) * 0.2)
    o = torch.tensor([c[2] for c in cam], dtype=torch.float64)
    V, K = cameras(2, W, H)
    V[0] = look_at((0.0, 0.0, -4.0))
    R, t = V[0, :3, :3], V[0, :3, 3]
    means = (pc - t) @ R  # camera -> world: R^T (p - t)
    return dict(means=means, quats=random_quats(n), scales=s, opacities=o,
                features=torch.rand(n, 3, dtype=torch.float64), viewmats=V, Ks=K, width=W, height=H,
                sh_degree=None, near=near)


GRAD_KEYS = ("means", "quats", "scales", "opacities", "features")


def to(scene, device, dtype, grad=True, bg=False):
    out = {}
    for k, v in scene.items():
        if isinstance(v, torch.Tensor):
            v = v.to(device=device, dtype=dtype)
            if grad and k in GRAD_KEYS:
                v = v.requires_grad_(True)
        out[k] = v
    if bg:
        C, D = scene["viewmats"].shape[0], 3 if scene["sh_degree"] is not None else scene["features"].shape[-1]
        out["backgrounds"] = torch.rand(C, D, dtype=dtype, device=device).requires_grad_(grad)
    return out


def run(fn, s):
    kw = {k: v for k, v in s.items()}
    return fn(kw.pop("means"), kw.pop("quats"), kw.pop("scales"), kw.pop("opacities"), kw.pop("features"),
              kw.pop("viewmats"), kw.pop("Ks"), kw.pop("width"), kw.pop("height"), **kw)


def grads(outs, s, cot):
    keys = [k for k in GRAD_KEYS + ("backgrounds",) if k in s and s[k].requires_grad]
    g = torch.autograd.grad(outs, [s[k] for k in keys], cot, allow_unused=True)
    return dict(zip(keys, g))


def check_parity(scene, device, dtype, bg=False, factor=1.0, grad_max_frac=0.02):
    s = to(scene, device, dtype, bg=bg)
    r = to(scene, "cpu", torch.float64, bg=False)
    if bg:
        r["backgrounds"] = s["backgrounds"].detach().to("cpu", torch.float64).requires_grad_(True)
    # the reference sees the same (rounded) inputs
    for k in GRAD_KEYS:
        r[k] = s[k].detach().to("cpu", torch.float64).requires_grad_(True)
    poison_allocator(device)
    out = run(nurec_ops.rasterize_camera, s)
    expect = run(ref.rasterize_camera, r)
    for name, a, e in zip(("render", "depth", "alpha"), out, expect):
        assert a.dtype == dtype and a.device.type == torch.device(device).type
        assert_close_flips(a, e, dtype, factor=factor, msg=name)
    cot = [torch.randn_like(e) for e in expect]
    poison_allocator(device)
    g = grads(out, s, [c.to(device=device, dtype=dtype) for c in cot])
    ge = grads(expect, r, cot)
    near = rows_near_cuts(lambda: run(ref.rasterize_camera, r)) if dtype == torch.float32 else (set(), set())
    for k in ge:
        assert g[k] is not None, k
        assert_close_flips(g[k], ge[k], dtype, factor=10 * factor, msg=f"grad {k}", max_frac=grad_max_frac,
                           free_rows=near[1] if k == "backgrounds" else near[0])


# ------------------------------------------------------------ parity tests

CASES = [
    pytest.param(dict(D=3), False, id="rgb"),
    pytest.param(dict(D=3), True, id="rgb-bg"),
    pytest.param(dict(D=1), False, id="d1"),
    pytest.param(dict(D=4), True, id="d4-bg"),
    pytest.param(dict(D=9), True, id="d9-bg"),  # several channel passes on CUDA
    pytest.param(dict(sh=0), False, id="sh0"),
    pytest.param(dict(sh=1), True, id="sh1-bg"),
    pytest.param(dict(sh=2), False, id="sh2"),
    pytest.param(dict(sh=3), False, id="sh3"),
]


@pytest.mark.sanitize
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind,bg", CASES)
def test_parity_random(device, dtype, kind, bg):
    check_parity(random_scene(N=200, C=3, **kind), device, dtype, bg=bg)


@pytest.mark.sanitize
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_parity_edge_gaussians(device, dtype):
    scene = edge_scene()
    s = to(scene, "cpu", torch.float64)
    _, _, alpha = run(ref.rasterize_camera, {**s})
    # the scene does what it says: some pixels hit the cut-off
    assert (alpha[0] > 1 - 2e-4).any()
    # float32: a pixel whose T crosses the 1e-4 cut-off on the other side of
    # the reference changes the gradient of every Gaussian behind it there;
    # with the scene's few (159) Gaussians that reached 5% of them (8, seed
    # 116438361204595)
    check_parity(scene, device, dtype, bg=True, grad_max_frac=0.02 if dtype == torch.float64 else 0.08)


def warp_edge_scene(W=48, H=32, f=40.0, n=160):
    """Small opaque Gaussians, many thin, whose footprints end a pixel or
    less past the borders of the CUDA backward's blocks of 8 x 4 pixels
    (csrc/rasterize_camera's rc_bwd_cell: a warp holds two of them stacked,
    a lane a pixel in each, and skips a block an entry's box misses; every
    2nd row for the old whole-row warps): a cull of the (block, entry) pairs
    that is not conservative drops whole edge rows or columns of some
    footprint, and gradients with them."""
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31, ()).item()))
    z = 3.0 + torch.rand(n, generator=g, dtype=torch.float64)
    col = torch.rand(n, generator=g) < 0.5  # half straddle a column border, half a row border
    bx = 8.0 * torch.randint(1, W // 8, (n,), generator=g).double()
    by = 2.0 * torch.randint(1, H // 2, (n,), generator=g).double()
    ex = 0.5 + 3 * torch.rand(n, generator=g, dtype=torch.float64)  # footprint half-extent, pixels
    side = torch.where(torch.rand(n, generator=g) < 0.5, -1.0, 1.0).double()
    u = torch.where(col, bx + side * (ex - torch.rand(n, generator=g, dtype=torch.float64)),
                    torch.rand(n, generator=g, dtype=torch.float64) * W)
    v = torch.where(col, torch.rand(n, generator=g, dtype=torch.float64) * H,
                    by + side * (ex - torch.rand(n, generator=g, dtype=torch.float64)))
    K = torch.tensor([[f, 0, W / 2], [0, f, H / 2], [0, 0, 1]], dtype=torch.float64)
    means = torch.stack(((u - W / 2) * z / f, (v - H / 2) * z / f, z), -1)
    # the footprint's half-extent across the border ~ 3 sigma (o ~ 0.9): one
    # axis thin (across), the other longer; a few rotated
    across = ex * z / f / 3
    along = (1 + 4 * torch.rand(n, generator=g, dtype=torch.float64)) * z / f
    scales = torch.stack((torch.where(col, across, along), torch.where(col, along, across),
                          torch.full((n,), 1e-3, dtype=torch.float64)), -1)
    quats = torch.zeros(n, 4, dtype=torch.float64)
    quats[:, 0] = 1.0
    tilt = torch.rand(n, generator=g) < 0.25
    quats[tilt] = random_quats(int(tilt.sum()))
    return dict(means=means, quats=quats, scales=scales,
                opacities=0.5 + 0.45 * torch.rand(n, generator=g, dtype=torch.float64),
                features=torch.rand(n, 3, generator=g, dtype=torch.float64), viewmats=torch.eye(4)[None].double(),
                Ks=K[None], width=W, height=H, sh_degree=None)


@pytest.mark.sanitize
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_parity_warp_edges(device, dtype):
    check_parity(warp_edge_scene(), device, dtype, bg=True)


@pytest.mark.parametrize("device", DEVICES)
def test_many_cameras_and_sizes(device):
    # odd sizes (partial tiles), more cameras, a wide image
    scene = random_scene(N=150, C=5, W=53, H=17)
    check_parity(scene, device, torch.float64)


def footprint_tiles(rec, W, H, tile=16):
    """The tiles (ty, tx) an item's footprint crosses: tiles/tiles_math.h's
    nurec_footprint_init and nurec_footprint_row, in the same double
    arithmetic (rec: u, v, A, B, C, o, depth, thr)."""
    u, v, A, B, C, _, _, thr = rec
    if not (thr >= 0 and A > 0 and C > 0) or not A * C - B * B > 0:
        return set()
    delta = A * C - B * B
    ext_y, ext_x = math.sqrt(thr * A / delta), math.sqrt(thr * C / delta)
    lo_y, hi_y = math.ceil(v - ext_y - 0.5), math.floor(v + ext_y - 0.5)
    lo_x, hi_x = math.ceil(u - ext_x - 0.5), math.floor(u + ext_x - 0.5)
    if not (lo_y <= hi_y and lo_x <= hi_x and hi_y >= 0 and hi_x >= 0 and lo_y <= H - 1 and lo_x <= W - 1):
        return set()
    dy_right = -B * math.sqrt(thr / (delta * C))
    py0, py1 = int(max(lo_y, 0)), int(min(hi_y, H - 1))
    clamp = lambda x, lo, hi: min(max(x, lo), hi)  # noqa: E731
    out = set()
    for ty in range(py0 // tile, py1 // tile + 1):
        r0, r1 = max(ty * tile, py0), min(ty * tile + tile - 1, py1)
        if r0 > r1:
            continue
        a, b = r0 + 0.5 - v, r1 + 0.5 - v
        k, q = B / A, delta / A
        dr, dl = clamp(dy_right, a, b), clamp(-dy_right, a, b)
        xr = u - k * dr + math.sqrt(max(thr - dr * dr * q, 0.0) * (1.0 / A))
        xl = u - k * dl - math.sqrt(max(thr - dl * dl * q, 0.0) * (1.0 / A))
        lo, hi = math.ceil(xl - 0.5), math.floor(xr - 0.5)
        if lo <= hi and hi >= 0 and lo <= W - 1:
            out.update((ty, tx) for tx in range(int(max(lo, 0)) // tile, int(min(hi, W - 1)) // tile + 1))
    return out


@pytest.mark.parametrize("tall", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device", DEVICES)
def test_binning_lists_each_footprints_tiles(device, dtype, tall):
    """Each tile lists exactly the items whose footprint crosses it, in depth
    order. The binning names a footprint's tiles from a tile rectangle less
    its cut cells where that has at most 64 cells (nurec_footprint_box),
    and by walking its rows otherwise: both kinds are here, and a wrong cut
    bit or a walked item written twice fails. In float32 the CUDA keys hold
    the depths' own bits (tiles.cu, depth keys), in float64 depth ranks;
    ``tall``: footprints of more than 32 tile rows, which a warp walks 32
    rows at a time (tiles.cu, emit_item_warp)."""
    C, N, W, H = 2, 150, 300, (1200 if tall else 200)
    scene = random_scene(N=N, C=C, W=W, H=H)
    scene["Ks"][:, 0, 0] = scene["Ks"][:, 1, 1] = 300.0
    scene["Ks"][:, 0, 2], scene["Ks"][:, 1, 2] = 150.3, H / 2 - 0.2
    scene["scales"][:12] *= 20 if tall else 6  # footprints past 64 tiles
    s = to(scene, device, dtype, grad=False)
    out = OPS.rasterize_camera_fwd(s["means"], s["quats"], s["scales"], s["opacities"], s["features"],
                                   s["viewmats"], s["Ks"], None, W, H, 0.01, 1e10, -1, 0, 1, 1 << 18)
    rec, counts, isect, ranges = (t.cpu() for t in (out[3], out[4], out[6], out[7]))
    want, cells, rows = {}, [], []
    for c in range(C):
        for g in range(N):
            tiles = footprint_tiles(rec[c, g].tolist(), W, H)
            assert int(counts[c, g]) == len(tiles), (c, g)
            if tiles:
                ys, xs = [t[0] for t in tiles], [t[1] for t in tiles]
                cells.append((max(ys) - min(ys) + 1) * (max(xs) - min(xs) + 1))
                rows.append(max(ys) - min(ys) + 1)
            for t in tiles:
                want.setdefault((c,) + t, []).append(c * N + g)
    assert min(cells) <= 64 < max(cells) and sum(x > 64 for x in cells) >= 5
    if tall:
        assert max(rows) > 32, max(rows)
    ty, tx = ranges.shape[1], ranges.shape[2]
    for c in range(C):
        for y in range(ty):
            for x in range(tx):
                a, b = ranges[c, y, x].tolist()
                items = sorted(want.get((c, y, x), []), key=lambda it: (rec.view(-1, 8)[it, 6].item(), it))
                assert isect[a:b].tolist() == items, (c, y, x)


def uses_ranks_per_image(C, N, W, H):
    """Mirror of key_bits in csrc/tiles/tiles.cu: whether the CUDA binning
    ranks items by depth within their image (fewer key bits) for this size."""
    bits = lambda n: max(1, int(n).bit_length())  # noqa: E731  (bits_for)
    tile = bits(C * -(-W // 16) * -(-H // 16))
    per_all, per_image = bits(max(C * N - 1, 1)), bits(max(N - 1, 1))
    cost = lambda end: -(-end // 8) * ((8 if end > 32 else 4) + 4)  # noqa: E731
    return C > 1 and cost(per_image + tile) < cost(per_all + tile)


@pytest.mark.sanitize
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_parity_ranks_per_image(device, dtype):
    # 600 items (10 rank bits) over 64 tiles (7 bits): 17 bits, 3 radix
    # passes; ranked within each camera's 300 items, 16 bits and 2 passes, so
    # the CUDA binning takes the per-image ranks (a second sort by image)
    assert uses_ranks_per_image(2, 300, 128, 64) and not uses_ranks_per_image(3, 200, 40, 30)
    check_parity(random_scene(N=300, C=2, W=128, H=64), device, dtype, bg=True)


def test_gradcheck_cpu():
    def draw():
        scene = random_scene(N=6, C=2, W=12, H=10, D=2)
        scene["opacities"] = torch.rand(6, dtype=torch.float64) * 0.4 + 0.3
        scene["means"] = scene["means"] * 0.3
        scene["scales"] = (torch.full((6, 3), 0.25, dtype=torch.float64)
                           * torch.exp(torch.randn(6, 3, dtype=torch.float64) * 0.2))
        return to(scene, "cpu", torch.float64, bg=True)
    s = away_from_cuts(draw, lambda s: run(ref.rasterize_camera, s))  # seen: an alpha 1e-6 from 1/255
    keys = list(GRAD_KEYS) + ["backgrounds"]
    assert gradcheck_inputs(lambda x: run(nurec_ops.rasterize_camera, x), s, keys)


def test_gradcheck_cpu_sh():
    def draw():
        scene = random_scene(N=5, C=2, W=10, H=9, sh=3)
        scene["opacities"] = torch.rand(5, dtype=torch.float64) * 0.4 + 0.3
        scene["means"] = scene["means"] * 0.3
        scene["scales"] = torch.full((5, 3), 0.25, dtype=torch.float64)
        return to(scene, "cpu", torch.float64)
    s = away_from_cuts(draw, lambda s: run(ref.rasterize_camera, s))
    keys = list(GRAD_KEYS)
    assert gradcheck_inputs(lambda x: run(nurec_ops.rasterize_camera, x), s, keys)


@pytest.mark.parametrize("device", DEVICES)
def test_noncontiguous_and_empty(device):
    scene = random_scene(N=50, C=2, W=20, H=16)
    s = to(scene, device, torch.float64, grad=False)
    nc = dict(s)
    nc["means"] = torch.stack((s["means"], s["means"]), 2)[..., 0]
    nc["features"] = s["features"].t().contiguous().t()
    a = run(nurec_ops.rasterize_camera, s)
    b = run(nurec_ops.rasterize_camera, nc)
    for x, y in zip(a, b):
        assert torch.equal(x, y)
    # no Gaussians: background only
    e = dict(s)
    for k in GRAD_KEYS:
        e[k] = s[k][:0]
    e["backgrounds"] = torch.rand(2, 3, dtype=torch.float64, device=device)
    r, d, al = run(nurec_ops.rasterize_camera, e)
    assert torch.equal(r, e["backgrounds"][:, None, None, :].expand(2, 16, 20, 3))
    assert (d == 0).all() and (al == 0).all()
    # no cameras, no pixels
    e = dict(s, viewmats=s["viewmats"][:0], Ks=s["Ks"][:0])
    assert [tuple(t.shape) for t in run(nurec_ops.rasterize_camera, e)] == [(0, 16, 20, 3), (0, 16, 20, 1), (0, 16, 20, 1)]
    e = dict(s, width=0)
    assert [tuple(t.shape) for t in run(nurec_ops.rasterize_camera, e)] == [(2, 16, 0, 3), (2, 16, 0, 1), (2, 16, 0, 1)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("D", [3, 6])
def test_per_camera_features_are_each_cameras_own(D, device):
    """features [C, N, D] (gsplat's per-camera colours): each camera's
    image and its rows of the features' gradient are those of that camera
    rendered alone with its own [N, D] (with D = 6, two CUDA passes of
    channels); the Gaussians' gradients are the cameras' sums."""
    s = to(random_scene(N=80, C=3, W=24, H=16, D=D), device, torch.float64, grad=False)
    feats = torch.rand(3, 80, D, dtype=torch.float64, device=device, requires_grad=True)
    keys = ("means", "quats", "scales", "opacities")
    leaves = {k: s[k].detach().clone().requires_grad_(True) for k in keys}
    out = run(nurec_ops.rasterize_camera, dict(s, **leaves, features=feats))
    cots = [torch.randn_like(o) for o in out]
    sum((o * c).sum() for o, c in zip(out, cots)).backward()
    summed = {k: torch.zeros_like(v) for k, v in leaves.items()}
    for c in range(3):
        one = {k: v.detach().clone().requires_grad_(True) for k, v in leaves.items()}
        f = feats[c].detach().clone().requires_grad_(True)
        alone = run(nurec_ops.rasterize_camera, dict(s, **one, features=f, viewmats=s["viewmats"][c:c + 1],
                                                      Ks=s["Ks"][c:c + 1]))
        sum((o * cot[c:c + 1]).sum() for o, cot in zip(alone, cots)).backward()
        for k, (a, b) in enumerate(zip(out, alone)):
            assert_close(a[c:c + 1], b, torch.float64, msg=f"camera {c} output {k}")
        assert_close(feats.grad[c], f.grad, torch.float64, msg=f"camera {c} features' gradient")
        for k in keys:
            summed[k] += one[k].grad
    for k in keys:
        assert_close(leaves[k].grad, summed[k], torch.float64, msg=k)


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("absgrad", [False, True])
def test_three_channels_backward_as_four(dtype, absgrad):
    """On CUDA an absgrad call of exactly 3 channels runs a backward kernel
    built for 3 (kCh = 3); with a fourth, zero channel the same scene takes
    the RC_CH one (as every plain call does). Large Gaussians, so that most
    entries' sums take the warp's path (the plain kernel's halving
    reduction) and long lists are cut into parts. The two must agree:
    outputs, every gradient, absgrad; the zero channel's feature gradient
    exactly 0."""
    s = to(random_scene(N=3000, C=2, W=96, H=64, D=3), "cuda", dtype, grad=False)
    s["scales"] = s["scales"] * 2.5
    keys = ("means", "quats", "scales", "opacities")
    f3 = s["features"]
    f4 = torch.cat([f3, torch.zeros_like(f3[:, :1])], 1)
    cot = None
    results = []
    for feats in (f3, f4):
        leaves = {k: s[k].detach().clone().requires_grad_(True) for k in keys}
        leaves["features"] = feats.detach().clone().requires_grad_(True)
        out = run(nurec_ops.rasterize_camera, dict(s, **leaves, return_meta=absgrad, means2d_grad=absgrad,
                                                   absgrad=absgrad))
        img, rest = out[0], list(out[1:3])
        if cot is None:
            cot = [torch.randn_like(img)] + [torch.randn_like(o) for o in rest]
        g_img = cot[0] if feats.shape[1] == 3 else torch.cat([cot[0], torch.zeros_like(cot[0][..., :1])], -1)
        loss = (img * g_img).sum() + sum((o * c).sum() for o, c in zip(rest, cot[1:]))
        loss.backward()
        meta = out[3] if absgrad else None
        results.append((img[..., :3].detach(), [o.detach() for o in rest], leaves,
                        meta.means2d.absgrad.detach() if absgrad else None))
    (i3, r3, l3, a3), (i4, r4, l4, a4) = results
    assert_close(i3, i4, dtype, msg="image")
    for k, (a, b) in enumerate(zip(r3, r4)):
        assert_close(a, b, dtype, msg=f"output {k + 1}")
    for k in keys:
        assert_close(l3[k].grad, l4[k].grad, dtype, factor=5.0, msg=f"{k}' gradient")
    assert_close(l3["features"].grad, l4["features"].grad[:, :3], dtype, factor=5.0, msg="features' gradient")
    assert torch.equal(l4["features"].grad[:, 3], torch.zeros_like(l4["features"].grad[:, 3]))
    assert l3["means"].grad.abs().sum() > 0
    if absgrad:
        assert_close(a3, a4, dtype, factor=5.0, msg="absgrad")
        assert a3.abs().sum() > 0


@pytest.mark.parametrize("device", DEVICES)
def test_radius_clip_edges(device):
    """radius_clip's ends, the op as its reference: under one pixel no item
    is dropped (radii are whole pixels, at least 1: the call is the
    unclipped one, bit for bit), and inf drops every item (alpha 0, radii
    0, the background alone)."""
    s = to(random_scene(N=80, C=2, W=24, H=16), device, torch.float64, bg=True, grad=False)
    plain = run(lambda *a, **k: nurec_ops.rasterize_camera(*a, **k, return_meta=True), s)
    under = run(lambda *a, **k: nurec_ops.rasterize_camera(*a, **k, return_meta=True, radius_clip=0.99), s)
    for a, b in zip(plain[:3], under[:3]):
        assert torch.equal(a, b)
    assert torch.equal(plain[3].radii, under[3].radii) and (plain[3].radii > 0).any()
    every = run(lambda *a, **k: nurec_ops.rasterize_camera(*a, **k, return_meta=True, radius_clip=math.inf), s)
    assert (every[2] == 0).all() and (every[3].radii == 0).all()
    assert_close(every[0], s["backgrounds"][:, None, None, :].expand_as(every[0]), torch.float64)
    ref_every = run(lambda *a, **k: ref.rasterize_camera(*a, **k, radius_clip=math.inf), s)
    assert (ref_every[2] == 0).all()


# ------------------------------------------------------------------ errors

ERRORS = GAUSSIAN_ERRORS + [  # the shared rows (tests/bad_inputs.py), then the op's own
    ("near", changed(near=0.0)),
    ("features", changed(features=lambda s: s["features"][:, :0])),
    # per camera [C, N, D]: C (2) and N (10) must match
    ("features", changed(features=lambda s: s["features"][None].expand(3, -1, -1))),
    ("features", changed(features=lambda s: s["features"][None, :9].expand(2, -1, -1))),
    ("features", changed(features=lambda s: s["features"][None, :, :0].expand(2, -1, -1))),
    ("sh_degree", changed(features=lambda s: s["features"][:, None].expand(-1, 4, -1))),
    ("sh_degree", changed(sh_degree=4, features=lambda s: s["features"][:, None].expand(-1, 25, -1))),
    ("features", changed(sh_degree=2, features=lambda s: s["features"][:, None].expand(-1, 4, -1))),
    ("Ks", changed(Ks=lambda s: s["Ks"][:1])),
    ("backgrounds", changed(backgrounds=lambda s: torch.zeros(2, 4, dtype=torch.float64, device=s["means"].device))),
    ("eps2d", changed(eps2d=-0.1)),
    ("eps2d", changed(eps2d=float("nan"))),
    ("radius_clip", changed(radius_clip=-1.0)),
    ("radius_clip", changed(radius_clip=float("nan"))),
    ("far", changed(far=0.001)),
    ("width", changed(width=-3)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,make", ERRORS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(ERRORS)])
def test_bad_input(device, name, make):
    s = to(random_scene(N=10, C=2, W=8, H=8), device, torch.float64, grad=False)
    raises_real_and_fake(lambda x: run(nurec_ops.rasterize_camera, x), make(s), name)


@gpu
def test_mixed_devices():
    s = to(random_scene(N=10, C=2, W=8, H=8), "cuda", torch.float64, grad=False)
    s["Ks"] = s["Ks"].cpu()
    with pytest.raises(RuntimeError, match="`Ks`"):
        run(nurec_ops.rasterize_camera, s)


# ----------------------------------------------------------- compile helper

def check_compiled(f, args, n_grad):
    """torch.compile(f, fullgraph=True) equals eager f: the value and the
    gradients with respect to the first n_grad arguments."""
    eager = f(*args)
    ge = torch.autograd.grad(eager, args[:n_grad])
    out = torch.compile(f, fullgraph=True)(*args)
    gc = torch.autograd.grad(out, args[:n_grad])
    torch.testing.assert_close(out, eager)
    for a, b in zip(gc, ge):
        torch.testing.assert_close(a, b)


# --------------------------------------------------------------- CUDA only

@gpu
def test_cuda_vs_cpu_large():
    torch.manual_seed(torch.initial_seed() % (1 << 31))
    W, H, N = 648, 420, 100_000
    means = torch.rand(N, 3, dtype=torch.float64) * 4 - 2
    scene = dict(means=means, quats=random_quats(N), scales=torch.rand(N, 3, dtype=torch.float64) * 0.02 + 1e-4,
                 opacities=torch.rand(N, dtype=torch.float64), features=torch.rand(N, 3, dtype=torch.float64),
                 width=W, height=H, sh_degree=None)
    V, K = cameras(2, W, H, f=480.0, dist=5.0)
    scene.update(viewmats=V, Ks=K)
    for dtype in (torch.float32, torch.float64):
        c = to(scene, "cuda", dtype, bg=True)
        p = to(scene, "cpu", dtype, bg=False)
        p["backgrounds"] = c["backgrounds"].detach().cpu().requires_grad_(True)
        oc = run(nurec_ops.rasterize_camera, c)
        op = run(nurec_ops.rasterize_camera, p)
        cot = [torch.randn_like(o) for o in op]
        gc = grads(oc, c, [x.cuda() for x in cot])
        gp = grads(op, p, cot)
        f = 1.0 if dtype == torch.float64 else 5.0
        for name, a, b in zip("rda", oc, op):
            if dtype == torch.float64:
                assert_close(a, b, dtype, factor=10, msg=name)
            else:  # rare alpha-threshold flips from FMA rounding: judge per pixel
                bad = ((a.cpu() - b).abs() > 1e-3 * max(1.0, b.abs().max().item())).sum().item()
                assert bad <= 1e-4 * b.numel(), (name, bad)
        for k in gp:
            a, b = gc[k].cpu().double(), gp[k].double()
            err = (a - b).norm() / b.norm().clamp_min(1e-12)
            assert err < (1e-9 if dtype == torch.float64 else 2e-3 * f), (k, err.item())


@gpu
def test_cuda_grid_limits_name_the_argument():
    """Sizes past one CUDA launch's grid are refused with the argument named
    (not a bare launch failure)."""
    dev = "cuda"
    N = 4
    g = dict(means=torch.randn(N, 3, device=dev) + torch.tensor([0.0, 0.0, 5.0], device=dev),
             quats=torch.randn(N, 4, device=dev), scales=torch.full((N, 3), 0.1, device=dev),
             opacities=torch.full((N,), 0.5, device=dev))
    K = torch.tensor([[[10.0, 0, 0.5], [0, 10.0, 0.5], [0, 0, 1]]], device=dev)
    V = torch.eye(4, device=dev)[None]
    with pytest.raises(RuntimeError, match="`height`"):
        nurec_ops.rasterize_camera(**g, features=torch.rand(N, 3, device=dev), viewmats=V, Ks=K,
                                   width=1, height=65535 * 16 + 1, capacity=1024)
    C = 70000  # cameras x channel passes past 65535
    with pytest.raises(RuntimeError, match="`viewmats`"):
        nurec_ops.rasterize_camera(**g, features=torch.rand(N, 3, device=dev), viewmats=V.expand(C, 4, 4),
                                   Ks=K.expand(C, 3, 3), width=1, height=1, capacity=1024)


# Long lists cut into parts (CUDA): tests/test_op_registry.py, over the registry's rows.
