"""benchmarks/kernel_floors.py on the CPU: the counts through the CPU ops and
each kernel's floor; the camera's fwd+bwd floor lands where issue 19 puts it
for a 1080p camera on the H200 (~0.25 ms)."""
from conftest import run_benchmark

STAGES = ("projection", "binning", "forward walk", "backward walk", "projection backward")


def floors_table(*args):
    """The benchmark's stdout and its table's rows by kernel (cells stripped)."""
    r = run_benchmark("kernel_floors.py", *args)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = {line.split("|")[0].strip(): [c.strip() for c in line.split("|")] for line in r.stdout.splitlines()
            if "|" in line}
    for k in STAGES:
        assert float(rows[k][4]) > 0, k
    return r.stdout, rows


def test_kernel_floors_street():
    _, rows = floors_table("--scenes", "street")
    assert rows["backward walk"][3] == "flops" and rows["binning"][3] == "bytes"
    assert 150 < float(rows["fwd+bwd"][4]) < 400


def test_kernel_floors_lidar():
    """The lidar's counts through its CPU op (a quarter of the street
    sensor's rows and columns): the walks are bound by their flops (the
    evaluations), the binning by its bytes."""
    out, rows = floors_table("--scenes", "lidar", "--lidar-rows", "32", "--lidar-cols", "900")
    assert rows["forward walk"][3] == "flops" and rows["backward walk"][3] == "flops"
    assert rows["binning"][3] == "bytes"
    assert "ray-Gaussian evaluations" in out
