"""SPEC section 6's camera models on the H200: the 1080p street scene seen
through the real calibrations (../shared/data/gsplat/, resized to 1920 wide)
by nurec_ops' fused op (pinhole, FTheta, OpenCV, fisheye) and by gsplat
1.5.3's 3DGUT path (``with_ut=True``: its only path with FTheta and
distortion) in one process, interleaved round by round (each round the mean
of back-to-back calls between two CUDA events), medians; and the PSNR of
our images against gsplat's 3DGUT images (EWA and the unscented transform
differ for large Gaussians near the edge of a wide lens).

    python3 benchmarks/bench_camera_models.py [--rounds 7] [--calls 10]
"""
import argparse
import math
import os
import statistics
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import nurec_ops  # noqa: E402
from bench_rasterize_camera import street  # noqa: E402
from nurec_ops import sensors  # noqa: E402
from timing import autograd_step, back_to_back_us, table  # noqa: E402

KEYS = ("means", "quats", "scales", "opacities", "features")
CAMS = {  # model -> (file, camera)
    "ftheta": ("gsplat/test_ftheta_camera_params.json", "camera_front_wide_120fov"),
    "opencv": ("gsplat/test_pinhole_camera_params.json", "camera_front"),
    "fisheye": ("gsplat/test_fisheye_camera_params.json", "camera_front_fisheye_140fov"),
}


def psnr(a, b):
    mse = torch.mean((a.double() - b.double()) ** 2).item()
    return float("inf") if mse == 0 else 10 * math.log10(1 / mse)


def calibration(model, device):
    import shared_data

    f, cam = CAMS[model]
    rec = sensors.read_cameras(shared_data.require(f))[cam]
    scale = 1920 / rec["resolution"][0]
    _, p, (W, H) = sensors.camera_params(rec, scale=scale)
    return rec, {k: v[None].to(device) if v.is_floating_point() else v[None].to(device) for k, v in p.items()}, W, H


def ours_renderer(sc, model, p, W, H):
    kw = {k: (v.float() if v.is_floating_point() else v) for k, v in p.items() if k != "Ks"}
    K = p["Ks"].float() if "Ks" in p else None

    def run(L):
        if model == "pinhole":
            return nurec_ops.rasterize_camera(L["means"], L["quats"], L["scales"], L["opacities"], L["features"],
                                              sc["viewmats"], sc["Ks"], W, H)[::2]
        return nurec_ops.rasterize_camera(L["means"], L["quats"], L["scales"], L["opacities"], L["features"],
                                          sc["viewmats"], K, W, H, camera_model=model, **kw)[::2]
    return run


def gsplat_renderer(sc, model, rec, p, W, H):
    """gsplat's 3DGUT with the same camera. Its FTheta principal point is
    the first pixel's centre (SPEC 6): ours is half a pixel on."""
    import gsplat
    from gsplat.cuda._wrapper import FThetaCameraDistortionParameters, FThetaPolynomialType

    kw = dict(with_ut=True, with_eval3d=True, packed=False, near_plane=0.01, far_plane=1e10)
    if model == "pinhole":
        K = sc["Ks"]
    elif model == "ftheta":
        it = rec["intrinsics"]
        pp = p["principal_point"][0].float()
        K = torch.eye(3, device=pp.device)[None].clone()
        K[0, 0, 2], K[0, 1, 2] = pp[0] + 0.5, pp[1] + 0.5  # our pixel convention, as SPEC 6 relates them
        c = [float(v) for v in p["angle_to_pixel"][0]]
        b = [float(v) for v in p["pixel_to_angle"][0]]
        kw.update(camera_model="ftheta", ftheta_coeffs=FThetaCameraDistortionParameters(
            reference_poly=FThetaPolynomialType.ANGLE_TO_PIXELDIST if int(p["reference_poly"][0]) == 2
            else FThetaPolynomialType.PIXELDIST_TO_ANGLE,
            pixeldist_to_angle_poly=tuple(b), angle_to_pixeldist_poly=tuple(c), max_angle=float(it["max_angle_rad"]),
            linear_cde=tuple(float(v) for v in p["linear_cde"][0])))
    elif model == "fisheye":
        K = p["Ks"].float()
        kw.update(camera_model="fisheye", radial_coeffs=p["radial"].float())
    else:
        K = p["Ks"].float()
        kw.update(camera_model="pinhole", radial_coeffs=p["radial"].float(), tangential_coeffs=p["tangential"].float(),
                  thin_prism_coeffs=p["thin_prism"].float())

    def run(L, meta=False):
        colors, alphas, m = gsplat.rasterization(L["means"], L["quats"], L["scales"], L["opacities"],
                                                 L["features"], sc["viewmats"], K, W, H, **kw)
        return (colors, alphas, m) if meta else (colors, alphas)
    return run


