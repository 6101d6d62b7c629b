"""benchmarks/bench_ncore_step.py --smoke on the CPU: it writes a tiny
five-camera + lidar clip (benchmarks/make_ncore_clip.py), times
examples/train_ncore.py --time-only on it in a fresh process and reports
the time to the first step by part and the steady step."""
import json

import pytest

from run_scripts import run_benchmark

pytest.importorskip("ncore")


def test_bench_ncore_step_smoke(tmp_path):
    out = tmp_path / "m.json"
    r = run_benchmark("bench_ncore_step.py", "--smoke", "--workdir", tmp_path, "--json", out, timeout=None)
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads(out.read_text())
    tt = m["time_to_first_step_s"]
    parts = ("imports", "cuda_init", "optimizer_import", "metadata", "initial_gaussians", "first_frames", "first_step")
    assert all(tt[k] >= 0 for k in parts) and tt["imports"] > 0 and tt["metadata"] > 0 and tt["first_step"] > 0
    assert sorted(tt) == sorted(parts + ("total",)) and tt["total"] == pytest.approx(sum(tt[k] for k in parts))
    assert m["steps"] == 6 and m["step_ms_median"] > 0 and m["clip_written_s"] > 0
    assert sorted(m["cameras"]) == sorted(["camera_front_left", "camera_front", "camera_front_right",
                                           "camera_side_left", "camera_side_right"])
    assert m["cameras"]["camera_front"] == [96, 64, 6] and m["cameras"]["camera_side_left"] == [96, 44, 6]
    assert m["lidar"] == [16, 180, 6]
    assert 0 < m["frames_decoded"] <= 6 * 2  # a camera frame and a sweep per step, the repeats cached
    for k in parts + ("total",):  # the table prints every part
        assert k in r.stdout or k == "total"
    assert "time to first step (total)" in r.stdout and "steady step, median of 5 (host)" in r.stdout
