"""Writing PNG images and a simple line plot with nothing but torch, zlib and
struct (no imaging or plotting dependency)."""
import math
import struct
import zlib

import torch


def write_png(path, image):
    """Writes ``image`` ([H,W,3] or [H,W] float in [0,1], or uint8) as an
    8-bit RGB PNG."""
    img = image.detach().cpu()
    if img.dim() == 2:
        img = img[..., None].expand(*img.shape, 3)
    if img.dtype != torch.uint8:
        img = (img.float().nan_to_num(0.0).clamp(0, 1) * 255 + 0.5).to(torch.uint8)
    H, W, _ = img.shape
    rows = torch.cat([torch.zeros(H, 1, dtype=torch.uint8), img[..., :3].reshape(H, W * 3)], 1)
    raw = rows.contiguous().numpy().tobytes() if _has_numpy() else bytes(rows.flatten().tolist())

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 6)))
        f.write(chunk(b"IEND", b""))


def _has_numpy():
    try:
        import numpy  # noqa: F401
        return True
    except ImportError:
        return False


def colormap(x, lo=None, hi=None, invalid=None):
    """Maps a [H,W] tensor to an RGB [H,W,3] image (a blue-green-yellow
    ramp); ``invalid`` [H,W] bool pixels are black."""
    x = x.detach().float().cpu()
    lo = float(x.min()) if lo is None else lo
    hi = float(x.max()) if hi is None else hi
    t = ((x - lo) / max(hi - lo, 1e-12)).clamp(0, 1)
    r = (1.5 * t - 0.5).clamp(0, 1)
    gch = (1.2 * t).clamp(0, 1) * (1 - 0.3 * t)
    b = (1 - 1.6 * t).clamp(0, 1) * 0.8 + 0.2 * (1 - t)
    img = torch.stack([r, gch, b], -1)
    if invalid is not None:
        img[invalid.cpu()] = 0
    return img


def upscale(img, factor):
    """Nearest-neighbour enlargement of an [H,W,C] image."""
    return img.repeat_interleave(factor, 0).repeat_interleave(factor, 1)


def stack_rows(images, gap=2):
    """Stacks [H,W_i,3] images vertically (padded to the widest), white gaps."""
    W = max(i.shape[1] for i in images)
    out = []
    for i in images:
        pad = torch.ones(i.shape[0], W - i.shape[1], 3)
        out += [torch.cat([i.float().cpu(), pad], 1), torch.ones(gap, W, 3)]
    return torch.cat(out[:-1], 0)


# A 3x5 pixel font for the plot's labels (digits, a few letters, punctuation).
_FONT = {
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111", "3": "111001111001111",
    "4": "101101111001001", "5": "111100111001111", "6": "111100111101111", "7": "111001010010010",
    "8": "111101111101111", "9": "111101111001111", ".": "000000000000010", "-": "000000111000000",
    "e": "000111101110111", " ": "000000000000000", "a": "000011101101011", "c": "000111100100111",
    "d": "001011101101011", "i": "010000010010010", "l": "110010010010111", "m": "000111111101101",
    "n": "000110101101101", "o": "000111101101111", "p": "000111101111100", "r": "000111100100100",
    "s": "000011110001110", "t": "010111010010011", "+": "000010111010000", "=": "000111000111000",
    "b": "100100111101111", "f": "011010111010010", "g": "011101011001110", "h": "100100111101101",
    "j": "001000001001110", "k": "100101110101101", "q": "000111101111001", "u": "000101101101111",
    "v": "000101101101010", "w": "000101101111111", "x": "000101010010101", "y": "000101111001111",
    "z": "000111011110111", "%": "101001010100101", "/": "001001010100100", ":": "000010000010000",
    "(": "010100100100010", ")": "010001001001010", ",": "000000000010100",
    "_": "000000000000111", "#": "101111101111101", ">": "100010001010100", "<": "001010100010001",
}


