"""examples/figures.py: labelled panels (Pillow), the loss plot (matplotlib)
and their fallbacks to examples/png.py where a library is missing."""
import os
import struct
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
import figures  # noqa: E402


def _png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


@pytest.mark.parametrize("missing", [None, "PIL", "matplotlib"])
def test_panels_and_plot(tmp_path, monkeypatch, missing):
    if missing is None:
        pytest.importorskip("PIL")
        pytest.importorskip("matplotlib")
    else:
        monkeypatch.setitem(sys.modules, missing, None)  # the import fails: the fallback writes the file
    img = torch.rand(12, 20, 3)
    figures.save_panels(str(tmp_path / "p.png"), [("a", img), ("b", img)], scale=2)
    w, h = _png_size(tmp_path / "p.png")
    assert w * h >= 2 * 40 * 24  # both panels, side by side (Pillow) or stacked (fallback)
    figures.plot_losses(str(tmp_path / "l.png"), [("total", [1.0, 0.5, 0.25], (0.0, 0.0, 0.0))])
    assert _png_size(tmp_path / "l.png") == (640, 400)
    c = figures.colormap(torch.rand(5, 7), 0.0, 1.0, invalid=torch.zeros(5, 7, dtype=torch.bool))
    assert c.shape == (5, 7, 3) and 0 <= float(c.min()) and float(c.max()) <= 1


def test_rig_sweep_replot(tmp_path):
    """benchmarks/bench_rig_step.py --replot draws the sweep's plot from its
    saved data (docs/rig_step_sweep.json, the README's figure) without a
    GPU: three panels of step time and peak memory."""
    pytest.importorskip("matplotlib")
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    data = os.path.join(root, "docs", "rig_step_sweep.json")
    out = tmp_path / "sweep.png"
    subprocess.run([sys.executable, os.path.join(root, "benchmarks", "bench_rig_step.py"), "--replot", data,
                    "--plot", str(out)], check=True, cwd=root)
    w, h = _png_size(out)
    assert w > 2 * h  # three panels side by side