def means_agreement(sc, model, p, W, H, gs):
    """The projections of the means, ours against gsplat's camera model:
    every Gaussian shrunk to 1 mm (so gsplat's unscented mean is the
    projected mean), px distance over those both keep and whose mean lies
    in the image, FTheta's in our pixel convention: (median, 99th
    percentile, max, count)."""
    kw = {k: (v.float() if v.is_floating_point() else v) for k, v in p.items() if k != "Ks"}
    K = p["Ks"].float() if "Ks" in p else sc["Ks"]
    L = {k: sc[k].detach() for k in KEYS}
    L["scales"] = torch.full_like(L["scales"], 1e-3)
    with torch.no_grad():
        extra = {} if model == "pinhole" else dict(camera_model=model, **kw)
        r = nurec_ops.rasterize_camera(L["means"], L["quats"], L["scales"], L["opacities"], L["features"],
                                       sc["viewmats"], K, W, H, return_meta=True, **extra)
        _, _, m = gs(L, meta=True)
    ours, theirs = r.meta.means2d.float(), m["means2d"].float()
    if model == "ftheta":  # SPEC 6: gsplat's FTheta pixel (0, 0) is the first pixel's centre, ours its corner
        theirs = theirs - 0.5

    def kept(radii):
        return (radii > 0).all(-1) if radii.dim() == 3 else radii > 0
    inside = (ours[..., 0] >= 0) & (ours[..., 0] < W) & (ours[..., 1] >= 0) & (ours[..., 1] < H)
    both = kept(r.meta.radii) & kept(m["radii"]) & inside
    d = (ours - theirs).norm(dim=-1)[both]
    if d.numel() == 0:
        return float("nan"), float("nan"), float("nan"), 0
    return d.median().item(), d.quantile(0.99).item(), d.max().item(), d.numel()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--no-gsplat", action="store_true")
    a = ap.parse_args()
    sc = street("cuda", torch.float32)
    L = {k: sc[k].detach().clone().requires_grad_(True) for k in KEYS}
    fns, shapes, images = {}, {}, {}
    for model in ("pinhole", "ftheta", "opencv", "fisheye"):
        if model == "pinhole":
            rec, p, W, H = None, {}, sc["width"], sc["height"]
        else:
            rec, p, W, H = calibration(model, "cuda")
        shapes[model] = (W, H)
        fns[("ours", model)] = ours_renderer(sc, model, p, W, H)
        if not a.no_gsplat:
            try:
                fns[("gsplat 3DGUT", model)] = gsplat_renderer(sc, model, rec, p, W, H)
            except Exception as e:  # noqa: BLE001 - report and go on without this peer row
                print(f"gsplat 3DGUT {model}: not run ({type(e).__name__}: {e})")
    steps = {}
    for key, f in list(fns.items()):
        try:
            with torch.no_grad():
                for _ in range(2):
                    out = f(L)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            print(f"{key}: failed ({type(e).__name__}: {str(e)[:200]})")
            continue
        images[key] = [o.detach() for o in out]
        cot = [torch.randn_like(o) for o in out]
        steps[key] = (autograd_step(lambda f=f: f(L), L, cot, False), autograd_step(lambda f=f: f(L), L, cot, True))
    t = {k: ([], []) for k in steps}
    for _ in range(a.rounds):
        for k, (fw, fb) in steps.items():
            t[k][0].append(back_to_back_us(fw, calls=a.calls, warmup=2) / 1e3)
            t[k][1].append(back_to_back_us(fb, calls=a.calls, warmup=2) / 1e3)
    rows = []
    ours_pin = statistics.median(t[("ours", "pinhole")][1]) if ("ours", "pinhole") in t else float("nan")
    for (who, model), (tf, tb) in t.items():
        fw, fb = statistics.median(tf), statistics.median(tb)
        peer = t.get(("gsplat 3DGUT", model))
        ratio = f"{statistics.median(peer[1]) / fb:.2f}x" if who == "ours" and peer else "-"
        vs_pin = f"{fb / ours_pin:.2f}" if who == "ours" else "-"
        im = "-"
        if who == "ours" and ("gsplat 3DGUT", model) in images:
            im = f"{psnr(images[(who, model)][0], images[('gsplat 3DGUT', model)][0]):.1f}"
        W, H = shapes[model]
        rows.append([who, model, f"{W}x{H}", f"{fw:.3f}", f"{fb:.3f}", ratio, vs_pin, im])
    print(table(rows, ["renderer", "camera", "image", "fwd ms", "fwd+bwd ms", "gsplat 3DGUT / ours (f+b)",
                       "ours / our pinhole (f+b)", "PSNR vs gsplat 3DGUT (dB)"]))
    print(f"street scene: {sc['means'].shape[0]} Gaussians; gsplat {__import__('gsplat').__version__}"
          if not a.no_gsplat else "")
    rows = []
    if not a.no_gsplat:
        import gsplat
    for model in ("pinhole", "ftheta", "opencv", "fisheye"):
        if a.no_gsplat or ("gsplat 3DGUT", model) not in fns:
            continue
        rec, p, W, H = (None, {}, sc["width"], sc["height"]) if model == "pinhole" else calibration(model, "cuda")
        med, p99, mx, n = means_agreement(sc, model, p, W, H, fns[("gsplat 3DGUT", model)])
        rows.append([model, "3DGUT", f"{n}", f"{med:.2e}", f"{p99:.2e}", f"{mx:.2e}"])
        if model == "pinhole":  # the classic path's projection: the floor of this comparison
            def classic(L, meta=True):
                return gsplat.rasterization(L["means"], L["quats"], L["scales"], L["opacities"], L["features"],
                                            sc["viewmats"], sc["Ks"], W, H, packed=False, near_plane=0.01)
            med, p99, mx, n = means_agreement(sc, model, p, W, H, classic)
            rows.append([model, "classic", f"{n}", f"{med:.2e}", f"{p99:.2e}", f"{mx:.2e}"])
    if rows:
        print("projections of the means (1 mm Gaussians), ours vs gsplat's camera models, px:")
        print(table(rows, ["camera", "gsplat path", "means compared", "median", "99th pct", "max"]))


if __name__ == "__main__":
    main()
