"""Reference camera models (SPEC section 6), pure PyTorch: the projection of
camera-space points p = (x, y, z) (OpenCV frame) to pixels, for "pinhole",
"opencv", "fisheye", "ftheta" and gsplat's "ortho" (pixel (fx x + cx,
fy y + cy), z the depth), with the valid field of each, and the
Jacobian of a projection by autograd. Pixel coordinates have their origin
at the top-left corner of the first pixel (pixel centres at x + 0.5), as
SPEC section 3's and NCore's image coordinates; nurec_ops.sensors reads
real (NCore) calibrations into these parameters.

These are the parity oracle of the camera models (the C and CUDA models
follow them), tested against OpenCV's ``projectPoints`` and NCore's camera
models in tests/test_camera_models.py.

Parameters per camera, as ``rasterize_camera`` takes them (one camera's
row here, broadcast against the points):
- pinhole: ``Ks [3, 3]``;
- opencv: ``Ks``, ``radial [6]`` (k1..k6), ``tangential [2]`` (p1, p2),
  ``thin_prism [4]`` (s1..s4);
- fisheye: ``Ks``, ``radial [4]`` (k1..k4), ``max_angle []``;
- ortho: ``Ks [3, 3]`` (fx, fy in pixels per metre);
- ftheta: ``principal_point [2]``, ``angle_to_pixel [6]`` (c0..c5),
  ``linear_cde [3]``, ``max_angle []``; and, for a calibration whose
  reference polynomial is the backward one, ``pixel_to_angle [6]`` with
  ``reference_poly = 1`` (the forward map is then its inverse, by Newton
  steps started from ``angle_to_pixel``'s value).
"""
import torch

MODELS = ("pinhole", "opencv", "fisheye", "ftheta", "ortho")


def _poly(c, t):
    """sum_i c[..., i] t^i (Horner)."""
    out = torch.zeros_like(t)
    for i in range(c.shape[-1] - 1, -1, -1):
        out = out * t + c[..., i]
    return out


def _dpoly(c, t):
    out = torch.zeros_like(t)
    for i in range(c.shape[-1] - 1, 0, -1):
        out = out * t + i * c[..., i]
    return out


def opencv_max_radius(radial, r_max=10.0, steps=20000):
    """The first radius (of a = x/z, b = y/z) where the radial map r d(r)
    stops increasing (SPEC 6: means past it are dropped), or r_max. [...,6]
    -> [...]."""
    r = torch.linspace(0, r_max, steps, dtype=radial.dtype, device=radial.device)
    k = radial[..., None, :]
    r2 = r * r
    d = (1 + k[..., 0] * r2 + k[..., 1] * r2 ** 2 + k[..., 2] * r2 ** 3) / \
        (1 + k[..., 3] * r2 + k[..., 4] * r2 ** 2 + k[..., 5] * r2 ** 3)
    m = r * d
    dec = torch.diff(m, dim=-1) <= 0
    first = torch.where(dec.any(-1), dec.float().argmax(-1), torch.full_like(dec[..., 0], steps - 1,
                                                                              dtype=torch.int64))
    return first.to(radial.dtype) * (r_max / (steps - 1))  # r[first], without indexing (vmap)


