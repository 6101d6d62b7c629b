"""NUREC_TEST_TIMES (conftest.py): each finished test's seconds, outcome and
id appended as it finishes, so that a run killed at its time limit (the
device's GPU shards under `timeout`) still says what it ran; and
benchmarks/device/test_times.py, which sums such files."""
import os
import signal
import subprocess
import sys
import time

from run_scripts import REPO, repo_env

sys.path.insert(0, os.path.join(REPO, "benchmarks", "device"))
import test_times  # noqa: E402

FILE = "tests/test_collect.py"  # 64 quick CPU tests, and GPU ones that skip without a GPU
SELECT = ["-m", "not gpu"]


def pytest_args(*extra):
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", FILE, *SELECT, *extra]


def collected():
    r = subprocess.run(pytest_args("--collect-only"), cwd=REPO, env=repo_env(), capture_output=True, text=True,
                       timeout=300)
    return {line for line in r.stdout.splitlines() if "::" in line}


def lines_of(path):
    with open(path) as f:
        text = f.read()
    assert text == "" or text.endswith("\n"), "a partial line"
    return [line.split("\t") for line in text.splitlines()]


def test_every_finished_test_once_with_its_outcome(tmp_path):
    times = tmp_path / "times.tsv"
    r = subprocess.run(pytest_args("-rA"), cwd=REPO, env=repo_env(NUREC_TEST_TIMES=str(times)),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:]
    passed = {line.split(" ", 1)[1] for line in r.stdout.splitlines() if line.startswith("PASSED ")}
    rows = lines_of(times)
    assert len(passed) > 10 and all(len(row) == 3 for row in rows)
    ids = [row[2] for row in rows]
    assert len(ids) == len(set(ids))  # each test once (its setup, call and teardown in one line)
    assert {row[2] for row in rows if row[1] == "passed"} == passed
    assert {row[1] for row in rows} <= {"passed", "skipped"}
    assert all(float(row[0]) >= 0 for row in rows)


def test_a_killed_run_leaves_whole_lines(tmp_path):
    times = tmp_path / "times.tsv"
    p = subprocess.Popen(pytest_args(), cwd=REPO, env=repo_env(NUREC_TEST_TIMES=str(times)),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and p.poll() is None:
            if times.exists() and len(lines_of(times)) >= 3:
                break
            time.sleep(0.02)
    finally:
        os.killpg(p.pid, signal.SIGKILL)  # as `timeout -s KILL` would, mid-run
        p.wait()
    rows = lines_of(times)
    assert len(rows) >= 3
    known = collected()
    assert len(rows) < len(known), "the run finished before the kill: the test saw no kill"
    for sec, outcome, nid in rows:
        assert float(sec) >= 0 and outcome in ("passed", "skipped") and nid in known


def test_summary_sums_by_function(tmp_path):
    a, b = tmp_path / "a.tsv", tmp_path / "b.tsv"
    a.write_text("1.5\tpassed\tt.py::f[x]\n2.0\tfailed\tt.py::f[y]\nnot a line\n")
    b.write_text("3.0\tpassed\tt.py::g\n0.25\tskipped\tt.py::f[z]\n4.0\tpassed\n")  # the last: a missing field
    rows = test_times.read([str(a), str(b)])
    assert len(rows) == 4
    assert test_times.by_function(rows) == [("t.py::f", 3, 3.75), ("t.py::g", 1, 3.0)]
    text = test_times.summary(rows, top=1)
    assert text[0] == "4 tests in 6.8 s of test time (1 failed, 2 passed, 1 skipped)"
    assert "t.py::f" in text[2] and "3 tests" in text[2]
    assert text[-1].strip().startswith("3.0 s") and text[-1].endswith("t.py::g")
