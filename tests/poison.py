"""Memory a kernel forgets to write shows up as NaN: poisoned outputs and a
poisoned allocator, and the check that outputs are finite."""
import torch

def poison(t, value=None):
    """Fills ``t`` in place with a value no kernel should ever produce (NaN for
    floating tensors, -12345 / True for integer / bool) and returns it."""
    if value is None:
        if t.is_floating_point():
            value = float("nan")
        elif t.dtype == torch.bool:
            value = True
        else:
            value = -12345
    with torch.no_grad():
        t.fill_(value)
    return t


def poison_allocator(device, nbytes=1 << 22):
    """For ops that allocate their outputs: fills ``nbytes`` of freshly
    allocated memory with NaN and frees it, so that the caching allocator (CUDA)
    or malloc (CPU) is likely to hand those bytes to the next allocation; an
    output element the kernel forgets to write then reads as NaN. Call right
    before the op and check that its outputs are finite."""
    device = torch.device(device)
    if device.type == "meta":
        return
    chunks = []
    for size in (nbytes, nbytes // 16, 4096, 256, 64):
        n = max(1, size // 8)
        chunks.append(poison(torch.empty(n, dtype=torch.float64, device=device)))
    del chunks


def assert_all_finite(*tensors, msg=""):
    for i, t in enumerate(tensors):
        if t.is_floating_point():
            bad = ~torch.isfinite(t)
            assert not bad.any(), f"{msg}: output {i} has {int(bad.sum())} non-finite elements"
