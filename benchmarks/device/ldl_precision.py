"""The camera walks' alpha in float32, emulated with numpy (one rounding per
operation, the GPU's approximations as random errors of their size), in
the walks' former form (splat_alpha_staged: q = dx (a dx + b dy) + c dy^2,
then o ex2(q)) and in the completed squares that replaced it
(splat_alpha_ldl: ex2(L - t^2 - w^2), t and w from the tile's centre), both
against float64, over random Gaussians and pixels of the tiles they reach.
Prints each form's alpha error and its 1/255 flips. The evidence for that
change's precision (csrc/tiles/splat_math_generic.h quotes its figures);
not a test, nothing imports it.

    python3 benchmarks/device/ldl_precision.py [seed]
"""
import sys
import numpy as np
rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
f32, f64 = np.float32, np.float64
S = f64(1.4426950408889634)
def r32(x): return np.asarray(x, f64).astype(f32)
def fma(a, b, c): return r32(a.astype(f64) * b.astype(f64) + c.astype(f64))
def mul(a, b): return r32(a.astype(f64) * b.astype(f64))
def add(a, b): return r32(a.astype(f64) + b.astype(f64))
def ex2(x): return r32(np.exp2(x.astype(f64)) * (1 + rng.uniform(-2, 2, x.shape) * 2.0**-23))
def approx(x, ulps=3): return r32(x * (1 + rng.uniform(-ulps, ulps, np.shape(x)) * 2.0**-24))
def run(n, smin, smax, txmax, tymax, amax=50):
    sig1 = np.exp(rng.uniform(np.log(smin), np.log(smax), n)); aniso = np.exp(rng.uniform(0, np.log(amax), n))
    sig2 = np.maximum(sig1 / aniso, 0.55); th = rng.uniform(0, np.pi, n)
    c, s = np.cos(th), np.sin(th)
    cxx = c*c*sig1**2 + s*s*sig2**2 + 0.3; cyy = s*s*sig1**2 + c*c*sig2**2 + 0.3; cxy = c*s*(sig1**2 - sig2**2)
    det = cxx*cyy - cxy**2
    A, B, C = r32(cyy/det), r32(-cxy/det), r32(cxx/det)
    o = r32(rng.uniform(0.004, 1.0, n))
    tx0 = rng.integers(0, txmax, n) * 16.0; ty0 = rng.integers(0, tymax, n) * 16.0
    r = 3.5 * np.sqrt(np.maximum(cxx, cyy))
    u = r32(tx0 + 8 + rng.uniform(-1, 1, n) * (r + 8)); v = r32(ty0 + 8 + rng.uniform(-1, 1, n) * (r + 8))
    # main's staged conic
    e2, e3, e4 = r32(A * (-0.5 * S)), r32(B * (-S)), r32(C * (-0.5 * S))
    # splat_stage_ldl (float32, the GPU's approximations)
    h = f32(0.5 * S)
    bb = mul(B, B); dt = add(fma(A, C, -bb), -fma(B, B, -bb))
    iA = approx(1 / A.astype(f64), 2); hA = mul(h, A); hd = mul(mul(h, np.maximum(dt, f32(0))), iA)
    al = mul(hA, approx(1 / np.sqrt(hA.astype(f64)), 3))
    ga = mul(al, mul(B, iA))
    be = np.where(hd > 0, mul(hd, approx(1 / np.sqrt(np.maximum(hd, 1e-30).astype(f64)), 3)), f32(0))
    L = mul(r32(np.log2(o.astype(f64)) + rng.uniform(-1, 1, n) * 2.0**-22), f32(1.0))
    xc, yc = r32(tx0 + 8), r32(ty0 + 8)
    ul, vl = add(u, -xc), add(v, -yc)
    K1 = -fma(al, ul, mul(ga, vl)); K2 = -mul(be, vl)
    out = {}
    for name in ("main", "ldl"):
        out[name] = dict(err=[], flips=0)
    n64 = 0
    for k in range(32):
        lx = rng.integers(0, 16, n); ly = rng.integers(0, 16, n)
        px, py = r32(tx0 + lx + 0.5), r32(ty0 + ly + 0.5)
        dx = px.astype(f64) - u; dy = py.astype(f64) - v
        sg = 0.5 * (A * dx * dx + C * dy * dy) + B * dx * dy
        a64 = np.minimum(0.99, o * np.exp(-sg)); ok64 = (a64 >= 1 / 255) & (sg >= 0)
        dxf, dyf = add(px, -u), add(py, -v)
        q = fma(dxf, fma(e3, dyf, mul(e2, dxf)), mul(mul(e4, dyf), dyf))
        oa = mul(o, ex2(q)); okm = (q <= 0) & (oa >= f32(1 / 255))
        x, y = r32(lx - 7.5), r32(ly - 7.5)
        t = fma(al, x, fma(ga, y, K1)); w = fma(be, y, K2)
        qe = fma(-t, t, fma(-w, w, L)); oal = ex2(qe); okl = oal >= f32(1 / 255)
        for name, ok, a in (("main", okm, np.minimum(f32(0.99), oa)), ("ldl", okl, np.minimum(f32(0.99), oal))):
            same = ok == ok64
            m = same & ok64
            out[name]["err"].append(np.abs(a[m] - a64[m]))
            out[name]["flips"] += int((~same).sum())
        n64 += int(ok64.sum())
    for name in out:
        e = np.concatenate(out[name]["err"])
        print(f"  {name:4s}: |alpha - alpha64| mean {e.mean():.2e}  p99.99 {np.quantile(e, 0.9999):.2e}  max {e.max():.2e};"
              f"  1/255 flips {out[name]['flips']} of {n64} pairs")
for title, args in (("all sizes (0.55-300 px), 1920x1280 tiles", (100000, 0.55, 300, 120, 80)),
                    ("small (0.55-2 px) at x ~ 3,200-4,000", (100000, 0.55, 2, 250, 80)),
                    ("large (100-5,000 px)", (50000, 100, 5000, 120, 80)),
                    ("elongated (aniso up to 1,000)", (100000, 0.55, 300, 120, 80, 1000))):
    print(title)
    run(*args)