def project(model, p, params):
    """Pixels [..., 2] and the valid field [...] (bool) of camera-space
    points p [..., 3] under ``model`` with one camera's ``params`` (a dict,
    see the module docstring). Near / far limits are the caller's."""
    x, y, z = p.unbind(-1)
    if model == "ortho":  # gsplat's orthographic camera: fx, fy in pixels per metre
        K = params["Ks"]
        return torch.stack((K[..., 0, 0] * x + K[..., 0, 2], K[..., 1, 1] * y + K[..., 1, 2]), -1), torch.ones_like(
            z, dtype=torch.bool)
    if model == "pinhole" or model == "opencv":
        K = params["Ks"]
        fx, fy, cx, cy = K[..., 0, 0], K[..., 1, 1], K[..., 0, 2], K[..., 1, 2]
        zs = torch.where(z > 0, z, torch.ones_like(z))
        a, b = x / zs, y / zs
        valid = z > 0
        if model == "opencv":
            k, t, s = params["radial"], params["tangential"], params["thin_prism"]
            r2 = a * a + b * b
            d = (1 + k[..., 0] * r2 + k[..., 1] * r2 ** 2 + k[..., 2] * r2 ** 3) / \
                (1 + k[..., 3] * r2 + k[..., 4] * r2 ** 2 + k[..., 5] * r2 ** 3)
            a, b = (a * d + 2 * t[..., 0] * a * b + t[..., 1] * (r2 + 2 * a * a) + s[..., 0] * r2 + s[..., 1] * r2 ** 2,
                    b * d + t[..., 0] * (r2 + 2 * b * b) + 2 * t[..., 1] * a * b + s[..., 2] * r2 + s[..., 3] * r2 ** 2)
            valid = valid & (torch.sqrt(r2) <= opencv_max_radius(k))
        return torch.stack((fx * a + cx, fy * b + cy), -1), valid
    rho = torch.sqrt(x * x + y * y)
    theta = torch.atan2(rho, z)
    # theta / rho, smooth through the optical axis (-> 1 / z there)
    small = rho < 1e-12 * torch.clamp(z.abs(), min=1e-30)
    t_over_rho = torch.where(small, 1 / torch.where(small, z, torch.ones_like(z)),
                             theta / torch.where(small, torch.ones_like(rho), rho))
    valid = theta <= params["max_angle"]
    if model == "fisheye":
        K, k = params["Ks"], params["radial"]
        fx, fy, cx, cy = K[..., 0, 0], K[..., 1, 1], K[..., 0, 2], K[..., 1, 2]
        t2 = theta * theta
        g = t_over_rho * (1 + k[..., 0] * t2 + k[..., 1] * t2 ** 2 + k[..., 2] * t2 ** 3 + k[..., 3] * t2 ** 4)
        return torch.stack((fx * g * x + cx, fy * g * y + cy), -1), valid
    if model == "ftheta":
        if int(params.get("reference_poly", 2)) == 1:
            delta = _ftheta_inverse(params["pixel_to_angle"], params["angle_to_pixel"], theta)
        else:
            delta = _poly(params["angle_to_pixel"], theta)
        # delta / rho = (delta / theta) (theta / rho); delta(0) = c0 = 0 for real lenses
        g = torch.where(theta > 1e-12, delta / torch.where(theta > 1e-12, theta, torch.ones_like(theta)),
                        params["angle_to_pixel"][..., 1] + 0 * theta) * t_over_rho
        u0, v0 = g * x, g * y
        c, d, e = params["linear_cde"].unbind(-1)
        cx, cy = params["principal_point"].unbind(-1)
        return torch.stack((c * u0 + d * v0 + cx + 0.5, e * u0 + v0 + cy + 0.5), -1), valid
    raise ValueError(f"camera_model must be one of {MODELS}, got {model!r}")


def _ftheta_inverse(backward, forward, theta, steps=10):
    """Pixel distance delta with backward(delta) = theta: Newton steps from
    the forward polynomial's value."""
    delta = _poly(forward, theta)
    for _ in range(steps):
        f = _poly(backward, delta) - theta
        delta = delta - f / _dpoly(backward, delta)
    return delta


def jacobian(model, p, params):
    """d pixel / d p [..., 2, 3] at points p [..., 3] (autograd; gradients
    flow through it, as the EWA covariance needs)."""
    flat = p.reshape(-1, 3)

    def one(q):
        return project(model, q, params)[0]

    J = torch.func.vmap(torch.func.jacrev(one))(flat)
    return J.reshape(*p.shape[:-1], 2, 3)


def ray_angle(p):
    """Angle of camera-space points from the optical axis (radians)."""
    return torch.atan2(torch.linalg.vector_norm(p[..., :2], dim=-1), p[..., 2])


__all__ = ["MODELS", "project", "jacobian", "opencv_max_radius", "ray_angle"]
