"""Images, plots and progress for the examples, through the ecosystem's
libraries: Pillow for labelled image panels, matplotlib for the loss
curves, tqdm for progress. Each falls back to examples/png.py's
dependency-free writer (and a plain progress line) only where its library
is missing, and says so once."""
import sys

import torch

import png

_WARNED = set()


def _fallback(what, lib):
    if lib not in _WARNED:
        _WARNED.add(lib)
        sys.stderr.write(f"figures: {lib} is not installed: {what} written by examples/png.py instead\n")


def _to_uint8(img):
    img = img.detach().cpu()
    if img.dim() == 2:
        img = img[..., None].expand(*img.shape, 3)
    if img.dtype != torch.uint8:
        img = (img.float().nan_to_num(0.0).clamp(0, 1) * 255 + 0.5).to(torch.uint8)
    return img[..., :3].contiguous()


def save_panels(path, panels, scale=1):
    """Writes the labelled images ``panels`` ([(label, [H, W, 3] in [0, 1])])
    side by side as one PNG, each upscaled ``scale`` times (nearest)."""
    try:
        from PIL import Image, ImageDraw
    except ImportError:
        _fallback("image panels", "Pillow")
        png.write_png(path, png.stack_rows([png.upscale(img, scale) for _, img in panels]))
        return
    ims = [Image.fromarray(_to_uint8(img).numpy()).resize((img.shape[1] * scale, img.shape[0] * scale),
                                                           Image.NEAREST) for _, img in panels]
    label_h, gap = 18, 4
    W = sum(im.width for im in ims) + gap * (len(ims) - 1)
    H = max(im.height for im in ims) + label_h
    canvas = Image.new("RGB", (W, H), (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    x = 0
    for (label, _), im in zip(panels, ims):
        canvas.paste(im, (x, label_h))
        draw.text((x + 4, 3), label, fill=(0, 0, 0))
        x += im.width + gap
    canvas.save(path)


def plot_losses(path, curves, title="training loss"):
    """Loss curves ([(name, values, rgb)]) on a log scale, 640 x 400 PNG."""
    try:
        _plot_losses_matplotlib(path, curves, title)
    except ImportError:  # matplotlib, or the Pillow its PNG writer needs
        _fallback("the loss plot", "matplotlib")
        png.plot_curves(path, curves)


def _plot_losses_matplotlib(path, curves, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    try:
        for name, values, rgb in curves:
            ax.plot(range(len(values)), values, label=name, color=rgb, linewidth=1.2)
        ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)


class progress:
    """A progress bar over ``total`` steps (tqdm; a plain line without it):
    ``bar.update(n)`` with the number of steps done so far."""

    def __init__(self, total, enabled):
        self.bar, self.n, self.plain = None, 0, None
        if not enabled:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            _fallback("progress", "tqdm")
            self.plain = total
            return
        self.bar = tqdm(total=total, unit="step", leave=True, file=sys.stderr)

    def update(self, n, force=False):
        if self.bar is not None:
            self.bar.update(n - self.n)
            self.n = n
            if n >= self.bar.total:
                self.bar.close()
        elif self.plain is not None and (force or n >= self.plain or n % 50 == 0):
            sys.stderr.write(f"  {n}/{self.plain} steps\n")


def colormap(x, lo, hi, invalid=None):
    """[H, W] values -> [H, W, 3] colours in [0, 1] (matplotlib's turbo map;
    ``invalid`` cells black)."""
    try:
        from matplotlib import colormaps
    except ImportError:
        _fallback("the colour map", "matplotlib")
        return png.colormap(x, lo, hi, invalid=invalid)
    t = ((x.detach().cpu().double() - lo) / max(hi - lo, 1e-12)).clamp(0, 1).nan_to_num(0.0)
    rgb = torch.from_numpy(colormaps["turbo"](t.numpy())[..., :3]).float()
    if invalid is not None:
        rgb[invalid.cpu()] = 0.0
    return rgb