def _text(canvas, x, y, s, colour, scale=2):
    """Draws ``s`` (lower case; upper case is drawn as lower case) at (x, y)."""
    H, W, _ = canvas.shape
    for ch in s.lower():
        bits = _FONT.get(ch, _FONT[" "])
        for k, b in enumerate(bits):
            if b == "1":
                yy, xx = y + (k // 3) * scale, x + (k % 3) * scale
                canvas[max(yy, 0):min(yy + scale, H), max(xx, 0):min(xx + scale, W)] = torch.tensor(colour, dtype=torch.float32)
        x += 4 * scale


def _line(canvas, x0, y0, x1, y1, colour):
    n = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
    xs = torch.linspace(x0, x1, n).round().long().clamp(0, canvas.shape[1] - 1)
    ys = torch.linspace(y0, y1, n).round().long().clamp(0, canvas.shape[0] - 1)
    c = torch.tensor(colour, dtype=torch.float32)
    canvas[ys, xs] = c
    canvas[(ys + 1).clamp(max=canvas.shape[0] - 1), xs] = c


def plot_curves(path, curves, width=640, height=400, log_y=True):
    """Writes a PNG line plot of ``curves`` = [(label, values list, rgb)]
    over the step index, log-scale y with labelled decades (or min/max), a
    legend in the top right."""
    canvas = torch.ones(height, width, 3)
    left, right, top, bottom = 70, 20, 20, 40
    pw, ph = width - left - right, height - top - bottom
    vals = [v for _, ys, _ in curves for v in ys if math.isfinite(v) and (v > 0 or not log_y)]
    if not vals:
        write_png(path, canvas)
        return
    tr = (lambda v: math.log10(v)) if log_y else (lambda v: v)  # noqa: E731
    lo, hi = tr(min(vals)), tr(max(vals))
    if log_y:
        lo, hi = math.floor(lo * 4) / 4, math.ceil(hi * 4) / 4
    if hi - lo < 1e-9:
        hi = lo + 1
    n = max(len(ys) for _, ys, _ in curves)
    X = lambda i: left + pw * i / max(n - 1, 1)  # noqa: E731
    Y = lambda v: top + ph * (1 - (tr(v) - lo) / (hi - lo))  # noqa: E731
    grey = (0.85, 0.85, 0.85)
    if log_y:
        for e in range(math.floor(lo), math.ceil(hi) + 1):
            for m in (1, 2, 5):
                v = m * 10.0 ** e
                if lo <= tr(v) <= hi:
                    y = Y(v)
                    _line(canvas, left, y, left + pw, y, grey)
                    _text(canvas, 4, int(y) - 5, f"{v:.0e}" if (e < -2 or e > 3) else f"{v:g}", (0.2, 0.2, 0.2))
    else:
        for v in (10 ** lo, 10 ** hi):
            _text(canvas, 4, int(Y(v)) - 5, f"{v:.3g}", (0.2, 0.2, 0.2))
    for k in range(6):
        i = round((n - 1) * k / 5)
        x = X(i)
        _line(canvas, x, top + ph, x, top + ph + 4, (0, 0, 0))
        _text(canvas, int(x) - 6, top + ph + 10, str(i), (0.2, 0.2, 0.2))
    _text(canvas, left + pw // 2 - 16, height - 14, "step", (0, 0, 0))
    _line(canvas, left, top, left, top + ph, (0, 0, 0))
    _line(canvas, left, top + ph, left + pw, top + ph, (0, 0, 0))
    for j, (label, ys, colour) in enumerate(curves):
        pts = [(X(i), Y(v)) for i, v in enumerate(ys) if math.isfinite(v) and (v > 0 or not log_y)]
        for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
            _line(canvas, x0, y0, x1, y1, colour)
        lx, ly = left + pw - 150, top + 10 + 16 * j
        _line(canvas, lx, ly + 4, lx + 20, ly + 4, colour)
        _text(canvas, lx + 26, ly, label, colour)
    write_png(path, canvas)
