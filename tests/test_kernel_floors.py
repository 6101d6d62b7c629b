"""benchmarks/kernel_floors.py on the CPU: the counts through the CPU ops and
each kernel's floor; the camera's fwd+bwd floor lands where the kernels'
byte and FLOP counts put it for a 1080p camera on the H200 (~0.25 ms)."""
from run_scripts import run_benchmark

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


def test_stage_durations_count_every_launch(monkeypatch):
    """kernel_floors' measured column sums every launch of a stage's kernels
    in a call (a radix sort's passes, the parts' combine's two launches):
    an earlier version took one launch's median per kernel name, and every
    binning multiple it reported was low. The profiler's events are
    replaced by a known list per call: 3 sort passes of 10, 20 and 30 us,
    one emission of 5 us, two combine launches of 4 us and a walk of 100."""
    import os
    monkeypatch.syspath_prepend(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
    import kernel_floors
    import timing
    per_call = [("DeviceRadixSortOnesweepKernel", 10.0), ("DeviceRadixSortOnesweepKernel", 20.0),
                ("DeviceRadixSortOnesweepKernel", 30.0), ("emit_kernel", 5.0), ("rc_combine_kernel_f32", 4.0),
                ("rc_combine_kernel_f32", 4.0), ("rc_forward_kernel_f32", 100.0)]

    def fake_events(fn, calls, warmup, activities=None):  # `calls` calls of the list above
        events, t = [], 0.0
        for _ in range(calls):
            for name, d in per_call:
                events.append((t, t + d, name))
                t += d + 1.0
        return events
    monkeypatch.setattr(timing, "_device_events", fake_events)
    totals = timing.kernel_totals(lambda: None, calls=2, warmup=0)
    assert totals["DeviceRadixSortOnesweepKernel"] == 60.0 and totals["rc_combine_kernel_f32"] == 8.0
    monkeypatch.setattr(kernel_floors.bc, "make_step", lambda sc, backward: (lambda: None))
    monkeypatch.setattr(kernel_floors.torch.cuda, "synchronize", lambda: None)
    d = kernel_floors.durations({}, lidar=False)
    assert d["binning"] == 65.0 and d["forward walk"] == 108.0, d
