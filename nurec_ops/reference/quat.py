"""Quaternion math in PyTorch for the reference ops: the same formulas as
csrc/math/quat_generic.h, differentiated by autograd. Quaternions are
(w, x, y, z) in the last dimension."""
import torch

SLERP_MIN_ANGLE = 1e-6  # rad, below which slerp falls back to linear (SPEC)


def normalize(q):
    """q / |q| without overflow (scaled by the largest component first); a
    zero quaternion gives the identity with zero gradient."""
    m = q.abs().amax(-1, keepdim=True)
    ok = m > 0
    s = q / torch.where(ok, m, torch.ones_like(m))
    ident = torch.zeros_like(q)
    ident[..., 0] = 1
    s = torch.where(ok, s, ident)
    return s / torch.linalg.vector_norm(s, dim=-1, keepdim=True)


def mul(a, b):
    """Hamilton product a ⊗ b."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack(
        (
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ),
        -1,
    )


def to_rotmat(q):
    """[..., 3, 3] rotation matrix of a unit quaternion."""
    w, x, y, z = q.unbind(-1)
    return torch.stack(
        (
            1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
        ),
        -1,
    ).reshape(q.shape[:-1] + (3, 3))


def slerp(ql, qr, a):
    """Unnormalized slerp of unit quaternions in one hemisphere, a [...]: the
    angle from 2 atan2(|ql - qr|, |ql + qr|) (exact for tiny angles); linear
    below SLERP_MIN_ANGLE. Both branches are computed on safe values so that
    no NaN reaches the gradient of the branch taken."""
    nu = torch.linalg.vector_norm(ql - qr, dim=-1)
    nv = torch.linalg.vector_norm(ql + qr, dim=-1)
    small = 2 * torch.atan2(nu, nv) < SLERP_MIN_ANGLE
    # safe inputs for the slerp branch where the angle is tiny
    d = torch.where(small[..., None], torch.ones_like(ql), ql - qr)
    th = 2 * torch.atan2(torch.linalg.vector_norm(d, dim=-1), nv)
    s = torch.sin(th)
    cl = torch.where(small, 1 - a, torch.sin((1 - a) * th) / s)
    cr = torch.where(small, a, torch.sin(a * th) / s)
    return cl[..., None] * ql + cr[..., None] * qr
