"""SPEC section 7's rolling shutter, what the fused ops and the reference
share: the ops' arguments (a shutter code and ``viewmats_end`` as given:
the kernels pack each sensor's poses themselves, csrc/sensors/
rolling_shutter_generic.h's rs_pack), the reference's packed poses
``[C, 16]`` (the same layout: sensor -> world rotations as unit
quaternions, the end one in the start's hemisphere, and the sensor
centres), the pose at relative time tau (slerp and lerp, in PyTorch for
the reference twin), and a camera pixel's relative time. No host sync."""
import torch

from . import _checks as Ck
from .reference import quat as Q

SHUTTERS = {"global": 0, "top_to_bottom": 1, "bottom_to_top": 2, "left_to_right": 3, "right_to_left": 4}
PARAMS = 16  # NUREC_RS_PARAMS
STEPS = 10  # NUREC_RS_STEPS


def rotmat_to_quat(R):
    """Unit quaternions (w, x, y, z) of rotation matrices [..., 3, 3]
    (Shepperd's method: the largest of the four diagonal combinations)."""
    m00, m11, m22 = R[..., 0, 0], R[..., 1, 1], R[..., 2, 2]
    tr = m00 + m11 + m22
    cands = torch.stack((
        torch.stack((1 + tr, R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0], R[..., 1, 0] - R[..., 0, 1]), -1),
        torch.stack((R[..., 2, 1] - R[..., 1, 2], 1 + m00 - m11 - m22, R[..., 0, 1] + R[..., 1, 0],
                     R[..., 0, 2] + R[..., 2, 0]), -1),
        torch.stack((R[..., 0, 2] - R[..., 2, 0], R[..., 0, 1] + R[..., 1, 0], 1 - m00 + m11 - m22,
                     R[..., 1, 2] + R[..., 2, 1]), -1),
        torch.stack((R[..., 1, 0] - R[..., 0, 1], R[..., 0, 2] + R[..., 2, 0], R[..., 1, 2] + R[..., 2, 1],
                     1 - m00 - m11 + m22), -1)), -2)  # [..., 4 cases, 4]
    which = torch.stack((tr, m00, m11, m22), -1).argmax(-1)
    q = torch.gather(cands, -2, which[..., None, None].expand(*which.shape, 1, 4)).squeeze(-2)
    q = q / torch.linalg.vector_norm(q, dim=-1, keepdim=True)
    return torch.where(q[..., :1] < 0, -q, q)


def op_args(op, viewmats, viewmats_end, shutter):
    """(code, viewmats_end or None) for the ops, checked; constants (never
    differentiated). Two tensor ops at most: the kernels pack the poses."""
    if shutter not in SHUTTERS:
        Ck.fail(op, f"`shutter` must be one of {tuple(SHUTTERS)}, got {shutter!r}")
    if viewmats_end is None or shutter == "global":
        return 0, None
    C = viewmats.shape[0]
    Ck.shape(op, "viewmats_end", viewmats_end, (C, 4, 4), "[C, 4, 4] (C = viewmats.shape[0])")
    Ck.real(op, "viewmats_end", viewmats_end, viewmats, "viewmats")
    Ck.device(op, "viewmats_end", viewmats_end, viewmats, "viewmats")
    return SHUTTERS[shutter], viewmats_end.detach().contiguous()


def pack(op, viewmats, viewmats_end, shutter):
    """(code, packed poses [C, 16] or None), for the reference twin: what
    the kernels' rs_pack computes per thread."""
    code, viewmats_end = op_args(op, viewmats, viewmats_end, shutter)
    if viewmats_end is None:
        return 0, None
    C = viewmats.shape[0]
    with torch.no_grad():
        out = viewmats.new_zeros((C, PARAMS))
        for k, V in ((0, viewmats.detach()), (1, viewmats_end.detach())):
            R, t = V[:, :3, :3], V[:, :3, 3]
            Rw = R.transpose(-1, -2)  # sensor -> world
            out[:, 4 * k:4 * k + 4] = rotmat_to_quat(Rw)
            out[:, 8 + 3 * k:11 + 3 * k] = -torch.einsum("cji,cj->ci", R, t)
        dot = (out[:, 0:4] * out[:, 4:8]).sum(-1, keepdim=True)
        out[:, 4:8] = torch.where(dot < 0, -out[:, 4:8], out[:, 4:8])  # the end rotation in the start's hemisphere
    return code, out


def pose_at(sp, tau):
    """World -> sensor matrices [..., 4, 4] at times tau [...] of sensors
    whose packed parameters sp broadcast against tau ([..., 16])."""
    q = Q.normalize(Q.slerp(sp[..., 0:4], sp[..., 4:8], tau))
    Rw = Q.to_rotmat(q)
    c = (1 - tau)[..., None] * sp[..., 8:11] + tau[..., None] * sp[..., 11:14]
    R = Rw.transpose(-1, -2)
    t = -torch.einsum("...ij,...j->...i", R, c)
    V = torch.zeros(*tau.shape, 4, 4, dtype=sp.dtype, device=sp.device)
    V[..., :3, :3] = R
    V[..., :3, 3] = t
    V[..., 3, 3] = 1
    return V


def tau_of_pixel(code, uv, width, height):
    """A camera pixel's relative time (SPEC 7), clamped to [0, 1]; uv [..., 2]."""
    u, v = uv[..., 0], uv[..., 1]
    hm, wm = float(height - 1), float(width - 1)
    if code == 1:
        tau = torch.floor(v) / hm if hm > 0 else torch.zeros_like(v)
    elif code == 2:
        tau = (hm - torch.floor(v)) / hm if hm > 0 else torch.zeros_like(v)
    elif code == 3:
        tau = torch.floor(u) / wm if wm > 0 else torch.zeros_like(u)
    else:
        tau = (wm - torch.floor(u)) / wm if wm > 0 else torch.zeros_like(u)
    tau = torch.nan_to_num(tau, nan=0.0)
    return tau.clamp(0, 1)
