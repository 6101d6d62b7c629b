"""benchmarks/bench_adam.py --smoke on the CPU: the rig's gradients, the
visible fraction and the Adam variants' table (the H200 run is in
benchmarks/RESULTS.md). It needs the real rig's calibration in
../shared/data/ (skipped without it)."""
import re

import shared_data
from run_scripts import run_benchmark


def test_bench_adam_smoke():
    shared_data.require(shared_data.PINHOLE_RIG)  # the rig's cameras (bench_rig_step.py)
    r = run_benchmark("bench_adam.py", "--smoke")
    assert r.returncode == 0, r.stderr[-3000:]
    m = re.search(r"Adam over ([\d,]+) Gaussians \+ key poses: ([\d,]+) float32 values.*visible fraction ([\d.]+)",
                  r.stdout)
    assert m, r.stdout
    n, values, visible = int(m.group(1).replace(",", "")), int(m.group(2).replace(",", "")), float(m.group(3))
    assert values > 59 * n  # 59 values per Gaussian (SH 3) and the key poses
    assert 0 < visible <= 1
    rows = {line.split("|")[0].strip(): line for line in r.stdout.splitlines() if "|" in line}
    assert "foreach (default)" in rows and "fused" in rows
    assert all(float(rows[k].split("|")[1]) > 0 for k in ("foreach (default)", "fused"))
