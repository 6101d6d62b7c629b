"""benchmarks/kernel_floors.py on the CPU: the street's counts through the
CPU op and each camera kernel's floor; the fwd+bwd floor lands where issue
19 puts it for a 1080p camera on the H200 (~0.25 ms)."""
from conftest import run_benchmark


def test_kernel_floors_street():
    r = run_benchmark("kernel_floors.py", "--scenes", "street")
    assert r.returncode == 0, r.stderr[-3000:]
    rows = {line.split("|")[0].strip(): [c.strip() for c in line.split("|")] for line in r.stdout.splitlines()
            if "|" in line}
    for k in ("projection", "binning", "forward walk", "backward walk", "projection backward"):
        assert float(rows[k][4]) > 0, k
    assert rows["backward walk"][3] == "flops" and rows["binning"][3] == "bytes"
    assert 150 < float(rows["fwd+bwd"][4]) < 400


def test_kernel_floors_lidar():
    """The lidar's counts through its CPU op (a quarter of the street
    sensor's rows and columns): every kernel has a floor, the walks are bound
    by their flops (the evaluations), the binning by its bytes."""
    r = run_benchmark("kernel_floors.py", "--scenes", "lidar", "--lidar-rows", "32", "--lidar-cols", "900")
    assert r.returncode == 0, r.stderr[-3000:]
    rows = {line.split("|")[0].strip(): [c.strip() for c in line.split("|")] for line in r.stdout.splitlines()
            if "|" in line}
    for k in ("projection", "binning", "forward walk", "backward walk", "projection backward"):
        assert float(rows[k][4]) > 0, k
    assert rows["forward walk"][3] == "flops" and rows["backward walk"][3] == "flops"
    assert rows["binning"][3] == "bytes"
    assert "ray-Gaussian evaluations" in r.stdout
